"""The stage report: what a stage read, wrote, dropped and why, plus its fingerprint.

Written beside the output as `<output stem>.<stage>_report.json`, so the next run (or
`mens pipeline`) can read what happened instead of recomputing it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from mens.files import atomic_path, write_json_atomic

MAX_EXAMPLES = 20  # drop examples kept per report, so reports stay small


@dataclass
class Report:
    stage: str
    output: str
    counts: Counter = field(default_factory=Counter)      # what was read and written
    dropped: Counter = field(default_factory=Counter)     # reason -> rows/files dropped
    examples: list[dict[str, Any]] = field(default_factory=list)  # first drops, with messages
    fingerprint: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def drop(self, reason: str, where: str = "", message: str = "") -> None:
        self.dropped[reason] += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append({"reason": reason, "where": where, "message": message})

    def merge(self, other: "Report") -> None:
        self.counts.update(other.counts)
        self.dropped.update(other.dropped)
        room = MAX_EXAMPLES - len(self.examples)
        self.examples.extend(other.examples[:max(room, 0)])

    @property
    def path(self) -> Path:
        return report_path(self.output, self.stage)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["counts"] = dict(sorted(self.counts.items()))
        out["dropped"] = dict(sorted(self.dropped.items()))
        extra = out.pop("extra")
        out.update(extra)
        return out

    def write(self) -> Path:
        write_json_atomic(self.path, self.to_dict())
        return self.path

    def publish(self, rows: Iterable[Any], fingerprint: dict[str, Any],
                also: Callable[[], Any] | None = None) -> "Report":
        """Every stage's ending: its output written whole or not at all (a row each line: a JSON
        line as is, a dict or Pair dumped), `also` (outputs that stand or fall with it) before
        the output is moved into place, then this report with the output's fingerprint."""
        with atomic_path(self.output) as tmp:
            with tmp.open("w", encoding="utf-8") as fh:
                for row in rows:
                    if not isinstance(row, str):
                        row = json.dumps(row.to_dict() if hasattr(row, "to_dict") else row, ensure_ascii=False)
                    fh.write(row + "\n")
            if also is not None:
                also()
        self.fingerprint = fingerprint
        self.write()
        return self

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        dropped = ", ".join(f"{k} {v}" for k, v in sorted(self.dropped.items())) or "none"
        return f"{self.stage}: {counts}; dropped: {dropped} → {self.output}"


def report_path(output: str | Path, stage: str) -> Path:
    """`out/units.jsonl` + `extract` → `out/units.extract_report.json`."""
    output = Path(output)
    if not output.name:  # `''`, `.`, `/`: a folder, with no stem to name a report after
        from mens.errors import MensError

        raise MensError("not a file path", str(output), "give a file path, e.g. out/units.jsonl")
    return output.with_name(f"{output.stem}.{stage}_report.json")


def read_report(output: str | Path, stage: str) -> dict[str, Any] | None:
    path = report_path(output, stage)
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None  # a report edited into a list is no report
