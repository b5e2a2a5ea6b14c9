"""The speed plan: how the loop runs a micro-batch, decided once per run and recorded.

The loop (`mens.train.prepare`) calls `optimize_for_training(model, cfg)` once, after the
backend's builder: it applies the patching levers of `mens.train.levers` (each where its rule
says it computes exactly what it replaces; `--speed-levers` turns them off) and returns a
`SpeedPlan` — tokens per pass, activation checkpointing, what each lever patched and why a lever
is off — which is recorded in the manifest (`speed`) and handed to `split_for_memory` for every
micro-batch. The LM head + cross-entropy lever lives in `mens.train.loss`; what each lever
bought, measured on `bench/train_vs_trl.py`, is in docs/performance.md ("The levers, measured").

Beyond the patches:
- Micro-batch splitting (`split_for_memory`): on CPU a packed micro-batch runs in row groups
  of at most `tokens_per_pass` tokens (at most CPU_ACTIVATION_BUDGET of estimated activations,
  never less than one row); the loss is divided by the whole window's supervised tokens, so
  the summed gradient is the micro-batch's. No recomputation, unlike checkpointing.
- Activation checkpointing only when asked (`gradient_checkpointing: on`), or under `auto`
  every n-th layer when one pass's estimated activations would not fit in half the free
  memory: it recomputes those layers' forward, so it is the last resort.
- CPU memory hygiene: threads, glibc heap tuning and trims (`mens.train.allocator`).
- No KV cache during training (`use_cache=False`).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Iterator

import torch

from mens.train.allocator import trim_heap, tune_heap
from mens.train.levers import apply_levers

DEFAULT_CPU_TOKENS_PER_PASS = 512
# glibc's heap is trimmed before each pass only when a pass holds at least this much estimated
# activation memory: a trim hands the last pass's freed activations back to the kernel and the
# next pass faults them in again. That lowers the peak where passes are big (the 0.5B shape:
# ~1 GB a pass) and only costs time where they are small (the quickstart's scratch model, 31 MB
# a pass: 40 of a 135 ms step).
TRIM_HEAP_MIN_BYTES = 256 << 20
# CPU passes hold at most this much estimated activation memory (micro-batch splitting): at the 0.5B shape
# that is one 512-token row per pass; at its 4-layer cut a whole 4x512 micro-batch.
CPU_ACTIVATION_BUDGET = 1 << 30


@dataclass
class SpeedPlan:
    """How the loop runs a micro-batch, decided once per run (recorded in the manifest)."""

    tokens_per_pass: int | None = None    # most tokens in one forward/backward pass; None = whole micro-batch
    checkpoint_every: int | None = None   # activation checkpointing on every n-th decoder layer; None = off
    trim_heap: bool = False               # return freed heap memory before each pass (CPU)
    patched: dict[str, int] = field(default_factory=dict)  # lever → modules/weights it changed
    off: dict[str, str] = field(default_factory=dict)      # lever (or packing) → why it is off, wholly or in part

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- entry point

def optimize_for_training(model, cfg) -> SpeedPlan:
    """Apply the levers to `model` in place, decide the passes and checkpointing, and return the plan."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(inner, "config", None) is not None:
        inner.config.use_cache = False
    device = _device_of(model)
    cpu = device.type == "cpu"
    if cpu:
        _cpu_threads()
        tune_heap()
    from mens.train.runtime import dropout_off

    with dropout_off(model):  # the levers' probes compare outputs: no dropout in them
        patched, off = apply_levers(model, inner, cpu, getattr(cfg, "speed_levers", "all"))
    if cpu:
        trim_heap()  # loading and quantising left freed blocks in the heap
    per_pass = tokens_per_pass(cfg, device, inner)
    trim = cpu and _pass_bytes(inner, cfg, per_pass) >= TRIM_HEAP_MIN_BYTES
    plan = SpeedPlan(tokens_per_pass=per_pass, trim_heap=trim, patched=patched, off=off)
    mode = getattr(cfg, "gradient_checkpointing", "auto")
    if mode == "on":
        plan.checkpoint_every = 1
    elif mode == "auto":
        plan.checkpoint_every = _checkpoint_every(inner, cfg, plan.tokens_per_pass, device)
    if plan.checkpoint_every:
        enable_checkpointing(inner, plan.checkpoint_every)
    return plan


def _device_of(model) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _cpu_threads() -> None:
    # torch defaults to one thread per logical CPU; on SMT machines the second hyper-thread
    # only adds contention to AMX/AVX-512 matmuls. Respect an explicit OMP_NUM_THREADS.
    if os.environ.get("OMP_NUM_THREADS"):
        return
    try:
        physical = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        physical = os.cpu_count() or 1
    torch.set_num_threads(max(1, physical))


# ---------------------------------------------------------------- micro-batch splitting

