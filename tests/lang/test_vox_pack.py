"""The Vox pack behind the LanguagePack interface: metadata, hashes, viable prefixes, docs,
and hypothesis properties (never crashes, linear time)."""

import json
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mens.lang import get_pack, pack_for_fence, pack_for_path
from mens.lang.vox import VoxPack, VoxParseError, parse
from mens.lang.vox.lexer import Lexed

REPO = Path(__file__).resolve().parents[2]
PACK = VoxPack()
EXAMPLES = sorted((REPO / "examples" / "vox").rglob("*.vox"))


def test_registered_by_name_extension_and_fence():
    assert isinstance(get_pack("vox"), VoxPack)
    assert isinstance(pack_for_path("x/y.vox"), VoxPack)
    assert isinstance(pack_for_fence("vox"), VoxPack)
    assert PACK.taxonomy[0] == "function" and len(PACK.taxonomy) == 28
    assert PACK.comment_prefixes == ("//", "#") and len(PACK.fingerprint()) == 16


def test_metadata_frontmatter_prompt_and_skip():
    text = ("// vox:skip\n// ---\n// title: Notes\n// constructs: table, query\n"
            "// training_eligible: false\n// status: golden\n// ---\n"
            "// @training_prompt: Write a notes table.\n@table type N { a: str }\n")
    meta = PACK.metadata(text)
    assert meta == {"skip": True, "title": "Notes", "constructs": ["table", "query"],
                    "training_eligible": False, "status": "golden",
                    "training_prompt": "Write a notes table."}
    assert PACK.metadata("fn f() {}") == {}
    assert PACK.metadata((REPO / "examples/vox/app/todo_app.vox").read_text())["status"] == "golden"


def test_doc_comments():
    text = ("// ---\n// title: t\n// ---\n\n/// Adds.\n// @training_prompt: x\n/// Two lines.\n"
            "@pure\nfn add(a: int) to int { return a }\n\n// plain comment\nfn g() {}\n\nfn h() {}\n")
    docs = [(c.name, c.doc) for c in PACK.analyze(text).constructs]
    assert docs == [("add", "Adds.\nTwo lines."), ("g", "plain comment"), ("h", None)]


def test_span_starts_at_first_decorator_and_ends_at_brace():
    text = "\n\n@endpoint(kind: query)\n@auth\nfn q() to int {\n    return 1\n}\n\n"
    c = PACK.analyze(text).constructs[0]
    assert (c.kind, c.span.start_line, c.span.start_col, c.span.end_line, c.span.end_col) == \
        ("query", 3, 1, 7, 2)
    assert text[c.span.start:c.span.end] == text.strip()


def test_constructs_before_an_error_are_kept():
    a = PACK.analyze("fn a() {}\ntype T { x: int }\nfn broken( {\n")
    assert not a.ok and [c.name for c in a.constructs] == ["a", "T"]


def test_structural_hash_ignores_whitespace_and_comments():
    a = "fn f(x: int) to int {\n    return x + 1\n}\n"
    b = "// a comment\nfn f(x: int)   to int { return x + 1 }   # trailing\n"
    c = "fn f(x: int) to int { return x + 2 }"
    assert PACK.structural_hash(a) == PACK.structural_hash(b) != PACK.structural_hash(c)
    assert len(PACK.structural_hash("fn (((")) == 64          # works on invalid text too


def test_viable_prefix():
    src = (REPO / "examples/vox/app/todo_app.vox").read_text()
    cut = src.index("return Ok(db.Todo")
    assert PACK.viable_prefix(src[:cut])
    assert PACK.viable_prefix("fn f() {\n    let s = \"unfinished")
    assert PACK.viable_prefix("fn f() {}\n@endp")               # a decorator being typed
    assert PACK.viable_prefix("@endpoint(kind: que")             # a word being typed
    assert PACK.viable_prefix("fn m() { match x { A =")          # '=' of '=>'
    assert not PACK.viable_prefix("type A = B")
    assert PACK.viable_prefix(src)
    assert not PACK.viable_prefix("fn f() { return (1 +\n")
    assert not PACK.viable_prefix("@server fn s() {")
    # A string left open at the end: viable only where a string may stand once it is closed.
    assert PACK.viable_prefix('fn f() {\n    log("unfinished')
    assert not PACK.viable_prefix('type T {\n    start "unfinished')
    assert not PACK.viable_prefix('fn f("unfinished')
    # A name on its way that is a keyword so far (`is` of `is_leap`, `to` of `total`).
    assert PACK.viable_prefix("fn is") and PACK.viable_prefix("fn f() {\n    let mut to")
    assert PACK.viable_prefix("import react Spark") and PACK.viable_prefix("import react Sparkline from")
    assert not PACK.viable_prefix("import react Sparkline\n")     # as the reference: `Sparkline` is stray
    # A line comment at the end: only a newline ends it, so viable only where a newline may stand
    # (the reference rejects `@mcp.resource("a" # c⏎, "d")` at the newline, and `fn f(a: int,⏎`).
    assert PACK.viable_prefix("fn f() { // x") and PACK.viable_prefix("fn f() {\n    let x = 1 # one")
    assert not PACK.viable_prefix('@mcp.resource("a" # c')
    assert not PACK.viable_prefix("fn f(a: int, // x")


# ------------------------------------------------------------------ properties

_WORDS = ["fn", "let", "if", "else", "match", "for", "in", "to", "return", "type", "component",
          "view", "state", "@test", "@endpoint", "@ai", "@table", "routes", "x", "Foo", "1",
          "2.5", "3dec", "\"s\"", "'t", "(", ")", "{", "}", "[", "]", ",", ":", ".", "=", "==",
          "=>", "->", "|>", "|", "+", "-", "*", "not", "and", "?", "\n", " ", "\t", "//c\n", ";",
          "!", "&", "@", "é", "<", ">", "_", "with", "on", "workflow", "actor", "\"", "#"]

