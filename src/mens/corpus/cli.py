"""`mens corpus extract|pairs|validate|mix|eval|stats` and `mens generate-data`: thin wrappers
over the stage functions in mens.corpus.*; each prints a one-line summary and writes a report."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mens.cli import add_group
from mens.files import check_not_input
from mens.flags import add_flag


LANG_HELP = ("language pack (vox, python, a tree-sitter grammar) for rows that name none: no `lang` field, "
             "no fence tag; their code — a fenced block, or the whole plain response — is parsed with it. "
             "A row's own `lang` or fence tag wins; prose rows (response_mode prose_only, docs_qa lane) stay prose")


def register(sub) -> None:
    corpus = add_group(sub, "corpus", "build a parser-verified training corpus: extract, pairs, validate, "
                       "mix, eval, stats, prefs")

    p = corpus.add_parser("extract", help="source files and Markdown docs → units.jsonl",
                          description="Walk source files of every language pack and Markdown docs; write one "
                          "unit per file, per top-level construct, per docs code block and per docs prose "
                          "section. Report: <output stem>.extract_report.json.")
    p.add_argument("paths", nargs="+", type=Path, help="files or folders")
    add_flag(p, "-o", "--output", type=Path, required=True, help="units.jsonl to write")
    p.add_argument("--incremental", action="store_true",
                   help="reuse the previous output's units of files whose content is unchanged")
    p.add_argument("--all-docs", action="store_true",
                   help="take every docs page, not only those with training_eligible: true")
    add_flag(p, "--lang", action="append", default=[],
             help="also extract this tree-sitter grammar (rust, typescript …); repeatable")
    p.add_argument("--max-bytes", type=int, default=1_000_000, help="skip larger files (default 1 MB)")
    add_flag(p, "--workers", type=int, help="processes (default 2)")
    p.add_argument("--follow-external-links", action="store_true",
                   help="read symlinked files that point outside the given paths (skipped and counted by default)")
    p.set_defaults(func=_edge(_extract, "paths"))

    p = corpus.add_parser("gather", help="this Python's own code (standard library, installed packages) → a folder",
                          description="Copy the running interpreter's standard library and installed distributions' "
                          "files into one folder, each with its distribution, version, licence and sha256 in "
                          "SOURCES.json; only permissive licences, no tests or vendored copies, no generated or "
                          "minified files, nothing that names Vox (docs/base.md).")
    p.add_argument("packages", nargs="*", metavar="DIST[=GLOB,...]",
                   help="installed distributions, e.g. torch or 'torch=torch/**/*.py,torch/include/c10/**/*.h' "
                   "(default glob **/*.py over the paths pip recorded)")
    p.add_argument("--no-stdlib", action="store_true", help="leave out the standard library")
    add_flag(p, "-o", "--output-dir", type=Path, required=True, help="folder to write (replaced whole)")
    p.add_argument("--max-file-bytes", type=int, default=400_000, help="skip larger files (default 400 kB)")
    p.set_defaults(func=_edge(_gather))

    p = corpus.add_parser("pairs", help="units.jsonl → instruction pairs",
                          description="Whole-file, per-construct, docs code, docs prose, follow-up and "
                          "parser-verified error-correction pairs; byte-identical for a --seed.")
    p.add_argument("units", type=Path, help="units.jsonl from `mens corpus extract`")
    add_flag(p, "-o", "--output", type=Path, required=True, help="pairs.jsonl to write")
    add_flag(p, "--seed", type=int, default=0)
    p.add_argument("--no-error-correction", action="store_true", help="skip error-correction pairs")
    p.add_argument("--lenient", action="store_true", help="skip malformed unit lines (counted) instead of failing")
    add_flag(p, "--workers", type=int, help="processes (default 2)")
    p.set_defaults(func=_edge(_pairs, "units"))

    p = corpus.add_parser("validate", help="parse every code response, dedupe, schema-check",
                          description="Parse each code-bearing response with its language pack; rejected "
                          "rows go to --quarantine with the parser's message; duplicates (structural hash "
                          "+ prompt) are dropped. A row's language is its `lang` field, else its fence tag, "
                          "else --lang; rows with none are kept but counted `unchecked` in the report. "
                          "--strict exits 1 on any rejection.")
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
    p.set_defaults(func=_edge(_validate, "pairs"))

    p = corpus.add_parser("mix", help="weighted, seeded mix of pair files → train.jsonl",
                          description="Mix sources as mix.yaml says (weights, sample rates, lane filters, "
                          "seed). Report: <output stem>.mix_report.json.")
    add_flag(p, "--config", type=Path, required=True, help="mix.yaml")
    add_flag(p, "-o", "--output", type=Path, help="override the config's output")
    p.add_argument("--allow-missing-sources", action="store_true",
                   help="skip missing sources (reported) instead of failing")
    p.add_argument("--lenient", action="store_true", help="skip malformed rows (counted) instead of failing")
    p.set_defaults(func=_edge(_mix, "config"))

    p = corpus.add_parser("eval", help="measure a pairs file → eval_results.json; optionally a gate",
                          description="Format validity, parse rate, construct coverage, safety rejections, "
                          "per category. A row's language is its `lang` field, else its fence tag, else "
                          "--lang; rows with none are counted unchecked, and with no code checked the parse "
                          "rate is n/a (null), never 0. Gate thresholds: flags, or MENS_EVAL_MIN_PARSE_RATE, "
                          "MENS_EVAL_MIN_COVERAGE, MENS_EVAL_STRICT=1 (exit 1 when a gate fails; a threshold "
                          "with nothing checked fails too).")
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
    p.set_defaults(func=_edge(_eval, "file"))

    p = corpus.add_parser("stats", help="rows by category/lane/lang/rating and a length histogram",
                          description="Print what a pairs file holds; lengths in tokens with --tokenizer, "
                          "else characters. Also writes <stem>.stats_report.json beside the file (or -o).")
    p.add_argument("file", type=Path, help="pairs JSONL")
    p.add_argument("--tokenizer", type=Path, help="model folder or tokenizer.json for token lengths")
    add_flag(p, "-o", "--output", type=Path, help="JSON report path")
    p.add_argument("--lenient", action="store_true", help="skip malformed lines instead of failing")
    p.set_defaults(func=_edge(_stats, "file"))

    p = sub.add_parser("generate-data", help="synthetic, parser-verified Vox programs with prompts",
                       description="Compose Vox programs from a grammar of templates, each verified to parse, "
                       "each with a prompt describing it; no duplicates; reproducible for a --seed.")
    add_flag(p, "--limit", type=int, required=True, help="how many pairs")
    add_flag(p, "--seed", type=int, default=0)
    p.add_argument("--kind", choices=("programs", "copy-drills", "code-drills"), default="programs",
                   help="programs (default): Vox programs with prompts; copy-drills: requests to say back "
                   "made-up names and signatures exactly, a scratch base's --curriculum-data; code-drills: the "
                   "same names copied into Vox declarations that parse (docs/synthetic-data.md)")
    p.add_argument("--english-names", type=float, default=0.0, metavar="SHARE",
                   help="share (0-1) of made-up names built from English words (`lines_capture`) instead of "
                   "syllables (`velmo_rask`); default 0 (docs/synthetic-data.md)")
    from mens.corpus.synth.words import MADE_UP_SHARE  # a word list: no parser to import

    p.add_argument("--made-up-names", type=float, default=MADE_UP_SHARE, metavar="SHARE",
                   help=f"share (0-1) of programs whose quoted names are made up, so that the code's names can only "
                   f"be copied from the prompt; default {MADE_UP_SHARE} (docs/synthetic-data.md)")
    p.add_argument("--made-up-subjects", type=float, default=0.0, metavar="SHARE",
                   help="share (0-1) of programs about a made-up thing with made-up fields, whose prompt spells "
                   "out its fields and the program's specifics (cron line, URI, handler names, paths …), so "
                   "they can only be copied; default 0 (docs/synthetic-data.md)")
    p.add_argument("--lang", default="vox", help="the language of the programs: vox (default) or python, the "
                   "plain-function templates ported to Python 3 (docs/synthetic-data.md)")
    add_flag(p, "-o", "--output", type=Path, required=True, help="synthetic.jsonl to write")
    p.set_defaults(func=_edge(_generate))

    from mens.corpus.prefs import register as register_prefs  # mens corpus prefs (issue 13, docs/rl.md)

    register_prefs(corpus)


def _edge(command, source: str | None = None):
    """A corpus command at the CLI edge: SIGTERM leaves the way Ctrl+C does (workers killed, temp
    files removed, exit 130), and OS, decode and recursion errors that reach it become the one
    line `mens: error: … (path) — what to do` (exit 2) instead of a traceback; one that names no
    file is placed on the command's input (`args.<source>`)."""

    def run(args) -> int:
        from mens.corpus.parallel import sigterm_as_interrupt
        from mens.errors import user_error

        with sigterm_as_interrupt():
            try:
                return command(args)
            except (OSError, UnicodeDecodeError, RecursionError) as exc:
                where = None
                if source and not getattr(exc, "filename", None):
                    given = getattr(args, source)
                    where = ", ".join(map(str, given)) if isinstance(given, list) else str(given)
                raise user_error(exc, where) from exc

    return run


