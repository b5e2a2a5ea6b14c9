"""Function decorators and their arguments, each with the reference's own argument grammar
(see FN_DECO_ITEMS and FN_DECO_TYPED_KEYS in grammar.py), the dispatching decorators that make a
function a test, endpoint, tool … and the `uses` effects. A mixin of `parser.Parser`."""

from __future__ import annotations

from mens.lang.vox import ast as A
from mens.lang.vox.grammar import EFFECTS, FN_DECO_ITEMS, FN_DECO_TYPED_KEYS


class DecoratorParser:
    def balanced(self, parens_only: bool = False) -> str:
        """A parenthesised argument list taken verbatim (decorator arguments); with
        `parens_only` only `(` and `)` count, as the reference does for @auth and its kin."""
        start = self.i
        self.expect("(", "'('")
        depth, k = 1, self.k
        opens, closes = (("(",), (")",)) if parens_only else (("(", "[", "{"), (")", "]", "}"))
        while depth:
            t = k[self.i]
            if t == "EOF":
                self.fail("')' to close the argument list")
            if t in opens:
                depth += 1
            elif t in closes:
                depth -= 1
            self.i += 1
        return self.text[self.s[start]:self.e[self.i - 1]]

    def deco_items(self, deco: str) -> str:
        """`( item, … )` of a decorator whose items are single tokens or keyed values (see
        FN_DECO_ITEMS and FN_DECO_TYPED_KEYS)."""
        k = self.k
        keys = FN_DECO_ITEMS[deco]
        start = self.i
        self.i += 1
        self.skip_nl()
        while k[self.i] != ")":
            if k[self.i] == "ID" and keys is not None:
                sep, required, untyped_any = keys
                typed = FN_DECO_TYPED_KEYS.get((deco, self.t[self.i]))
                if type(typed) is tuple:
                    typed, sep, required = typed[0], typed[1], True
                self.i += 1
                if required:
                    self.expect(sep, f"'{sep}' after the argument name")
                elif sep and k[self.i] == sep:
                    self.i += 1
                if typed is None and untyped_any:
                    self.any_token()
                elif typed is not None and k[self.i] in typed:
                    self.i += 1
                    if k[self.i - 1] == "[":
                        self.token_list("]")
            else:
                self.any_token()
            if k[self.i] != ",":
                break
            self.i += 1
            self.skip_nl()
        self.expect(")", "')' to close the decorator arguments")
        return self.text[self.s[start]:self.e[self.i - 1]]

    def any_token(self) -> None:
        if self.k[self.i] == "EOF":
            self.fail("')' to close the decorator arguments")
        self.i += 1

    def token_list(self, close: str) -> None:
        """Single tokens separated by commas through `close` (its opener already consumed):
        newlines may follow the opener and each ',', not an item."""
        k = self.k
        self.skip_nl()
        while k[self.i] != close:
            if k[self.i] == "EOF":
                self.fail(f"'{close}'")
            self.i += 1
            if k[self.i] != ",":
                break
            self.i += 1
            self.skip_nl()
        self.expect(close, f"'{close}'")

    def effect(self) -> str:
        i = self.i
        if self.k[i] not in ("ID", "env") or self.t[i] not in EFFECTS:
            self.fail("an effect (net, db, fs, env, clock, random, nothing, mutate, gpu_compute, mcp)")
        self.i += 1
        if self.t[i] == "mcp" and self.k[self.i] == "(":
            self.i += 1
            if self.k[self.i] not in ("ID", "TY"):
                self.fail("an MCP tool name inside mcp(…)")
            self.i += 1
            self.expect(")", "')' after the MCP server name")
        return self.t[i]

    def endpoint_empty(self) -> None:
        """`@endpoint()` and `@endpoint(kind: )`: the reference takes the `)` and reports the
        missing kind at the token after it (a later line after an unterminated string)."""
        if self.k[self.i] == ")":
            raise self.error("expected kind: query, mutation or server in @endpoint(…)", self.i + 1)

    def dispatch_fn(self):
        """Functions led by a dispatching decorator: @test @forall @scheduled @endpoint @mcp.* @loading."""
        k = self.k
        d0 = self.i
        d = k[d0]
        self.i += 1
        args = None
        if d == "@test":
            # After `(`, the string and the `)` are each optional in the reference.
            kind = "test"
            a0 = self.i
            if k[self.i] == "(":
                for part in ("(", "STR", ")"):
                    if k[self.i] == part:
                        self.i += 1
                args = self.text[self.s[a0]:self.e[self.i - 1]]
        elif d == "@forall":
            # The reference skips to the first ')' (or takes one string), then one more ')' may follow.
            kind = "forall"
            if k[self.i] == "(":
                a0 = self.i
                self.i += 1
                if k[self.i] == "STR":
                    self.i += 1
                else:
                    while k[self.i] != ")" and k[self.i] != "EOF":
                        self.i += 1
                    if k[self.i] == ")":
                        self.i += 1
                if k[self.i] == ")":
                    self.i += 1
                args = self.text[self.s[a0]:self.e[self.i - 1]]
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
            self.endpoint_empty()
            self.word("kind", "'kind' in @endpoint(kind: …)")
            self.expect(":", "':' after 'kind'")
            which = self.t[self.i] if k[self.i] == "ID" else ""
            kind = {"query": "query", "mutation": "mutation", "server": "server_fn"}.get(which)
            if kind is None:
                self.endpoint_empty()
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
