"""The Python language pack, over the standard library's `ast` module.

Constructs are the module's top-level statements of interest: functions, async functions, classes,
test functions (`test_*` that return nothing; any function in a `Test*` class is covered by that
class), module constants (UPPER_CASE assignments) and imports. A function's `@overload`
signatures are part of its construct. A construct's doc is its docstring; file metadata is the
module docstring (its first paragraph becomes `description`).
"""

from __future__ import annotations

import ast
import codeop
import functools
import hashlib
import io
import keyword
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
        return Analysis(ok=True, constructs=_constructs(tree.body, _LineOffsets(text)))

    def structural_hash(self, text: str) -> str:
        shapes = _statement_shapes(text)
        shape = "\n".join(shapes) if shapes is not None else _token_shape(text)
        return _digest(shape)

    def has_code(self, text: str) -> bool:
        # A module that is only a docstring (a package's `__init__.py`) would make the pair
        # "Write Python code for this: <its docstring>" answered by the docstring.
        tree, error = _parse(text)
        if error is not None:
            return True  # extract reports the syntax error
        return any(not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                        and isinstance(node.value.value, str)) for node in tree.body)

    def check(self, text: str, *, script: bool = False) -> Diagnostic | None:
        return _parse(text)[1]  # what analyze() would say, without building its constructs

    def construct_hash(self, text: str, construct: Construct) -> str:
        # The statement's shape from the tree of the whole text (parsed once, cached), which is
        # what parsing its slice alone would give: a top-level statement parses the same anywhere.
        shapes, spans = _statement_shapes(text), _statement_spans(text)
        key = (construct.span.start, construct.span.end)
        index = spans.index(key) if shapes is not None and key in spans else None
        return _digest(shapes[index]) if index is not None else super().construct_hash(text, construct)

    def viable_prefix(self, text: str) -> bool:
        """Could `text` still grow into a module that parses? True for every prefix of a valid
        program, also one that ends inside a word, string, number or operator; False once an
        error stands that no continuation can undo (`def f(:`, `x = )`, an unmatched `)`, a bad
        dedent, a string that a newline already cut off)."""
        return _viable(text)

    def metadata(self, text: str) -> dict:
        tree, error = _parse(text)
        if error is not None:
            return {}
        doc = ast.get_docstring(tree)
        if not doc:
            return {}
        first = doc.strip().split("\n\n")[0]
        return {"description": " ".join(first.split()), "title": first.splitlines()[0].strip()}


def _digest(shape: str) -> str:
    return hashlib.sha256(shape.encode("utf-8")).hexdigest()[:16]


@functools.lru_cache(maxsize=8)
def _parse(text: str) -> tuple[ast.Module | None, Diagnostic | None]:
    # Cached, because extract asks metadata(), analyze() and structural_hash() of one file and
    # validate asks check() then structural_hash() of one response: one parse each, not three.
    # Callers must not modify the tree.
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are not syntax errors
            return ast.parse(text), None
    except SyntaxError as exc:
        return None, Diagnostic(exc.lineno or 1, max(exc.offset or 1, 1), exc.msg)
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, absurd nesting
        return None, Diagnostic(1, 1, str(exc) or type(exc).__name__)


@functools.lru_cache(maxsize=8)
def _statement_shapes(text: str) -> tuple[str, ...] | None:
    """The shape of each top-level statement, or None when `text` does not parse. A shape is
    ast.dump without positions, so it ignores whitespace, comments and formatting; a text's
    structural hash is over its statements' shapes (joined by newlines, which no dump holds), so
    a construct's hash comes from its own statement's shape."""
    tree, error = _parse(text)
    if error is not None:
        return None
    return tuple(ast.dump(node, annotate_fields=False, include_attributes=False) for node in tree.body)


@functools.lru_cache(maxsize=8)
def _statement_spans(text: str) -> tuple[tuple[int, int], ...]:
    """The (start, end) character span of each top-level statement (none when `text` does not
    parse); only construct_hash needs them, so validate's hashing does not pay for them."""
    tree, error = _parse(text)
    if error is not None:
        return ()
    offsets = _LineOffsets(text)
    return tuple((span.start, span.end) for span in map(offsets.span, tree.body))


