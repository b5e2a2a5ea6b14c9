"""Configuration declarations: url, state machines, forms, mobile blocks, design tokens, @v0
and routes. The reference reads them entry by entry with newlines between (commas only where
noted), and some of them end quietly at end of input. A mixin of `parser.Parser`."""

from __future__ import annotations

from mens.lang.vox import ast as A
from mens.lang.vox.grammar import FORM_ARG, FORM_FLAGS, NAME

TOKEN_KINDS = frozenset(("color", "spacing", "radius", "shadow", "font"))


class ConfigParser:
    def entries(self, entry, one_comma: bool = False, open_at_eof: bool = False) -> list:
        """The entries of a configuration block through its closing '}' (the '{' is already
        consumed): newlines between entries and no commas (the reference takes none in
        tokens, form, mobile, @v0 and routes blocks; url and state-machine entries may each be
        followed by one, on their line: `one_comma`; @v0 props may be left open at the end of
        input: `open_at_eof`). `entry()` parses one and returns what the declaration records of
        it (None: nothing)."""
        k = self.k
        items = []
        while True:
            while k[self.i] == "NL":
                self.i += 1
            if k[self.i] == "}":
                self.i += 1
                return items
            if open_at_eof and k[self.i] == "EOF":
                return items
            item = entry()
            if item is not None:
                items.append(item)
            if one_comma and k[self.i] == ",":
                self.i += 1

    def url_decl(self):
        self.i += 1
        name = self.name("a name after 'url'")
        self.expect("{", "'{' after the url name")
        return A.Decl(0, 0, "url", name, self.entries(self.url_entry, one_comma=True))

    def url_entry(self):
        """`name ["(" NL* [param {"," NL* param} [","]] ")"]`, param = ["?"] name ":" type;
        newlines may follow '(' and ',', not a parameter."""
        k = self.k
        entry = self.name("a url entry name or '}'")
        if k[self.i] == "(":
            self.i += 1
            self.skip_nl()
            while k[self.i] != ")":
                if k[self.i] == "?":
                    self.i += 1
                self.name("a url parameter name")
                self.expect(":", "':' after the url parameter")
                self.type_()
                if k[self.i] == ",":
                    self.i += 1
                    self.skip_nl()
                elif k[self.i] != ")":
                    self.fail("',' or ')' in the url parameters",
                              "')' must be on the line of the last parameter" if k[self.i] == "NL" else "")
            self.i += 1
        return entry

    def state_machine(self):
        if self.is_word("partial"):
            self.i += 1
        self.word("state_machine", "'state_machine'")
        name = self.name("a state machine name")
        self.expect("{", "'{' after the state machine name")
        return A.Decl(0, 0, "state_machine", name, self.entries(self.state_machine_entry, one_comma=True))

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
                self.name_list(True)
            return entry
        if t == "on":
            self.i += 1
            event = self.name("an event name after 'on'")
            if k[self.i] == "(":
                self.name_list(False)
            self.word("from", "'from' after the event")
            if self.is_word("any"):
                self.i += 1
            else:
                self.name("a source state or 'any'")
                if k[self.i] == "(":
                    self.paren_skip()
            self.expect("->", "'->' before the target state")
            self.name("a target state")
            if k[self.i] == "(":
                self.paren_skip()
            return ("on", event)
        self.fail("'state', 'terminal state', 'on' or '}' in a state machine")

    def name_list(self, typed: bool) -> None:
        """`( NL* [name [":" type] {"," NL* name [":" type]} [","]] )`: state payload fields
        (`typed`) or event parameters (names only); ')' on the last item's line."""
        k = self.k
        self.i += 1
        self.skip_nl()
        while k[self.i] != ")":
            self.name("a state field name" if typed else "an event parameter name")
            if typed and k[self.i] == ":":
                self.i += 1
                self.type_()
            if k[self.i] == ",":
                self.i += 1
                self.skip_nl()
            elif k[self.i] != ")":
                self.fail("',' or ')'", "')' must be on the line of the last item" if k[self.i] == "NL" else "")
        self.i += 1

    def paren_skip(self) -> None:
        """A transition's state payload: anything through the matching ')' (only parentheses
        nest)."""
        k = self.k
        self.i += 1
        depth = 1
        while True:
            t = k[self.i]
            if t == "(":
                depth += 1
            elif t == ")":
                depth -= 1
                if not depth:
                    self.i += 1
                    return
            elif t == "EOF":
                self.fail("')' to close the state payload")
            self.i += 1

    def form(self):
        self.i += 1
        name = self.name("a form name after @form")
        self.expect("{", "'{' after the form name")
        return A.Decl(0, 0, "form", name, self.entries(self.form_entry))

    def form_entry(self):
        """A field (its name is recorded), on_submit, success_redirect or error_message; an
        entry may follow on the same line."""
        k = self.k
        word = self.t[self.i] if k[self.i] == "ID" else ""
        if word not in ("field", "on_submit", "success_redirect", "error_message"):
            self.fail("'field', 'on_submit', 'success_redirect', 'error_message' or '}' in a form",
                      "form entries are not separated by commas" if k[self.i] == "," else "")
        self.i += 1
        if word == "field":
            fname = self.name("a field name")
            self.expect(":", "':' after the field name")
            self.type_()
            while k[self.i] == "ID":
                mod = self.t[self.i]
                if mod in FORM_FLAGS:
                    self.i += 1
                    continue
                if mod not in FORM_ARG and mod != "range" and mod != "default":
                    break
                self.i += 1
                self.expect("(", f"'(' after '{mod}'")
                if mod in FORM_ARG:
                    self.expect(FORM_ARG[mod], "a double-quoted string" if FORM_ARG[mod] == "STR" else "an integer")
                elif mod == "range":
                    self.expect("INT", "the range start (an integer)")
                    self.expect(".", "'..' in the range")
                    self.expect(".", "'..' in the range")
                    self.expect("INT", "the range end (an integer)")
                else:  # default(expr)
                    self.expr()
                self.expect(")", f"')' after the {mod} argument")
            return fname
        self.expect(":", f"':' after {word}")
        if word == "on_submit":
            self.name("a handler name")
        else:
            self.expect("STR", "a double-quoted string")

    def mobile(self):
        deco = self.k[self.i]
        self.i += 1
        self.expect("{", f"'{{' after {deco}")
        entry = self.deep_link_entry if deco == "@deep_link" else self.mobile_entry
        return A.Decl(0, 0, "mobile", deco[1:], self.entries(entry))

    def mobile_entry(self):
        """`key: Name` (@back_button, @push: a name, not a string)."""
        key = self.t[self.expect("ID", "a setting name (lower-case) or '}'")]
        self.expect(":", f"':' after '{key}'")
        self.name(f"a name as the value of '{key}'")
        return key

    def deep_link_entry(self):
        """`key: "string" | name` (@deep_link)."""
        key = self.t[self.expect("ID", "a setting name (lower-case) or '}'")]
        self.expect(":", f"':' after '{key}'")
        if self.k[self.i] not in ("STR", "ID", "TY"):
            self.fail(f"a double-quoted string or a name as the value of '{key}'")
        self.i += 1
        return key

    def tokens(self):
        self.i += 1
        self.expect("{", "'{' after @tokens")
        return A.Decl(0, 0, "tokens", None, self.entries(self.token_entry))

    def token_entry(self):
        k = self.k
        if k[self.i] != "ID":
            self.fail("color, spacing, radius, shadow, font or '}'",
                      "token entries are not separated by commas" if k[self.i] == "," else "")
        word = self.t[self.i]
        self.i += 1
        tname = self.name(f"a token name after '{word}'")
        if word not in TOKEN_KINDS:
            self.fail("color, spacing, radius, shadow or font", i=self.i - 2)
        if word == "color":
            self.token_key("light", "'light' in a color token")
            self.expect(":", "':' after 'light'")
            self.string("a color string")
            self.token_key("dark", "'dark' in a color token")
            self.expect(":", "':' after 'dark'")
            self.string("a color string")
        elif word == "font":
            self.token_key("family", "'family' in a font token")
            self.expect(":", "':' after 'family'")
            self.string("a font family string")
        else:
            self.expect(":", f"':' after the {word} name")
            self.string("a string value")
        return (word, tname)

    def token_key(self, word: str, what: str) -> None:
        """`light`, `dark` or `family`: the reference reads any name there and only then finds
        it wrong, so a wrong one (`Light`, `view`) is reported at the token after it."""
        got = self.name(what)
        if got != word:
            raise self.error(f"expected {what}, found '{got}'")

    def string(self, what: str) -> None:
        """A string in either quote."""
        if self.k[self.i] != "STR" and self.k[self.i] != "SSTR":
            self.fail(what)
        self.i += 1

    def v0(self):
        self.i += 1
        if self.is_word("from"):
            self.i += 1
            self.expect("STR", "a double-quoted image path after '@v0 from'")
        else:
            self.expect("STR", "a double-quoted v0 chat id or 'from \"path\"' after @v0")
        name = self.name("a component name")
        self.expect("{", "'{' after the component name")
        return A.Decl(0, 0, "v0_component", name, self.entries(self.v0_prop, open_at_eof=True))

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
        k = self.k
        items: list = []
        while True:
            while k[self.i] == "NL":
                self.i += 1
            t = k[self.i]
            if t == "}":
                self.i += 1
                break
            if t == "STR":
                self.route(items)
            elif t == "ID" and self.t[self.i] in ("not_found", "error"):
                self.i += 1
                self.expect(":", f"':' after '{self.t[self.i - 1]}'")
                items.append((self.t[self.i - 2], self.name("a component name")))
            else:
                # The reference ends the routes at anything else and leaves it, '}' or not, to
                # the module loop (so a block left open at the end of the file is accepted).
                # Where the module loop is bound to reject it, say what a routes block holds.
                if t != "EOF" and not self.script and not self.starts_decl(self.i):
                    self.fail("a route path (a double-quoted string), 'not_found:', 'error:' or '}'",
                              "route entries are not separated by commas" if t == "," else "")
                break
        return A.Decl(0, 0, "routes", None, items)

    def route(self, items: list) -> None:
        """`"path" to Name [with …] [{ nested routes }]`."""
        k = self.k
        path = self.t[self.i]
        self.i += 1
        self.expect("to", "'to' between the route path and the component name")
        target = self.name("a component name after 'to'")
        if k[self.i] == "with":
            self.i += 1
            if k[self.i] == "(":
                # `( [kv {"," kv} [","]] )` on one line
                self.i += 1
                while k[self.i] != ")":
                    self.route_kv()
                    if k[self.i] == ",":
                        self.i += 1
                    elif k[self.i] != ")":
                        self.fail("',' or ')' in the route options",
                                  "the route options must be on one line" if k[self.i] == "NL" else "")
                self.i += 1
            else:
                self.route_kv()
        items.append((path, target))
        if k[self.i] == "{":
            self.i += 1
            while True:
                while k[self.i] == "NL":
                    self.i += 1
                t = k[self.i]
                if t == "}":
                    self.i += 1
                    return
                if t != "STR":
                    self.fail("a route path (a double-quoted string) or '}' in the nested routes",
                              "route entries are not separated by commas" if t == "," else "")
                self.route(items)

    def route_kv(self) -> None:
        """`key: name`. Any name is read as the key (`Cache`, `view`); the reference checks it
        only once it has the value, so an unknown key is reported at the token after it."""
        if self.k[self.i] not in NAME:
            self.fail("loader, pending or error in the route options")
        key = self.t[self.i]
        self.i += 1
        self.expect(":", f"':' after '{key}'")
        self.name("a name")
        if key not in ("loader", "pending", "error"):
            raise self.error(f"unknown route option '{key}' (expected loader, pending or error)")
