"""Everything before the first optimizer step, in the order it happens: distributed set-up, the
run directory (resume or start over), preflight, the backend's model, the speed plan, the data,
a finite first forward, FSDP sharding, optimizer and schedule, resume, manifest and telemetry.
`mens.train.loop.train` calls `open_run` then `prepare`, and runs the steps on the `Session`.
"""

from __future__ import annotations

import contextlib
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
from mens.train.config import OPTIM_ALIASES, TrainConfig
from mens.train.data import DataStats, build_examples, epoch_batches, file_sha256, raw_examples, split_validation
from mens.train.family import packing_blocker
from mens.train.loss import batch_loss, one_row, reference_loss
from mens.train.manifest import Manifest
from mens.train.model import decoder_and_head
from mens.train.runtime import dropout_off
from mens.train.schedule import build_scheduler
from mens.train.speed import SpeedPlan, optimize_for_training
from mens.train.telemetry import Telemetry

AUTOCAST_NAMES = {torch.bfloat16: "bf16", torch.float16: "fp16"}



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
class Session:
    """What the loop runs on."""

    built: Built
    decoder: Any                        # the decoder body the loop calls (the FSDP root when sharded)
    head: Any                           # the LM head, called only at supervised positions
    sharded: distributed.Sharded | None
    amp: Callable[[], Any]              # autocast for fp32 master weights (bf16/fp16-mixed), else a no-op
    plan: SpeedPlan
    batches_of: Callable[[int], list]   # epoch → its micro-batches (the same on every rank)
    val_batches: list
    window: int                         # micro-batches per optimizer step, all ranks together
    total_steps: int
    params: list                        # the trainable parameters, as the optimizer holds them
    optimizer: Any
    scheduler: Any
    progress: Progress
    manifest: Manifest
    telemetry: Telemetry
    scaler: Any = None                  # fp16-mixed's loss scaler (torch.amp.GradScaler), else None
    shared_sum: Any = None              # DDP on one host's CPU: the gradient sum through shared memory


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
    """Model, data, optimizer, resume and manifest of a run that trains now."""
    dev = run.dev
    # ---------------------------------------------------------------- data files, model, speed plan
    if cfg.data_dir is None and cfg.raw_text:
        train_file, pairs, val_pairs, skipped = None, [], [], []  # raw-text-only pre-training
    else:
        train_file, pairs, val_pairs, skipped = preflight.check_data(cfg.data_dir, cfg.lenient)
    lead_pairs = preflight.check_data(cfg.curriculum_data, cfg.lenient, flag="--curriculum-data")[1] \
        if cfg.curriculum_steps else []
    torch.manual_seed(cfg.seed)
    built = build(cfg, dev, run.info.bf16)
    model, tokenizer = built.model, built.tokenizer
    # Packing is exact unless the architecture carries a state or a mask across the examples of
    # a row (mens.train.family); then each example gets a row of its own, and the plan says why.
    packing_off = packing_blocker(model, dev) if cfg.packing and built.base is not None else None
    packing = cfg.packing and packing_off is None
    if packing_off and run.main:
        say(f"mens: packing off for this base: {packing_off}")
    # fp32 master weights (full/scratch) compute in bf16 under `auto` where bf16 pays (a GPU with
    # bf16; a CPU whose bf16 matmuls measure faster than fp32's: 1.5-1.9x the tokens/s at the same
    # loss on an AMD EPYC); elsewhere bf16 is emulated or slow (0.7x on a Xeon without AMX), so fp32.
    # fp16-mixed computes in fp16, whose narrow range needs the loss scaled (see `scaler`).
    mixed = None
    if built.dtype == torch.float32:
        if cfg.dtype == "fp16-mixed":
            mixed = torch.float16
        elif cfg.dtype == "bf16-mixed" or (cfg.dtype == "auto" and run.device in ("cuda", "cpu") and run.info.bf16):
            mixed = torch.bfloat16
        if cfg.dtype == "bf16-mixed" and run.device == "cpu" and not run.info.bf16 and run.main:
            warn("mens: warning: bf16 matmuls are slower than fp32 on this CPU (no AVX-512 BF16 or AMX, or "
                 "measured slower: `mens probe`), so bf16-mixed trains slower than fp32 here; pass --dtype auto "
                 "(fp32 on this CPU) unless you want bf16's arithmetic")
    amp = (lambda: torch.autocast(run.device, dtype=mixed)) if mixed else contextlib.nullcontext

    # ---------------------------------------------------------------- data
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
        raise MensError("no training example has a supervised token left", str(train_file or cfg.raw_text),
                        "check --min-rating / --seq-len against the data")
    # Padding is its own attention segment and carries no targets, so its id never matters; a
    # non-pad id keeps transformers from warning about a missing attention mask.
    pad_id = tokenizer.eos_token_id if tokenizer.eos_token_id not in (None, tokenizer.pad_token_id) \
        else ((tokenizer.pad_token_id or 0) + 1) % len(tokenizer)

    window = cfg.grad_accum * run.world
    # A curriculum runs first: the first `curriculum_steps` steps' micro-batches come from the
    # curriculum pairs (as many of their epochs as that takes), put in front of the data's first
    # epoch, so the loop, resume and the step count need nothing else.
    lead = []
    if cfg.curriculum_steps:
        lead_examples, _ = examples_of(lead_pairs)
        if not lead_examples:
            raise MensError("no curriculum pair has a supervised token left", str(cfg.curriculum_data),
                            "check the file against --seq-len")
        need, epoch = cfg.curriculum_steps * window, 0
        while len(lead) < need:
            lead += epoch_batches(lead_examples, cfg.seq_len, cfg.micro_batch, cfg.seed, epoch, pad_id, packing)
            epoch += 1
        lead = lead[:need]

    @functools.lru_cache(maxsize=1)  # the preflight and the loop both start with epoch 0's
    def batches_of(epoch: int):
        main = epoch_batches(train_examples, cfg.seq_len, cfg.micro_batch, cfg.seed, epoch, pad_id, packing)
        return lead + main if epoch == 0 else main

    if cfg.max_steps:
        total_steps = cfg.max_steps
    else:
        whole, part = int(cfg.epochs), cfg.epochs - int(cfg.epochs)
        per_epoch = [math.ceil(len(batches_of(e)) / window) for e in range(whole + (part > 0))]
        total_steps = sum(per_epoch[:whole]) + (math.ceil(part * per_epoch[-1]) if part > 0 else 0)
        if cfg.curriculum_steps >= total_steps:  # a fraction of an epoch can end inside the curriculum
            raise MensError(f"--epochs {cfg.epochs} makes {total_steps} steps, none of them after the "
                            f"{cfg.curriculum_steps} curriculum steps", "--curriculum-steps",
                            "raise --epochs, set --max-steps, or lower --curriculum-steps")
    val_batches = epoch_batches(val_examples, cfg.seq_len, cfg.micro_batch, cfg.seed, 0, pad_id,
                                packing, shuffle=False) if val_examples else []

    # ---------------------------------------------------------------- levers, and the preflight against the plain model
    # Train mode from here on, even for validation (see dropout_off): bitsandbytes repacks
    # 4-bit weights into an inference-only layout the first time it runs in eval mode.
    model.train()
    first = one_row(batches_of(0)[0])
    where = f"{cfg.model or 'scratch'} on {train_file or cfg.raw_text}"
    with torch.no_grad(), dropout_off(model), amp():  # the model's own loss, before any lever patches it
        theirs = reference_loss(model, first, dev)
    plan = optimize_for_training(model, cfg)
    if packing_off:
        plan.off["packing"] = packing_off
    decoder, head = decoder_and_head(model)
    with torch.no_grad(), dropout_off(model), amp():
        s, n = batch_loss(decoder, head, first, dev, cfg.loss_chunk)
        preflight.check_finite(float(s) / max(n, 1), where)
        # The loop calls the decoder body and the head itself, with every lever and packing: on the
        # first row its loss must equal the unpatched model's own, one example at a time.
        exact = mixed is None and built.dtype == torch.float32
        preflight.check_matches_reference(float(s) / max(n, 1) if n else None, theirs, where, exact)

    # ---------------------------------------------------------------- FSDP: shard before the optimizer sees the weights
    sharded = None
    if run.mode == "fsdp":  # from here the loop calls the sharded root as its decoder body
        decoder = sharded = distributed.shard(model, decoder, head, dev, defer_sync=built.defer_grad_sync)

    # ---------------------------------------------------------------- optimizer, schedule, resume
    params = built.trainable
    optimizer = build_optimizer(cfg, params, run.device, run.mode, model=model)
    shared = distributed.shared_sum(sum(p.numel() for p in params), run.device) if run.mode == "ddp" else None
    scheduler = build_scheduler(cfg, optimizer, total_steps)
    progress = Progress()
    if run.resume_from is not None:  # falls back to an older checkpoint if this one does not load
        run.resume_from, progress = resume(run.run_dir, model, optimizer, scheduler, run.rank, run.resume_from)
    if run.resume_from is not None:
        say(f"mens: resuming from {run.resume_from} (step {progress.step}/{total_steps})")
    else:
        torch.manual_seed(cfg.seed + run.rank)

    # ---------------------------------------------------------------- manifest and telemetry
    manifest = Manifest(
        base_model=built.base.to_dict() if built.base else None, backend=cfg.backend,
        quantization=built.quantization,
        dtype=str(built.dtype).replace("torch.", "") + (f"+{AUTOCAST_NAMES[mixed]}-autocast" if mixed else ""),
        tokenizer={"source": built.tokenizer_source, "vocab_size": len(tokenizer), "chat_format": stats.chat_format,
                   "chat_template": cfg.chat_template, "added_tokens": built.added_tokens},
        data={"dir": str(Path(cfg.data_dir).resolve()) if cfg.data_dir else None,
              "train_file": str(train_file.resolve()) if train_file else None,
              "train_sha256": file_sha256(train_file) if train_file else None,
              "raw_text": str(Path(cfg.raw_text).resolve()) if cfg.raw_text else None,
              "train_pairs": len(pairs), "val_pairs": len(val_pairs), "val_examples": len(val_examples),
              "skipped_lines": len(skipped), "skipped_first": skipped[:20], **stats.to_dict()},
        hyperparameters=cfg.to_dict(), preset=cfg.preset,
        device={"type": run.device, "name": run.info.device_name, "world_size": run.world,
                "distributed": run.mode, "bf16": run.info.bf16, "allocator": allocator_in_use(),
                **({"gradient_sum": "shared memory" if shared else "gloo"} if run.mode == "ddp" else {})},
        seed=cfg.seed,
        provenance={"upstream_model_id": cfg.upstream_model_id
                    or (built.base.id if built.base and not built.base.path else None),
                    "license": cfg.license, "attribution_required": cfg.attribution_required},
        scratch_shape=built.scratch_shape, speed=plan.to_dict())
    manifest.results.total_steps = total_steps
    if run.previous.get("created"):
        manifest.created = run.previous["created"]
    if run.main:  # the first write: from here on this process alone writes the run dir
        hold_lock(run.run_dir, "run directory")
        for item in remove_run_leftovers(run.run_dir):  # temp files and folders of a killed run
            say(f"mens: removed {item}, left by a run that was stopped while writing it")
    if run.restart and run.main:  # only now: a typo in the command must not cost the earlier run
        clear_earlier_run(run.run_dir)
    telemetry = Telemetry.for_run(run.run_dir, cfg.report_to, enabled=run.main)
    if run.main:
        manifest.write(run.run_dir)
        telemetry.event("train_start", progress.step, total_steps=total_steps,
                        resumed_from=str(run.resume_from or ""), backend=cfg.backend, device=run.device,
                        world_size=run.world, distributed=run.mode, examples=len(train_examples),
                        supervised_tokens=stats.supervised_tokens)
    return Session(built, decoder, head, sharded, amp, plan, batches_of, val_batches, window, total_steps,
                   params, optimizer, scheduler, progress, manifest, telemetry,
                   loss_scaler(run, progress) if mixed == torch.float16 else None, shared)


def loss_scaler(run: Run, progress: Progress):
    """fp16-mixed's dynamic loss scaling (torch.amp.GradScaler; FSDP's sharded one under FSDP):
    the loss is multiplied by a scale before backward so small gradients do not underflow fp16,
    the gradients are divided by it before clipping, and a step whose gradients overflowed is
    skipped and the scale halved. Its state travels in the checkpoint's progress, so a resumed
    run goes on with the scale it had."""
    if run.mode == "fsdp":
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        scaler = ShardedGradScaler(run.device)
    else:
        scaler = torch.amp.GradScaler(run.device)
    if progress.loss_scale:
        scaler.load_state_dict(progress.loss_scale)
    return scaler


# ---------------------------------------------------------------- the optimizer and the schedule

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
