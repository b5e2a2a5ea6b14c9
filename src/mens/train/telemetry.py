"""Run telemetry: `telemetry.jsonl` events (DESIGN §3) through a small logger protocol, with
optional TensorBoard, Weights & Biases, MLflow and trackio (`report_to`), each one small class
over the tracker's own client, each working offline. Events: train_start, step, eval,
checkpoint, epoch_end, train_end, error, bench; the trackers get the numbers of step, eval and
bench events as `train/…`, `eval/…` and `bench/…` at the optimizer step.

Every line is flushed as it is written, so `mens status` (or `tail -f`) sees a live run; an
append-only log of one-line JSON objects stays valid even if the process dies mid-run.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Protocol

EVENTS = ("train_start", "step", "eval", "checkpoint", "epoch_end", "train_end", "error", "bench")
TRACKERS = ("tensorboard", "wandb", "mlflow", "trackio")
_SCALAR_EVENTS = {"step": "train", "eval": "eval", "bench": "bench"}


def scalars(event: str, fields: dict[str, Any]) -> dict[str, float]:
    """The numbers a tracker plots: `train/loss`, `eval/val_loss`, `bench/pass_at_1` (no flags, no text)."""
    prefix = _SCALAR_EVENTS.get(event)
    if prefix is None:
        return {}
    return {f"{prefix}/{k}": v for k, v in fields.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _needs(package: str, tracker: str, err: Exception):
    from mens.errors import MensError

    return MensError(f"--report-to {tracker} needs the {package} package ({err})", "--report-to",
                     f"pip install 'mens[track]' (or {package}), or drop --report-to {tracker}")


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
        values = scalars(event, fields) if event in ("step", "eval") else {}
        for key, value in values.items():
            self._writer.add_scalar(key, value, step)
        if values:
            self._writer.flush()

    def close(self) -> None:
        self._writer.close()


def _run_id(run_dir: Path) -> str:
    """One tracker run per mens run directory, so a resumed run continues the same curves."""
    return f"{run_dir.name[:40]}-{hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:8]}"


class _RunObjectLogger:
    """A tracker whose run object takes `log(values, step=)` and `finish()` (wandb, trackio)."""

    _run: Any

    def log(self, event: str, step: int, fields: dict[str, Any]) -> None:
        values = scalars(event, fields)
        if values:
            self._run.log(values, step=step)

    def close(self) -> None:
        self._run.finish()


class WandbLogger(_RunObjectLogger):
    """Weights & Biases, offline unless WANDB_MODE says otherwise: the run lands in RUN/wandb/
    (`wandb sync RUN/wandb/offline-run-*` uploads it; `wandb leet inspect` reads it). Project
    from WANDB_PROJECT, else `mens`."""

    def __init__(self, run_dir: Path):
        try:
            import wandb
        except ImportError as err:
            raise _needs("wandb", "wandb", err) from None
        os.environ.setdefault("WANDB_SILENT", "true")
        self._run = wandb.init(project=os.environ.get("WANDB_PROJECT", "mens"), dir=str(run_dir),
                               id=_run_id(run_dir), name=run_dir.name, resume="allow",
                               mode=os.environ.get("WANDB_MODE", "offline"))


class MlflowLogger:
    """MLflow through its client: MLFLOW_TRACKING_URI when set, else a local file store in
    RUN/mlruns (`mlflow ui --backend-store-uri RUN/mlruns`). Experiment from
    MLFLOW_EXPERIMENT_NAME, else `mens`; a resumed run logs into the same MLflow run."""

    def __init__(self, run_dir: Path):
        try:
            from mlflow.tracking import MlflowClient
        except ImportError as err:
            raise _needs("mlflow", "mlflow", err) from None
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:  # MLflow 3 keeps the file store behind this switch; it is the offline store
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = (run_dir / "mlruns").resolve().as_uri()
        self._client = client = MlflowClient(tracking_uri=uri)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "mens")
        experiment = client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id if experiment else client.create_experiment(name)
        key = _run_id(run_dir)
        found = client.search_runs([experiment_id], filter_string=f"tags.mens_run = '{key}'", max_results=1)
        self.run_id = found[0].info.run_id if found else \
            client.create_run(experiment_id, run_name=run_dir.name, tags={"mens_run": key}).info.run_id

    def log(self, event: str, step: int, fields: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, step) for k, v in scalars(event, fields).items()]
        if metrics:
            self._client.log_batch(self.run_id, metrics=metrics)

    def close(self) -> None:
        self._client.set_terminated(self.run_id)


class TrackioLogger(_RunObjectLogger):
    """trackio, local: a SQLite database in trackio's folder (TRACKIO_DIR, default
    ~/.cache/huggingface/trackio); `trackio show` opens it. Project `mens`, run = the run dir."""

    def __init__(self, run_dir: Path):
        try:
            import trackio
        except ImportError as err:
            raise _needs("trackio", "trackio", err) from None
        self._trackio = trackio
        self._run = trackio.init(project=os.environ.get("TRACKIO_PROJECT", "mens"), name=_run_id(run_dir),
                                 resume="allow")


_LOGGERS = {"tensorboard": lambda d: TensorBoardLogger(d / "tensorboard"), "wandb": WandbLogger,
            "mlflow": MlflowLogger, "trackio": TrackioLogger}


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
        for name in TRACKERS:
            if name in report_to:
                loggers.append(_LOGGERS[name](run_dir))
        return cls(loggers)

    def event(self, event: str, step: int = 0, **fields: Any) -> None:
        assert event in EVENTS, event
        for logger in self.loggers:
            logger.log(event, step, fields)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """All complete events of a telemetry file: JSON objects naming their event (a torn last
    line, or a line a hand or another tool wrote, is passed over)."""
    rows = []
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return rows
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            continue
        if isinstance(row, dict) and isinstance(row.get("event"), str):
            rows.append(row)
    return rows
