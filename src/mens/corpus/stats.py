"""`corpus stats`: what a pairs file holds — rows by category, lane, lang and rating, and a
length histogram in tokens (with a tokenizer) or characters.

    stats(path, *, tokenizer=None, out=None, lenient=False) -> dict
    format_stats(stats) -> str
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from mens.corpus.report import report_path
from mens.errors import MensError
from mens.progress import progress
from mens.files import write_json_atomic
from mens.records import read_pairs

BUCKETS = (64, 128, 256, 512, 1024, 2048, 4096, 8192)


def _load_tokenizer(path: str | Path):
    """A `tokenizers` tokenizer from a model or tokenizer folder (tokenizer.json), or the file."""
    from tokenizers import Tokenizer

    path = Path(path)
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise MensError("no tokenizer.json found", str(path), "give a model folder or a tokenizer.json")
    try:
        return Tokenizer.from_file(str(file))
    except Exception as exc:  # the library raises a bare Exception on a bad file
        raise MensError(f"cannot load tokenizer: {exc}", str(file), "give a valid tokenizer.json") from None


def _bucket(n: int) -> str:
    for b in BUCKETS:
        if n <= b:
            return f"<={b}"
    return f">{BUCKETS[-1]}"


def stats(path: str | Path, *, tokenizer: str | Path | None = None, out: str | Path | None = None,
          lenient: bool = False) -> dict[str, Any]:
    pairs, skipped = read_pairs(path, lenient=lenient)
    if not pairs:
        raise MensError("no rows", str(path), "give a non-empty pairs file")
    tok = _load_tokenizer(tokenizer) if tokenizer else None
    unit = "tokens" if tok else "chars"
    by = {k: Counter() for k in ("category", "lane", "lang", "rating", "response_mode")}
    hist: Counter = Counter()
    lengths: list[int] = []
    with progress("stats", total=len(pairs)) as bar:
        for pair in pairs:
            bar.advance()
            for key, counter in by.items():
                value = getattr(pair, key)
                counter["none" if value is None else str(value)] += 1
            text = "\n".join(m["content"] for m in pair.chat())
            n = len(tok.encode(text).ids) if tok else len(text)
            lengths.append(n)
            hist[_bucket(n)] += 1
    lengths.sort()
    result = {
        "file": str(path), "rows": len(pairs), "skipped_lines": len(skipped),
        **{f"by_{k}": dict(sorted(v.items(), key=lambda kv: (-kv[1], kv[0]))) for k, v in by.items()},
        "length_unit": unit, "tokenizer": str(tokenizer) if tokenizer else None,
        "length": {"min": lengths[0], "median": lengths[len(lengths) // 2],
                   "p95": lengths[min(len(lengths) - 1, int(0.95 * len(lengths)))], "max": lengths[-1],
                   "total": sum(lengths)},
        "length_histogram": {b: hist[b] for b in [f"<={b}" for b in BUCKETS] + [f">{BUCKETS[-1]}"] if hist[b]},
    }
    write_json_atomic(out or report_path(path, "stats"), result)
    return result


def format_stats(result: dict[str, Any]) -> str:
    lines = [f"{result['file']}: {result['rows']} rows"
             + (f" ({result['skipped_lines']} malformed lines skipped)" if result["skipped_lines"] else "")]
    for key in ("category", "lane", "lang", "rating", "response_mode"):
        items = result[f"by_{key}"]
        lines.append(f"by {key}:")
        lines += [f"  {name:<24} {count:>8}  {100 * count / result['rows']:5.1f}%" for name, count in items.items()]
    ln = result["length"]
    lines.append(f"length ({result['length_unit']}): min {ln['min']}, median {ln['median']}, "
                 f"p95 {ln['p95']}, max {ln['max']}, total {ln['total']}")
    peak = max(result["length_histogram"].values())
    for bucket, count in result["length_histogram"].items():
        lines.append(f"  {bucket:>7} {count:>8}  {'#' * max(1, round(40 * count / peak))}")
    return "\n".join(lines)
