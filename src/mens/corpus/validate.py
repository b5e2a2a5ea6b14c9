"""`corpus validate`: give every row a verdict — parsed code, prose, or unchecked — dedupe,
schema-check → validated.jsonl.

    validate(pairs_path, out, *, quarantine=None, strict=False, lenient=False,
             workers=None, lang=None, keep_unsafe=False) -> Report
    read_code(pair, default=None) -> Verdict   # "code" (with its CodeSample), "prose" or "unchecked"
    code_of(pair, default=None) -> CodeSample | None
    default_pack(name) -> LanguagePack | None  # a --lang value, checked (MensError, exit 2)

Which rows are code. `response_mode: prose_only` is prose. A row with no `response_mode` in the
`docs_qa` lane is an explanation: its first fenced block is code, plain text is prose. Every other
row is code: its first fenced block, or the whole response when there is no fence (the Vox pair
format: plain code in `response`, no fence, often no `lang`). `response_mode: mixed` with no
fence holds no block to check and is unchecked.

Which language. The first of these that says something wins:
  1. the row's `lang` field          — the row's author said so, for this row;
  2. its fence's info string         — a pack's fence tag (```vox, ```py …); a tag no pack owns
                                       (```text, ```sh) makes the row unchecked, never --lang;
  3. `lang=` / `--lang`              — a default for the whole file, for rows that say nothing.
A row's own word beats a file-wide default, so a --lang never re-labels a row that names its
language. (The reports beside a pairs file name packs too, but only those of rows that carry
`lang` already, so they cannot decide a row that does not.)

Safety first: a row whose prompt, response, system prompt or any message holds a secret or a
destructive command (`corpus.safety`) is rejected as `unsafe` — left out of the output, written to
`quarantine` with the patterns and fields found — unless `keep_unsafe=True` (then it is kept and
counted `unsafe_kept`). Code with a language is parsed by that pack; failures go to `quarantine`
with the parser's message. Code with no decidable language is kept and counted `unchecked` (never `code_checked`),
with why, in the report. Duplicates (same structural hash of the code, or same text for rows not
parsed, and same prompt) keep their first occurrence. `strict=True` raises GateFailure (exit 1)
on any rejection, after writing the outputs; unchecked rows are not rejections (gate on them
with `corpus eval --strict`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mens.fingerprint import fingerprint_block, text_hash
from mens.corpus.parallel import default_workers, mapped
from mens.corpus.report import MAX_EXAMPLES, Report
from mens.corpus.safety import row_flags
from mens.errors import GateFailure, MensError
from mens.lang import LanguagePack, builtin_names, extract_code, get_pack, loadable_pack, pack_for_fence
from mens.lang.base import has_fence
from mens.corpus.stages import CORPUS_CODE, all_packs
from mens.files import check_not_input
from mens.flags import add_flag
from mens.progress import progress, say
from mens.stage import Command, Context, Stage
from mens.files import write_jsonl_atomic
from mens.records import RESPONSE_MODES, Pair, iter_jsonl

SERIAL_BELOW = 4000  # rows; a pool costs more than it saves below this
PROSE_LANES = ("docs_qa",)  # lanes whose rows explain: plain text there is prose, not code


@dataclass
class CodeSample:
    code: str
    pack: LanguagePack
    script: bool


@dataclass
class Verdict:
    kind: str                         # "code" | "prose" | "unchecked"
    sample: CodeSample | None = None  # for "code"
    why: str = ""                     # for "unchecked": why no language could be decided


class UnknownLang(Exception):
    pass


def default_pack(name: str | None) -> LanguagePack | None:
    """The pack a `--lang` names; an unknown name is the user's to fix (exit 2), not a row's."""
    if not name:
        return None
    pack = loadable_pack(name)
    if pack is None:
        raise MensError(f"unknown language pack {name!r}", "--lang",
                        f"use one of {', '.join(builtin_names())} or an installed tree-sitter grammar")
    return pack


def read_code(pair: Pair, default: LanguagePack | None = None) -> Verdict:
    """What a row's response is, and in which language (precedence: the module docstring).
    Raises UnknownLang when the row's `lang` names a language no pack handles."""
    mode = pair.response_mode
    fenced = has_fence(pair.response)
    if mode == "prose_only" or (mode is None and pair.lane in PROSE_LANES and not fenced):
        return Verdict("prose")
    if mode == "mixed" and not fenced:
        return Verdict("unchecked", why="response_mode mixed without a fenced code block")
    code, tag = extract_code(pair.response)
    if pair.lang:
        pack = loadable_pack(pair.lang)
        if pack is None:
            raise UnknownLang(pair.lang)
    elif tag:
        pack = pack_for_fence(tag)
        if pack is None:
            return Verdict("unchecked", why=f"fence tag {tag.lower()!r} names no language pack")
    elif default is not None:
        pack = default
    else:
        return Verdict("unchecked", why="no language: no lang field, no fence tag, no --lang")
    return Verdict("code", CodeSample(code, pack, bool(pair.metadata.get("script"))))


