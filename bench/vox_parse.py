"""Vox parse speed: MB/s of source on one core, lexer alone and full analysis.

    .venv/bin/python bench/vox_parse.py [--mb 5] [--repeat 3] [--out out/bench-vox/vox_parse.json]

Target (DESIGN.md §6): ≥ 1 MB/s of Vox source on one core. The corpus is `examples/vox/**/*.vox`
repeated until it holds at least `--mb` megabytes. Two shapes are timed: file by file (how the
corpus stages use the pack; the usual case) and one concatenated text (a worst case for memory).
Each figure is the best of `--repeat` runs. Two clocks: CPU seconds of this process (what one
core's work costs; the target is judged on it, since a shared machine's wall clock also counts
time spent waiting for a core) and wall seconds. Prints a table and writes the JSON.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def best_of(fn, repeat: int) -> tuple[float, float]:
    """(best CPU seconds, best wall seconds) over `repeat` runs."""
    cpu = wall = float("inf")
    for _ in range(repeat):
        c, w = time.process_time(), time.perf_counter()
        fn()
        cpu = min(cpu, time.process_time() - c)
        wall = min(wall, time.perf_counter() - w)
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=5.0, help="corpus size in MB (examples repeated)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the best counts")
    ap.add_argument("--examples", type=Path, default=REPO / "examples" / "vox")
    ap.add_argument("--out", type=Path, default=Path("out/bench-vox/vox_parse.json"))
    args = ap.parse_args()

    from mens.lang.vox import VoxPack, parse
    from mens.lang.vox.lexer import Lexed
    from mens.lang.vox.parser import gc_paused
    from mens.files import write_json_atomic

    sources = [p.read_text(encoding="utf-8") for p in sorted(args.examples.rglob("*.vox"))]
    if not sources:
        print(f"no .vox files under {args.examples}", file=sys.stderr)
        return 2
    files: list[str] = []
    size = 0
    while size < args.mb * 1e6:
        for s in sources:
            files.append(s)
            size += len(s.encode("utf-8"))
    mb = size / 1e6
    big = "\n".join(files)
    pack = VoxPack()

    def lex_files():
        with gc_paused():
            for s in files:
                Lexed(s)

    def parse_files():
        for s in files:
            parse(s)

    def analyze_files():
        for s in files:
            pack.analyze(s)

    rows = [
        ("lex, file by file", best_of(lex_files, args.repeat)),
        ("parse (AST), file by file", best_of(parse_files, args.repeat)),
        ("analyze (AST + constructs), file by file", best_of(analyze_files, args.repeat)),
        ("parse (AST), one concatenated text", best_of(lambda: parse(big), args.repeat)),
    ]
    tokens = sum(len(Lexed(s).kinds) for s in sources) * (len(files) // len(sources))

    load = os.getloadavg()[0]
    print(f"Vox parse speed: {mb:.2f} MB, {len(files)} files, ~{tokens:,} tokens, one core, "
          f"best of {args.repeat}, load average {load:.1f} on {os.cpu_count()} CPUs")
    print(f"| {'what':<42} | {'CPU s':>6} | {'MB/s (CPU)':>10} | {'wall s':>6} | {'MB/s (wall)':>11} |")
    print(f"|{'-' * 44}|{'-' * 8}|{'-' * 12}|{'-' * 8}|{'-' * 13}|")
    for name, (cpu, wall) in rows:
        print(f"| {name:<42} | {cpu:6.2f} | {mb / cpu:10.2f} | {wall:6.2f} | {mb / wall:11.2f} |")
    worst = min(mb / cpu for name, (cpu, wall) in rows[1:])
    print(f"slowest parse figure: {worst:.2f} MB/s of CPU time — target ≥ 1 MB/s: "
          f"{'met' if worst >= 1 else 'NOT met'}")

    result = {
        "source_mb": round(mb, 3), "files": len(files), "tokens": tokens, "repeat": args.repeat,
        "results": [{"what": n, "cpu_s": round(c, 3), "mb_per_cpu_s": round(mb / c, 3),
                     "wall_s": round(w, 3), "mb_per_wall_s": round(mb / w, 3)} for n, (c, w) in rows],
        "slowest_mb_per_cpu_s": round(worst, 3), "target_mb_per_s": 1.0, "met": worst >= 1.0,
        "load_average": round(load, 2), "cpus": os.cpu_count(),
        "python": platform.python_version(), "machine": platform.machine(),
    }
    write_json_atomic(args.out, result)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