# ------------------------------------------------------------------ viable prefixes
#
# CPython's parser says "incomplete input" (the flag codeop uses for the REPL) when it failed only
# because it wanted tokens past the end of the source: an open bracket, a block header waiting for
# its body, a triple-quoted string. Around that flag:
# - the last line is continued with a backslash, because the implicit newline at EOF would end a
#   line that is merely unfinished (`if a`, `x = 1 +`, `def f() -`);
# - a string open at the end is replaced by an empty one and the text judged again: the tokenizer
#   raises about it before the parser has checked that a string may stand there;
# - the last token may be half typed, so a failing text is judged again with that token grown:
#   a word into a keyword (`i` → `if`), a keyword into a name (`for` → `format`), a word into a
#   string prefix (`f` → `f''`), a number into one with digits (`0x`, `1e-`, `01` → `01.`), an
#   operator into a longer one (`=` → `==`, `-` → `->`, `.` → `...`).
# Every rewrite only appends to the text (or empties a string at its end), so an accepted prefix
# really has a continuation that the parser takes.

_INCOMPLETE = ast.PyCF_ONLY_AST | getattr(codeop, "PyCF_ALLOW_INCOMPLETE_INPUT", 0x4000)
_KEYWORDS = tuple(keyword.kwlist) + tuple(keyword.softkwlist)
_STRING_PREFIXES = frozenset({"r", "u", "f", "b", "br", "rb", "fr", "rf"})
_LAST_WORD = re.compile(r"(?<!\w)[^\W\d]\w*\Z")
_GLUED_WORD = re.compile(r"(?<=\d)[a-z]+\Z")
_LAST_NUMBER = re.compile(r"(?<![\w.])\.?\d[\w.]*(?:[eE][+-])?\Z")
_LONGER_OP = {"!": ("=",), "=": ("=",), ":": ("=",), "-": (">",), "*": ("*",), ".": ("..", "0")}
_UNTERMINATED = re.compile(r"unterminated (?:triple-quoted )?(?:f-)?string literal \(detected at line (\d+)\)")
_STRING_START = re.compile(r"[rRuUfFbB]{0,2}('''|\"\"\"|'|\")")
_LINE_BREAK = re.compile(r"\r\n?|\n")


@functools.lru_cache(maxsize=512)
def _viable(text: str) -> bool:
    # Cached: constrained decoding asks about the same text more than once (the keyword fallback
    # in mens.grammar re-asks about the code before a word).
    return _judge(text, grow_last_token=True)


def _judge(text: str, grow_last_token: bool, depth: int = 0) -> bool:
    backslashes = len(text) - len(text.rstrip("\\"))
    source = text + ("\n" if backslashes % 2 else "\\\n")  # an odd backslash already continues
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "<prefix>", "exec", _INCOMPLETE)
        return True
    except SyntaxError as exc:
        err = exc
    except (ValueError, RecursionError, MemoryError):  # null bytes, absurd nesting
        return False
    closed = _close_open_string(text, source, err)
    if closed is not None:
        return bool(closed) and depth < 3 and _judge(closed, grow_last_token, depth + 1)
    if err.msg == "incomplete input":
        return True
    return grow_last_token and any(_judge(t, False, depth + 1) for t in _grown(text))


def _close_open_string(text: str, source: str, err: SyntaxError) -> str | bool | None:
    """`text` with the string left open at its end emptied and closed; False when a string was
    cut off by a newline before the end (nothing appended can close it); None when the error is
    not about a string."""
    unterminated = _UNTERMINATED.match(err.msg or "")
    if unterminated is None and err.msg != "incomplete input":
        return None
    if unterminated is not None and int(unterminated.group(1)) != len(_LINE_BREAK.findall(source)) + 1:
        return False
    # The error points at the string's first character (1-based line, character offset).
    starts = _LineOffsets(text).starts
    if not err.lineno or err.lineno > len(starts) - 1:
        return None
    start = starts[err.lineno - 1] + (err.offset or 1) - 1
    m = _STRING_START.match(text, start)
    if m is None or (unterminated is None and m.group(1) in text[m.end():]):
        return None  # "incomplete input" at a complete string: nothing to close
    return text[:m.end()] + m.group(1)


