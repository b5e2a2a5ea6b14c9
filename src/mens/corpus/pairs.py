"""`corpus pairs`: units → instruction pairs (pairs.jsonl), deterministic for a seed.

    make_pairs(units_path, out, *, seed=0, lenient=False, error_correction=True,
               workers=None) -> Report

Per unit kind:
- `file`: a whole-file pair; prompt from the pack metadata's `training_prompt`, else its
  `description`, else a template with the file stem and the kinds of constructs it holds.
- `construct`: a pair from one of several templates for its kind, with its name and doc comment.
- `doc_code`: prompt from the nearest heading and the paragraph before the block.
- `doc_prose`: a question about the section, `lane: docs_qa`, `response_mode: prose_only`.
- follow-ups: a two-turn conversation over two adjacent constructs of one file.
- error correction: the code mutated until *the parser* rejects it; the prompt carries the
  parser's message, the response is the original.
Code responses are fenced with the pack's fence tag. Ratings: golden 5, docs and sources 4,
synthetic 3. Each unit draws from its own RNG seeded by (seed, its kind and code), so the
output is the same for a seed however the work is split across processes and wherever the
sources lie (only the `source` paths differ between two clones).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from mens.fingerprint import fingerprint_block
from mens.corpus.parallel import default_workers, mapped
from mens.corpus.report import Report
from mens.corpus.templates import (construct_prompt, display_name, doc_code_prompt, file_prompt,
                                   fix_prompt, followup_prompt, noun, prose_prompt)
from mens.corpus.units import Unit, read_units
from mens.errors import MensError
from mens.lang import LanguagePack, get_pack, loadable_pack
from mens.corpus.stages import CORPUS_CODE
from mens.files import check_not_input
from mens.flags import add_flag
from mens.progress import progress, say
from mens.stage import Command, Context, Stage
from mens.records import Pair

MAX_MUTATE_CHARS = 4000   # error-correction pairs only for code up to this size
MUTATION_TRIES = 6
SERIAL_BELOW = 2000       # units; a pool costs more than it saves below this


def fence(code: str, pack: LanguagePack) -> str:
    """`code` in a Markdown fence tagged with the pack's fence tag, longer than any run of
    backticks inside the code so the block cannot close early."""
    longest = max((len(m) for m in re.findall(r"`+", code)), default=0)
    marker = "`" * max(3, longest + 1)
    tag = pack.fence_tags[0] if pack.fence_tags else pack.name
    return f"{marker}{tag}\n{code.rstrip()}\n{marker}"


def strip_header(code: str, pack: LanguagePack) -> str:
    """A whole file without its leading comment block (licence lines, metadata frontmatter, a
    training prompt), which would only teach the model to echo them. The comment lines directly
    above the first code line (no blank line between) are its doc comment and stay."""
    lines = code.split("\n")
    prefixes = tuple(pack.comment_prefixes)
    first = next((i for i, line in enumerate(lines)
                  if line.strip() and not (prefixes and line.lstrip().startswith(prefixes))), None)
    if not prefixes or first is None:
        return code
    start = first
    while start > 0 and lines[start - 1].strip() and lines[start - 1].lstrip().startswith(prefixes):
        start -= 1
    return "\n".join(lines[start:])


def rating(unit: Unit) -> int:
    meta = unit.frontmatter or {}
    status = str(meta.get("status", "")).lower()
    if status == "golden":
        return 5
    if status == "synthetic" or str(meta.get("origin", "")).lower() == "synthetic":
        return 3
    return 4


def _base(unit: Unit, pack: LanguagePack | None, category: str, lane: str, mode: str) -> dict:
    meta = {"unit": unit.kind}
    if unit.name:
        meta["name"] = unit.name
    if unit.script:
        meta["script"] = True  # parse in the pack's script mode
    return dict(category=category, rating=rating(unit), lane=lane, response_mode=mode,
                lang=pack.name if pack else unit.lang, source=unit.source, metadata=meta)


def mutate(code: str, pack: LanguagePack, rng: random.Random, script: bool = False):
    """(broken code, parser diagnostic) for a mutation the parser rejects, or None."""
    for _ in range(MUTATION_TRIES):
        op = rng.randrange(4)
        if op == 0:    # drop a closing bracket
            spots = [i for i, ch in enumerate(code) if ch in ")]}"]
        elif op == 1:  # drop an opening bracket
            spots = [i for i, ch in enumerate(code) if ch in "([{"]
        elif op == 2:  # drop a separator or operator character
            spots = [i for i, ch in enumerate(code) if ch in ",:=."]
        else:          # cut the text off somewhere in its second half
            spots = []
            cut = len(code) // 2 + rng.randrange(max(1, len(code) // 2))
            broken = code[:cut].rstrip()
        if op != 3:
            if not spots:
                continue
            i = rng.choice(spots)
            broken = code[:i] + code[i + 1:]
        error = pack.check(broken, script=script)
        if error is not None and broken.strip():
            return broken, error
    return None


def pairs_for_group(units: list[Unit], seed: int, error_correction: bool) -> tuple[list[dict], Report]:
    """All pairs of the units of one file (follow-ups need the file's constructs together)."""
    report = Report("pairs", "")
    rows: list[dict] = []
    constructs: list[tuple[Unit, str]] = []
    for unit in units:
        # Seeded by what the unit is, not where: a clone elsewhere makes the same pairs.
        rng = random.Random(f"{seed}\x00{unit.kind}\x00{unit.code}")
        pack = loadable_pack(unit.lang) if unit.lang else None
        if unit.lang and pack is None:
            report.drop("unknown_lang", unit.source, f"no language pack {unit.lang!r}")
            continue
        if unit.kind != "doc_prose" and pack is None:
            report.drop("unknown_lang", unit.source, "code unit without a language")
            continue
        lang = display_name(pack.name if pack else unit.lang or "")
        if unit.kind == "doc_prose":
            prompt = prose_prompt(unit, lang, rng)
            rows.append(dict(prompt=prompt, response=unit.code, **_base(unit, pack, "docs", "docs_qa", "prose_only")))
            report.counts["pairs_docs_prose"] += 1
            continue
        code = strip_header(unit.code, pack) if unit.kind == "file" else unit.code
        answer = fence(code, pack)
        if unit.kind == "file":
            prompt = file_prompt(unit, lang, rng)
            report.counts["pairs_file"] += 1
        elif unit.kind == "construct":
            prompt = construct_prompt(unit, lang, rng)
            constructs.append((unit, prompt))
            report.counts["pairs_construct"] += 1
        else:
            prompt = doc_code_prompt(unit, lang, rng)
            report.counts["pairs_docs_code"] += 1
        rows.append(dict(prompt=prompt, response=answer, **_base(unit, pack, unit.construct, "codegen", "code_only")))
        if error_correction and unit.kind in ("file", "doc_code") and len(code) <= MAX_MUTATE_CHARS:
            broken = mutate(code, pack, rng, unit.script)
            if broken is None:
                report.counts["error_correction_no_mutation"] += 1
            else:
                rows.append(dict(prompt=fix_prompt(broken[0], str(broken[1]), pack, lang, rng),
                                 response=answer,
                                 **_base(unit, pack, unit.construct, "error_correction", "code_only")))
                report.counts["pairs_error_correction"] += 1
    if len(constructs) >= 2:
        rng = random.Random(f"{seed}\x00{constructs[0][0].code}\x00followup")
        i = rng.randrange(len(constructs) - 1)
        (first, first_prompt), (second, _) = constructs[i], constructs[i + 1]
        pack = get_pack(first.lang)
        lang = display_name(pack.name)
        messages = [
            {"role": "user", "content": first_prompt},
            {"role": "assistant", "content": fence(first.code, pack)},
            {"role": "user", "content": followup_prompt(second, first, lang, rng)},
            {"role": "assistant", "content": fence(first.code.rstrip() + "\n\n" + second.code, pack)},
        ]
        rows.append(dict(messages=messages, **_base(second, pack, second.construct, "followup", "code_only")))
        report.counts["pairs_followup"] += 1
    return rows, report


def _group_task(args: tuple[list[Unit], int, bool]) -> tuple[list[str], Report]:
    units, seed, error_correction = args
    rows, report = pairs_for_group(units, seed, error_correction)
    return [_dump(r) for r in rows], report


def _dump(row: dict) -> str:
    # Through the Pair contract, so every row written is one `validate` accepts as a schema.
    return json.dumps(Pair.from_dict(row).to_dict(), ensure_ascii=False)


def _groups(units: list[Unit]) -> list[list[Unit]]:
    groups: dict[str, list[Unit]] = {}
    for unit in units:
        groups.setdefault(unit.path, []).append(unit)
    return list(groups.values())


def make_pairs(units_path: str | Path, out: str | Path, *, seed: int = 0, lenient: bool = False,
               error_correction: bool = True, workers: int | None = None) -> Report:
    workers = default_workers(workers)  # a bad --workers fails before the input is read
    skipped: list[str] | None = [] if lenient else None
    units = list(read_units(units_path, skipped))
    if not units:
        raise MensError("no units to make pairs from", str(units_path), "run `mens corpus extract` first")
    report = Report("pairs", str(out))
    report.counts["units"] = len(units)
    for line in skipped or []:
        report.drop("malformed_unit", line.split(": ", 1)[0], line.split(": ", 1)[-1])
    groups = _groups(units)
    tasks = [(g, seed, error_correction) for g in groups]
    lines: list[str] = []
    with progress("pairs", total=len(tasks)) as bar, \
            mapped(_group_task, tasks, workers, serial=workers <= 1 or len(units) < SERIAL_BELOW) as done:
        for rows, part in done:
            lines.extend(rows)
            report.merge(part)
            bar.advance()
    if not lines:
        raise MensError("no pairs made", str(units_path), "check the units' languages")
    report.counts["pairs"] = len(lines)
    langs = sorted({u.lang for u in units if u.lang})
    packs = [p for p in map(loadable_pack, langs) if p is not None]
    return report.publish(lines, fingerprint_block([units_path], {"seed": seed, "error_correction": error_correction},
                                                   packs))




# ---------------------------------------------------------------- the stage: `mens corpus pairs`, the pipeline's pairs

def _run(ctx: Context) -> dict:
    rep = make_pairs(ctx.work_file("corpus", "units.jsonl"), ctx.work_file("corpus", "pairs.jsonl"), seed=ctx.seed)
    return {"pairs": rep.counts["pairs"]}


def _arguments(p) -> None:
    p.add_argument("units", type=Path, help="units.jsonl from `mens corpus extract`")
    add_flag(p, "-o", "--output", type=Path, required=True, help="pairs.jsonl to write")
    add_flag(p, "--seed", type=int, default=0)
    p.add_argument("--no-error-correction", action="store_true", help="skip error-correction pairs")
    p.add_argument("--lenient", action="store_true", help="skip malformed unit lines (counted) instead of failing")
    add_flag(p, "--workers", type=int, help="processes (default 2)")


def _command(args) -> int:
    from mens.corpus.cli import check_outputs

    default_workers(args.workers)
    check_not_input(args.output, args.units)
    check_outputs((args.output, "-o"), report="pairs")
    report = make_pairs(args.units, args.output, seed=args.seed, lenient=args.lenient,
                        error_correction=not args.no_error_correction, workers=args.workers)
    say(report.summary())
    return 0


STAGE = Stage(
    "pairs", inputs=lambda c: [c.work_file("corpus", "units.jsonl")],
    outputs=lambda c: [c.work_file("corpus", "pairs.jsonl")], run=_run, params=lambda c: {"seed": c.seed},
    code=CORPUS_CODE, help="units → instruction pairs",
    command=Command("pairs", "units.jsonl → instruction pairs", _arguments, _command, source="units",
                    description="Whole-file, per-construct, docs code, docs prose, follow-up and parser-verified "
                    "error-correction pairs; byte-identical for a --seed."))

__all__ = ["make_pairs", "pairs_for_group", "mutate", "fence", "rating", "noun"]
