import ast
from pathlib import Path

from mens.lang import get_pack, pack_for_fence, pack_for_path

SOURCE = '''"""Shapes and their areas.

More detail here."""
import math
from typing import Any

MAX_SIDES = 12
_PRIVATE_LIMIT: int = 3
lowercase = 1


@register
@other("é")
def area(shape):  # unicode in a comment: é
    """Area of a shape."""
    return "é" + shape


async def fetch(url):
    return url


class Square:
    """A square."""
    side = 1


class TestSquare:
    def test_side(self):
        assert Square.side == 1


def test_area():
    assert area("x")
'''


def test_constructs_have_kinds_names_docs_and_exact_spans():
    pack = get_pack("python")
    analysis = pack.analyze(SOURCE)
    assert analysis.ok and analysis.error is None
    got = [(c.kind, c.name) for c in analysis.constructs]
    assert got == [("import", "math"), ("import", "Any"), ("const", "MAX_SIDES"), ("const", "_PRIVATE_LIMIT"),
                   ("function", "area"), ("async_function", "fetch"), ("class", "Square"),
                   ("test_class", "TestSquare"), ("test_function", "test_area")]
    by_name = {c.name: c for c in analysis.constructs}
    area = by_name["area"]
    # The span starts at the first decorator and covers the whole body, in characters.
    assert SOURCE[area.span.start:area.span.end].startswith("@register\n@other(\"é\")\ndef area")
    assert SOURCE[area.span.start:area.span.end].endswith('return "é" + shape')
    assert area.doc == "Area of a shape." and by_name["Square"].doc == "A square."
    assert (area.span.start_line, area.span.start_col) == (12, 1)
    for c in analysis.constructs:  # every slice is itself valid Python
        assert pack.check(SOURCE[c.span.start:c.span.end]) is None
    assert set(c.kind for c in analysis.constructs) <= set(pack.taxonomy)


def test_syntax_error_is_a_diagnostic_with_line_and_column():
    pack = get_pack("python")
    err = pack.check("x = 1\ndef f(:\n    pass\n")
    assert err is not None and err.line == 2 and err.col >= 1 and err.message
    assert pack.analyze("x = (1,\n").ok is False
    assert pack.check("a = '\x00'") is None or pack.check("a\x00 = 1") is not None  # never raises


def test_structural_hash_ignores_layout_and_comments_only():
    pack = get_pack("python")
    a = "def f(x):\n    return x + 1\n"
    b = "def f( x ):  # add one\n\n    return x+1\n"
    assert pack.structural_hash(a) == pack.structural_hash(b)
    assert pack.structural_hash(a) != pack.structural_hash(a.replace("+ 1", "+ 2"))
    assert pack.structural_hash("def (:") == pack.structural_hash("def  (:  # c")


def test_metadata_from_module_docstring_and_registry():
    pack = get_pack("python")
    assert pack.metadata(SOURCE)["description"] == "Shapes and their areas."
    assert pack.metadata("x = 1\n") == {} and pack.metadata("def (") == {}
    assert pack_for_path("a/b.py") is pack and pack_for_fence("py") is pack
    assert pack.fingerprint() == get_pack("python").fingerprint() and len(pack.fingerprint()) == 16


def test_spans_survive_crlf_form_feeds_and_line_separators():
    pack = get_pack("python")
    text = 'A = "x\u2028y"\r\n\x0c\r\n# \x0c comment\r\ndef f():\r\n    return 1\r\n'
    f = next(c for c in pack.analyze(text).constructs if c.name == "f")
    assert text[f.span.start:f.span.end] == "def f():\r\n    return 1"


# ---------------------------------------------------------------- viable prefixes

