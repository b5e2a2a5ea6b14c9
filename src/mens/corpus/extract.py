"""`corpus extract`: source files and Markdown docs → verified units (units.jsonl).

    extract(paths, out, *, incremental=False, docs_training_only=True, langs=(),
            max_bytes=1_000_000, workers=None, follow_external_links=False) -> Report

Every source file of a registered pack gives one `file` unit and, when it holds two or more
top-level constructs, one `construct` unit per construct (sliced by the pack's spans). A file is
skipped (and counted, with the reason) when it is not UTF-8, binary, larger than `max_bytes`,
empty (blank lines, comments, a docstring), generated (a "do not edit"-style comment in its first
lines), minified (lines of over 500 characters on average), does not parse, or its metadata
says `skip`, `training_eligible: false` or `status: deprecated`.
A symlink that resolves outside the given paths is skipped (`external_link`) unless
`follow_external_links=True`; a dangling one is counted `broken_link`. Docs pages go through
`mens.corpus.docs`. Files are processed by a pool of `workers` processes
(default 2). `incremental=True` reuses the previous output's units of files whose content hash is
unchanged (when the packs' fingerprints and the unit-making code, UNIT_CODE, are unchanged too).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from mens.corpus.docs import doc_units
from mens.fingerprint import fingerprint_block, text_hash
from mens.corpus.parallel import default_workers, mapped
from mens.corpus.report import Report, read_report
from mens.corpus.units import Unit, read_units
from mens.errors import MensError
from mens.lang import LanguagePack, builtin_names, get_pack
from mens.corpus.stages import CORPUS_CODE, all_packs, corpus_langs
from mens.files import check_not_input
from mens.flags import add_flag
from mens.progress import progress, say
from mens.stage import Command, Context, Options, Stage, option, strings

DOC_EXTENSIONS = (".md", ".markdown")
SKIP_DIRS = {"__pycache__", "node_modules", "venv", "site-packages"}
SERIAL_BELOW = 64  # a pool costs more than it saves for a handful of files


def load_packs(langs: Iterable[str] = ()) -> list[LanguagePack]:
    """The built-in packs that can be imported, plus the named extra ones (tree-sitter)."""
    packs: list[LanguagePack] = []
    for name in builtin_names():
        try:
            packs.append(get_pack(name))
        except (ImportError, AttributeError):  # a built-in pack not (yet) present in this checkout
            if name in langs:
                raise MensError(f"language pack {name!r} is not available", "--lang", "install it") from None
    packs += [get_pack(n) for n in langs if n not in builtin_names()]
    return packs


def walk(paths: Iterable[str | Path], packs: list[LanguagePack], follow_external_links: bool = False
         ) -> tuple[list[Path], int, list[tuple[str, str, str]]]:
    """Source and docs files under `paths`, sorted; the count of other files passed over; and
    the files skipped, as drops: a link that resolves outside every given path (`external_link`,
    unless `follow_external_links`: a link to /etc/passwd must not become a training row) and a
    link to nothing (`broken_link`)."""
    exts = {e for p in packs for e in p.extensions} | set(DOC_EXTENSIONS)
    roots = [Path(item).resolve() for item in paths]
    found: list[Path] = []
    drops: list[tuple[str, str, str]] = []
    other = 0
    for item in paths:
        root = Path(item)
        if not root.exists():
            raise MensError("path not found", str(root), "give existing files or folders")
        candidates = [root] if root.is_file() else sorted(
            p for p in root.rglob("*")
            if (p.is_file() or p.is_symlink()) and not any(part.startswith(".") or part in SKIP_DIRS
                                                           for part in p.relative_to(root).parts[:-1]))
        for path in candidates:
            if path.suffix.lower() not in exts:
                other += 1
                continue
            if not path.exists():
                drops.append(("broken_link", str(path), f"links to {os.readlink(path)}, which does not exist"))
                continue
            real = path.resolve()
            if not follow_external_links and not any(real == r or r in real.parents for r in roots):
                drops.append(("external_link", str(path), f"links to {real}, outside the given paths "
                              "(--follow-external-links reads it)"))
                continue
            if real.is_file():
                found.append(path)
    return sorted(set(found)), other, sorted(set(drops))


@dataclass
class FileResult:
    """One file's outcome. Units travel as JSON lines: serialising in the workers keeps the
    parent process (which writes them in order) from becoming the bottleneck."""

    path: str
    file_hash: str
    lines: list[str] = field(default_factory=list)               # units, one JSON object each
    kinds: list[tuple[str, str | None]] = field(default_factory=list)  # (kind, lang) per unit
    drops: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, units: list[Unit], drops: list) -> "FileResult":
        self.lines = [u.to_json() for u in units]
        self.kinds = [(u.kind, u.lang) for u in units]
        self.drops = list(drops)
        return self


def read_source(path: Path, max_bytes: int) -> tuple[str | None, str, tuple[str, str, str] | None]:
    """(text, content hash, drop). Huge, binary and non-UTF-8 files come back as a drop. CRLF line
    ends become LF: a file saved on Windows must not teach the model to write carriage returns,
    nor make training rows that differ from the same file saved elsewhere (the hash is of the
    bytes, so --incremental still sees a changed line end)."""
    where = f"{path}:1"
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return None, "", ("huge", where, f"{size} bytes > {max_bytes}")
        data = path.read_bytes()
    except OSError as exc:  # permissions, a file removed while we walk, a dangling link
        return None, "", ("unreadable", where, exc.strerror or str(exc))
    digest = text_hash(data)
    if b"\x00" in data[:8192]:
        return None, digest, ("binary", where, "contains NUL bytes")
    try:
        # A leading BOM is not source text, nor is the \r of a Windows line end: the units (and
        # the pairs trained on) hold the code with \n, whatever editor saved it.
        return data.decode("utf-8-sig").replace("\r\n", "\n"), digest, None
    except UnicodeDecodeError as exc:
        return None, digest, ("not_utf8", where, f"byte {exc.start} is not UTF-8")


def source_units(path: str, text: str, pack: LanguagePack, file_hash: str) -> tuple[list[Unit], list]:
    meta = pack.metadata(text)
    where = f"{path}:1"
    if meta.get("skip"):
        return [], [("skip_marker", where, "file marked skip")]
    if meta.get("training_eligible") is False or str(meta.get("training_eligible")).lower() == "false":
        return [], [("not_training_eligible", where, "training_eligible: false")]
    if str(meta.get("status", "")).lower() == "deprecated":
        return [], [("deprecated", where, "status: deprecated")]
    if not pack.has_code(text):
        # An empty `__init__.py` (or one holding only a licence) would become the pair "Write a
        # Python module `__init__`." answered by nothing, which validate then drops as empty_code.
        return [], [("empty", where, "no code: only blank lines, comments or a docstring")]
    marker = generated_marker(text, tuple(pack.comment_prefixes))
    if marker is not None:
        line, comment = marker
        return [], [("generated", f"{path}:{line}", f"generated file: {comment[:120]}")]
    width = len(text) / max(1, text.count("\n") + (not text.endswith("\n")))
    if width > MINIFIED_LINE_CHARS:
        return [], [("minified", where, f"lines average {width:.0f} characters: minified or machine-written")]
    analysis = pack.analyze(text)
    if not analysis.ok:
        return [], [("parse_error", f"{path}:{analysis.error.line}", str(analysis.error))]
    kinds = [c.kind for c in analysis.constructs]
    named = [c for c in analysis.constructs if c.kind != "import"]
    lines = text.split("\n")
    if len(lines) > 1 and not lines[-1]:
        lines.pop()  # the text ends with a newline
    units = [Unit(kind="file", lang=pack.name, source=where, path=path,
                  span=[1, 1, len(lines), len(lines[-1]) + 1],
                  construct=_main_kind(named), name=Path(path).stem,
                  code=text, doc_comment=meta.get("description"),
                  ast_hash=pack.structural_hash(text), frontmatter=meta, constructs=kinds,
                  file_hash=file_hash)]
    if len(named) >= 2:
        for c in named:
            code = text[c.span.start:c.span.end]
            units.append(Unit(kind="construct", lang=pack.name, source=f"{path}:{c.span.start_line}",
                              path=path, span=[c.span.start_line, c.span.start_col, c.span.end_line,
                                               c.span.end_col],
                              construct=c.kind, name=c.name, code=code.rstrip() + "\n",
                              doc_comment=c.doc, ast_hash=pack.construct_hash(text, c),
                              frontmatter=meta, constructs=[c.kind], file_hash=file_hash))
    return units, []


# The usual "this file is generated" marks (Go's "Code generated … DO NOT EDIT.", @generated,
# "Auto generated by tools/make_width_tables.py", "This table was generated by a call to …"), but
# not a bare "generated by", which describes code as often as it marks it.
_GENERATED = re.compile(r"@generated\b|\bdo not edit\b|\bauto-?\s?generated\b|\bautomatically generated\b"
                        r"|\b(?:this|the) (?:file|module|table|code|source) (?:is|was|has been) generated\b", re.I)
GENERATED_HEAD_LINES = 10
# Mean characters per line above which a file is minified (underscore.min.js: 18,798 on one
# line) or machine-written (sympy's polyquinticconst.py: 514); hand-written code stays under 150.
MINIFIED_LINE_CHARS = 500


def generated_marker(text: str, prefixes: tuple[str, ...]) -> tuple[int, str] | None:
    """(line, comment) of a comment (a line starting with one of `prefixes`) in the first lines of
    `text` that marks the file as generated by a tool (a parser table, a data dump): its code is a
    program's output, not the project's code to learn from, and is often huge."""
    if not prefixes:
        return None
    for number, line in enumerate(text.split("\n", GENERATED_HEAD_LINES)[:GENERATED_HEAD_LINES], 1):
        stripped = line.strip()
        if stripped.startswith(prefixes) and _GENERATED.search(stripped):
            return number, stripped
    return None


def _main_kind(named: list) -> str:
    """A file's category: its most frequent construct kind (the first one on a tie)."""
    kinds = [c.kind for c in named]
    return max(kinds, key=lambda k: (kinds.count(k), -kinds.index(k))) if kinds else "file"


