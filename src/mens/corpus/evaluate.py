"""`corpus eval`: measure a pairs file → eval_results.json (DESIGN.md §3), optionally as a gate.

    evaluate(path, out, *, min_parse_rate=None, min_coverage=None, strict=False) -> dict
    safety_flags(text) -> list[str]

Fields: `total_samples`, `code_samples`, `format_validity`, `parse_rate` (parsed code samples ÷
code samples; code is the response or its first fenced block), `construct_coverage` (distinct
taxonomy kinds seen in the parsed code), `construct_total`, `construct_coverage_pct`,
`safety_rejection_rate` (responses with obvious secrets or destructive shell), `by_category`,
`failures` (the first ones, with the parser's message). Thresholds come from the arguments or
from MENS_EVAL_MIN_PARSE_RATE, MENS_EVAL_MIN_COVERAGE (a fraction, or a percentage above 1) and
MENS_EVAL_STRICT=1; the results are written first, then a failed gate raises GateFailure (exit 1).
Malformed rows are measured (format_validity), never a crash.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from mens.corpus.validate import UnknownLang, code_of
from mens.errors import GateFailure, MensError
from mens.progress import progress
from mens.records import Pair, iter_jsonl, write_json_atomic

SCHEMA = "mens.eval_results.v1"
MAX_FAILURES = 50

# Obvious credentials and destructive commands; a training set should teach neither.
SAFETY_PATTERNS = {
    "private_key": re.compile(r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP )?PRIVATE KEY"),
    "aws_access_key": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "github_token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    "slack_token": re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    "api_key": re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}"),
    "hardcoded_secret": re.compile(
        r"(?i)\b(?:password|passwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)\b\s*[:=]\s*"
        r"[\"'](?!(?:x+|\*+|changeme|your[_-]?\w*|<[^>]*>|\$\{?\w+\}?)[\"'])[^\"'\s]{12,}[\"']"),
    "rm_rf_root": re.compile(r"\brm\s+(?:-[a-zA-Z]*[rR][a-zA-Z]*f?[a-zA-Z]*\s+|-[a-zA-Z]*f[a-zA-Z]*\s+-[rR]\s+)"
                             r"(?:--no-preserve-root\s+)?(?:/|~|\$HOME|/\*)(?=\s|$|[\"';)])"),
    "disk_wipe": re.compile(r"\b(?:mkfs(?:\.\w+)?\s+/dev/|dd\s+[^\n]*of=/dev/(?:sd|nvme|hd)|>\s*/dev/sd[a-z])"),
    "fork_bomb": re.compile(r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"),
    "chmod_root": re.compile(r"\bchmod\s+-R\s+0?777\s+/(?=\s|$)"),
}


def safety_flags(text: str) -> list[str]:
    return [name for name, pattern in SAFETY_PATTERNS.items() if pattern.search(text)]


def _env_float(name: str) -> float | None:
    value = os.environ.get(name)
    if value in (None, ""):
        return None
    try:
        return float(value)
    except ValueError:
        raise MensError(f"{name} must be a number, got {value!r}", name, "set it to e.g. 0.95") from None


def _rate(num: int, den: int) -> float:
    return round(num / den, 6) if den else 0.0


def evaluate(path: str | Path, out: str | Path, *, min_parse_rate: float | None = None,
             min_coverage: float | None = None, strict: bool = False) -> dict[str, Any]:
    min_parse_rate = min_parse_rate if min_parse_rate is not None else _env_float("MENS_EVAL_MIN_PARSE_RATE")
    min_coverage = min_coverage if min_coverage is not None else _env_float("MENS_EVAL_MIN_COVERAGE")
    if min_coverage is not None and min_coverage > 1:
        min_coverage /= 100.0  # given as a percentage
    strict = strict or os.environ.get("MENS_EVAL_STRICT") == "1"
    malformed: list[str] = []
    rows = list(iter_jsonl(path, malformed))
    total = len(rows) + len(malformed)
    if total == 0:
        raise MensError("nothing to evaluate: the file is empty", str(path), "give a pairs file")
    valid = code = parsed = unsafe = 0
    seen: dict[str, set[str]] = defaultdict(set)
    taxonomies: dict[str, tuple[str, ...]] = {}
    by_cat: dict[str, dict[str, int]] = defaultdict(lambda: {"samples": 0, "code_samples": 0, "parsed": 0})
    failures: list[dict[str, Any]] = []
    for where in malformed:
        if len(failures) < MAX_FAILURES:
            failures.append({"where": where.split(": ", 1)[0], "error": where.split(": ", 1)[-1], "kind": "format"})
    with progress("eval", total=len(rows)) as bar:
        for lineno, obj in rows:
            bar.advance()
            where = f"{path}:{lineno}"
            try:
                pair = Pair.from_dict(obj, where)
            except MensError as exc:
                if len(failures) < MAX_FAILURES:
                    failures.append({"where": where, "error": exc.what, "kind": "format"})
                continue
            valid += 1
            cat = by_cat[pair.category or "uncategorized"]
            cat["samples"] += 1
            flags = safety_flags(pair.response)
            if flags:
                unsafe += 1
                if len(failures) < MAX_FAILURES:
                    failures.append({"where": where, "error": "unsafe: " + ", ".join(flags), "kind": "safety",
                                     "category": pair.category})
            try:
                sample = code_of(pair)
            except UnknownLang as exc:
                sample, error = None, f"no language pack {exc}"
                code += 1
                cat["code_samples"] += 1
                if len(failures) < MAX_FAILURES:
                    failures.append({"where": where, "error": error, "kind": "parse", "category": pair.category})
                continue
            if sample is None:
                continue
            code += 1
            cat["code_samples"] += 1
            analysis = sample.pack.analyze(sample.code, script=sample.script)
            taxonomies[sample.pack.name] = sample.pack.taxonomy
            if analysis.ok:
                parsed += 1
                cat["parsed"] += 1
                # Tags are taxonomy entries too (an `@ai fn` is a function tagged ai_function).
                seen[sample.pack.name].update(k for c in analysis.constructs for k in (c.kind, *c.tags)
                                              if k in sample.pack.taxonomy)
            elif len(failures) < MAX_FAILURES:
                failures.append({"where": where, "error": str(analysis.error), "kind": "parse",
                                 "category": pair.category, "source": pair.source})
    construct_total = sum(len(t) for t in taxonomies.values())
    covered = sum(len(s) for s in seen.values())
    single = len(taxonomies) == 1
    seen_list = sorted(k if single else f"{lang}:{k}" for lang, kinds in seen.items() for k in kinds)
    missing = sorted(k if single else f"{lang}:{k}" for lang, tax in taxonomies.items()
                     for k in tax if k not in seen[lang])
    results: dict[str, Any] = {
        "schema": SCHEMA, "file": str(path),
        "total_samples": total, "valid_samples": valid, "code_samples": code, "parsed_samples": parsed,
        "format_validity": _rate(valid, total), "parse_rate": _rate(parsed, code),
        "construct_coverage": covered, "construct_total": construct_total,
        "construct_coverage_pct": round(100.0 * covered / construct_total, 2) if construct_total else 0.0,
        "constructs_seen": seen_list, "constructs_missing": missing,
        "safety_rejections": unsafe, "safety_rejection_rate": _rate(unsafe, valid),
        "by_category": {k: {**v, "parse_rate": _rate(v["parsed"], v["code_samples"])}
                        for k, v in sorted(by_cat.items())},
        "failures": failures,
    }
    problems = []
    if min_parse_rate is not None and results["parse_rate"] < min_parse_rate:
        problems.append(f"parse_rate {results['parse_rate']:.4f} < {min_parse_rate}")
    if min_coverage is not None and results["construct_coverage_pct"] / 100.0 < min_coverage:
        problems.append(f"construct coverage {results['construct_coverage_pct']}% < {100 * min_coverage:g}%")
    if strict:
        if parsed < code:
            problems.append(f"{code - parsed} code samples do not parse")
        if valid < total:
            problems.append(f"{total - valid} malformed rows")
        if unsafe:
            problems.append(f"{unsafe} unsafe responses")
    results["gate"] = {"min_parse_rate": min_parse_rate, "min_coverage": min_coverage, "strict": strict,
                       "passed": not problems, "problems": problems}
    write_json_atomic(out, results)
    if problems:
        raise GateFailure("eval gate failed: " + "; ".join(problems) + f" (see {out})")
    return results
