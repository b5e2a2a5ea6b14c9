"""What a `TrainConfig` must satisfy, checked by `TrainConfig.validate` before any model or data
loads: the choices its fields declare, the settings that exclude each other, and every number's
range as rows of a table. The first broken rule is the error, one line naming the field (so
`resolve_config` can say whether the value came from a flag or the YAML file) and what to do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Callable

from mens.errors import MensError, did_you_mean


def bad(what: str, todo: str) -> MensError:
    return MensError(what, "training config", todo)


@dataclass(frozen=True)
class Range:
    """`names` must each satisfy `holds` (a None value is never checked), else
    `{name} {must}, got {value}` and `todo` ({name}: the field, {flag}: its flag)."""

    names: tuple[str, ...]
    holds: Callable[[Any], bool]
    must: str
    todo: str
    when: Callable[[Any], bool] = lambda cfg: True  # the rule applies to this config at all


def _positive(*names: str, todo: str = "set {name} to a positive integer") -> Range:
    return Range(names, lambda v: v >= 1, "must be >= 1", todo)


# In the order they are checked: a value can break two rows (lr nan: not positive, not finite),
# and the row it breaks first is the one named.
NUMBERS = (
    _positive("lora_r", "lora_alpha", "seq_len", "micro_batch", "grad_accum", "log_interval", "loss_chunk", "nproc"),
    Range(("eval_interval", "save_interval", "warmup_steps", "keep_checkpoints", "bench_every"), lambda v: v >= 0,
          "must be >= 0", "set {name} to 0 or more"),
    Range(("lr",), lambda v: v > 0, "must be positive", "set --lr, e.g. 2e-4"),
    Range(("lora_dropout",), lambda v: 0 <= v < 1, "must be in [0, 1)", "set --lora-dropout"),
    Range(("warmup_ratio",), lambda v: 0 <= v <= 1, "must be in [0, 1]", "set --warmup-ratio, e.g. 0.03"),
    Range(("val_split",), lambda v: 0 <= v < 1, "must be in [0, 1)", "set --val-split, e.g. 0.05"),
    _positive("max_steps", todo="drop --max-steps or make it positive"),
    Range(("epochs",), lambda v: v > 0, "must be positive", "set --epochs", when=lambda cfg: cfg.max_steps is None),
    _positive("tokens_per_pass", todo="drop --tokens-per-pass or make it positive"),
    _positive("ce_last_k", todo="drop --ce-last-k or make it positive"),
    Range(("min_rating",), lambda v: 1 <= v <= 5, "must be 1-5", "set --min-rating 1..5"),
    Range(("lr", "epochs", "weight_decay", "max_grad_norm", "lora_dropout", "val_split", "scratch_dropout",
           "curriculum_lr"), math.isfinite, "must be a finite number", "set {name} to a finite number"),
    Range(("weight_decay",), lambda v: v >= 0, "must be >= 0", "set --weight-decay, e.g. 0.0"),
    Range(("max_grad_norm",), lambda v: v >= 0, "must be >= 0 (0 = no clipping)", "set --max-grad-norm"),
    Range(("adam_betas",), lambda v: all(0 <= b < 1 for b in v), "must be in [0, 1)", "e.g. --adam-betas 0.9 0.999"),
    Range(("seed",), lambda v: 0 <= v < 2**32, "must be 0 to 2**32-1", "set --seed to a non-negative integer"),
    _positive("bench_max_new_tokens", "bench_batch_size", "bench_limit", todo="set {flag} to a positive integer"),
    Range(("curriculum_lr",), lambda v: v > 0, "must be > 0", "set --curriculum-lr, e.g. 1e-3"),
    Range(("curriculum_steps",), lambda v: v >= 0, "must be >= 0", "set --curriculum-steps"),
    Range(("add_words",), lambda v: v >= 0, "must be >= 0", "set --add-words to 0 (none) or a count, e.g. 150"),
)
SCRATCH_NUMBERS = (
    _positive("scratch_layers", "scratch_heads", "scratch_width", "scratch_ffn", "scratch_positions",
              todo="set {flag} to a positive integer"),
    Range(("scratch_vocab",), lambda v: v == 0 or v >= 261, "must be 0 (the VoxTokenizer) or at least 261 "
          "(bytes + specials)", "set --scratch-vocab 0 or e.g. 1024"),
    Range(("scratch_dropout",), lambda v: 0 <= v < 1, "must be in [0, 1)", "set --scratch-dropout"),
)


def check_ranges(cfg, rules: tuple[Range, ...]) -> None:
    for rule in rules:
        if not rule.when(cfg):
            continue
        for name in rule.names:
            value = getattr(cfg, name)
            if value is not None and not rule.holds(value):
                got = list(value) if isinstance(value, tuple) else value
                flag = f"--{name.replace('_', '-')}"
                raise bad(f"{name} {rule.must}, got {got}", rule.todo.format(name=name, flag=flag))


def check_choices(cfg) -> None:
    """A field declared with `choices` (a list field: each item) holds one of them."""
    for f in fields(cfg):
        allowed, value = f.metadata.get("choices"), getattr(cfg, f.name)
        for item in (value if isinstance(value, list) else [value]):
            if allowed and item is not None and item not in allowed:
                raise bad(f"unknown {f.name} value {item!r}", f"use one of {', '.join(allowed)}")


def check_combinations(cfg) -> None:
    """Settings that exclude each other, and the base model a backend needs."""
    from mens.train.precision import check_dtype

    if cfg.distributed == "fsdp" and cfg.bench:
        raise bad("--distributed fsdp does not support --bench (a mid-run bench needs the whole model "
                  "on one rank)", "drop --bench and run `mens bench` on the finished run, or use "
                  "--distributed ddp")
    check_dtype(cfg)
    if cfg.optim == "muon" and cfg.backend not in ("full", "scratch"):
        raise bad(f"--optim muon trains whole weight matrices, not --backend {cfg.backend}'s adapters",
                  "use --backend full or scratch with --optim muon, or --optim adamw")
    if cfg.optim == "muon" and cfg.distributed == "fsdp":
        raise bad("--optim muon needs each weight matrix whole; --distributed fsdp shards them",
                  "use --distributed ddp with --optim muon, or --optim adamw")
    if cfg.add_words and cfg.backend == "scratch":
        raise bad("--add-words grows a base's vocabulary; --backend scratch learns its tokenizer from the data "
                  "already", "drop --add-words, or raise --scratch-vocab")
    if cfg.add_words and cfg.data_dir is None:
        raise bad("--add-words counts the words of the training answers, and there are none",
                  "pass --data-dir, or drop --add-words")
    if cfg.backend != "scratch" and not cfg.model:
        raise bad("no base model given", "pass --model PATH_OR_HUB_ID (or --backend scratch)")


def check_curriculum(cfg) -> None:
    if bool(cfg.curriculum_data) != (cfg.curriculum_steps > 0):
        raise bad("curriculum_data and curriculum_steps go together: got "
                  f"curriculum_data={cfg.curriculum_data!r}, curriculum_steps={cfg.curriculum_steps}",
                  "pass both --curriculum-data PATH and --curriculum-steps N (or neither)")
    if cfg.curriculum_steps and cfg.max_steps and cfg.curriculum_steps >= cfg.max_steps:
        raise bad(f"curriculum_steps ({cfg.curriculum_steps}) must be fewer than max_steps ({cfg.max_steps}): "
                  "they are counted in it", "raise --max-steps or lower --curriculum-steps")


def check_scratch_shape(cfg) -> None:
    """The scratch model's shape (a known preset, heads that divide the width) and its positions
    against --seq-len and the bench's answers, before any data loads."""
    if cfg.backend != "scratch":
        return
    from mens.positions import check_length

    positions = cfg.scratch_model_shape().n_positions
    check_length(cfg.seq_len, positions, "--seq-len", f"the scratch model's --scratch-positions {positions}")
    if cfg.bench and cfg.bench_max_new_tokens >= positions:
        raise bad(f"--bench-max-new-tokens {cfg.bench_max_new_tokens} leaves no room for a prompt in the "
                  f"scratch model's {positions} positions", f"pass --bench-max-new-tokens {positions // 2} "
                  "or less, or raise --scratch-positions")