SYNTAX = '''"""Much of Python's syntax, for prefix tests."""
from __future__ import annotations

import re as _re
from dataclasses import dataclass, field

LIMIT: int = 1_000_000
HEX, OCT, BIN, FLT, CPX = 0xFF_FF, 0o17, 0b1010, 1.5e-3, 2j
PATTERN = _re.compile(rb"\\d+" + rb'[a-z]')
TEXT = u"caf\\u00e9 \\N{DEGREE SIGN} \\x41" 'implicit' "concat" f"{LIMIT!r:>{10}}" F'{"q"}'
DOC = """triple
quoted with 'quotes' and \\"escapes\\"
"""


@dataclass(frozen=True)
class Point:
    x: float = 0.0
    y: float = field(default=0.0)

    def __add__(self, other: "Point") -> Point:
        return Point(self.x + other.x, self.y + other.y)


async def fetch(urls: list[str], *, retries=3, **kw) -> dict[str, bytes]:
    async with kw.get("session") as s:
        async for url in s.stream(urls):
            yield await s.get(url, timeout=kw.pop("t", None))


def classify(value, /, scale=1, *args, key=lambda v: -v, **extra):
    match value:
        case {"kind": "point", "x": x, **rest} if x > 0:
            return f"point {x!r:>{scale}} {rest}"
        case [first, *others] | (first, *others):
            return first, others
        case Point(x=0, y=0) | None:
            return "origin"
        case _:
            pass
    if (n := len(args)) > 2 and not extra or value is ...:
        return [i * n for i in range(n) if i % 2 == 0 and i != 3]
    elif n >= 1 or value in {1, 2} and n <= 10:
        return {k: v for k, v in extra.items()}
    else:
        try:
            result = value[1:-1:2] @ scale
        except (TypeError, ValueError) as exc:
            raise RuntimeError("bad") from exc
        else:
            result = ~result << 2 >> 1 | 4 & 5 ^ 6
        finally:
            del extra
    while True:
        global LIMIT
        LIMIT //= 2; LIMIT -= 1
        if LIMIT < 10:
            break
        continue
    assert value is not None, \\
        "a message"
    with open("f") as f, open("g") as g:
        lines = [*f, *g]
    return key(value) if value else sorted(lines, key=lambda s: (len(s), s))[::-1]


def group(tasks):
    try:
        pass
    except* (KeyError, OSError) as eg:
        return eg


def counter():
    count = 0

    def inc(step=1):
        nonlocal count
        count += step
        return count
    return inc
'''


def _real_programs():
    import bisect
    import codeop
    import colorsys
    import inspect

    return [SOURCE, SOURCE.replace("\n", "\r\n"), SYNTAX] + [inspect.getsource(m) for m in (bisect, colorsys, codeop)]


def test_every_prefix_of_a_real_program_is_viable():
    pack = get_pack("python")
    for program in _real_programs():
        assert pack.check(program) is None
        for cut in range(len(program) + 1):
            assert pack.viable_prefix(program[:cut]), repr(program[max(0, cut - 60):cut])


def test_prefixes_ending_inside_a_token_or_a_construct_are_viable():
    pack = get_pack("python")
    for text in ["def f(", "x = [1,", "if a:\n", "if a:\n    ", "class A:\n    ", "class A:\n    def f(self):\n",
                 "if a", "x = 1 +", "def f() -", "lambda", "@", "@dec\n", "try:\n    pass\n", "x = (1,\n  2",
                 "x = 1 + \\", "x = 'ab", "x = 'ab\\", 'x = """ab\ncd', "x = f'abc {y", "x = b'", "x = 'a' f",
                 "x = 1 i", "x = [i fo", "x = for", "return return", "ret", "match x", "match x:\n    cas",
                 "x = 0x", "x = 1e", "x = 1e-", "x = 01", "x = 1_", "x = .", "x = ..", "if a =", "if a !",
                 "(x :", "{1: 2, *", "# a comment", "x = 1  # tail", "if a:\n    x\nel", "try:\n    pass\nexcept*",
                 ""]:
        assert pack.viable_prefix(text), repr(text)


