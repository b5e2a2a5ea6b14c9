"""The language-pack interface: everything the corpus, eval and bench stages may know about a
language. Nothing outside `mens.lang.<pack>` knows Vox (or Python) specifics."""

from __future__ import annotations

import hashlib
import inspect
import re
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Span:
    """A region of source: 1-based lines and columns, 0-based character offsets [start, end)."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int
    start: int
    end: int


@dataclass(frozen=True)
class Diagnostic:
    """An error or warning at a 1-based line:column."""

    line: int
    col: int
    message: str

    def __str__(self) -> str:
        return f"{self.line}:{self.col}: {self.message}"


@dataclass(frozen=True)
class Construct:
    """A top-level construct: its taxonomy kind, its name (if it has one), where it is, the doc
    comment just above it, and extra tags (e.g. `ai_function` on an `@ai fn`)."""

    kind: str
    name: str | None
    span: Span
    doc: str | None = None
    tags: tuple[str, ...] = ()


@dataclass
class Analysis:
    """What a pack says about one source text."""

    ok: bool
    error: Diagnostic | None = None
    constructs: list[Construct] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)


class LanguagePack(ABC):
    """A language's parser behind one small interface. Subclasses set the class attributes and
    implement `analyze` and `structural_hash`."""

    name: str = ""
    extensions: tuple[str, ...] = ()
    fence_tags: tuple[str, ...] = ()      # Markdown fence info strings, e.g. ("vox",)
    grammar_version: str = "1"            # bump by hand on a grammar change; fingerprint() also hashes the source
    taxonomy: tuple[str, ...] = ()        # construct kinds, the denominator of coverage
    comment_prefixes: tuple[str, ...] = ()  # line-comment starters, for anti-stub and docs

    @abstractmethod
    def analyze(self, text: str, *, script: bool = False) -> Analysis:
        """Parse `text`; never raises on bad input (the error is in the result)."""

    def check(self, text: str, *, script: bool = False) -> Diagnostic | None:
        """The first syntax error, or None when the text parses."""
        return self.analyze(text, script=script).error

    def check_and_hash(self, text: str, *, script: bool = False) -> tuple[Diagnostic | None, str | None]:
        """(first syntax error, None), or (None, structural hash) when the text parses: what corpus
        validate needs of every response. Packs that can do both from one lexing override this."""
        error = self.check(text, script=script)
        return (error, None) if error is not None else (None, self.structural_hash(text))

    def metadata(self, text: str) -> dict:
        """File-level metadata kept in comments (frontmatter keys, a training prompt, a skip
        marker). Keys with a shared meaning: `skip` (bool: do not compile-check / extract),
        `training_prompt` (str), `description`, `title`, `status` (`golden`, `deprecated` …),
        `training_eligible` (bool). Packs without such a convention return {}."""
        return {}

    def has_code(self, text: str) -> bool:
        """Whether `text` holds any code: a line that is neither blank nor a line comment. A file
        without code is no training example (extract drops it as `empty`). Packs whose docs live
        in the code (Python's docstrings) override this."""
        prefixes = tuple(self.comment_prefixes)
        return any(line.strip() and not (prefixes and line.lstrip().startswith(prefixes))
                   for line in text.splitlines())

    def viable_prefix(self, text: str) -> bool:
        """Could `text` still grow into a source that parses? True when it parses, or when the
        only error is that the input ended early. Used by constrained decoding."""
        err = self.check(text)
        return err is None or "end of input" in err.message

    def free_text_at_end(self, text: str) -> str | None:
        """The unterminated string literal or the line comment `text` ends in (quote or comment
        marker included), or None: text where anything may be written. Grammar mode keeps such
        text on one line and never steers the model into it, so a stray quote or `//` cannot
        swallow the rest of the code. The default knows of none."""
        return None

    def closing_suffix(self, text: str) -> str | None:
        """A short text that makes the viable prefix `text` parse (closing what is open), or None
        when the pack knows none from here. Grammar mode uses it to finish code within a token
        budget. The default knows none; packs with brackets override it."""
        return None

    @abstractmethod
    def structural_hash(self, text: str) -> str:
        """A hash insensitive to whitespace and comments, for dedupe."""

    def construct_hash(self, text: str, construct: Construct) -> str:
        """The structural hash of one construct of `text` (as `analyze(text)` found it): equal to
        `structural_hash` of its slice. Packs that can hash it from the tree they already built
        override this, so extract does not parse every construct a second time."""
        return self.structural_hash(text[construct.span.start:construct.span.end])

    def fingerprint(self) -> str:
        """Changes whenever the pack's grammar could have: its version plus its own source code."""
        h = hashlib.sha256(f"{self.name}:{self.grammar_version}".encode())
        module = sys.modules.get(type(self).__module__)
        files: list[Path] = []
        if module is not None and getattr(module, "__file__", None):
            path = Path(module.__file__)
            # A pack that is a package of its own (lang/vox/) hashes every file in it.
            files = sorted(path.parent.glob("*.py")) if path.parent.name == self.name else [path]
        for f in files:
            h.update(f.read_bytes())
        if not files:
            h.update(inspect.getsource(type(self)).encode())
        return h.hexdigest()[:16]


_FENCE = re.compile(r"^(`{3,}|~{3,})[ \t]*([\w.+#-]*)[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)


def extract_code(text: str) -> tuple[str, str | None]:
    """The code in a response: the first fenced block (with its info string), else the whole text."""
    m = _FENCE.search(text)
    if m:
        return m.group(3), (m.group(2) or None)
    return text, None


def has_fence(text: str) -> bool:
    return _FENCE.search(text) is not None
