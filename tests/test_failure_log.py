"""tests/conftest.py's MENS_TEST_FAILURE_LOG: a failure is written to the file as it happens, once
under xdist (the controller writes, the workers do not), so a run cut by a time budget still
says why its tests failed (scripts/gpu_check tests)."""

import os
import subprocess
import sys

from paths import REPO

SAMPLE = '''
import sys
import pytest

def test_passes():
    pass

def test_fails():
    print("a warning of a library", file=sys.stderr)
    assert 1 + 1 == 3, "arithmetic"

@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")

def test_setup_fails(broken):
    pass
'''


def test_failures_are_logged_as_they_happen_once_under_xdist(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    log = tmp_path / "failures.log"
    # The project's conftest as a plugin (-p conftest, tests/ on the path) over a sample file;
    # no other plugin than xdist is loaded (each costs start-up time in every process).
    env = dict(os.environ, MENS_TEST_FAILURE_LOG=str(log), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "tests"), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "-p", "xdist", "-p", "conftest",
                           "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_sample.py")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    text = log.read_text()
    heads = [line for line in text.splitlines() if line.startswith("=== FAILED")]
    assert len(heads) == 2, text  # each failure once: the controller wrote it, no worker did
    assert any("test_sample.py::test_fails after" in h for h in heads)
    assert any("test_sample.py::test_setup_fails (at setup)" in h for h in heads)
    assert "arithmetic" in text and "fixture broke" in text and "a warning of a library" in text
    assert "test_passes" not in text
