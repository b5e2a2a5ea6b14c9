"""UI declarations: components (state, derived, effects, lifecycle hooks, view, style blocks)
and fragments. A mixin of `parser.Parser` (it uses its helpers)."""

from __future__ import annotations

from mens.lang.vox import ast as A
from mens.lang.vox.grammar import NAME


class UIParser:
    def component(self):
        self.i += 1
        name = self.name("a component name")
        self.expect("(", "'(' after the component name")
        params = self.params()
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
        j = self.i
        while k[j] == "NL":
            j += 1
        if k[j] == "ID" and self.t[j] in ("style", "raw_css"):
            self.i = j
            styles = self.style_rules()
        return A.Component(0, 0, name, params, members, styles)

    def style_rules(self) -> list[str]:
        """The style block after a component, as the reference reads it: a loop over `style {`
        headers (so `style {` may repeat inside an open block), `.class { property: "value" … }`
        rules and `}` (after which only a header on the `}`'s line goes on: `} style {`); where
        a rule does not go on as expected the block simply ends, and the module loop meets that
        token (so `color: red` fails at `red`, "unexpected at top level"); end of input ends it
        quietly. Only `.` without a class name is an error of the block itself."""
        k = self.k
        classes: list[str] = []
        while True:
            self.skip_nl()
            t = k[self.i]
            if self.style_header_here():
                self.i += 1
                if k[self.i] != "{":
                    return classes
                self.i += 1
                continue
            if t == "}":
                self.i += 1
                if not self.style_header_here():
                    return classes
                continue                                    # a header on the `}`'s line goes on
            if t != ".":
                return classes
            self.i += 1
            if k[self.i] not in NAME:                        # soft keywords are fine: `.state`, `.type`
                self.fail("a class name after '.'")
            classes.append(self.t[self.i])
            self.i += 1
            if k[self.i] != "{":
                if k[self.i] == "}" or self.style_header_here():
                    continue                                # `.a }`, `.a style {`: the loop goes on
                return classes
            self.i += 1
            # `property: "value"` lines through '}'. Whatever does not fit ends the rule without
            # being taken, and the block loop above looks at it; a property may lack its value
            # (and then its ':') only right before the '}'.
            while True:
                self.skip_nl()
                if k[self.i] == "}":
                    self.i += 1
                    break
                if k[self.i] != "ID":
                    break
                self.i += 1
                if k[self.i] == ":":
                    self.i += 1
                    if k[self.i] == "STR":
                        self.i += 1
                        continue
                if k[self.i] == "}":
                    self.i += 1
                break

    def style_header_here(self) -> bool:
        return self.k[self.i] == "ID" and self.t[self.i] in ("style", "raw_css")

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
                while k[self.i] != ")":          # names, each but the last followed by ','
                    deps.append(self.name("a name"))
                    if k[self.i] != ",":
                        break
                    self.i += 1
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
        self.expect("{", "'{' to start the fragment body")
        body = self.expr()
        self.skip_nl()
        self.expect("}", "'}' after the fragment's view expression")
        return A.Decl(0, 0, "fragment", name, params, body)
