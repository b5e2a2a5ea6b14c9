"""The `mens` command line: one thin command per stage, dispatched from a small table.

Each stage folder has a light `cli.py` with `register(subparsers)`; those modules import only
argparse at the top and pull in torch/transformers inside the handler that needs them, so
`mens --help` stays well under a second.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from mens import __version__
from mens.errors import GateFailure, MensError, edge_error
from mens.flags import add_group  # noqa: F401 (the stage folders' cli modules take it from flags)
from mens.library_noise import route as route_library_noise
from mens.progress import configure as configure_progress

# Modules that add commands, in the order `mens --help` lists them.
COMMAND_MODULES = [
    "mens.lang.cli",
    "mens.corpus.cli",
    "mens.train.cli",
    "mens.evaluate.cli",
    "mens.rl.cli",
    "mens.pipeline.cli",
    "mens.serve.cli",
    "mens.export.cli",
]


class UsageError(SystemExit):
    """A command line argparse rejects: still a SystemExit(2) for code that parses on its own;
    `main` prints nothing more and returns 2."""


class Parser(argparse.ArgumentParser):
    """argparse with the README's one-line errors: `mens: error: <what> (mens CMD) — see
    `mens CMD --help``, exit 2, instead of the usage block over several lines. Subcommand
    parsers are of this class too (add_subparsers uses the parent's class); --help is untouched."""

    def error(self, message: str):
        line = " ".join(message.split())
        print(f"mens: error: {line} ({self.prog}) — see `{self.prog} --help`", file=sys.stderr)
        raise UsageError(2)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="mens",
        description="Turn a language's own code and docs into a fine-tuned code assistant: "
        "extract a parser-verified corpus, fine-tune (QLoRA/LoRA/full/scratch), gate on "
        "whether generated code parses, merge, and serve an OpenAI-compatible API.",
    )
    parser.add_argument("--version", action="version", version=f"mens {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback on errors, and the libraries' warnings and progress bars")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress output (also MENS_QUIET=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # a real command line (tests call main(argv) and stay in-process)
        from mens.train.allocator import reexec_with_fast_allocator

        reexec_with_fast_allocator(sys.argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        return int(exc.code)
    if not getattr(args, "func", None):
        # `mens` or `mens corpus` alone: show the help of that level.
        (getattr(args, "_parser", None) or parser).print_help()
        return 0 if args.command is None else 2
    configure_progress(quiet=args.quiet or os.environ.get("MENS_QUIET") == "1")
    route_library_noise(debug=args.debug)  # libraries' warnings and bars: shown with --debug only
    try:
        code = args.func(args)
        return int(code or 0)
    except MensError as exc:
        if args.debug:
            traceback.print_exc()
        print(exc.format(), file=sys.stderr)
        return exc.exit_code
    except GateFailure as exc:
        if str(exc):
            print(f"mens: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("mens: interrupted", file=sys.stderr)
        if argv is None:  # a real command line: never hang at exit on a torn-down pool
            from mens.corpus.parallel import stuck_pool_threads

            if stuck_pool_threads():  # every file is closed and every temp removed by now
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(130)
        return 130
    except BrokenPipeError:
        return 0
    except (Exception, RecursionError) as exc:  # the one place leftovers become the one-line form
        err = edge_error(exc)
        if err is None:
            raise  # a bug: its traceback is what a report needs
        if args.debug:
            traceback.print_exc()
        print(err.format(), file=sys.stderr)
        return err.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
