"""Load what `mens train` produced — or any HF model — for generation: bench and serve share this.

A path can be a run dir with a PEFT adapter (the base comes from `training_manifest.json` or
`adapter_config.json`), a merged/scratch/full HF model dir, or a hub id (offline → MensError).
Several named adapters can sit over one base; `info["models"]` maps each served name to its
PEFT adapter name (None = the bare base).

QLoRA runs: on CPU the base is loaded in full precision, not NF4. bitsandbytes' CPU NF4 path
dequantises every weight on every forward, which makes decoding several times slower, and the
adapter's low-rank update is the same either way — the only difference is the base's ~1e-2
rounding that NF4 adds, which `mens merge` also drops by folding into the original weights.
On CUDA the NF4 base is used (quarter the memory, the exact numerics the adapter was trained on).
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

from mens.errors import MensError

ADAPTER_CONFIG = "adapter_config.json"
MANIFEST = "training_manifest.json"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
_DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "f16": "float16", "fp16": "float16",
           "float16": "float16", "f32": "float32", "fp32": "float32", "float32": "float32"}


def torch_dtype(name: str | None, device: str):
    """`bf16|f16|f32` (or torch names) → torch dtype; default f32 on CPU, bf16 on CUDA."""
    import torch

    if name is None:
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if name not in _DTYPES:
        raise MensError(f"unknown dtype {name!r}", "--dtype", "use bf16, f16 or f32")
    return getattr(torch, _DTYPES[name])


def pick_device(device: str = "auto") -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def read_manifest(run: Path) -> dict[str, Any]:
    path = run / MANIFEST
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise MensError(f"malformed training manifest: {exc.msg}", str(path), "re-run mens train") from None


def is_adapter_run(path: str | Path) -> bool:
    return (Path(path) / ADAPTER_CONFIG).is_file()


def adapter_base(run: str | Path) -> str:
    """The base a run's adapter was trained on: the manifest's path when it still exists, else
    `adapter_config.json`'s `base_model_name_or_path` (a path or a hub id)."""
    run = Path(run)
    base = (read_manifest(run).get("base_model") or {})
    for candidate in (base.get("path"), base.get("id")):
        if candidate and Path(candidate).is_dir():
            return str(candidate)
    cfg = json.loads((run / ADAPTER_CONFIG).read_text())
    found = cfg.get("base_model_name_or_path") or base.get("id") or base.get("path")
    if not found:
        raise MensError("the adapter does not name its base model", str(run / ADAPTER_CONFIG),
                        "set base_model_name_or_path to the base model's directory")
    return str(found)


def _check_source(path_or_id: str) -> None:
    """A path that does not exist, or a hub id while offline, is a user error with a clear line."""
    p = Path(path_or_id)
    if p.exists():
        if p.is_dir() and not (p / "config.json").is_file() and not (p / ADAPTER_CONFIG).is_file():
            raise MensError("not a model directory (no config.json or adapter_config.json)", str(p),
                            "give a run dir, a merged model dir or a hub id")
        return
    looks_like_path = path_or_id.startswith((".", "/", "~")) or path_or_id.count("/") > 1
    if looks_like_path:
        raise MensError("model path not found", path_or_id, "check the path")
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(path_or_id, "config.json"), str):
            raise MensError(f"hub model {path_or_id!r} is not in the local cache and HF_HUB_OFFLINE=1",
                            path_or_id, "download it first, unset HF_HUB_OFFLINE, or give a local path")


def load_tokenizer(*candidates: str | Path):
    """The tokenizer of the first candidate that has one (a run may or may not copy it)."""
    from transformers import AutoTokenizer

    for c in candidates:
        p = Path(c)
        if not p.is_dir() or any((p / f).is_file() for f in _TOKENIZER_FILES):
            tok = AutoTokenizer.from_pretrained(str(c))
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token
            return tok
    raise MensError("no tokenizer found", " or ".join(map(str, candidates)), "save the tokenizer with the model")


