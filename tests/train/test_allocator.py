"""`mens train` run as a command re-executes itself on tcmalloc/jemalloc when one is installed
(mens.train.allocator), records which malloc it trained on, and MENS_ALLOCATOR=system keeps glibc.
In-process calls (tests, the pipeline's own stages) never re-execute."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mens.train import allocator
from train_helpers import train_args, write_pairs


def test_setting_and_command_decide_what_is_preloaded(monkeypatch):
    monkeypatch.setenv("MENS_ALLOCATOR", "system")
    assert allocator.wanted() is None
    monkeypatch.setenv("MENS_ALLOCATOR", "no-such-malloc")
    assert allocator.wanted() is None
    monkeypatch.delenv("MENS_ALLOCATOR")
    found = allocator.wanted()
    assert found is None or (found[0] in ("tcmalloc", "jemalloc") and os.path.isfile(found[1]))
    assert allocator._command(["--quiet", "train", "--model", "m"]) == "train"
    # Commands that do not train return without touching the process (an exec would end this test).
    allocator.reexec_with_fast_allocator(["corpus", "extract", "x"])
    allocator.reexec_with_fast_allocator([])


def _malloc_of_a_process(preload: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    if preload:
        env["LD_PRELOAD"] = preload
    code = "from mens.train import allocator; print(allocator.in_use())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_in_use_reads_the_malloc_the_process_really_has():
    assert _malloc_of_a_process(None) == "system"
    found = allocator.wanted()
    if found is None:
        pytest.skip("neither tcmalloc nor jemalloc is installed (scripts/test installs tcmalloc as root)")
    assert _malloc_of_a_process(found[1]) == found[0]


def _train(tmp_path, name, tiny_model_dir, data, **env):
    out = tmp_path / name
    cmd = [sys.executable, "-m", "mens", *train_args(tiny_model_dir, data, out, max_steps=1, backend="lora")]
    environ = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "MENS_ALLOCATOR_PRELOADED")}
    proc = subprocess.run(cmd, env={**environ, "MENS_QUIET": "1", "OMP_NUM_THREADS": "1", **env},
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((out / "training_manifest.json").read_text())["device"]["allocator"]


@pytest.mark.slow  # a training subprocess. MENS_ALLOCATOR=system needs none: it makes wanted() None
# (tested above), and reexec_with_fast_allocator returns at once when wanted() is None
def test_train_command_runs_on_the_fast_allocator_when_installed(tmp_path, tiny_model_dir):
    data = write_pairs(tmp_path / "data", n=8)
    expected = allocator.wanted()
    if expected is None:
        pytest.skip("neither tcmalloc nor jemalloc is installed (scripts/test installs tcmalloc as root)")
    assert _train(tmp_path, "fast", tiny_model_dir, data) == expected[0]
