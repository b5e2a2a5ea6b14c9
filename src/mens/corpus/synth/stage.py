"""`mens generate-data` and the pipeline's generate-data stage: synthetic Vox (or Python) pairs
(`generate`) or drills (`drills`) to a JSONL file with a report.

    generate_data(out, *, limit, seed=0, kind="programs", english_names=0.0,
                  made_up_names=MADE_UP_SHARE, made_up_subjects=0.0, lang="vox") -> Report
    GenerateDataOptions    the pipeline config's `generate_data:` section; its drills go to corpus/<kind>.jsonl
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mens.corpus.report import Report
from mens.corpus.stages import CORPUS_CODE
from mens.corpus.synth import drills
from mens.corpus.synth.drills import code_drills, copy_drills
from mens.corpus.synth.generate import LANGS, SynthStats, generate, synth_lang
from mens.corpus.synth.words import MADE_UP_SHARE
from mens.errors import MensError
from mens.files import atomic_path, write_jsonl_atomic
from mens.fingerprint import fingerprint_block
from mens.flags import add_flag
from mens.lang import get_pack
from mens.progress import progress, say
from mens.stage import Command, Context, Options, Stage, number, option, whole

KINDS = ("programs", "copy-drills", "code-drills")


def check_share(name: str, value: float, where: str) -> None:
    """`english_names` / `made_up_names`: a share from 0 to 1, or a one-line error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise MensError(f"{name} must be a share from 0 to 1, got {value!r}", where, "e.g. 0.5")


def only_vox_copy_drills(lang: str, drills_asked: str | None, where: str, fix: str) -> None:
    """The copy drills say back signatures written the Vox way (`velmo_rask(n: int) to
    List[int]`): asked for beside another `lang`, a one-line error rather than Vox syntax in a
    Python base's curriculum. Code drills come in every language with templates (drills.DRILL_LANGS),
    and beat copy drills as a curriculum (docs/performance.md), so they are the fix."""
    if lang != "vox" and drills_asked:
        raise MensError(f"{drills_asked} makes Vox drills only, not {lang}", where, fix)


def generate_data(out: str | Path, *, limit: int, seed: int = 0, kind: str = "programs",
                  english_names: float = 0.0, made_up_names: float = MADE_UP_SHARE,
                  made_up_subjects: float = 0.0, lang: str = "vox") -> Report:
    """`mens generate-data`: `limit` pairs to a JSONL file, with a report: programs from
    `generate` (in `lang`: LANGS), or copy drills (mens.corpus.synth.drills) for a scratch base's curriculum.
    `english_names`: the share of made-up names of English words rather than syllables;
    `made_up_names`: the share of programs whose quoted names are made up (drills: all);
    `made_up_subjects`: the share about a made-up subject whose prompt spells out its specifics."""
    if limit <= 0:
        raise MensError(f"--limit must be positive, got {limit}", "generate-data", "pass how many pairs to make")
    if kind not in KINDS:
        raise MensError(f"unknown --kind {kind!r}", "generate-data", f"pass one of {', '.join(KINDS)}")
    pack = get_pack(synth_lang(lang).name)
    only_vox_copy_drills(lang, "--kind copy-drills" if kind == "copy-drills" else None, "generate-data",
                         "drop --lang, or use --kind code-drills")
    stats = SynthStats()
    report = Report("generate", str(out))
    check_share("english_names", english_names, "--english-names")
    check_share("made_up_names", made_up_names, "--made-up-names")
    check_share("made_up_subjects", made_up_subjects, "--made-up-subjects")
    pairs = generate(limit, seed, stats=stats, pack=pack, english_names=english_names,
                     made_up_names=made_up_names, made_up_subjects=made_up_subjects, lang=lang) if kind == "programs" \
        else copy_drills(limit, seed, english_names) if kind == "copy-drills" \
        else code_drills(limit, seed, english_names, lang)
    written = 0
    with progress("generate-data", total=limit) as bar, atomic_path(out) as tmp:
        with tmp.open("w", encoding="utf-8") as fh:
            for pair in pairs:
                fh.write(json.dumps(pair.to_dict(), ensure_ascii=False) + "\n")
                written += 1
                bar.advance()
    # Drills are not drafted and checked: each one made is written.
    report.counts.update(pairs=written, drafts=stats.drafts if kind == "programs" else written)
    report.dropped.update(parse_error=stats.parse_failures, duplicate=stats.duplicates)
    report.examples = [{"reason": "parse_error", "message": f} for f in stats.failures]
    if kind == "programs":  # the templates' drafting; drills have none
        report.extra["synth"] = stats.to_dict()
    params = {"limit": limit, "seed": seed, "kind": kind, "english_names": english_names,
              "made_up_names": made_up_names, "made_up_subjects": made_up_subjects}
    if lang != "vox":  # absent for Vox: its fingerprint is the one before --lang
        params["lang"] = lang
    report.fingerprint = fingerprint_block({}, params, [pack])
    report.write()
    return report


# ---------------------------------------------------------------- the stage: `mens generate-data`, the pipeline's generate-data

SHARE = "a share from 0 to 1"
# generate_data keys that each write corpus/<key>.jsonl with mens.corpus.synth.drills.<key>
DRILL_KINDS = ("copy_drills", "code_drills")


