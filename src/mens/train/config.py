"""`TrainConfig`: every hyper-parameter of a run in one validated dataclass.

Values come from four layers, later ones winning: the probe's recommended preset (only when no
preset is named), the named preset, a YAML file (`--config run.yaml`, keys = field names), and
command-line flags. The resolved config is printed into the manifest, so a run describes itself.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from mens.errors import MensError, did_you_mean

from mens.train.backends import BUILDERS as BACKENDS  # the registry: a new backend is one builder
DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "bf16", "fp16", "fp32", "bf16-mixed", "fp16-mixed")
DISTRIBUTED = ("auto", "ddp", "fsdp")
# `optim` takes mens's names and transformers' TrainingArguments names for the same optimizers.
OPTIM_ALIASES = {"adamw_torch": "adamw", "adamw_torch_fused": "adamw", "adamw_bnb_8bit": "adamw_8bit"}
OPTIMIZERS = ("adamw", "muon", "adamw_8bit", "paged_adamw_8bit", *OPTIM_ALIASES)
SCHEDULERS = ("cosine", "linear", "constant", "constant_with_warmup")  # transformers' get_scheduler names


def opt(default: Any = None, help: str | None = None, *, group: str, choices: tuple[str, ...] | None = None,
        flag: str | None = None, metavar: str | None = None, factory: Any = None) -> Any:
    """A TrainConfig field and its `mens train` flag in one declaration (mens.train.cli reads the
    metadata): the flag is `--field-name` unless `flag` names another; `choices` also validate."""
    meta = {"help": help, "group": group, "choices": choices, "flag": flag, "metavar": metavar}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


_RUN, _ADAPT, _OPT, _SPEED, _DATA, _SCRATCH, _CADENCE, _PROV = (
    "what to train", "adapters", "optimisation", "speed", "data", "scratch backend", "run", "provenance")


@dataclass
class TrainConfig:
    # what to train, on what, into where
    model: str | None = opt(None, "base model: a local HF model directory or a hub id", group=_RUN)
    data_dir: str | None = opt(None, "directory with train.jsonl (and optionally val.jsonl), or one .jsonl/.parquet "
                               "file of training rows", group=_RUN)
    output_dir: str | None = opt(None, "run directory (adapter, manifest, telemetry, checkpoints)", group=_RUN)
    backend: str = opt("qlora", "default qlora", group=_RUN, choices=BACKENDS)
    preset: str | None = opt(None, "tiny, cpu, 8g, 16g, 24g, 80g (default: what `mens probe` recommends)", group=_RUN)
    device: str = opt("auto", group=_RUN, choices=DEVICES)
    dtype: str = opt("auto", "compute dtype; qlora computes in bf16 (fp32 on a CPU without fast bf16); "
                     "bf16-mixed = fp32 weights and optimizer, matmuls in bf16 under autocast, on a GPU or a CPU "
                     "(1.5x faster on CPUs with AVX-512 BF16 or AMX, several times slower on CPUs without); "
                     "auto = bf16-mixed where the GPU or CPU has native "
                     "bf16, else fp32 (full and scratch backends); "
                     "fp16-mixed = the same in fp16 with dynamic loss scaling, for GPUs without bf16 (T4, V100)",
                     group=_RUN, choices=DTYPES)
    distributed: str = opt("auto", "under torchrun: ddp (each rank holds the model) or fsdp (weights, gradients and "
                           "optimizer state sharded across ranks); default auto = ddp; ignored in one process",
                           group=_RUN, choices=DISTRIBUTED)
    nproc: int = opt(1, "train data-parallel in N local processes (as torchrun --standalone --nproc_per_node N; "
                     "a CPU's cores are split among them): a step takes N times the rows", group=_RUN)
    # adapters
    lora_r: int = opt(16, group=_ADAPT)
    lora_alpha: int = opt(32, group=_ADAPT)
    lora_dropout: float | None = opt(None, "default 0.05; 0 where an MoE base's experts train (PEFT's expert "
                                     "adapters take no dropout)", group=_ADAPT)
    target_modules: list[str] | str = opt("all-linear", "comma-separated module names (default all-linear)",
                                          group=_ADAPT)
    dora: bool = opt(False, "DoRA instead of plain LoRA", group=_ADAPT)
    # optimisation
    lr: float = opt(2e-4, group=_OPT)
    optim: str = opt("adamw", "adamw (torch), muon (torch's Muon for the hidden weight matrices, AdamW for the "
                     "rest; full and scratch), adamw_8bit / paged_adamw_8bit (bitsandbytes)", group=_OPT,
                     choices=OPTIMIZERS)
    lr_scheduler_type: str = opt("cosine", "learning-rate schedule after warmup (transformers' get_scheduler)",
                                 group=_OPT, choices=SCHEDULERS)
    warmup_steps: int = opt(10, group=_OPT)
    warmup_ratio: float | None = opt(None, "warm up over this fraction of the steps (wins over --warmup-steps)",
                                     group=_OPT)
    weight_decay: float = opt(0.0, group=_OPT)
    max_grad_norm: float = opt(1.0, group=_OPT)
    adam_betas: tuple[float, float] = opt((0.9, 0.999), "two floats: AdamW's beta1 beta2", group=_OPT)
    epochs: float = opt(1.0, group=_OPT)
    max_steps: int | None = opt(None, "optimizer steps (wins over --epochs)", group=_OPT)
    seq_len: int = opt(512, group=_OPT)
    micro_batch: int = opt(4, "packed rows per micro-batch", group=_OPT)
    grad_accum: int = opt(2, "micro-batches per optimizer step (per process)", group=_OPT)
    seed: int = opt(42, group=_OPT)
    # data
    packing: bool = opt(True, "train on one pair per row instead of packing rows", group=_DATA, flag="--no-packing")
    ce_last_k: int | None = opt(None, "supervise only the last K assistant tokens", group=_DATA)
    min_rating: int | None = opt(None, "drop pairs rated below this (1-5)", group=_DATA)
    system_prompt: str | None = opt(None, "system prompt for pairs that have none", group=_DATA)
    chat_template: str | None = opt(None, "chat format: chatml or a Jinja template file; the <|…|> markers it "
                                    "writes that the vocabulary lacks become special tokens (one id each) and the "
                                    "embeddings grow to fit (default: the tokenizer's own template, ChatML when it "
                                    "has none)", metavar="NAME|PATH", group=_DATA)
    add_words: int = opt(0, "grow the base's vocabulary with the N most frequent words of the training answers "
                         "that its tokenizer splits into pieces, each a whole-word token (with and without its "
                         "leading space) whose rows start at its pieces' mean and train (lora, qlora, full; "
                         "docs/training.md)", metavar="N", group=_DATA)
    lenient: bool = opt(False, "skip malformed lines, counting them", group=_DATA)
    val_split: float = opt(0.05, "fraction held out when the data dir has no val.jsonl", group=_DATA)
    raw_text: str | None = opt(None, "directory of text files trained on every token", metavar="PATH", group=_DATA)
    curriculum_data: str | None = opt(None, "pairs (a file or a directory, as --data-dir) trained on first, for "
                                      "--curriculum-steps steps, before the data; e.g. `mens generate-data --kind "
                                      "copy-drills` (a scratch tokenizer learns from both)", metavar="PATH", group=_DATA)
    curriculum_steps: int = opt(0, "optimizer steps on --curriculum-data before the data (counted in --max-steps)",
                                group=_DATA)
    curriculum_lr: float | None = opt(None, "constant learning rate of the curriculum steps (default --lr); the "
                                      "--lr-scheduler-type schedule, warmup included, starts after them", group=_DATA)
    # scratch backend shape (preset name from mens.train.scratch, then overrides)
    scratch_shape: str = opt("default", "scratch model preset (see mens.train.scratch)", group=_SCRATCH)
    scratch_layers: int | None = opt(None, group=_SCRATCH)
    scratch_heads: int | None = opt(None, group=_SCRATCH)
    scratch_width: int | None = opt(None, group=_SCRATCH)
    scratch_ffn: int | None = opt(None, group=_SCRATCH)
    scratch_positions: int | None = opt(None, group=_SCRATCH)
    scratch_dropout: float | None = opt(None, group=_SCRATCH)
    scratch_arch: str | None = opt(None, "gpt2 (learned positions) or llama (rotary positions, SwiGLU); default: "
                                   "the preset's", group=_SCRATCH, choices=("gpt2", "llama"))
    scratch_vocab: int = opt(0, "0 = the fixed 133-id VoxTokenizer; N = a byte-level BPE of N ids learned from "
                             "the run's training text (see docs/scratch.md)", group=_SCRATCH)
    scratch_bpe_spaces: str = opt("apart", "the learned BPE and the space before a word: apart (a word never takes "
                                  "it: a name is the same pieces wherever it stands) or joined (GPT-2's ` word`: "
                                  "~20%% fewer tokens on code)", group=_SCRATCH, choices=("apart", "joined"))
    # cadence
    log_interval: int = opt(1, group=_CADENCE)
    eval_interval: int = opt(50, "optimizer steps between validations (0 = only at the end)", group=_CADENCE)
    save_interval: int = opt(50, "optimizer steps between checkpoints (0 = only at the end / on interrupt)",
                             group=_CADENCE)
    keep_checkpoints: int = opt(2, group=_CADENCE)
    bench: str | None = opt(None, "held-out bench (dir or .jsonl): log greedy pass@1 to telemetry while training",
                            group=_CADENCE, metavar="PATH")
    bench_every: int = opt(0, "steps between bench runs (0 = only at the end)", group=_CADENCE)
    bench_limit: int = opt(8, "bench tasks per run, to keep it cheap", group=_CADENCE)
    bench_max_new_tokens: int = opt(256, "answer length cap of those bench runs (as `mens bench "
                                    "--max-new-tokens`; the pipeline passes its bench's)", group=_CADENCE)
    bench_batch_size: int = opt(8, "answers generated together in those bench runs (larger is faster on a CPU: "
                                "54 tasks took 5.1 s in one batch, 7.7 s in batches of 8; the pipeline passes its "
                                "bench's)", group=_CADENCE)
    # speed knobs read by mens.train.speed
    gradient_checkpointing: str = opt("auto", group=_SPEED, choices=("auto", "on", "off"))
    loss_chunk: int = opt(1024, "rows per LM-head/cross-entropy chunk", group=_SPEED)
    tokens_per_pass: int | None = opt(None, "tokens per forward/backward pass (a micro-batch may run in row "
                                      "groups; same gradients, less activation memory)", group=_SPEED)
    speed_levers: list[str] | str = opt("all", "the model patches to use: all, none, or a comma list of names "
                                        "(all,-NAME turns one off); each applies only where it is exact "
                                        "(docs/training.md, Speed levers)", group=_SPEED, metavar="LEVERS")
    # reporting and provenance
    report_to: list[str] = opt(None, "extra metric sinks; telemetry.jsonl is always written", group=_CADENCE,
                               choices=("jsonl", "tensorboard", "wandb", "mlflow", "trackio", "none"), factory=lambda: ["jsonl"])
    upstream_model_id: str | None = opt(None, group=_PROV)
    license: str | None = opt(None, group=_PROV)
    attribution_required: bool | None = opt(None, group=_PROV)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["adam_betas"] = list(self.adam_betas)
        return out

    def scratch_model_shape(self):
        """The scratch model's ScratchShape: `scratch_shape`'s preset with the scratch_* overrides."""
        from mens.train.scratch import scratch_shape

        return scratch_shape(self.scratch_shape, n_layer=self.scratch_layers, n_head=self.scratch_heads,
                             n_embd=self.scratch_width, n_inner=self.scratch_ffn, n_positions=self.scratch_positions,
                             dropout=self.scratch_dropout, arch=self.scratch_arch)

    def validate(self) -> "TrainConfig":
        """Check every field (mens.train.config_rules) and normalise `target_modules`; the first
        broken rule raises a one-line MensError naming the field."""
        from mens.train.config_rules import check_config

        for f in fields(self):  # types first (a YAML `lr: fast` is named, not a traceback later)
            setattr(self, f.name, _typed(f.name, getattr(self, f.name)))
        check_config(self)
        if isinstance(self.target_modules, str) and self.target_modules != "all-linear":
            self.target_modules = [m.strip() for m in self.target_modules.split(",") if m.strip()]
        return self


def field_type(name: str) -> type:
    """The plain type a field holds (int for `int | None`, str for `list[str] | str`, list for
    `list[str]`, tuple for the betas): what a flag parses and what a YAML value must be."""
    hint = _HINTS[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        hint = str if str in args else args[0]
    return typing.get_origin(hint) or hint


def _typed(name: str, value: Any) -> Any:
    want = field_type(name)
    if value is None:
        return value
    if want is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if want is float and isinstance(value, str):  # YAML 1.1 reads `lr: 2e-4` (no dot) as a string
        try:
            return float(value)
        except ValueError:
            pass
    if want is tuple and isinstance(value, (list, tuple)) and len(value) == 2 \
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return tuple(float(v) for v in value)
    if want is list and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    if name in ("target_modules", "speed_levers") and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    if want in (int, str, bool) and isinstance(value, want) and not (want is int and isinstance(value, bool)):
        return value
    shape = {tuple: "two numbers", list: "a list of strings", float: "a number", int: "a whole number",
             str: "a string", bool: "true or false"}[want]
    raise MensError(f"{name} must be {shape}, got {value!r}", "training config",
                    f"fix {name} in the YAML config or its --{name.replace('_', '-')} flag")


FIELD_NAMES = {f.name for f in fields(TrainConfig)}
_HINTS = typing.get_type_hints(TrainConfig)


def load_yaml(path: str | Path) -> dict[str, Any]:
    from mens.files import read_yaml

    data = read_yaml(path, "config file", "give a YAML file of TrainConfig fields (docs/training.md)") or {}
    if not isinstance(data, dict):
        raise MensError("config must be a mapping of field: value", str(path), "see docs/training.md")
    return canonical_fields(data, str(path))


# The names users bring from TRL / transformers' TrainingArguments / PEFT's LoraConfig, and what
# they mean here. Booleans that select a value (bf16: true) are turned into it by _ALIAS_VALUES.
ALIASES = {
    "learning_rate": "lr", "num_train_epochs": "epochs", "per_device_train_batch_size": "micro_batch",
    "gradient_accumulation_steps": "grad_accum", "max_length": "seq_len", "max_seq_length": "seq_len",
    "r": "lora_r", "use_dora": "dora", "model_name_or_path": "model", "logging_steps": "log_interval",
    "eval_steps": "eval_interval", "save_steps": "save_interval", "save_total_limit": "keep_checkpoints",
    "warmup": "warmup_steps", "bf16": "dtype", "fp16": "dtype",
    "dataset_dir": "data_dir",
}


def _alias_value(key: str, value: Any, where: str) -> Any:
    if key in ("bf16", "fp16"):
        if not isinstance(value, bool):
            raise MensError(f"{key} must be true or false, got {value!r}", where, f"or set dtype: {key}")
        return key if value else None
    if key == "report_to" and isinstance(value, str):
        return [value]                       # TRL takes one sink as a string
    if key == "gradient_checkpointing" and isinstance(value, bool):
        return "on" if value else "off"      # TrainingArguments' boolean
    return value


def canonical_fields(data: dict[Any, Any], where: str, extra: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Config keys → TrainConfig fields: dashes as underscores, TRL/HF names as aliases
    (adam_beta1/2 → adam_betas), an unknown key named with the closest field as the fix."""
    out: dict[str, Any] = {}
    betas = {}
    for raw, value in data.items():
        key = str(raw).replace("-", "_")
        if key in ("adam_beta1", "adam_beta2"):
            betas[key] = value
            continue
        name = key if key in FIELD_NAMES or key in extra else ALIASES.get(key)
        if name is None:
            raise MensError(f"unknown config key {raw!r}", where, did_you_mean(
                key, FIELD_NAMES | set(ALIASES) | extra, "see docs/training.md for the field names"))
        value = _alias_value(key, value, where)
        if value is None and key in ("bf16", "fp16"):
            continue                         # bf16: false says nothing about the dtype
        if name in out and out[name] != value:
            raise MensError(f"{raw!r} and another key both set {name}", where, "keep one of them")
        out[name] = value
    if betas:
        out["adam_betas"] = [betas.get("adam_beta1", 0.9), betas.get("adam_beta2", 0.999)]
    return out


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
            from_file = preset_name == from_yaml.get("preset") and not given.get("preset")
            where = str(yaml_path) if from_file else "--preset"
            raise MensError(f"unknown preset {preset_name!r}", where, f"use one of {', '.join(PRESETS)}")
        values.update(PRESETS[preset_name].values)
        values["preset"] = preset_name
    values.update(from_yaml)
    values.update(given)
    try:
        cfg = TrainConfig(**values)
    except TypeError as err:
        raise MensError(f"bad training config: {err}", yaml_path or "flags", "see docs/training.md") from None
    try:
        return cfg.validate()
    except MensError as exc:  # name where the bad value came from: the YAML file or the flag
        name = _named_field(exc.what)
        if exc.where == "training config" and name in given:
            exc.where = f"--{name.replace('_', '-')}"
        elif exc.where == "training config" and name in from_yaml and yaml_path:
            exc.where = f"{yaml_path}: {name}"
        raise


def _named_field(what: str) -> str | None:
    """The TrainConfig field an error of `validate` is about (`lr must be …`, `unknown dtype
    value …`), or None."""
    import re

    match = re.match(r"(?:unknown )?([a-z][a-z0-9_]*)\b", what)
    return match.group(1) if match and match.group(1) in FIELD_NAMES else None


def replace(cfg: TrainConfig, **changes: Any) -> TrainConfig:
    return dataclasses.replace(cfg, **changes)
