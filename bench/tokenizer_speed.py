"""VoxTokenizer encode throughput: the pure-function form and the HF fast tokenizer, in tokens/s.

    .venv/bin/python bench/tokenizer_speed.py [--corpus "examples/vox/**/*.vox"] [--repeat 50] [--rounds 5]

The corpus (all matching files) is repeated `--repeat` times; each form encodes every text of
that list, `--rounds` times, and the best round is reported (the least disturbed by other load
on the machine). The HF form is timed both one text per call and as one batched call, since the
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


def best_of(rounds: int, fn) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


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
    hf.model_max_length = 1 << 30  # whole files, not model windows: silence the length warning

    t_pure, pure_ids = best_of(args.rounds, lambda: [vt.encode(t) for t in texts])
    t_hf_one, hf_ids = best_of(args.rounds, lambda: [hf(t, add_special_tokens=False)["input_ids"] for t in texts])
    t_hf_batch, hf_batch = best_of(args.rounds, lambda: hf(texts, add_special_tokens=False)["input_ids"])
    if pure_ids != hf_ids or pure_ids != hf_batch:
        print("tokenizer_speed: the pure and HF forms disagree", file=sys.stderr)
        return 1
    n_tokens = sum(len(ids) for ids in pure_ids)

    result = {
        "files": len(files), "repeat": args.repeat, "texts": len(texts), "chars": chars,
        "tokens": n_tokens, "chars_per_token": round(chars / n_tokens, 3),
        "pure_tokens_per_s": round(n_tokens / t_pure),
        "hf_per_text_tokens_per_s": round(n_tokens / t_hf_one),
        "hf_batch_tokens_per_s": round(n_tokens / t_hf_batch),
        "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"corpus: {len(files)} files x {args.repeat} = {len(texts)} texts, {chars:,} chars, "
          f"{n_tokens:,} tokens ({result['chars_per_token']} chars/token)")
    print(f"{'form':<28}{'tokens/s':>14}")
    for name, key in (("pure encode()", "pure_tokens_per_s"),
                      ("HF fast, one text per call", "hf_per_text_tokens_per_s"),
                      ("HF fast, one batched call", "hf_batch_tokens_per_s")):
        print(f"{name:<28}{result[key]:>14,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