@dataclass
class GenerateDataOptions(Options):
    """The pipeline config's `generate_data:` section (seed: the config's seed when left out;
    drill_english_names: english_names when left out; lang: the programs' language, vox or python)."""

    count: int = option(0, whole(0), "0 or more")
    seed: int | None = option(None, whole(), "a whole number")
    copy_drills: int = option(0, whole(0), "0 or more")
    code_drills: int = option(0, whole(0), "0 or more")
    english_names: float = option(0.0, number(0, 1), SHARE)
    drill_english_names: float | None = option(None, number(0, 1), SHARE)
    made_up_names: float = option(MADE_UP_SHARE, number(0, 1), SHARE)
    made_up_subjects: float = option(0.0, number(0, 1), SHARE)
    lang: str = option("vox", lambda v: isinstance(v, str) and v in LANGS,
                       f"a language with templates ({', '.join(LANGS)})")


def _check(ctx: Context, where: str) -> None:
    """The copy drills are Vox only: `lang: python` beside `copy_drills` is an error."""
    opts = GenerateDataOptions.read(ctx.config.get("generate_data"), "generate_data", where)
    only_vox_copy_drills(opts.lang, "generate_data.copy_drills" if opts.copy_drills else None, where,
                         "use code_drills, which come in Python too")


def _params(ctx: Context) -> dict[str, Any]:
    opts = GenerateDataOptions.read(ctx.config.get("generate_data"), "generate_data", "pipeline config")
    params = asdict(opts)
    params["seed"] = ctx.seed if opts.seed is None else opts.seed
    if opts.drill_english_names is None:
        params["drill_english_names"] = opts.english_names
    if opts.lang == "vox":  # absent for Vox: a Vox pipeline keeps the fingerprint it had before `lang`
        del params["lang"]
    return params


def _outputs(ctx: Context) -> list[Path]:
    params = _params(ctx)
    return [ctx.work_file("corpus", "synthetic.jsonl")] + \
        [ctx.work_file("corpus", f"{kind}.jsonl") for kind in DRILL_KINDS if params[kind]]


def _run(ctx: Context) -> dict[str, Any]:
    p = _params(ctx)
    n = write_jsonl_atomic(ctx.work_file("corpus", "synthetic.jsonl"),
                           generate(p["count"], p["seed"], english_names=p["english_names"],
                                    made_up_names=p["made_up_names"], made_up_subjects=p["made_up_subjects"],
                                    lang=p.get("lang", "vox")))
    made = {"rows": n}
    for kind in DRILL_KINDS:  # a scratch base's curriculum (scratch.curriculum_data)
        if p[kind]:
            lang = {"lang": p.get("lang", "vox")} if kind == "code_drills" else {}  # copy drills: Vox only (_check)
            write_jsonl_atomic(ctx.work_file("corpus", f"{kind}.jsonl"),
                               getattr(drills, kind)(p[kind], p["seed"], p["drill_english_names"], **lang))
            made[kind] = p[kind]
    return made


def _arguments(p) -> None:
    add_flag(p, "--limit", type=int, required=True, help="how many pairs")
    add_flag(p, "--seed", type=int, default=0)
    p.add_argument("--kind", choices=("programs", "copy-drills", "code-drills"), default="programs",
                   help="programs (default): Vox programs with prompts; copy-drills: requests to say back "
                   "made-up names and signatures exactly (Vox only), a scratch base's --curriculum-data; "
                   "code-drills: the same names copied into declarations that parse, Vox or (--lang python) Python "
                   "(docs/synthetic-data.md)")
    p.add_argument("--english-names", type=float, default=0.0, metavar="SHARE",
                   help="share (0-1) of made-up names built from English words (`lines_capture`) instead of "
                   "syllables (`velmo_rask`); default 0 (docs/synthetic-data.md)")
    p.add_argument("--made-up-names", type=float, default=MADE_UP_SHARE, metavar="SHARE",
                   help=f"share (0-1) of programs whose quoted names are made up, so that the code's names can only "
                   f"be copied from the prompt; default {MADE_UP_SHARE} (docs/synthetic-data.md)")
    p.add_argument("--made-up-subjects", type=float, default=0.0, metavar="SHARE",
                   help="share (0-1) of programs about a made-up thing with made-up fields, whose prompt spells "
                   "out its fields and the program's specifics (cron line, URI, handler names, paths …), so "
                   "they can only be copied; default 0 (docs/synthetic-data.md)")
    p.add_argument("--lang", default="vox", help=f"the language of the programs: {' or '.join(LANGS)} (default vox); "
                   "python: the plain-function templates ported to Python 3 (docs/synthetic-data.md)")
    add_flag(p, "-o", "--output", type=Path, required=True, help="synthetic.jsonl to write")


def _command(args) -> int:
    from mens.corpus.cli import check_outputs, positive

    positive(args.limit, "--limit", "500")
    check_outputs((args.output, "-o"), report="generate")
    report = generate_data(args.output, limit=args.limit, seed=args.seed, kind=args.kind,
                           english_names=args.english_names, made_up_names=args.made_up_names,
                           made_up_subjects=args.made_up_subjects, lang=args.lang)
    say(report.summary())
    return 0


STAGE = Stage(
    "generate-data", inputs=lambda c: [], outputs=_outputs, run=_run, params=_params,
    packs=lambda c: [_params(c).get("lang", "vox")], code=CORPUS_CODE,
    needed=lambda c: None if _params(c)["count"] > 0 else "generate_data.count is 0",
    section="generate_data", options=GenerateDataOptions, check=_check, help="synthetic Vox (or Python) pairs that parse",
    command=Command("generate-data", "synthetic, parser-verified Vox (or Python) programs with prompts", _arguments,
                    _command, group=None, description="Compose Vox (or, with --lang python, Python) programs from a "
                    "grammar of templates, each verified to parse, each with a prompt describing it; no duplicates; "
                    "reproducible for a --seed."))
