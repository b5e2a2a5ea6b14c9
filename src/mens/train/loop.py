"""THE training loop: `train()` (its body, `_train`) reads top to bottom on one screen, the same
for every backend; each thing it does is a named function below it, in the order they run, and
everything it changes is one `LoopState` (its `progress` is what a checkpoint saves and a resume
restores). What differs between full, lora, qlora and scratch is what their builder returned
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
from typing import Callable, NamedTuple

import torch
import torch.distributed as dist

from mens.files import release_lock
from mens.progress import NoBar, progress, say
from mens.progress import plain_lines as progress_lines
from mens.train import distributed
from mens.train.checkpoint import Progress, rng_state, save_checkpoint, weights_sha256
from mens.train.config import TrainConfig
from mens.train.loss import batch_loss
from mens.train.prepare import Run, Session, open_run, prepare
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


@dataclass
class LoopState:
    """Everything the loop changes as it runs, in one place. `progress` is what a checkpoint saves
    and a resume restores (step, epoch, data position, tokens, training time, last loss); the rest
    is this session's: its losses, the clocks of tokens/s and ETA, the latest validation loss."""

    progress: Progress
    batches: list                       # the current epoch's micro-batches
    val_loss: float | None              # the latest validation loss (a resumed run: its last one)
    losses: list[float] = field(default_factory=list)  # every optimizer step's loss, this session
    status: str = "completed"           # or interrupted (Ctrl+C / SIGTERM, checkpointed)
    started: float = field(default_factory=time.time)  # this session's clock (bench time skipped)
    logged: float = field(default_factory=time.time)   # the last step line's clock
    tokens_since_log: int = 0
    plain_lines: bool = field(default_factory=progress_lines)  # status lines instead of a bar (a pipe)

    def skip_time(self, seconds: float) -> None:
        """Leave `seconds` (a bench run) out of the tokens/s and the ETA."""
        self.started += seconds
        self.logged += seconds


def _train(cfg: TrainConfig, force_restart: bool, on_step: Callable[[int, float], None] | None) -> Outcome:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # our progress bar (or plain lines) is the only one
    run = open_run(cfg, force_restart)
    if run.completed:
        say(f"mens: {run.run_dir} is already a completed run; pass --force-restart to train again")
        res = run.previous.get("results", {})
        return Outcome("already-completed", run.run_dir, res.get("steps", 0), res.get("final_loss"),
                       res.get("val_loss"), [])
    session = prepare(cfg, run)
    prog, total_steps, window = session.progress, session.total_steps, session.window
    state = LoopState(prog, session.batches_of(prog.epoch), run.previous.get("results", {}).get("val_loss"))
    try:
        bar_context = progress("train", total=total_steps) if run.main else contextlib.nullcontext(NoBar())
        with StopFlag() as stop, bar_context as bar:
            bar.advance(prog.step)
            while prog.step < total_steps:
                if prog.batch_in_epoch >= len(state.batches):
                    end_epoch(session, run, state)
                    continue
                step_batches = state.batches[prog.batch_in_epoch: prog.batch_in_epoch + window]
                step = optimizer_step(cfg, session, run, step_batches)
                count_step(state, step_batches, step)
                bar.advance()
                if run.main and (prog.step % cfg.log_interval == 0 or prog.step == total_steps):
                    log_step(session, state, bar, step)
                if cfg.eval_interval and prog.step % cfg.eval_interval == 0 and prog.step < total_steps:
                    validate(cfg, session, run, state)
                if cfg.bench and cfg.bench_every and prog.step % cfg.bench_every == 0 and prog.step < total_steps:
                    run_bench(cfg, session, run, state)
                if on_step is not None:
                    on_step(prog.step, step.loss)
                if stop_requested(stop, run) and prog.step < total_steps:
                    state.status = "interrupted"
                    break
                if cfg.save_interval and prog.step % cfg.save_interval == 0 and prog.step < total_steps:
                    checkpoint(cfg, session, run, "interval")
            if state.status == "completed" and prog.batch_in_epoch >= len(state.batches) and run.main:
                session.telemetry.event("epoch_end", prog.step, epoch=prog.epoch)
    except BaseException as exc:
        record_failure(session, run, exc)
        raise
    return finish(cfg, session, run, state)


