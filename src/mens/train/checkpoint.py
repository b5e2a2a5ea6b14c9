"""Atomic checkpoints: `RUN/checkpoints/step-N/` holds the trainable weights, the optimizer,
the scheduler, every rank's RNG states and the data position (a `Progress`). The directory is
written under a temporary name and renamed, so a crash never leaves half a checkpoint, and a
resume restores everything that decides the next loss: it continues the same trajectory.
The final weights (`save_pretrained`: adapter, or the whole model) land in the run dir file by
file, by rename."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from mens.records import atomic_path

CHECKPOINTS = "checkpoints"
_STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass
class Progress:
    """Where training is: resuming from it replays nothing and skips nothing."""

    step: int = 0                 # optimizer steps done
    epoch: int = 0                # current epoch (0-based)
    batch_in_epoch: int = 0       # micro-batches of this epoch already consumed (global, all ranks)
    supervised_tokens: int = 0    # seen so far
    input_tokens: int = 0
    train_seconds: float = 0.0    # wall time spent training in earlier sessions
    last_loss: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def rng_state() -> dict:
    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: str | Path, model, optimizer, scheduler, progress: Progress,
                    rng_states: list[dict], keep: int = 2, weights: dict | None = None,
                    optimizer_state: dict | None = None) -> Path:
    """Write checkpoints/step-N atomically and prune all but the newest `keep` (0 = keep all).
    A sharded (FSDP) model passes its gathered `weights` and `optimizer_state`
    (mens.train.distributed.full_state); the files are the same as an unsharded run's."""
    import torch
    from safetensors.torch import save_file

    from mens.train.model import trainable_state

    final = Path(run_dir) / CHECKPOINTS / f"step-{progress.step}"
    with atomic_path(final) as tmp:
        tmp.mkdir()
        trainable = trainable_state(model)
        if weights is not None:
            trainable = {k: weights[k] for k in trainable}
        state = {k: v.contiguous().clone() for k, v in trainable.items()}
        save_file(state, str(tmp / "trainable.safetensors"))
        torch.save(optimizer_state if optimizer_state is not None else optimizer.state_dict(),
                   tmp / "optimizer.pt")
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        torch.save(rng_states, tmp / "rng.pt")
        (tmp / "progress.json").write_text(json.dumps(progress.to_dict(), indent=2))
    if keep:
        for old in list_checkpoints(run_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints, oldest first (temp dirs of a crashed write are ignored)."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name))
             and (p / "progress.json").is_file()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def load_checkpoint(path: str | Path, model, optimizer, scheduler, rank: int = 0) -> Progress:
    """Restore weights, optimizer, scheduler and this rank's RNG; return the data position.
    Into a sharded (FSDP) model each rank loads its shard of the full weights and state."""
    import torch
    from safetensors.torch import load_file

    path = Path(path)
    saved = load_file(str(path / "trainable.safetensors"))
    params = dict(model.named_parameters())
    missing = [k for k in saved if k not in params]
    if missing:
        from mens.errors import MensError

        raise MensError(f"checkpoint does not match the model ({len(missing)} unknown weights, e.g. {missing[0]})",
                        str(path), "rerun with --force-restart to start over")
    sharded = any(hasattr(p, "device_mesh") for p in params.values())
    with torch.no_grad():
        for name, value in saved.items():
            target = params[name]
            value = value.to(target.device, target.dtype)
            if hasattr(target, "device_mesh"):  # an FSDP shard (DTensor): this rank's part of the weight
                from torch.distributed.tensor import distribute_tensor

                value = distribute_tensor(value, target.device_mesh, target.placements, src_data_rank=None)
            target.copy_(value)
    optim_state = torch.load(path / "optimizer.pt", map_location="cpu", weights_only=False)
    if sharded:
        from mens.train.distributed import load_optimizer_state

        load_optimizer_state(model, optimizer, optim_state)
    else:
        optimizer.load_state_dict(optim_state)
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    states = torch.load(path / "rng.pt", weights_only=False)
    set_rng_state(states[min(rank, len(states) - 1)])
    return Progress(**json.loads((path / "progress.json").read_text()))


# ---------------------------------------------------------------- the final weights

def weights_sha256(model) -> str:
    """A hash of the trainable weights (ranks of a data-parallel run must agree). An FSDP shard
    is gathered weight by weight first (a collective: every rank calls this), so the hash is of
    the full weights."""
    import hashlib

    from mens.train.model import trainable_state

    h = hashlib.sha256()
    for name, value in sorted(trainable_state(model).items()):
        if hasattr(value, "full_tensor"):
            value = value.full_tensor()
        h.update(name.encode())
        h.update(value.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()


def save_pretrained(run_dir: Path, model, tokenizer, weights: dict | None = None) -> None:
    """`save_pretrained` of the model — a PEFT model writes its adapter, a transformers model
    all its weights — plus the tokenizer with the chat template training used; each file lands
    in the run dir by an atomic rename. A sharded (FSDP) model passes its gathered `weights`
    (mens.train.distributed.full_state)."""
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix=".save.", dir=run_dir))
    try:
        model.save_pretrained(tmp, **({"state_dict": weights} if weights is not None else {}))
        tokenizer.save_pretrained(tmp)
        (tmp / "README.md").unlink(missing_ok=True)  # PEFT's stub card; ours is MODEL_CARD.md
        for item in sorted(tmp.iterdir()):
            os.replace(item, run_dir / item.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