def _outputs(*paths: tuple[Path | None, str], report: str | None = None) -> None:
    """Every output, and the report of stage `report` beside the first, can be written: checked
    before any work (the output first: `-o ''` is a folder, which has no report name)."""
    from mens.corpus.report import report_path
    from mens.files import check_output

    from mens.errors import MensError

    for path, flag in paths:
        if path is not None:
            check_output(path, flag)
    given = [(path, flag) for path, flag in paths if path is not None]
    if report:
        report_file = report_path(paths[0][0], report)
        check_output(report_file, "report")
        given.insert(0, (report_file, f"the {report} report"))
    seen: dict[Path, str] = {}
    for path, flag in given:  # two outputs in one file: the second write would replace the first
        key = Path(path).resolve()
        if key in seen:
            raise MensError(f"{flag} is the same file as {seen[key]}", str(path), f"give {flag} a file of its own")
        seen[key] = flag


def _positive(value: int | None, flag: str, example: str) -> None:
    from mens.errors import MensError

    if value is not None and value < 1:
        raise MensError(f"{flag} must be 1 or more, got {value}", flag, f"e.g. {flag} {example}")


def _gather(args) -> int:
    from mens.corpus.installed import STDLIB, Source, gather
    from mens.progress import say

    _positive(args.max_file_bytes, "--max-file-bytes", "400000")
    sources = ([] if args.no_stdlib else [Source(STDLIB)]) + [Source.parse(p, "gather") for p in args.packages]
    say(gather(sources, args.output_dir, max_file_bytes=args.max_file_bytes).summary())
    return 0


