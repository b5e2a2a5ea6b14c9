"""THE training loop: one function, read top to bottom, for qlora, lora, full and scratch alike.
The backends differ only in what `mens.train.model` builds; everything below is shared.

Sections: distributed setup → preflight → model → data → first forward → FSDP sharding →
optimizer → resume → the loop (accumulate, all-reduce, clip, step, log, eval, checkpoint,
interrupt) → final save. Data-parallel details (DDP all-reduce, FSDP) live in
`mens.train.distributed`.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mens.errors import MensError
from mens.progress import NoBar, progress, quiet, say
from mens.train import preflight
from mens.train.checkpoint import (Progress, latest_checkpoint, load_checkpoint, rng_state, save_checkpoint,
                                   save_final, weights_sha256)
from mens.train.allocator import in_use as allocator_in_use
from mens.train.config import TrainConfig
from mens.train.data import IGNORE, build_examples, epoch_batches, file_sha256, raw_examples, \
    split_validation
from mens.train.manifest import Manifest, read_manifest
from mens.train.runtime import StopFlag, dropout_off, peak_memory_gb
from mens.train.telemetry import Telemetry

# Artifacts a --force-restart clears (never anything else in the directory).
_RUN_ARTIFACTS = ("checkpoints", "telemetry.jsonl", "training_manifest.json", "MODEL_CARD.md",
                  "adapter_config.json", "adapter_model.safetensors", "tensorboard")


@dataclass
class Outcome:
    status: str          # completed | interrupted | already-completed
    run_dir: Path
    steps: int
    final_loss: float | None
    val_loss: float | None
    losses: list[float]  # the loss of every optimizer step of this session
    model: object = field(default=None, repr=False)  # the trained model (None when nothing ran)


def _loss_against_reference(model, decoder, head, batch, device, max_tokens: int = 256):
    """(our mean loss, transformers' mean loss) on the first `max_tokens` tokens of row 0."""
    import torch

    from mens.train.data import Batch

    k = min(batch.input_ids.shape[1], max_tokens)
    ids, pos = batch.input_ids[:1, :k], batch.position_ids[:1, :k]
    targets = batch.targets[:1, :k].clone()
    targets[0, -1] = IGNORE  # transformers cannot score the token after the slice
    n = int((targets != IGNORE).sum())
    if n == 0:
        return None, None
    s, _ = batch_loss(decoder, head, Batch(ids, pos, targets, n, k), device, 1024)
    labels = torch.full_like(targets, IGNORE)
    labels[0, 1:] = targets[0, :-1]  # transformers shifts labels itself
    ref = model(input_ids=ids.to(device), position_ids=pos.to(device), labels=labels.to(device),
                use_cache=False).loss
    return float(s) / n, float(ref)


def batch_loss(decoder, head, batch, device, chunk_size: int):
    """Sum of token losses and supervised-token count of one micro-batch. The decoder body
    gives the last hidden states; the head and cross-entropy run only where a target exists."""
    from mens.train.loss import supervised_loss

    ids = batch.input_ids.to(device, non_blocking=True)
    pos = batch.position_ids.to(device, non_blocking=True)
    targets = batch.targets.to(device, non_blocking=True)
    # No attention_mask: restarting position ids make transformers build the block-diagonal
    # (packed) causal mask, or varlen attention under flash-attention.
    hidden = decoder(input_ids=ids, position_ids=pos, use_cache=False).last_hidden_state
    keep = targets != IGNORE
    return supervised_loss(hidden[keep], head, targets[keep], chunk_size)


def train(cfg: TrainConfig, force_restart: bool = False,
          on_step: Callable[[int, float], None] | None = None) -> Outcome:
    import torch
    import torch.distributed as dist

    from mens.train import distributed, model as builders
    from mens.train.probe import probe
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our progress bar (or plain lines) is the only one

    # ---------------------------------------------------------------- distributed setup
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    mode = distributed.mode(cfg.distributed, world)  # None in one process, else ddp | fsdp
    info = probe(cfg.device)
    device = info.device
    preflight.check_device(device)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device == "cuda" else "gloo")
    if device == "cuda":
        torch.cuda.set_device(local_rank)
    main_rank = rank == 0
    run_dir = preflight.check_run_dir(cfg.output_dir)
    preflight.check_preset(cfg.preset, device, info.memory_gb)

    # ---------------------------------------------------------------- resume or start over
    previous = None if force_restart else read_manifest(run_dir)
    if force_restart and main_rank:
        for name in _RUN_ARTIFACTS:
            target = run_dir / name
            shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(missing_ok=True)
    if previous and previous.get("status") == "completed" and not force_restart:
        say(f"mens: {run_dir} is already a completed run; pass --force-restart to train again")
        res = previous.get("results", {})
        return Outcome("already-completed", run_dir, res.get("steps", 0), res.get("final_loss"),
                       res.get("val_loss"), [])
    if world > 1:
        dist.barrier()
    resume_from = latest_checkpoint(run_dir)
    if resume_from is not None and previous and main_rank:
        before = previous.get("hyperparameters", {})
        changed = sorted(k for k, v in cfg.to_dict().items()
                         if k in before and before[k] != v and k not in ("output_dir", "log_interval"))
        if changed:
            say(f"mens: warning: resuming {run_dir} with changed settings ({', '.join(changed)}); "
                "the loss curve will not match an uninterrupted run (--force-restart starts over)")

    # ---------------------------------------------------------------- preflight: data, model files
    if cfg.data_dir is None and cfg.raw_text:
        train_file, pairs, val_pairs, skipped = None, [], [], []  # raw-text-only pre-training
    else:
        train_file, pairs, val_pairs, skipped = preflight.check_data(cfg.data_dir, cfg.lenient)
    base = None
    if cfg.backend != "scratch":
        base = builders.resolve_base(cfg.model)
        if base.path:
            preflight.check_model_files(base.path)
        from transformers import AutoConfig

        hf_config = AutoConfig.from_pretrained(base.path or base.id)
        preflight.check_seq_len(cfg.seq_len, builders.max_positions(hf_config), cfg.model)

    # ---------------------------------------------------------------- model and tokenizer
    torch.manual_seed(cfg.seed)
    dev = torch.device(f"cuda:{local_rank}" if device == "cuda" else device)
    dtype = builders.compute_dtype(cfg, device, info.bf16)
    scratch_shape = None
    if cfg.backend == "scratch":
        model, tokenizer, scratch_shape = builders.build_scratch(cfg, dev)
        preflight.check_seq_len(cfg.seq_len, builders.max_positions(model.config), "--scratch-positions")
    else:
        tokenizer = builders.load_tokenizer(base.path or base.id)
        preflight.check_vocab(tokenizer, hf_config, cfg.model)
        model = builders.load_model(cfg, base, device, dtype, local_rank)
    try:
        from mens.train.speed import optimize_for_training, split_for_memory
    except ModuleNotFoundError as err:
        if err.name != "mens.train.speed":
            raise
        if cfg.gradient_checkpointing == "on":  # the plain library switch without speed.py
            builders.unwrap(model).gradient_checkpointing_enable({"use_reentrant": False})

        def split_for_memory(batch, cfg, device):
            return [batch]
    else:
        model = optimize_for_training(model, cfg)
    decoder, head = builders.decoder_and_head(model)
    # fp32 master weights (full/scratch) compute in bf16 on a GPU that has it.
    amp = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) \
        if device == "cuda" and info.bf16 and dtype == torch.float32 and cfg.dtype == "auto" \
        else contextlib.nullcontext

    # ---------------------------------------------------------------- data
    if not val_pairs:
        pairs, val_pairs = split_validation(pairs, cfg.val_split, cfg.seed)
    fmt = dict(system_prompt=cfg.system_prompt, ce_last_k=cfg.ce_last_k, min_rating=cfg.min_rating)
    train_examples, stats = build_examples(pairs, tokenizer, cfg.seq_len, **fmt)
    val_examples, _ = build_examples(val_pairs, tokenizer, cfg.seq_len, **fmt)
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

    def batches_of(epoch: int):
        return epoch_batches(train_examples, cfg.seq_len, cfg.micro_batch, cfg.seed, epoch, pad_id, cfg.packing)

    window = cfg.grad_accum * world  # micro-batches per optimizer step, all ranks together
    if cfg.max_steps:
        total_steps = cfg.max_steps
    else:
        whole, part = int(cfg.epochs), cfg.epochs - int(cfg.epochs)
        per_epoch = [math.ceil(len(batches_of(e)) / window) for e in range(whole + (part > 0))]
        total_steps = sum(per_epoch[:whole]) + (math.ceil(part * per_epoch[-1]) if part > 0 else 0)
    val_batches = epoch_batches(val_examples, cfg.seq_len, cfg.micro_batch, cfg.seed, 0, pad_id,
                                cfg.packing, shuffle=False) if val_examples else []

    # ---------------------------------------------------------------- preflight: a finite first forward
    # Train mode from here on, even for validation (see dropout_off): bitsandbytes repacks
    # 4-bit weights into an inference-only layout the first time it runs in eval mode.
    model.train()
    with torch.no_grad(), dropout_off(model), amp():
        first = batches_of(0)[0]
        where = f"{cfg.model or 'scratch'} on {train_file or cfg.raw_text}"
        s, n = batch_loss(decoder, head, first, dev, cfg.loss_chunk)
        preflight.check_finite(float(s) / max(n, 1), where)
        # The loop calls the decoder body and the head itself; on a slice of the first row
        # its loss must equal the model's own (catches logit post-processing it does not know).
        mine, theirs = _loss_against_reference(model, decoder, head, first, dev)
        preflight.check_matches_reference(mine, theirs, where)

    # ---------------------------------------------------------------- FSDP: shard before the optimizer sees the weights
    sharded = None
    if mode == "fsdp":  # from here the loop calls the sharded root as its decoder body
        decoder = sharded = distributed.shard(model, decoder, head, dev,
                                              defer_sync=cfg.backend in ("qlora", "lora"))

    # ---------------------------------------------------------------- optimizer and schedule
    from transformers import get_cosine_schedule_with_warmup

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr, betas=cfg.adam_betas,
                                  fused=device == "cuda")
    scheduler = get_cosine_schedule_with_warmup(optimizer, min(cfg.warmup_steps, total_steps), total_steps)

    # ---------------------------------------------------------------- resume
    prog = Progress()
    if resume_from is not None:
        prog = load_checkpoint(resume_from, model, optimizer, scheduler, rank)
        say(f"mens: resuming from {resume_from} (step {prog.step}/{total_steps})")
    else:
        torch.manual_seed(cfg.seed + rank)

    # ---------------------------------------------------------------- manifest and telemetry
    tok_source = base.id if base else "mens.train.vox_tokenizer"
    manifest = Manifest(
        base_model=base.to_dict() if base else None, backend=cfg.backend,
        quantization="bnb-nf4-double-quant" if cfg.backend == "qlora" else None,
        dtype=str(dtype).replace("torch.", ""),
        tokenizer={"source": tok_source, "vocab_size": len(tokenizer), "chat_format": stats.chat_format},
        data={"dir": str(Path(cfg.data_dir).resolve()) if cfg.data_dir else None,
              "train_file": str(train_file.resolve()) if train_file else None,
              "train_sha256": file_sha256(train_file) if train_file else None,
              "raw_text": str(Path(cfg.raw_text).resolve()) if cfg.raw_text else None,
              "train_pairs": len(pairs), "val_pairs": len(val_pairs), "val_examples": len(val_examples),
              "skipped_lines": len(skipped), "skipped_first": skipped[:20], **stats.to_dict()},
        hyperparameters=cfg.to_dict(), preset=cfg.preset,
        device={"type": device, "name": info.device_name, "world_size": world, "distributed": mode,
                "bf16": info.bf16, "allocator": allocator_in_use()},
        seed=cfg.seed,
        provenance={"upstream_model_id": cfg.upstream_model_id or (base.id if base and not base.path else None),
                    "license": cfg.license, "attribution_required": cfg.attribution_required},
        scratch_shape=scratch_shape.to_dict() if scratch_shape is not None else None)
    manifest.results.total_steps = total_steps
    if previous and previous.get("created"):
        manifest.created = previous["created"]
    telemetry = Telemetry.for_run(run_dir, cfg.report_to, enabled=main_rank)
    if main_rank:
        manifest.write(run_dir)
        telemetry.event("train_start", prog.step, total_steps=total_steps, resumed_from=str(resume_from or ""),
                        backend=cfg.backend, device=device, world_size=world, distributed=mode,
                        examples=len(train_examples),
                        supervised_tokens=stats.supervised_tokens)

    def all_sum(value: torch.Tensor) -> torch.Tensor:
        if world > 1:
            dist.all_reduce(value, op=dist.ReduceOp.SUM)
        return value

    def split(b):
        return split_for_memory(b, cfg, dev)

    def evaluate() -> float | None:
        if not val_batches:
            return None
        total = torch.zeros(2, dtype=torch.float64, device=dev)
        with torch.no_grad(), dropout_off(model):
            for part, weight in distributed.passes(val_batches, rank, world, split, sharded):
                with amp():
                    s, n = batch_loss(decoder, head, part, dev, cfg.loss_chunk)
                total += torch.tensor([float(s) * weight, n * weight], dtype=torch.float64, device=dev)
        total = all_sum(total)
        return float(total[0] / total[1]) if total[1] > 0 else None

    def run_bench() -> None:
        """Greedy pass@1 on the first tasks of the held-out bench: does the code parse yet?
        The RNG is forked so that benching never changes the training trajectory, and the
        training clocks skip its time so tokens/s and ETA stay about training."""
        nonlocal t_session, t_log
        if not main_rank:
            return
        from mens.evaluate.bench import bench_callback

        started = time.time()
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []), dropout_off(model):
            pass_at_1 = bench_callback(model, tokenizer, cfg.bench, limit=cfg.bench_limit, seed=cfg.seed,
                                       system=cfg.system_prompt)
        elapsed = time.time() - started
        t_session += elapsed
        t_log += elapsed
        telemetry.event("bench", prog.step, pass_at_1=round(pass_at_1, 4), tasks=cfg.bench_limit)
        if plain_lines:
            say(f"step {prog.step}  bench pass@1 {pass_at_1:.3f}")

    def checkpoint(reason: str) -> None:
        states = [rng_state()]
        if world > 1:
            states = [None] * world
            dist.all_gather_object(states, rng_state())
        full = distributed.full_state(model, optimizer, sharded) if sharded is not None else {}  # all ranks
        if main_rank:
            path = save_checkpoint(run_dir, model, optimizer, scheduler, prog, states, cfg.keep_checkpoints,
                                   **full)
            telemetry.event("checkpoint", prog.step, path=str(path.relative_to(run_dir)), reason=reason)
        if world > 1:
            dist.barrier()

    # ---------------------------------------------------------------- the loop
    losses: list[float] = []
    val_loss = previous.get("results", {}).get("val_loss") if previous else None
    status = "completed"
    t_session, t_log, tok_log = time.time(), time.time(), 0
    batches = batches_of(prog.epoch)
    plain_lines = quiet() and os.environ.get("MENS_QUIET") != "1"
    try:
        bar_context = progress("train", total=total_steps) if main_rank else contextlib.nullcontext(NoBar())
        with StopFlag() as stop, bar_context as bar:
            bar.advance(prog.step)
            while prog.step < total_steps:
                if prog.batch_in_epoch >= len(batches):
                    if main_rank:
                        telemetry.event("epoch_end", prog.step, epoch=prog.epoch)
                    prog.epoch, prog.batch_in_epoch = prog.epoch + 1, 0
                    batches = batches_of(prog.epoch)
                    continue
                # One optimizer step = `window` micro-batches; rank r takes every world-th one.
                # Every rank knows the window's supervised tokens (the batches are identical
                # everywhere), so each micro-batch's loss is divided by the whole window's count:
                # the summed gradient is exactly that of one big batch.
                step_batches = batches[prog.batch_in_epoch: prog.batch_in_epoch + window]
                n_window = sum(b.n_supervised for b in step_batches)
                loss_sum = torch.zeros((), dtype=torch.float64, device=dev)
                # speed.split_for_memory may run a micro-batch in row groups; their summed losses
                # (and gradients) are exactly the micro-batch's. Under FSDP a rank with fewer
                # passes than another adds passes of weight 0 (see distributed.passes).
                for part, weight in distributed.passes(step_batches, rank, world, split, sharded):
                    with amp():
                        s, _ = batch_loss(decoder, head, part, dev, cfg.loss_chunk)
                    (s * weight / n_window).backward()
                    loss_sum += s.detach().double() * weight
                if world > 1:
                    if mode == "ddp":  # FSDP has reduce-scattered the gradients during backward
                        distributed.all_reduce_grads(params)
                    all_sum(loss_sum)
                clip = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
                lr = scheduler.get_last_lr()[0]
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)

                loss = float(loss_sum) / max(n_window, 1)
                losses.append(loss)
                prog.step += 1
                prog.batch_in_epoch += len(step_batches)
                prog.supervised_tokens += n_window
                prog.input_tokens += sum(b.n_tokens for b in step_batches)
                prog.last_loss = loss
                tok_log += n_window
                bar.advance()
                if main_rank and (prog.step % cfg.log_interval == 0 or prog.step == total_steps):
                    now = time.time()
                    tps = tok_log / max(now - t_log, 1e-9)
                    per_step = (now - t_session) / max(len(losses), 1)
                    eta = per_step * (total_steps - prog.step)
                    telemetry.event("step", prog.step, epoch=prog.epoch, loss=round(loss, 6), lr=lr,
                                    grad_norm=round(grad_norm, 6), tokens=n_window,
                                    tokens_per_s=round(tps, 2), eta_s=round(eta, 1),
                                    progress=round(prog.step / total_steps, 4))
                    bar.update(description=f"train loss {loss:.4f}")
                    if plain_lines:
                        say(f"step {prog.step}/{total_steps}  loss {loss:.4f}  lr {lr:.2e}  "
                            f"{tps:.0f} tok/s  eta {eta:.0f}s")
                    t_log, tok_log = now, 0
                if cfg.eval_interval and prog.step % cfg.eval_interval == 0 and prog.step < total_steps:
                    val_loss = evaluate()
                    if main_rank and val_loss is not None:
                        telemetry.event("eval", prog.step, val_loss=round(val_loss, 6))
                if cfg.bench and cfg.bench_every and prog.step % cfg.bench_every == 0 and prog.step < total_steps:
                    run_bench()
                if on_step is not None:
                    on_step(prog.step, loss)
                stop_now = torch.tensor(float(stop.requested), device=dev)
                if float(all_sum(stop_now)) > 0 and prog.step < total_steps:
                    status = "interrupted"
                    break
                if cfg.save_interval and prog.step % cfg.save_interval == 0 and prog.step < total_steps:
                    checkpoint("interval")
            if status == "completed" and prog.batch_in_epoch >= len(batches) and main_rank:
                telemetry.event("epoch_end", prog.step, epoch=prog.epoch)
    except BaseException as exc:
        if main_rank:
            manifest.status, manifest.error = "failed", f"{type(exc).__name__}: {exc}"[:500]
            if isinstance(exc, KeyboardInterrupt):
                manifest.status = "interrupted"
            manifest.write(run_dir)
            telemetry.event("error", prog.step, error=manifest.error)
            telemetry.close()
        raise

    # ---------------------------------------------------------------- save
    prog.train_seconds += time.time() - t_session
    if status == "interrupted":
        checkpoint("interrupt")
    else:
        val_loss = evaluate() if val_batches else val_loss
        if main_rank and val_loss is not None:
            telemetry.event("eval", prog.step, val_loss=round(val_loss, 6))
        if cfg.bench:
            run_bench()
    results = manifest.results
    results.steps, results.final_loss, results.val_loss = prog.step, prog.last_loss, val_loss
    results.epochs_done = round(prog.epoch + prog.batch_in_epoch / max(len(batches), 1), 4)
    results.supervised_tokens, results.input_tokens = prog.supervised_tokens, prog.input_tokens
    results.wall_time_s = round(prog.train_seconds, 2)
    results.tokens_per_s = round(prog.supervised_tokens / max(prog.train_seconds, 1e-9), 2)
    results.peak_memory_gb = round(peak_memory_gb(device), 3)
    if world > 1:
        hashes = [None] * world
        dist.all_gather_object(hashes, weights_sha256(model))
        results.rank_weights_sha256 = hashes
    manifest.status = status
    full = distributed.full_state(model, root=sharded) if sharded is not None and status == "completed" else {}
    if main_rank:
        if status == "completed":
            save_final(run_dir, model, tokenizer, cfg.backend, **full)
        manifest.write(run_dir)
        telemetry.event("train_end", prog.step, status=status, final_loss=prog.last_loss, val_loss=val_loss,
                        tokens_per_s=results.tokens_per_s, wall_time_s=results.wall_time_s)
        telemetry.close()
        if status == "completed":
            _write_card(run_dir)
        else:
            say(f"mens: stopped at step {prog.step}/{total_steps}; checkpoint saved. "
                "Rerun the same command to resume.")
    if world > 1:
        dist.barrier()
    return Outcome(status, run_dir, prog.step, prog.last_loss, val_loss, losses, model)


def _write_card(run_dir: Path) -> None:
    try:
        from mens.evaluate.card import write_card
    except ImportError:
        return
    write_card(run_dir)
