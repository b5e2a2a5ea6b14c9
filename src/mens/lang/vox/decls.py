"""Declarations other than functions and configuration blocks: constants, imports, types and
tables, indexes, workflows, activities and actors. A mixin of `parser.Parser` (it uses its
helpers)."""

from __future__ import annotations

from mens.lang.vox import ast as A
from mens.lang.vox.grammar import DECL_WORDS, SEG

RUST_META = frozenset(("version", "path", "git", "rev", "branch"))  # `branch` too, unlisted in the reference's message


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
        if (not self.script and k[i] == "ID" and self.t[i] == "react" and k[i + 1] in ("ID", "TY") and (
                k[i + 2] == "EOF" or (k[i + 2] == "ID" and self.t[i + 2] == "from" and k[i + 3] == "EOF"))
                and self.lx.line_col(self.s[-1])[0] == self.lx.line_col(self.s[i + 1])[0]):
            # Cut off on its way to `react Name from "module"`: an error at the end of the input
            # (on the same line as the reference's, which reads `Name` as a stray token), so a
            # prefix of the import is viable. Not when the end is on a later line (an
            # unterminated string ran there), and not in script mode, where the reference reads
            # `import react` and then `Name from` as statements, and accepts them.
            if k[i + 2] == "EOF":
                self.i = i + 2
                self.fail("'from \"module\"' after 'import react Name'")
            self.i = i + 3
            self.fail("a module string after 'from'")
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
            self.i += 1
            self.expect(":", f"':' after '{key}'")
            if k[self.i] not in ("STR", "ID", "TY"):
                self.fail(f"a double-quoted string or a name as the value of '{key}'")
            self.i += 1
            if key not in RUST_META:   # the reference checks the key once it has its value
                raise self.error(f"unknown crate option '{key}' (expected version, path, git or rev)")
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