# ---------------------------------------------------------------- one optimizer step

class Step(NamedTuple):
    loss: float          # per supervised token, over the whole window (all ranks)
    tokens: int          # the window's supervised tokens
    grad_norm: float     # before clipping
    lr: float            # the rate this step was taken with


def optimizer_step(cfg: TrainConfig, session: Session, run: Run, step_batches: list) -> Step:
    """Forward and backward over the step's micro-batches, the gradient sum across ranks,
    clipping, the optimizer and schedule steps."""
    model, optim, scaler = session.model, session.optim, session.optim.scaler
    # One optimizer step = `window` micro-batches; rank r takes every world-th one.
    # Every rank knows the window's supervised tokens (the batches are identical
    # everywhere), so each micro-batch's loss is divided by the whole window's count:
    # the summed gradient is exactly that of one big batch.
    n_window = sum(b.n_supervised for b in step_batches)
    loss_sum = torch.zeros((), dtype=torch.float64, device=run.dev)
    # speed.split_for_memory may run a micro-batch in row groups; their summed losses
    # (and gradients) are exactly the micro-batch's. Under FSDP a rank with fewer
    # passes than another adds passes of weight 0 (see distributed.passes).
    for part, weight in distributed.passes(step_batches, run.rank, run.world, model.split, model.sharded):
        with model.precision.autocast():
            s, _ = batch_loss(model.decoder, model.head, part, run.dev, cfg.loss_chunk)
        part_loss = s * weight / n_window
        (scaler.scale(part_loss) if scaler else part_loss).backward()
        loss_sum += s.detach().double() * weight
    if run.world > 1:
        if run.mode == "ddp":  # FSDP has reduce-scattered the gradients during backward
            distributed.all_reduce_grads(optim.params, optim.shared_sum)
        run.all_sum(loss_sum)
    clip = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
    if scaler:  # clip the true gradients; a step whose gradients overflowed is skipped
        scaler.unscale_(optim.optimizer)
    grad_norm = float(torch.nn.utils.clip_grad_norm_(optim.params, clip))
    lr = optim.scheduler.get_last_lr()[0]
    if scaler:
        scaler.step(optim.optimizer)
        scaler.update()
    else:
        optim.optimizer.step()
    optim.scheduler.step()
    optim.optimizer.zero_grad(set_to_none=True)
    return Step(float(loss_sum) / max(n_window, 1), n_window, grad_norm, lr)


def count_step(state: LoopState, step_batches: list, step: Step) -> None:
    prog = state.progress
    state.losses.append(step.loss)
    prog.step += 1
    prog.batch_in_epoch += len(step_batches)
    prog.supervised_tokens += step.tokens
    prog.input_tokens += sum(b.n_tokens for b in step_batches)
    prog.last_loss = step.loss
    state.tokens_since_log += step.tokens


def end_epoch(session: Session, run: Run, state: LoopState) -> None:
    prog = state.progress
    if run.main:
        session.telemetry.event("epoch_end", prog.step, epoch=prog.epoch)
    prog.epoch, prog.batch_in_epoch = prog.epoch + 1, 0
    state.batches = session.batches_of(prog.epoch)


