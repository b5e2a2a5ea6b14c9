"""`mens status` reads where a run stands from its telemetry and manifest: live, finished, or dead
(the process that wrote `running` is gone)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from mens.errors import MensError
from mens.train.status import format_status, run_status
from mens.train.telemetry import Telemetry


def _manifest(run, status, pid=None):
    body = {"status": status, "results": {"total_steps": 10}}
    if pid is not None:
        body["process"] = {"pid": pid, "host": socket.gethostname()}
    (run / "training_manifest.json").write_text(json.dumps(body))


def _telemetry(run, *events):
    tel = Telemetry.for_run(run, report_to=[])
    for name, step, fields in events:
        tel.event(name, step, **fields)
    tel.close()


def test_a_live_run_shows_step_loss_speed_and_eta(tmp_path):
    _manifest(tmp_path, "running", pid=os.getpid())
    _telemetry(tmp_path, ("train_start", 0, {"total_steps": 10}),
               ("step", 4, {"loss": 1.25, "lr": 1e-3, "tokens_per_s": 900.0, "eta_s": 75, "progress": 0.4}),
               ("eval", 4, {"val_loss": 1.5}))
    s = run_status(tmp_path)
    assert (s["status"], s["step"], s["total_steps"], s["loss"], s["val_loss"]) == ("running", 4, 10, 1.25, 1.5)
    line = format_status(s)
    assert "step 4/10 (40%)" in line and "loss 1.2500" in line and "900 tok/s" in line and "eta 1m15s" in line


def test_a_running_manifest_whose_process_is_gone_is_dead(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    _manifest(tmp_path, "running", pid=int(gone.stdout))
    _telemetry(tmp_path, ("step", 2, {"loss": 2.0}))
    s = run_status(tmp_path)
    assert s["status"] == "dead"
    assert "rerun the same `mens train` command to resume" in format_status(s)


def test_train_end_in_telemetry_wins_over_a_stale_running_manifest(tmp_path):
    _manifest(tmp_path, "running", pid=os.getpid())
    _telemetry(tmp_path, ("step", 10, {"loss": 0.5}), ("train_end", 10, {"status": "completed"}))
    s = run_status(tmp_path)
    assert s["status"] == "completed" and s["eta_s"] == 0
    assert "eta" not in format_status(s)


def test_a_folder_that_is_not_a_run_is_a_clear_error(tmp_path):
    with pytest.raises(MensError, match="not a training run"):
        run_status(tmp_path)


def test_lines_that_are_not_events_are_passed_over(tmp_path):
    """A telemetry file with lines a hand or another tool wrote (a list, a string, binary, an
    event with no time) still gives the run's status, read from its real events."""
    _manifest(tmp_path, "running", pid=os.getpid())
    _telemetry(tmp_path, ("train_start", 0, {"total_steps": 10}), ("step", 3, {"loss": 2.0, "progress": 0.3}))
    with open(tmp_path / "telemetry.jsonl", "ab") as f:
        f.write(b'[1]\n"text"\n{"no": "event"}\n\xff\xfe\n{"event": "step", "step": 4, "loss": 1.5}\n')
    s = run_status(tmp_path)
    assert (s["step"], s["loss"], s["updated"]) == (4, 1.5, None)
    assert "step 4/10" in format_status(s)


def test_figures_that_are_not_numbers_are_passed_over(run_cli, tmp_path):
    """A hand-edited event whose figures are text (or lists, or booleans) still prints a status
    line, with those figures unknown, not a traceback from formatting them."""
    _manifest(tmp_path, "running", pid=os.getpid())
    with open(tmp_path / "telemetry.jsonl", "w") as f:
        f.write('{"event": "train_start", "total_steps": "ten"}\n{"event": "step", "step": "3", "loss": "abc", '
                '"lr": true, "tokens_per_s": [1], "eta_s": {}, "progress": "half"}\n'
                '{"event": "eval", "step": 3, "val_loss": "low"}\n')
    code, out, err = run_cli("status", tmp_path)
    assert (code, err) == (0, "")
    assert "step 0/10" in out and "loss" not in out and "eta ?" in out
