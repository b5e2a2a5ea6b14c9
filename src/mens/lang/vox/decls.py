"""Declarations other than functions: constants, imports, types and tables, url, state
machines, forms, mobile blocks, design tokens, v0, routes, workflows, activities and actors.
A mixin of `parser.Parser` (it uses its helpers)."""

from __future__ import annotations

from mens.lang.vox import ast as A
from mens.lang.vox.grammar import FN_DECO, FORM_ARG, FORM_FLAGS, NAME, SEG

RUST_META = frozenset(("version", "path", "git", "rev", "branch"))  # `branch` too, unlisted in the reference's message
DECL_WORDS = frozenset(("routes", "url", "state_machine", "partial"))
DECL_START = frozenset(("import extern component fragment @v0 let async type @table @index @form "
                        "@back_button @push @deep_link @tokens @distributed_train workflow activity "
                        "actor fn pub @test @forall @scheduled @endpoint @mcp.tool @tool @mcp.resource "
                        "@resource @loading").split())
TOKEN_KINDS = frozenset(("color", "spacing", "radius", "shadow", "font"))


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
        if (k[i] == "ID" and self.t[i] == "react" and k[i + 1] in ("ID", "TY")
                and k[i + 2] == "ID" and self.t[i + 2] == "from" and k[i + 3] in ("STR", "SSTR")):
            # `react Name from "module"` (either quote); anything else after `react` is a path.
            self.i += 4
            return self.t[i + 1]
        if k[i] == "ID" and self.t[i] == "rust" and k[i + 1] == ":":
            self.i += 2
            if k[self.i] not in ("ID", "TY"):
                self.fail("a crate name after 'rust:'", "for example import rust:serde_json")
            crate = self.t[self.i]
            self.i += 1
            if k[self.i] == "(":
                self.rust_metadata()
            if self.is_word("as"):
                self.i += 1
                crate = self.name("a name after 'as'")
            return crate
        if k[i] not in SEG:
            self.fail("a module path after 'import'")
        self.i += 1
        # A '.' or '/' not followed by a segment ends the path (the reference leaves what
        # follows to the module loop).
        while k[self.i] in (".", "/"):
            self.i += 1
            if k[self.i] not in SEG:
                break
            self.i += 1
        path = self.text[self.s[i]:self.e[self.i - 1]]
        if self.is_word("as"):
            self.i += 1
            if k[self.i] == "{":
                self.import_names()
            else:
                self.name("a name after 'as'")
        return path

    def rust_metadata(self) -> None:
        """`( [key ":" value {"," key ":" value} [","]] )` on one line; key is version, path,
        git or rev, value a double-quoted string or a name."""
        k = self.k
        self.i += 1
        while k[self.i] != ")":
            if k[self.i] != "ID":
                self.fail("a crate option (version, path, git, rev) or ')'",
                          "the crate options must be on one line" if k[self.i] == "NL" else "")
            key = self.t[self.i]
            if key not in RUST_META:
                self.fail("a crate option (version, path, git, rev)")
            self.i += 1
            self.expect(":", f"':' after '{key}'")
            if k[self.i] not in ("STR", "ID", "TY"):
                self.fail(f"a double-quoted string or a name as the value of '{key}'")
            self.i += 1
            if k[self.i] == ",":
                self.i += 1
            elif k[self.i] != ")":
                self.fail("',' or ')' after the crate option",
                          "the crate options must be on one line" if k[self.i] == "NL" else "")
        self.i += 1

    def import_names(self) -> None:
        """`as { Name [as name] {"," Name [as name]} [","] }` on one line."""
        k = self.k
        self.i += 1
        while k[self.i] != "}":
            if k[self.i] not in ("ID", "TY"):
                self.fail("a name in the import list or '}'",
                          "the import list must be on one line" if k[self.i] == "NL" else "")
            self.i += 1
            if self.is_word("as"):
                self.i += 1
                self.name("a name after 'as'")
            if k[self.i] == ",":
                self.i += 1
            elif k[self.i] != "}":
                self.fail("',' or '}' in the import list",
                          "the import list must be on one line" if k[self.i] == "NL" else "")
        self.i += 1

    def fields_block(self) -> list[A.Field]:
        """`{ NL* { name ":" type [","] NL* } }` (struct and table bodies): the ',' on the
        field's line. Like the reference, a body left open at the end of the file is accepted."""
        self.expect("{", "'{' to start the fields")
        k = self.k
        fields = []
        while True:
            self.skip_nl()
            if k[self.i] == "}":
                self.i += 1
                return fields
            if k[self.i] == "EOF":
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
        if not variants and not self.script and (
                k[self.i] == "TY" or k[self.i] == "ID" and self.t[self.i] not in DECL_WORDS):
            # The module loop would reject the name too (`type T =` then a declaration is valid;
            # in a script a statement may follow).
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
        while self.k[self.i] != ")":        # `( [name {"," name} [","]] )` on one line
            cols.append(self.name("a column name"))
            if self.k[self.i] != ",":
                break
            self.i += 1
        self.expect(")", "')' after the indexed columns")
        return A.Decl(0, 0, "index", f"{table}.{name}", cols)

    def entries(self, entry) -> list:
        """The entries of a configuration block through its closing '}' (the '{' is already
        consumed): newlines between entries and no commas (the reference takes none in
        tokens, form, mobile, @v0 and routes blocks). `entry()` parses one and returns what
        the declaration records of it (None: nothing)."""
        k = self.k
        items = []
        while True:
            while k[self.i] == "NL":
                self.i += 1
            if k[self.i] == "}":
                self.i += 1
                return items
            item = entry()
            if item is not None:
                items.append(item)

    def url_decl(self):
        self.i += 1
        name = self.name("a name after 'url'")
        self.expect("{", "'{' after the url name")
        k = self.k
        items = []
        while True:
            while k[self.i] == "NL":
                self.i += 1
            if k[self.i] == "}":
                self.i += 1
                return A.Decl(0, 0, "url", name, items)
            items.append(self.url_entry())
            if k[self.i] == ",":            # at most one, on the entry's line
                self.i += 1

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
        k = self.k
        items = []
        while True:
            while k[self.i] == "NL":
                self.i += 1
            if k[self.i] == "}":
                self.i += 1
                return A.Decl(0, 0, "state_machine", name, items)
            items.append(self.state_machine_entry())
            if k[self.i] == ",":            # at most one, on the entry's line
                self.i += 1

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
            self.word("light", "'light' in a color token")
            self.expect(":", "':' after 'light'")
            self.string("a color string")
            self.word("dark", "'dark' in a color token")
            self.expect(":", "':' after 'dark'")
            self.string("a color string")
        elif word == "font":
            self.word("family", "'family' in a font token")
            self.expect(":", "':' after 'family'")
            self.string("a font family string")
        else:
            self.expect(":", f"':' after the {word} name")
            self.string("a string value")
        return (word, tname)

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
        k = self.k
        props = []
        while True:
            while k[self.i] == "NL":
                self.i += 1
            t = k[self.i]
            if t == "}":
                self.i += 1
                break
            if t == "EOF":          # the reference accepts a props block left open at the end
                break
            props.append(self.v0_prop())
        return A.Decl(0, 0, "v0_component", name, props)

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

    def starts_decl(self, i: int) -> bool:
        """Whether token `i` can begin a module-level declaration."""
        t = self.k[i]
        return t in DECL_START or t in FN_DECO or (t == "ID" and self.t[i] in DECL_WORDS)

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
        if self.k[self.i] != "ID":
            self.fail("loader, pending or error in the route options")
        key = self.t[self.i]
        self.i += 1
        self.expect(":", f"':' after '{key}'")
        self.name("a name")
        if key not in ("loader", "pending", "error"):
            self.fail("loader, pending or error in the route options", i=self.i - 3)

    def callable_(self, kind: str):
        name = self.name(f"a {kind} name")
        self.expect("(", f"'(' after the {kind} name")
        params = self.params()
        ret = self.ret()
        return A.Callable(0, 0, kind, name, params, ret, self.block_after(f"'{{' to start the {kind} body"))

    def workflow(self):
        if self.k[self.i] == "@distributed_train":
            self.i += 1
            self.train_args()
            self.skip_nl()
            if self.k[self.i] != "workflow":
                self.fail("'workflow' after @distributed_train(…)")
        self.i += 1
        return self.callable_("workflow")

    def train_args(self) -> None:
        """`@distributed_train( NL* [item {"," NL* item} [","]] )`: an item is `name = token`
        (`strategy` takes a string or an identifier) or a single token of another kind."""
        k = self.k
        self.expect("(", "'(' after @distributed_train")
        self.skip_nl()
        while k[self.i] != ")":
            t = k[self.i]
            if t == "EOF":
                self.fail("')' to close @distributed_train(…)")
            self.i += 1
            if t == "ID":
                key = self.t[self.i - 1]
                self.expect("=", f"'=' after '{key}'")
                if key == "strategy" and k[self.i] not in ("STR", "SSTR", "ID"):
                    self.fail("a string or an identifier as the strategy")
                if k[self.i] == "EOF":
                    self.fail(f"a value for '{key}'")
                self.i += 1                 # the value: one token
            if k[self.i] != ",":
                break
            self.i += 1
            self.skip_nl()
        self.expect(")", "')' to close @distributed_train(…)")

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
            else:
                self.fail("'on' (a message handler) or '}' in an actor",
                          "an actor holds only message handlers" if t == "state" else "")
