"""Unit tests per grammar area of vox-syntax.md: what must parse, what must not (and why)."""

import textwrap

import pytest

from mens.lang.vox import VoxPack, VoxParseError, parse, tokenize
from mens.lang.vox import ast as A

PACK = VoxPack()


def ok(src: str, script: bool = False):
    a = PACK.analyze(textwrap.dedent(src), script=script)
    assert a.ok, a.error
    return a


def bad(src: str, fragment: str = "", script: bool = False):
    a = PACK.analyze(textwrap.dedent(src), script=script)
    assert not a.ok, "expected a syntax error"
    assert fragment in a.error.message, a.error.message
    return a.error


# ------------------------------------------------------------------ lexer

def test_tokens_carry_kind_text_and_position():
    toks = tokenize('fn f() to int {\n  return 0.5dec # c\n}')
    assert [t.kind for t in toks] == ["fn", "ID", "(", ")", "to", "ID", "{", "NL", "return", "DEC",
                                      "NL", "}", "EOF"]
    ret = toks[8]
    assert (ret.text, ret.line, ret.col, ret.offset) == ("return", 2, 3, 18)


@pytest.mark.parametrize("src,kinds", [
    ("@testing", ["@test", "ID"]),                 # no word boundary after a decorator
    ("@mcp.tool @tool @tokens", ["@mcp.tool", "@tool", "@tokens"]),
    ("_ _x X1", ["_", "ID", "TY"]),
    ("1 1.5 2dec 3.25dec 1.x", ["INT", "FLOAT", "DEC", "DEC", "INT", ".", "ID"]),
    ("a||b", ["ID", "|", "|", "ID"]),
    ("a::b", ["ID", ":", ":", "ID"]),
    ("x != y !z", ["ID", "!=", "ID", "ID"]),
    ("'it\\'s' \"a\nb\"", ["SSTR", "STR"]),
    ("|> => -> <= >= == += -= *= /=", ["|>", "=>", "->", "<=", ">=", "==", "+=", "-=", "*=", "/="]),
    ("to in env http", ["to", "in", "env", "http"]),
    ("café", ["ID"]),
    ("a // c\nb # d", ["ID", "NL", "ID"]),
])
def test_lexer(src, kinds):
    assert [t.kind for t in tokenize(src)][:-1] == kinds


def test_dropped_characters_warn():
    a = ok("fn f(ok: bool) {\n    let a = 1;\n    if !ok { g(a) & h() }\n}\n")
    msgs = [(w.line, w.col, w.message) for w in a.warnings]
    assert msgs[0] == (2, 14, "dropped character ';' (Vox needs no ';')")
    assert msgs[1][:2] == (3, 8) and "'!'" in msgs[1][2] and "not" in msgs[1][2]
    assert msgs[2][:2] == (3, 19) and "'&'" in msgs[2][2]
    assert any("'é'" in w.message for w in ok("fn é_f() {}").warnings)


def test_arrow_return_type_is_deprecated_but_accepted():
    a = ok("fn f() -> int { return 1 }")
    assert [w.message for w in a.warnings] == ["'->' return type is deprecated; use 'to'"]


# ------------------------------------------------------------------ declarations

