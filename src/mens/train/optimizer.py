"""The optimizer side of a run: `build_optimizer` (`--optim`), the schedule over it, DDP's shared
gradient sum and fp16-mixed's loss scaler, as one `Optimization` record the loop steps with
(mens.train.prepare builds it after FSDP sharding, so the optimizer holds the sharded parameters).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from mens.errors import MensError
from mens.train import distributed
from mens.train.checkpoint import Progress
from mens.train.config import OPTIM_ALIASES, TrainConfig
from mens.train.schedule import build_scheduler


@dataclass
class Optimization:
    """What the loop steps with."""

    params: list                        # the trainable parameters, as the optimizer holds them
    optimizer: Any
    scheduler: Any
    shared_sum: Any = None              # DDP on one host's CPU: the gradient sum through shared memory
    scaler: Any = None                  # fp16-mixed's loss scaler (torch.amp.GradScaler), else None


def build_optimization(cfg: TrainConfig, params: list, device: str, mode: str | None, model,
                       total_steps: int) -> Optimization:
    """The optimizer over `params` (the trainable parameters as they are now), its schedule over
    `total_steps`, and under DDP the gradient sum through shared memory where every rank is a CPU
    process of this host (a collective: every rank calls it)."""
    optimizer = build_optimizer(cfg, params, device, mode, model=model)
    shared = distributed.shared_sum(sum(p.numel() for p in params), device) if mode == "ddp" else None
    return Optimization(params, optimizer, build_scheduler(cfg, optimizer, total_steps), shared)


def loss_scaler(device: str, mode: str | None, progress: Progress):
    """fp16-mixed's dynamic loss scaling (torch.amp.GradScaler; FSDP's sharded one under FSDP):
    the loss is multiplied by a scale before backward so small gradients do not underflow fp16,
    the gradients are divided by it before clipping, and a step whose gradients overflowed is
    skipped and the scale halved. Its state travels in the checkpoint's progress, so a resumed
    run goes on with the scale it had."""
    if mode == "fsdp":
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        scaler = ShardedGradScaler(device)
    else:
        scaler = torch.amp.GradScaler(device)
    if progress.loss_scale:
        scaler.load_state_dict(progress.loss_scale)
    return scaler


def build_optimizer(cfg: TrainConfig, params: list, device: str, mode: str | None = None, model=None):
    """`cfg.optim` over the trainable parameters, no weight decay on biases and norms: torch's
    AdamW (fused on CUDA and CPU, as transformers' Trainer defaults to: one kernel for every
    tensor instead of a loop of small ops), or bitsandbytes' 8-bit AdamW (`adamw_8bit`) and its
    paged form (`paged_adamw_8bit`; on a CPU bitsandbytes falls back to unpaged state, saying so),
    or Muon for the hidden weight matrices with AdamW for the rest (`muon`, mens.train.muon)."""
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
    groups = [g for g in groups if g["params"]]
    name = OPTIM_ALIASES.get(cfg.optim, cfg.optim)
    if name == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.adam_betas, fused=device in ("cuda", "cpu"))
    if name == "muon":  # docs/training.md, "Muon"
        from mens.train.muon import MuonWithAdamW, split_for_muon

        matrices, others = split_for_muon(model, params)
        rest = [{"params": [p for p in others if p.ndim >= 2], "weight_decay": cfg.weight_decay},
                {"params": [p for p in others if p.ndim < 2], "weight_decay": 0.0}]
        return MuonWithAdamW(matrices, [g for g in rest if g["params"]], lr=cfg.lr, betas=cfg.adam_betas,
                             weight_decay=cfg.weight_decay, fused=device in ("cuda", "cpu"))
    if mode == "fsdp":
        raise MensError(f"--optim {cfg.optim} does not support FSDP-sharded parameters", "--optim",
                        "use --optim adamw with --distributed fsdp, or --distributed ddp")
    try:
        import bitsandbytes.optim as bnb_optim
    except ImportError as err:
        raise MensError(f"--optim {cfg.optim} needs bitsandbytes ({err})", "--optim",
                        "pip install bitsandbytes, or use --optim adamw") from None
    cls = bnb_optim.PagedAdamW8bit if name == "paged_adamw_8bit" else bnb_optim.AdamW8bit
    return cls(groups, lr=cfg.lr, betas=cfg.adam_betas)
