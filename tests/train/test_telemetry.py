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