# Worker state: packs are built once per process from their names.
_WORKER: dict = {}


def _init_worker(lang_names: tuple[str, ...], training_only: bool, max_bytes: int) -> None:
    _WORKER.update(packs=[get_pack(n) for n in lang_names], training_only=training_only,
                   max_bytes=max_bytes)


def _extract_one(path_str: str) -> FileResult:
    packs, path = _WORKER["packs"], Path(path_str)
    text, digest, drop = read_source(path, _WORKER["max_bytes"])
    result = FileResult(path_str, digest)
    if drop:
        result.drops.append(drop)
        return result
    if path.suffix.lower() in DOC_EXTENSIONS:
        return result.add(*doc_units(path_str, text, packs, training_only=_WORKER["training_only"],
                                     file_hash=digest))
    pack = next(p for p in packs if path.suffix.lower() in p.extensions)
    return result.add(*source_units(path_str, text, pack, digest))


# The mens code that turns a file into units: --incremental reuses earlier units only when it is
# unchanged too (after an upgrade, an unchanged file's old units may no longer be what extract makes).
UNIT_CODE = ("mens.corpus.extract", "mens.corpus.docs", "mens.corpus.units")


def _previous_units(out: Path, fingerprint: dict) -> dict[str, list[Unit]]:
    """Units of the previous output by path, if it was made with the same packs, params and unit
    code. Their JSON comes out the same as it went in, so a reused file's lines are unchanged."""
    old = read_report(out, "extract")
    if not out.is_file() or not old:
        return {}
    prev = old.get("fingerprint")
    if not isinstance(prev, dict) or any(prev.get(k) != fingerprint[k] for k in ("packs", "params", "code")):
        return {}
    by_path: dict[str, list[Unit]] = {}
    try:
        for unit in read_units(out):
            by_path.setdefault(unit.path, []).append(unit)
    except MensError:
        return {}  # an unreadable previous output is simply not reused
    return by_path


