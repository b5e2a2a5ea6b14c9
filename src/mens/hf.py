"""Hugging Face model I/O, once for every stage: where a model comes from (a local directory or a
hub id, and whether the hub may be asked), its tokenizer and chat template, the 4-bit
quantisation config, the device and dtype to load on, and a run's training manifest (chat
templates and the ids that end a generation: `mens.chat_template`). `mens train`, bench, merge
and serve load models through this module.

Light at import: torch, transformers and huggingface_hub load inside the functions.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mens.errors import MensError

ADAPTER_CONFIG = "adapter_config.json"
MANIFEST = "training_manifest.json"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
# The storage of every NF4 base: how `mens train --backend qlora` quantises and how inference and
# merge rebuild that base (see bnb_4bit_config).
NF4 = "bnb-nf4-double-quant"
_DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "f16": "float16", "fp16": "float16",
           "float16": "float16", "f32": "float32", "fp32": "float32", "float32": "float32"}


# ---------------------------------------------------------------- where a model comes from

@dataclass
class BaseModelInfo:
    """Where the full-precision base lives, so merge/serve can find it again."""

    path: str | None           # absolute local directory, or None for a hub id
    id: str                    # hub id, or the directory for local models
    config_sha256: str | None

    @property
    def source(self) -> str:
        """What `from_pretrained` is given."""
        return self.path or self.id

    def to_dict(self) -> dict:
        return {"path": self.path, "id": self.id, "config_sha256": self.config_sha256}


def offline() -> bool:
    """Whether the hub may not be asked (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)."""
    return any(os.environ.get(name, "0").lower() in ("1", "true", "yes")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or name.count("/") > 1


def resolve_base(model: str) -> BaseModelInfo:
    """A local directory → its absolute path; otherwise a hub id, fetched (or found in the
    cache) by transformers. Offline and not cached → a clear one-line error."""
    local = Path(model).expanduser()
    if local.exists():
        if not local.is_dir():
            raise MensError("model path is not a directory", str(local), "give a Hugging Face model directory")
        if not (local / "config.json").is_file():
            raise MensError("model directory has no config.json", str(local),
                            "point --model at a Hugging Face model directory (config + weights + tokenizer)")
        path = str(local.resolve())
        return BaseModelInfo(path, path, hashlib.sha256((local / "config.json").read_bytes()).hexdigest())
    if _looks_like_path(model):
        raise MensError("model directory not found", model, "check the --model path")
    try:
        from huggingface_hub import hf_hub_download

        cfg = hf_hub_download(model, "config.json")
    except Exception as err:  # noqa: BLE001 - any hub failure is the same user-facing problem
        if offline():
            raise MensError(f"model {model!r} is not a local directory and the hub is offline "
                            "(HF_HUB_OFFLINE=1) and it is not in the cache", model,
                            "download it once online, or pass a local model directory") from None
        raise MensError(f"cannot fetch model {model!r} from the Hugging Face hub: {type(err).__name__}",
                        model, "check the id and your network, or pass a local directory") from None
    return BaseModelInfo(None, model, hashlib.sha256(Path(cfg).read_bytes()).hexdigest())


def check_source(path_or_id: str) -> None:
    """For loading to generate: a run dir, a model dir or a hub id. A path that does not exist,
    or a hub id not in the cache while offline, is a user error with a clear line."""
    p = Path(path_or_id)
    if p.exists():
        if not p.is_dir():
            raise MensError("is a file, not a model directory", str(p), "give a run dir, a merged model dir or a hub id")
        if not (p / "config.json").is_file() and not (p / ADAPTER_CONFIG).is_file():
            raise MensError("not a model directory (no config.json or adapter_config.json)", str(p),
                            "give a run dir, a merged model dir or a hub id")
        verify_checksums(p)  # a shipped model changed since (mens merge's SHA256SUMS): said now
        return
    if _looks_like_path(path_or_id):
        raise MensError("model path not found", path_or_id, "check the path")
    if offline():
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(path_or_id, "config.json"), str):
            raise MensError(f"hub model {path_or_id!r} is not in the local cache and HF_HUB_OFFLINE=1",
                            path_or_id, "download it first, unset HF_HUB_OFFLINE, or give a local path")


# ---------------------------------------------------------------- runs: manifest and adapter

def read_manifest(run: str | Path) -> dict[str, Any]:
    """A run's training_manifest.json; {} when there is none (a plain model dir)."""
    path = Path(run) / MANIFEST
    if not path.is_file():
        return {}
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise MensError(f"malformed training manifest: {exc.msg}", str(path), "re-run mens train") from None
    if not isinstance(manifest, dict):
        raise MensError(f"the training manifest is a JSON {type(manifest).__name__}, not an object", str(path),
                        "restore the file, or re-run mens train")
    for key in _MANIFEST_OBJECTS:  # what merge, export, push and status read with `.get`
        if manifest.get(key) is not None and not isinstance(manifest[key], dict):
            raise MensError(f"the training manifest's {key!r} is a JSON {type(manifest[key]).__name__}, not an object",
                            str(path), "restore the file, or re-run mens train")
    return manifest


