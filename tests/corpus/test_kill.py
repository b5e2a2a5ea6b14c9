"""Killing a corpus stage (kill -9 or SIGTERM) while its pool is busy leaves no process behind
and no output, full or partial; SIGTERM leaves the way Ctrl+C does (exit 130, one line).

Real processes: `python -m mens corpus …` in its own process group, killed once its pool workers
exist, then /proc is searched for anything left in that group."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from paths import EXAMPLES

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

VOX = sorted((EXAMPLES / "vox").rglob("*.vox"))


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of a live process, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2])


def _procs(match) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _proc_stat(int(entry))
            if stat and stat[0] != "Z" and match(*stat):  # a zombie is dead: it only waits to be reaped
                found.append(int(entry))
    return found


def _big_pairs(path: Path, rows: int) -> Path:
    codes = [f.read_text() for f in VOX]
    with path.open("w") as fh:
        for i in range(rows):
            fh.write(json.dumps({"prompt": f"Write program {i}", "lang": "vox",
                                 "response": "```vox\n" + codes[i % len(codes)] + "```"}) + "\n")
    return path


def _big_tree(root: Path, files: int) -> Path:
    for i in range(files):
        (root / f"d{i % 20}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i % 20}" / f"f{i}.vox").write_text(VOX[i % len(VOX)].read_text())
    return root


def _kill_when_busy(tmp: Path, argv: list[str], sig: int, workers: int = 2) -> subprocess.CompletedProcess:
    """Start `mens ARGV`, wait until its pool's workers exist, send `sig` to it (not its
    group), and wait for it. Asserts nothing of its group outlives it (and kills what did)."""
    env = dict(os.environ, MENS_QUIET="1")
    with open(tmp / "stdout", "w+") as out, open(tmp / "stderr", "w+") as err:  # files: no pipe an orphan holds
        proc = subprocess.Popen([sys.executable, "-m", "mens", *argv], stdout=out, stderr=err, text=True, env=env,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while len(_procs(lambda state, ppid, pgrp: ppid == proc.pid)) < workers:
                assert proc.poll() is None, f"finished before its pool started: {(tmp / 'stderr').read_text()}"
                assert time.monotonic() < deadline, "the pool never started"
                time.sleep(0.02)
            time.sleep(0.3)  # the workers are inside their tasks now
            assert proc.poll() is None, "finished before it could be killed: give it more work"
            os.kill(proc.pid, sig)
            proc.wait(timeout=60)
            deadline = time.monotonic() + 10
            while (left := _procs(lambda state, ppid, pgrp: pgrp == proc.pid)) and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            for pid in _procs(lambda state, ppid, pgrp: pgrp == proc.pid):  # this test's own orphans
                os.kill(pid, signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert not left, f"processes outlived the killed parent: {left}"
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read())


def _nothing_written(folder: Path, *names: str) -> None:
    left = sorted(p.name for p in folder.iterdir() if any(p.name.startswith(n) or p.name.startswith("." + n)
                                                          for n in names))
    assert left == [], f"left behind: {left}"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_validate_killed_leaves_no_worker_and_no_output(tmp_path, sig):
    pairs = _big_pairs(tmp_path / "pairs.jsonl", 24_000)
    res = _kill_when_busy(tmp_path, ["corpus", "validate", str(pairs), "-o", str(tmp_path / "v.jsonl"),
                           "--quarantine", str(tmp_path / "q.jsonl"), "--workers", "2"], sig)
    _nothing_written(tmp_path, "v.", "q.")
    if sig == signal.SIGKILL:
        assert res.returncode == -signal.SIGKILL
    else:  # the Ctrl+C exit: code 130, one line, no traceback
        assert res.returncode == 130, res.stderr
        assert res.stderr.strip() == "mens: interrupted"


def test_extract_killed_leaves_no_worker_and_no_output(tmp_path):
    tree = _big_tree(tmp_path / "src", 3000)
    res = _kill_when_busy(tmp_path, ["corpus", "extract", str(tree), "-o", str(tmp_path / "u.jsonl"), "--workers", "2"],
                          signal.SIGKILL)
    assert res.returncode == -signal.SIGKILL
    _nothing_written(tmp_path, "u.")


def test_pairs_terminated_exits_like_ctrl_c(tmp_path):
    units = tmp_path / "units.jsonl"
    with units.open("w") as fh:
        for i in range(6000):
            code = VOX[i % len(VOX)].read_text()
            fh.write(json.dumps({"kind": "file", "lang": "vox", "source": f"f{i}.vox:1", "path": f"f{i}.vox",
                                 "span": [1, 1, 1, 1], "construct": "file", "name": f"f{i}", "code": code}) + "\n")
    res = _kill_when_busy(tmp_path, ["corpus", "pairs", str(units), "-o", str(tmp_path / "p.jsonl"), "--workers", "2"],
                          signal.SIGTERM)
    assert res.returncode == 130 and res.stderr.strip() == "mens: interrupted", res.stderr
    _nothing_written(tmp_path, "p.")


@pytest.mark.parametrize("kernel", [True, False], ids=["pdeathsig", "watchdog-only"])
def test_a_worker_exits_when_its_parent_dies(tmp_path, kernel):
    """`_die_with_parent` on its own: a process whose parent (a shell) exits is gone within a
    second, by the kernel's parent-death signal or, without it, by the pid watchdog."""
    child = tmp_path / "child.py"
    child.write_text(
        "import os, sys, time\n"
        "from mens.corpus import parallel\n"
        f"if not {kernel}:\n"
        "    sys.platform = 'elsewhere'  # no prctl: the watchdog alone\n"
        "parallel._die_with_parent(os.getppid())\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(60)\n")
    with open(tmp_path / "pid", "w") as out:
        subprocess.run(["sh", "-c", f"'{sys.executable}' '{child}' & sleep 1.5"], stdout=out, timeout=30)
    pid = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 5
    while (stat := _proc_stat(pid)) and stat[0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    alive = stat is not None and stat[0] != "Z"
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the orphan kept running"


def test_a_pool_thread_stuck_on_a_half_sent_result_is_seen():
    """A worker killed half-way through sending its result leaves a partial message in the result
    pipe; the pool's manager thread then waits for bytes that never come and a normal exit would
    join it forever (a SIGTERM'd `corpus pairs` hung 1 time in ~20). stuck_pool_threads() must
    see it, so the CLI can leave with os._exit; with nothing stuck it says so."""
    import struct
    from concurrent.futures import ProcessPoolExecutor

    from mens.corpus.parallel import stuck_pool_threads

    assert stuck_pool_threads(grace=0.1) is False
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    assert pool.submit(int, 7).result() == 7
    writer = pool._result_queue._writer.fileno()
    os.write(writer, struct.pack("!i", 64))  # a length header, and the payload never follows
    try:
        assert stuck_pool_threads(grace=0.5) is True
    finally:
        os.write(writer, b"\0" * 64)  # the rest of the message: garbage, the pool breaks and ends
        pool.shutdown(wait=True)
    assert stuck_pool_threads(grace=2.0) is False