_token_soup = st.lists(st.sampled_from(_WORDS), max_size=60).map(" ".join)
_snippets = st.sampled_from([p.read_text() for p in EXAMPLES[:12]])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=200), _token_soup))
def test_parser_raises_only_vox_parse_error(text):
    for script in (False, True):
        try:
            parse(text, script=script)
        except VoxParseError as exc:
            assert exc.line >= 1 and exc.col >= 1 and exc.message
        a = PACK.analyze(text, script=script)       # never raises at all
        assert a.ok == (a.error is None)
    lx = Lexed(text)                                 # the lexer never raises; offsets are exact
    assert all(text[a:b] == t for t, a, b in zip(lx.texts, lx.starts, lx.ends))
    assert lx.kinds[-1] == "EOF" and all(text[o] for o in lx.dropped)
    PACK.structural_hash(text)
    PACK.metadata(text)
    PACK.viable_prefix(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_snippets, st.integers(0, 10_000), st.integers(0, 40), st.sampled_from(_WORDS))
def test_mutated_programs_never_crash(src, at, cut, word):
    at %= len(src) + 1
    mutated = src[:at] + word + src[at + cut:]
    a = PACK.analyze(mutated)
    assert a.ok == (a.error is None)
    if a.error is not None:
        assert 1 <= a.error.line <= mutated.count("\n") + 1


def test_every_prefix_of_a_bench_reference_is_viable():
    # What grammar mode needs to let a model write these answers token by token. Once not so:
    # `import react Spark` (the reference reads `Spark` as a stray token, so the prefix failed
    # before its end), `on go f` of `from` (only 8 completions were tried), `fn is` of
    # `is_leap`; and `let t = @cancellable` at the end raised IndexError.
    for line in (REPO / "examples/bench/vox_heldout.jsonl").read_text().splitlines():
        src = json.loads(line)["reference"]
        assert [src[:cut] for cut in range(len(src) + 1) if not PACK.viable_prefix(src[:cut])] == []


def test_prefixes_of_valid_programs_are_viable():
    src = (REPO / "examples/vox/notes/mutations.vox").read_text()
    for cut in range(0, len(src), 7):
        prefix = src[:cut]
        # A cut inside a comment or right after a '/' may still be a valid file; any error must
        # be about the end of the input.
        a = PACK.analyze(prefix)
        if not a.ok and "end of input" not in a.error.message:
            # Only cuts that split a token (an identifier that is now a different word, an
            # operator cut in half) may fail elsewhere; those errors are at the very end.
            assert a.error.line == prefix.count("\n") + 1, (cut, a.error)


def _calls(fn) -> int:
    """Python and C function calls made by fn(): a measure of work that does not depend on how
    busy the machine is (the parser's cost is its calls; the lexer's one regex is a few C calls
    per token), so linear growth is checked exactly, without timing. Lexing counts too: the
    cache of recent texts' lexings is emptied first."""
    from mens.lang.vox.lexer import lexed

    lexed.cache_clear()
    count = 0

    def tally(frame, event, arg):
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(tally)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count


def test_parse_work_is_linear():
    one = "\n".join(p.read_text() for p in EXAMPLES[:10])
    calls = {k: _calls(lambda: parse(one * k)) for k in (1, 10, 20, 40)}
    # The first parse pays some one-time set-up; after that each copy costs the same.
    assert calls[20] <= 20 * calls[1]
    ten_more = calls[20] - calls[10]
    assert 1.95 * ten_more <= calls[40] - calls[20] <= 2.05 * ten_more, calls


def test_pathological_inputs_stay_linear_and_safe():
    for unit in ("(", "[", "{", "fn() ", "not ", "- ", "if a { ", "\"", "x.", "@"):
        text = "fn f() { let v = " + unit * 5000
        a = PACK.analyze(text)
        assert not a.ok
        # twice the input, twice the work: no quadratic recovery or backtracking on bad input
        assert _calls(lambda: PACK.analyze("fn f() { let v = " + unit * 10000)) <= 2.2 * _calls(lambda: PACK.analyze(text))
    deep = "fn f() { return " + "(" * 3000 + "1" + ")" * 3000 + " }"
    assert "nested too deeply" in PACK.analyze(deep).error.message

    def long_line(n):
        return "fn f() { return " + " + ".join(["x"] * n) + " }"

    assert PACK.analyze(long_line(20000)).ok
    assert _calls(lambda: PACK.analyze(long_line(20000))) <= 2.2 * _calls(lambda: PACK.analyze(long_line(10000)))


def test_structural_hash_treats_quote_styles_alike():
    single, double = "let a = 'it\\'s'", 'let a = "it\'s"'
    assert PACK.structural_hash(single) == PACK.structural_hash(double)
    assert PACK.structural_hash("let a = 'x'") != PACK.structural_hash("let a = 'y'")


def test_check_and_hash_equals_check_then_hash():
    """Corpus validate's one-lexing call answers exactly what check() and structural_hash() do,
    on every example program, every invalid one and generated programs."""
    from mens.corpus.synth.generate import generate
    from mens.lang.base import LanguagePack

    pack = get_pack("vox")
    texts = [p.read_text() for p in EXAMPLES]
    texts += [p.read_text() for p in sorted((REPO / "examples" / "vox-invalid").rglob("*.vox"))]
    texts += [row.response for row in generate(60, seed=3)]
    assert len(texts) > 100
    parsed = 0
    for text in texts:
        error, shape = pack.check_and_hash(text)
        assert (error, shape) == LanguagePack.check_and_hash(pack, text)  # the generic two-call path
        parsed += error is None
    assert 0 < parsed < len(texts)