def _grown(text: str) -> list[str]:
    """Texts in which the half-typed last token of `text` is grown into one the parser may want."""
    out: list[str] = []
    word = _LAST_WORD.search(text)
    if word:
        head, w = text[:word.start()], word.group()
        out += [head + k for k in _KEYWORDS if k.startswith(w) and k != w]
        if keyword.iskeyword(w):
            out.append(text + "_")  # no keyword has an underscore: now it is a name
        if w.lower() in _STRING_PREFIXES:
            out.append(text + "''")
    if _LAST_NUMBER.search(text):
        out += [text + "0", text + "."]
        glued = _GLUED_WORD.search(text)  # `0a` on its way to `0and`: a keyword may touch a number
        if glued:
            out += [text[:glued.start()] + k for k in keyword.kwlist if k.startswith(glued.group())]
    if text.endswith(".."):
        out.append(text + ".")
    elif text[-1:] in _LONGER_OP:
        out += [text + more for more in _LONGER_OP[text[-1]]]
    return out


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

    def _at_sign(self, line: int, col: int) -> tuple[int, int]:
        """Where the `@` of a decorator whose expression starts at (line, col) is: not always just
        before it (`@ cache`, `@(lambda f: f)`, or `@(` with the expression on the next line)."""
        while line >= 1:
            at = self.lines[line - 1].rfind("@", 0, col)
            if at >= 0:
                return line, at
            line -= 1
            col = len(self.lines[line - 1]) if line >= 1 else 0
        return 1, 0

    def span(self, node: ast.AST) -> Span:
        decorators = getattr(node, "decorator_list", None) or []
        first = decorators[0] if decorators else node
        line, col = first.lineno, self.char_col(first.lineno, first.col_offset)
        if decorators:
            line, col = self._at_sign(line, col)
        end_line = node.end_lineno or line
        end_col = self.char_col(end_line, node.end_col_offset or 0)
        start = self.starts[line - 1] + col
        end = self.starts[end_line - 1] + end_col
        return Span(line, col + 1, end_line, end_col + 1, start, end)


def _constructs(body: list[ast.stmt], offsets: _LineOffsets) -> list[Construct]:
    """The constructs of a module body. The `@overload` signatures of a function are part of its
    construct (which then starts at the first of them): alone, each would be a pair asking for
    the function and answered with a `...` stub, beside the pair of the real one."""
    out: list[Construct] = []
    pending: list[ast.stmt] = []  # @overload signatures waiting for their implementation
    for node in body:
        if pending and getattr(node, "name", None) != pending[0].name:
            out += [c for o in pending if (c := _construct(o, offsets)) is not None]  # no implementation
            pending = []
        if _is_overload(node):
            pending.append(node)
            continue
        c = _construct(node, offsets)
        if c is not None and pending:
            first = offsets.span(pending[0])
            span = Span(first.start_line, first.start_col, c.span.end_line, c.span.end_col, first.start, c.span.end)
            doc = c.doc or next((d for o in pending if (d := ast.get_docstring(o))), None)
            c = Construct(c.kind, c.name, span, doc, c.tags)
        pending = []
        if c is not None:
            out.append(c)
    return out + [c for o in pending if (c := _construct(o, offsets)) is not None]


def _returns_value(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether `func` itself (not a function nested in it) returns a value. A test returns
    nothing (pytest warns when one does); `test_odd(value)` returning a bool is a predicate, like
    the Jinja tests of jinja2/tests.py, which were paired as "Write a Python test `test_odd`"."""
    todo = list(func.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _is_type_variable(value: ast.expr | None) -> bool:
    """`TypeVar("T")`, `t.ParamSpec("P")` …: `T` is upper case but a type parameter, not a
    constant (it made the pair "Write a Python constant named `T`", in nearly every package)."""
    func = value.func if isinstance(value, ast.Call) else None
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return name in ("TypeVar", "ParamSpec", "TypeVarTuple", "NewType")


def _is_overload(node: ast.stmt) -> bool:
    """A function decorated `@overload`, `@typing.overload` or `@t.overload`."""
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        (d.id if isinstance(d, ast.Name) else d.attr if isinstance(d, ast.Attribute) else None) == "overload"
        for d in node.decorator_list)


def _construct(node: ast.stmt, offsets: _LineOffsets) -> Construct | None:
    span = offsets.span(node)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if node.name.startswith("test") and not _returns_value(node):
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
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and _CONST_NAME.match(targets[0].id) \
                and not _is_type_variable(node.value):
            return Construct("const", targets[0].id, span)
    return None