@pytest.mark.parametrize("src", [
    "fn f() {}",
    "fn f(a: int, b: str = \"x\", c) to Result[List[int], str] { return Ok([a]) }",
    "fn id<T>(x: T) to T { return x }",
    "pub fn f() {}\nasync fn g() {}",
    "fn type() {}\nfn on() {}\nfn view(state: int) {}",   # soft keywords as names
    "@pure\n@require(x > 0)\n@ensure(result > 0, fallback: one)\nfn f(x: int) to int { return x }",
    "@ai fn s(x: str) to str\n@prompt(\"p\") fn t() to str\n@search fn u()",
    "@test fn t() {}\n@test() fn u() {}\n@test(\"named\")\n\nfn v() {}",
    "@forall(x: gen.int(0, 9)) fn p(x: int) {}\n@forall fn q() {}",
    "@scheduled\n(\"0 * * * *\")\nfn s() {}",
    "@endpoint(kind: query) fn a() {}\n@endpoint(kind: mutation)\n@auth\nfn b() {}\n@endpoint(kind: server) fn c() {}",
    "@mcp.tool \"d\" fn a() {}\n@tool fn b() {}\n@mcp.resource(\"u://x\", \"d\") fn c() {}\n@resource \"u\" \"d\" fn d() {}",
    "@loading\nfn L() { Spinner() }",
    "extern fn now() to int = \"rt::now\"",
    "fn f() uses db, net, env, mcp(github) to int { return 1 }",
    "fn f(cb: fn(int, str) to bool, g: fn()) {}",
    "let X = 1\nlet mut y: int = 2\nlet Z: dec = 1.5dec",
    "import a.b.c, d/e as f, g as { h, i as j }\nimport react X from \"x\"\nimport rust:serde(version: \"1\") as s",
    "type P { x: int, y: int }\ntype Q {\n  a: str\n  b: List[str],\n}\ntype R { a: int b: int }",
    "type T = | A | B(x: int) | C(x: int, y: str,)\ntype U =\n    | V\n    | W(w: Option[int])",
    "type Empty =",
    "@table type Note { title: str }\n@index Note.by_title on (title)\n@index Note.all on ()",
    "url U { a\n b(x: int, ?y: str)\n c(\n  z: int,\n  w: str) }\npub url V { a, b(x: int,),\n c }",
    "state_machine S { state A\n terminal state B(x: int)\n on go(n) from A -> B(n)\n on reset from any -> A }",
    "partial state_machine P { state A, on x from A -> A, }",
    "@form F {\n field a: str required label(\"A\") max_len(5)\n field b: int range(1..9) default(3)\n on_submit: save\n success_redirect: \"/\"\n}",
    "@back_button { action: back }\n@push { channel: c }\n@deep_link { scheme: \"s\"\n route: Home }",
    "@tokens {\n color p light: \"#fff\" dark: \"#000\"\n spacing s: \"4px\"\n font f family: \"Inter\"\n}",
    "@v0 \"a hero\" Hero { title: str\n sub?: str }\n@v0 from \"x.tsx\" X { }",
    "routes { \"/\" to Home\n \"/a\" to A with loader: la\n \"/b\" to B with (loader: lb, pending: P,) { \"/b/c\" to C }\n not_found: NF\n}",
    "component C(x: int) {\n state n = 0\n derived d: int = n * 2\n effect depends_on(n): log(n)\n effect: { log(1) }\n on mount: load()\n on cleanup: { stop() }\n let k = 1\n view: Text(value = str(d))\n}\nstyle { .a { color: \"red\" } }",
    "fragment F(x: int) {\n  Text(value = str(x))\n}",
    "workflow w(a: int) to int { return a }\nactivity act() { }\n@distributed_train(workers = 2)\nworkflow t() { }",
    "actor A {\n on ping(n: int) to int { return n }\n\n on stop() { }\n}",
])
def test_declarations_parse(src):
    ok(src)


@pytest.mark.parametrize("src,fragment", [
    ("@component fn Old() { }", "`@component fn` is retired"),
    ("fn f(a: int,\n b: int) { }", "parameter lists cannot span lines"),
    ("fn f(a: int\n) { }", "expected ')' after parameters, found newline"),
    ("fn f(a: int,) {}", "expected a parameter name, found ')'"),
    ("fn f<T,\nU>() {}", "expected a type parameter after ','"),
    ("fn f() {", "unexpected end of input"),
    ("fn f()", "expected '{' to start the function body"),
    ("@deprecated(\"x\") fn f() {}", "takes no arguments"),
    ("@endpoint(kind: read) fn f() {}", "endpoint kind"),
    ("@mcp.tool(\"d\") fn f() {}", "expected 'fn'"),
    ("fn f() uses disk {}", "expected an effect"),
    ("type A = B", "type aliases are not supported"),
    ("type A = | B(int)", "expected ':' after variant field 'int'"),
    ("@table\ntype T { }", "expected 'type' after @table"),
    ("agent A { }", "`agent` declarations are retired"),
    ("env { X: 1 }", "`env` blocks are retired"),
    ("http get \"/\" { }", "top-level `http` routes are retired"),
    ("<div>hi</div>", "angle-bracket JSX"),
    ("@server fn s() { }", "`@server` is retired"),
    ("@query fn s() { }", "`@query` is retired"),
    ("@mutation fn s() { }", "`@mutation` is retired"),
    ("@llm fn s() to str", "`@llm` is retired"),
    ("@form F { field a: str unique }", "expected 'field', 'on_submit'"),
    ("actor A { fn f() {} }", "expected 'on'"),
    ("component C() { on click: go() }", "expected 'mount' or 'cleanup' after 'on'"),
    ("x = 1", "expected a declaration"),
    ("pub component C() {}", "after 'pub'"),
    ("pub async fn h() {}", "after 'pub'"),
    ("@hole fn u() to str", "'{' to start the function body"),
    ("fn f() to int\n{\n}", "the '{' must be on the same line"),
    ("@pure() fn f() {}", "@pure takes no arguments"),
    ("@cors(x = 1) fn f() {}", "':' after the argument name"),
])
def test_declarations_rejected(src, fragment):
    bad(src, fragment)


