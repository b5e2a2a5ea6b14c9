"""`mens serve --engine llamacpp`: the same OpenAI-compatible API (serve/app.py) over llama.cpp,
through llama-cpp-python, for CPU users.

MODEL_OR_RUN is a .gguf file, or a run or model dir exported to GGUF first (mens.export.export)
and cached beside it as `<dir>.<quant>.gguf` (re-exported when a file of the dir is newer; in
the mens cache when that folder is not writable).

The engine has the mens engine's interface (submit, cancel, alive, stop, snapshot, and the
tokenizer the app templates and tokenises with), and its queue, cancellation and stop handling
are the mens engine's own (inherited from serve/engine.py): one background thread owns the
llama.cpp context and generates one choice at a time — llama-cpp-python has no batching of
independent sequences — prompt prefixes reused from the KV cache. Tokens are counted here, so
`max_tokens`, stop strings, the end tokens (llama.cpp's end-of-generation set) and usage mean
what they mean with the mens engine. Sampling: temperature and top_p only (llama.cpp's top-k,
min-p and repeat penalty off), seeded per choice (seed + i) as the mens engine does.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import random
import threading
import time
from collections import Counter, deque
from pathlib import Path
from types import SimpleNamespace

from mens.errors import MensError
from mens.progress import say
from mens.serve.engine import Engine, _Seq

MAX_CONTEXT = 8192   # llama.cpp allocates the KV cache for the whole window up front
INSTALL = "pip install 'mens[export]'"


def check_available() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise MensError("--engine llamacpp needs llama-cpp-python", "--engine", INSTALL)


# ---------------------------------------------------------------- MODEL_OR_RUN → a GGUF file

def check_source(source: str | Path) -> Path:
    """A GGUF file (by its magic) or a directory; anything else is a one-line error."""
    src = Path(source)
    if src.is_file():
        with src.open("rb") as f:
            if f.read(4) != b"GGUF":
                raise MensError("not a GGUF file", str(src), "give a .gguf file, a run dir or a model dir")
    elif not src.is_dir():
        raise MensError("no such file or directory", str(src),
                        "--engine llamacpp serves a local .gguf file, run dir or model dir (no hub ids)")
    return src


def resolve_gguf(source: str | Path, quant: str = "f16") -> Path:
    """The GGUF to serve: `source` itself, or its export (cached, see the module doc)."""
    src = check_source(source)
    if src.is_file():
        return src
    out = cached_gguf_path(src, quant)
    if out.is_file() and out.stat().st_mtime >= _newest(src):
        say(f"serve: using {out} (the GGUF exported from {src}; delete it to export again)")
        return out
    from mens.export.export import export

    say(f"serve: exporting {src} to GGUF ({quant}) → {out}")
    out.unlink(missing_ok=True)
    export(src, out, quant=quant)
    return out


def cached_gguf_path(src: Path, quant: str) -> Path:
    src = src.resolve()
    beside = src.parent / f"{src.name}.{quant}.gguf"
    if os.access(src.parent, os.W_OK):
        return beside
    from mens.export.gguf import cache_root

    digest = hashlib.sha256(str(src).encode()).hexdigest()[:12]
    return cache_root() / "serve" / f"{src.name}-{digest}.{quant}.gguf"


def _newest(src: Path) -> float:
    """The newest modification time of the files the export reads (the run's, its base's)."""
    from mens.hf import adapter_base, is_adapter_run

    dirs = [src] + ([Path(adapter_base(src))] if is_adapter_run(src) else [])
    return max((p.stat().st_mtime for d in dirs if d.is_dir() for p in d.iterdir() if p.is_file()), default=0.0)


def trained_context(gguf: str | Path) -> int | None:
    """The context length the GGUF says its model was trained with (`<arch>.context_length`)."""
    from gguf import GGUFReader

    reader = GGUFReader(str(gguf))
    arch = reader.get_field("general.architecture")
    field = arch and reader.get_field(f"{arch.contents()}.context_length")
    return int(field.contents()) if field else None


# ---------------------------------------------------------------- the tokenizer the app uses

class GGUFTokenizer:
    """What serve/app.py asks of a tokenizer, over the GGUF's own vocabulary and chat template
    (ChatML when the file has none, as `mens train` formats chats), rendered by transformers'
    template renderer as `apply_chat_template` does."""

    def __init__(self, llm):
        from mens.hf import CHATML_TEMPLATE

        self.llm = llm
        self.chat_template = llm.metadata.get("tokenizer.chat_template") or CHATML_TEMPLATE
        model = llm._model
        self.specials = {name: model.token_get_text(tid) for name, tid in
                         (("bos_token", model.token_bos()), ("eos_token", model.token_eos())) if tid >= 0}

    def apply_chat_template(self, messages, tools=None, tokenize=False, add_generation_prompt=True, **kwargs):
        from transformers.utils.chat_template_utils import render_jinja_template

        rendered, _ = render_jinja_template([messages], tools=tools, chat_template=self.chat_template,
                                            add_generation_prompt=add_generation_prompt,
                                            **{**self.specials, **kwargs})
        return self(rendered[0], add_special_tokens=False).input_ids if tokenize else rendered[0]

    def __call__(self, text: str, add_special_tokens: bool = True):
        # special=True: <|im_start|> and the like in the text are their tokens, as with transformers;
        # add_bos only adds BOS when the model asks for one (llama.cpp's add_special)
        return SimpleNamespace(input_ids=self.llm.tokenize(text.encode("utf-8"), add_bos=add_special_tokens,
                                                           special=True))


def cpu_threads() -> int:
    """OMP_NUM_THREADS when set (as torch reads it, so both engines take the same share), else
    every core this process may run on."""
    given = os.environ.get("OMP_NUM_THREADS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class _EndTokens:
    """`token in eos_ids` for llama.cpp's end-of-generation set (EOS, EOT, <|im_end|> …)."""

    def __init__(self, vocab):
        import llama_cpp

        self.vocab, self.is_eog = vocab, llama_cpp.llama_vocab_is_eog

    def __contains__(self, token: int) -> bool:
        return bool(self.is_eog(self.vocab, token))


