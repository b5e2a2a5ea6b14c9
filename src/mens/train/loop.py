"""THE training loop: `train()` (its body, `_train`) reads top to bottom, the same for every
backend. What differs between full, lora, qlora and scratch is what their builder returned
(`mens.train.backends`); everything before the first step is `mens.train.prepare`.

A step: `window` micro-batches (rank r takes every world-th), each run in the passes of the
speed plan, each pass's loss divided by the whole window's supervised tokens and backpropagated;
then the data-parallel gradient sum, clipping, the optimizer and schedule steps, logging, eval,
bench, Ctrl+C and interval checkpoints. Data-parallel details (DDP all-reduce, FSDP) live in
`mens.train.distributed`.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from mens.files import release_lock
from mens.progress import NoBar, progress, say
from mens.progress import plain_lines as progress_lines
from mens.train.checkpoint import rng_state, save_checkpoint, weights_sha256
from mens.train.config import TrainConfig
from mens.train.loss import batch_loss
from mens.train.prepare import open_run, prepare
from mens.train.runtime import StopFlag, dropout_off, peak_memory_gb

__all__ = ["Outcome", "batch_loss", "train"]


@dataclass
class Outcome:
    status: str          # completed | interrupted | already-completed
    run_dir: Path
    steps: int
    final_loss: float | None
    val_loss: float | None
    losses: list[float]  # the loss of every optimizer step of this session
    model: object = field(default=None, repr=False)  # the trained model (None when nothing ran)


def train(cfg: TrainConfig, force_restart: bool = False,
          on_step: Callable[[int, float], None] | None = None) -> Outcome:
    """Train `cfg` into cfg.output_dir: resume it, or start it, and save it (see the module doc)."""
    try:
        return _train(cfg, force_restart, on_step)
    finally:  # the run dir's lock (prepare takes it), given back however training ended
        if cfg.output_dir:
            release_lock(cfg.output_dir)


def _train(cfg: TrainConfig, force_restart: bool, on_step: Callable[[int, float], None] | None) -> Outcome:
    import torch
    import torch.distributed as dist
    from transformers.utils import logging as hf_logging

    from mens.train import distributed
    from mens.train.speed import split_for_memory

    hf_logging.disable_progress_bar()  # our progress bar (or plain lines) is the only one
    run = open_run(cfg, force_restart)
    if run.completed:
        say(f"mens: {run.run_dir} is already a completed run; pass --force-restart to train again")
        res = run.previous.get("results", {})
        return Outcome("already-completed", run.run_dir, res.get("steps", 0), res.get("final_loss"),
                       res.get("val_loss"), [])
    session = prepare(cfg, run)
    model, tokenizer = session.built.model, session.built.tokenizer
    decoder, head, amp, sharded = session.decoder, session.head, session.amp, session.sharded
    optimizer, scheduler, params = session.optimizer, session.scheduler, session.params
    prog, telemetry, manifest = session.progress, session.telemetry, session.manifest
    scaler = session.scaler
    total_steps, window, val_batches = session.total_steps, session.window, session.val_batches
    dev, rank, world, run_dir, main_rank, all_sum = run.dev, run.rank, run.world, run.run_dir, run.main, run.all_sum

    def split(b):
        return split_for_memory(b, session.plan)

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

        started, rates = time.time(), {}
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []), dropout_off(model):
            pass_at_1 = bench_callback(model, tokenizer, cfg.bench, limit=cfg.bench_limit, seed=cfg.seed,
                                       system=cfg.system_prompt, rates=rates,
                                       max_new_tokens=cfg.bench_max_new_tokens, batch_size=cfg.bench_batch_size)
        elapsed = time.time() - started
        t_session += elapsed
        t_log += elapsed
        telemetry.event("bench", prog.step, pass_at_1=round(pass_at_1, 4),
                        parse_rate=round(rates.get("parse_rate", 0.0), 4), tasks=cfg.bench_limit)
        if plain_lines:
            say(f"step {prog.step}  bench pass@1 {pass_at_1:.3f}  parses {rates.get('parse_rate', 0.0):.3f}")

    def checkpoint(reason: str) -> None:
        if scaler:
            prog.loss_scale = scaler.state_dict()
        mine = rng_state(cuda=dev.type == "cuda")
        states = [mine]
        if world > 1:
            states = [None] * world
            dist.all_gather_object(states, mine)
        full = distributed.full_state(model, optimizer, sharded) if sharded is not None else {}  # all ranks
        if main_rank:
            path = save_checkpoint(run_dir, model, optimizer, scheduler, prog, states, cfg.keep_checkpoints,
                                   **full)
            telemetry.event("checkpoint", prog.step, path=str(path.relative_to(run_dir)), reason=reason)
        if world > 1:
            dist.barrier()

    # ---------------------------------------------------------------- the loop
    losses: list[float] = []
    val_loss = run.previous.get("results", {}).get("val_loss")
    status = "completed"
    t_session, t_log, tok_log = time.time(), time.time(), 0
    batches = session.batches_of(prog.epoch)
    plain_lines = progress_lines()
    try:
        bar_context = progress("train", total=total_steps) if main_rank else contextlib.nullcontext(NoBar())
        with StopFlag() as stop, bar_context as bar:
            bar.advance(prog.step)
            while prog.step < total_steps:
                if prog.batch_in_epoch >= len(batches):
                    if main_rank:
                        telemetry.event("epoch_end", prog.step, epoch=prog.epoch)
                    prog.epoch, prog.batch_in_epoch = prog.epoch + 1, 0
                    batches = session.batches_of(prog.epoch)
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
                    part_loss = s * weight / n_window
                    (scaler.scale(part_loss) if scaler else part_loss).backward()
                    loss_sum += s.detach().double() * weight
                if world > 1:
                    if run.mode == "ddp":  # FSDP has reduce-scattered the gradients during backward
                        distributed.all_reduce_grads(params, session.shared_sum)
                    all_sum(loss_sum)
                clip = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
                if scaler:  # clip the true gradients; a step whose gradients overflowed is skipped
                    scaler.unscale_(optimizer)
                grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
                lr = scheduler.get_last_lr()[0]
                if scaler:
                    scaler.step(optimizer)
                    scaler.update()
                else:
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
                                    grad_norm=round(grad_norm, 6) if math.isfinite(grad_norm) else None,
                                    tokens=n_window,
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
    results.peak_memory_gb = round(peak_memory_gb(run.device), 3)
    if world > 1:
        hashes = [None] * world
        dist.all_gather_object(hashes, weights_sha256(model))
        results.rank_weights_sha256 = hashes
    manifest.status = status
    full = distributed.full_state(model, root=sharded) if sharded is not None and status == "completed" else {}
    if main_rank:
        if status == "completed":
            session.built.save(run_dir, model, tokenizer, **full)
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
