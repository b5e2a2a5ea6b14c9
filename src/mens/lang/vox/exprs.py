"""Statements and expressions: blocks, let/return/loops/assignment, patterns, and the Pratt
expression parser with the view-call rule. A mixin of `parser.Parser` (it uses its helpers)."""

from __future__ import annotations

from bisect import bisect_left

from mens.lang.vox import ast as A
from mens.lang.vox.grammar import (ASSIGN, BINARY, EXPR_HINTS, HTML_TAGS, LITERAL, NAME,
                                   NO_RETURN_VALUE, POSTFIX, PRIMITIVES, STMT_HINTS)


class ExprParser:
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

    # ------------------------------------------------------------ expressions

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
        if self.is_word("key"):                 # `key = expr`: the reference takes `key` as a keyword here
            self.i += 1
            self.expect("=", "'=' after 'key'")
            key = self.expr()
        body = self.expr()
        return A.For(self.s[i0], self.e[self.i - 1], names, iterable, key, body)

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
    "[": ExprParser.list_lit, "{": ExprParser.brace, "if": ExprParser.if_expr, "match": ExprParser.match_expr,
    "for": ExprParser.for_expr, "fn": ExprParser.lambda_expr, "@cancellable": ExprParser.lambda_expr,
    "spawn": ExprParser.spawn, "side_effect": ExprParser.side_effect, "workflow": ExprParser.workflow_version,
    "env": ExprParser.keyword_name, "to": ExprParser.keyword_name, "http": ExprParser.keyword_name,
}
EXPR_START = frozenset(PRIMARY) | LITERAL | {"ID", "TY", "not", "-"}