def test_prefixes_that_no_continuation_can_mend_are_not_viable():
    pack = get_pack("python")
    for text in ["def f(:", "x = )", ")", "1 +* 2", "1 +* ", "return return ", "return return 1", "x = (1,]",
                 "x ==== 1", "import 1", "a b c", "f(**)", "lambda: :", "else:", "x = 1\n  y", "if a:\nb ",
                 "class A:\n    def f(self):\n        pass\n  y = 1", "x = 'ab\ny = 1", "x = 'ab\n",
                 "x = 1 foo ", "x = )\n# comment", "def f():\n    return\n  x", "@dec\nx = 1", "x = 1 \\ y",
                 "a\x00b"]:
        assert not pack.viable_prefix(text), repr(text)


def test_a_broken_prefix_stays_broken_whatever_follows():
    """Mutate a real program (drop, insert or swap characters) and judge every prefix after the
    mutation: once one is not viable, no longer one may be (the judgement is consistent)."""
    import random

    pack, rng = get_pack("python"), random.Random(7)
    rejected = 0
    for _ in range(60):
        pos = rng.randrange(len(SYNTAX))
        op = rng.choice("dis")
        if op == "d":
            mutant = SYNTAX[:pos] + SYNTAX[pos + rng.randint(1, 3):]
        elif op == "i":
            mutant = SYNTAX[:pos] + rng.choice(")]}:=,([{.'\"\\ \n\tx1+*#@!") + SYNTAX[pos:]
        else:
            mutant = SYNTAX[:pos] + SYNTAX[pos + 1:pos + 2] + SYNTAX[pos] + SYNTAX[pos + 2:]
        broken_at = None
        for cut in range(pos, min(len(mutant), pos + 60) + 1):
            viable = pack.viable_prefix(mutant[:cut])
            if broken_at is None and not viable:
                broken_at = cut
            assert broken_at is None or not viable, (mutant[pos - 30:broken_at], mutant[broken_at:cut])
        rejected += broken_at is not None
    assert rejected > 20  # most mutants are caught within 60 characters


def test_viable_prefix_answers_are_cached_and_agree_with_the_uncached_check():
    # (its cost per candidate token is measured by bench/serve_grammar.py, not asserted here)
    from mens.lang import python as py

    pack = get_pack("python")
    program = (SYNTAX * 2)[:2200]
    for cut in range(1950, 2150, 10):  # ~2 KB prefixes ending all over the place
        assert pack.viable_prefix(program[:cut]) == py._viable.__wrapped__(program[:cut])
    assert pack.viable_prefix(program[:2000]) is pack.viable_prefix(program[:2000])  # cached answer

# ---------------------------------------------------------------- one parse per text

REAL_SOURCES = sorted((Path(__file__).resolve().parents[2] / "src" / "mens" / "corpus").glob("*.py"))


def test_construct_hash_is_the_hash_of_the_constructs_slice():
    # Real files of this repository: extract takes a construct's hash from the file's tree, which
    # must be what validate gets when it parses the construct alone.
    pack = get_pack("python")
    checked = 0
    for path in REAL_SOURCES + [None]:
        text = SOURCE if path is None else path.read_text(encoding="utf-8")
        for c in pack.analyze(text).constructs:
            assert pack.construct_hash(text, c) == pack.structural_hash(text[c.span.start:c.span.end]), (path, c.name)
            checked += 1
    assert checked > 100


def test_extracting_a_file_parses_it_once(monkeypatch):
    # metadata(), analyze(), the file's hash and each construct's hash used to parse the text
    # again: 3 + constructs parses of every file, most of extract's time on a real package.
    from mens.corpus.extract import source_units

    calls = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: calls.append(1) or real_parse(*a, **k))
    text = (REAL_SOURCES[0].parent / "validate.py").read_text(encoding="utf-8") + "\n# a fresh text\n"
    units, drops = source_units("validate.py", text, get_pack("python"), "")
    assert not drops and len(units) > 5
    assert len(calls) == 1