def load_base(path_or_id: str, *, device: str, dtype=None, quantize_nf4: bool = False):
    from transformers import AutoModelForCausalLM

    _check_source(path_or_id)
    kwargs: dict[str, Any] = {"dtype": dtype}
    from mens.train.bnb_cpu import quiet_hub_kernel_notice

    quiet_hub_kernel_notice()  # imported by transformers' NF4 path or by peft
    if quantize_nf4:
        import torch
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16)
        kwargs["device_map"] = {"": device}
    try:
        model = AutoModelForCausalLM.from_pretrained(path_or_id, **kwargs)
    except OSError as exc:
        raise MensError(f"cannot load model: {str(exc).splitlines()[0]}", path_or_id,
                        "check the path, or the hub id and your connection") from None
    return model if quantize_nf4 else model.to(device)


def load_model(path_or_id: str | Path, *, adapters: dict[str, str] | None = None, device: str = "auto",
               dtype=None, name: str | None = None):
    """(model, tokenizer, info). `adapters` maps served names to run dirs whose adapters are
    loaded over the same base. info: base, device, dtype, models {served name: peft adapter
    name or None}, default (the served name of `path_or_id`), manifest, context_window."""
    import torch

    source = str(path_or_id)
    _check_source(source)
    device = pick_device(device)
    adapters = dict(adapters or {})
    primary_is_run = is_adapter_run(source)
    base = adapter_base(source) if primary_is_run else source
    manifest = read_manifest(Path(source)) if Path(source).is_dir() else {}
    default = name or Path(source.rstrip("/")).name or source
    for adapter_name, run in adapters.items():
        if not is_adapter_run(run):
            raise MensError("not an adapter run (no adapter_config.json)", str(run), "give a run dir of mens train")
        if adapter_base(run) != base and Path(adapter_base(run)).resolve() != Path(base).resolve():
            raise MensError(f"adapter {adapter_name!r} was trained on {adapter_base(run)}, not on {base}",
                            str(run), "serve adapters of one base together")
    quant = str(manifest.get("quantization") or "").lower()
    nf4 = primary_is_run and device.startswith("cuda") and ("nf4" in quant or manifest.get("backend") == "qlora")
    dt = torch_dtype(dtype, device) if (dtype is None or isinstance(dtype, str)) else dtype
    model = load_base(base, device=device, dtype=dt, quantize_nf4=nf4)

    models: dict[str, str | None] = {}
    runs = ([(default, source)] if primary_is_run else []) + list(adapters.items())
    if not primary_is_run:
        models[default] = None
    if runs:
        first_name, first_run = runs[0]
        model = load_peft(model, first_run, adapter_name=first_name)
        models[first_name] = first_name
        for adapter_name, run in runs[1:]:
            with _peft_noise_off():
                model.load_adapter(run, adapter_name=adapter_name)
            models[adapter_name] = adapter_name
        model.set_adapter(first_name)
    model.eval()
    tokenizer = load_tokenizer(*([source] if Path(source).is_dir() else []), base)
    cfg = model.config
    window = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None) or 2048
    info = {"source": source, "base": base, "device": device, "dtype": str(dt).replace("torch.", ""),
            "nf4": nf4, "models": models, "default": default, "manifest": manifest,
            "context_window": int(window)}
    return model, tokenizer, info


@contextlib.contextmanager
def _peft_noise_off():
    """Silence two library warnings a user can do nothing about: peft 0.21 reads transformers'
    deprecated `is_gradient_checkpointing`, and warns that GPT-2's Conv1D needs fan_in_fan_out
    (which it then sets itself)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        warnings.filterwarnings("ignore", message="fan_in_fan_out is set to False", category=UserWarning)
        yield


def load_peft(model, run: str | Path, adapter_name: str = "default"):
    """`PeftModel.from_pretrained(model, run)`, without the libraries' noise."""
    from peft import PeftModel

    with _peft_noise_off():
        return PeftModel.from_pretrained(model, str(run), adapter_name=adapter_name)
