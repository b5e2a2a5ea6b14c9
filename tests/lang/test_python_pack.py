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