# Rules of the declaration blocks established against the reference parser (vox-ref-oracle).
@pytest.mark.parametrize("src", [
    "@tokens { color p light: 'a' dark: \"b\" spacing s: \"1\" }",   # either quote; no separator
    "@form F { field a: str required field b: int on_submit: go }",  # entries on one line
    "url U { a ,\n b(\n x: int,\n) }",                             # ',' on the entry's line
    "state_machine S { state A(x, y: int,), on go(a,\n b) from A(1 + 2) -> A(}) }",
    "import react X from 'x'\nimport rust:x(version: V, git: g,)\nimport rust:Y()\nimport a/b.",
    "import a.b as { X, Y as type, }",
    "routes {\n \"/\" to A with () { \"/b\" to B }\n not_found: N",   # open at EOF
    "routes {",
    "@v0 \"id\" Hero {\n title: str",                                 # open at EOF
    "type P {\n a: int,",                                            # open at EOF
    "@table type T { a: int\n",
    "@index T.i on (a, b,)",
    "routes {\nroutes { \"/\" to A }",      # a routes block ends at anything that is not an entry
    "type T =\nroutes { }",
    "@distributed_train(\n workers = 4, 8, strategy = 'ddp', backend = nccl,)\nworkflow t() { }",
])
def test_decl_blocks_reference_accepts(src):
    ok(src)


@pytest.mark.parametrize("src,fragment", [
    ("@tokens { spacing s: \"1\", radius r: \"2\" }", "not separated by commas"),
    ("@tokens { color p light: \"a\", dark: \"b\" }", "expected 'dark'"),
    ("@form F { field a: str, field b: str }", "not separated by commas"),
    ("@push { channel: \"c\" }", "a name as the value"),
    ("@deep_link { route: on }", "a double-quoted string or a name"),
    ("@back_button { Action: back }", "a setting name"),
    ("url U { a\n , b }", "expected a url entry name"),
    ("url U { a,, b }", "expected a url entry name"),
    ("url U { a(x: int\n) }", "')' must be on the line of the last parameter"),
    ("state_machine S { state A\n , state B }", "expected 'state', 'terminal state', 'on'"),
    ("state_machine S { on go(a: int) from A -> B }", "expected ',' or ')'"),
    ("state_machine S { state A(1) }", "expected a state field name"),
    ("state_machine S { state A(x:\n int) }", "expected a type"),
    ("import rust:x(foo: \"1\")", "unknown crate option 'foo'"),
    ("import rust:x(version: '1')", "a double-quoted string or a name"),
    ("import rust:x(\n version: \"1\")", "on one line"),
    ("import a.b as {\n X }", "on one line"),
    ("import a.b as { env }", "a name in the import list"),
    ("import react Button from x", "expected a declaration"),
    ("routes { \"/\" to A, \"/b\" to B }", "not separated by commas"),
    ("routes { \"/\" to A { not_found: N } }", "in the nested routes"),
    ("routes { \"/\" to A {", "in the nested routes"),
    ("routes { \"/\" to A with (loader: a,\n pending: P) }", "expected loader, pending or error"),
    ("routes { '/' to A }", "a route path (a double-quoted string)"),
    ("@v0 \"id\" Hero { a: str, b: str }", "expected a prop name"),
    ("@v0 'id' Hero { }", "a double-quoted v0 chat id"),
    ("routes { \"/\" to A }\n}", "expected a declaration"),
    ("@distributed_train(workers: 4)\nworkflow t() { }", "expected '=' after 'workers'"),
    ("@distributed_train(strategy = 1)\nworkflow t() { }", "a string or an identifier as the strategy"),
    ("@distributed_train(workers = 4\n)\nworkflow t() { }", "')' to close @distributed_train"),
    ("actor A {\n state n: int = 0\n on hit() { }\n}", "an actor holds only message handlers"),
    ("@index T.i on (a,\n b)", "expected a column name"),
    ("type P { a: int\n , b: int }", "expected a field name"),
])
def test_decl_blocks_reference_rejects(src, fragment):
    bad(src, fragment)


# ------------------------------------------------------------------ statements and expressions

