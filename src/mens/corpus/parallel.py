"""The process pool the corpus stages share (2 workers by default: the machines this runs on
in CI have 2 cores), and how a stage dies.

    default_workers(workers) -> int            # None → 2; below 1 → MensError (exit 2)
    with process_pool(workers, initializer, initargs) as pool: …
    with mapped(fn, tasks, workers, serial=…) as results: …   # a stage's work, here or in a pool
    with sigterm_as_interrupt(): …             # SIGTERM takes Ctrl+C's way out (exit 130)

Workers never outlive the parent. Each one asks the kernel for SIGKILL when its parent dies
(`prctl(PR_SET_PDEATHSIG)` on Linux) and, as a fallback elsewhere, watches its parent's pid from a
thread; workers ignore Ctrl+C (the parent owns it) and take SIGTERM's default action. When the
parent leaves the pool on an exception (Ctrl+C, SIGTERM, an error) the queued work is cancelled and
the workers are killed instead of being waited for. A worker holds no output: the parent writes
every file (atomically, at the end), so killing one loses nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterator

from mens.errors import MensError

PR_SET_PDEATHSIG = 1   # <linux/prctl.h>
WATCH_SECONDS = 0.5    # the fallback watchdog's poll interval
KILL_GRACE = 2.0       # seconds a terminated worker gets before SIGKILL


def default_workers(workers: int | None) -> int:
    if workers is None:
        return min(2, os.cpu_count() or 1)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise MensError(f"--workers must be 1 or more, got {workers!r}", "--workers",
                        "give a number of processes, e.g. --workers 2 (1 runs in this process)")
    return workers


def _die_with_parent(parent: int) -> None:
    """Make this process exit when `parent` does: the kernel's parent-death signal where there
    is one, and a watchdog thread everywhere (it also covers a parent that died before prctl)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="mens-parent-watch", daemon=True).start()


def _start_worker(parent: int, initializer: Callable | None, initargs: tuple) -> None:
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl+C reaches the whole group: the parent handles it
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the parent's handler, inherited by fork
    if initializer is not None:
        initializer(*initargs)


@contextlib.contextmanager
def process_pool(workers: int, initializer=None, initargs: tuple = ()) -> Iterator[ProcessPoolExecutor]:
    """A pool that forks (fast: workers inherit the loaded packs) unless torch is already loaded
    in this process (as under `mens pipeline`), where forking a process with live OpenMP threads
    can hang; then workers are spawned fresh. Leaving it on an exception kills the workers."""
    context = multiprocessing.get_context("spawn" if "torch" in sys.modules else "fork")
    before = set(multiprocessing.active_children())
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                               initargs=(os.getpid(), initializer, initargs))
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        _kill([p for p in multiprocessing.active_children() if p not in before])
        # With its workers gone the pool's manager thread sees a broken pool and ends; waiting
        # for it here keeps it from racing the interpreter's exit (which closed its wake-up
        # pipe under it now and then: "Exception ignored … Bad file descriptor" after Ctrl+C).
        _join_manager(pool)
        raise
    pool.shutdown(wait=True)


@contextlib.contextmanager
def mapped(fn: Callable, tasks: list, workers: int, *, serial: bool, initializer=None,
           initargs: tuple = ()) -> Iterator[Iterator]:
    """`fn` over `tasks`, results in order: in this process when `serial` (for a little work a
    pool costs more than it saves; each stage says how little), else in a pool of `workers`.
    A context manager, so that an error or Ctrl+C while the caller consumes the results still
    tears the pool down."""
    if serial:
        if initializer is not None:
            initializer(*initargs)
        yield map(fn, tasks)
        return
    with process_pool(workers, initializer, initargs) as pool:
        yield pool.map(fn, tasks, chunksize=max(1, len(tasks) // (workers * 16)))


def _join_manager(pool: ProcessPoolExecutor, timeout: float = 5.0) -> None:
    thread = getattr(pool, "_executor_manager_thread", None)
    if thread is not None and thread.is_alive():
        with contextlib.suppress(Exception):
            pool._executor_manager_thread_wakeup.wakeup()
        thread.join(timeout)


def stuck_pool_threads(grace: float = 2.0) -> bool:
    """After an interrupt: is some process pool's manager thread still alive after `grace`
    seconds? Then a normal exit would hang: a worker killed half-way through sending its result
    leaves a partial message in the result pipe, the manager thread waits in recv() for bytes
    that never come, and Python's exit joins it forever (seen: 1 in ~20 SIGTERMs during `corpus
    pairs`, on 3.11). The CLI then ends the process with os._exit."""
    from concurrent.futures import process

    threads = [t for t in list(getattr(process, "_threads_wakeups", {})) if t.is_alive()]
    deadline = time.monotonic() + grace
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return any(t.is_alive() for t in threads)


def _kill(procs: list) -> None:
    for proc in procs:
        with contextlib.suppress(OSError):
            proc.terminate()
    deadline = time.monotonic() + KILL_GRACE
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            with contextlib.suppress(OSError):
                proc.kill()
            proc.join(KILL_GRACE)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl+C's KeyboardInterrupt would be, so both leave the same way."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises `Terminated` (a KeyboardInterrupt): pools are torn down,
    temp files removed, nothing half-written, and the CLI exits 130 as it does on Ctrl+C."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum, frame):
        raise Terminated()

    old = signal.signal(signal.SIGTERM, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
