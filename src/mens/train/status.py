"""`mens status RUN`: where a run stands — step, loss, tokens/s, ETA — read from its telemetry
and manifest (works for a live run, a background run, or a finished one)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from mens.errors import MensError
from mens.hf import read_manifest
from mens.train.telemetry import read_events


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def _alive(process: dict | None) -> bool:
    """False only when we can tell: same host and no such pid."""
    if not process or process.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(process["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, KeyError, TypeError):
        return True
    return True


def _clock(ts) -> str | None:
    """An event's time of day; None where the event has no usable time."""
    if isinstance(ts, bool) or not isinstance(ts, (int, float)):
        return None
    try:
        return time.strftime("%H:%M:%S", time.localtime(ts))
    except (OverflowError, OSError, ValueError):
        return None


def _num(value):
    """A telemetry or manifest figure, or None when it is not a number (a hand-edited file)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run_status(run_dir: str | Path) -> dict:
    """A summary dict of the run (also what `--json` prints)."""
    run = Path(run_dir)
    manifest = read_manifest(run)
    events = read_events(run / "telemetry.jsonl")
    if not manifest and not events:
        raise MensError("not a training run (no training_manifest.json or telemetry.jsonl)", str(run),
                        "give the --output-dir of a `mens train` run")
    last = {}
    for e in events:
        last[e.get("event")] = e
    start = last.get("train_start", {})
    step = last.get("step", {})
    total = _num(start.get("total_steps")) or _num((manifest or {}).get("results", {}).get("total_steps"))
    status = (manifest or {}).get("status", "running")
    if status == "running" and events and events[-1].get("event") == "train_end":
        status = events[-1].get("status", status)
    if status == "running" and not _alive((manifest or {}).get("process")):
        status = "dead"  # the process that wrote `running` is gone without saying why
    return {
        "run": str(run), "status": status, "step": _num(step.get("step")) or 0, "total_steps": total,
        "loss": _num(step.get("loss")), "lr": _num(step.get("lr")), "tokens_per_s": _num(step.get("tokens_per_s")),
        "eta_s": _num(step.get("eta_s")) if status == "running" else 0,
        "progress": _num(step.get("progress")), "val_loss": _num(last.get("eval", {}).get("val_loss")),
        "last_checkpoint": last.get("checkpoint", {}).get("path"),
        "updated": _clock(events[-1].get("ts")) if events else None,
        "error": (manifest or {}).get("error"),
    }


def format_status(s: dict) -> str:
    total = s["total_steps"] or "?"
    pct = f" ({100 * s['progress']:.0f}%)" if s.get("progress") is not None else ""
    parts = [f"{s['run']}: {s['status']}", f"step {s['step']}/{total}{pct}"]
    if s["loss"] is not None:
        parts.append(f"loss {s['loss']:.4f}")
    if s["val_loss"] is not None:
        parts.append(f"val {s['val_loss']:.4f}")
    if s["tokens_per_s"] is not None:
        parts.append(f"{s['tokens_per_s']:.0f} tok/s")
    if s["status"] == "running":
        parts.append(f"eta {_duration(s['eta_s'])}")
    if s["updated"]:
        parts.append(f"updated {s['updated']}")
    line = "  ".join(parts)
    if s.get("error"):
        line += f"\n  error: {s['error']}"
    if s["status"] == "dead":
        line += "\n  the training process is gone; rerun the same `mens train` command to resume"
    return line


def watch(run_dir: str | Path, interval: float = 2.0, print_fn=print) -> None:
    """Reprint the status line until the run is no longer running (Ctrl+C to stop watching)."""
    while True:
        s = run_status(run_dir)
        print_fn(format_status(s))
        if s["status"] != "running":
            return
        time.sleep(interval)