def tokens_per_pass(cfg, device: torch.device | str, inner=None) -> int | None:
    """How many tokens one forward/backward pass may hold; None = the whole micro-batch.
    `--tokens-per-pass` wins (0 = whole); on CPU at least one row and DEFAULT_CPU_TOKENS_PER_PASS,
    and as many as CPU_ACTIVATION_BUDGET of `inner`'s estimated activations hold."""
    explicit = getattr(cfg, "tokens_per_pass", None)
    if explicit:
        return int(explicit)
    if torch.device(device).type == "cpu":
        floor = max(DEFAULT_CPU_TOKENS_PER_PASS, int(getattr(cfg, "seq_len", 0) or 0))
        per_token = _activation_bytes_per_token(inner) if inner is not None else None
        return max(floor, int(CPU_ACTIVATION_BUDGET // per_token) if per_token else 0)
    return None


def _pass_bytes(inner, cfg, per_pass: int | None) -> float:
    """Estimated activation bytes of one pass (the whole micro-batch when it is smaller than
    `per_pass`); infinite when the model's shape is unknown, so the heap is trimmed."""
    per_token = _activation_bytes_per_token(inner)
    if not per_token:
        return math.inf
    micro_batch = int(getattr(cfg, "seq_len", 512) or 512) * int(getattr(cfg, "micro_batch", 1) or 1)
    return float(per_token * min(per_pass or micro_batch, micro_batch))


def split_for_memory(batch, plan: SpeedPlan) -> Iterator:
    """The micro-batch's passes (`row_groups`), lazily: with `plan.trim_heap` the heap is
    trimmed before each pass, when the previous pass's activations are free (a no-op under
    tcmalloc)."""
    for part in row_groups(batch, plan.tokens_per_pass):
        if plan.trim_heap:
            trim_heap()
        yield part


def row_groups(batch, tokens_per_pass: int | None) -> list:
    """The micro-batch as consecutive row groups of at most `tokens_per_pass` tokens (None or 0:
    the whole micro-batch), each with its padding trimmed. Summing the group losses gives the
    micro-batch loss exactly."""
    budget = tokens_per_pass
    rows, width = batch.input_ids.shape
    if not budget or rows * width <= budget or rows == 1:
        return [batch]
    from mens.train.data import Batch, IGNORE

    per = max(1, budget // width)
    parts = []
    for start in range(0, rows, per):
        ids = batch.input_ids[start:start + per]
        pos = batch.position_ids[start:start + per]
        tgt = batch.targets[start:start + per]
        # Trailing columns that are padding in every row of the group carry no loss and are
        # attended by nothing real (padding is its own segment): drop them.
        live = (tgt != IGNORE).any(0).nonzero()
        end = int(live.max()) + 2 if len(live) else 1
        end = min(end, width)
        parts.append(Batch(ids[:, :end], pos[:, :end], tgt[:, :end],
                           int((tgt != IGNORE).sum()), int(ids.shape[0] * end)))
    return parts


# ---------------------------------------------------------------- checkpointing

# Saved activations per token per decoder layer with lean LoRA, in units of hidden-size
# elements of the compute dtype (measured with torch.autograd.graph.saved_tensors_hooks on the
# Qwen2 shape: ~10 hidden-widths for attention + norms, 4 intermediate-widths for the MLP).
def _activation_bytes_per_token(inner) -> int | None:
    """Saved activations per token through the whole decoder with the levers on: ~10 hidden
    widths for attention, norms and inputs plus 5 intermediate widths for the MLP, 2 bytes each
    (measured with saved_tensors_hooks on the Qwen2 shape: 72 KB per token and layer)."""
    conf = getattr(inner, "config", None)
    hidden = getattr(conf, "hidden_size", None)
    layers = getattr(conf, "num_hidden_layers", None)
    if not hidden or not layers:
        return None
    inter = getattr(conf, "intermediate_size", 4 * hidden) or 4 * hidden
    return int(layers * (10 * hidden + 5 * inter) * 2)


def _checkpoint_every(inner, cfg, tokens_per_pass: int | None, device: torch.device) -> int | None:
    """None when one pass's activations fit in half the free memory; else checkpoint every
    n-th layer with the largest n that fits (a checkpointed layer keeps only its input)."""
    per_token = _activation_bytes_per_token(inner)
    if not per_token:
        return None
    tokens = tokens_per_pass or (
        int(getattr(cfg, "seq_len", 512)) * int(getattr(cfg, "micro_batch", 1)))
    need = tokens * per_token
    budget = 0.5 * _free_bytes(device)
    if need <= budget:
        return None
    # checkpointing every n-th layer keeps ~(1 - 1/n) of the activations
    return max(1, int(1.0 / max(1e-9, 1.0 - budget / need)))


def _free_bytes(device: torch.device) -> float:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free)
    try:
        with open("/proc/meminfo") as fh:
            info = {line.split(":")[0]: line.split()[1] for line in fh}
        return float(info["MemAvailable"]) * 1024
    except (OSError, KeyError):  # pragma: no cover - non-Linux
        return math.inf


def enable_checkpointing(inner, every_n_layers: int = 1) -> None:
    """Checkpoint every n-th decoder layer (non-reentrant: works with frozen inputs and kwargs);
    n = 2 halves both the saved activations' reduction and the recomputation."""
    # transformers 5 renamed the switch (the old name warns) and added every_n_layers.
    if hasattr(inner, "activation_checkpointing_enable"):
        inner.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False},
                                              every_n_layers=every_n_layers)
    elif hasattr(inner, "gradient_checkpointing_enable"):
        inner.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        return
    if hasattr(inner, "enable_input_require_grads"):
        inner.enable_input_require_grads()
