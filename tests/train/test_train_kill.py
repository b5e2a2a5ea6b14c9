"""kill -9 at random points of training — between steps, inside a checkpoint write, inside the
final save — then rerunning the same command: the resumed run's step losses are exactly the
uninterrupted run's, and no temp file of the killed process is left after the rerun.

Slow (each kill is a fresh `python -m mens train` process): `pytest -m slow`."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from train_helpers import config, train_args, write_pairs

pytestmark = pytest.mark.slow
COMMON = dict(backend="lora", max_steps=6, lr=5e-3, lora_dropout=0.1, seq_len=128, save_interval=1,
              keep_checkpoints=2)


def _step_losses(run: Path) -> dict[int, float]:
    """The loss of each step in telemetry; a step logged again after a resume keeps the last."""
    losses = {}
    path = run / "telemetry.jsonl"
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue  # the torn last line of a killed process
            if ev.get("event") == "step":
                losses[ev["step"]] = ev["loss"]
    return losses


def _leftovers(run: Path) -> list[str]:
    names = [p for p in run.rglob(".*") if p.name != ".mens-probe"]
    return sorted(str(p.relative_to(run)) for p in names)


def _kill_during(argv: list[str], run: Path, after_step: int, delay: float) -> int:
    """Start `mens train`, wait until it has logged `after_step` steps, wait `delay` more, kill -9;
    the process's return code (-9 when the kill landed, 0 when it had finished first)."""
    proc = subprocess.Popen([sys.executable, "-m", "mens", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, MENS_QUIET="1"))
    try:
        deadline = time.time() + 240
        while proc.poll() is None and time.time() < deadline:
            if len(_step_losses(run)) >= after_step:
                time.sleep(delay)
                break
            time.sleep(0.01)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    return proc.returncode


def test_kill_9_anywhere_then_resume_is_exact(tiny_model_dir, tmp_path):
    from mens.train.loop import train

    data = write_pairs(tmp_path / "data", n=40)
    whole = train(config(tiny_model_dir, data, tmp_path / "whole", **COMMON))
    assert whole.status == "completed"

    rng = random.Random(int(os.environ.get("MENS_KILL_SEED", "0")))
    run = tmp_path / "killed"
    argv = train_args(tiny_model_dir, data, run, **COMMON)
    for _ in range(3):  # three kills at random points, each resumed by the next start
        before = len(_step_losses(run))
        after = min(before + rng.randint(1, 2), 5)
        code = _kill_during(argv, run, after_step=after, delay=rng.uniform(0.0, 0.3))
        assert code == -signal.SIGKILL, f"the run ended by itself (exit {code}) before the kill"
        assert len(_step_losses(run)) >= after
    resumed = train(config(tiny_model_dir, data, run, **COMMON))
    assert resumed.status in ("completed", "already-completed")
    manifest = json.loads((run / "training_manifest.json").read_text())
    assert manifest["status"] == "completed"
    got = _step_losses(run)
    assert sorted(got) == list(range(1, 7))
    assert [got[s] for s in range(1, 7)] == pytest.approx([round(x, 6) for x in whole.losses], rel=1e-6, abs=1e-6)
    assert _leftovers(run) == [], "temp files of a killed run are still there"


def test_a_killed_checkpoint_write_leaves_temps_the_next_run_removes(tiny_model_dir, tmp_path):
    """The leftovers of a write killed half-way (planted where a kill -9 leaves them) are gone
    after the next run, which resumes from the newest intact checkpoint."""
    import tempfile

    from mens.train.loop import train

    data = write_pairs(tmp_path / "data", n=40)
    run = tmp_path / "run"
    common = dict(COMMON, max_steps=4)

    def stop_at_2(step: int, loss: float) -> None:
        if step == 2:
            os.kill(os.getpid(), signal.SIGINT)

    assert train(config(tiny_model_dir, data, run, **common), on_step=stop_at_2).status == "interrupted"
    half = Path(tempfile.mkdtemp(prefix=".step-3.", suffix=".tmp", dir=run / "checkpoints"))
    (half / "optimizer.pt").write_bytes(b"half a file")
    Path(tempfile.mkdtemp(prefix=".save.", dir=run)).joinpath("adapter_model.safetensors").write_bytes(b"x")
    Path(tempfile.mkstemp(prefix=".training_manifest.json.", suffix=".tmp", dir=run)[1]).write_text("{")
    assert len(_leftovers(run)) == 3
    assert train(config(tiny_model_dir, data, run, **common)).status == "completed"
    assert _leftovers(run) == []


def test_a_run_killed_after_its_final_save_is_tidied_by_the_rerun(tiny_model_dir, tmp_path):
    """A kill -9 that lands after the final manifest but before the lock is given back leaves the
    dead process's lock file (and maybe a temp); the rerun, which finds a completed run and trains
    nothing, still takes the lock and removes them."""
    import tempfile

    from mens.train.loop import train

    data = write_pairs(tmp_path / "data", n=40)
    run = tmp_path / "run"
    cfg = config(tiny_model_dir, data, run, **dict(COMMON, max_steps=2))
    assert train(cfg).status == "completed"
    (run / ".mens.lock").write_text("")
    Path(tempfile.mkstemp(prefix=".training_manifest.json.", suffix=".tmp", dir=run)[1]).write_text("{")
    assert len(_leftovers(run)) == 2
    assert train(cfg).status == "already-completed"
    assert _leftovers(run) == []


def test_a_second_process_on_a_live_run_stops_and_a_dead_ones_lock_is_gone(tiny_model_dir, tmp_path,
                                                                           held_elsewhere):
    """While another process holds a run dir's lock (as a live `mens train` does; the kill test
    above kills real ones), `mens train` on it stops with one line (exit 2) instead of mixing its
    checkpoints, telemetry and manifest into the other's; once that process is killed (-9: no
    chance to clean up), the OS has dropped its lock and the same run trains."""
    from mens.train.loop import train

    data = write_pairs(tmp_path / "data", n=40)
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "mens", *train_args(tiny_model_dir, data, run, **dict(COMMON, max_steps=2))]
    with held_elsewhere(run, "run directory"):
        second = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, MENS_QUIET="1"),
                                timeout=240)
        assert second.returncode == 2, second.stderr
        assert second.stderr.strip().splitlines()[-1] == (f"mens: error: another mens process is writing this run directory "
                                         f"({run.resolve()}) — wait for it to finish (or stop it) before running "
                                         "this again")
        assert not (run / "telemetry.jsonl").exists() and not (run / "checkpoints").exists()
    assert (run / ".mens.lock").is_file()  # the dead process's file stays; its lock does not
    assert train(config(tiny_model_dir, data, run, **dict(COMMON, max_steps=2))).status == "completed"
    assert _leftovers(run) == []


def test_a_second_sigterm_ends_a_step_stuck_in_one_long_c_call():
    """The first SIGTERM asks for a clean stop after the step; Python cannot run that handler's
    second call while one C call runs (a backward pass in emulated bf16 ran 15+ minutes and two
    `kill`s did not stop it), so the second SIGTERM is the system's own: the process ends at once."""
    stuck = ("import re\n"
             "from mens.train.runtime import StopFlag\n"
             "with StopFlag():\n"
             "    print('ready', flush=True)\n"
             "    re.match(r'(a+)+$', 'a' * 40 + 'b')\n")  # a backtracking regex: minutes in one C call
    child = subprocess.Popen([sys.executable, "-c", stuck], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert child.poll() is None  # the first one only asks (its handler waits for the regex)
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=10) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()