def extract(paths: Iterable[str | Path], out: str | Path, *, incremental: bool = False,
            docs_training_only: bool = True, langs: Iterable[str] = (), max_bytes: int = 1_000_000,
            workers: int | None = None, follow_external_links: bool = False) -> Report:
    paths, langs, out = [Path(p) for p in paths], tuple(langs), Path(out)
    if not paths:
        raise MensError("no input paths", "extract", "give source files or folders")
    workers = default_workers(workers)
    packs = load_packs(langs)
    files, other, skipped = walk(paths, packs, follow_external_links)
    params = {"docs_training_only": docs_training_only, "langs": list(langs), "max_bytes": max_bytes,
              "follow_external_links": follow_external_links}
    report = Report("extract", str(out))
    report.counts["files_seen"] = len(files)
    report.counts["other_files"] = other
    for reason, where, message in skipped:
        report.drop(reason, where, message)
    fingerprint = fingerprint_block({}, params, packs, code=UNIT_CODE)
    previous = _previous_units(out, fingerprint) if incremental else {}
    results: dict[str, FileResult] = {}
    todo: list[str] = []
    for path in files:
        old = previous.get(str(path))
        if old and path.is_file() and old[0].file_hash == text_hash(path.read_bytes()):
            results[str(path)] = FileResult(str(path), old[0].file_hash).add(old, [])
            report.counts["files_reused"] += 1
        else:
            todo.append(str(path))
    names = tuple(p.name for p in packs)
    with progress("extract", total=len(todo)) as bar, \
            mapped(_extract_one, todo, workers, serial=workers <= 1 or len(todo) < SERIAL_BELOW,
                   initializer=_init_worker, initargs=(names, docs_training_only, max_bytes)) as done:
        for res in done:
            results[res.path] = res
            bar.advance()
    lines: list[str] = []
    hashes: dict[str, str] = {}
    for path in files:
        res = results[str(path)]
        hashes[res.path] = res.file_hash or "huge"
        for reason, where, message in res.drops:
            report.drop(reason, where, message)
        if res.kinds:
            kind, lang = res.kinds[0]
            report.counts["files_used"] += 1
            report.counts[f"files_{lang}" if kind in ("file", "construct") else "files_docs"] += 1
        for kind, _ in res.kinds:
            report.counts[f"units_{kind}"] += 1
        lines.extend(res.lines)
    if not lines:
        raise MensError("no units extracted", ", ".join(map(str, paths)),
                        "check the paths, the languages (--lang) and the skip reasons with --debug")
    report.counts["units"] = len(lines)
    return report.publish(lines, fingerprint_block(hashes, params, packs, code=UNIT_CODE))


