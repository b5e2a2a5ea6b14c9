"""Everything before the first optimizer step, in the order it happens: distributed set-up, the
run directory (resume or start over), preflight, the backend's model, the speed plan, the data,
a finite first forward, FSDP sharding, optimizer and schedule, resume, manifest and telemetry.
`mens.train.loop.train` calls `open_run` then `prepare`, and runs the steps on the `Session`.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.distributed as dist

from mens.errors import MensError
from mens.files import hold_lock
from mens.hf import read_manifest
from mens.progress import say, warn
from mens.train import distributed, preflight
from mens.train.allocator import in_use as allocator_in_use
from mens.train.backends import Built, build
from mens.train.checkpoint import Progress, clear_earlier_run, newest_intact, remove_run_leftovers, resume
from mens.train.config import TrainConfig
from mens.train.data import DataStats, build_examples, epoch_batches, file_sha256, raw_examples, split_validation
from mens.train.family import packing_blocker
from mens.train.loss import batch_loss, one_row, reference_loss
from mens.train.manifest import Manifest
from mens.train.model import decoder_and_head
from mens.train.optimizer import Optimization, build_optimization, loss_scaler
from mens.train.optimizer import build_optimizer  # noqa: F401  (its home before optimizer.py; tests import it here)
from mens.train.precision import Precision, decide_precision
from mens.train.runtime import dropout_off
from mens.train.speed import SpeedPlan, optimize_for_training, split_for_memory
from mens.train.telemetry import Telemetry


@dataclass
class Run:
    """This process's place in the run: its rank, device, directory, and what is there already."""

    rank: int
    world: int
    mode: str | None          # None in one process, else ddp | fsdp
    device: str               # cuda | mps | cpu
    dev: torch.device         # this rank's device
    info: Any                 # mens.train.probe.Probe
    run_dir: Path
    previous: dict            # the manifest found in run_dir ({} when starting over)
    resume_from: Path | None  # the checkpoint to resume from
    restart: bool = False     # --force-restart: the earlier run's artifacts go once every check has passed

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def completed(self) -> bool:
        return self.previous.get("status") == "completed"

    def all_sum(self, value: torch.Tensor) -> torch.Tensor:
        if self.world > 1:
            dist.all_reduce(value, op=dist.ReduceOp.SUM)
        return value


@dataclass
class Model:
    """What the steps call: the backend's model, how it computes, and its pieces as the loop runs them."""

    built: Built
    precision: Precision
    decoder: Any = None                 # the decoder body the loop calls (the FSDP root when sharded)
    head: Any = None                    # the LM head, called only at supervised positions
    sharded: distributed.Sharded | None = None
    plan: SpeedPlan | None = None
    packing_off: str | None = None      # why packing is off for this base (mens.train.family), else None

    def split(self, batch):
        """A micro-batch's passes under the speed plan (mens.train.speed.split_for_memory)."""
        return split_for_memory(batch, self.plan)


@dataclass
class Data:
    """The run's micro-batches, and what the manifest says of the data they came from."""

    batches_of: Callable[[int], list]   # epoch → its micro-batches (the same on every rank)
    val_batches: list
    window: int                         # micro-batches per optimizer step, all ranks together
    total_steps: int
    stats: DataStats
    train_file: Path | None
    train_pairs: int
    val_pairs: int
    train_examples: int
    val_examples: int
    skipped: list                       # malformed lines --lenient skipped


@dataclass
class Session:
    """What the loop runs on: one record per preparation step, and the run's manifest and telemetry."""

    model: Model
    data: Data
    optim: Optimization
    progress: Progress                  # where the run is (a resumed run: where its checkpoint was)
    manifest: Manifest
    telemetry: Telemetry

    @property
    def built(self) -> Built:
        return self.model.built

    @property
    def batches_of(self) -> Callable[[int], list]:
        return self.data.batches_of

    @property
    def window(self) -> int:
        return self.data.window

    @property
    def total_steps(self) -> int:
        return self.data.total_steps


