"""Corpus throughput: extract + pairs + validate of 10,000 generated Vox files on 2 processes.

    .venv/bin/python bench/corpus_speed.py [--files 10000] [--workers 2] [--work out/bench-corpus]

Target (DESIGN.md §6): ≤ 60 s for 10,000 files on 2 cores. Files come from
`mens.corpus.synth.generate.write_vox_tree` (synthetic programs with `// ---` frontmatter); their
generation is not timed. Prints a table and writes `<work>/corpus_speed.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("MENS_QUIET", "1")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=Path("out/bench-corpus"))
    args = ap.parse_args()

    from mens.corpus.extract import extract
    from mens.corpus.pairs import make_pairs
    from mens.corpus.synth.generate import write_vox_tree
    from mens.corpus.validate import validate

    tree = args.work / f"vox-{args.files}-{args.seed}"
    if not tree.is_dir():
        t = time.perf_counter()
        written = write_vox_tree(tree, args.files, args.seed)
        print(f"generated {written} files in {time.perf_counter() - t:.1f}s (not timed)", file=sys.stderr)
    files = sorted(tree.rglob("*.vox"))
    mb = sum(f.stat().st_size for f in files) / 1e6

    timings = {}
    t0 = time.perf_counter()
    rep = extract([tree], args.work / "units.jsonl", workers=args.workers)
    timings["extract"] = time.perf_counter() - t0
    t = time.perf_counter()
    pairs = make_pairs(args.work / "units.jsonl", args.work / "pairs.jsonl", seed=args.seed, workers=args.workers)
    timings["pairs"] = time.perf_counter() - t
    t = time.perf_counter()
    val = validate(args.work / "pairs.jsonl", args.work / "validated.jsonl", workers=args.workers)
    timings["validate"] = time.perf_counter() - t
    total = time.perf_counter() - t0

    result = {
        "files": len(files), "source_mb": round(mb, 2), "workers": args.workers,
        "units": rep.counts["units"], "pairs": pairs.counts["pairs"], "kept": val.counts["kept"],
        "seconds": {k: round(v, 2) for k, v in timings.items()}, "total_s": round(total, 2),
        "files_per_s": round(len(files) / total, 1), "target_s": 60.0,
        "meets_target": total <= 60.0 * len(files) / 10_000,
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}",
    }
    print(f"{'stage':<10} {'seconds':>8}")
    for k, v in timings.items():
        print(f"{k:<10} {v:>8.2f}")
    print(f"{'total':<10} {total:>8.2f}   ({len(files)} files, {mb:.1f} MB, {result['files_per_s']} files/s; "
          f"target ≤ 60 s for 10,000 → {'met' if result['meets_target'] else 'NOT met'})")
    print(f"units {result['units']}, pairs {result['pairs']}, kept after validate {result['kept']}")
    (args.work / "corpus_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