# ---------------------------------------------------------------- the stage: `mens corpus extract`, the pipeline's extract

@dataclass
class CorpusOptions(Options):
    """The pipeline config's `corpus:` section."""

    sources: list = option(None, strings, "a list of folders, e.g. [vox, docs]")
    langs: list = option(None, strings, "a list of grammar names, e.g. [rust]")


def _sources_exist(ctx: Context, where: str) -> None:
    """Named when the config is read, not by the extract stage."""
    for source in ctx.section("corpus").get("sources") or []:
        if "{work_dir}" not in str(source) and not ctx.path(source).exists():
            raise MensError(f"corpus source not found: {ctx.path(source)}", f"{where}: corpus.sources",
                            "list existing source and docs folders (relative to the config's folder)")


def _sources(ctx: Context) -> list[Path]:
    sources = ctx.section("corpus").get("sources") or []
    if not sources:
        raise MensError("no corpus sources", "pipeline config: corpus.sources", "list source and docs folders")
    return [ctx.path(s) for s in sources]


def _run(ctx: Context) -> dict:
    rep = extract(_sources(ctx), ctx.work_file("corpus", "units.jsonl"), langs=corpus_langs(ctx))
    return {"units": rep.counts["units"], "files": rep.counts["files_used"]}


def _arguments(p) -> None:
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


def _command(args) -> int:
    from mens.corpus.cli import check_outputs, positive

    default_workers(args.workers)
    positive(args.max_bytes, "--max-bytes", "1000000")
    check_not_input(args.output, *args.paths)
    check_outputs((args.output, "-o"), report="extract")
    report = extract(args.paths, args.output, incremental=args.incremental,
                     docs_training_only=not args.all_docs, langs=args.lang, max_bytes=args.max_bytes,
                     workers=args.workers, follow_external_links=args.follow_external_links)
    say(report.summary())
    return 0


STAGE = Stage(
    "extract", inputs=_sources, outputs=lambda c: [c.work_file("corpus", "units.jsonl")], run=_run,
    params=lambda c: {"langs": corpus_langs(c)}, packs=all_packs, code=CORPUS_CODE,
    section="corpus", options=CorpusOptions, preflight=_sources_exist,
    help="split sources and docs into units (language packs)",
    command=Command("extract", "source files and Markdown docs → units.jsonl", _arguments, _command, source="paths",
                    description="Walk source files of every language pack and Markdown docs; write one unit per "
                    "file, per top-level construct, per docs code block and per docs prose section. Report: "
                    "<output stem>.extract_report.json."))