def _extract(args) -> int:
    from mens.corpus.extract import extract
    from mens.corpus.parallel import default_workers
    from mens.progress import say

    default_workers(args.workers)
    _positive(args.max_bytes, "--max-bytes", "1000000")
    check_not_input(args.output, *args.paths)
    _outputs((args.output, "-o"), report="extract")
    report = extract(args.paths, args.output, incremental=args.incremental,
                     docs_training_only=not args.all_docs, langs=args.lang, max_bytes=args.max_bytes,
                     workers=args.workers, follow_external_links=args.follow_external_links)
    say(report.summary())
    return 0


def _pairs(args) -> int:
    from mens.corpus.pairs import make_pairs
    from mens.progress import say

    from mens.corpus.parallel import default_workers

    default_workers(args.workers)
    check_not_input(args.output, args.units)
    _outputs((args.output, "-o"), report="pairs")
    report = make_pairs(args.units, args.output, seed=args.seed, lenient=args.lenient,
                        error_correction=not args.no_error_correction, workers=args.workers)
    say(report.summary())
    return 0


def _validate(args) -> int:
    from mens.corpus.validate import validate
    from mens.progress import say

    from mens.corpus.parallel import default_workers

    default_workers(args.workers)
    check_not_input(args.output, args.pairs)
    if args.quarantine:
        check_not_input(args.quarantine, args.pairs)
    _outputs((args.output, "-o"), (args.quarantine, "--quarantine"), report="validate")
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


def _mix(args) -> int:
    from mens.corpus.mix import load_config, mix
    from mens.progress import say

    cfg = load_config(args.config)
    out = args.output or cfg.output
    check_not_input(out, args.config)  # a source as the output is refused by mix() itself
    _outputs((out, "-o" if args.output else "output"), report="mix")
    report = mix(args.config, allow_missing=args.allow_missing_sources, lenient=args.lenient,
                 output=args.output)
    say(report.summary())
    return 0


def _eval(args) -> int:
    from mens.corpus.evaluate import evaluate

    from mens.errors import GateFailure

    check_not_input(args.output, args.file)
    _outputs((args.output, "-o"))
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
    print(f"{args.file}: {res['total_samples']} samples, format {_rate(res['format_validity'])}, "
          f"parse rate {_rate(res['parse_rate'])} ({res['parsed_samples']}/{res['code_samples']}), "
          f"unchecked {res['unchecked_samples']}, prose {res['prose_samples']}, "
          f"coverage {res['construct_coverage']}/{res['construct_total']} ({coverage}), "
          f"unsafe {_rate(res['safety_rejection_rate'])} → {args.output}")


def _env_float(flag: float | None, name: str) -> float | None:
    """A gate threshold: the flag, else the environment variable `name`. The environment is read
    here, at the CLI edge, and nowhere else: `evaluate()` takes explicit arguments."""
    from mens.errors import MensError

    if flag is not None:
        return flag
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        raise MensError(f"{name} must be a number, got {value!r}", name, "set it to e.g. 0.95, or unset it") from None


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _stats(args) -> int:
    from mens.corpus.stats import format_stats, stats

    from mens.corpus.report import report_path

    check_not_input(args.output or report_path(args.file, "stats"), args.file)
    _outputs((args.output or report_path(args.file, "stats"), "-o"))
    print(format_stats(stats(args.file, tokenizer=args.tokenizer, out=args.output, lenient=args.lenient)))
    return 0


def _generate(args) -> int:
    from mens.corpus.synth.generate import generate_data
    from mens.progress import say

    _positive(args.limit, "--limit", "500")
    _outputs((args.output, "-o"), report="generate")
    report = generate_data(args.output, limit=args.limit, seed=args.seed, kind=args.kind,
                           english_names=args.english_names, made_up_names=args.made_up_names,
                           made_up_subjects=args.made_up_subjects, lang=args.lang)
    say(report.summary())
    return 0
