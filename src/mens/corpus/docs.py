"""Markdown docs → units: fenced code blocks in a pack's language, and prose sections.

    doc_units(path, text, packs, *, training_only=True, file_hash="") -> (units, drops)

A page contributes only when its YAML frontmatter says `training_eligible: true` (unless
`training_only=False`). Each fenced block whose info string is a pack's fence tag becomes a code
unit (context: the nearest heading and the paragraph before the block) unless the pack's
`metadata()` marks it `skip`; the block must parse (module mode, else script mode). Each section
with enough prose becomes a prose unit.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from mens.corpus.units import Unit
from mens.lang import Diagnostic, LanguagePack, pack_for_fence

MIN_PROSE_WORDS = 20

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^\s`{]*)")
# A line that starts a Markdown list item, table row or quote: its line break is part of the text.
_BLOCK_LINE = re.compile(r"^\s*(?:[-*+][ \t]|\d+[.)][ \t]|\||>)")


@dataclass
class CodeBlock:
    tag: str
    code: str
    line: int          # 1-based line of the first code line in the page
    paragraph: str     # the prose paragraph just before the block, in its section


@dataclass
class Section:
    heading: str
    level: int
    line: int
    prose: list[str] = field(default_factory=list)   # paragraphs
    blocks: list[CodeBlock] = field(default_factory=list)


def split_frontmatter(text: str) -> tuple[dict[str, Any], str, int]:
    """(frontmatter, body, number of lines before the body). Raises ValueError on bad YAML."""
    if not text.startswith("---"):
        return {}, text, 0
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text, 0
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            meta = yaml.safe_load("\n".join(lines[1:i])) or {}
            if not isinstance(meta, dict):
                raise ValueError("frontmatter is not a mapping")
            # Dates and other YAML types become strings, so units stay plain JSON.
            meta = json.loads(json.dumps(meta, default=str))
            return meta, "\n".join(lines[i + 1:]), i + 1
    raise ValueError("frontmatter has no closing '---'")


def join_paragraph(lines: list[str]) -> str:
    """A paragraph's lines as one text: wrapped prose is joined with spaces, but each list item,
    table row and quoted line keeps its own line (joined, a table became `| a | b | |---|---|`).
    A wrapped line of a list item is joined to its item."""
    out: list[str] = []
    for line in lines:
        if _BLOCK_LINE.match(line):
            out.append(line.rstrip())
        elif out:
            out[-1] += " " + line.strip()
        else:
            out.append(line.strip())
    return "\n".join(out).strip()


def sections(body: str, first_line: int = 1) -> list[Section]:
    """Split a Markdown body into heading sections with their paragraphs and fenced blocks."""
    current = Section(heading="", level=0, line=first_line)
    out = [current]
    para: list[str] = []
    last_para = ""
    lines = body.split("\n")
    i = 0

    def end_paragraph() -> None:
        nonlocal para, last_para
        if para:
            last_para = join_paragraph(para)
            current.prose.append(last_para)
            para = []

    while i < len(lines):
        line = lines[i]
        fence = _FENCE_OPEN.match(line)
        if fence:
            end_paragraph()
            marker, tag = fence.group(1), fence.group(2).lower()
            close = re.compile(r"^ {0,3}" + re.escape(marker[0]) + "{" + str(len(marker)) + r",}\s*$")
            j = i + 1
            while j < len(lines) and not close.match(lines[j]):
                j += 1
            code = "\n".join(lines[i + 1:j])
            current.blocks.append(CodeBlock(tag, code + "\n" if code else "", first_line + i + 1, last_para))
            i = j + 1
            continue
        heading = _HEADING.match(line)
        if heading:
            end_paragraph()
            current = Section(heading.group(2), len(heading.group(1)), first_line + i)
            out.append(current)
            last_para = ""
        elif line.strip():
            para.append(line)
        else:
            end_paragraph()
        i += 1
    end_paragraph()
    return out


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes", "1"))


def _page_error(path: str, block: CodeBlock, error: Diagnostic) -> tuple[str, str]:
    """(where, message) of a block's syntax error at its line in the page, as for a source
    file: the parser counts from the block's first line, the user reads the page."""
    line = block.line + error.line - 1
    return f"{path}:{line}", str(Diagnostic(line, error.col, error.message))


def doc_units(path: str, text: str, packs: list[LanguagePack], *, training_only: bool = True,
              file_hash: str = "") -> tuple[list[Unit], list[tuple[str, str, str]]]:
    """Units of one Markdown page, and drops as (reason, where, message)."""
    try:
        meta, body, offset = split_frontmatter(text)
    except (ValueError, yaml.YAMLError) as exc:
        return [], [("bad_frontmatter", f"{path}:1", str(exc).splitlines()[0])]
    except RecursionError:  # `[` × 100,000: PyYAML's composer recurses per level
        return [], [("bad_frontmatter", f"{path}:1", "frontmatter nested too deeply")]
    if training_only and not _truthy(meta.get("training_eligible")):
        return [], [("not_training_eligible", f"{path}:1", "docs page without training_eligible: true")]
    if str(meta.get("status", "")).lower() == "deprecated":
        return [], [("deprecated", f"{path}:1", "status: deprecated")]
    units: list[Unit] = []
    drops: list[tuple[str, str, str]] = []
    page_lang = meta.get("lang")
    title = str(meta.get("title") or "")
    for sec in sections(body, offset + 1):
        heading = sec.heading or title
        for block in sec.blocks:
            pack = pack_for_fence(block.tag, packs)
            if pack is None or not block.code.strip():
                continue
            where = f"{path}:{block.line}"
            if pack.metadata(block.code).get("skip"):
                drops.append(("skip_marker", where, "code block marked skip"))
                continue
            script = False
            analysis = pack.analyze(block.code)
            if not analysis.ok:
                script_analysis = pack.analyze(block.code, script=True)
                if script_analysis.ok:
                    analysis, script = script_analysis, True
            if not analysis.ok:
                drops.append(("doc_parse_error", *_page_error(path, block, analysis.error)))
                continue
            page_lang = page_lang or pack.name
            kinds = [c.kind for c in analysis.constructs]
            named = [c for c in analysis.constructs if c.kind != "import"]
            units.append(Unit(
                kind="doc_code", lang=pack.name, source=where, path=path,
                span=[block.line, 1, block.line + block.code.count("\n"), 1],
                construct=named[0].kind if named else "snippet",
                name=named[0].name if named else None, code=block.code,
                doc_comment=named[0].doc if named else None,
                ast_hash=pack.structural_hash(block.code), frontmatter=meta,
                heading=heading, context=block.paragraph, constructs=kinds,
                script=script, file_hash=file_hash))
        prose = "\n\n".join(sec.prose).strip()
        if heading and len(prose.split()) >= MIN_PROSE_WORDS:
            units.append(Unit(
                kind="doc_prose", lang=page_lang, source=f"{path}:{sec.line}", path=path,
                span=[sec.line, 1, sec.line, 1], construct="prose", name=None, code=prose,
                frontmatter=meta, heading=heading, context=title, file_hash=file_hash))
    # A prose unit found before the first code block of the page takes the page's language.
    for unit in units:
        if unit.lang is None:
            unit.lang = page_lang
    return units, drops
