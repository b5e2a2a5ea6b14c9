"""Declarations other than functions: constants, imports, types and tables, url, state
machines, forms, mobile blocks, design tokens, v0, routes, workflows, activities and actors.
A mixin of `parser.Parser` (it uses its helpers)."""

from __future__ import annotations

from mens.lang.vox import ast as A
from mens.lang.vox.grammar import FORM_ARG, FORM_FLAGS, NAME, SEG


class DeclParser:
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
        return A.Decl(0, 0, "url", name, self.braced(self.url_entry))

    def url_entry(self):
        k = self.k
        entry = self.name("a url entry name or '}'")
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
        return entry

    def state_machine(self):
        if self.is_word("partial"):
            self.i += 1
        self.word("state_machine", "'state_machine'")
        name = self.name("a state machine name")
        self.expect("{", "'{' after the state machine name")
        return A.Decl(0, 0, "state_machine", name, self.braced(self.state_machine_entry))

    def state_machine_entry(self):
        k = self.k
        t = k[self.i]
        if self.is_word("terminal"):
            self.i += 1
            t = k[self.i]
            if t != "state":
                self.fail("'state' after 'terminal'")
        if t == "state":
            self.i += 1
            entry = ("state", self.name("a state name"))
            if k[self.i] == "(":
                self.balanced()
            return entry
        if t == "on":
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
            return ("on", event)
        self.fail("'state', 'terminal state', 'on' or '}' in a state machine")

    def form(self):
        self.i += 1
        name = self.name("a form name after @form")
        self.expect("{", "'{' after the form name")
        return A.Decl(0, 0, "form", name, self.braced(self.form_entry))

    def form_entry(self):
        """A field (its name is recorded), on_submit, success_redirect or error_message."""
        k = self.k
        if k[self.i] != "ID":
            self.fail("'field', 'on_submit', 'success_redirect', 'error_message' or '}'")
        word = self.t[self.i]
        self.i += 1
        if word == "field":
            fname = self.name("a field name")
            self.expect(":", "':' after the field name")
            self.type_()
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
            return fname
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
        return A.Decl(0, 0, "mobile", deco[1:], self.braced(self.mobile_entry))

    def mobile_entry(self):
        key = self.t[self.expect("ID", "a setting name or '}'")]
        self.expect(":", f"':' after '{key}'")
        if self.k[self.i] == "STR":
            self.i += 1
        else:
            self.name("a name or string value")
        return key

    def tokens(self):
        self.i += 1
        self.expect("{", "'{' after @tokens")
        return A.Decl(0, 0, "tokens", None, self.braced(self.token_entry))

    def token_entry(self):
        k = self.k
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
        return (word, tname)

    def v0(self):
        self.i += 1
        if self.is_word("from"):
            self.i += 1
        self.expect("STR", "a string after @v0")
        name = self.name("a component name")
        self.expect("{", "'{' after the component name")
        return A.Decl(0, 0, "v0_component", name, self.braced(self.v0_prop))

    def v0_prop(self):
        prop = self.name("a prop name or '}'")
        if self.k[self.i] == "?":
            self.i += 1
        self.expect(":", "':' after the prop name")
        self.type_()
        return prop

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