def check_chat_template(cfg) -> None:
    """An unknown template name or a missing file, and a template that does not compile as
    apply_chat_template compiles it: named now, not as a traceback once the model has loaded."""
    if cfg.chat_template is None:
        return
    from jinja2 import TemplateError
    from transformers.utils.chat_template_utils import _compile_jinja_template

    from mens.chat_template import resolve_chat_template

    text = resolve_chat_template(cfg.chat_template, "--chat-template")
    try:
        _compile_jinja_template(text)
    except TemplateError as err:
        line = f" (line {err.lineno})" if getattr(err, "lineno", None) else ""
        raise MensError(f"the chat template is not valid Jinja: {err}{line}", cfg.chat_template,
                        "fix the template file, or pass --chat-template chatml") from None


def check_levers_and_targets(cfg) -> None:
    from mens.train.levers import LEVERS, unknown as unknown_levers

    if wrong := unknown_levers(cfg.speed_levers):
        raise bad(f"unknown speed lever {wrong[0]!r}", did_you_mean(
            wrong[0].lstrip("-"), set(LEVERS) | {"all", "none"}, f"use all, none or names from {', '.join(LEVERS)}"))
    if isinstance(cfg.target_modules, str) and not cfg.target_modules.strip(", "):
        raise bad("target_modules is empty", "drop --target-modules (all-linear) or name the modules")
    if isinstance(cfg.target_modules, list) and not cfg.target_modules:
        raise bad("target_modules is empty", "drop target_modules (all-linear) or name the modules")


def check_config(cfg) -> None:
    """Every rule, in order (the field types are checked before: TrainConfig.validate)."""
    check_choices(cfg)
    check_combinations(cfg)
    check_ranges(cfg, NUMBERS)
    check_chat_template(cfg)
    check_curriculum(cfg)
    check_ranges(cfg, SCRATCH_NUMBERS)
    check_scratch_shape(cfg)
    check_levers_and_targets(cfg)
