"""Run a model's Python answer against a task's unit tests, never in the mens process.

    run_tests(code, tests, limits=Limits()) -> TestRun(passed, total, status, message)

Each run gets a fresh temp directory as its cwd and a child `python -I -S` (no site-packages, no
PYTHON* variables) that:

- lives under resource limits set before exec: address space (`memory_mb`), CPU seconds, file
  size (`file_mb`), open files, no core dumps; and a wall-clock limit after which its whole
  process group is killed;
- runs with no network: in a new network namespace (`unshare -rn`) where the kernel allows one,
  and always with an environment free of proxies;
- installs, before the answer runs, an audit hook (PEP 578; Python code cannot remove one) that
  ends the process at once (status `violation`) on opening a file outside the temp dir and the
  standard library (or any directory outside the temp dir), on changing the file system outside
  the temp dir (mkdir, rmdir, chmod, chown, utime, truncate, link, symlink, xattrs), on any socket,
  on fork/exec/spawn/subprocess/os.system, and on ctypes; mkfifo/mknod (no audit event) are gone.

The runner executes the answer, then the tests in the answer's namespace: a string of `test_*`
functions, or a list of statements (each one test, e.g. `"assert add(1, 2) == 3"`). It reports
how many passed on its last stdout line behind a per-run nonce it read from stdin before the
answer ran. Anything else — a crash, a timeout, a violation, memory exhausted — passes 0 tests.
The limits protect the host; they do not make the count tamper-proof against an answer written
to forge it (an answer can inspect its own interpreter).
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# Environment variables a child never inherits: proxies would be a way out, PYTHON* a way in.
_DROP_ENV = ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy")

_RUNNER = r'''
import os, sys
NONCE = sys.stdin.readline().strip()
WORK = os.path.realpath(os.getcwd())
STDLIB = os.path.realpath(os.path.dirname(os.__file__))
BLOCKED = ("socket.", "subprocess.", "os.system", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn",
           "os.spawn", "os.kill", "os.killpg", "ctypes.", "pty.", "os.putenv", "os.unsetenv", "sys.setrecursionlimit")

def _stop(why):
    os.write(2, ("mens-sandbox: violation: " + why + "\n").encode())
    os._exit(97)

# Events that change the file system at a path (or an fd) without opening a file: each path
# argument's index, then its dir_fd's (None: the call takes none). Allowed inside the temp dir only.
CHANGES = {"os.mkdir": ((0, 2),), "os.rmdir": ((0, 1),), "os.chmod": ((0, 2),), "os.chown": ((0, 3),),
           "os.utime": ((0, 3),), "os.truncate": ((0, None),), "os.link": ((0, 2), (1, 3)),
           "os.symlink": ((1, 2),), "os.chflags": ((0, None),), "os.setxattr": ((0, None),),
           "os.removexattr": ((0, None),)}

def _where(path, dir_fd=None):
    """The real path `path` names: an fd by /proc/self/fd, a relative path against `dir_fd`."""
    if isinstance(path, int):
        return os.path.realpath("/proc/self/fd/%d" % path)
    path = os.fsdecode(path)
    if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(path):  # None is -1 here
        path = os.path.join("/proc/self/fd/%d" % dir_fd, path)
    return os.path.realpath(path)

def _inside(real):
    return real == WORK or real.startswith(WORK + os.sep)

def _hook(event, args):
    if event == "open":
        path = args[0]
        if isinstance(path, int):
            return
        real = os.path.realpath(os.fsdecode(path))
        mode, flags = args[1], args[2] or 0
        writing = (any(c in str(mode) for c in "wax+") if mode is not None
                   else bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND)))
        if not _inside(real) and (writing or os.path.isdir(real)  # a dir fd: os.open(..., dir_fd=) writes there
                                  or not (real == STDLIB or real.startswith(STDLIB + os.sep))):
            _stop("open " + real)
    elif event in CHANGES:
        for at, fd_at in CHANGES[event]:
            real = _where(args[at], args[fd_at] if fd_at is not None else None)
            if not _inside(real):
                _stop(event + " " + real)
    elif event == "import" and args[0] == "posix":  # a fresh copy, with mkfifo and mknod back
        _stop("import posix")
    elif event.startswith(BLOCKED) or event in ("os.chdir", "shutil.rmtree", "os.remove", "os.rename"):
        _stop(event)

with open("answer.py", encoding="utf-8") as fh:
    ANSWER = fh.read()
with open("tests.json", encoding="utf-8") as fh:
    import json
    TESTS = json.load(fh)
import posix
for _name in ("mkfifo", "mknod"):  # they raise no audit event: gone from the answer's reach
    for _mod in (os, posix):
        if hasattr(_mod, _name):
            delattr(_mod, _name)
sys.addaudithook(_hook)
ns = {"__name__": "answer"}
passed = total = 0
try:
    exec(compile(ANSWER, "answer.py", "exec"), ns)
    loaded = True
except BaseException as exc:
    loaded = False
    print("answer raised", type(exc).__name__, exc, file=sys.stderr)
if isinstance(TESTS, str):
    tns = dict(ns)
    if loaded:
        try:
            exec(compile(TESTS, "tests.py", "exec"), tns)
        except BaseException as exc:
            print("tests raised", type(exc).__name__, exc, file=sys.stderr)
    cases = [v for k, v in tns.items() if k.startswith("test") and callable(v) and k not in ns]
    total = max(len(cases), TESTS.count("def test"))
else:
    cases = [(lambda src=src: exec(compile(src, "tests.py", "exec"), dict(ns))) for src in TESTS]
    total = len(TESTS)
if loaded:
    for case in cases:
        try:
            case()
            passed += 1
        except BaseException as exc:
            print("test failed", type(exc).__name__, exc, file=sys.stderr)
sys.stdout.flush()
sys.stdout.write("\n" + NONCE + " " + json.dumps({"passed": passed, "total": total}) + "\n")
sys.stdout.flush()
os._exit(0)
'''


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 5.0     # wall clock, the whole run
    memory_mb: int = 512       # address space
    file_mb: int = 4           # the largest file it may write (its stdout included)
    open_files: int = 64


@dataclass
class TestRun:
    passed: int
    total: int
    status: str                # ok | timeout | violation | crashed | memory
    message: str = ""

    @property
    def score(self) -> float:
        return self.passed / self.total if self.total and self.status == "ok" else 0.0


@lru_cache(maxsize=1)
def network_namespace() -> list[str]:
    """`unshare -rn` when this kernel lets an unprivileged process have a network namespace of
    its own (then the child sees no interface but a down loopback), else nothing."""
    exe = shutil.which("unshare")
    if not exe:
        return []
    try:
        ok = subprocess.run([exe, "-rn", "true"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return [exe, "-rn"] if ok else []


def _limit(limits: Limits):
    def apply() -> None:
        mb = 1024 * 1024
        cpu = int(limits.timeout_s) + 1
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * mb, limits.file_mb * mb))
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def _env(work: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if k in ("PATH", "LANG", "LC_ALL", "TZ") and k.lower() not in _DROP_ENV}
    return {**keep, "HOME": str(work), "TMPDIR": str(work), "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0"}


def run_tests(code: str, tests: str | list[str], limits: Limits = Limits()) -> TestRun:
    """Run `code`, then `tests`, in a sandboxed child; how many tests passed (see the module doc)."""
    nonce = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="mens-sandbox-") as root:
        work, logs = Path(root) / "work", Path(root) / "logs"
        work.mkdir()
        logs.mkdir()
        (work / "answer.py").write_text(code, encoding="utf-8")
        (work / "tests.json").write_text(json.dumps(tests), encoding="utf-8")
        (logs / "runner.py").write_text(_RUNNER, encoding="utf-8")
        cmd = [*network_namespace(), sys.executable, "-I", "-S", "-B", str(logs / "runner.py")]
        with open(logs / "out", "wb") as out, open(logs / "err", "wb") as err:
            proc = subprocess.Popen(cmd, cwd=work, env=_env(work), stdin=subprocess.PIPE, stdout=out, stderr=err,
                                    preexec_fn=_limit(limits), start_new_session=True, close_fds=True)
            timed_out = False
            try:
                proc.stdin.write((nonce + "\n").encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                proc.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc)
        stdout = _tail(logs / "out")
        stderr = _tail(logs / "err")
    return _verdict(proc.returncode, timed_out, stdout, stderr, nonce)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child and everything it started (it leads its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _tail(path: Path, limit: int = 64 * 1024) -> str:
    with open(path, "rb") as fh:
        fh.seek(max(0, path.stat().st_size - limit))
        return fh.read().decode("utf-8", "replace")


def _verdict(code: int | None, timed_out: bool, stdout: str, stderr: str, nonce: str) -> TestRun:
    last = stderr.strip().splitlines()[-1:] or [""]
    if timed_out or code in (-signal.SIGXCPU, -signal.SIGKILL):
        return TestRun(0, 0, "timeout", "stopped after the time limit")
    if code == 97:
        return TestRun(0, 0, "violation", last[0].removeprefix("mens-sandbox: violation: "))
    if "MemoryError" in stderr and code != 0:
        return TestRun(0, 0, "memory", "memory limit reached")
    for line in reversed(stdout.splitlines()):
        if line.startswith(nonce + " "):
            counts = json.loads(line[len(nonce) + 1:])
            return TestRun(int(counts["passed"]), int(counts["total"]), "ok", last[0][:200])
    return TestRun(0, 0, "crashed", f"exit code {code}: {last[0][:200]}")
