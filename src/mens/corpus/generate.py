"""`mens generate-data`: write `mens.corpus.synth.generate` pairs to a file, with a report.

    generate_data(out, *, limit, seed=0) -> Report
"""

from __future__ import annotations

import json
from pathlib import Path

from mens.pipeline.fingerprint import fingerprint_block
from mens.corpus.report import Report
from mens.errors import MensError
from mens.lang import get_pack
from mens.progress import progress
from mens.records import atomic_path


def generate_data(out: str | Path, *, limit: int, seed: int = 0) -> Report:
    from mens.corpus.synth import SynthStats, generate

    if limit <= 0:
        raise MensError(f"--limit must be positive, got {limit}", "generate-data", "pass how many pairs to make")
    stats = SynthStats()
    report = Report("generate", str(out))
    pack = get_pack("vox")
    with progress("generate-data", total=limit) as bar, atomic_path(out) as tmp:
        with tmp.open("w", encoding="utf-8") as fh:
            for pair in generate(limit, seed, stats=stats, pack=pack):
                fh.write(json.dumps(pair.to_dict(), ensure_ascii=False) + "\n")
                bar.advance()
    report.counts.update(pairs=stats.kept, drafts=stats.drafts)
    report.dropped.update(parse_error=stats.parse_failures, duplicate=stats.duplicates)
    report.examples = [{"reason": "parse_error", "message": f} for f in stats.failures]
    report.extra["synth"] = stats.to_dict()
    report.fingerprint = fingerprint_block({}, {"limit": limit, "seed": seed}, [pack])
    report.write()
    return report
