"""telemetry.jsonl is an append-only log of one-line JSON events that a reader sees live and that
stays readable after a crash mid-line; TensorBoard gets the numeric step/eval scalars."""

from __future__ import annotations

import json

import pytest

from mens.train.telemetry import EVENTS, JsonlLogger, Telemetry, read_events


def test_events_are_flushed_lines_a_live_reader_sees(tmp_path):
    tel = Telemetry.for_run(tmp_path, report_to=[])
    tel.event("train_start", 0, total_steps=3)
    tel.event("step", 1, loss=2.5, lr=1e-3)
    # Not closed yet: a `mens status` of a live run reads the file as it stands.
    rows = read_events(tmp_path / "telemetry.jsonl")
    assert [r["event"] for r in rows] == ["train_start", "step"]
    assert rows[1]["step"] == 1 and rows[1]["loss"] == 2.5 and isinstance(rows[1]["ts"], float)
    tel.close()


def test_a_torn_last_line_is_ignored_and_appending_resumes(tmp_path):
    path = tmp_path / "telemetry.jsonl"
    log = JsonlLogger(path)
    log.log("step", 1, {"loss": 1.0})
    log.close()
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"ts": 1, "event": "step", "st')  # the process died mid-write
    assert [r["step"] for r in read_events(path)] == [1]
    # A resumed run appends after the torn line; both complete events are read back.
    log = JsonlLogger(path)
    log.log("step", 2, {"loss": 0.5})
    log.close()
    assert [r["step"] for r in read_events(path)] == [1, 2]


def test_values_json_cannot_encode_are_written_as_text(tmp_path):
    tel = Telemetry.for_run(tmp_path, report_to=[])
    tel.event("checkpoint", 4, path=tmp_path / "checkpoints" / "step-4")
    tel.close()
    (row,) = read_events(tmp_path / "telemetry.jsonl")
    assert row["path"].endswith("step-4")
    json.loads((tmp_path / "telemetry.jsonl").read_text())  # one valid JSON object per line


def test_other_ranks_write_nothing_and_unknown_events_are_refused(tmp_path):
    quiet = Telemetry.for_run(tmp_path, report_to=[], enabled=False)
    quiet.event("step", 1, loss=1.0)
    quiet.close()
    assert not (tmp_path / "telemetry.jsonl").exists()
    tel = Telemetry.for_run(tmp_path, report_to=[])
    with pytest.raises(AssertionError):
        tel.event("not-an-event", 1)
    tel.close()
    assert "train_end" in EVENTS and "bench" in EVENTS


def test_a_missing_file_reads_as_no_events(tmp_path):
    assert read_events(tmp_path / "nope.jsonl") == []


def test_tensorboard_gets_numeric_step_and_eval_scalars(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tel = Telemetry.for_run(tmp_path, report_to=["tensorboard"])
    tel.event("step", 1, loss=2.0, lr=0.1, note="text is skipped", flag=True)
    tel.event("eval", 2, val_loss=1.5)
    tel.event("checkpoint", 2, path="x")  # not a scalar event
    tel.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"))
    acc.Reload()
    assert sorted(acc.Tags()["scalars"]) == ["eval/val_loss", "train/loss", "train/lr"]
    assert [e.value for e in acc.Scalars("train/loss")] == [2.0]


# ---------------------------------------------------------------- trackers, each run for real offline

def _log_a_short_run(run_dir, tracker):
    tel = Telemetry.for_run(run_dir, report_to=["jsonl", tracker])
    tel.event("train_start", 0, total_steps=2)
    tel.event("step", 1, loss=2.0, lr=0.1, note="text is skipped", flag=True)
    tel.event("step", 2, loss=1.5, lr=0.05)
    tel.event("eval", 2, val_loss=1.25)
    tel.event("bench", 2, pass_at_1=0.5)
    tel.close()


def test_wandb_offline_run_reads_back_with_wandbs_own_reader(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline is the default
    _log_a_short_run(tmp_path, "wandb")
    (run_file,) = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    wandb_cli = shutil.which("wandb", path=str(Path(sys.executable).parent))
    out = subprocess.run([wandb_cli, "leet", "inspect", "--json", str(run_file)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    history = [json.loads(line)["history"] for line in out.splitlines() if '"type":"history"' in line]
    got = {row["step"]["num"]: {k: v for k, v in row["item"].items() if not k.startswith("_")} for row in history}
    assert got == {1: {"train/loss": 2.0, "train/lr": 0.1},
                   2: {"train/loss": 1.5, "train/lr": 0.05, "eval/val_loss": 1.25, "bench/pass_at_1": 0.5}}


def test_mlflow_file_store_reads_back_and_a_resume_logs_into_the_same_run(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    _log_a_short_run(tmp_path, "mlflow")
    tel = Telemetry.for_run(tmp_path, report_to=["mlflow"])  # the run resumed
    tel.event("step", 3, loss=1.0)
    tel.close()
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("mens").experiment_id])
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss")] == \
        [(1, 2.0), (2, 1.5), (3, 1.0)]
    assert run.data.metrics["eval/val_loss"] == 1.25 and run.data.metrics["bench/pass_at_1"] == 0.5
    assert "train/flag" not in run.data.metrics and run.info.status == "FINISHED"


def test_trackio_local_run_reads_back_with_trackios_storage(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))  # read when trackio is first imported
    pytest.importorskip("trackio")
    from trackio.sqlite_storage import SQLiteStorage

    from mens.train.telemetry import _run_id

    _log_a_short_run(tmp_path / "run", "trackio")
    logs = SQLiteStorage.get_logs("mens", _run_id(tmp_path / "run"))
    got = {}
    for row in logs:
        got.setdefault(row["step"], {}).update({k: v for k, v in row.items() if "/" in k})
    assert got == {1: {"train/loss": 2.0, "train/lr": 0.1},
                   2: {"train/loss": 1.5, "train/lr": 0.05, "eval/val_loss": 1.25, "bench/pass_at_1": 0.5}}


def test_report_to_takes_the_trackers_and_names_a_missing_one(monkeypatch):
    import builtins

    from mens.errors import MensError
    from mens.train.config import TrainConfig

    cfg = TrainConfig(model="m", report_to=["wandb", "mlflow", "trackio", "tensorboard"]).validate()
    assert cfg.report_to == ["wandb", "mlflow", "trackio", "tensorboard"]
    real_import = builtins.__import__

    def no_wandb(name, *args, **kwargs):
        if name == "wandb":
            raise ImportError("No module named 'wandb'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    from mens.train.telemetry import WandbLogger

    with pytest.raises(MensError, match=r"--report-to wandb needs the wandb package") as err:
        WandbLogger(__import__("pathlib").Path("."))
    assert "mens[track]" in err.value.todo
