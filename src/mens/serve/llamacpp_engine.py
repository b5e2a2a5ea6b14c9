"""`mens serve --engine llamacpp`: the same OpenAI-compatible API (serve/app.py) over llama.cpp,
through llama-cpp-python, for CPU users.

MODEL_OR_RUN is a .gguf file, or a run or model dir exported to GGUF first (mens.export.export)
and cached beside it as `<dir>.<quant>.gguf` (re-exported when a file of the dir is newer; in
the mens cache when that folder is not writable).

The engine has the mens engine's interface (submit, cancel, alive, stop, snapshot, and the
tokenizer the app templates and tokenises with), and its queue, cancellation and per-token
handling are the mens engine's own (inherited from serve/engine.py), so `max_tokens`, stop
strings, the end tokens (llama.cpp's end-of-generation set), streaming and usage mean what they
mean there. One background thread owns the llama.cpp context and batches continuously through
llama.cpp's C API (llama-cpp-python's ctypes bindings): up to `--max-batch` choices decode
together, each its own sequence in one KV cache, newcomers prefilled in the same steps.
Sampling: temperature then top_p (OpenAI's order), seeded per choice (seed + i) as the mens
engine does; llama.cpp's own top-k, min-p and penalties are not used.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import logging
import os
import random
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from mens.errors import MensError
from mens.progress import say
from mens.serve.engine import Engine, _Seq

MAX_CONTEXT = 8192      # a request's window at most (llama.cpp allocates its KV cache up front)
MAX_KV_TOKENS = 32768   # the KV cache all running choices share, unless one window is larger
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


# ---------------------------------------------------------------- llama.cpp's C API, wrapped

def cpu_threads() -> int:
    """OMP_NUM_THREADS when set (as torch reads it, so both engines take the same share), else
    every core this process may run on."""
    given = os.environ.get("OMP_NUM_THREADS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class GGUFModel:
    """A GGUF loaded with llama.cpp (weights mmapped, on the CPU) and its vocabulary: tokenize,
    token pieces, end-of-generation tokens, metadata. Read-only, so any thread may use it."""

    def __init__(self, path: str | Path):
        import llama_cpp

        self.lib = llama_cpp
        # llama.cpp's log off: it warns that the shared KV cache is larger than the trained window,
        # which no request gets (each is held to its window); failures come back as return codes
        logging.getLogger("llama-cpp-python").setLevel(logging.CRITICAL)
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.n_gpu_layers = 0
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        if not self.model:
            raise MensError("llama.cpp cannot load the GGUF", str(path),
                            "check the file (mens export writes one llama.cpp loads)")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self._pieces: dict[int, bytes] = {}

    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        n = self.lib.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        if n >= len(buf):   # a longer value (a long chat template): ask again with room for it
            buf = ctypes.create_string_buffer(n + 1)
            n = self.lib.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace") if n >= 0 else None

    def tokenize(self, text: str, add_special: bool) -> list[int]:
        data = text.encode("utf-8")
        size = len(data) + 8
        while True:
            out = (self.lib.llama_token * size)()
            n = self.lib.llama_tokenize(self.vocab, data, len(data), out, size, add_special, True)
            if n >= 0:
                return list(out[:n])
            size = -n

    def piece(self, token: int) -> bytes:
        """A token's bytes, control tokens as nothing (as skip_special_tokens does); cached."""
        piece = self._pieces.get(token)
        if piece is None:
            size = 64
            while True:
                buf = (ctypes.c_char * size)()
                n = self.lib.llama_token_to_piece(self.vocab, token, buf, size, 0, False)
                if n >= 0:
                    break
                size = -n
            piece = self._pieces[token] = bytes(buf[:n])
        return piece

    def text(self, token: int) -> str:
        return self.lib.llama_vocab_get_text(self.vocab, token).decode("utf-8", errors="replace")

    def __contains__(self, token: int) -> bool:
        """`token in model`: is it one of llama.cpp's end-of-generation tokens (EOS, EOT, <|im_end|> …)?"""
        return bool(self.lib.llama_vocab_is_eog(self.vocab, token))


class GGUFTokenizer:
    """What serve/app.py asks of a tokenizer, over the GGUF's own vocabulary and chat template
    (ChatML when the file has none, as `mens train` formats chats), rendered by transformers'
    template renderer as `apply_chat_template` does."""

    def __init__(self, model: GGUFModel):
        from mens.chat_template import CHATML_TEMPLATE

        self.model = model
        self.chat_template = model.meta("tokenizer.chat_template") or CHATML_TEMPLATE
        lib, vocab = model.lib, model.vocab
        self.specials = {name: model.text(tid) for name, tid in
                         (("bos_token", lib.llama_vocab_bos(vocab)), ("eos_token", lib.llama_vocab_eos(vocab)))
                         if tid >= 0}

    def apply_chat_template(self, messages, tools=None, tokenize=False, add_generation_prompt=True, **kwargs):
        from transformers.utils.chat_template_utils import render_jinja_template

        rendered, _ = render_jinja_template([messages], tools=tools, chat_template=self.chat_template,
                                            add_generation_prompt=add_generation_prompt,
                                            **{**self.specials, **kwargs})
        return self(rendered[0], add_special_tokens=False).input_ids if tokenize else rendered[0]

    def __call__(self, text: str, add_special_tokens: bool = True):
        # special tokens in the text (<|im_start|> …) are their tokens, as with transformers; BOS is
        # added only when asked and the model wants one (llama.cpp's add_special)
        return SimpleNamespace(input_ids=self.model.tokenize(text, add_special_tokens))