def body(stmts: str) -> str:
    return "fn f() {\n" + textwrap.indent(textwrap.dedent(stmts), "    ") + "\n}\n"


@pytest.mark.parametrize("stmts", [
    "let a = 1 let b = 2",                       # statements need no separator
    "let (a, b) = pair\nlet Point(x, _) = p\nlet _ = 3\nlet mut m: int = 1",
    "return",
    "return\n1",                                 # `return` then a newline returns nothing
    "while i < 3 { i += 1 }\nloop { break }\nloop {\n continue\n}",
    "x = 1\nx += 1\nx -= 1\nx *= 2\nx /= 2\na.b.c = 3\nxs[0] = 1",
    "a |> b or c and d with e is f isnt g == h != i < j > k <= l >= m + n - o * p / q % r",
    "not a and b\n-x\n-(y)",
    "g()?\nh(1)?.foo",                           # `?.` parses as `?` then a statement `.foo`? no: see below
])
def test_statements_parse(stmts):
    if "?." in stmts:
        bad(body(stmts), "expected a statement, found '.'")
    else:
        ok(body(stmts))


@pytest.mark.parametrize("expr", [
    "1", "1.5", "2dec", "\"s\"", "'s'", "true", "false", "x", "T", "env", "to", "http",
    "env.get(\"X\")", "http.get(url)", "(1)", "(\n 1\n)", "(1, 2)", "(1,\n 2,\n)",
    "(a, b) => a + b", "(x) => x", "x => x * 2", "fn() 1", "fn(a: int) to int a + 1",
    "fn()\n 42", "@cancellable fn() go()", "[]", "[\n 1,\n 2\n]", "[1, 2,]", "{}", "{\n}",
    "{ a: 1 }", "{ \"a b\": 1, c: 2, }", "{\n a: 1,\n b: 2\n}", "{ Key: 1 }", "{ let t = 1\n t }",
    "if a { 1 } else { 2 }", "if a { 1 }\nelse if b { 2 }\nelse\n{ 3 }", "if a { }",
    "match x { A => 1, B(y) => y\n (1, _) => 2 \"s\" => 3 _ => 4 }",
    "match x {\n A => return\n B => return 1\n C => break\n _ => continue\n}",
    "for x in xs { x }", "for k, v in m key = k f(v)", "for x in xs\n  g(x)",
    "spawn(job(1))", "side_effect { now() }", "workflow.version(\"v\", 1, 2)",
    "f(a, b = 1,\n  c = 2,\n)", "obj.method(1).field[0].other()", "a[b[c]]",
    "x.type.on.view", "not not x", "- -x", "f(x)?",
    "Column(gap = 1) { Text(value = \"a\") Text(value = \"b\"), Text(value = \"c\") }",
    "Row()\n{\n  Text(value = \"child\")\n}",
    "input(attr_type = \"text\")", "Button(on_click = fn() { n += 1 })",
    "a with { b: 1 }", "not x", "- y",
])
def test_expressions_parse(expr):
    ok(body("let v = " + expr))


@pytest.mark.parametrize("stmts,fragment", [
    ("return (1 +\n 2)", "expected an expression after '+', found newline"),
    ("let y = 1\n+ 2", "expected a statement, found '+'"),
    ("let y = a\n.b", "expected a statement, found '.'"),
    ("let y = a and\n b", "the right operand must be on the same line"),
    ("match x { A -> 1 }", "found '->'"),
    ("let f = () => 1", "'() => x' is not supported"),
    ("let o = { a: 1\n b: 2 }", "expected ',' or '}' in the object"),
    ("let (a,\n b) = p", "patterns cannot span lines"),
    ("let x = <b>hi</b>", "angle-bracket JSX"),
    ("fn helper() {}", "expected '(' after 'fn' in a lambda"),
    ("let t = (1, 2) => 3", "a lambda's parameters must be plain names"),
    ("if Foo() { go() }", "expected '{' after the if condition"),
    ("let x = -\n1", "expected an expression"),
    ("let x = Ok(())", "'()' is not a value"),
    ("let x = match", "expected an expression, found '}'"),
    ("while x\n", "expected '{' after the while condition"),
    ("let s = \"open", "unterminated string literal"),
    ("let x = when", "expected an expression, found keyword 'when'"),
    ("let type = 1", "expected a pattern"),
    ("x = = 1", "expected an expression, found '='"),
])
def test_statements_rejected(stmts, fragment):
    bad(body(stmts), fragment)


# ------------------------------------------------------------------ AST shape