_MANIFEST_OBJECTS = ("base_model", "provenance", "hyperparameters", "results")


def is_adapter_run(path: str | Path) -> bool:
    return (Path(path) / ADAPTER_CONFIG).is_file()


def adapter_base(run: str | Path) -> str:
    """The base a run's adapter was trained on: the manifest's path when it still exists, else
    `adapter_config.json`'s `base_model_name_or_path` (a path or a hub id)."""
    run = Path(run)
    base = read_manifest(run).get("base_model")
    base = base if isinstance(base, dict) else {}
    for candidate in (base.get("path"), base.get("id")):
        if candidate and Path(candidate).is_dir():
            return str(candidate)
    cfg = json.loads((run / ADAPTER_CONFIG).read_text())
    found = cfg.get("base_model_name_or_path") or base.get("id") or base.get("path")
    if not found:
        raise MensError("the adapter does not name its base model", str(run / ADAPTER_CONFIG),
                        "set base_model_name_or_path to the base model's directory")
    return str(found)


def is_nf4(manifest: dict) -> bool:
    """Whether the run's adapter was trained on an NF4 base (the manifest's `quantization`)."""
    return "nf4" in str(manifest.get("quantization") or "").lower()


# ---------------------------------------------------------------- tokenizer

def load_tokenizer(*candidates: str | Path):
    """The tokenizer of the first candidate that has one (a run may or may not copy it), with a
    pad token (the EOS when it has none)."""
    from transformers import AutoTokenizer

    for c in candidates:
        p = Path(c)
        if p.is_dir() and not any((p / f).is_file() for f in TOKENIZER_FILES):
            continue
        try:
            tok = AutoTokenizer.from_pretrained(str(c))
        except (OSError, ValueError, TypeError) as err:
            raise MensError(f"cannot load a tokenizer: {str(err).splitlines()[0][:160]}", str(c),
                            "the model directory needs tokenizer files (tokenizer.json or equivalent)") from None
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        return tok
    raise MensError("no tokenizer found", " or ".join(map(str, candidates)), "save the tokenizer with the model")


# ---------------------------------------------------------------- device, dtype, weights

def pick_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def torch_dtype(name: str | None, device: str):
    """`bf16|f16|f32` (or torch names) → torch dtype; default f32 on CPU, bf16 on CUDA."""
    import torch

    if name is None:
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if name not in _DTYPES:
        raise MensError(f"unknown dtype {name!r}", "--dtype", "use bf16, f16 or f32")
    return getattr(torch, _DTYPES[name])


def bnb_4bit_config(compute_dtype=None):
    """NF4 with double-quantised scales, computing in `compute_dtype` (bf16 — QLoRA as defined —
    unless the run's precision says fp32: mens.train.precision), stored in bf16 tensors. The
    storage type does not change a single dequantised value (the packed 4-bit codes are the same
    bytes), but it is what FSDP needs to shard the 4-bit weights alongside bf16 ones, so training
    uses it; inference and merge use the same config so the NF4 base they rebuild is the
    training base, layout included."""
    import torch
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=compute_dtype or torch.bfloat16,
                              bnb_4bit_quant_storage=torch.bfloat16)


