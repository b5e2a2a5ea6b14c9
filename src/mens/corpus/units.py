"""The `Unit` record: one piece of verified source or docs, the output of `corpus extract`.

Kinds: `file` (a whole source file), `construct` (one top-level construct sliced by the pack's
span), `doc_code` (a fenced block of a docs page), `doc_prose` (a docs section's prose).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator

from mens.errors import MensError
from mens.records import iter_jsonl

UNIT_KINDS = ("file", "construct", "doc_code", "doc_prose")


@dataclass
class Unit:
    kind: str                    # one of UNIT_KINDS
    lang: str | None             # pack name (a prose unit takes its page's language)
    source: str                  # path:line
    path: str
    span: list[int]              # [start_line, start_col, end_line, end_col], 1-based
    construct: str               # taxonomy kind; "file", "snippet" or "prose" otherwise
    name: str | None
    code: str                    # the source text (the prose, for doc_prose)
    doc_comment: str | None = None
    ast_hash: str | None = None
    frontmatter: dict[str, Any] = field(default_factory=dict)
    heading: str | None = None   # docs: nearest heading
    context: str | None = None   # docs: the paragraph before the block (page title for prose)
    constructs: list[str] = field(default_factory=list)  # kinds found in `code`
    script: bool = False         # parses only in the pack's script mode
    file_hash: str = ""          # content hash of the file it came from (for --incremental)

    def to_dict(self) -> dict[str, Any]:
        # Shallow on purpose: dataclasses.asdict deep-copies every frontmatter dict and list,
        # which made it the slowest part of extract.
        return {name: getattr(self, name) for name in _FIELD_NAMES}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)


_FIELD_NAMES = tuple(f.name for f in fields(Unit))
_FIELDS = set(_FIELD_NAMES)
_REQUIRED = ("kind", "source", "path", "construct", "code")
_OPTIONAL = (("lang", str), ("name", str), ("doc_comment", str), ("ast_hash", str), ("heading", str),
             ("context", str), ("file_hash", str), ("frontmatter", dict), ("constructs", list), ("span", list),
             ("script", bool))


def unit_from_dict(obj: Any, where: str) -> Unit:
    if not isinstance(obj, dict):
        raise MensError("expected a unit object", where, "give the output of `mens corpus extract`")
    missing = [k for k in _REQUIRED if not isinstance(obj.get(k), str)]
    wrong = [k for k, types in _OPTIONAL if obj.get(k) is not None and not isinstance(obj[k], types)]
    wrong += [] if all(isinstance(c, str) for c in obj.get("constructs") or []) else ["constructs"]
    if missing or wrong or obj.get("kind") not in UNIT_KINDS:
        what = (f"missing or non-string field(s) {', '.join(missing)}" if missing
                else f"field(s) of the wrong type: {', '.join(dict.fromkeys(wrong))}" if wrong
                else f"unknown unit kind {obj.get('kind')!r}")
        raise MensError(f"not a unit: {what}", where, "give the output of `mens corpus extract`")
    return Unit(**{k: v for k, v in obj.items() if k in _FIELDS})


def read_units(path: str | Path, skipped: list[str] | None = None) -> Iterator[Unit]:
    """Units of a units.jsonl; bad lines raise (file:line), or are listed in `skipped`."""
    for lineno, obj in iter_jsonl(path, skipped):
        try:
            yield unit_from_dict(obj, f"{path}:{lineno}")
        except MensError as exc:
            if skipped is None:
                raise
            skipped.append(f"{exc.where}: {exc.what}")
