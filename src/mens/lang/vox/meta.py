"""Metadata that Vox sources keep in comments: the leading `// ---` frontmatter block, the
`// @training_prompt:` line, the first-line `// vox:skip` marker, and `///`/`//` doc comments
just above a declaration."""

from __future__ import annotations

import re

_KEY = re.compile(r"^\s*(?://|#)\s*([A-Za-z_][\w-]*)\s*:\s*(.*?)\s*$")
_PROMPT = re.compile(r"^\s*//\s*@training_prompt\s*:\s*(.*?)\s*$", re.M)
_NOT_DOC = re.compile(r"^\s*//\s*(?:@training_prompt\b|ANCHOR(?:_END)?\b|vox:skip\b|---\s*$)")
_LIST_KEYS = frozenset(("constructs", "tags"))


def _is_delim(line: str) -> bool:
    return line.strip() in ("// ---", "//---", "# ---")


def frontmatter_range(lines: list[str]) -> tuple[int, int] | None:
    """0-based [first, last] line indexes of the leading frontmatter block, if any. It may follow
    a `// vox:skip` line and blank lines."""
    i = 0
    while i < len(lines) and (not lines[i].strip() or "vox:skip" in lines[i]):
        i += 1
    if i >= len(lines) or not _is_delim(lines[i]):
        return None
    for j in range(i + 1, len(lines)):
        if _is_delim(lines[j]):
            return i, j
        if not lines[j].lstrip().startswith(("//", "#")):
            return None
    return None


def _value(raw: str, key: str):
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        raw = raw[1:-1]
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    if key in _LIST_KEYS:
        raw = raw.strip("[]")
        return [x.strip().strip("\"'") for x in raw.split(",") if x.strip()]
    return raw


def metadata(text: str) -> dict:
    lines = text.split("\n", 200)[:200] if len(text) > 20000 else text.split("\n")
    meta: dict = {}
    first = next((ln for ln in lines if ln.strip()), "")
    if re.match(r"^\s*//\s*vox:skip\b", first):
        meta["skip"] = True
    rng = frontmatter_range(lines)
    if rng:
        for line in lines[rng[0] + 1:rng[1]]:
            m = _KEY.match(line)
            if m:
                key = m.group(1)
                meta[key] = _value(m.group(2), key)
    prompts = _PROMPT.findall(text)
    if prompts:
        meta["training_prompt"] = prompts[0]
        if len(prompts) > 1:
            meta["training_prompts"] = prompts
    return meta


class DocFinder:
    """Doc comments above declarations: the run of `//` lines directly above line N, without
    frontmatter, `@training_prompt`, ANCHOR or vox:skip lines."""

    def __init__(self, text: str):
        self.lines = text.split("\n")
        rng = frontmatter_range(self.lines)
        self.fm_end = rng[1] if rng else -1

    def doc_above(self, line: int) -> str | None:
        """`line` is the 1-based first line of a declaration."""
        out: list[str] = []
        j = line - 2
        while j > self.fm_end and j >= 0:
            raw = self.lines[j].strip()
            if not raw.startswith("//"):
                break
            if not _NOT_DOC.match(raw):
                out.append(raw[3:] if raw.startswith("///") else raw[2:])
            j -= 1
        if not out:
            return None
        out.reverse()
        return "\n".join(s[1:] if s.startswith(" ") else s for s in out)
