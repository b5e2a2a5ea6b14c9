"""`mens vox …`: check and inspect Vox sources with the Vox language pack."""

from __future__ import annotations

import argparse
import json

from mens.flags import add_group
from mens.errors import GateFailure


def register(sub) -> None:
    vox = add_group(sub, "vox", "check Vox sources and list their constructs")

    check = vox.add_parser("check", help="parse Vox files; report syntax errors (exit 1 if any file fails)",
                           description="Parse .vox files (folders are searched recursively, - reads "
                                       "stdin) and print path:line:col: error: message for each file "
                                       "that does not parse, then a summary line.")
    _common(check)
    check.add_argument("--warnings", action="store_true",
                       help="also print warnings (dropped characters, deprecated '->')")
    check.set_defaults(func=cmd_check)

    cons = vox.add_parser("constructs", help="list each file's top-level constructs (kind, name, lines)",
                          description="Print every top-level construct (taxonomy kind, name, line range) "
                                      "of each Vox file.")
    _common(cons)
    cons.set_defaults(func=cmd_constructs)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help=".vox files, folders, or - for stdin")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--script", action="store_true", help="script mode: top-level statements allowed")


def cmd_check(args: argparse.Namespace) -> int:
    from mens.lang.vox.check import check_paths

    report = check_paths(args.paths, script=args.script)
    if args.json:
        print(json.dumps({"summary": report.summary(),
                          "files": [r.to_dict() for r in report.results]}, indent=2))
    else:
        for r in report.results:
            a = r.analysis
            if a.error is not None:
                print(f"{r.path}:{a.error.line}:{a.error.col}: error: {a.error.message}")
            if args.warnings:
                for w in a.warnings:
                    print(f"{r.path}:{w.line}:{w.col}: warning: {w.message}")
        print(report.summary_line())
    if report.failed:
        raise GateFailure()
    return 0


def cmd_constructs(args: argparse.Namespace) -> int:
    from mens.lang.vox.check import check_paths

    report = check_paths(args.paths, script=args.script)
    if args.json:
        print(json.dumps({"summary": report.summary(),
                          "files": [r.to_dict(constructs=True) for r in report.results]}, indent=2))
    else:
        for r in report.results:
            a = r.analysis
            print(r.path)
            for c in a.constructs:
                tags = f"  [{', '.join(c.tags)}]" if c.tags else ""
                lines = f"{c.span.start_line}-{c.span.end_line}"
                print(f"  {lines:<9} {c.kind:<14} {c.name or '-'}{tags}")
            if a.error is not None:
                print(f"  error {a.error.line}:{a.error.col}: {a.error.message}")
    if report.failed:
        raise GateFailure(f"{report.failed} of {len(report.results)} files do not parse")
    return 0
