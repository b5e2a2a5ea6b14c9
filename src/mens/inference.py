"""Load what `mens train` produced — or any HF model — for generation: bench and serve share this
(the model I/O underneath is `mens.hf`).

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
import warnings
from pathlib import Path

from mens.errors import MensError
from mens.hf import (adapter_base, check_source, is_adapter_run, is_nf4, load_causal_lm, load_tokenizer,
                     pick_device, read_manifest, torch_dtype)


def load_model(path_or_id: str | Path, *, adapters: dict[str, str] | None = None, device: str = "auto",
               dtype=None, name: str | None = None):
    """(model, tokenizer, info). `adapters` maps served names to run dirs whose adapters are
    loaded over the same base. info: base, device, dtype, models {served name: peft adapter
    name or None}, default (the served name of `path_or_id`), manifest, context_window."""
    from mens.hf import check_device, check_files

    source = str(path_or_id)
    check_source(source)
    check_device(device)
    for path in [source, *(adapters or {}).values()]:  # every JSON parses, every safetensors header is whole
        check_files(path)
        if is_adapter_run(path):
            check_files(adapter_base(path))
    try:
        return _load(source, adapters, device, dtype, name)
    except MensError:
        raise
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        lines = str(exc).strip().splitlines()
        raise MensError(f"cannot load the model: {type(exc).__name__}: {(lines or [''])[0][:200]}", source,
                        "check the model's and adapters' files (mens --debug … shows the traceback)") from None


def _load(source: str, adapters, device: str, dtype, name: str | None):
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
    nf4 = primary_is_run and device.startswith("cuda") and is_nf4(manifest)
    dt = torch_dtype(dtype, device) if (dtype is None or isinstance(dtype, str)) else dtype
    check_source(base)
    model = load_causal_lm(base, device=device, dtype=dt, nf4=nf4)

    models: dict[str, str | None] = {}
    runs = ([(default, source)] if primary_is_run else []) + list(adapters.items())
    if not primary_is_run:
        models[default] = None
    if len(runs) > 1:
        rows = model.get_input_embeddings().weight.shape[0]
        for adapter_name, run in runs:
            tok = _run_tokenizer(run)
            if tok is not None and len(tok) > rows:
                raise MensError(f"adapter {adapter_name!r} adds tokens to its base's vocabulary (--chat-template), "
                                "and adapters over one base share its embeddings", str(run),
                                "serve it alone, or merge it first (mens merge) and serve the merged model")
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
    window = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None) \
        or 2048
    info = {"source": source, "base": base, "device": device, "dtype": str(dt).replace("torch.", ""),
            "nf4": nf4, "models": models, "default": default, "manifest": manifest,
            "context_window": int(window)}
    return model, tokenizer, info


def _run_tokenizer(run: str | Path):
    """The tokenizer a run saved, or None."""
    from mens.hf import TOKENIZER_FILES

    return load_tokenizer(run) if any((Path(run) / f).is_file() for f in TOKENIZER_FILES) else None


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
    """`PeftModel.from_pretrained(model, run)`, without the libraries' noise. A run whose
    tokenizer has more ids than the base has rows (`--chat-template` added tokens) grows the
    base's embeddings to its size first, so the adapter's saved embedding rows load."""
    from peft import PeftModel

    fit_run_embeddings(model, run)
    with _peft_noise_off():
        return PeftModel.from_pretrained(model, str(run), adapter_name=adapter_name)


def fit_run_embeddings(model, run: str | Path) -> bool:
    """Grow `model`'s embeddings to the size of `run`'s tokenizer (when the run saved one and it
    is larger), new rows as training grew them. True when they grew."""
    from mens.chat_template import fit_embeddings

    tokenizer = _run_tokenizer(run)
    return tokenizer is not None and fit_embeddings(model, tokenizer)