def code_of(pair: Pair, default: LanguagePack | None = None) -> CodeSample | None:
    """The code a row carries with its pack, or None for prose and for unchecked rows."""
    return read_code(pair, default).sample


def _prompt_key(pair: Pair) -> str:
    if pair.messages is not None:
        return "\x00".join(m["content"] for m in pair.messages if m["role"] == "user")
    return " ".join(pair.prompt.split())


def check_row(obj: Any, where: str, lang: str | None = None, keep_unsafe: bool = False) -> dict[str, Any]:
    """Schema, safety, language and parse check of one row: {ok: False, reason, message} or
    {ok: True, verdict, why, key, line, lang, unsafe}. `lang` is the file's default (--lang); a
    row holding a secret or a destructive command anywhere is rejected as `unsafe` unless
    `keep_unsafe`."""
    try:
        pair = Pair.from_dict(obj, where)
    except MensError as exc:
        return {"ok": False, "reason": "schema", "message": exc.what}
    if pair.response_mode is not None and pair.response_mode not in RESPONSE_MODES:
        return {"ok": False, "reason": "schema",
                "message": f"response_mode must be one of {', '.join(RESPONSE_MODES)}"}
    unsafe = row_flags(pair)
    if unsafe and not keep_unsafe:
        return {"ok": False, "reason": "unsafe", "message": "; ".join(unsafe)}
    try:
        verdict = read_code(pair, get_pack(lang) if lang else None)
    except UnknownLang as exc:
        return {"ok": False, "reason": "unknown_lang", "message": f"no language pack {exc}"}
    sample = verdict.sample
    if sample is None:
        shape = text_hash(" ".join(pair.response.split()))
    else:
        if not sample.code.strip():
            return {"ok": False, "reason": "empty_code", "message": "the response holds no code"}
        error, shape = sample.pack.check_and_hash(sample.code, script=sample.script)
        if error is not None:
            return {"ok": False, "reason": "parse_error", "message": str(error)}
    # The row travels back as its JSON line, serialised here in the worker.
    return {"ok": True, "verdict": verdict.kind, "why": verdict.why,
            "key": text_hash(shape + "\x00" + _prompt_key(pair)),
            "line": json.dumps(pair.to_dict(), ensure_ascii=False),
            "lang": sample.pack.name if sample else pair.lang, "unsafe": unsafe}


def _check_chunk(args: tuple[list[tuple[int, Any, str]], str | None, bool]) -> list[tuple[int, dict]]:
    chunk, lang, keep_unsafe = args
    return [(i, check_row(obj, where, lang, keep_unsafe)) for i, obj, where in chunk]


# Report counter per verdict: only "code_checked" rows were parsed by a pack.
_COUNT = {"code": "code_checked", "prose": "prose", "unchecked": "unchecked"}


