"""`TrainConfig`: every hyper-parameter of a run in one validated dataclass.

Values come from four layers, later ones winning: the probe's recommended preset (only when no
preset is named), the named preset, a YAML file (`--config run.yaml`, keys = field names), and
command-line flags. The resolved config is printed into the manifest, so a run describes itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from mens.errors import MensError

BACKENDS = ("qlora", "lora", "full", "scratch")
DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "bf16", "fp16", "fp32")
DISTRIBUTED = ("auto", "ddp", "fsdp")


@dataclass
class TrainConfig:
    # what to train, on what, into where
    model: str | None = None
    data_dir: str | None = None
    output_dir: str | None = None
    backend: str = "qlora"
    preset: str | None = None
    device: str = "auto"
    dtype: str = "auto"               # compute dtype; qlora always computes in bf16
    distributed: str = "auto"         # under torchrun: ddp | fsdp (auto = ddp); ignored in one process
    # adapters
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target_modules: list[str] | str = "all-linear"
    dora: bool = False
    # optimisation
    lr: float = 2e-4
    warmup_steps: int = 10
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    adam_betas: tuple[float, float] = (0.9, 0.999)
    epochs: float = 1.0
    max_steps: int | None = None      # wins over epochs when set
    seq_len: int = 512
    micro_batch: int = 4
    grad_accum: int = 2
    seed: int = 42
    # data
    packing: bool = True
    ce_last_k: int | None = None
    min_rating: int | None = None
    system_prompt: str | None = None
    lenient: bool = False
    val_split: float = 0.05           # fraction of pairs held out when the data dir has no val.jsonl
    raw_text: str | None = None       # a directory of text files: fully supervised chunks
    # scratch backend shape (preset name from mens.train.scratch, then overrides)
    scratch_shape: str = "default"
    scratch_layers: int | None = None
    scratch_heads: int | None = None
    scratch_width: int | None = None
    scratch_ffn: int | None = None
    scratch_positions: int | None = None
    scratch_dropout: float | None = None
    # cadence
    log_interval: int = 1
    eval_interval: int = 50           # optimizer steps; 0 = only at the end
    save_interval: int = 50           # optimizer steps; 0 = only at the end / on interrupt
    keep_checkpoints: int = 2
    bench: str | None = None          # held-out bench (dir or .jsonl) scored during training
    bench_every: int = 0              # optimizer steps between bench runs; 0 = only at the end (if --bench)
    bench_limit: int = 8              # bench tasks per run (greedy pass@1), to keep it cheap
    # speed knobs read by mens.train.speed
    gradient_checkpointing: str = "auto"   # auto | on | off
    loss_chunk: int = 1024
    tokens_per_pass: int | None = None     # rows of a micro-batch run per forward/backward (None = speed's default)
    # reporting and provenance
    report_to: list[str] = field(default_factory=lambda: ["jsonl"])
    upstream_model_id: str | None = None
    license: str | None = None
    attribution_required: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["adam_betas"] = list(self.adam_betas)
        return out

    def validate(self) -> "TrainConfig":
        def bad(what: str, todo: str) -> MensError:
            return MensError(what, "training config", todo)

        if self.backend not in BACKENDS:
            raise bad(f"unknown backend {self.backend!r}", f"use one of {', '.join(BACKENDS)}")
        if self.device not in DEVICES:
            raise bad(f"unknown device {self.device!r}", f"use one of {', '.join(DEVICES)}")
        if self.dtype not in DTYPES:
            raise bad(f"unknown dtype {self.dtype!r}", f"use one of {', '.join(DTYPES)}")
        if self.distributed not in DISTRIBUTED:
            raise bad(f"unknown distributed mode {self.distributed!r}", f"use one of {', '.join(DISTRIBUTED)}")
        if self.distributed == "fsdp" and self.bench:
            raise bad("--distributed fsdp does not support --bench (a mid-run bench needs the whole model "
                      "on one rank)", "drop --bench and run `mens bench` on the finished run, or use "
                      "--distributed ddp")
        if self.backend != "scratch" and not self.model:
            raise bad("no base model given", "pass --model PATH_OR_HUB_ID (or --backend scratch)")
        for name in ("lora_r", "lora_alpha", "seq_len", "micro_batch", "grad_accum", "log_interval",
                     "loss_chunk"):
            if int(getattr(self, name)) < 1:
                raise bad(f"{name} must be >= 1, got {getattr(self, name)}", f"set {name} to a positive integer")
        for name in ("eval_interval", "save_interval", "warmup_steps", "keep_checkpoints", "bench_every"):
            if int(getattr(self, name)) < 0:
                raise bad(f"{name} must be >= 0, got {getattr(self, name)}", f"set {name} to 0 or more")
        if not self.lr > 0:
            raise bad(f"lr must be positive, got {self.lr}", "set --lr, e.g. 2e-4")
        if not 0 <= self.lora_dropout < 1:
            raise bad(f"lora_dropout must be in [0, 1), got {self.lora_dropout}", "set --lora-dropout")
        if not 0 <= self.val_split < 1:
            raise bad(f"val_split must be in [0, 1), got {self.val_split}", "set --val-split, e.g. 0.05")
        if self.max_steps is not None and self.max_steps < 1:
            raise bad(f"max_steps must be >= 1, got {self.max_steps}", "drop --max-steps or make it positive")
        if self.max_steps is None and not self.epochs > 0:
            raise bad(f"epochs must be positive, got {self.epochs}", "set --epochs")
        if self.tokens_per_pass is not None and self.tokens_per_pass < 1:
            raise bad(f"tokens_per_pass must be >= 1, got {self.tokens_per_pass}", "drop --tokens-per-pass or make it positive")
        if self.ce_last_k is not None and self.ce_last_k < 1:
            raise bad(f"ce_last_k must be >= 1, got {self.ce_last_k}", "drop --ce-last-k or make it positive")
        if self.min_rating is not None and not 1 <= self.min_rating <= 5:
            raise bad(f"min_rating must be 1-5, got {self.min_rating}", "set --min-rating 1..5")
        if self.gradient_checkpointing not in ("auto", "on", "off"):
            raise bad(f"gradient_checkpointing must be auto, on or off, got {self.gradient_checkpointing!r}",
                      "fix the value")
        for sink in self.report_to:
            if sink not in ("jsonl", "tensorboard", "none"):
                raise bad(f"unknown report sink {sink!r}", "use jsonl or tensorboard")
        if isinstance(self.target_modules, str) and self.target_modules != "all-linear":
            self.target_modules = [m.strip() for m in self.target_modules.split(",") if m.strip()]
        self.adam_betas = tuple(float(b) for b in self.adam_betas)
        return self


FIELD_NAMES = {f.name for f in fields(TrainConfig)}


def load_yaml(path: str | Path) -> dict[str, Any]:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise MensError("config file not found", str(path), "check the --config path")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise MensError(f"malformed YAML: {getattr(err, 'problem', err)}", where, "fix the config file") from None
    if not isinstance(data, dict):
        raise MensError("config must be a mapping of field: value", str(path), "see docs/training.md")
    data = {k.replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(set(data) - FIELD_NAMES)
    if unknown:
        raise MensError(f"unknown config key(s): {', '.join(unknown)}", str(path),
                        "see docs/training.md for the field names")
    return data


def resolve_config(flags: dict[str, Any], yaml_path: str | None = None,
                   recommended_preset: str | None = None) -> TrainConfig:
    """Merge recommended preset < named preset < YAML < flags (None in `flags` = not given)."""
    from mens.train.presets import PRESETS

    from_yaml = load_yaml(yaml_path) if yaml_path else {}
    given = {k: v for k, v in flags.items() if v is not None and k in FIELD_NAMES}
    preset_name = given.get("preset") or from_yaml.get("preset") or recommended_preset
    values: dict[str, Any] = {}
    if preset_name:
        if preset_name not in PRESETS:
            raise MensError(f"unknown preset {preset_name!r}", "--preset", f"use one of {', '.join(PRESETS)}")
        values.update(PRESETS[preset_name].values)
        values["preset"] = preset_name
    values.update(from_yaml)
    values.update(given)
    try:
        cfg = TrainConfig(**values)
    except TypeError as err:
        raise MensError(f"bad training config: {err}", yaml_path or "flags", "see docs/training.md") from None
    return cfg.validate()


def replace(cfg: TrainConfig, **changes: Any) -> TrainConfig:
    return dataclasses.replace(cfg, **changes)