def log_step(session: Session, state: LoopState, bar, step: Step) -> None:
    """The step's telemetry line, the bar's loss, and a plain status line where there is no bar."""
    prog, total_steps, now = state.progress, session.total_steps, time.time()
    tps = state.tokens_since_log / max(now - state.logged, 1e-9)
    per_step = (now - state.started) / max(len(state.losses), 1)
    eta = per_step * (total_steps - prog.step)
    session.telemetry.event("step", prog.step, epoch=prog.epoch, loss=round(step.loss, 6), lr=step.lr,
                            grad_norm=round(step.grad_norm, 6) if math.isfinite(step.grad_norm) else None,
                            tokens=step.tokens, tokens_per_s=round(tps, 2), eta_s=round(eta, 1),
                            progress=round(prog.step / total_steps, 4))
    bar.update(description=f"train loss {step.loss:.4f}")
    if state.plain_lines:
        say(f"step {prog.step}/{total_steps}  loss {step.loss:.4f}  lr {step.lr:.2e}  {tps:.0f} tok/s  "
            f"eta {eta:.0f}s")
    state.logged, state.tokens_since_log = now, 0


def stop_requested(stop: StopFlag, run: Run) -> bool:
    """Ctrl+C or SIGTERM on any rank stops every rank at the same step."""
    return float(run.all_sum(torch.tensor(float(stop.requested), device=run.dev))) > 0


# ---------------------------------------------------------------- validation, bench, checkpoints

def evaluate(cfg: TrainConfig, session: Session, run: Run) -> float | None:
    """The mean loss per supervised token over the validation batches, all ranks together."""
    model = session.model
    if not session.data.val_batches:
        return None
    total = torch.zeros(2, dtype=torch.float64, device=run.dev)
    with torch.no_grad(), dropout_off(model.built.model):
        for part, weight in distributed.passes(session.data.val_batches, run.rank, run.world, model.split,
                                               model.sharded):
            with model.precision.autocast():
                s, n = batch_loss(model.decoder, model.head, part, run.dev, cfg.loss_chunk)
            total += torch.tensor([float(s) * weight, n * weight], dtype=torch.float64, device=run.dev)
    total = run.all_sum(total)
    return float(total[0] / total[1]) if total[1] > 0 else None


def validate(cfg: TrainConfig, session: Session, run: Run, state: LoopState) -> None:
    state.val_loss = evaluate(cfg, session, run)
    if run.main and state.val_loss is not None:
        session.telemetry.event("eval", state.progress.step, val_loss=round(state.val_loss, 6))


def run_bench(cfg: TrainConfig, session: Session, run: Run, state: LoopState) -> None:
    """Greedy pass@1 on the first tasks of the held-out bench: does the code parse yet?
    The RNG is forked so that benching never changes the training trajectory, and the
    training clocks skip its time so tokens/s and ETA stay about training."""
    if not run.main:
        return
    from mens.evaluate.bench import bench_callback

    model, tokenizer, step = session.built.model, session.built.tokenizer, state.progress.step
    started, rates = time.time(), {}
    with torch.random.fork_rng(devices=[run.dev] if run.dev.type == "cuda" else []), dropout_off(model):
        pass_at_1 = bench_callback(model, tokenizer, cfg.bench, limit=cfg.bench_limit, seed=cfg.seed,
                                   system=cfg.system_prompt, rates=rates,
                                   max_new_tokens=cfg.bench_max_new_tokens, batch_size=cfg.bench_batch_size)
    state.skip_time(time.time() - started)
    session.telemetry.event("bench", step, pass_at_1=round(pass_at_1, 4),
                            parse_rate=round(rates.get("parse_rate", 0.0), 4), tasks=cfg.bench_limit)
    if state.plain_lines:
        say(f"step {step}  bench pass@1 {pass_at_1:.3f}  parses {rates.get('parse_rate', 0.0):.3f}")


