"""Decontamination: does any bench prompt or reference solution appear in the training data?

A bench whose tasks leaked into training measures memory, not skill. Two checks per task:

- text: the normalised prompt (lower case, punctuation dropped, whitespace collapsed) occurs
  inside a normalised training prompt or response — catches copies and light rewording of case
  and spacing;
- code: the reference solution (when the task has one) has the same structural hash as the
  code of a training response — the language pack's hash ignores whitespace and comments, so
  a reformatted copy is still caught.

Very short prompts (fewer than `min_words` words) are compared by equality only, since a
five-word instruction is bound to occur inside some longer one by chance.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mens.errors import MensError
from mens.lang.base import extract_code
from mens.records import iter_jsonl

_NON_WORD = re.compile(r"[^\w]+")


def normalise(text: str) -> str:
    return " ".join(_NON_WORD.sub(" ", text.lower()).split())


def _training_texts(paths: list[str | Path]) -> list[tuple[str, str, str]]:
    """(where, prompt, response) for every row of the training files; any row shape counts."""
    rows = []
    for path in paths:
        for lineno, obj in iter_jsonl(path, has_lenient=False):
            if not isinstance(obj, dict):
                continue
            prompt = str(obj.get("prompt") or obj.get("instruction") or "")  # a number or a list is text too
            response = str(obj.get("response") or obj.get("output") or "")
            messages = obj.get("messages")
            for m in messages if isinstance(messages, list) else []:
                if isinstance(m, dict) and m.get("role") == "user":
                    prompt += "\n" + str(m.get("content", ""))
                elif isinstance(m, dict) and m.get("role") == "assistant":
                    response += "\n" + str(m.get("content", ""))
            if obj.get("text"):
                response += "\n" + str(obj["text"])
            rows.append((f"{path}:{lineno}", str(prompt), str(response)))
    return rows


def find_contamination(bench: str | Path, data: list[str | Path], min_words: int = 8) -> dict[str, Any]:
    """A report `{bench, data, tasks_checked, contaminated, hits: [{id, field, where}]}`."""
    from mens.evaluate.tasks import load_tasks
    from mens.lang import get_pack

    tasks = [t for t, _ in load_tasks(bench)]
    if not tasks:
        raise MensError("the bench holds no tasks", str(bench), "give a .jsonl file with one task a line")
    rows = _training_texts(list(data))
    if not rows:  # a check that saw nothing must not pass
        raise MensError("no training rows to check against: the data holds no JSON object",
                        ", ".join(map(str, data)), "give the training JSONL files, one JSON object a line")
    norm_rows = [(where, normalise(p), normalise(r), r) for where, p, r in rows]
    hashes: dict[str, dict[str, str]] = {}  # lang -> structural hash -> where
    hits: list[dict[str, str]] = []
    for task in tasks:
        needle = normalise(task.prompt)
        long_enough = len(needle.split()) >= min_words
        for where, p, r, _ in norm_rows:
            if needle and (needle == p or (long_enough and (needle in p or needle in r))):
                hits.append({"id": task.id, "field": "prompt", "where": where})
                break
        if task.reference:
            pack = get_pack(task.lang)
            if task.lang not in hashes:
                table: dict[str, str] = {}
                for where, _, _, raw in norm_rows:
                    code, _ = extract_code(raw)
                    if code.strip() and pack.check(code) is None:
                        table.setdefault(pack.structural_hash(code), where)
                hashes[task.lang] = table
            ref_code, _ = extract_code(task.reference)
            where = hashes[task.lang].get(pack.structural_hash(ref_code))
            if where is None:
                ref_norm = normalise(ref_code)
                where = next((w for w, _, r, _ in norm_rows if ref_norm and ref_norm in r), None)
            if where:
                hits.append({"id": task.id, "field": "reference", "where": where})
    return {"bench": str(bench), "data": [str(d) for d in data], "tasks_checked": len(tasks),
            "training_rows": len(rows), "contaminated": sorted({h["id"] for h in hits}), "hits": hits}
