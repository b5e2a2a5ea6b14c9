"""The Vox parser: recursive descent for declarations and statements, Pratt for expressions.

It follows `vox-syntax.md` (the reference Rust parser's behaviour): newline tokens are explicit,
so "an operator must be on the same line as its left operand" is simply "the next token is not
NL"; places where the spec allows newlines skip them by hand. Where the spec is silent the parser
leans towards accepting (real programs that the reference accepts must parse here), but every
rejection the spec lists is kept. The token lists come from `lexer.Lexed`; the parser walks them
by index, which is what makes it fast enough (see bench/vox_parse.py).

This module holds the core (helpers, module loop, declaration dispatch, functions and types);
`decorators.py`, `decls.py`, `config.py`, `ui.py` and `exprs.py` are mixins with the rest of the
grammar.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager

from mens.lang.vox import ast as A
from mens.lang.vox.config import ConfigParser
from mens.lang.vox.decls import DeclParser
from mens.lang.vox.decorators import DecoratorParser
from mens.lang.vox.exprs import ExprParser
from mens.lang.vox.grammar import (AI_DECOS, DECL_WORDS, FN_DECO, FN_DECO_BALANCED, FN_DECO_BARE,
                                   FN_DECO_EXPR, FN_DECO_ITEMS, NAME, RETIRED_DECORATORS,
                                   RETIRED_FORMS, SCRIPT_DECL, VoxParseError, _describe)
from mens.lang.vox.lexer import lexed
from mens.lang.vox.stmts import StmtParser
from mens.lang.vox.ui import UIParser

__all__ = ["Parser", "VoxParseError", "parse", "gc_paused"]


class Parser(DecoratorParser, DeclParser, ConfigParser, UIParser, StmtParser, ExprParser):
    def __init__(self, text: str, script: bool = False):
        lx = lexed(text)
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

    def glued_at(self, i: int) -> int | None:
        """Offset of the '@' when token `i` is what is left of an unknown decorator: the
        reference drops `@` plus the longest prefix of a known decorator (`@server` -> `@se`
        dropped, `rver` kept), so token `i` directly follows a dropped `@…`."""
        j = self.s[i]
        text = self.text
        while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_."):
            j -= 1
        if j > 0 and text[j - 1] == "@" and j - 1 in self.lx.dropped:
            return j - 1
        return None

    def unknown_decorator(self, i: int) -> VoxParseError:
        """The error for an unknown or retired decorator, reported at its '@'."""
        at = self.glued_at(i)
        word = self.text[at + 1:self.e[i]]
        line, col = self.lx.line_col(at)
        return VoxParseError(line, col, RETIRED_DECORATORS.get(word) or f"unknown decorator '@{word}'", at)

    def fail(self, what: str, hint: str = "", i: int | None = None):
        i = self.i if i is None else i
        kind = self.k[i]
        if kind == "EOF":
            msg = f"unexpected end of input: expected {what}"
        else:
            msg = f"expected {what}, found {_describe(kind, self.t[i])}"
            if hint:
                msg += f" ({hint})"
        if self.lx.open_strings and self.lx.open_strings[0] < self.s[i]:
            # The reference drops an unclosed string and fails later; say where it began.
            line, col = self.lx.line_col(self.lx.open_strings[0])
            msg += f" (after an unterminated string literal at {line}:{col})"
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

    def last_end(self) -> int:
        """End offset of the last non-newline token consumed."""
        j = self.i - 1
        while j > 0 and self.k[j] == "NL":
            j -= 1
        return self.e[j] if j >= 0 else 0

    def starts_decl(self, i: int) -> bool:
        """Whether token `i` can begin a module-level declaration."""
        t = self.k[i]
        return (t in DISPATCH or t in FN_DECO or t == "fn" or t == "pub"
                or (t == "ID" and self.t[i] in DECL_WORDS))

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
        if t == "http" or t == "env" or t == "agent":   # retired declarations, even here
            return True
        # As in the reference, these words start a declaration whatever follows them.
        return t == "ID" and self.t[self.i] in ("routes", "url", "state_machine")

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
            if nt == "fn" or (nt in FN_DECO and nt != "@reactive"):   # as in the reference
                return self.fn_decl("function", [], pub=True)
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
            if self.glued_at(i) is None:
                self.fail("a declaration")
            raise self.unknown_decorator(i)
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
            elif d in FN_DECO_ITEMS or d in FN_DECO_BALANCED:
                self.i += 1
                args = None
                if k[self.i] == "(":
                    args = self.balanced(parens_only=True) if d in FN_DECO_BALANCED else self.deco_items(d)
                decos.append(A.Decorator(self.s[d0], self.e[self.i - 1], d, args))
            elif d in FN_DECO_EXPR:
                self.i += 1
                a0 = self.i
                self.expect("(", f"'(' after {d}")
                self.expr()
                if d == "@ensure" and k[self.i] == ",":
                    self.i += 1
                    if self.is_word("fallback"):    # `, fallback: name` (the `,` alone is fine)
                        self.i += 1
                        self.expect(":", "':' after 'fallback'")
                        self.name("a fallback function name")
                self.expect(")", f"')' to close {d}")
                decos.append(A.Decorator(self.s[d0], self.e[self.i - 1], d,
                                         self.text[self.s[a0]:self.e[self.i - 1]]))
            elif d == "@component":
                raise self.error("`@component fn` is retired; declare `component Name(…) { … }`")
            elif d == "ID" and self.glued_at(self.i) is not None:
                raise self.unknown_decorator(self.i)
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
        if k[self.i] == "{":
            body = self.block()
        elif not any(dec.name in AI_DECOS and dec.name != "@hole" for dec in decos):
            # The body's '{' must be on the signature's line; only model-written functions
            # (@ai, @prompt, @subagent, @search — not @hole) may leave it out.
            self.fail("'{' to start the function body",
                      "the '{' must be on the same line" if k[self.i] == "NL" else "")
        return A.Function(0, 0, kind, name, params, ret, body, decos, generics, uses, pub, is_async)

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

    def extern_fn(self):
        self.i += 1
        self.expect("fn", "'fn' after 'extern'")
        name = self.name("a function name")
        self.expect("(", "'(' after the function name")
        params = self.params()
        ret = self.ret()
        self.expect("=", "'=' and the native symbol string after an extern fn")
        if self.k[self.i] != "STR" and self.k[self.i] != "SSTR":
            self.fail("the native symbol string")
        self.i += 1
        return A.Function(0, 0, "function", name, params, ret, None, [A.Decorator(0, 0, "extern")])

    def async_fn(self):
        self.i += 1
        if self.k[self.i] == "@reactive":  # the reference takes modifiers after `async`, not @reactive
            self.fail("'fn' after 'async'")
        return self.fn_decl("function", [], is_async=True)


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
