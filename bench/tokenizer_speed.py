"""VoxTokenizer encode throughput: the pure-function form and the HF fast tokenizer, in tokens/s.

    .venv/bin/python bench/tokenizer_speed.py [--corpus "examples/vox/**/*.vox"] [--repeat 50] [--rounds 5]

The corpus (all matching files) is repeated `--repeat` times; each form encodes every text of
that list, `--rounds` times, and the best round is reported (the least disturbed by other load
on the machine), both as tokens per second of this process's CPU time and of wall-clock time. The HF form is timed both one text per call and as one batched call, since the
data loader can do either. Both forms must produce identical ids, which the script checks.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from mens.train import vox_tokenizer as vt  # noqa: E402


def best_of(rounds: int, fn) -> tuple[float, float, object]:
    """(best wall seconds, best CPU seconds of this process, result) over `rounds` calls.

    Both clocks, because on a shared machine the wall clock mostly measures the other jobs."""
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(rounds):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
    return wall, cpu, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(REPO / "examples" / "vox" / "**" / "*.vox"),
                    help="glob of text files (** recurses)")
    ap.add_argument("--repeat", type=int, default=50, help="times the corpus is repeated")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds per form; the best counts")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = ap.parse_args(argv)

    files = sorted(glob.glob(args.corpus, recursive=True))
    if not files:
        print(f"tokenizer_speed: no files match {args.corpus!r}", file=sys.stderr)
        return 2
    texts = [Path(f).read_text(encoding="utf-8", errors="replace") for f in files] * args.repeat
    chars = sum(len(t) for t in texts)

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
    hf = vt.build_hf_tokenizer()

    pure = best_of(args.rounds, lambda: [vt.encode(t) for t in texts])
    hf_one = best_of(args.rounds, lambda: [hf(t, add_special_tokens=False)["input_ids"] for t in texts])
    hf_batch = best_of(args.rounds, lambda: hf(texts, add_special_tokens=False)["input_ids"])
    pure_ids = pure[2]
    if pure_ids != hf_one[2] or pure_ids != hf_batch[2]:
        print("tokenizer_speed: the pure and HF forms disagree", file=sys.stderr)
        return 1
    n_tokens = sum(len(ids) for ids in pure_ids)

    result = {
        "files": len(files), "repeat": args.repeat, "texts": len(texts), "chars": chars,
        "tokens": n_tokens, "chars_per_token": round(chars / n_tokens, 3),
        "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
        "load_average_1m": round(os.getloadavg()[0], 1),
    }
    forms = (("pure encode()", "pure", pure), ("HF fast, one text per call", "hf_per_text", hf_one),
             ("HF fast, one batched call", "hf_batch", hf_batch))
    for _, key, (wall, cpu, _) in forms:
        result[f"{key}_tokens_per_s_wall"] = round(n_tokens / wall)
        result[f"{key}_tokens_per_s_cpu"] = round(n_tokens / cpu) if cpu > 0 else None
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"corpus: {len(files)} files x {args.repeat} = {len(texts)} texts, {chars:,} chars, "
          f"{n_tokens:,} tokens ({result['chars_per_token']} chars/token)")
    print(f"{'form':<28}{'tokens/s (CPU)':>16}{'tokens/s (wall)':>17}   load {result['load_average_1m']}")
    for name, key, _ in forms:
        print(f"{name:<28}{result[key + '_tokens_per_s_cpu']:>16,}{result[key + '_tokens_per_s_wall']:>17,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