def load_causal_lm(source: str, *, device, dtype, nf4: bool = False):
    """`AutoModelForCausalLM` from a directory or hub id onto `device` (a str or torch.device),
    in `dtype`, or NF4-quantised (bnb_4bit_config) and placed by bitsandbytes. Load errors are
    one-line MensErrors."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    from mens.library_noise import quiet_hub_kernel_notice

    quiet_hub_kernel_notice()  # transformers' NF4 path and peft import bitsandbytes
    hf_logging.disable_progress_bar()
    device = torch.device(device)
    kwargs: dict[str, Any] = {"dtype": dtype}
    if nf4:
        kwargs["quantization_config"] = bnb_4bit_config(dtype)
    if nf4 or device.type == "cuda":  # straight onto the GPU, not through host memory first
        kwargs["device_map"] = {"": device.index if device.type == "cuda" and device.index is not None
                                else device.type}
    try:
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as err:
        raise MensError(f"cannot load the model: {str(err).splitlines()[0][:200]}", source,
                        "check that the directory holds a causal LM transformers can load, or the hub id "
                        "and your connection") from None
    return model if nf4 else model.to(device)


def max_positions(config) -> int | None:
    """The longest sequence a model config allows (its position table), or None."""
    for name in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


# ---------------------------------------------------------------- checks before loading

_FIX = "restore the file, or re-run the mens command that wrote it (train, merge)"


def check_device(device: str) -> None:
    """`auto`, `cpu`, `cuda`, `cuda:N`, `mps` — and the device must be present on this machine."""
    import torch

    if device == "auto":
        return
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise MensError(f"unknown device {device!r}", "--device", "use auto, cpu, cuda or cuda:N") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise MensError(f"--device {device}, but this machine has no usable CUDA device", "--device",
                            "use --device cpu (or auto)")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise MensError(f"--device {device}, but this machine has {torch.cuda.device_count()} CUDA device(s)",
                            "--device", f"use cuda:0 … cuda:{torch.cuda.device_count() - 1}")
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise MensError(f"--device {device}, but MPS is not available here", "--device", "use --device cpu")
    elif dev.type != "cpu":
        raise MensError(f"unsupported device {device!r}", "--device", "use auto, cpu, cuda or cuda:N")


# The JSON files of a model or run directory that loaders read as objects (`.get`, `**`).
_OBJECT_FILES = {"config.json", ADAPTER_CONFIG, MANIFEST, "generation_config.json", "tokenizer_config.json"}


CHECKSUMS = "SHA256SUMS"  # `sha256sum` format; mens merge writes it, every load checks it
_VERIFIED: set[tuple[str, int, int]] = set()  # (file, size, mtime) hashed already in this process


def write_checksums(folder: str | Path) -> Path:
    """SHA256SUMS over every file of a model folder (sorted; `sha256sum -c SHA256SUMS` checks it too)."""
    folder = Path(folder)
    lines = [f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {f.name}"
             for f in sorted(folder.iterdir()) if f.is_file() and f.name != CHECKSUMS]
    out = folder / CHECKSUMS
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def verify_checksums(folder: str | Path) -> None:
    """A model folder with SHA256SUMS: each listed file must be there with that sha256 (a git-lfs
    pointer, a truncated copy or an edited tokenizer is named before anything loads)."""
    folder = Path(folder)
    sums = folder / CHECKSUMS
    if not sums.is_file():
        return
    for number, line in enumerate(sums.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        want, _, name = line.strip().partition("  ")
        if not line.strip():
            continue
        if len(want) != 64 or not name or "/" in name:
            raise MensError(f"not a sha256sum line: {line[:80]!r}", f"{sums}:{number}", _FIX)
        f = folder / name
        try:
            st = f.stat()
        except OSError:
            raise MensError(f"listed in {CHECKSUMS} but missing", str(f), _FIX) from None
        key = (str(f.resolve()), st.st_size, st.st_mtime_ns)
        if key in _VERIFIED:
            continue
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
        if h.hexdigest() != want.lower():
            raise MensError(f"sha256 does not match {CHECKSUMS} (the file changed or is incomplete)", str(f),
                            "restore it (git checkout / git lfs pull / copy it again) or remove the folder's "
                            f"{CHECKSUMS} if you changed it on purpose")
        _VERIFIED.add(key)


def check_files(path: str | Path) -> None:
    """Every JSON file of a model or run directory parses, every safetensors header is whole, and
    every file SHA256SUMS lists has its sha256. Hub ids (not a directory here) are left to the loader."""
    p = Path(path)
    if not p.is_dir():
        return
    verify_checksums(p)
    for f in sorted(p.glob("*.json")):
        try:
            obj = json.loads(f.read_bytes())
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise MensError(f"corrupt JSON file: {first_line(exc)}", str(f), _FIX) from None
        except OSError as exc:
            raise MensError(f"cannot read the file: {exc.strerror}", str(f), "check its permissions") from None
        if f.name in _OBJECT_FILES and not isinstance(obj, dict):
            raise MensError(f"corrupt JSON file: a JSON {type(obj).__name__}, not an object", str(f), _FIX)
    for f in sorted(p.glob("*.safetensors")):
        from safetensors import safe_open

        try:
            with safe_open(str(f), framework="pt"):
                pass
        except Exception as exc:  # SafetensorError (not exported under a stable name), OSError
            raise MensError(f"corrupt safetensors file: {first_line(exc)}", str(f), _FIX) from None


def first_line(exc: BaseException) -> str:
    """An exception's first line (libraries put whole dumps in their messages), at most 160 chars."""
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:160]
