"""The Python language pack, over the standard library's `ast` module.

Constructs are the module's top-level statements of interest: functions, async functions, classes,
test functions (`test_*`, or any function in a `Test*` class is covered by that class), module
constants (UPPER_CASE assignments) and imports. A construct's doc is its docstring; file metadata
is the module docstring (its first paragraph becomes `description`).
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tokenize
import warnings

from mens.lang.base import Analysis, Construct, Diagnostic, LanguagePack, Span

_CONST_NAME = re.compile(r"^_?[A-Z][A-Z0-9_]*$")


class PythonPack(LanguagePack):
    name = "python"
    extensions = (".py",)
    fence_tags = ("python", "py", "python3")
    grammar_version = "1"
    taxonomy = ("function", "async_function", "class", "test_function", "test_class", "const", "import")
    comment_prefixes = ("#",)

    def analyze(self, text: str, *, script: bool = False) -> Analysis:
        tree, error = _parse(text)
        if error is not None:
            return Analysis(ok=False, error=error)
        offsets = _LineOffsets(text)
        constructs = [c for node in tree.body if (c := _construct(node, offsets)) is not None]
        return Analysis(ok=True, constructs=constructs)

    def structural_hash(self, text: str) -> str:
        tree, error = _parse(text)
        if error is None:
            # ast.dump without positions ignores whitespace, comments and formatting.
            shape = ast.dump(tree, annotate_fields=False, include_attributes=False)
        else:
            shape = _token_shape(text)
        return hashlib.sha256(shape.encode("utf-8")).hexdigest()[:16]

    def metadata(self, text: str) -> dict:
        tree, error = _parse(text)
        if error is not None:
            return {}
        doc = ast.get_docstring(tree)
        if not doc:
            return {}
        first = doc.strip().split("\n\n")[0]
        return {"description": " ".join(first.split()), "title": first.splitlines()[0].strip()}


def _parse(text: str) -> tuple[ast.Module | None, Diagnostic | None]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are not syntax errors
            return ast.parse(text), None
    except SyntaxError as exc:
        return None, Diagnostic(exc.lineno or 1, max(exc.offset or 1, 1), exc.msg)
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return None, Diagnostic(1, 1, str(exc) or type(exc).__name__)


def _token_shape(text: str) -> str:
    """Tokens without comments or layout, for hashing text that does not parse."""
    parts: list[str] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                tokenize.DEDENT, tokenize.ENDMARKER):
                parts.append(tok.string)
    except (tokenize.TokenError, SyntaxError):
        # Unclosed brackets or strings end the stream early; what was read still counts, and an
        # untokenizable text falls back to its words.
        if not parts:
            return " ".join(text.split())
    return "\x00".join(parts)


class _LineOffsets:
    """Turns ast positions (1-based line, UTF-8 byte column) into character offsets."""

    def __init__(self, text: str):
        # Only \n, \r\n and \r end a line for the tokenizer (str.splitlines also splits on form
        # feeds and U+2028, which may sit inside comments and strings).
        self.lines = [line for line in re.split(r"(?<=\n)|(?<=\r)(?!\n)", text) if line]
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def char_col(self, line: int, byte_col: int) -> int:
        if line - 1 >= len(self.lines):
            return 0
        return len(self.lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", "ignore"))

    def span(self, node: ast.AST) -> Span:
        decorators = getattr(node, "decorator_list", None) or []
        first = decorators[0] if decorators else node
        line, col = first.lineno, self.char_col(first.lineno, first.col_offset)
        if decorators:
            col -= 1  # the `@` sits one character before the decorator expression
        end_line = node.end_lineno or line
        end_col = self.char_col(end_line, node.end_col_offset or 0)
        start = self.starts[line - 1] + col
        end = self.starts[end_line - 1] + end_col
        return Span(line, col + 1, end_line, end_col + 1, start, end)


def _construct(node: ast.stmt, offsets: _LineOffsets) -> Construct | None:
    span = offsets.span(node)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if node.name.startswith("test"):
            kind = "test_function"
        else:
            kind = "async_function" if isinstance(node, ast.AsyncFunctionDef) else "function"
        return Construct(kind, node.name, span, ast.get_docstring(node))
    if isinstance(node, ast.ClassDef):
        kind = "test_class" if node.name.startswith("Test") else "class"
        return Construct(kind, node.name, span, ast.get_docstring(node))
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.asname or a.name for a in node.names]
        return Construct("import", names[0] if len(names) == 1 else None, span)
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and _CONST_NAME.match(targets[0].id):
            return Construct("const", targets[0].id, span)
    return None
