"""`mens train --background` detaches and logs to RUN/logs/; `mens status` follows the run."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from train_helpers import train_args, write_pairs


@pytest.mark.slow  # a detached training process
def test_background_run_and_status(run_cli, tiny_model_dir, tmp_path):
    data = write_pairs(tmp_path / "data", n=12)
    run = tmp_path / "run"
    code, out, err = run_cli(*train_args(tiny_model_dir, data, run, max_steps=2, seq_len=128, background=True))
    assert code == 0, err
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    pid, log = int(lines["pid"]), lines["log"]
    assert log.startswith(str(run / "logs" / "train-")) and log.endswith(".log")
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            manifest = run / "training_manifest.json"
            if manifest.is_file() and json.loads(manifest.read_text())["status"] != "running":
                break
            time.sleep(0.5)
        code, out, _ = run_cli("status", run, "--watch", "--interval", "0.2")
        assert code == 0 and "completed" in out.splitlines()[-1] and "step 2/2" in out
        os.waitpid(pid, 0)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert "trained 2 steps" in open(log).read()
    assert (run / "adapter_model.safetensors").is_file()


def test_status_of_a_directory_that_is_not_a_run(run_cli, tmp_path):
    code, _, err = run_cli("status", tmp_path)
    assert code == 2 and "not a training run" in err


def test_status_tells_a_dead_run_from_a_live_one(run_cli, tmp_path):
    import socket

    run = tmp_path / "run"
    run.mkdir()
    manifest = {"schema_version": "mens.training_manifest.v1", "status": "running",
                "results": {"total_steps": 10}, "process": {"pid": 2**22 + 12345, "host": socket.gethostname()}}
    (run / "training_manifest.json").write_text(json.dumps(manifest))
    (run / "telemetry.jsonl").write_text(json.dumps({"ts": time.time(), "event": "step", "step": 4, "loss": 1.5,
                                                     "tokens_per_s": 100.0, "eta_s": 60, "progress": 0.4}) + "\n")
    code, out, _ = run_cli("status", run)
    assert code == 0 and ": dead" in out and "step 4/10" in out and "rerun" in out
    manifest["process"]["pid"] = os.getpid()  # this very process: alive
    (run / "training_manifest.json").write_text(json.dumps(manifest))
    code, out, _ = run_cli("status", run)
    assert ": running" in out and "eta 1m00s" in out
