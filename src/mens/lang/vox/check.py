"""`mens vox check` / `mens vox constructs` logic: find the sources, analyze each, report."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from mens.errors import MensError, user_error
from mens.lang.base import Analysis

STDIN = "-"


@dataclass
class FileResult:
    path: str
    analysis: Analysis

    def to_dict(self, constructs: bool = False) -> dict:
        a = self.analysis
        out: dict = {
            "path": self.path,
            "ok": a.ok,
            "error": None if a.error is None else
            {"line": a.error.line, "col": a.error.col, "message": a.error.message},
            "warnings": [{"line": w.line, "col": w.col, "message": w.message} for w in a.warnings],
        }
        if constructs:
            out["constructs"] = [
                {"kind": c.kind, "name": c.name, "start_line": c.span.start_line,
                 "end_line": c.span.end_line, "start": c.span.start, "end": c.span.end,
                 "doc": c.doc, "tags": list(c.tags)}
                for c in a.constructs
            ]
        return out


@dataclass
class CheckReport:
    results: list[FileResult] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(not r.analysis.ok for r in self.results)

    def summary(self) -> dict:
        n = len(self.results)
        return {"files": n, "parsed": n - self.failed, "failed": self.failed,
                "warnings": sum(len(r.analysis.warnings) for r in self.results)}

    def summary_line(self) -> str:
        s = self.summary()
        return f"{s['files']} files, {s['parsed']} parsed, {s['failed']} failed"


def collect_sources(paths: list[str]) -> list[str]:
    """Files as given, folders searched recursively for *.vox, `-` for stdin. A path that does
    not exist is a user error."""
    out: list[str] = []
    for raw in paths:
        if raw == STDIN:
            out.append(STDIN)
            continue
        p = Path(raw)
        if p.is_dir():
            found = [str(f) for f in sorted(p.rglob("*.vox")) if f.is_file()]
            if not found:  # a check of nothing must not pass
                raise MensError("no .vox files in this folder", raw, "give a folder holding .vox files")
            out.extend(found)
        elif p.is_file():
            out.append(str(p))
        else:
            raise MensError(f"no such file or folder: {raw}", "mens vox", "give .vox files, folders, or - for stdin")
    return out


def read_source(path: str) -> str:
    """The file's text. Bytes that are not UTF-8 text are not Vox source: a one-line error naming
    the file and line (exit 2), never a file "parsed" after its bytes were replaced."""
    where = "<stdin>" if path == STDIN else path
    try:
        data = _read_stdin() if path == STDIN else Path(path).read_bytes()
    except OSError as exc:
        raise user_error(exc, where) from None
    if b"\x00" in data:
        line = data[:data.index(b"\x00")].count(b"\n") + 1
        raise MensError("binary data, not Vox source (a NUL byte)", f"{where}:{line}", "give .vox text files")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise MensError(f"not UTF-8 text (byte {exc.start})", f"{where}:{line}",
                        "re-encode the file as UTF-8") from None


def _read_stdin() -> bytes:
    """stdin's bytes; a text stream (a test's StringIO) is encoded back, its undecodable bytes
    (surrogate escapes) kept as they came so they still fail the UTF-8 check."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is not None:
        return stream.read()
    return sys.stdin.read().encode("utf-8", "surrogateescape")


def check_paths(paths: list[str], script: bool = False) -> CheckReport:
    from mens.lang import get_pack

    pack = get_pack("vox")
    report = CheckReport()
    for path in collect_sources(paths):
        text = read_source(path)
        report.results.append(FileResult("<stdin>" if path == STDIN else path,
                                         pack.analyze(text, script=script)))
    return report