def open_run(cfg: TrainConfig, force_restart: bool) -> Run:
    """Join the process group under torchrun, check the device and run dir, and decide between
    resuming, starting over and an already completed run."""
    from mens.train.probe import probe

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    info = probe(cfg.device)
    preflight.check_device(info.device)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if info.device == "cuda" else "gloo")
    if info.device == "cuda":
        torch.cuda.set_device(local_rank)
    run_dir = preflight.check_run_dir(cfg.output_dir, model=cfg.model)
    if rank == 0:  # before reading the run dir: a second process on a live run stops here, at once
        hold_lock(run_dir, "run directory")
        for item in remove_run_leftovers(run_dir):  # temp files and folders of a killed run
            say(f"mens: removed {item}, left by a run that was stopped while writing it")
    preflight.check_bench(cfg.bench)
    preflight.check_preset(cfg.preset, info.device, info.memory_gb)
    try:
        previous = {} if force_restart else read_manifest(run_dir)
    except MensError as err:  # rerunning would only read it again; --force-restart does not read it
        raise MensError(err.what, err.where, "restore it, or pass --force-restart to start over") from None
    dev = torch.device(f"cuda:{local_rank}" if info.device == "cuda" else info.device)
    run = Run(rank, world, distributed.mode(cfg.distributed, world), info.device, dev, info, run_dir, previous, None,
              force_restart)
    if run.completed or force_restart:
        return run
    if world > 1:
        dist.barrier()
    run.resume_from = newest_intact(run_dir, rank)  # a corrupt newer one is skipped, saying so
    if run.resume_from is not None and previous and run.main:
        before = previous.get("hyperparameters", {})
        # lora_dropout None is "the default for this base", which the first run resolved and recorded
        changed = sorted(k for k, v in cfg.to_dict().items()
                         if k in before and before[k] != v and k not in ("output_dir", "log_interval")
                         and not (k == "lora_dropout" and v is None))
        if changed:
            warn(f"mens: warning: resuming {run_dir} with changed settings ({', '.join(changed)}); "
                "the loss curve will not match an uninterrupted run (--force-restart starts over)")
    return run


def prepare(cfg: TrainConfig, run: Run) -> Session:
    """Model, data, optimizer, resume and manifest of a run that trains now, in this order (the
    RNG draws of each step depend on it)."""
    files = read_data_files(cfg)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg, run)
    data = build_batches(cfg, run, files, model)
    check_first_forward(cfg, run, model, data)
    if run.mode == "fsdp":  # shard before the optimizer sees the weights; the loop calls the root
        model.decoder = model.sharded = distributed.shard(model.built.model, model.decoder, model.head, run.dev,
                                                          defer_sync=model.built.defer_grad_sync)
    optim = build_optimization(cfg, model.built.trainable, run.device, run.mode, model.built.model, data.total_steps)
    progress = resume_or_seed(cfg, run, optim, model, data.total_steps)
    if model.precision.scales_loss:
        optim.scaler = loss_scaler(run.device, run.mode, progress)
    manifest, telemetry = start_records(cfg, run, model, data, optim, progress)
    return Session(model, data, optim, progress, manifest, telemetry)


# ---------------------------------------------------------------- the steps of prepare, in order

@dataclass
class DataFiles:
    train_file: Path | None
    pairs: list
    val_pairs: list
    skipped: list
    lead_pairs: list                    # the curriculum's pairs (--curriculum-data), else []


def read_data_files(cfg: TrainConfig) -> DataFiles:
    """The pairs of --data-dir (and --curriculum-data), checked line by line."""
    if cfg.data_dir is None and cfg.raw_text:
        train_file, pairs, val_pairs, skipped = None, [], [], []  # raw-text-only pre-training
    else:
        train_file, pairs, val_pairs, skipped = preflight.check_data(cfg.data_dir, cfg.lenient)
    lead_pairs = preflight.check_data(cfg.curriculum_data, cfg.lenient, flag="--curriculum-data")[1] \
        if cfg.curriculum_steps else []
    return DataFiles(train_file, pairs, val_pairs, skipped, lead_pairs)


def build_model(cfg: TrainConfig, run: Run) -> Model:
    """The backend's model on this rank's device, its precision, and whether packing is exact for it."""
    built = build(cfg, run.dev, run.info.bf16)
    # Packing is exact unless the architecture carries a state or a mask across the examples of
    # a row (mens.train.family); then each example gets a row of its own, and the plan says why.
    packing_off = packing_blocker(built.model, run.dev) if cfg.packing and built.base is not None else None
    if packing_off and run.main:
        say(f"mens: packing off for this base: {packing_off}")
    precision = decide_precision(cfg, run.device, run.info.bf16, weights=built.dtype)
    if precision.warning and run.main:
        warn(precision.warning)
    return Model(built, precision, packing_off=packing_off)


