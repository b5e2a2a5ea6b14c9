"""`mens corpus …` and `mens generate-data`: each corpus stage's command, read from its one
registration (mens.corpus.stages), plus `stats` and `prefs`; and what those commands share at
the CLI edge: outputs checked before any work, SIGTERM as Ctrl+C, OS errors as one line."""

from __future__ import annotations

from pathlib import Path

from mens.files import check_not_input
from mens.flags import add_flag, add_group


LANG_HELP = ("language pack (vox, python, a tree-sitter grammar) for rows that name none: no `lang` field, "
             "no fence tag; their code — a fenced block, or the whole plain response — is parsed with it. "
             "A row's own `lang` or fence tag wins; prose rows (response_mode prose_only, docs_qa lane) stay prose")


def register(sub) -> None:
    from mens.corpus.stages import corpus_stages

    corpus = add_group(sub, "corpus", "build a parser-verified training corpus: extract, pairs, validate, "
                       "mix, eval, stats, prefs")
    for stage in corpus_stages():
        cmd = stage.command
        if cmd is not None:
            p = (corpus if cmd.group == "corpus" else sub).add_parser(cmd.name, help=cmd.help,
                                                                      description=cmd.description or None)
            cmd.arguments(p)
            p.set_defaults(func=_edge(cmd.run, cmd.source))

    p = corpus.add_parser("stats", help="rows by category/lane/lang/rating and a length histogram",
                          description="Print what a pairs file holds; lengths in tokens with --tokenizer, "
                          "else characters. Also writes <stem>.stats_report.json beside the file (or -o).")
    p.add_argument("file", type=Path, help="pairs JSONL")
    p.add_argument("--tokenizer", type=Path, help="model folder or tokenizer.json for token lengths")
    add_flag(p, "-o", "--output", type=Path, help="JSON report path")
    p.add_argument("--lenient", action="store_true", help="skip malformed lines instead of failing")
    p.set_defaults(func=_edge(_stats, "file"))

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


def check_outputs(*paths: tuple[Path | None, str], report: str | None = None) -> None:
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


def positive(value: int | None, flag: str, example: str) -> None:
    from mens.errors import MensError

    if value is not None and value < 1:
        raise MensError(f"{flag} must be 1 or more, got {value}", flag, f"e.g. {flag} {example}")

def _stats(args) -> int:
    from mens.corpus.stats import format_stats, stats

    from mens.corpus.report import report_path

    check_not_input(args.output or report_path(args.file, "stats"), args.file)
    check_outputs((args.output or report_path(args.file, "stats"), "-o"))
    print(format_stats(stats(args.file, tokenizer=args.tokenizer, out=args.output, lenient=args.lenient)))
    return 0