def validate(pairs_path: str | Path, out: str | Path, *, quarantine: str | Path | None = None,
             strict: bool = False, lenient: bool = False, workers: int | None = None,
             lang: str | None = None, keep_unsafe: bool = False) -> Report:
    default = default_pack(lang)  # an unknown --lang fails here, before any output is written
    lang = default.name if default else None
    workers = default_workers(workers)  # a bad --workers fails before the input is read
    report = Report("validate", str(out))
    skipped: list[str] | None = [] if lenient else None
    rows = [(i, obj, f"{pairs_path}:{lineno}") for i, (lineno, obj) in enumerate(iter_jsonl(pairs_path, skipped))]
    for line in skipped or []:
        report.drop("malformed", line.split(": ", 1)[0], line.split(": ", 1)[-1])
    report.counts["input_rows"] = len(rows) + len(skipped or [])
    if not rows:
        raise MensError("no pairs to validate", str(pairs_path), "give a non-empty pairs file")
    results: list[dict] = [{}] * len(rows)
    serial = workers <= 1 or len(rows) < SERIAL_BELOW
    size = len(rows) if serial else max(200, len(rows) // (workers * 16))
    chunks = [(rows[k:k + size], lang, keep_unsafe) for k in range(0, len(rows), size)]
    with progress("validate", total=len(rows)) as bar, mapped(_check_chunk, chunks, workers, serial=serial) as done:
        for part in done:
            for i, res in part:
                results[i] = res
            bar.advance(len(part))
    kept: list[str] = []
    langs: set[str] = set()
    rejected: list[dict] = []
    seen: dict[str, str] = {}  # dedupe key -> where the row that stays is
    unchecked_why: Counter = Counter()
    unchecked_examples: list[dict[str, str]] = []
    for kind in _COUNT.values():  # all three are reported, 0 included: "unchecked 0" is news too
        report.counts[kind] = 0
    for (i, obj, where), res in zip(rows, results):
        if res["ok"] and res["key"] in seen:
            # Named, so a user can see that the two rows really are the same (and which one stays).
            res = {"ok": False, "reason": "duplicate",
                   "message": f"same code structure and prompt as {seen[res['key']]}"}
        if not res["ok"]:
            report.drop(res["reason"], where, res["message"])
            rejected.append({"row": obj, "where": where, "reason": res["reason"], "error": res["message"]})
            continue
        seen[res["key"]] = where
        report.counts[_COUNT[res["verdict"]]] += 1
        if res["unsafe"]:
            report.counts["unsafe_kept"] += 1
        if res["verdict"] == "unchecked":
            unchecked_why[res["why"]] += 1
            if len(unchecked_examples) < MAX_EXAMPLES:
                unchecked_examples.append({"where": where, "why": res["why"]})
        kept.append(res["line"])
        if res["lang"]:
            langs.add(res["lang"])
    report.counts["kept"] = len(kept)
    report.counts["rejected"] = len(rejected) + len(skipped or [])
    report.extra["lang"] = lang
    report.extra["unchecked"] = {"rows": report.counts["unchecked"], "why": dict(sorted(unchecked_why.items())),
                                 "examples": unchecked_examples}
    packs = [p for p in map(loadable_pack, sorted(langs)) if p is not None]
    params = {"strict": strict, "lenient": lenient, "lang": lang, "keep_unsafe": keep_unsafe}
    if quarantine:
        report.extra["quarantine"] = str(quarantine)
    report.publish(kept, fingerprint_block([pairs_path], params, packs),
                   also=(lambda: write_jsonl_atomic(quarantine, rejected)) if quarantine else None)
    if strict and report.counts["rejected"]:
        raise GateFailure(f"validate: {report.counts['rejected']} of {report.counts['input_rows']} rows rejected "
                          f"({', '.join(f'{k} {v}' for k, v in sorted(report.dropped.items()))})")
    return report


# ---------------------------------------------------------------- the stage: `mens corpus validate`, the pipeline's validate

def _run(ctx: Context) -> dict:
    rep = validate(ctx.work_file("corpus", "pairs.jsonl"), ctx.work_file("corpus", "pairs.valid.jsonl"),
                   quarantine=ctx.work_file("corpus", "quarantine.jsonl"))
    return {"kept": rep.counts["kept"], "rejected": rep.counts["rejected"]}


def _arguments(p) -> None:
    from mens.corpus.cli import LANG_HELP

    p.add_argument("pairs", type=Path, help="pairs JSONL")
    add_flag(p, "-o", "--output", type=Path, required=True, help="validated JSONL to write")
    p.add_argument("--quarantine", type=Path, help="write rejected rows here, with reasons")
    p.add_argument("--strict", action="store_true", help="exit 1 when any row is rejected")
    p.add_argument("--keep-unsafe", action="store_true",
                   help="keep rows whose prompt or response holds a secret or a destructive command "
                   "(by default they are left out and quarantined as `unsafe`)")
    add_flag(p, "--lang", help=LANG_HELP)
    p.add_argument("--lenient", action="store_true", help="skip malformed lines (counted) instead of failing")
    add_flag(p, "--workers", type=int, help="processes (default 2)")


def _command(args) -> int:
    from mens.corpus.cli import check_outputs

    default_workers(args.workers)
    check_not_input(args.output, args.pairs)
    if args.quarantine:
        check_not_input(args.quarantine, args.pairs)
    check_outputs((args.output, "-o"), (args.quarantine, "--quarantine"), report="validate")
    report = validate(args.pairs, args.output, quarantine=args.quarantine, strict=args.strict,
                      lenient=args.lenient, workers=args.workers, lang=args.lang, keep_unsafe=args.keep_unsafe)
    say(report.summary())
    if report.dropped.get("unsafe") or report.counts.get("unsafe_kept"):
        say(f"validate: {report.dropped.get('unsafe', 0) or report.counts['unsafe_kept']} rows hold a secret or a "
            "destructive command (see the report's examples)"
            + (" — kept (--keep-unsafe)" if args.keep_unsafe else
               f" — left out{' → ' + str(args.quarantine) if args.quarantine else ''}; --keep-unsafe keeps them"))
    if report.counts["unchecked"]:
        say(f"validate: {report.counts['unchecked']} kept unchecked, no pack could parse them "
            f"({'; '.join(f'{why}: {n}' for why, n in report.extra['unchecked']['why'].items())})"
            + ("" if args.lang else " — pass --lang NAME to check plain code"))
    return 0


STAGE = Stage(
    "validate", inputs=lambda c: [c.work_file("corpus", "pairs.jsonl")],
    outputs=lambda c: [c.work_file("corpus", "pairs.valid.jsonl")], run=_run, packs=all_packs, code=CORPUS_CODE,
    help="parse, dedupe, quarantine",
    command=Command("validate", "parse every code response, dedupe, schema-check", _arguments, _command,
                    source="pairs",
                    description="Parse each code-bearing response with its language pack; rejected rows go to "
                    "--quarantine with the parser's message; duplicates (structural hash + prompt) are dropped. A "
                    "row's language is its `lang` field, else its fence tag, else --lang; rows with none are kept "
                    "but counted `unchecked` in the report. --strict exits 1 on any rejection."))