@dataclass
class _Row:
    """One choice in the llama.cpp batch: its KV-cache sequence id, its sampler, and where it is."""

    seq: _Seq
    slot: int
    sampler: object
    reserved: int              # KV cells held for it: prompt + max_tokens
    fed: int = 0               # tokens of the prompt (then of the answer) already in the KV cache


# ---------------------------------------------------------------- the engine

class LlamaCppEngine(Engine):
    """serve/engine.py's Engine with llama.cpp decoding: the queue (submit_all, cancel, the 429
    bound), liveness, stop, stats and the per-token handling (_accept: end tokens, stop strings,
    max_tokens, the context window, streaming with held-back stop prefixes) are inherited;
    __init__ sets the attributes those use; _schedule is llama.cpp's continuous batching.

    Each step is one llama_decode over one llama_batch: the next token of every running choice,
    then as many prompt tokens of newcomers as fit in `n_batch` (chunked prefill; a prompt whose
    last token is in the batch gets its first token sampled from it). Every choice has its own
    sequence in one unified KV cache of `kv_tokens` cells, admitted only while the cells it may
    need (prompt + max_tokens) are free, so a decode never runs out of room; a choice that ends
    frees its sequence at once."""

    def __init__(self, gguf: str | Path, *, max_batch: int = 8, queue_size: int = 64, n_ctx: int | None = None,
                 n_threads: int | None = None, n_batch: int = 512):
        self.model = GGUFModel(gguf)
        lib = self.lib = self.model.lib
        self.gguf, self.threads = Path(gguf), n_threads or cpu_threads()
        window = n_ctx or min(trained_context(gguf) or MAX_CONTEXT, MAX_CONTEXT)
        self.max_batch = min(max_batch, lib.llama_max_parallel_sequences())
        self.kv_tokens = min(window * self.max_batch, max(window, MAX_KV_TOKENS))
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = self.kv_tokens, n_batch, n_batch
        params.n_seq_max, params.kv_unified = self.max_batch, True
        params.n_threads = params.n_threads_batch = self.threads
        self.ctx = lib.llama_init_from_model(self.model.model, params)
        if not self.ctx:
            raise MensError(f"llama.cpp cannot make a context of {self.kv_tokens} tokens", str(gguf),
                            "lower --max-batch (memory)")
        self.memory = lib.llama_get_memory(self.ctx)
        self.n_batch = n_batch
        self.batch = lib.llama_batch_init(n_batch, 0, 1)
        self.tokenizer = GGUFTokenizer(self.model)
        self.device = "cpu"
        self.context_window, self.queue_size = window, queue_size
        self.grammar, self._chooser = None, None
        self.eos_ids = self.model                 # `token in eos_ids`: llama.cpp's end-of-generation set
        self.stats = {"requests": 0, "sequences": 0, "decode_steps": 0, "prefills": 0, "tokens": 0,
                      "max_batch_size": 0, "rejected_queue_full": 0, "cancelled": 0,
                      "batch_size_histogram": Counter()}
        self._stats_lock = threading.Lock()
        self._waiting = deque()
        self._cond = threading.Condition()
        self._stop = False
        self.error = None
        self._partial = None                      # (the head request, its next choice) when some run already
        self._thread = threading.Thread(target=self._loop, name="mens-llamacpp", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        super().stop()
        if not self._thread.is_alive() and self.ctx:   # the loop has let go of them
            self.lib.llama_batch_free(self.batch)
            self.lib.llama_free(self.ctx)
            self.lib.llama_model_free(self.model.model)
            self.ctx = None

    # ------------------------------------------------------------------ scheduler loop

    def _schedule(self) -> None:
        rows: list[_Row] = []
        while True:
            with self._cond:
                while not self._stop and not rows and not self._waiting:
                    self._cond.wait()
                if self._stop:
                    break
                rows += self._admit_rows(rows)
            rows = self._retire_rows(rows)
            if not rows:
                continue
            try:
                sampling = self._fill_batch(rows)
                if self.lib.llama_decode(self.ctx, self.batch) != 0:
                    raise RuntimeError("llama_decode failed")
            except Exception as exc:          # fails the requests in this step; the engine goes on
                self._fail([r.seq for r in rows], exc)
                rows = self._retire_rows(rows)
                continue
            for i, r in sampling:
                try:
                    self._accept(r.seq, int(self.lib.llama_sampler_sample(r.sampler, self.ctx, i)))
                except Exception as exc:       # this choice's request fails; the others go on
                    self._fail([r.seq], exc)
            rows = self._retire_rows(rows)
        for r in rows:
            r.seq.req.emit(("error", "the server is shutting down"))
        self._retire_rows(rows, everything=True)

    def _admit_rows(self, rows: list[_Row]) -> list[_Row]:
        """Choices of waiting requests, in order, while a sequence and the KV cells each may need
        (prompt + max_tokens) are free. A request with more choices than fit starts the rest later."""
        out: list[_Row] = []
        busy = {r.slot for r in rows}
        free = [i for i in range(self.max_batch) if i not in busy]
        used = sum(r.reserved for r in rows)
        while self._waiting and len(out) < len(free):
            req = self._waiting[0]
            if req.cancelled:
                self._waiting.popleft()
                continue
            start = self._partial[1] if self._partial and self._partial[0] is req else 0
            need = len(req.prompt_ids) + req.sampling.max_tokens
            index = start
            while index < req.sampling.n and len(out) < len(free) and used + need <= self.kv_tokens:
                out.append(_Row(_Seq(req, index), free[len(out)], self._sampler(req.sampling, index), need))
                used, index = used + need, index + 1
            self.stats["sequences"] += index - start
            if index < req.sampling.n:
                self._partial = (req, index)
                break
            self._waiting.popleft()
            self._partial = None
        return out

    def _sampler(self, sp, index: int):
        """temperature then top_p (OpenAI's order) then a draw seeded seed + index; greedy at 0."""
        lib = self.lib
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if sp.temperature <= 0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
            return chain
        seed = (sp.seed + index if sp.seed is not None else random.getrandbits(32)) % (2**32 - 1)
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(sp.temperature))
        if sp.top_p < 1.0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(sp.top_p, 1))
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(seed))   # 2**32 - 1: "random"
        return chain

    def _fill_batch(self, rows: list[_Row]) -> list[tuple[int, _Row]]:
        """The next step's tokens into self.batch → [(batch index, row)] whose logits are sampled."""
        b, n, sampling = self.batch, 0, []
        decoding = [r for r in rows if r.seq.pending is not None]
        for r in decoding:                                   # one token each: the last one sampled
            n = self._put(n, r.seq.pending, r.fed, r.slot, True)
            r.fed += 1
            sampling.append((n - 1, r))
        prefilling = False
        for r in rows:                                       # then prompts, as far as they fit
            prompt = r.seq.req.prompt_ids
            if r.seq.pending is not None or r.fed >= len(prompt) or n >= self.n_batch:
                continue
            take = min(len(prompt) - r.fed, self.n_batch - n)
            for k in range(take):
                last = r.fed + k == len(prompt) - 1
                n = self._put(n, prompt[r.fed + k], r.fed + k, r.slot, last)
                if last:
                    sampling.append((n - 1, r))
            r.fed += take
            prefilling = True
        b.n_tokens = n
        if decoding:
            self.stats["decode_steps"] += 1
            with self._stats_lock:
                self.stats["batch_size_histogram"][len(decoding)] += 1
            self.stats["max_batch_size"] = max(self.stats["max_batch_size"], len(decoding))
        self.stats["prefills"] += prefilling
        return sampling

    def _put(self, n: int, token: int, pos: int, slot: int, logits: bool) -> int:
        b = self.batch
        b.token[n], b.pos[n], b.n_seq_id[n], b.logits[n] = token, pos, 1, logits
        b.seq_id[n][0] = slot
        return n + 1

    def _retire_rows(self, rows: list[_Row], everything: bool = False) -> list[_Row]:
        """Free the sequence and sampler of every row that ended (finished, failed, cancelled)."""
        keep = []
        for r in rows:
            if not everything and r.seq.finish is None and not r.seq.req.cancelled:
                keep.append(r)
                continue
            if r.seq.finish is None and r.seq.req.cancelled:
                self.stats["cancelled"] += 1
            self.lib.llama_memory_seq_rm(self.memory, r.slot, -1, -1)
            self.lib.llama_sampler_free(r.sampler)
        return keep

    def _text(self, ids: list[int]) -> str:
        return b"".join(self.model.piece(t) for t in ids).decode("utf-8", errors="replace")


def build_llamacpp_server(model_or_gguf: str, *, quant: str = "f16", name: str | None = None,
                          api_key: str | None = None, max_batch: int = 8, queue_size: int = 64,
                          max_body_bytes: int | None = None,
                          max_prompt_tokens: int | None = None):
    """Resolve (export if needed) the GGUF, start the engine, build the app → (app, engine)."""
    from mens.serve.app import DEFAULT_MAX_BODY_BYTES, build_app

    check_available()
    gguf = resolve_gguf(model_or_gguf, quant)
    start = time.perf_counter()
    engine = LlamaCppEngine(gguf, max_batch=max_batch, queue_size=queue_size)
    say(f"serve: llama.cpp loaded {gguf} in {time.perf_counter() - start:.1f}s "
        f"(context {engine.context_window} tokens, KV cache {engine.kv_tokens} tokens, {engine.threads} threads)")
    src = Path(model_or_gguf)
    served = name or (src.stem if src.is_file() else src.resolve().name)
    engine.models = [served]
    return build_app(engine, {served: None}, api_key=api_key, max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES,
                     max_prompt_tokens=max_prompt_tokens), engine