def build_batches(cfg: TrainConfig, run: Run, files: DataFiles, model: Model) -> Data:
    """Every rank's micro-batches of every epoch (a curriculum's first), the validation batches and
    the step count."""
    tokenizer, packing = model.built.tokenizer, cfg.packing and model.packing_off is None
    pairs, val_pairs = files.pairs, files.val_pairs
    if not val_pairs:
        pairs, val_pairs = split_validation(pairs, cfg.val_split, cfg.seed)
        if len(val_pairs) > len(pairs) and run.main:  # in range, but rarely meant
            warn(f"mens: warning: --val-split {cfg.val_split} holds out {len(val_pairs)} pairs and trains on "
                f"{len(pairs)}; pass a smaller --val-split (e.g. 0.05) unless that is what you want")
    fmt = dict(system_prompt=cfg.system_prompt, ce_last_k=cfg.ce_last_k, min_rating=cfg.min_rating)

    def examples_of(some: list) -> tuple[list, DataStats]:  # each rank renders and tokenizes a world-th
        parts = distributed.build_in_shares(
            some, lambda share, at: build_examples(share, tokenizer, cfg.seq_len, stats=DataStats(pairs=at), **fmt),
            run.rank, run.world)
        return [ex for exs, _ in parts for ex in exs], DataStats.merged([st for _, st in parts], len(some))

    train_examples, stats = examples_of(pairs)
    val_examples, _ = build_examples(val_pairs, tokenizer, cfg.seq_len, **fmt)
    if (warning := stats.truncation_warning(cfg.seq_len)) and run.main:
        warn(warning)
    if cfg.raw_text:
        from mens.train.scratch import raw_text_chunks

        train_examples += raw_examples(raw_text_chunks(cfg.raw_text, tokenizer, cfg.seq_len), stats)
    if not train_examples:
        raise MensError("no training example has a supervised token left", str(files.train_file or cfg.raw_text),
                        "check --min-rating / --seq-len against the data")
    pad_id, window = padding_id(tokenizer), cfg.grad_accum * run.world
    lead = curriculum_lead(cfg, examples_of(files.lead_pairs)[0], window, pad_id, packing) \
        if cfg.curriculum_steps else []

    @functools.lru_cache(maxsize=1)  # the preflight and the loop both start with epoch 0's
    def batches_of(epoch: int):
        main = epoch_batches(train_examples, cfg.seq_len, cfg.micro_batch, cfg.seed, epoch, pad_id, packing)
        return lead + main if epoch == 0 else main

    total_steps = count_steps(cfg, batches_of, window)
    val_batches = epoch_batches(val_examples, cfg.seq_len, cfg.micro_batch, cfg.seed, 0, pad_id,
                                packing, shuffle=False) if val_examples else []
    return Data(batches_of, val_batches, window, total_steps, stats, files.train_file,
                len(pairs), len(val_pairs), len(train_examples), len(val_examples), files.skipped)


def padding_id(tokenizer) -> int:
    """Padding is its own attention segment and carries no targets, so its id never matters; a
    non-pad id keeps transformers from warning about a missing attention mask."""
    return tokenizer.eos_token_id if tokenizer.eos_token_id not in (None, tokenizer.pad_token_id) \
        else ((tokenizer.pad_token_id or 0) + 1) % len(tokenizer)


def curriculum_lead(cfg: TrainConfig, lead_examples: list, window: int, pad_id: int, packing: bool) -> list:
    """A curriculum runs first: the first `curriculum_steps` steps' micro-batches come from the
    curriculum pairs (as many of their epochs as that takes), put in front of the data's first
    epoch, so the loop, resume and the step count need nothing else."""
    if not lead_examples:
        raise MensError("no curriculum pair has a supervised token left", str(cfg.curriculum_data),
                        "check the file against --seq-len")
    lead, need, epoch = [], cfg.curriculum_steps * window, 0
    while len(lead) < need:
        lead += epoch_batches(lead_examples, cfg.seq_len, cfg.micro_batch, cfg.seed, epoch, pad_id, packing)
        epoch += 1
    return lead[:need]


def count_steps(cfg: TrainConfig, batches_of: Callable[[int], list], window: int) -> int:
    """--max-steps, or the optimizer steps of --epochs (a fraction of the last epoch rounded up)."""
    if cfg.max_steps:
        return cfg.max_steps
    whole, part = int(cfg.epochs), cfg.epochs - int(cfg.epochs)
    per_epoch = [math.ceil(len(batches_of(e)) / window) for e in range(whole + (part > 0))]
    total_steps = sum(per_epoch[:whole]) + (math.ceil(part * per_epoch[-1]) if part > 0 else 0)
    if cfg.curriculum_steps >= total_steps:  # a fraction of an epoch can end inside the curriculum
        raise MensError(f"--epochs {cfg.epochs} makes {total_steps} steps, none of them after the "
                        f"{cfg.curriculum_steps} curriculum steps", "--curriculum-steps",
                        "raise --epochs, set --max-steps, or lower --curriculum-steps")
    return total_steps


