"""`corpus validate`: parse every code-bearing response, dedupe, schema-check → validated.jsonl.

    validate(pairs_path, out, *, quarantine=None, strict=False, lenient=False,
             workers=None) -> Report
    code_of(pair) -> CodeSample | None     # the code a pair's response carries, and its pack

A pair is code-bearing unless its `response_mode` is `prose_only`; its code is the response, or
the response's first fenced block, checked with the pack named by `lang` (or by the fence tag).
Failures go to `quarantine` with the parser's message. Duplicates (same structural hash of the
code, same prompt) keep their first occurrence. `strict=True` raises GateFailure (exit 1) on any
rejection, after writing the outputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mens.corpus.fingerprint import fingerprint_block, text_hash
from mens.corpus.parallel import default_workers, process_pool
from mens.corpus.report import Report
from mens.errors import GateFailure, MensError
from mens.lang import LanguagePack, extract_code, get_pack, pack_for_fence
from mens.progress import progress
from mens.records import RESPONSE_MODES, Pair, atomic_path, iter_jsonl, write_jsonl_atomic

SERIAL_BELOW = 4000  # rows; a pool costs more than it saves below this


@dataclass
class CodeSample:
    code: str
    pack: LanguagePack
    script: bool


class UnknownLang(Exception):
    pass


def code_of(pair: Pair) -> CodeSample | None:
    """The code a code-bearing pair carries, or None for prose or an unlabelled plain answer.
    Raises UnknownLang when the pair names a language no pack handles."""
    if pair.response_mode == "prose_only":
        return None
    code, tag = extract_code(pair.response)
    if pair.lang:
        try:
            pack = get_pack(pair.lang)
        except (MensError, ImportError, AttributeError):  # unknown grammar, or pack not installed
            raise UnknownLang(pair.lang) from None
    else:
        pack = pack_for_fence(tag)
        if pack is None:
            return None
    return CodeSample(code, pack, bool(pair.metadata.get("script")))


def _prompt_key(pair: Pair) -> str:
    if pair.messages is not None:
        return "\x00".join(m["content"] for m in pair.messages if m["role"] == "user")
    return " ".join(pair.prompt.split())


def check_row(obj: Any, where: str) -> dict[str, Any]:
    """Schema, language and parse check of one row: {ok, reason, message} or {ok, checked, key, line}."""
    try:
        pair = Pair.from_dict(obj, where)
    except MensError as exc:
        return {"ok": False, "reason": "schema", "message": exc.what}
    if pair.response_mode is not None and pair.response_mode not in RESPONSE_MODES:
        return {"ok": False, "reason": "schema",
                "message": f"response_mode must be one of {', '.join(RESPONSE_MODES)}"}
    try:
        sample = code_of(pair)
    except UnknownLang as exc:
        return {"ok": False, "reason": "unknown_lang", "message": f"no language pack {exc}"}
    if sample is None:
        shape, checked = text_hash(" ".join(pair.response.split())), False
    else:
        if not sample.code.strip():
            return {"ok": False, "reason": "empty_code", "message": "the response holds no code"}
        error, shape = sample.pack.check_and_hash(sample.code, script=sample.script)
        if error is not None:
            return {"ok": False, "reason": "parse_error", "message": str(error)}
        checked = True
    # The row travels back as its JSON line, serialised here in the worker.
    return {"ok": True, "checked": checked, "key": text_hash(shape + "\x00" + _prompt_key(pair)),
            "line": json.dumps(pair.to_dict(), ensure_ascii=False), "lang": pair.lang}


def _check_chunk(chunk: list[tuple[int, Any, str]]) -> list[tuple[int, dict]]:
    return [(i, check_row(obj, where)) for i, obj, where in chunk]


def validate(pairs_path: str | Path, out: str | Path, *, quarantine: str | Path | None = None,
             strict: bool = False, lenient: bool = False, workers: int | None = None) -> Report:
    report = Report("validate", str(out))
    skipped: list[str] | None = [] if lenient else None
    rows = [(i, obj, f"{pairs_path}:{lineno}") for i, (lineno, obj) in enumerate(iter_jsonl(pairs_path, skipped))]
    for line in skipped or []:
        report.drop("malformed", line.split(": ", 1)[0], line.split(": ", 1)[-1])
    report.counts["input_rows"] = len(rows) + len(skipped or [])
    if not rows:
        raise MensError("no pairs to validate", str(pairs_path), "give a non-empty pairs file")
    workers = default_workers(workers)
    results: list[dict] = [{}] * len(rows)
    with progress("validate", total=len(rows)) as bar:
        if workers <= 1 or len(rows) < SERIAL_BELOW:
            for i, obj, where in rows:
                results[i] = check_row(obj, where)
                bar.advance()
        else:
            size = max(200, len(rows) // (workers * 16))
            chunks = [rows[k:k + size] for k in range(0, len(rows), size)]
            with process_pool(workers) as pool:
                for part in pool.map(_check_chunk, chunks):
                    for i, res in part:
                        results[i] = res
                    bar.advance(len(part))
    kept: list[str] = []
    langs: set[str] = set()
    rejected: list[dict] = []
    seen: set[str] = set()
    for (i, obj, where), res in zip(rows, results):
        if res["ok"] and res["key"] in seen:
            res = {"ok": False, "reason": "duplicate", "message": "same code structure and prompt as an earlier row"}
        if not res["ok"]:
            report.drop(res["reason"], where, res["message"])
            rejected.append({"row": obj, "where": where, "reason": res["reason"], "error": res["message"]})
            continue
        seen.add(res["key"])
        report.counts["code_checked" if res["checked"] else "unchecked"] += 1
        kept.append(res["line"])
        if res["lang"]:
            langs.add(res["lang"])
    report.counts["kept"] = len(kept)
    report.counts["rejected"] = len(rejected) + len(skipped or [])
    report.fingerprint = fingerprint_block([pairs_path], {"strict": strict, "lenient": lenient},
                                           [get_pack(n) for n in sorted(langs)])
    with atomic_path(out) as tmp:
        tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        if quarantine:
            write_jsonl_atomic(quarantine, rejected)
            report.extra["quarantine"] = str(quarantine)
    report.write()
    if strict and report.counts["rejected"]:
        raise GateFailure(f"validate: {report.counts['rejected']} of {report.counts['input_rows']} rows rejected "
                          f"({', '.join(f'{k} {v}' for k, v in sorted(report.dropped.items()))})")
    return report