def test_precedence_and_associativity():
    m = parse("let v = a + b * c - d |> e or f and not g")
    v = m.decls[0].value
    assert isinstance(v, A.Binary) and v.op == "|>"
    left = v.left
    assert left.op == "-" and left.left.op == "+" and left.left.right.op == "*"
    right = v.right
    assert right.op == "or" and right.right.op == "and"
    assert isinstance(right.right.left, A.Name) and isinstance(right.right.right, A.Unary)


def test_lowercase_calls_that_are_not_tags_keep_their_if_body():
    ok(body("if p() { go() }\nfor row in pick(table = \"t\") { use(row) }\nwhile more() { step() }"))
    # `div` is no view tag: its braces are simply the next child/statement, which still parses.
    ok("component C() {\n    view: Column() {\n        div(attr_class = \"x\") {\n            Text(value = \"a\")\n        }\n    }\n}")


def test_try_binds_tightest_and_view_calls_are_recognised():
    m = parse("fn f() { let v = a + g()?\n Column(gap = 1) { Text(value = \"x\") }\n h(1) }")
    stmts = m.decls[0].body.stmts
    assert isinstance(stmts[0].value.right, A.Try)
    col = stmts[1].expr
    assert col.view and [c.callee.name for c in col.children] == ["Text"]
    assert not stmts[2].expr.view


def test_attr_prefix_is_stripped_and_spans_are_offsets():
    text = "fn f() { input(attr_type = \"text\") }"
    call = parse(text).decls[0].body.stmts[0].expr
    assert call.view and call.args[0].name == "type"
    assert text[call.start:call.end] == "input(attr_type = \"text\")"


def test_return_without_value_before_newline():
    stmts = parse("fn f() {\n return\n 1\n}").decls[0].body.stmts
    assert isinstance(stmts[0], A.Return) and stmts[0].value is None and len(stmts) == 2


def test_parse_raises_vox_parse_error_with_position():
    with pytest.raises(VoxParseError) as exc:
        parse("fn f() {\n  let = 1\n}")
    assert (exc.value.line, exc.value.col) == (2, 7)
    assert exc.value.message == "expected a pattern, found '='"


# ------------------------------------------------------------------ script mode

def test_script_mode():
    src = "import a.b\nlet x = 1\nprint(x)\nfn f() { }\nwhile x < 3 { x += 1 }\nroutes { \"/\" to Home }"
    a = ok(src, script=True)
    assert [c.kind for c in a.constructs] == ["import", "function", "routes"]
    bad(src, "expected a declaration")
    bad("@form F { }", "expected a statement", script=True)    # not a script declaration
    ok("let url = \"x\"\nprint(url)", script=True)


# ------------------------------------------------------------------ the spec's own examples

SPEC_1 = """
// A guard, an ADT, a match and an endpoint over a table.
type Shape =
    | Circle(r: int)
    | Rect(w: int, h: int)

fn area(s: Shape) to int {
    match s {
        Circle(r) => 3 * r * r
        Rect(w, h) => w * h
    }
}

@table type Note {
    title: str
    body: str
}

@endpoint(kind: mutation)
fn add_note(title: str, body: str) to Result[str] {
    if len(title) is 0 {
        return Error("empty title")
    }
    db.Note.insert({ title: title, body: body })
    return Ok("saved")
}
"""

SPEC_2 = """
component Counter(start: int) {
    state count: int = start
    derived doubled: int = count * 2
    view: Column(gap = 2) {
        Text(value = "Count")
        Button(on_click = fn() bump(count)) {
            Text(value = "+1")
        }
    }
}

workflow nightly_report(day: str) to str {
    let rows = fetch_rows(day)
    return summarize(rows)
}

actor Meter {
    on tick(n: int) to int {
        return n + 1
    }
}
"""


def test_spec_examples():
    a = ok(SPEC_1)
    assert [(c.kind, c.name) for c in a.constructs] == [
        ("type", "Shape"), ("function", "area"), ("table", "Note"), ("mutation", "add_note")]
    a = ok(SPEC_2)
    assert [(c.kind, c.name) for c in a.constructs] == [
        ("component", "Counter"), ("workflow", "nightly_report"), ("actor", "Meter")]


@pytest.mark.parametrize("src", [
    "@component fn Old() { }", "fn f(a: int,\n b: int) { }", "fn h() { return (1 +\n 2) }",
    "fn k() { let y = 1\n + 2 }", "match x { A -> 1 }", "fn m() { match x { A -> 1 } }",
    "<div>hi</div>", "@server fn s() { }",
])
def test_spec_rejections(src):
    bad(src)
