"""`corpus eval`: measure a pairs file → eval_results.json (DESIGN.md §3), optionally as a gate.

    evaluate(path, out, *, min_parse_rate=None, min_coverage=None, strict=False, lang=None) -> dict
    safety_flags(text) -> list[str]

Every valid row gets one verdict (`corpus.validate.read_code`, which also holds the language
precedence: the row's `lang`, then its fence tag, then `lang=` / `--lang`): code (parsed by its
pack), prose, or unchecked (code whose language nobody said). Fields: `total_samples`,
`code_samples` (rows whose code was checked), `prose_samples`, `unchecked_samples` and
`unchecked_reasons`, `format_validity`, `parse_rate` (parsed ÷ code samples), `construct_coverage`
(distinct taxonomy kinds seen in the parsed code), `construct_total`, `construct_coverage_pct`,
`safety_rejection_rate` (rows with obvious secrets or destructive shell, prompt or response), `by_category`,
`failures` (the first ones, with the parser's message). A rate over nothing is null ("n/a"), never
0: with no code checked, `parse_rate` and `construct_coverage_pct` are null, and a gate on them
fails saying nothing was checked — a gate that saw nothing must not pass. Thresholds are the
arguments only (`min_coverage` a fraction, or a percentage above 1; `strict`: any parse failure,
malformed row, unsafe row or unchecked row fails) — the MENS_EVAL_* environment variables are read
by the CLI, never here; the results are written first, then a failed gate raises GateFailure
(exit 1). Safety scans every text of a row: prompt, response, system, each message.
Malformed rows are measured (format_validity), never a crash.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from mens.corpus.safety import SAFETY_PATTERNS, row_flags, safety_flags  # noqa: F401 (re-exported)
from mens.corpus.validate import UnknownLang, default_pack, read_code
from mens.errors import GateFailure, MensError
from mens.corpus.stages import CORPUS_CODE, all_packs
from mens.flags import add_flag
from mens.progress import progress
from mens.stage import Command, Context, Stage
from mens.files import check_not_input, write_json_atomic
from mens.records import Pair, iter_jsonl

SCHEMA = "mens.eval_results.v1"
MAX_FAILURES = 50

def _rate(num: int, den: int) -> float | None:
    """num ÷ den, or None when there was nothing to measure (0 of 0 is not a rate of 0)."""
    return round(num / den, 6) if den else None


def evaluate(path: str | Path, out: str | Path, *, min_parse_rate: float | None = None,
             min_coverage: float | None = None, strict: bool = False, lang: str | None = None) -> dict[str, Any]:
    default = default_pack(lang)  # an unknown --lang is a user error (exit 2) before anything is read
    if min_parse_rate is not None and not 0 <= min_parse_rate <= 1:
        raise MensError(f"--min-parse-rate must be between 0 and 1, got {min_parse_rate}", "--min-parse-rate",
                        "e.g. --min-parse-rate 0.95")
    if min_coverage is not None and not 0 <= min_coverage <= 100:
        raise MensError(f"--min-coverage must be a fraction 0-1 or a percentage up to 100, got {min_coverage}",
                        "--min-coverage", "e.g. --min-coverage 0.8")
    if min_coverage is not None and min_coverage > 1:
        min_coverage /= 100.0  # given as a percentage
    malformed: list[str] = []
    rows = list(iter_jsonl(path, malformed))
    total = len(rows) + len(malformed)
    if total == 0:
        raise MensError("nothing to evaluate: the file is empty", str(path), "give a pairs file")
    valid = code = parsed = unsafe = prose = 0
    unchecked: Counter = Counter()  # why -> rows
    seen: dict[str, set[str]] = defaultdict(set)
    taxonomies: dict[str, tuple[str, ...]] = {}
    by_cat: dict[str, dict[str, int]] = defaultdict(
        lambda: {"samples": 0, "code_samples": 0, "parsed": 0, "unchecked": 0})
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
            flags = row_flags(pair)
            if flags:
                unsafe += 1
                if len(failures) < MAX_FAILURES:
                    failures.append({"where": where, "error": "unsafe: " + ", ".join(flags), "kind": "safety",
                                     "category": pair.category})
            try:
                verdict = read_code(pair, default)
            except UnknownLang as exc:
                # The row names a language no pack parses: code that failed its check.
                code += 1
                cat["code_samples"] += 1
                if len(failures) < MAX_FAILURES:
                    failures.append({"where": where, "error": f"no language pack {exc}", "kind": "parse",
                                     "category": pair.category})
                continue
            if verdict.kind == "prose":
                prose += 1
                continue
            if verdict.kind == "unchecked":
                unchecked[verdict.why] += 1
                cat["unchecked"] += 1
                continue
            sample = verdict.sample
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
    seen_list = sorted(k if single else f"{name}:{k}" for name, kinds in seen.items() for k in kinds)
    missing = sorted(k if single else f"{name}:{k}" for name, tax in taxonomies.items()
                     for k in tax if k not in seen[name])
    results: dict[str, Any] = {
        "schema": SCHEMA, "file": str(path),
        "lang": default.name if default else None,
        "total_samples": total, "valid_samples": valid, "code_samples": code, "parsed_samples": parsed,
        "prose_samples": prose, "unchecked_samples": sum(unchecked.values()),
        "unchecked_reasons": dict(sorted(unchecked.items())),
        "format_validity": _rate(valid, total), "parse_rate": _rate(parsed, code),
        "construct_coverage": covered, "construct_total": construct_total,
        "construct_coverage_pct": round(100.0 * covered / construct_total, 2) if construct_total else None,
        "constructs_seen": seen_list, "constructs_missing": missing,
        "safety_rejections": unsafe, "safety_rejection_rate": _rate(unsafe, valid),
        "by_category": {k: {**v, "parse_rate": _rate(v["parsed"], v["code_samples"])}
                        for k, v in sorted(by_cat.items())},
        "failures": failures,
    }
    results["gate"] = _gate(results, min_parse_rate, min_coverage, strict)
    write_json_atomic(out, results)
    if results["gate"]["problems"]:
        raise GateFailure("eval gate failed: " + "; ".join(results["gate"]["problems"]) + f" (see {out})")
    return results


def _gate(res: dict[str, Any], min_parse_rate: float | None, min_coverage: float | None,
          strict: bool) -> dict[str, Any]:
    problems = []
    # With no code checked a threshold has nothing to compare: that fails, loudly, rather than
    # letting a gate that saw nothing pass.
    nothing = (f"no code sample was checked ({res['unchecked_samples']} unchecked, {res['prose_samples']} prose; "
               "give rows a lang or a fence tag, or pass --lang)")
    if min_parse_rate is not None:
        if res["parse_rate"] is None:
            problems.append(f"parse_rate n/a: {nothing}")
        elif res["parse_rate"] < min_parse_rate:
            problems.append(f"parse_rate {res['parse_rate']:.4f} < {min_parse_rate}")
    if min_coverage is not None:
        if res["construct_coverage_pct"] is None:
            problems.append("construct coverage n/a: " + (nothing if not res["code_samples"] else
                                                          "the checked languages' packs have no construct taxonomy"))
        elif res["construct_coverage_pct"] / 100.0 < min_coverage:
            problems.append(f"construct coverage {res['construct_coverage_pct']}% < {100 * min_coverage:g}%")
    if strict:
        if res["parsed_samples"] < res["code_samples"]:
            problems.append(f"{res['code_samples'] - res['parsed_samples']} code samples do not parse")
        if res["valid_samples"] < res["total_samples"]:
            problems.append(f"{res['total_samples'] - res['valid_samples']} malformed rows")
        if res["safety_rejections"]:
            problems.append(f"{res['safety_rejections']} unsafe rows (secrets or destructive commands)")
        if res["unchecked_samples"]:
            problems.append(f"{res['unchecked_samples']} rows unchecked: no pack could check their code "
                            "(see unchecked_reasons)")
    return {"min_parse_rate": min_parse_rate, "min_coverage": min_coverage, "strict": strict,
            "passed": not problems, "problems": problems}


# ---------------------------------------------------------------- the stage: `mens corpus eval`, the pipeline's eval

def _run(ctx: Context) -> dict[str, Any]:
    res = evaluate(ctx.work_file("data", "train.jsonl"), ctx.work_file("data", "eval_results.json"))
    return {"parse_rate": res["parse_rate"], "coverage_pct": res["construct_coverage_pct"]}


def _arguments(p) -> None:
    from mens.corpus.cli import LANG_HELP

    p.add_argument("file", type=Path, help="pairs JSONL (e.g. train.jsonl)")
    add_flag(p, "-o", "--output", type=Path, default=Path("eval_results.json"),
             help="results file (default eval_results.json)")
    p.add_argument("--min-parse-rate", type=float,
                   help="fail below this parse rate (0-1; default $MENS_EVAL_MIN_PARSE_RATE, else none)")
    p.add_argument("--min-coverage", type=float, help="fail below this construct coverage (0-1, or a "
                   "percentage; default $MENS_EVAL_MIN_COVERAGE, else none)")
    p.add_argument("--strict", action="store_true",
                   help="fail on any parse failure, malformed row, unsafe row or unchecked row "
                   "(also with MENS_EVAL_STRICT=1)")
    add_flag(p, "--lang", help=LANG_HELP)


def _command(args) -> int:
    from mens.corpus.cli import check_outputs

    check_not_input(args.output, args.file)
    check_outputs((args.output, "-o"))
    try:
        res = evaluate(args.file, args.output,
                       min_parse_rate=_env_float(args.min_parse_rate, "MENS_EVAL_MIN_PARSE_RATE"),
                       min_coverage=_env_float(args.min_coverage, "MENS_EVAL_MIN_COVERAGE"),
                       strict=args.strict or os.environ.get("MENS_EVAL_STRICT") == "1", lang=args.lang)
    except GateFailure:  # the results are written: the summary line first, then the gate's verdict
        _eval_summary(args, json.loads(Path(args.output).read_text(encoding="utf-8")))
        raise
    _eval_summary(args, res)
    return 0


def _eval_summary(args, res: dict) -> None:
    coverage = "n/a" if res["construct_coverage_pct"] is None else f"{res['construct_coverage_pct']}%"
    print(f"{args.file}: {res['total_samples']} samples, format {_shown(res['format_validity'])}, "
          f"parse rate {_shown(res['parse_rate'])} ({res['parsed_samples']}/{res['code_samples']}), "
          f"unchecked {res['unchecked_samples']}, prose {res['prose_samples']}, "
          f"coverage {res['construct_coverage']}/{res['construct_total']} ({coverage}), "
          f"unsafe {_shown(res['safety_rejection_rate'])} → {args.output}")


def _env_float(flag: float | None, name: str) -> float | None:
    """A gate threshold: the flag, else the environment variable `name`. The environment is read
    here, at the CLI edge, and nowhere else: `evaluate()` takes explicit arguments."""
    if flag is not None:
        return flag
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise MensError(f"{name} must be a number, got {value!r}", name, "set it to e.g. 0.95, or unset it") from None


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


STAGE = Stage(
    "eval", inputs=lambda c: [c.work_file("data", "train.jsonl")], outputs=lambda c: [c.work_file("data", "eval_results.json")],
    run=_run, packs=all_packs, code=CORPUS_CODE, help="corpus parse rate and coverage",
    command=Command("eval", "measure a pairs file → eval_results.json; optionally a gate", _arguments, _command,
                    source="file",
                    description="Format validity, parse rate, construct coverage, safety rejections, per category. "
                    "A row's language is its `lang` field, else its fence tag, else --lang; rows with none are "
                    "counted unchecked, and with no code checked the parse rate is n/a (null), never 0. Gate "
                    "thresholds: flags, or MENS_EVAL_MIN_PARSE_RATE, MENS_EVAL_MIN_COVERAGE, MENS_EVAL_STRICT=1 "
                    "(exit 1 when a gate fails; a threshold with nothing checked fails too)."))
