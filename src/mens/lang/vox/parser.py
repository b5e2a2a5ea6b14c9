"""The Vox parser: recursive descent for declarations and statements, Pratt for expressions.

It follows `vox-syntax.md` (the reference Rust parser's behaviour): newline tokens are explicit,
so "an operator must be on the same line as its left operand" is simply "the next token is not
NL"; places where the spec allows newlines skip them by hand. Where the spec is silent the parser
leans towards accepting (real programs that the reference accepts must parse here), but every
rejection the spec lists is kept. The token lists come from `lexer.Lexed`; the parser walks them
by index, which is what makes it fast enough (see bench/vox_parse.py).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager

from mens.lang.vox import ast as A
from mens.lang.vox.lexer import Lexed


class VoxParseError(Exception):
    """A syntax error at a 1-based line and column."""

    def __init__(self, line: int, col: int, message: str, offset: int = 0):
        super().__init__(f"{line}:{col}: {message}")
        self.line, self.col, self.message, self.offset = line, col, message, offset


NAME = frozenset("ID TY type on state derived effect mount cleanup view component http env to in".split())
SEG = frozenset(("ID", "TY", "env", "http"))
BINARY = {"|>": 1, "or": 3, "and": 5, "with": 5, "is": 7, "isnt": 7, "==": 7, "!=": 7,
          "<": 9, ">": 9, "<=": 9, ">=": 9, "+": 11, "-": 11, "*": 13, "/": 13, "%": 13}
POSTFIX = frozenset(("(", ".", "["))
ASSIGN = frozenset(("=", "+=", "-=", "*=", "/="))
LITERAL = frozenset(("INT", "FLOAT", "DEC", "STR"))
NO_RETURN_VALUE = frozenset(("NL", "}", "EOF", ","))

FN_DECO_BARE = frozenset("@pure @reactive @remote @deprecated @fuzz @native @training_step".split())
FN_DECO_OPT = frozenset(("@ai @prompt @subagent @search @hole @inference @uses @webhook @cors "
                         "@rate_limit @pii @layer @embed @auth @offline_capable @collaborative").split())
FN_DECO_EXPR = frozenset(("@require", "@invariant", "@ensure"))
FN_DECO = FN_DECO_BARE | FN_DECO_OPT | FN_DECO_EXPR
AI_DECOS = frozenset(("@ai", "@prompt", "@subagent", "@search", "@hole"))
EFFECTS = frozenset("net db fs env clock random nothing mcp".split())

PRIMITIVES = frozenset(("stack column row wrap text heading link image button panel card list "
                        "list_item route_outlet overlay toast drawer modal").split())
# HTML tags usable as view calls (`div` deliberately is not one, as in the reference).
HTML_TAGS = frozenset(("a abbr article aside audio b blockquote br canvas caption circle code "
                       "details dialog em fieldset figcaption figure footer form g h1 h2 h3 h4 h5 "
                       "h6 header hr i iframe img input label legend li line main nav ol option "
                       "p path polygon polyline pre rect section select small source span strong "
                       "sub summary sup svg table tbody td textarea tfoot th thead tr ul video").split())
FORM_FLAGS = frozenset(("required", "optional", "hidden"))
FORM_ARG = {"label": "STR", "pattern": "STR", "max_len": "INT", "min_len": "INT"}

# What starts a declaration in script mode (everything else is a top-level statement).
SCRIPT_DECL = frozenset(("import component @loading @test @v0 @endpoint @forall @scheduled @tool "
                         "@mcp.tool @resource @mcp.resource fn pub type actor workflow activity "
                         "@table @index async").split())

RETIRED_DECORATORS = {
    "server": "`@server` is retired; use @endpoint(kind: server)",
    "query": "`@query` is retired; use @endpoint(kind: query)",
    "mutation": "`@mutation` is retired; use @endpoint(kind: mutation)",
    "llm": "`@llm` is retired; use @ai",
}


def _describe(kind: str, text: str) -> str:
    if kind == "NL":
        return "newline"
    if kind == "ID":
        return f"identifier '{text}'"
    if kind == "TY":
        return f"name '{text}'"
    if kind in ("INT", "FLOAT", "DEC"):
        return f"number {text}"
    if kind == "STR":
        return "string"
    if kind[0] == "@":
        return f"decorator '{kind}'"
    if kind[0].isalpha():
        return f"keyword '{kind}'"
    return f"'{kind}'"


class Parser:
    def __init__(self, text: str, script: bool = False):
        lx = Lexed(text)
        self.lx, self.text, self.script = lx, text, script
        self.k, self.t, self.s, self.e = lx.kinds, lx.texts, lx.starts, lx.ends
        self.i = 0
        self.decls: list = []
        self.stmts: list = []
        self.warnings: list[tuple[int, str]] = []   # (offset, message)

    # ------------------------------------------------------------ errors and small helpers

    def error(self, message: str, i: int | None = None) -> VoxParseError:
        i = self.i if i is None else i
        line, col = self.lx.line_col(self.s[i])
        return VoxParseError(line, col, message, self.s[i])

    def fail(self, what: str, hint: str = "", i: int | None = None):
        i = self.i if i is None else i
        kind = self.k[i]
        if kind == "EOF":
            msg = f"unexpected end of input: expected {what}"
        elif kind == "USTR":
            msg = "unterminated string literal: unexpected end of input"
        else:
            msg = f"expected {what}, found {_describe(kind, self.t[i])}"
            if hint:
                msg += f" ({hint})"
        raise self.error(msg, i)

    def expect(self, kind: str, what: str) -> int:
        i = self.i
        if self.k[i] == kind:
            self.i = i + 1
            return i
        self.fail(what, "a newline is not allowed here" if self.k[i] == "NL" else "")

    def name(self, what: str) -> str:
        i = self.i
        if self.k[i] in NAME:
            self.i = i + 1
            return self.t[i]
        self.fail(what)

    def word(self, word: str, what: str) -> None:
        """Expect the contextual identifier `word`."""
        if self.k[self.i] == "ID" and self.t[self.i] == word:
            self.i += 1
            return
        self.fail(what)

    def is_word(self, word: str, offset: int = 0) -> bool:
        return self.k[self.i + offset] == "ID" and self.t[self.i + offset] == word

    def skip_nl(self) -> None:
        k = self.k
        while k[self.i] == "NL":
            self.i += 1

    def skip_sep(self) -> None:
        """Newlines and commas between entries of a configuration block."""
        k = self.k
        while k[self.i] == "NL" or k[self.i] == ",":
            self.i += 1

    def last_end(self) -> int:
        """End offset of the last non-newline token consumed."""
        j = self.i - 1
        while j > 0 and self.k[j] == "NL":
            j -= 1
        return self.e[j] if j >= 0 else 0

    def balanced(self) -> str:
        """A parenthesised argument list taken verbatim (decorator arguments)."""
        start = self.i
        self.expect("(", "'('")
        depth, k = 1, self.k
        while depth:
            t = k[self.i]
            if t == "EOF" or t == "USTR":
                self.fail("')' to close the argument list")
            if t == "(" or t == "[" or t == "{":
                depth += 1
            elif t == ")" or t == "]" or t == "}":
                depth -= 1
            self.i += 1
        return self.text[self.s[start]:self.e[self.i - 1]]

    def warn_arrow(self) -> None:
        self.warnings.append((self.s[self.i], "'->' return type is deprecated; use 'to'"))

    # ------------------------------------------------------------ module

    def module(self) -> A.Module:
        k = self.k
        while True:
            while k[self.i] == "NL":
                self.i += 1
            t = k[self.i]
            if t == "EOF":
                break
            if self.script and not self.script_decl_here():
                self.stmts.append(self.stmt())
                continue
            start = self.i
            d = self.decl()
            d.start, d.end = self.s[start], self.last_end()
            self.decls.append(d)
        return A.Module(0, len(self.text), self.decls, self.stmts)

    def run(self) -> A.Module:
        """`module()`, with pathological nesting reported as a syntax error, not a crash."""
        try:
            return self.module()
        except RecursionError:
            raise self.error("nested too deeply (the parser's recursion limit)") from None

    def script_decl_here(self) -> bool:
        t = self.k[self.i]
        if t in SCRIPT_DECL:
            return True
        if t == "ID":
            word, nxt = self.t[self.i], self.k[self.i + 1]
            return (word == "routes" and nxt == "{") or (word in ("url", "state_machine") and nxt in NAME)
        return False

    def decl(self):
        k, i = self.k, self.i
        t = k[i]
        if t == "fn" or t in FN_DECO:
            return self.fn_decl("function", [])
        if t in DISPATCH:
            return DISPATCH[t](self)
        if t == "pub":
            self.i += 1
            nt = k[self.i]
            if nt == "fn" or nt in FN_DECO:
                return self.fn_decl("function", [], pub=True)
            if nt == "async":
                self.i += 1
                return self.fn_decl("function", [], pub=True, is_async=True)
            if nt == "type":
                return self.type_decl(pub=True)
            if nt == "ID" and self.t[self.i] == "url":
                return self.url_decl()
            if nt == "ID" and self.t[self.i] in ("partial", "state_machine"):
                return self.state_machine()
            self.fail("'fn', 'type', 'url' or 'state_machine' after 'pub'")
        if t == "ID":
            word = self.t[i]
            if word == "routes":
                return self.routes()
            if word == "url":
                return self.url_decl()
            if word in ("partial", "state_machine"):
                return self.state_machine()
            if self.s[i] == 0 or self.text[self.s[i] - 1] != "@":
                self.fail("a declaration")
            retired = RETIRED_DECORATORS.get(word)
            raise self.error(retired or f"unknown decorator '@{word}'", i)
        retired = RETIRED_FORMS.get(t)
        if retired:
            raise self.error(retired, i)
        self.fail("a declaration")

    # ------------------------------------------------------------ functions

    def fn_decl(self, kind: str, decos: list, pub: bool = False, is_async: bool = False) -> A.Function:
        k = self.k
        while True:
            d = k[self.i]
            if d == "fn":
                break
            d0 = self.i
            if d in FN_DECO_BARE:
                self.i += 1
                if k[self.i] == "(":
                    raise self.error(f"{d} takes no arguments")
                decos.append(A.Decorator(self.s[d0], self.e[d0], d))
            elif d in FN_DECO_OPT:
                self.i += 1
                args = self.balanced() if k[self.i] == "(" else None
                decos.append(A.Decorator(self.s[d0], self.e[self.i - 1], d, args))
            elif d in FN_DECO_EXPR:
                self.i += 1
                a0 = self.i
                self.expect("(", f"'(' after {d}")
                self.expr()
                if d == "@ensure" and k[self.i] == ",":
                    self.i += 1
                    self.word("fallback", "'fallback' in @ensure")
                    self.expect(":", "':' after 'fallback'")
                    self.name("a fallback function name")
                self.expect(")", f"')' to close {d}")
                decos.append(A.Decorator(self.s[d0], self.e[self.i - 1], d,
                                         self.text[self.s[a0]:self.e[self.i - 1]]))
            elif d == "@component":
                raise self.error("`@component fn` is retired; declare `component Name(…) { … }`")
            else:
                self.fail("'fn' or a function decorator" if decos else "'fn'")
            self.skip_nl()
        self.i += 1
        name = self.name("a function name after 'fn'")
        generics: list[str] = []
        if k[self.i] == "<":
            self.i += 1
            generics.append(self.name("a type parameter"))
            while k[self.i] == ",":
                self.i += 1
                generics.append(self.name("a type parameter after ','"))
            self.expect(">", "'>' after type parameters")
        self.expect("(", "'(' after the function name")
        params = self.params()
        uses: list[str] = []
        if self.is_word("uses"):
            self.i += 1
            uses.append(self.effect())
            while k[self.i] == ",":
                self.i += 1
                uses.append(self.effect())
        ret = self.ret()
        body = None
        j = self.i
        while k[j] == "NL":
            j += 1
        if k[j] == "{":
            self.i = j
            body = self.block()
        elif not any(dec.name in AI_DECOS for dec in decos):
            self.fail("'{' to start the function body")
        return A.Function(0, 0, kind, name, params, ret, body, decos, generics, uses, pub, is_async)

    def effect(self) -> str:
        i = self.i
        if self.k[i] not in ("ID", "env") or self.t[i] not in EFFECTS:
            self.fail("an effect (net, db, fs, env, clock, random, nothing, mcp)")
        self.i += 1
        if self.t[i] == "mcp" and self.k[self.i] == "(":
            self.i += 1
            self.expect("ID", "an MCP server name")
            self.expect(")", "')' after the MCP server name")
        return self.t[i]

    def params(self) -> list[A.Param]:
        """Parameters after '(' through ')'. No newlines and no trailing comma."""
        k = self.k
        ps: list[A.Param] = []
        if k[self.i] == ")":
            self.i += 1
            return ps
        while True:
            p0 = self.i
            if k[p0] not in NAME:
                self.fail("a parameter name", "parameter lists cannot span lines" if k[p0] == "NL" else "")
            self.i += 1
            typ = default = None
            if k[self.i] == ":":
                self.i += 1
                typ = self.type_()
            if k[self.i] == "=":
                self.i += 1
                default = self.expr()
            ps.append(A.Param(self.s[p0], self.e[self.i - 1], self.t[p0], typ, default))
            t = k[self.i]
            if t == ",":
                self.i += 1
            elif t == ")":
                self.i += 1
                return ps
            else:
                self.fail("')' after parameters", "parameter lists cannot span lines" if t == "NL" else "")

    def ret(self):
        t = self.k[self.i]
        if t == "to":
            self.i += 1
            return self.type_()
        if t == "->":
            self.warn_arrow()
            self.i += 1
            return self.type_()
        return None

    def type_(self):
        k, i = self.k, self.i
        t = k[i]
        if t == "_" or t == "dec" or t == "INT":
            self.i = i + 1
            return A.TypeRef(self.s[i], self.e[i], self.t[i])
        if t == "fn":
            self.i += 1
            self.expect("(", "'(' after 'fn' in a function type")
            ps = []
            if k[self.i] != ")":
                ps.append(self.type_())
                while k[self.i] == ",":
                    self.i += 1
                    ps.append(self.type_())
            self.expect(")", "')' after function type parameters")
            return A.FnType(self.s[i], self.e[self.i - 1], ps, self.ret())
        if t not in NAME:
            self.fail("a type")
        self.i = i + 1
        args = []
        if k[self.i] == "[":
            self.i += 1
            args.append(self.type_())
            while k[self.i] == ",":
                self.i += 1
                args.append(self.type_())
            self.expect("]", "']' after type arguments")
        return A.TypeRef(self.s[i], self.e[self.i - 1], self.t[i], args)

    def dispatch_fn(self):
        """Functions led by a dispatching decorator: @test @forall @scheduled @endpoint @mcp.* @loading."""
        k = self.k
        d0 = self.i
        d = k[d0]
        self.i += 1
        args = None
        if d == "@test":
            kind = "test"
            if k[self.i] == "(":
                a0 = self.i
                self.i += 1
                if k[self.i] == "STR":
                    self.i += 1
                self.expect(")", "')' after the test name")
                args = self.text[self.s[a0]:self.e[self.i - 1]]
        elif d == "@forall":
            kind = "forall"
            if k[self.i] == "(":
                args = self.balanced()
        elif d == "@scheduled":
            kind = "scheduled"
            self.skip_nl()
            a0 = self.i
            self.expect("(", "'(' after @scheduled")
            self.expect("STR", "a schedule string")
            self.expect(")", "')' after the schedule")
            args = self.text[self.s[a0]:self.e[self.i - 1]]
        elif d == "@endpoint":
            a0 = self.i
            self.expect("(", "'(' after @endpoint")
            self.word("kind", "'kind' in @endpoint(kind: …)")
            self.expect(":", "':' after 'kind'")
            which = self.t[self.i] if k[self.i] == "ID" else ""
            kind = {"query": "query", "mutation": "mutation", "server": "server_fn"}.get(which)
            if kind is None:
                self.fail("query, mutation or server as the endpoint kind")
            self.i += 1
            self.expect(")", "')' after the endpoint kind")
            args = self.text[self.s[a0]:self.e[self.i - 1]]
        elif d == "@mcp.tool" or d == "@tool":
            kind = "mcp_tool"
            if k[self.i] == "STR":
                args = self.t[self.i]
                self.i += 1
        elif d == "@mcp.resource" or d == "@resource":
            kind = "mcp_resource"
            a0 = self.i
            if k[self.i] == "(":
                self.i += 1
                self.expect("STR", "a resource URI string")
                self.expect(",", "',' between the resource URI and description")
                self.expect("STR", "a resource description string")
                self.expect(")", "')' after the resource description")
            else:
                self.expect("STR", f"a resource URI string after {d}")
                self.expect("STR", "a resource description string")
            args = self.text[self.s[a0]:self.e[self.i - 1]]
        else:  # @loading
            kind = "loading"
        self.skip_nl()
        deco = A.Decorator(self.s[d0], self.e[d0], d, args)
        return self.fn_decl(kind, [deco])

    def extern_fn(self):
        self.i += 1
        self.expect("fn", "'fn' after 'extern'")
        name = self.name("a function name")
        self.expect("(", "'(' after the function name")
        params = self.params()
        ret = self.ret()
        self.expect("=", "'=' and the native symbol string after an extern fn")
        self.expect("STR", "the native symbol string")
        return A.Function(0, 0, "function", name, params, ret, None, [A.Decorator(0, 0, "extern")])

    def async_fn(self):
        self.i += 1
        return self.fn_decl("function", [], is_async=True)

    # ------------------------------------------------------------ other declarations

    def const(self):
        self.i += 1
        if self.k[self.i] == "mut":
            self.i += 1
        name = self.name("a constant name after 'let'")
        typ = None
        if self.k[self.i] == ":":
            self.i += 1
            typ = self.type_()
        self.expect("=", "'=' after the constant name")
        return A.Decl(0, 0, "const", name, [typ], self.expr())

    def import_decl(self):
        self.i += 1
        items = [self.import_item()]
        while self.k[self.i] == ",":
            self.i += 1
            items.append(self.import_item())
        return A.Decl(0, 0, "import", items[0], items)

    def import_item(self) -> str:
        k, i = self.k, self.i
        if k[i] == "ID" and self.t[i] == "react" and k[i + 1] in NAME:
            self.i += 1
            name = self.name("a component name")
            self.word("from", "'from' in a react import")
            self.expect("STR", "a module string after 'from'")
            return name
        if k[i] == "ID" and self.t[i] == "rust" and k[i + 1] == ":":
            self.i += 2
            crate = self.t[self.expect("ID", "a crate name after 'rust:'")]
            if k[self.i] == "(":
                self.i += 1
                while True:
                    self.skip_nl()
                    self.expect("ID", "a crate option name")
                    self.expect(":", "':' after the crate option")
                    if k[self.i] not in ("STR", "ID"):
                        self.fail("a string or identifier as the crate option value")
                    self.i += 1
                    self.skip_nl()
                    if k[self.i] != ",":
                        break
                    self.i += 1
                self.expect(")", "')' after crate options")
            if self.is_word("as"):
                self.i += 1
                crate = self.name("a name after 'as'")
            return crate
        if k[i] not in SEG:
            self.fail("a module path after 'import'")
        self.i += 1
        while k[self.i] in (".", "/"):
            self.i += 1
            if k[self.i] not in SEG:
                self.fail("a path segment")
            self.i += 1
        path = self.text[self.s[i]:self.e[self.i - 1]]
        if self.is_word("as"):
            self.i += 1
            if k[self.i] == "{":
                self.i += 1
                while True:
                    self.skip_sep()
                    if k[self.i] == "}":
                        break
                    if k[self.i] not in SEG:
                        self.fail("a name in the import list")
                    self.i += 1
                    if self.is_word("as"):
                        self.i += 1
                        self.name("a name after 'as'")
                    if k[self.i] not in (",", "NL", "}"):
                        self.fail("',' or '}' in the import list")
                self.i += 1
            else:
                self.name("a name after 'as'")
        return path

    def fields_block(self) -> list[A.Field]:
        """`{ NL* { name ":" type [","] NL* } }` (struct and table bodies)."""
        self.expect("{", "'{' to start the fields")
        k = self.k
        fields = []
        while True:
            self.skip_nl()
            if k[self.i] == "}":
                self.i += 1
                return fields
            f0 = self.i
            name = self.name("a field name or '}'")
            self.expect(":", f"':' after field '{name}'")
            typ = self.type_()
            fields.append(A.Field(self.s[f0], self.e[self.i - 1], name, typ))
            if k[self.i] == ",":
                self.i += 1
            elif k[self.i] not in ("NL", "}"):
                self.fail("',', newline or '}' after a field")

    def type_decl(self, pub: bool = False):
        self.i += 1
        name = self.name("a type name after 'type'")
        k = self.k
        if k[self.i] == "{":
            return A.TypeDecl(0, 0, name, fields=self.fields_block(), pub=pub)
        if k[self.i] != "=":
            self.fail(f"'{{' or '=' after 'type {name}'")
        self.i += 1
        self.skip_nl()
        variants = []
        while k[self.i] == "|":
            v0 = self.i
            self.i += 1
            vname = self.name("a variant name after '|'")
            fields = []
            if k[self.i] == "(":
                self.i += 1
                while k[self.i] != ")":
                    f0 = self.i
                    if k[f0] == "NL":
                        self.fail("a variant field name", "variant fields cannot span lines")
                    fname = self.name("a variant field name")
                    self.expect(":", f"':' after variant field '{fname}'")
                    fields.append(A.Field(self.s[f0], self.e[self.i - 1], fname, self.type_()))
                    if k[self.i] == ",":
                        self.i += 1
                    elif k[self.i] != ")":
                        self.fail("',' or ')' in the variant fields",
                                  "variant fields cannot span lines" if k[self.i] == "NL" else "")
                self.i += 1
            variants.append(A.Variant(self.s[v0], self.e[self.i - 1], vname, fields))
            self.skip_nl()
        if not variants and k[self.i] in NAME:
            self.fail("'|' before the first variant", "type aliases are not supported")
        # Leave the trailing newlines to the module loop (they are not part of the span).
        while self.i > 0 and k[self.i - 1] == "NL":
            self.i -= 1
        return A.TypeDecl(0, 0, name, variants=variants, pub=pub)

    def table(self):
        self.i += 1
        if self.k[self.i] != "type":
            self.fail("'type' after @table", "write '@table type Name {' on one line")
        self.i += 1
        name = self.name("a table name")
        return A.TypeDecl(0, 0, name, fields=self.fields_block(), table=True)

    def index(self):
        self.i += 1
        table = self.name("a table name after @index")
        self.expect(".", "'.' between the table and the index name")
        name = self.name("an index name")
        self.expect("on", "'on' after the index name")
        self.expect("(", "'(' before the indexed columns")
        cols = []
        if self.k[self.i] != ")":
            cols.append(self.name("a column name"))
            while self.k[self.i] == ",":
                self.i += 1
                cols.append(self.name("a column name"))
        self.expect(")", "')' after the indexed columns")
        return A.Decl(0, 0, "index", f"{table}.{name}", cols)

    def url_decl(self):
        self.i += 1
        name = self.name("a name after 'url'")
        self.expect("{", "'{' after the url name")
        k = self.k
        items = []
        while True:
            self.skip_sep()
            if k[self.i] == "}":
                self.i += 1
                return A.Decl(0, 0, "url", name, items)
            items.append(self.name("a url entry name or '}'"))
            if k[self.i] == "(":
                self.i += 1
                while True:
                    self.skip_nl()
                    if k[self.i] == ")":
                        break
                    if k[self.i] == "?":
                        self.i += 1
                    self.name("a url parameter name")
                    self.expect(":", "':' after the url parameter")
                    self.type_()
                    self.skip_nl()
                    if k[self.i] == ",":
                        self.i += 1
                    elif k[self.i] != ")":
                        self.fail("',' or ')' in the url parameters")
                self.i += 1

    def state_machine(self):
        if self.is_word("partial"):
            self.i += 1
        self.word("state_machine", "'state_machine'")
        name = self.name("a state machine name")
        self.expect("{", "'{' after the state machine name")
        k = self.k
        items = []
        while True:
            self.skip_sep()
            t = k[self.i]
            if t == "}":
                self.i += 1
                return A.Decl(0, 0, "state_machine", name, items)
            if self.is_word("terminal"):
                self.i += 1
                t = k[self.i]
                if t != "state":
                    self.fail("'state' after 'terminal'")
            if t == "state":
                self.i += 1
                items.append(("state", self.name("a state name")))
                if k[self.i] == "(":
                    self.balanced()
            elif t == "on":
                self.i += 1
                event = self.name("an event name after 'on'")
                if k[self.i] == "(":
                    self.balanced()
                self.word("from", "'from' in a transition")
                if not self.is_word("any"):
                    self.name("a source state or 'any'")
                    if k[self.i] == "(":
                        self.balanced()
                else:
                    self.i += 1
                self.expect("->", "'->' before the target state")
                self.name("a target state")
                if k[self.i] == "(":
                    self.balanced()
                items.append(("on", event))
            else:
                self.fail("'state', 'terminal state', 'on' or '}' in a state machine")

    def form(self):
        self.i += 1
        name = self.name("a form name after @form")
        self.expect("{", "'{' after the form name")
        k = self.k
        items = []
        while True:
            self.skip_sep()
            if k[self.i] == "}":
                self.i += 1
                return A.Decl(0, 0, "form", name, items)
            if k[self.i] != "ID":
                self.fail("'field', 'on_submit', 'success_redirect', 'error_message' or '}'")
            word = self.t[self.i]
            self.i += 1
            if word == "field":
                fname = self.name("a field name")
                self.expect(":", "':' after the field name")
                self.type_()
                items.append(fname)
                while k[self.i] == "ID":
                    mod = self.t[self.i]
                    if mod not in FORM_FLAGS and mod not in FORM_ARG and mod not in ("range", "default"):
                        break
                    self.i += 1
                    if mod in FORM_FLAGS:
                        continue
                    self.expect("(", f"'(' after '{mod}'")
                    if mod in FORM_ARG:
                        self.expect(FORM_ARG[mod], "a string" if FORM_ARG[mod] == "STR" else "a number")
                    elif mod == "range":
                        self.expect("INT", "the range start")
                        self.expect(".", "'..' in the range")
                        self.expect(".", "'..' in the range")
                        self.expect("INT", "the range end")
                    else:  # default(expr)
                        self.expr()
                    self.expect(")", f"')' after the {mod} argument")
                if k[self.i] not in ("NL", "}", ","):
                    self.fail("a field modifier (required, optional, hidden, label, pattern, "
                              "max_len, min_len, range, default) or newline")
            elif word == "on_submit":
                self.expect(":", "':' after on_submit")
                self.name("a handler name")
            elif word in ("success_redirect", "error_message"):
                self.expect(":", f"':' after {word}")
                self.expect("STR", "a string")
            else:
                self.fail("'field', 'on_submit', 'success_redirect' or 'error_message'", i=self.i - 1)

    def mobile(self):
        deco = self.k[self.i]
        self.i += 1
        self.expect("{", f"'{{' after {deco}")
        k = self.k
        items = []
        while True:
            self.skip_sep()
            if k[self.i] == "}":
                self.i += 1
                return A.Decl(0, 0, "mobile", deco[1:], items)
            key = self.t[self.expect("ID", "a setting name or '}'")]
            self.expect(":", f"':' after '{key}'")
            if k[self.i] == "STR":
                self.i += 1
            else:
                self.name("a name or string value")
            items.append(key)

    def tokens(self):
        self.i += 1
        self.expect("{", "'{' after @tokens")
        k = self.k
        items = []
        while True:
            self.skip_sep()
            if k[self.i] == "}":
                self.i += 1
                return A.Decl(0, 0, "tokens", None, items)
            word = self.t[self.expect("ID", "color, spacing, radius, shadow, font or '}'")]
            tname = self.name(f"a token name after '{word}'")
            if word == "color":
                self.word("light", "'light' in a color token")
                self.expect(":", "':' after 'light'")
                self.expect("STR", "a color string")
                if k[self.i] == ",":
                    self.i += 1
                self.word("dark", "'dark' in a color token")
                self.expect(":", "':' after 'dark'")
                self.expect("STR", "a color string")
            elif word in ("spacing", "radius", "shadow"):
                self.expect(":", f"':' after the {word} name")
                self.expect("STR", "a string value")
            elif word == "font":
                self.word("family", "'family' in a font token")
                self.expect(":", "':' after 'family'")
                self.expect("STR", "a font family string")
            else:
                self.fail("color, spacing, radius, shadow or font", i=self.i - 2)
            items.append((word, tname))

    def v0(self):
        self.i += 1
        k = self.k
        if self.is_word("from"):
            self.i += 1
        self.expect("STR", "a string after @v0")
        name = self.name("a component name")
        self.expect("{", "'{' after the component name")
        items = []
        while True:
            self.skip_sep()
            if k[self.i] == "}":
                self.i += 1
                return A.Decl(0, 0, "v0_component", name, items)
            items.append(self.name("a prop name or '}'"))
            if k[self.i] == "?":
                self.i += 1
            self.expect(":", "':' after the prop name")
            self.type_()

    def routes(self):
        self.i += 1
        self.expect("{", "'{' after 'routes'")
        items: list = []
        self.route_list(items)
        return A.Decl(0, 0, "routes", None, items)

    def route_list(self, items: list) -> None:
        """Route entries through the closing '}'."""
        k = self.k
        while True:
            self.skip_sep()
            t = k[self.i]
            if t == "}":
                self.i += 1
                return
            if t == "STR":
                path = self.t[self.i]
                self.i += 1
                self.expect("to", "'to' after the route path")
                target = self.name("a component name after 'to'")
                if k[self.i] == "with":
                    self.i += 1
                    if k[self.i] == "(":
                        self.i += 1
                        while True:
                            self.skip_nl()
                            if k[self.i] == ")":
                                break
                            self.route_kv()
                            self.skip_nl()
                            if k[self.i] == ",":
                                self.i += 1
                            elif k[self.i] != ")":
                                self.fail("',' or ')' in the route options")
                        self.i += 1
                    else:
                        self.route_kv()
                items.append((path, target))
                if k[self.i] == "{":
                    self.i += 1
                    self.route_list(items)
            elif t == "ID" and self.t[self.i] in ("not_found", "error") and k[self.i + 1] == ":":
                self.i += 2
                items.append((self.t[self.i - 2], self.name("a component name")))
            else:
                self.fail("a route path string, 'not_found:', 'error:' or '}'")

    def route_kv(self) -> None:
        if not (self.k[self.i] == "ID" and self.t[self.i] in ("loader", "pending", "error")):
            self.fail("loader, pending or error in the route options")
        self.i += 1
        self.expect(":", "':' after the route option")
        self.name("a name")

    def callable_(self, kind: str):
        name = self.name(f"a {kind} name")
        self.expect("(", f"'(' after the {kind} name")
        params = self.params()
        ret = self.ret()
        return A.Callable(0, 0, kind, name, params, ret, self.block_after(f"'{{' to start the {kind} body"))

    def workflow(self):
        if self.k[self.i] == "@distributed_train":
            self.i += 1
            self.balanced()
            self.skip_nl()
            if self.k[self.i] != "workflow":
                self.fail("'workflow' after @distributed_train(…)")
        self.i += 1
        return self.callable_("workflow")

    def activity(self):
        self.i += 1
        return self.callable_("activity")

    def actor(self):
        self.i += 1
        name = self.name("an actor name")
        self.expect("{", "'{' after the actor name")
        k = self.k
        handlers, state = [], []
        while True:
            self.skip_nl()
            t = k[self.i]
            if t == "}":
                self.i += 1
                return A.Actor(0, 0, name, handlers, state)
            h0 = self.i
            if t == "on":
                self.i += 1
                h = self.callable_("handler")
                h.start, h.end = self.s[h0], self.e[self.i - 1]
                handlers.append(h)
            elif t == "state":
                state.append(self.member())
            else:
                self.fail("'on' (a message handler) or '}' in an actor")

    # ------------------------------------------------------------ UI declarations

    def component(self):
        self.i += 1
        name = self.name("a component name")
        self.expect("(", "'(' after the component name")
        params = self.params()
        self.skip_nl()
        self.expect("{", "'{' to start the component body")
        k = self.k
        members = []
        while True:
            self.skip_nl()
            if k[self.i] == "}":
                self.i += 1
                break
            if k[self.i] == "EOF":
                self.fail("'}' to close the component")
            members.append(self.member())
        styles = []
        while True:
            j = self.i
            while k[j] == "NL":
                j += 1
            if k[j] == "ID" and self.t[j] in ("style", "raw_css") and k[j + 1] == "{":
                self.i = j + 2
                styles.append(self.style_rules())
            else:
                break
        return A.Component(0, 0, name, params, members, styles)

    def style_rules(self) -> list[str]:
        k = self.k
        classes = []
        while True:
            self.skip_nl()
            if k[self.i] == "}":
                self.i += 1
                return classes
            self.expect(".", "'.' and a class name, or '}'")
            classes.append(self.name("a class name"))
            self.expect("{", "'{' after the class name")
            while True:
                self.skip_sep()
                if k[self.i] == "}":
                    self.i += 1
                    break
                self.expect("ID", "a style property or '}'")
                self.expect(":", "':' after the style property")
                self.expect("STR", "a string value")

    def member(self):
        k, i = self.k, self.i
        t = k[i]
        if t == "state" or t == "derived":
            self.i += 1
            name = self.name(f"a name after '{t}'")
            typ = None
            if k[self.i] == ":":
                self.i += 1
                typ = self.type_()
            self.expect("=", f"'=' after the {t} name")
            value = self.expr()
            return A.ComponentMember(self.s[i], self.e[self.i - 1], t, name, typ, value)
        if t == "effect":
            self.i += 1
            deps = []
            if self.is_word("depends_on"):
                self.i += 1
                self.expect("(", "'(' after depends_on")
                if k[self.i] != ")":
                    deps.append(self.name("a name"))
                    while k[self.i] == ",":
                        self.i += 1
                        deps.append(self.name("a name"))
                self.expect(")", "')' after the dependencies")
            self.expect(":", "':' after 'effect'")
            body = self.block() if k[self.i] == "{" else self.expr()
            return A.ComponentMember(self.s[i], self.e[self.i - 1], "effect", None, None, body, deps)
        if t == "on" and k[i + 1] in ("mount", "cleanup"):
            self.i += 2
            self.expect(":", f"':' after 'on {k[i + 1]}'")
            body = self.block() if k[self.i] == "{" else self.expr()
            return A.ComponentMember(self.s[i], self.e[self.i - 1], k[i + 1], None, None, body)
        if t == "on":
            self.fail("'mount' or 'cleanup' after 'on'", i=i + 1)
        if t == "view":
            self.i += 1
            self.expect(":", "':' after 'view'")
            value = self.expr()
            return A.ComponentMember(self.s[i], self.e[self.i - 1], "view", None, None, value)
        return self.stmt()

    def fragment(self):
        self.i += 1
        name = self.name("a fragment name")
        self.expect("(", "'(' after the fragment name")
        params = self.params()
        self.skip_nl()
        self.expect("{", "'{' to start the fragment body")
        body = self.expr()
        self.skip_nl()
        self.expect("}", "'}' after the fragment's view expression")
        return A.Decl(0, 0, "fragment", name, params, body)

    # ------------------------------------------------------------ statements

    def block_after(self, what: str) -> A.Block:
        if self.k[self.i] != "{":
            j = self.i
            while self.k[j] == "NL":
                j += 1
            if self.k[j] != "{":
                self.fail(what)
            self.i = j
        return self.block()

    def block(self) -> A.Block:
        k = self.k
        b0 = self.i
        self.i += 1
        stmts = []
        while True:
            t = k[self.i]
            if t == "NL":
                self.i += 1
            elif t == "}":
                self.i += 1
                return A.Block(self.s[b0], self.e[self.i - 1], stmts)
            elif t == "EOF":
                self.fail("'}' to close the block")
            else:
                stmts.append(self.stmt())

    def stmt(self):
        k, i = self.k, self.i
        t = k[i]
        if t == "let":
            self.i += 1
            mut = k[self.i] == "mut"
            if mut:
                self.i += 1
            pat = self.pattern()
            typ = None
            if k[self.i] == ":":
                self.i += 1
                typ = self.type_()
            self.expect("=", "'=' after the let pattern")
            value = self.expr()
            return A.Let(self.s[i], self.e[self.i - 1], pat, mut, typ, value)
        if t == "return":
            self.i += 1
            value = None if k[self.i] in NO_RETURN_VALUE else self.binary(0)
            return A.Return(self.s[i], self.e[self.i - 1], value)
        if t == "while":
            self.i += 1
            cond = self.expr()
            body = self.block_after("'{' after the while condition")
            return A.While(self.s[i], self.e[self.i - 1], cond, body)
        if t == "loop":
            self.i += 1
            body = self.block_after("'{' after 'loop'")
            return A.Loop(self.s[i], self.e[self.i - 1], body)
        if t == "break" or t == "continue":
            self.i += 1
            return A.Jump(self.s[i], self.e[i], t)
        if t not in EXPR_START:
            self.fail("a statement", STMT_HINTS.get(t, ""))
        e = self.binary(0)
        t = k[self.i]
        if t in ASSIGN:
            self.i += 1
            value = self.expr()
            return A.Assign(self.s[i], self.e[self.i - 1], e, t, value)
        return A.ExprStmt(e.start, e.end, e)

    def pattern(self) -> A.Pattern:
        k, i = self.k, self.i
        t = k[i]
        self.i = i + 1
        if t == "ID":
            return A.Pattern(self.s[i], self.e[i], "bind", self.t[i])
        if t == "_":
            return A.Pattern(self.s[i], self.e[i], "wild")
        if t == "TY" or t == "(":
            items = []
            if t == "(" or k[self.i] == "(":
                if t == "TY":
                    self.i += 1
                while k[self.i] != ")":
                    items.append(self.pattern())
                    if k[self.i] == ",":
                        self.i += 1
                    elif k[self.i] != ")":
                        self.fail("',' or ')' in the pattern",
                                  "patterns cannot span lines" if k[self.i] == "NL" else "")
                self.i += 1
            kind = "ctor" if t == "TY" else "tuple"
            return A.Pattern(self.s[i], self.e[self.i - 1], kind, self.t[i] if t == "TY" else None, items)
        if t == "INT" or t == "STR":
            return A.Pattern(self.s[i], self.e[i], t.lower(), self.t[i])
        self.i = i
        self.fail("a pattern", "patterns cannot span lines" if t == "NL" else "")

    # ------------------------------------------------------------ expressions

    def expr(self):
        k = self.k
        while k[self.i] == "NL":
            self.i += 1
        return self.binary(0)

    def binary(self, min_bp: int):
        k = self.k
        t = k[self.i]
        if t == "not" or t == "-":
            i0 = self.i
            self.i += 1
            operand = self.postfix()
            left = A.Unary(self.s[i0], operand.end, t, operand)
        else:
            left = self.postfix()
        while True:
            op = k[self.i]
            bp = BINARY.get(op)
            if bp is None:
                if op == "?":
                    self.i += 1
                    left = A.Try(left.start, self.e[self.i - 1], left)
                    continue
                return left
            if bp <= min_bp:
                return left
            self.i += 1
            if k[self.i] == "NL":
                self.fail(f"an expression after '{op}'", "the right operand must be on the same line")
            right = self.binary(bp)
            left = A.Binary(left.start, right.end, op, left, right)

    def postfix(self):
        k = self.k
        i0 = self.i
        e = self.primary()
        if k[self.i] not in POSTFIX:
            return e
        bare = self.i == i0 + 1 and (k[i0] == "ID" or k[i0] == "TY")
        while True:
            t = k[self.i]
            if t == "(":
                e = self.call(e, bare)
            elif t == ".":
                self.i += 1
                name = self.name("a member name after '.'")
                e = A.Member(e.start, self.e[self.i - 1], e, name)
            elif t == "[":
                self.i += 1
                idx = self.expr()
                self.skip_nl()
                self.expect("]", "']' after the index")
                e = A.Index(e.start, self.e[self.i - 1], e, idx)
            else:
                return e
            bare = False

    def call(self, callee, bare: bool) -> A.Call:
        k, t = self.k, self.t
        self.i += 1
        args = []
        named = True
        while True:
            while k[self.i] == "NL":
                self.i += 1
            a0 = self.i
            if k[a0] == ")":
                break
            if k[a0] == "ID" and k[a0 + 1] == "=":
                name = t[a0]
                if name.startswith("attr_"):
                    name = name[5:]
                self.i += 2
                value = self.expr()
            else:
                name = None
                named = False
                value = self.expr()
            args.append(A.Arg(self.s[a0], value.end, name, value))
            while k[self.i] == "NL":
                self.i += 1
            if k[self.i] == ",":
                self.i += 1
            elif k[self.i] != ")":
                self.fail("',' or ')' in the argument list")
        self.i += 1
        node = A.Call(callee.start, self.e[self.i - 1], callee, args)
        if bare and named:
            cname = callee.name
            if cname[0].isupper() or cname in PRIMITIVES or cname in HTML_TAGS:
                node.view = True
                j = self.i
                while k[j] == "NL":
                    j += 1
                if k[j] == "{":
                    self.i = j + 1
                    node.children = self.children()
                    node.end = self.e[self.i - 1]
        return node

    def children(self) -> list:
        """View children after '{': expressions separated by newlines or commas, through '}'."""
        k = self.k
        kids = []
        while True:
            t = k[self.i]
            if t == "NL" or t == ",":
                self.i += 1
            elif t == "}":
                self.i += 1
                return kids
            elif t == "EOF":
                self.fail("'}' to close the view children")
            else:
                kids.append(self.binary(0))

    def primary(self):
        k, i = self.k, self.i
        t = k[i]
        if t == "ID" or t == "TY":
            if k[i + 1] == "=>":
                self.i = i + 2
                body = self.expr()
                p = A.Param(self.s[i], self.e[i], self.t[i])
                return A.Lambda(self.s[i], body.end, [p], None, body)
            self.i = i + 1
            return A.Name(self.s[i], self.e[i], self.t[i])
        if t in LITERAL:
            self.i = i + 1
            return A.Literal(self.s[i], self.e[i], t, self.t[i])
        handler = PRIMARY.get(t)
        if handler is None:
            self.fail("an expression", EXPR_HINTS.get(t, "an expression must start on the same line"
                                                      if t == "NL" else ""))
        return handler(self)

    def literal_bool(self):
        i = self.i
        self.i += 1
        return A.Literal(self.s[i], self.e[i], "bool", self.t[i])

    def keyword_name(self):
        i = self.i
        self.i += 1
        return A.Name(self.s[i], self.e[i], self.t[i])

    def paren(self):
        k = self.k
        i0 = self.i
        self.i += 1
        self.skip_nl()
        if k[self.i] == ")":
            self.i += 1
            if k[self.i] == "=>":
                raise self.error("'() => x' is not supported; write fn() x")
            return A.Literal(self.s[i0], self.e[self.i - 1], "unit", "()")
        items = [self.expr()]
        self.skip_nl()
        tup = False
        while k[self.i] == ",":
            tup = True
            self.i += 1
            self.skip_nl()
            if k[self.i] == ")":
                break
            items.append(self.expr())
            self.skip_nl()
        self.expect(")", "')'" if tup else "')' to close the parenthesis")
        if k[self.i] == "=>":
            if not all(type(x) is A.Name and x.name[0].islower() for x in items):
                raise self.error("a lambda's parameters must be plain names")
            self.i += 1
            body = self.expr()
            params = [A.Param(x.start, x.end, x.name) for x in items]
            return A.Lambda(self.s[i0], body.end, params, None, body)
        if tup:
            return A.TupleLit(self.s[i0], self.e[self.i - 1], items)
        return items[0]

    def list_lit(self):
        k = self.k
        i0 = self.i
        self.i += 1
        items = []
        while True:
            self.skip_nl()
            if k[self.i] == "]":
                break
            items.append(self.expr())
            self.skip_nl()
            if k[self.i] == ",":
                self.i += 1
            elif k[self.i] != "]":
                self.fail("',' or ']' in the list")
        self.i += 1
        return A.ListLit(self.s[i0], self.e[self.i - 1], items)

    def brace(self):
        """`{}` empty object, `{ key: …` object, anything else a block."""
        k = self.k
        i0 = self.i
        j = i0 + 1
        while k[j] == "NL":
            j += 1
        if k[j] == "}":
            self.i = j + 1
            return A.ObjectLit(self.s[i0], self.e[j], [])
        if not ((k[j] == "ID" or k[j] == "STR" or k[j] == "TY") and k[j + 1] == ":"):
            return self.block()
        self.i = j
        entries = []
        while True:
            kt = k[self.i]
            if kt != "ID" and kt != "STR" and kt != "TY":
                self.fail("an object key")
            key = self.t[self.i]
            self.i += 1
            self.expect(":", "':' after the object key")
            entries.append((key, self.expr()))
            if k[self.i] == ",":
                self.i += 1
                self.skip_nl()
                if k[self.i] == "}":
                    break
                continue
            self.skip_nl()
            if k[self.i] != "}":
                self.fail("',' or '}' in the object", "object entries are separated by commas")
            break
        self.i += 1
        return A.ObjectLit(self.s[i0], self.e[self.i - 1], entries)

    def if_expr(self):
        k = self.k
        i0 = self.i
        self.i += 1
        cond = self.expr()
        then = self.block_after("'{' after the if condition")
        orelse = None
        j = self.i
        while k[j] == "NL":
            j += 1
        if k[j] == "else":
            self.i = j + 1
            self.skip_nl()
            orelse = self.if_expr() if k[self.i] == "if" else self.block_after("'{' or 'if' after 'else'")
        return A.If(self.s[i0], self.e[self.i - 1], cond, then, orelse)

    def match_expr(self):
        k = self.k
        i0 = self.i
        self.i += 1
        subject = self.expr()
        self.skip_nl()
        self.expect("{", "'{' after the match subject")
        arms = []
        while True:
            self.skip_nl()
            if k[self.i] == "}":
                break
            a0 = self.i
            pat = self.pattern()
            if k[self.i] == "->":
                raise self.error("expected '=>' after the match pattern, found '->' (match arms use '=>')")
            self.expect("=>", "'=>' after the match pattern")
            t = k[self.i]
            if t == "return":
                r0 = self.i
                self.i += 1
                value = None if k[self.i] in NO_RETURN_VALUE else self.binary(0)
                body = A.Return(self.s[r0], self.e[self.i - 1], value)
            elif t == "break" or t == "continue":
                self.i += 1
                body = A.Jump(self.s[self.i - 1], self.e[self.i - 1], t)
            else:
                body = self.expr()
            arms.append(A.MatchArm(self.s[a0], self.e[self.i - 1], pat, body))
            self.skip_nl()
            if k[self.i] == ",":
                self.i += 1
        self.i += 1
        return A.Match(self.s[i0], self.e[self.i - 1], subject, arms)

    def for_expr(self):
        k = self.k
        i0 = self.i
        self.i += 1
        names = [self.name("a loop variable after 'for'")]
        if k[self.i] == ",":
            self.i += 1
            names.append(self.name("a second loop variable"))
        self.expect("in", "'in' after the loop variable")
        iterable = self.expr()
        key = None
        if self.is_word("key") and k[self.i + 1] == "=":
            self.i += 2
            key = self.expr()
        body = self.expr()
        return A.For(self.s[i0], self.e[self.i - 1], names, iterable, key, body)

    def lambda_expr(self):
        k = self.k
        i0 = self.i
        cancellable = k[i0] == "@cancellable"
        if cancellable:
            self.i += 1
            self.skip_nl()
            if k[self.i] != "fn":
                self.fail("'fn' after @cancellable")
        self.i += 1
        if k[self.i] in NAME:
            self.fail("'(' after 'fn' in a lambda", "named functions are declared at top level")
        self.expect("(", "'(' after 'fn'")
        params = self.params()
        ret = self.ret()
        body = self.expr()
        return A.Lambda(self.s[i0], body.end, params, ret, body, cancellable)

    def spawn(self):
        i0 = self.i
        self.i += 1
        self.expect("(", "'(' after 'spawn'")
        inner = self.expr()
        self.skip_nl()
        self.expect(")", "')' after the spawned expression")
        return A.Special(self.s[i0], self.e[self.i - 1], "spawn", inner)

    def side_effect(self):
        i0 = self.i
        self.i += 1
        body = self.block_after("'{' after 'side_effect'")
        return A.Special(self.s[i0], body.end, "side_effect", body)

    def workflow_version(self):
        i0 = self.i
        self.i += 1
        self.expect(".", "'.version(…)' after 'workflow' in an expression")
        self.word("version", "'version' after 'workflow.'")
        if self.k[self.i] != "(":
            self.fail("'(' after workflow.version")
        call = self.call(A.Name(self.s[i0], self.e[i0], "workflow"), False)
        return A.Special(self.s[i0], call.end, "workflow.version", call)


DISPATCH = {
    "import": Parser.import_decl, "extern": Parser.extern_fn, "component": Parser.component,
    "fragment": Parser.fragment, "@v0": Parser.v0, "let": Parser.const, "async": Parser.async_fn,
    "type": Parser.type_decl, "@table": Parser.table, "@index": Parser.index, "@form": Parser.form,
    "@back_button": Parser.mobile, "@push": Parser.mobile, "@deep_link": Parser.mobile,
    "@tokens": Parser.tokens, "@distributed_train": Parser.workflow, "workflow": Parser.workflow,
    "activity": Parser.activity, "actor": Parser.actor,
    **{d: Parser.dispatch_fn for d in ("@test", "@forall", "@scheduled", "@endpoint", "@mcp.tool",
                                        "@tool", "@mcp.resource", "@resource", "@loading")},
}
RETIRED_FORMS = {
    "http": "top-level `http` routes are retired; use @endpoint(kind: …) functions",
    "agent": "`agent` declarations are retired; use actor, workflow or @ai functions",
    "env": "`env` blocks are retired; read settings with env.get(\"NAME\")",
    "<": "angle-bracket JSX is not Vox; write view calls such as Column() { Text(value = \"hi\") }",
    "@component": "`@component fn` is retired; declare `component Name(…) { … }`",
}
PRIMARY = {
    "true": Parser.literal_bool, "false": Parser.literal_bool, "(": Parser.paren,
    "[": Parser.list_lit, "{": Parser.brace, "if": Parser.if_expr, "match": Parser.match_expr,
    "for": Parser.for_expr, "fn": Parser.lambda_expr, "@cancellable": Parser.lambda_expr,
    "spawn": Parser.spawn, "side_effect": Parser.side_effect, "workflow": Parser.workflow_version,
    "env": Parser.keyword_name, "to": Parser.keyword_name, "http": Parser.keyword_name,
}
EXPR_START = frozenset(PRIMARY) | LITERAL | {"ID", "TY", "not", "-"}
EXPR_HINTS = {
    "<": "angle-bracket JSX is not Vox; write view calls",
    "USTR": "",
}
STMT_HINTS = {
    "+": "an operator cannot start a line; keep it on the line of its left operand",
    "*": "an operator cannot start a line; keep it on the line of its left operand",
    "/": "an operator cannot start a line; keep it on the line of its left operand",
    "and": "an operator cannot start a line; keep it on the line of its left operand",
    "or": "an operator cannot start a line; keep it on the line of its left operand",
    "|>": "an operator cannot start a line; keep it on the line of its left operand",
    ".": "'.' must be on the same line as the expression before it ('?' ends a postfix chain)",
    "<": "angle-bracket JSX is not Vox; write view calls",
    "fn": "named functions are declared at top level",
}


@contextmanager
def gc_paused():
    """The AST is acyclic, so the cyclic collector only costs time while it is built: on a
    multi-megabyte source its full passes alone halve the parse speed."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse(text: str, script: bool = False) -> A.Module:
    """Parse a Vox source; raises VoxParseError on the first syntax error."""
    with gc_paused():
        return Parser(text, script).run()
