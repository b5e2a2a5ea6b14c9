"""Expressions: the Pratt parser with the view-call rule, calls and their children, primaries,
lambdas and the keyword forms (spawn, side_effect, workflow.version). A mixin of `parser.Parser`
(it uses its helpers); the block-holding forms (if, match, for) are in `stmts`."""

from __future__ import annotations

from bisect import bisect_left

from mens.lang.vox import ast as A
from mens.lang.vox.grammar import (BINARY, EXPR_HINTS, EXPR_START, HTML_TAGS, LITERAL, NAME, POSTFIX,
                                   PRIMITIVES, _describe)
from mens.lang.vox.stmts import StmtParser


class ExprParser:
    def expr(self):
        k = self.k
        while k[self.i] == "NL":
            self.i += 1
        return self.binary(0)

    def binary(self, min_bp: int):
        k = self.k
        t = k[self.i]
        left = self.unary() if t == "not" or t == "-" else self.postfix()
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

    def unary(self):
        """`not` and `-` nest (`not not x`, `- -x`, `- not x`)."""
        i0 = self.i
        op = self.k[i0]
        self.i += 1
        t = self.k[self.i]
        operand = self.unary() if t == "not" or t == "-" else self.postfix()
        return A.Unary(self.s[i0], operand.end, op, operand)

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
            if t == "NL":
                self.i += 1
            elif t == "}":
                self.i += 1
                return kids
            elif t == "EOF":
                self.fail("'}' to close the view children")
            else:
                kids.append(self.binary(0))
                self.skip_nl()
                if k[self.i] == ",":            # one ',' may follow a child, none may lead
                    self.i += 1

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
            # `()` is not a value in Vox (nor `() => x`: write `fn() x`).
            if k[self.i + 1] == "=>":
                raise self.error("'() => x' is not supported; write fn() x")
            self.fail("an expression", "'()' is not a value; Vox has no unit literal")
        items = [self.expr()]
        tup = False
        # A ',' must follow its item on the same line; a newline may precede the ')'.
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
            items = self.lambda_params(items, tup)
            self.i += 1
            body = self.expr()
            params = [A.Param(x.start, x.end, x.name) for x in items]
            return A.Lambda(self.s[i0], body.end, params, None, body)
        if tup:
            return A.TupleLit(self.s[i0], self.e[self.i - 1], items)
        return items[0]

    def lambda_params(self, items: list, tup: bool) -> list:
        """`(…) =>`: the parameters are names, or one parenthesised tuple of names (`((a, b))`);
        the reference reports the first item that is neither."""
        if not tup and type(items[0]) is A.TupleLit:
            items = items[0].items
        elif not tup and type(items[0]) is not A.Name:
            raise self.error("expected a name or a tuple of names as the lambda's parameters",
                             self.index_at(items[0].start))
        for x in items:
            if type(x) is not A.Name:
                raise self.error("a lambda's parameters must be plain names", self.index_at(x.start))
        return items

    def index_at(self, offset: int) -> int:
        """The token index of a character offset (error positions of already-parsed nodes)."""
        return bisect_left(self.s, offset)

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
        # A key and ':' make it an object; the reference looks past newlines for the ':' (and
        # then rejects them: `{ a NL : 1 }` is an object whose ':' is misplaced, not a block).
        if not (k[j] == "ID" or k[j] == "STR" or k[j] == "SSTR" or k[j] == "TY"):
            return self.block()
        j2 = j + 1
        while k[j2] == "NL":
            j2 += 1
        if k[j2] != ":":
            return self.block()
        self.i = j
        entries = []
        while True:
            kt = k[self.i]
            if kt != "ID" and kt != "STR" and kt != "SSTR" and kt != "TY":
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

    def lambda_expr(self):
        k = self.k
        i0 = self.i
        cancellable = k[i0] == "@cancellable"
        if cancellable and k[self.i + 1] != "EOF":
            # The reference takes the token after @cancellable as its `fn` unseen (not EOF).
            self.i += 1
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
        if self.k[self.i] in NAME and self.t[self.i] != "version":
            # The reference takes any name here and only then finds it wrong: at the next token.
            raise self.error(f"expected 'version' after 'workflow.', found {_describe(self.k[self.i], self.t[self.i])}",
                             self.i + 1)
        self.word("version", "'version' after 'workflow.'")
        if self.k[self.i] != "(":
            self.fail("'(' after workflow.version")
        call = self.call(A.Name(self.s[i0], self.e[i0], "workflow"), False)
        # The reference checks the values (names are ignored, extra arguments allowed):
        # a string literal, then two non-negative integer literals.
        for n, kinds in ((1, ("STR", "SSTR")), (2, ("INT",)), (3, ("INT",))):
            arg = call.args[n - 1].value if len(call.args) >= n else None
            if not (type(arg) is A.Literal and arg.kind in kinds):
                what = "a string literal" if n == 1 else "a non-negative integer literal"
                raise self.error(f"workflow.version argument {n} must be {what}", i0)
        return A.Special(self.s[i0], call.end, "workflow.version", call)


PRIMARY = {
    "true": ExprParser.literal_bool, "false": ExprParser.literal_bool, "(": ExprParser.paren,
    "[": ExprParser.list_lit, "{": ExprParser.brace, "if": StmtParser.if_expr, "match": StmtParser.match_expr,
    "for": StmtParser.for_expr, "fn": ExprParser.lambda_expr, "@cancellable": ExprParser.lambda_expr,
    "spawn": ExprParser.spawn, "side_effect": ExprParser.side_effect, "workflow": ExprParser.workflow_version,
    "env": ExprParser.keyword_name, "to": ExprParser.keyword_name, "http": ExprParser.keyword_name,
}
assert EXPR_START == frozenset(PRIMARY) | LITERAL | {"ID", "TY", "not", "-"}, "grammar.EXPR_START is out of date"
