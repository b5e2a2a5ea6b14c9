"""Blocks, statements (let, return, while, loop, break/continue, assignment), patterns, and the
expression forms that hold blocks or arms (if, match, for). A mixin of `parser.Parser` (it uses its
helpers and `exprs.ExprParser`'s expression methods)."""

from __future__ import annotations

from mens.lang.vox import ast as A
from mens.lang.vox.grammar import ASSIGN, EXPR_START, NO_RETURN_VALUE, STMT_HINTS


class StmtParser:
    def block_after(self, what: str) -> A.Block:
        """A block whose '{' must be on the line of what precedes it (the reference rejects a
        newline before a block's '{' everywhere but after `else`)."""
        if self.k[self.i] != "{":
            self.fail(what, "the '{' must be on the same line" if self.k[self.i] == "NL" else "")
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

    # ------------------------------------------------------------ block-holding expressions

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
        # The reference looks past newlines for `else` and does not step back when there is
        # none: after an `if` without `else`, the next line may go on with an operator (`.b`,
        # `and x`, `+ 1`) as if it were on the line of the `}`.
        self.i = j
        if k[j] == "else":
            self.i = j + 1
            self.skip_nl()
            orelse = self.if_expr() if k[self.i] == "if" else self.block_after("'{' or 'if' after 'else'")
        return A.If(self.s[i0], (orelse or then).end, cond, then, orelse)

    def match_expr(self):
        k = self.k
        i0 = self.i
        self.i += 1
        subject = self.expr()
        self.expect("{", "'{' after the match subject")
        arms = []
        while True:
            self.skip_nl()
            if k[self.i] == "}":
                break
            if k[self.i] == "EOF":              # the reference ends an open match quietly at EOF
                return A.Match(self.s[i0], self.e[self.i - 1], subject, arms)
            a0 = self.i
            pat = self.pattern()
            if k[self.i] == "->":
                # The reference takes the `->` and reports at the token after it.
                raise self.error("expected '=>' after the match pattern, found '->' (match arms use '=>')",
                                 self.i + 1)
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
        if self.is_word("key"):                 # `key = expr`: the reference takes `key` as a keyword here
            self.i += 1
            self.expect("=", "'=' after 'key'")
            key = self.expr()
        body = self.expr()
        return A.For(self.s[i0], self.e[self.i - 1], names, iterable, key, body)
