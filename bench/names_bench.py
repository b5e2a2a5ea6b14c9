"""A bench of held-out synthetic requests whose names are made up: does the model copy the names
it is asked for? ("names copied" in docs/performance.md, "Quickstart quality".)

    .venv/bin/python bench/names_bench.py -o names-bench/ [--n 54] [--seed 101]
    mens bench --model RUN --bench names-bench --max-new-tokens 200 --batch-size 54

The tasks are pairs of the synthetic generator (`mens.corpus.synth.generate`) from a seed the
quickstart does not train on, kept when their prompt quotes a made-up name (`velmo_rask`,
`VelmoRask`) that the reference code uses; the needles are those names, so pass@1 is "parses,
is not a stub, and writes every made-up name it was asked for". A made-up name cannot be guessed
from the domain, only copied from the prompt. Rename requests are left out (their prompt holds
the whole answer). The same seed writes the same bench (tests/evaluate/test_names_bench.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

QUOTED = re.compile(r"`([A-Za-z_]\w*)")


def made_up(name: str, code: str) -> bool:
    """A name the generator made up: none of its domain words, used in the code."""
    from mens.corpus.synth.words import ENTITIES

    known = {w for e in ENTITIES for w in (e.var, e.plural, e.type_name.lower(), *(f.name for f in e.fields))}
    parts = [p.lower() for p in re.split(r"_|(?<=[a-z])(?=[A-Z])", name) if p]
    return re.search(rf"(?<![\w@.]){re.escape(name)}(?!\w)", code) is not None and len(name) > 3 \
        and not any(p in known for p in parts) and not name.startswith("test_")


def tasks(n: int, seed: int) -> list[dict]:
    from mens.corpus.synth.generate import generate

    out: list[dict] = []
    for pair in generate(20 * n, seed=seed):
        if "rename" in pair.prompt.lower() or "```" in pair.prompt:
            continue
        names = [q for q in dict.fromkeys(QUOTED.findall(pair.prompt)) if made_up(q, pair.response)]
        if not names:
            continue
        code = re.sub(r"^```\w*\n|```\s*$", "", pair.response.strip())
        out.append({"id": f"names-{len(out)}", "category": pair.category or "function", "prompt": pair.prompt,
                    "expect_contains": names, "context_files": [], "reference": code.rstrip() + "\n"})
        if len(out) == n:
            break
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, required=True, help="folder for the bench (names.jsonl)")
    ap.add_argument("--n", type=int, default=54, help="tasks (54, the size of examples/bench)")
    ap.add_argument("--seed", type=int, default=101, help="generator seed; the quickstart trains on seed 0")
    args = ap.parse_args(argv)
    rows = tasks(args.n, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (args.out / "names.jsonl").write_text(text, encoding="utf-8")
    print(f"{len(rows)} tasks → {args.out / 'names.jsonl'} (sha256 {hashlib.sha256(text.encode()).hexdigest()[:12]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
