"""The process pool the corpus stages share (2 workers by default: the machines this runs on
in CI have 2 cores)."""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor


def default_workers(workers: int | None) -> int:
    return workers or min(2, os.cpu_count() or 1)


def process_pool(workers: int, initializer=None, initargs: tuple = ()) -> ProcessPoolExecutor:
    """A pool that forks (fast: workers inherit the loaded packs) unless torch is already loaded
    in this process (as under `mens pipeline`), where forking a process with live OpenMP threads
    can hang; then workers are spawned fresh."""
    context = multiprocessing.get_context("spawn" if "torch" in sys.modules else "fork")
    return ProcessPoolExecutor(workers, mp_context=context, initializer=initializer, initargs=initargs)