def checkpoint(cfg: TrainConfig, session: Session, run: Run, reason: str) -> None:
    """checkpoints/step-N (mens.train.checkpoint): every rank's RNG, the gathered weights of a
    sharded model, the progress (with fp16-mixed's loss scale); rank 0 writes it."""
    model, optim, prog = session.model, session.optim, session.progress
    if optim.scaler:
        prog.loss_scale = optim.scaler.state_dict()
    mine = rng_state(cuda=run.dev.type == "cuda")
    states = [mine]
    if run.world > 1:
        states = [None] * run.world
        dist.all_gather_object(states, mine)
    full = distributed.full_state(model.built.model, optim.optimizer, model.sharded) \
        if model.sharded is not None else {}  # all ranks
    if run.main:
        path = save_checkpoint(run.run_dir, model.built.model, optim.optimizer, optim.scheduler, prog, states,
                               cfg.keep_checkpoints, **full)
        session.telemetry.event("checkpoint", prog.step, path=str(path.relative_to(run.run_dir)), reason=reason)
    if run.world > 1:
        dist.barrier()


# ---------------------------------------------------------------- the end of a session

def record_failure(session: Session, run: Run, exc: BaseException) -> None:
    """An exception (KeyboardInterrupt included) ends the session: the manifest and telemetry say so."""
    if not run.main:
        return
    manifest = session.manifest
    manifest.status, manifest.error = "failed", f"{type(exc).__name__}: {exc}"[:500]
    if isinstance(exc, KeyboardInterrupt):
        manifest.status = "interrupted"
    manifest.write(run.run_dir)
    session.telemetry.event("error", session.progress.step, error=manifest.error)
    session.telemetry.close()


def finish(cfg: TrainConfig, session: Session, run: Run, state: LoopState) -> Outcome:
    """An interrupted run checkpoints; a completed one validates, benches and saves its weights
    and card; both write their results into the manifest."""
    prog, model, manifest, telemetry = state.progress, session.built.model, session.manifest, session.telemetry
    prog.train_seconds += time.time() - state.started
    if state.status == "interrupted":
        checkpoint(cfg, session, run, "interrupt")
    else:
        if session.data.val_batches:
            state.val_loss = evaluate(cfg, session, run)
        if run.main and state.val_loss is not None:
            telemetry.event("eval", prog.step, val_loss=round(state.val_loss, 6))
        if cfg.bench:
            run_bench(cfg, session, run, state)
    results = manifest.results
    results.steps, results.final_loss, results.val_loss = prog.step, prog.last_loss, state.val_loss
    results.epochs_done = round(prog.epoch + prog.batch_in_epoch / max(len(state.batches), 1), 4)
    results.supervised_tokens, results.input_tokens = prog.supervised_tokens, prog.input_tokens
    results.wall_time_s = round(prog.train_seconds, 2)
    results.tokens_per_s = round(prog.supervised_tokens / max(prog.train_seconds, 1e-9), 2)
    results.peak_memory_gb = round(peak_memory_gb(run.device), 3)
    if run.world > 1:
        hashes = [None] * run.world
        dist.all_gather_object(hashes, weights_sha256(model))
        results.rank_weights_sha256 = hashes
    manifest.status = state.status
    sharded, completed = session.model.sharded, state.status == "completed"
    full = distributed.full_state(model, root=sharded) if sharded is not None and completed else {}
    if run.main:
        if completed:
            session.built.save(run.run_dir, model, session.built.tokenizer, **full)
        manifest.write(run.run_dir)
        telemetry.event("train_end", prog.step, status=state.status, final_loss=prog.last_loss,
                        val_loss=state.val_loss, tokens_per_s=results.tokens_per_s, wall_time_s=results.wall_time_s)
        telemetry.close()
        if completed:
            _write_card(run.run_dir)
        else:
            say(f"mens: stopped at step {prog.step}/{session.total_steps}; checkpoint saved. "
                "Rerun the same command to resume.")
    if run.world > 1:
        dist.barrier()
    return Outcome(state.status, run.run_dir, prog.step, prog.last_loss, state.val_loss, state.losses, model)


def _write_card(run_dir: Path) -> None:
    try:
        from mens.evaluate.card import write_card
    except ImportError:
        return
    write_card(run_dir)
