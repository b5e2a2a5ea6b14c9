"""Start-up memory set-up of a training process: which malloc it runs on, switching to a faster
one, and tuning glibc's heap when it stays on glibc.

Why: on CPU, every activation, dequantised NF4 weight and gradient of a training step is a
fresh multi-megabyte tensor. glibc's malloc either maps big blocks fresh (every use pays page
faults) or keeps them in a heap that fragments as pass lengths vary; tcmalloc keeps per-size
free lists that are reused without faults and fragment little (measurements: docs/performance.md,
"Where the time and memory go"). PyTorch's own CPU launcher
(`torch.backends.xeon.run_cpu --enable_tcmalloc`) does the same thing.

A malloc can only be swapped before the process starts, so `mens train` / `mens pipeline`,
run as a command, re-execute themselves once with the library in LD_PRELOAD when it is
installed (Debian/Ubuntu: `libtcmalloc-minimal4`; jemalloc is the second choice). Set
MENS_ALLOCATOR=system to keep glibc, or =tcmalloc / =jemalloc to insist on one. On glibc,
`tune_heap` fixes the mmap threshold at 32 MiB (only the LM head's [chunk, vocab] buffers are
mapped fresh) and `trim_heap` returns freed memory once the model is built and before every pass.
No torch import here: this runs before anything heavy is loaded.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

# Commands whose process trains a model; the others gain nothing from re-executing.
TRAINING_COMMANDS = ("train", "pipeline")
_MARK = "MENS_ALLOCATOR_PRELOADED"
_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
             "/usr/local/lib", "/opt/homebrew/lib")
_CANDIDATES = {
    "tcmalloc": ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4", "libtcmalloc_minimal.so", "libtcmalloc.so"),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so"),
}


def find_library(name: str) -> str | None:
    """Path of an installed tcmalloc/jemalloc shared library, or None."""
    prefix = os.environ.get("CONDA_PREFIX") or sys.prefix
    for folder in (os.path.join(prefix, "lib"), *_LIB_DIRS):
        for file in _CANDIDATES[name]:
            path = os.path.join(folder, file)
            if os.path.isfile(path):
                return path
    return None


def wanted() -> tuple[str, str] | None:
    """(name, path) of the allocator to preload under the MENS_ALLOCATOR setting, or None."""
    choice = os.environ.get("MENS_ALLOCATOR", "auto").strip().lower()
    if choice in ("system", "glibc", "none", "off", "0"):
        return None
    names = ("tcmalloc", "jemalloc") if choice in ("auto", "") else (choice,)
    for name in names:
        if name not in _CANDIDATES:
            return None
        path = find_library(name)
        if path:
            return name, path
    return None


def in_use() -> str:
    """'tcmalloc', 'jemalloc' or 'system': what this process's malloc actually is."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return "system"
    for name in _CANDIDATES:
        if f"lib{name}" in maps:
            return name
    return "system"


def _command(argv: list[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def reexec_with_fast_allocator(argv: list[str]) -> None:
    """Replace this process by `python -m mens ARGV` with the allocator preloaded, when the
    command trains, we are on Linux, one is installed and it is not loaded yet. Returns
    (doing nothing) otherwise; never raises."""
    if not sys.platform.startswith("linux") or os.environ.get(_MARK) or _command(argv) not in TRAINING_COMMANDS:
        return
    pick = wanted()
    if pick is None or in_use() != "system":
        return
    name, path = pick
    env = dict(os.environ)
    env["LD_PRELOAD"] = os.pathsep.join(p for p in (path, env.get("LD_PRELOAD", "")) if p)
    env[_MARK] = name  # never loop, even if the preload silently fails
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, "-m", "mens", *argv], env)
    except OSError:
        return  # keep going on the system allocator


# ---------------------------------------------------------------- glibc heap tuning

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


@functools.lru_cache(maxsize=1)
def _libc():
    """glibc's handle when malloc is glibc's; None under tcmalloc/jemalloc or elsewhere. Looked
    up once: `find_library` runs ldconfig, and trim_heap() runs before every pass."""
    if in_use() != "system":
        return None
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:  # pragma: no cover - not glibc
        return None


def tune_heap() -> bool:
    """On glibc: big blocks (>= 32 MiB) mapped fresh, the rest reused from the heap, which is
    trimmed only past 128 MiB of free top. Returns whether glibc was tuned."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    libc.mallopt(_M_TRIM_THRESHOLD, 128 << 20)
    return True


def trim_heap() -> None:
    """Give glibc's free heap memory back to the OS (a no-op on other allocators)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