def check_first_forward(cfg: TrainConfig, run: Run, model: Model, data: Data) -> None:
    """The speed plan (levers patch the model), and the preflight against the plain model: the
    first row's loss as the loop computes it is finite and equals the unpatched model's own."""
    # Train mode from here on, even for validation (see dropout_off): bitsandbytes repacks
    # 4-bit weights into an inference-only layout the first time it runs in eval mode.
    hf_model, amp = model.built.model, model.precision.autocast
    hf_model.train()
    first = one_row(data.batches_of(0)[0])
    where = f"{cfg.model or 'scratch'} on {data.train_file or cfg.raw_text}"
    with torch.no_grad(), dropout_off(hf_model), amp():  # the model's own loss, before any lever patches it
        theirs = reference_loss(hf_model, first, run.dev)
    model.plan = optimize_for_training(hf_model, cfg)
    if model.packing_off:
        model.plan.off["packing"] = model.packing_off
    model.decoder, model.head = decoder_and_head(hf_model)
    with torch.no_grad(), dropout_off(hf_model), amp():
        s, n = batch_loss(model.decoder, model.head, first, run.dev, cfg.loss_chunk)
        preflight.check_finite(float(s) / max(n, 1), where)
        # The loop calls the decoder body and the head itself, with every lever and packing: on the
        # first row its loss must equal the unpatched model's own, one example at a time.
        preflight.check_matches_reference(float(s) / max(n, 1) if n else None, theirs, where,
                                          model.precision.exact)


def resume_or_seed(cfg: TrainConfig, run: Run, optim: Optimization, model: Model, total_steps: int) -> Progress:
    """A resumed run's weights, optimizer, schedule and RNG from its newest intact checkpoint; a
    fresh one's RNG seeded per rank."""
    progress = Progress()
    if run.resume_from is not None:  # falls back to an older checkpoint if this one does not load
        run.resume_from, progress = resume(run.run_dir, model.built.model, optim.optimizer, optim.scheduler, run.rank,
                                           run.resume_from)
    if run.resume_from is not None:
        say(f"mens: resuming from {run.resume_from} (step {progress.step}/{total_steps})")
    else:
        torch.manual_seed(cfg.seed + run.rank)
    return progress


def start_records(cfg: TrainConfig, run: Run, model: Model, data: Data, optim: Optimization,
                  progress: Progress) -> tuple[Manifest, Telemetry]:
    """The manifest (written now: the run dir describes itself from the first step) and the
    telemetry."""
    built, tokenizer, train_file = model.built, model.built.tokenizer, data.train_file
    manifest = Manifest(
        base_model=built.base.to_dict() if built.base else None, backend=cfg.backend,
        quantization=built.quantization, dtype=model.precision.name,
        tokenizer={"source": built.tokenizer_source, "vocab_size": len(tokenizer),
                   "chat_format": data.stats.chat_format, "chat_template": cfg.chat_template,
                   "added_tokens": built.added_tokens},
        data={"dir": str(Path(cfg.data_dir).resolve()) if cfg.data_dir else None,
              "train_file": str(train_file.resolve()) if train_file else None,
              "train_sha256": file_sha256(train_file) if train_file else None,
              "raw_text": str(Path(cfg.raw_text).resolve()) if cfg.raw_text else None,
              "train_pairs": data.train_pairs, "val_pairs": data.val_pairs, "val_examples": data.val_examples,
              "skipped_lines": len(data.skipped), "skipped_first": data.skipped[:20], **data.stats.to_dict()},
        hyperparameters=cfg.to_dict(), preset=cfg.preset,
        device={"type": run.device, "name": run.info.device_name, "world_size": run.world,
                "distributed": run.mode, "bf16": run.info.bf16, "allocator": allocator_in_use(),
                **({"gradient_sum": "shared memory" if optim.shared_sum else "gloo"} if run.mode == "ddp" else {})},
        seed=cfg.seed,
        provenance={"upstream_model_id": cfg.upstream_model_id
                    or (built.base.id if built.base and not built.base.path else None),
                    "license": cfg.license, "attribution_required": cfg.attribution_required},
        scratch_shape=built.scratch_shape, speed=model.plan.to_dict(), adapters=built.adapters)
    manifest.results.total_steps = data.total_steps
    if run.previous.get("created"):
        manifest.created = run.previous["created"]
    if run.restart and run.main:  # only now: a typo in the command must not cost the earlier run
        clear_earlier_run(run.run_dir)
    telemetry = Telemetry.for_run(run.run_dir, cfg.report_to, enabled=run.main)
    if run.main:
        manifest.write(run.run_dir)
        telemetry.event("train_start", progress.step, total_steps=data.total_steps,
                        resumed_from=str(run.resume_from or ""), backend=cfg.backend, device=run.device,
                        world_size=run.world, distributed=run.mode, examples=data.train_examples,
                        supervised_tokens=data.stats.supervised_tokens)
    return manifest, telemetry
