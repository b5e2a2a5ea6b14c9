"""Run telemetry: `telemetry.jsonl` events (DESIGN §3) through a small logger protocol, with
optional TensorBoard. Events: train_start, step, eval, checkpoint, epoch_end, train_end, error.

Every line is flushed as it is written, so `mens status` (or `tail -f`) sees a live run; an
append-only log of one-line JSON objects stays valid even if the process dies mid-run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Protocol

EVENTS = ("train_start", "step", "eval", "checkpoint", "epoch_end", "train_end", "error", "bench")


class MetricLogger(Protocol):
    def log(self, event: str, step: int, fields: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


class JsonlLogger:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        if self._fh.tell() and not self._ends_with_newline():
            self._fh.write("\n")  # a run killed mid-line: start the resumed run's events on a line of their own

    def _ends_with_newline(self) -> bool:
        with self.path.open("rb") as fh:
            fh.seek(-1, 2)
            return fh.read(1) == b"\n"

    def log(self, event: str, step: int, fields: dict[str, Any]) -> None:
        row = {"ts": round(time.time(), 3), "event": event, "step": step, **fields}
        self._fh.write(json.dumps(row, default=str) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class TensorBoardLogger:
    """Scalars of step and eval events under RUN/tensorboard/."""

    def __init__(self, log_dir: str | Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            from mens.errors import MensError

            raise MensError(f"TensorBoard logging needs the tensorboard package ({err})", "--report-to",
                            "pip install tensorboard, or drop --report-to tensorboard") from None
        self._writer = SummaryWriter(str(log_dir))

    def log(self, event: str, step: int, fields: dict[str, Any]) -> None:
        if event not in ("step", "eval"):
            return
        for key, value in fields.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self._writer.add_scalar(f"{'train' if event == 'step' else 'eval'}/{key}", value, step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class Telemetry:
    """Fans events out to every logger; a no-op on ranks other than 0."""

    def __init__(self, loggers: list[MetricLogger]):
        self.loggers = loggers

    @classmethod
    def for_run(cls, run_dir: str | Path, report_to: list[str], enabled: bool = True) -> "Telemetry":
        if not enabled:
            return cls([])
        run_dir = Path(run_dir)
        loggers: list[MetricLogger] = [JsonlLogger(run_dir / "telemetry.jsonl")]
        if "tensorboard" in report_to:
            loggers.append(TensorBoardLogger(run_dir / "tensorboard"))
        return cls(loggers)

    def event(self, event: str, step: int = 0, **fields: Any) -> None:
        assert event in EVENTS, event
        for logger in self.loggers:
            logger.log(event, step, fields)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """All complete events of a telemetry file (a torn last line is ignored)."""
    rows = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return rows
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