OVERLOADED = '''import typing as t
from typing import overload


@t.overload
def first(value: str) -> str: ...


@t.overload
def first(value: list) -> object: ...


def first(value):
    """The first item of a value."""
    return value[0]


@overload
def lonely(x: int) -> int: ...


def other():
    return 1
'''


def test_overload_signatures_are_part_of_their_function():
    # As in jinja2's filters and click's decorators: each `@t.overload` stub was a construct of
    # its own, so "Implement the function `first`" was answered by `def first(...) -> str: ...`.
    pack = get_pack("python")
    constructs = [c for c in pack.analyze(OVERLOADED).constructs if c.kind != "import"]
    assert [(c.kind, c.name) for c in constructs] == [("function", "first"), ("function", "lonely"),
                                                      ("function", "other")]
    first = constructs[0]
    code = OVERLOADED[first.span.start:first.span.end]
    assert code.startswith("@t.overload\ndef first(value: str)") and code.endswith("return value[0]")
    assert first.span.start_line == 5 and first.doc == "The first item of a value."
    assert pack.construct_hash(OVERLOADED, first) == pack.structural_hash(code)
    # An overload with no implementation after it stays a construct of its own.
    assert OVERLOADED[constructs[1].span.start:constructs[1].span.end].startswith("@overload\ndef lonely")


def test_type_variables_are_not_constants():
    # rich, click and jinja2 each define `T = TypeVar("T")`, `V = t.TypeVar("V")`: as constants
    # they made "Give me Python code for a constant called `T`" over and over.
    text = ('import typing as t\nfrom typing import TypeVar, ParamSpec, NewType\n\nT = TypeVar("T")\n'
            'V = t.TypeVar("V", bound=int)\nP = ParamSpec("P")\nUSER_ID = NewType("USER_ID", int)\n'
            'MAX = 3\nDEFAULT = t.cast(int, 4)\n')
    kinds = [(c.kind, c.name) for c in get_pack("python").analyze(text).constructs if c.kind != "import"]
    assert kinds == [("const", "MAX"), ("const", "DEFAULT")]


def test_a_construct_starts_at_the_at_sign_of_its_first_decorator():
    # The span began one character before the decorator's expression: `@ functools.cache` lost
    # its `@` (the slice ` functools.cache\ndef f()…` does not parse), so did `@(lambda g: g)`.
    text = ("import functools\n\n@ functools.cache\ndef f():\n    return 1\n\n@(lambda g: g)\ndef h():\n"
            "    return 2\n\n@(\n    functools.cache\n)\n@functools.wraps(h)\ndef k():\n    return 3\n")
    pack = get_pack("python")
    named = [c for c in pack.analyze(text).constructs if c.kind != "import"]
    slices = [text[c.span.start:c.span.end] for c in named]
    assert [s.split("\n")[0] for s in slices] == ["@ functools.cache", "@(lambda g: g)", "@("]
    assert [(c.span.start_line, c.span.start_col) for c in named] == [(3, 1), (7, 1), (11, 1)]
    assert all(pack.check(s) is None for s in slices)


def test_a_test_prefixed_function_that_returns_a_value_is_not_a_test():
    # jinja2/tests.py defines the Jinja tests `test_odd`, `test_false` …: predicates, paired as
    # "Write a Python test `test_odd`". A pytest test returns nothing.
    text = ('def test_odd(value: int) -> bool:\n    """Return true if the variable is odd."""\n'
            '    return value % 2 == 1\n\n\n'
            'def test_odd_numbers():\n    def check(n):\n        return n % 2\n\n    assert check(3)\n    return\n\n\n'
            'async def test_fetch():\n    assert await fetch() is None\n')
    kinds = [(c.kind, c.name) for c in get_pack("python").analyze(text).constructs]
    assert kinds == [("function", "test_odd"), ("test_function", "test_odd_numbers"), ("test_function", "test_fetch")]