# ---------------------------------------------------------------- the engine

class LlamaCppEngine(Engine):
    """serve/engine.py's Engine with llama.cpp generating: the queue (submit_all, cancel, the
    429 bound), liveness, stop, stats and the per-token handling (_accept: end tokens, stop
    strings, max_tokens, the context window, streaming with held-back stop prefixes) are
    inherited; __init__ sets the attributes those use, _schedule and _text are llama.cpp's."""

    def __init__(self, gguf: str | Path, *, queue_size: int = 64, n_ctx: int | None = None,
                 n_threads: int | None = None):
        import llama_cpp

        threads = n_threads or cpu_threads()
        window = n_ctx or min(trained_context(gguf) or MAX_CONTEXT, MAX_CONTEXT)
        try:
            self.llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=window, n_batch=min(512, window),
                                       n_threads=threads, n_threads_batch=threads, verbose=False)
        except ValueError as exc:
            raise MensError(f"llama.cpp cannot load the GGUF: {exc}", str(gguf),
                            "check the file (mens export writes one llama.cpp loads)") from None
        self.gguf, self.threads = Path(gguf), threads
        self.tokenizer = GGUFTokenizer(self.llm)
        self.device = "cpu"
        self.context_window = self.llm.n_ctx()
        self.max_batch, self.queue_size = 1, queue_size
        self.grammar, self._chooser = None, None
        self.eos_ids = _EndTokens(self.llm._model.vocab)
        self._pieces: dict[int, bytes] = {}
        self.stats = {"requests": 0, "sequences": 0, "decode_steps": 0, "prefills": 0, "tokens": 0,
                      "max_batch_size": 0, "rejected_queue_full": 0, "cancelled": 0,
                      "batch_size_histogram": Counter()}
        self._stats_lock = threading.Lock()
        self._waiting = deque()
        self._cond = threading.Condition()
        self._stop = False
        self.error = None
        self._thread = threading.Thread(target=self._loop, name="mens-llamacpp", daemon=True)
        self._thread.start()

    def _schedule(self) -> None:
        while True:
            with self._cond:
                while not self._stop and not self._waiting:
                    self._cond.wait()
                if self._stop:
                    return
                req = self._waiting.popleft()
            for index in range(req.sampling.n):
                if req.cancelled or self._stop:
                    break
                s = _Seq(req, index)
                try:
                    self._generate(s)
                except Exception as exc:  # this request fails; the engine goes on
                    self._fail([s], exc)
                    break
                if s.finish is None and req.cancelled:
                    self.stats["cancelled"] += 1
            if self._stop:
                req.emit(("error", "the server is shutting down"))

    def _generate(self, s: _Seq) -> None:
        sp = s.req.sampling
        seed = sp.seed + s.index if sp.seed is not None else random.getrandbits(32)
        self.llm.set_seed(seed % (2**32 - 1))   # 2**32 - 1 is llama.cpp's "pick a random seed"
        self.stats["sequences"] += 1
        self.stats["prefills"] += 1
        tokens = self.llm.generate(s.req.prompt_ids, temp=sp.temperature, top_p=sp.top_p, top_k=0, min_p=0.0,
                                   typical_p=1.0, repeat_penalty=1.0)
        try:
            for token in tokens:
                if s.generated:
                    self.stats["decode_steps"] += 1
                    with self._stats_lock:
                        self.stats["batch_size_histogram"][1] += 1
                    self.stats["max_batch_size"] = 1
                self._accept(s, int(token))
                if s.finish is not None or s.req.cancelled or self._stop:
                    break
        finally:
            tokens.close()

    def _text(self, ids: list[int]) -> str:
        return b"".join(self._piece(t) for t in ids).decode("utf-8", errors="replace")

    def _piece(self, token: int) -> bytes:
        """A token's bytes, control tokens as nothing (as skip_special_tokens does); cached."""
        piece = self._pieces.get(token)
        if piece is None:
            import llama_cpp

            size = 64
            while True:
                buf = (ctypes.c_char * size)()
                n = llama_cpp.llama_token_to_piece(self.llm._model.vocab, token, buf, size, 0, False)
                if n >= 0:
                    break
                size = -n
            piece = self._pieces[token] = bytes(buf[:n])
        return piece


def build_llamacpp_server(model_or_gguf: str, *, quant: str = "f16", name: str | None = None,
                          api_key: str | None = None, queue_size: int = 64, max_body_bytes: int | None = None,
                          max_prompt_tokens: int | None = None):
    """Resolve (export if needed) the GGUF, start the engine, build the app → (app, engine)."""
    from mens.serve.app import DEFAULT_MAX_BODY_BYTES, build_app

    check_available()
    gguf = resolve_gguf(model_or_gguf, quant)
    start = time.perf_counter()
    engine = LlamaCppEngine(gguf, queue_size=queue_size)
    say(f"serve: llama.cpp loaded {gguf} in {time.perf_counter() - start:.1f}s "
        f"(context {engine.context_window} tokens, {engine.threads} threads)")
    src = Path(model_or_gguf)
    served = name or (src.stem if src.is_file() else src.resolve().name)
    engine.models = [served]
    return build_app(engine, {served: None}, api_key=api_key, max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES,
                     max_prompt_tokens=max_prompt_tokens), engine
