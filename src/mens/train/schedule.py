"""The learning-rate schedule: transformers' `get_scheduler` schedules (cosine, linear, constant,
constant_with_warmup), after an optional curriculum at its own constant rate.

Why not `transformers.get_scheduler` itself: importing `transformers.optimization` imports
`trainer_utils`, which imports all of peft and bitsandbytes (~1.1 s in every training process,
each rank of the quickstart's base and its fine-tune) for four one-line formulas. These are
transformers' formulas, written the same way so that every factor is the same float
(tests/train/test_optim.py compares them step by step with `get_scheduler`'s).
"""

from __future__ import annotations

import functools
import math

from mens.train.config import TrainConfig


def warmup_steps(cfg: TrainConfig, total_steps: int) -> int:
    """`warmup_ratio` of the steps (rounded up, as transformers does) when given, else `warmup_steps`."""
    steps = math.ceil(cfg.warmup_ratio * total_steps) if cfg.warmup_ratio is not None else cfg.warmup_steps
    return min(steps, total_steps)


def _constant(_step: int) -> float:  # no warmup: transformers' "constant" has none
    return 1


def _constant_with_warmup(step: int, *, warmup: int) -> float:
    if step < warmup:
        return float(step) / float(max(1.0, warmup))
    return 1.0


def _linear(step: int, *, warmup: int, total: int) -> float:
    if step < warmup:
        return float(step) / float(max(1, warmup))
    return max(0.0, float(total - step) / float(max(1, total - warmup)))


def _cosine(step: int, *, warmup: int, total: int) -> float:  # half a cycle: from 1 down to 0
    if step < warmup:
        return float(step) / float(max(1, warmup))
    progress = float(step - warmup) / float(max(1, total - warmup))
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * 0.5 * 2.0 * progress)))


def lr_factor(name: str, warmup: int, total: int):
    """The multiplier of the base lr at each step for the schedule `name` (a picklable partial, as
    transformers' are, so a scheduler's state_dict stays the same)."""
    if name == "constant":
        return _constant
    if name == "constant_with_warmup":
        return functools.partial(_constant_with_warmup, warmup=warmup)
    if name in ("linear", "cosine"):
        return functools.partial(_linear if name == "linear" else _cosine, warmup=warmup, total=total)
    raise ValueError(f"unknown lr_scheduler_type {name!r}")  # TrainConfig.validate names the choices first


def build_scheduler(cfg: TrainConfig, optimizer, total_steps: int):
    """The schedule `cfg.lr_scheduler_type` after a linear warmup, as a torch LambdaLR.
    With a curriculum, its steps run first at the constant `curriculum_lr` (after the warmup) and
    the named schedule, warmup included, covers the steps after them: a copy mechanism forms at a
    low rate that the code which follows learns too slowly at (docs/performance.md)."""
    from torch.optim.lr_scheduler import LambdaLR

    lead = cfg.curriculum_steps
    after = lr_factor(cfg.lr_scheduler_type, warmup_steps(cfg, total_steps - lead), total_steps - lead)
    if not lead:
        return LambdaLR(optimizer, after)
    warm = warmup_steps(cfg, lead)
    scale = (cfg.curriculum_lr or cfg.lr) / cfg.lr

    def factor(step: int) -> float:
        if step < lead:
            return scale * (step / warm if step < warm else 1.0)
        return after(step - lead)

    return LambdaLR(optimizer, factor)
