"""The GGUF side of `mens serve --engine llamacpp`: MODEL_OR_RUN → the GGUF file to serve (a
.gguf as is; a run or model dir exported once and cached beside it as `<dir>.<quant>.gguf`,
re-exported when a file of the dir is newer, in the mens cache when that folder is not writable),
and llama.cpp's C API wrapped (llama-cpp-python's ctypes bindings): the model, its vocabulary
and the tokenizer the routes (serve/routes/) ask for."""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
from pathlib import Path
from types import SimpleNamespace

from mens.errors import MensError
from mens.progress import say


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
    """What the routes (serve/routes/) ask of a tokenizer, over the GGUF's own vocabulary and chat template
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

    def __len__(self) -> int:   # the vocabulary's size, as len() of a transformers tokenizer
        return self.model.lib.llama_vocab_n_tokens(self.model.vocab)

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """The text of `ids`, control tokens as nothing (`piece`), as transformers' decode with
        skip_special_tokens (a completion's token-id prompt, echoed)."""
        return b"".join(self.model.piece(t) for t in ids).decode("utf-8", errors="replace")

    def __call__(self, text: str, add_special_tokens: bool = True):
        # special tokens in the text (<|im_start|> …) are their tokens, as with transformers; BOS is
        # added only when asked and the model wants one (llama.cpp's add_special)
        return SimpleNamespace(input_ids=self.model.tokenize(text, add_special_tokens))
