"""The run's precision, decided in one place: `decide_precision(cfg, device, bf16)` says what the
weights are stored in and what they compute in, and every part that needs it asks it — the
config (a `--dtype` a backend cannot take is refused before any model loads), the backends
(the weights' dtype) and `mens.train.prepare` (autocast, the loss scaler, the manifest's dtype).

- `--dtype bf16 | fp16 | fp32` names the weights' dtype; `fp16-mixed` keeps fp32 master weights.
- Otherwise the backend's default: QLoRA computes in bf16 (its definition) except on a CPU whose
  bf16 matmuls are slow (no AVX-512 BF16 or AMX, as the probe measures it: 6x slower than fp32's
  on a 2-core AVX2 EPYC, where one QLoRA step of the 0.5B shape took minutes), where it computes
  in fp32 — the same NF4 codes, dequantised to fp32; LoRA's frozen base is bf16 where a GPU does
  bf16 natively, else fp32; full, scratch (and any other backend) keep fp32
  master weights, since AdamW updates on bf16 weights lose most small steps.
- fp32 master weights compute in bf16 under autocast where bf16 pays (`auto`: a GPU with bf16, or
  a CPU whose bf16 matmuls measure faster than fp32's: 1.5-1.9x the tokens/s at the same loss on
  an AMD EPYC; elsewhere bf16 is emulated or slow, 0.7x on a Xeon without AMX, so fp32), or when
  asked (`bf16-mixed`); `fp16-mixed` computes in fp16, whose narrow range needs the loss scaled.

Light at import (the config imports it): torch loads inside the functions.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from mens.errors import MensError

if TYPE_CHECKING:
    from mens.train.config import TrainConfig

# (backend, --dtype) pairs no run can take: what is wrong, and what to do instead.
REFUSED = {
    ("qlora", "fp16-mixed"): ("--dtype fp16-mixed does not apply to qlora (QLoRA computes in bf16, or fp32 on a CPU)",
                              "use --backend lora with --dtype fp16-mixed, or qlora with --dtype auto"),
}

SLOW_CPU_BF16 = ("mens: warning: bf16 matmuls are slower than fp32 on this CPU (no AVX-512 BF16 or AMX, or "
                 "measured slower: `mens probe`), so bf16-mixed trains slower than fp32 here; pass --dtype auto "
                 "(fp32 on this CPU) unless you want bf16's arithmetic")


@dataclass(frozen=True)
class Precision:
    """What the weights are stored in, and what they compute in."""

    weights: Any                 # torch dtype of the weights (manifest `dtype`)
    autocast_dtype: Any = None   # fp32 master weights computing in bf16/fp16 under autocast, else None
    device: str = "cpu"          # cuda | mps | cpu (autocast's device type)
    warning: str | None = None   # said once by the main rank: a choice that trains slower than the default

    @functools.cached_property  # asked at every forward pass
    def autocast(self) -> Callable[[], Any]:
        """The forward passes' context: torch.autocast for mixed precision, else a no-op."""
        import torch

        if self.autocast_dtype is None:
            return contextlib.nullcontext
        return lambda: torch.autocast(self.device, dtype=self.autocast_dtype)

    @property
    def scales_loss(self) -> bool:
        """fp16 compute needs dynamic loss scaling (prepare.loss_scaler)."""
        import torch

        return self.autocast_dtype == torch.float16

    @property
    def exact(self) -> bool:
        """fp32 arithmetic throughout: the preflight's loss must match the model's own to the bit."""
        import torch

        return self.autocast_dtype is None and self.weights == torch.float32

    @property
    def name(self) -> str:
        """The manifest's `dtype`: `float32`, `bfloat16`, `float32+bf16-autocast`, …"""
        import torch

        name = str(self.weights).replace("torch.", "")
        if self.autocast_dtype is not None:
            name += f"+{ {torch.bfloat16: 'bf16', torch.float16: 'fp16'}[self.autocast_dtype]}-autocast"
        return name


def check_dtype(cfg: "TrainConfig") -> None:
    """Refuse a `--dtype` the backend cannot take (the config calls this before any model loads)."""
    if (refused := REFUSED.get((cfg.backend, cfg.dtype))) is not None:
        raise MensError(refused[0], "training config", refused[1])


def decide_precision(cfg: "TrainConfig", device: str, bf16: bool, weights: Any = None) -> Precision:
    """The precision of `cfg` on `device` (`bf16`: the device computes in bf16 natively, as the
    probe measured it). `weights`: the dtype the backend built the weights in, when they are
    built (a backend registered outside this module decides its own); else the dtype `--dtype`
    names or the backend's default (see the module doc)."""
    import torch

    check_dtype(cfg)
    if weights is None:
        named = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
                 "fp16-mixed": torch.float32}
        if cfg.backend == "qlora":
            default = torch.bfloat16 if bf16 or device != "cpu" else torch.float32
        elif cfg.backend == "lora":
            default = torch.bfloat16 if bf16 and device != "cpu" else torch.float32
        else:
            default = torch.float32
        weights = named.get(cfg.dtype, default)
    compute, warning = None, None
    if weights == torch.float32:
        if cfg.dtype == "fp16-mixed":
            compute = torch.float16
        elif cfg.dtype == "bf16-mixed" or (cfg.dtype == "auto" and device in ("cuda", "cpu") and bf16):
            compute = torch.bfloat16
        if cfg.dtype == "bf16-mixed" and device == "cpu" and not bf16:
            warning = SLOW_CPU_BF16
    return Precision(weights, compute, device, warning)
