"""Atomic checkpoints: `RUN/checkpoints/step-N/` holds the trainable weights, the optimizer,
the scheduler, every rank's RNG states and the data position (a `Progress`). The directory is
written under a temporary name and renamed, so a crash never leaves half a checkpoint, and a
resume restores everything that decides the next loss: it continues the same trajectory.
The final weights (`save_pretrained`: adapter, or the whole model) land in the run dir file by
file, by rename.

Nothing is unpickled on resume: weights are safetensors, RNG states and progress JSON, and the
optimizer and scheduler states (tensors and plain values) load with `weights_only=True`, which
refuses any other object. `files.json` records each file's size and sha256 at save time; a
checkpoint is intact when every recorded file is there with its size and hash and every part
loads. Resume takes the newest intact one, saying which it skipped and why."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from mens.hf import first_line
from mens.files import atomic_path

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
    loss_scale: dict | None = None  # fp16-mixed: the loss scaler's state (GradScaler.state_dict())

    def to_dict(self) -> dict:
        return asdict(self)


def rng_state(cuda: bool = False) -> dict:
    """This process's RNG states (python, numpy, torch, and CUDA's for a run on CUDA) as plain
    JSON data. A CPU run leaves CUDA alone where a GPU is present: reading its RNG would start a
    CUDA context (seconds, and GPU memory) in every checkpointing process."""
    import numpy as np
    import torch

    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": [version, list(internal), gauss],
             "numpy": [name, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
             "torch": torch.get_rng_state().tolist()}
    if cuda and torch.cuda.is_available():
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def set_rng_state(state: dict, cuda: bool = False) -> None:
    """Restore `state` (rng_state's); CUDA's only for a run on CUDA (`cuda`)."""
    import numpy as np
    import torch

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if cuda and "cuda" in state and torch.cuda.is_available():
        # A run saved where more GPUs were visible (a torchrun job, CUDA_VISIBLE_DEVICES unset) may
        # resume on fewer: restore the devices there are (set_rng_state_all would index past them).
        for index, saved in enumerate(state["cuda"][:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(torch.tensor(saved, dtype=torch.uint8), index)


def save_checkpoint(run_dir: str | Path, model, optimizer, scheduler, progress: Progress,
                    rng_states: list[dict], keep: int = 2, weights: dict | None = None,
                    optimizer_state: dict | None = None) -> Path:
    """Write checkpoints/step-N atomically and prune all but the newest `keep` (0 = keep all).
    A sharded (FSDP) model passes its gathered `weights` and `optimizer_state`
    (mens.train.distributed.full_state); the files are the same as an unsharded run's.
    Optimizer and scheduler states are tensors and plain values (`torch.save`, read back with
    `weights_only=True`); the RNG states and the progress are JSON; `files.json` records every
    file's size (and sha256 up to HASH_LIMIT bytes) so a resume can tell an intact checkpoint."""
    import torch
    from safetensors.torch import save_file

    from mens.train.model import trainable_state

    final = Path(run_dir) / CHECKPOINTS / f"step-{progress.step}"
    with atomic_path(final) as tmp:
        tmp.mkdir()
        trainable = trainable_state(model)
        if weights is not None:
            trainable = {k: weights[k] for k in trainable}
        # Copied straight to the host: safetensors refuses tensors that share memory (tied
        # embeddings), and a clone on the GPU would add a copy of every trainable weight there.
        state = {k: v.detach().to("cpu", copy=True).contiguous() for k, v in trainable.items()}
        save_file(state, str(tmp / "trainable.safetensors"))
        torch.save(optimizer_state if optimizer_state is not None else optimizer.state_dict(),
                   tmp / "optimizer.pt")
        torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        (tmp / "rng.json").write_text(json.dumps(rng_states))
        (tmp / "progress.json").write_text(json.dumps(progress.to_dict(), indent=2))
        (tmp / FILES).write_text(json.dumps({f.name: _file_record(f) for f in sorted(tmp.iterdir())}, indent=2))
    if keep:
        for old in list_checkpoints(run_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return final


# The record of a checkpoint's files; files up to HASH_LIMIT bytes also get a sha256 (an 80 GB
# optimizer state would take minutes to hash at every save; its size and loading still check it).
FILES = "files.json"
HASH_LIMIT = 256 * 2**20


def _file_record(path: Path) -> dict:
    size = path.stat().st_size
    record: dict = {"size": size}
    if size <= HASH_LIMIT:
        record["sha256"] = _sha256(path)
    return record


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Checkpoints as written (a progress.json inside), oldest first; temp dirs of a crashed
    write are ignored. Whether one is intact is `read_checkpoint`'s business."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name))
             and (p / "progress.json").is_file()]
    return [p for _, p in sorted(found)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


# What a killed training process can leave in its run dir: save_pretrained's and the scratch
# builder's temp folders, and atomic_path's temps of the files and checkpoints training writes.
_RUN_TEMPS = re.compile(r"^\.(?:save|scratch-save)\.[a-z0-9_]{8}$")
RUN_OUTPUTS = ("training_manifest.json", "MODEL_CARD.md")


def remove_run_leftovers(run_dir: str | Path) -> list[Path]:
    """Delete the temp files and folders a killed run left (`RUN/.save.*`, `RUN/checkpoints/
    .step-N.*.tmp`, manifest and card temps); the next run calls this before it writes."""
    from mens.files import remove_leftovers

    run = Path(run_dir)
    gone = [p for name in RUN_OUTPUTS for p in remove_leftovers(run / name)]
    if run.is_dir():
        for item in run.iterdir():
            if _RUN_TEMPS.match(item.name) and item.is_dir():
                shutil.rmtree(item, ignore_errors=True)
                gone.append(item)
    root = run / CHECKPOINTS
    if root.is_dir():
        steps = {m.group(1) for p in root.iterdir() if (m := re.match(r"^\.(step-\d+)\.", p.name))}
        for step in sorted(steps):
            gone += remove_leftovers(root / step)
    return gone


# Artifacts a --force-restart clears (never anything else in the directory): the earlier run's
# training record, its final model (an adapter, or whole weights with their config and tokenizer)
# and the judgements of that model — a restart that fails must not leave the old weights, or a
# gate receipt that passed them, beside the new run's manifest.
VERDICT_FILES = ("eval_results.json", "benchmark_results.json", "gate_receipt.json", "report.html")
RUN_ARTIFACTS = ("telemetry.jsonl", "training_manifest.json", "MODEL_CARD.md", "tensorboard",
                 "adapter_config.json", "adapter_model.safetensors",
                 "model.safetensors", "model.safetensors.index.json", "config.json", "generation_config.json",
                 "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                 *VERDICT_FILES)
RUN_ARTIFACT_PATTERNS = ("model-*-of-*.safetensors",)  # sharded weights


def clear_earlier_run(run_dir: str | Path, checkpoints: str = CHECKPOINTS) -> None:
    """--force-restart: remove the earlier run's artifacts (RUN_ARTIFACTS and its `checkpoints`
    folder; mens dpo / rl keep TRL's in their own) and nothing else of the folder."""
    run = Path(run_dir)
    targets = [run / checkpoints] + [run / name for name in RUN_ARTIFACTS]
    targets += [p for pattern in RUN_ARTIFACT_PATTERNS for p in sorted(run.glob(pattern))]
    for target in targets:
        shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)


class CorruptCheckpoint(Exception):
    """A checkpoint that is not intact: a file missing, of another size or hash than recorded at
    save time, or not loadable (a torn file, or a pickle that is more than tensors and plain data)."""


def check_files(path: str | Path) -> None:
    """The cheap half of "intact" (no loading): every file a checkpoint needs is there, and each
    file recorded in files.json at save time has its recorded size and sha256."""
    path = Path(path)
    if (path / FILES).is_file():
        try:
            record = json.loads((path / FILES).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CorruptCheckpoint(f"{FILES} unreadable ({first_line(exc)})") from None
        if not isinstance(record, dict):
            raise CorruptCheckpoint(f"{FILES} is not a mapping of file: size")
        for name, want in record.items():
            f = path / name
            if not f.is_file():
                raise CorruptCheckpoint(f"{name} is missing")
            size = want.get("size") if isinstance(want, dict) else None
            if f.stat().st_size != size:
                raise CorruptCheckpoint(f"{name} is {f.stat().st_size} bytes, {size} when saved")
            if "sha256" in want and _sha256(f) != want["sha256"]:
                raise CorruptCheckpoint(f"{name} does not match the sha256 recorded when saved")
    for name in ("trainable.safetensors", "optimizer.pt", "scheduler.pt", "progress.json"):
        if not (path / name).is_file():
            raise CorruptCheckpoint(f"{name} is missing")
    if not (path / "rng.json").is_file() and not (path / "rng.pt").is_file():
        raise CorruptCheckpoint("rng.json is missing")


def newest_intact(run_dir: str | Path, rank: int = 0) -> Path | None:
    """The newest checkpoint that passes `check_files` (None when the run has none), warning
    about each newer one that does not; checkpoints that all fail are a one-line error. Run
    before any heavy work; `resume` then loads it (and falls back further if loading fails)."""
    return _newest(list_checkpoints(run_dir), run_dir, rank, check_files)[0]


def _newest(found: list[Path], run_dir, rank: int, read) -> tuple[Path | None, object]:
    from mens.errors import MensError
    from mens.progress import warn

    skipped: list[str] = []
    for path in reversed(found):
        try:
            got = read(path)
        except CorruptCheckpoint as why:
            skipped.append(f"{path.name}: {why}")
            if rank == 0:
                warn(f"mens: warning: checkpoint {path} is not intact ({why}); resuming from an older one "
                    "if there is one (--force-restart starts over instead)")
            continue
        return path, got
    if skipped:
        raise MensError(f"no intact checkpoint to resume from ({'; '.join(skipped)})",
                        str(Path(run_dir) / CHECKPOINTS), "rerun with --force-restart to start over")
    return None, None


def read_checkpoint(path: str | Path) -> dict:
    """Everything a checkpoint holds, read and checked, nothing applied yet: raises
    CorruptCheckpoint unless it is intact. Nothing is unpickled: the optimizer and scheduler
    states load with `weights_only=True` (tensors and plain values only), the rest is
    safetensors and JSON."""
    import pickle

    import torch
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    check_files(path)
    current = "trainable.safetensors"
    try:
        out = {"weights": load_file(str(path / current))}
        for current in ("optimizer.pt", "scheduler.pt"):
            out[current[:-3]] = torch.load(path / current, map_location="cpu", weights_only=True)
        if (path / "rng.json").is_file():
            current = "rng.json"
            out["rng"] = json.loads((path / current).read_text(encoding="utf-8"))
        else:  # written before rng.json: numpy's state is an array, the one non-tensor it holds
            import numpy as np

            current = "rng.pt"
            allowed = [np._core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]
            with torch.serialization.safe_globals(allowed):
                out["rng"] = _plain_rng(torch.load(path / current, weights_only=True))
        current = "progress.json"
        out["progress"] = Progress(**json.loads((path / current).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError, RuntimeError, EOFError, pickle.UnpicklingError,
            SafetensorError, RecursionError) as exc:
        raise CorruptCheckpoint(f"{current} cannot be loaded ({first_line(exc)})") from None
    if not isinstance(out["rng"], list) or not out["rng"]:
        raise CorruptCheckpoint("rng.json holds no RNG states")
    return out


def _plain_rng(states: list[dict]) -> list[dict]:
    """RNG states of an older checkpoint (tuples, arrays, tensors) in rng_state()'s JSON form."""
    out = []
    for s in states:
        version, internal, gauss = s["python"]
        name, keys, pos, has_gauss, cached = s["numpy"]
        plain = {"python": [version, list(internal), gauss],
                 "numpy": [name, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
                 "torch": s["torch"].tolist()}
        if "cuda" in s:
            plain["cuda"] = [t.tolist() for t in s["cuda"]]
        out.append(plain)
    return out


def load_checkpoint(path: str | Path, model, optimizer, scheduler, rank: int = 0) -> Progress:
    """Restore weights, optimizer, scheduler and this rank's RNG; return the data position.
    Into a sharded (FSDP) model each rank loads its shard of the full weights and state.
    Raises CorruptCheckpoint (before changing anything) when the checkpoint is not intact."""
    return apply_checkpoint(read_checkpoint(path), Path(path), model, optimizer, scheduler, rank)


def apply_checkpoint(saved: dict, path: Path, model, optimizer, scheduler, rank: int = 0) -> Progress:
    import torch

    params = dict(model.named_parameters())
    missing = [k for k in saved["weights"] if k not in params]
    if missing:
        from mens.errors import MensError

        raise MensError(f"checkpoint does not match the model ({len(missing)} unknown weights, e.g. {missing[0]})",
                        str(path), "rerun with --force-restart to start over")
    sharded = any(hasattr(p, "device_mesh") for p in params.values())
    with torch.no_grad():
        for name, value in saved["weights"].items():
            target = params[name]
            value = value.to(target.device, target.dtype)
            if hasattr(target, "device_mesh"):  # an FSDP shard (DTensor): this rank's part of the weight
                from torch.distributed.tensor import distribute_tensor

                value = distribute_tensor(value, target.device_mesh, target.placements, src_data_rank=None)
            target.copy_(value)
    if sharded:
        from mens.train.distributed import load_optimizer_state

        load_optimizer_state(model, optimizer, saved["optimizer"])
    else:
        optimizer.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    states = saved["rng"]
    on_cuda = any(p.is_cuda for p in params.values())
    set_rng_state(states[min(rank, len(states) - 1)], cuda=on_cuda)
    return saved["progress"]


def resume(run_dir: str | Path, model, optimizer, scheduler, rank: int = 0,
           newest: Path | None = None) -> tuple[Path | None, Progress]:
    """Restore the newest intact checkpoint of the run (from `newest` down, when given): (its
    path, its progress), or (None, a fresh Progress) when the run has none. One that is not
    intact is skipped with a warning naming why; when none is, a one-line error."""
    found = list_checkpoints(run_dir)
    if newest is not None:
        found = [p for p in found if _step(p) <= _step(newest)]
    path, saved = _newest(found, run_dir, rank, read_checkpoint)
    if path is None:
        return None, Progress()
    return path, apply_checkpoint(saved, path, model, optimizer, scheduler, rank)


def _step(path: Path) -> int:
    return int(path.name.split("-")[1])


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


@contextlib.contextmanager
def cache_on_for_saving(model):
    """config.use_cache as inference wants it while `model` is saved: training turns the KV cache
    off (backends, speed), and a saved config.json keeping that false is read by other loaders
    (merge had to put it back). Restored after, for a model that trains or benches on."""
    config = getattr(model, "config", None)
    off = getattr(config, "use_cache", None) is False
    if off:
        config.use_cache = True
    try:
        yield
    finally:
        if off:
            config.use_cache = False


def save_pretrained(run_dir: Path, model, tokenizer, weights: dict | None = None) -> None:
    """`save_pretrained` of the model — a PEFT model writes its adapter, a transformers model
    all its weights — plus the tokenizer with the chat template training used; each file lands
    in the run dir by an atomic rename. A sharded (FSDP) model passes its gathered `weights`
    (mens.train.distributed.full_state)."""
    import tempfile

    kwargs: dict = {"state_dict": weights} if weights is not None else {}
    peft_config = getattr(model, "peft_config", {}).get("default")
    if getattr(peft_config, "trainable_token_indices", None):
        # The rows --chat-template and --add-words added are saved as PEFT's trainable-token rows,
        # which replace those rows whatever the base holds there; every other row is the base's.
        # PEFT would also save both grown matrices whole (its "auto": the vocabulary changed),
        # 2 x 136M weights for Qwen2, for nothing. Loaders grow the base first (mens.inference.load_peft).
        kwargs["save_embedding_layers"] = False
    tmp = Path(tempfile.mkdtemp(prefix=".save.", dir=run_dir))
    try:
        with cache_on_for_saving(model):
            model.save_pretrained(tmp, **kwargs)
        tokenizer.save_pretrained(tmp)
        (tmp / "README.md").unlink(missing_ok=True)  # PEFT's stub card; ours is MODEL_CARD.md
        for item in sorted(tmp.iterdir()):
            os.replace(item, run_dir / item.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
