"""Grammar-driven random Vox programs for bench/vox_conformance.py (the differential fuzzer).

Built from ../shared/vox-syntax.md and checked against the reference parser: every construct kind
of the taxonomy (functions with every decorator, types/ADTs, tables, indexes, url, state_machine,
form, mobile blocks, tokens, v0, routes, components with state/derived/effects/view/styles,
fragments, workflows/activities, actors, imports incl. rust imports, consts, extern fn), plus
statements, match and patterns, lambdas, view calls and every operator. One program holds one
top-level declaration (its construct kind is the program's) or, now and then, two of the same
kind (next line, after a blank line or on the same line), sometimes after an import.

A program is built as a token list and rendered with indentation. A "noisy" program has edits
sprinkled in at its tokens' boundaries at some rate: a newline, a comma, swapped quotes, a
character that forms no token (; ! &), or a newline removed. Its clean twin is kept so the
fuzzer can check that the generator's clean output is valid Vox.

    python bench/vox_grammar_gen.py [--seed 0] [--n 5] [--construct component] [--noisy]
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass

NL = "\n"

LOWER = ("a", "b", "n", "x", "y", "count", "total", "items", "user", "note", "title", "body",
         "score", "limit", "acc", "value", "name", "ident", "rows", "query", "owner", "tag",
         "step", "price", "done", "flag", "result", "day", "page", "size")
CALLEES = ("compute", "len", "str", "fetch_rows", "log", "save", "load_user", "format", "sum",
           "max_of", "parse_int", "notify", "assert", "now", "render", "split", "trim")
METHODS = ("get", "set", "map", "filter", "push", "len", "insert", "find", "all", "to_upper", "id")
TYPES = ("User", "Note", "Task", "Item", "Order", "Shape", "Status", "Profile")
CTORS = ("Ok", "Error", "Some", "None", "Circle", "Rect", "Active", "Done", "Pending")
PRIM_TYPES = ("int", "str", "bool", "float", "dec", "Unit")
GENERIC_TYPES = ("List", "Option", "Result", "Map", "Set", "Tensor")
VIEWS_UPPER = ("Column", "Row", "Text", "Button", "Card", "Stack", "Panel", "Heading", "Image",
               "Link", "NoteCard", "Avatar", "Badge")
VIEWS_LOWER = ("column", "row", "text", "button", "card", "stack", "panel", "heading", "image",
               "link", "list", "list_item", "toast", "modal", "drawer", "overlay", "wrap",
               "input", "label", "span", "svg", "path")
VIEW_ATTRS = ("gap", "padding", "value", "on_click", "variant", "size", "title", "src", "href",
              "attr_type", "attr_class", "checked", "on_change", "placeholder")
BINOPS = ("|>", "or", "and", "with", "is", "isnt", "==", "!=", "<", ">", "<=", ">=", "+", "-",
          "*", "/", "%")
COMPARE = ("==", "!=", "<", ">", "<=", ">=", "is", "isnt")
EFFECTS = ("net", "db", "fs", "env", "clock", "random", "nothing", "mutate", "gpu_compute")
STRINGS = ("hi", "hello world", "notes://list", "Count: ", "x", "", "a \\\"quoted\\\" word",
           "line\\nbreak", "it's", "/notes/:id", "0 4 * * *", "#2563eb", "4px", "Inter, sans-serif")
SOFT_DECL_NAMES = ("type", "on", "state", "derived", "effect", "mount", "cleanup", "view",
                   "component", "http", "env", "to", "in")

# decorators that take no arguments; decorators with their own argument shapes
BARE_DECOS = ("@pure", "@reactive", "@remote", "@deprecated", "@fuzz", "@native", "@training_step")
COLON_KV_DECOS = ("@webhook", "@cors", "@rate_limit", "@layer", "@embed", "@auth",
                  "@offline_capable", "@collaborative")
AI_DECOS = ("@ai", "@prompt", "@subagent", "@search")

CONSTRUCTS = ("function", "extern", "type", "import", "const", "mcp_tool", "mcp_resource", "test",
              "forall", "table", "index", "v0_component", "routes", "scheduled", "loading",
              "component", "fragment", "query", "mutation", "server_fn", "url", "state_machine",
              "workflow", "activity", "actor", "form", "mobile", "tokens", "ai_function")
# what the taxonomy calls each generator construct (extern fn is a function)
TAXONOMY_KIND = {"extern": "function"}


@dataclass
class Generated:
    construct: str
    text: str
    clean_text: str
    noisy: bool
    detail: str = ""
    first_noise_line: int = 0
    expect_ok: bool = True  # False for the must-reject forms


class Gen:
    """One program's random choices; methods append tokens to self.out."""

    def __init__(self, rng: random.Random, max_depth: int = 3):
        self.r = rng
        self.out: list[str] = []
        self.max_depth = max_depth
        self.open_ended = False  # the last primary swallows what follows (for, lambda): stop there

    # ---- helpers
    def t(self, *toks: str) -> None:
        self.out.extend(toks)

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def pick(self, seq):
        return self.r.choice(seq)

    def lower(self) -> str:
        return self.pick(LOWER)

    def typename(self) -> str:
        return self.pick(TYPES)

    def decl_name(self, upper: bool = False) -> str:
        if self.chance(0.04):
            return self.pick(SOFT_DECL_NAMES)
        if upper:
            return self.pick(TYPES) + self.pick(("", "View", "Page", "2"))
        return self.pick(LOWER) + self.pick(("", "_all", "_one", "2"))

    def string(self, double: bool = False) -> str:
        s = self.pick(STRINGS)
        if double or "'" in s or not self.chance(0.25):
            return '"' + s + '"'
        return "'" + s.replace('\\"', '"') + "'"

    def nl(self) -> None:
        self.out.append(NL)

    def comma_list(self, items, fn, sep_nl: bool = False) -> None:
        for i, it in enumerate(items):
            if i:
                self.t(",")
                if sep_nl:
                    self.nl()
            fn(it)

    # ---- types
    def type_(self, d: int = 0) -> None:
        k = self.r.random()
        if d >= 2 or k < 0.55:
            self.t(self.pick(PRIM_TYPES + TYPES))
        elif k < 0.85:
            g = self.pick(GENERIC_TYPES)
            self.t(g, "[")
            if g == "Tensor":
                self.t(str(self.r.randint(1, 3)))
            elif g in ("Result", "Map"):
                self.type_(d + 1)
                self.t(",")
                self.type_(d + 1)
            else:
                self.type_(d + 1)
            self.t("]")
        elif k < 0.95:
            self.t("fn", "(")
            self.comma_list(range(self.r.randint(0, 2)), lambda _: self.type_(d + 1))
            self.t(")")
            if self.chance(0.6):
                self.t("to")
                self.type_(d + 1)
        else:
            self.t("_")

    # ---- expressions
    def literal(self) -> None:
        k = self.r.randint(0, 6)
        if k == 0:
            self.t(str(self.r.choice((0, 1, 2, 10, 42, 1000))))
        elif k == 1:
            self.t(self.pick(("0.5", "3.14", "1.0")))
        elif k == 2:
            self.t(self.pick(("0.1dec", "2dec", "19.99dec")))
        elif k in (3, 4):
            self.t(self.string())
        else:
            self.t(self.pick(("true", "false")))

    def simple(self) -> None:
        """An atom that is safe anywhere (before a block's `{`, too)."""
        k = self.r.random()
        if k < 0.45:
            self.t(self.lower())
        elif k < 0.75:
            self.literal()
        elif k < 0.9:
            self.t(self.lower(), ".", self.lower())
        else:
            self.t(self.pick(CALLEES), "(")
            self.comma_list(range(self.r.randint(0, 2)), lambda _: self.simple())
            self.t(")")

    def cond(self) -> None:
        """A condition followed by a block: no view calls, objects or lambdas in it."""
        k = self.r.random()
        if k < 0.5:
            self.simple()
            self.t(self.pick(COMPARE))
            self.simple()
        elif k < 0.65:
            self.t("not")
            self.simple()
        elif k < 0.85:
            self.simple()
            self.t(self.pick(COMPARE))
            self.simple()
            self.t(self.pick(("and", "or")))
            self.simple()
        else:
            self.simple()

    def args(self, d: int, named_only: bool = False) -> None:
        self.t("(")
        n = self.r.randint(0, 3)
        multiline = n > 1 and self.chance(0.15)
        if multiline:
            self.nl()
        for i in range(n):
            if i:
                self.t(",")
                if multiline:
                    self.nl()
            if named_only or self.chance(0.25):
                self.t(self.pick(VIEW_ATTRS) if named_only else self.lower(), "=")
            self.expr(d + 1)
        if multiline:
            if self.chance(0.5):
                self.t(",")
            self.nl()
        self.t(")")

    def postfix_chain(self, d: int) -> None:
        for _ in range(self.r.randint(1, 2)):
            k = self.r.random()
            if k < 0.4:
                self.t(".", self.pick(METHODS))
                self.args(d)
            elif k < 0.7:
                self.t(".", self.lower())
            else:
                self.t("[")
                self.expr(d + 1)
                self.t("]")
        if self.chance(0.08):
            self.t("?")

    def view(self, d: int) -> None:
        """A view call: upper-case callee with children, or a self-closing lower-case one."""
        if self.chance(0.3):
            self.t(self.pick(VIEWS_LOWER))
            self.args(d, named_only=True)
            return
        self.t(self.pick(VIEWS_UPPER))
        self.args(d, named_only=True)
        if d < self.max_depth and self.chance(0.6):
            self.t("{")
            self.nl()
            for _ in range(self.r.randint(1, 3)):
                self.child(d + 1)
                self.nl()
            self.t("}")

    def child(self, d: int) -> None:
        k = self.r.random()
        if k < 0.6 or d >= self.max_depth:
            self.view(d)
        elif k < 0.75:
            self.t("if")
            self.cond()
            self.t("{")
            self.view(d + 1)
            self.t("}")
            if self.chance(0.5):
                self.t("else", "{")
                self.view(d + 1)
                self.t("}")
        elif k < 0.9:
            self.t("for", self.lower())
            if self.chance(0.3):
                self.t(",", "i")
            self.t("in", self.lower())
            if self.chance(0.5):
                self.t("key", "=", self.lower(), ".", "id")
            self.t("{")
            self.view(d + 1)
            self.t("}")
        else:
            self.t(self.lower())

    def lambda_(self, d: int) -> None:
        k = self.r.random()
        if k < 0.6:
            if self.chance(0.1):
                self.t("@cancellable")
            self.t("fn", "(")
            self.comma_list(range(self.r.randint(0, 2)), lambda _: self.param(simple=True))
            self.t(")")
            if self.chance(0.2):
                self.t("to")
                self.type_()
            if self.chance(0.3):
                self.block(d + 1)
            else:
                self.expr(d + 1)
        elif k < 0.8:
            self.t(self.lower(), "=>")
            self.expr(d + 1)
        else:
            self.t("(", self.lower(), ",", self.lower(), ")", "=>")
            self.expr(d + 1)

    def match_(self, d: int) -> None:
        self.t("match")
        self.simple()
        self.t("{")
        self.nl()
        for _ in range(self.r.randint(1, 4)):
            self.pattern(0)
            self.t("=>")
            k = self.r.random()
            bare = False
            if k < 0.1:
                self.t("return")
                if self.chance(0.5):
                    self.expr(d + 1)
                else:
                    bare = True  # `return,` is an error: a bare return ends at the newline
            elif k < 0.15:
                self.t(self.pick(("break", "continue")))
            else:
                self.expr(d + 1)
            if not bare and self.chance(0.2):
                self.t(",")
            self.nl()
        self.t("}")

    def pattern(self, d: int) -> None:
        k = self.r.random()
        if k < 0.15:
            self.t("_")
        elif k < 0.35:
            self.t(self.lower())
        elif k < 0.7 and d < 2:
            self.t(self.pick(CTORS))
            if self.chance(0.7):
                self.t("(")
                self.comma_list(range(self.r.randint(0, 2)), lambda _: self.pattern(d + 1))
                self.t(")")
        elif k < 0.8 and d < 2:
            self.t("(")
            self.comma_list(range(self.r.randint(2, 3)), lambda _: self.pattern(d + 1))
            self.t(")")
        elif k < 0.9:
            self.t(str(self.r.randint(0, 9)))
        else:
            self.t(self.string(double=True))

    def primary(self, d: int) -> None:
        self.open_ended = False
        if d >= self.max_depth:
            self.simple()
            return
        k = self.r.randint(0, 21)
        if k <= 4:
            self.simple()
        elif k == 5:
            self.t(self.pick(CALLEES))
            self.args(d)
        elif k == 6:
            self.t("(")
            self.expr(d + 1)
            self.t(")")
        elif k == 7:
            self.t("(")
            self.comma_list(range(self.r.randint(2, 3)), lambda _: self.expr(d + 1))
            self.t(")")
        elif k == 8:
            self.t("[")
            self.comma_list(range(self.r.randint(0, 3)), lambda _: self.expr(d + 1))
            self.t("]")
        elif k == 9:
            self.t("{")
            n = self.r.randint(0, 3)
            for i in range(n):
                if i:
                    self.t(",")
                self.t(self.pick((self.lower(), self.typename(), self.string(double=True))), ":")
                self.expr(d + 1)
            self.t("}")
        elif k == 10:
            self.match_(d)
        elif k == 11:
            self.if_(d)
        elif k == 12:
            self.t("for", self.lower(), "in", self.lower())
            if self.chance(0.3):
                self.t("key", "=", self.lower())
            # the body follows the iterable (or key) expression, which is greedy: it must not
            # start with a token that would continue it (`-`, `(`, `[`, `.`)
            k2 = self.r.random()
            if k2 < 0.5:
                self.block(d + 1)
            elif k2 < 0.75:
                self.view(d + 1)
            else:
                self.t(self.pick(CALLEES))
                self.args(d + 1)
            self.open_ended = True
        elif k == 13:
            self.lambda_(d)
            self.open_ended = True
        elif k == 14:
            self.t("spawn", "(")
            self.t(self.pick(CALLEES))
            self.args(d)
            self.t(")")
        elif k == 15:
            self.t("side_effect")
            self.block(d + 1)
        elif k == 16:
            self.t("workflow", ".", "version", "(", self.string(double=True), ",",
                   str(self.r.randint(0, 2)), ",", str(self.r.randint(3, 5)), ")")
        elif k == 17:
            self.view(d)
        elif k == 18:
            self.t(self.pick(CTORS), "(")
            self.expr(d + 1)
            self.t(")")
        elif k == 19:
            self.t(self.pick(("env", "http")), ".", "get", "(", self.string(double=True), ")")
        elif k == 20:
            self.t(self.typename())
        else:
            self.t(self.pick(("not", "-")))
            if self.chance(0.2):
                self.t(self.pick(("not", "-")))
            self.simple()

    def if_(self, d: int) -> None:
        self.t("if")
        self.cond()
        self.block(d + 1)
        if self.chance(0.6):
            if self.chance(0.3):
                self.nl()
            self.t("else")
            if self.chance(0.3):
                self.if_(d + 1)
            else:
                self.block(d + 1)

    def expr(self, d: int = 0) -> None:
        self.unary(d)
        if d < self.max_depth:
            for _ in range(self.r.choice((0, 0, 0, 1, 1, 2))):
                if self.open_ended:
                    break
                self.t(self.pick(BINOPS))
                self.unary(d + 1)
        self.open_ended = False

    def unary(self, d: int) -> None:
        if self.chance(0.1):
            self.t(self.pick(("not", "-")))
        self.primary(d)
        if d < self.max_depth and not self.open_ended and self.chance(0.4):
            self.postfix_chain(d)

    # ---- statements
    def stmt(self, d: int) -> None:
        k = self.r.randint(0, 11)
        if k <= 2:
            self.t("let")
            if self.chance(0.3):
                self.t("mut")
            if self.chance(0.8):
                self.t(self.lower())
            else:
                self.pattern(1)
            if self.chance(0.3):
                self.t(":")
                self.type_()
            self.t("=")
            self.expr(d + 1)
        elif k == 3:
            self.t("return")
            if self.chance(0.8):
                self.expr(d + 1)
        elif k == 4 and d < self.max_depth:
            self.t("while")
            self.cond()
            self.block(d + 1)
        elif k == 5 and d < self.max_depth:
            self.t("loop", "{")
            self.nl()
            self.stmt(d + 1)
            self.nl()
            self.t(self.pick(("break", "continue")))
            self.nl()
            self.t("}")
        elif k == 6:
            self.t(self.lower(), self.pick(("=", "+=", "-=", "*=", "/=")))
            self.expr(d + 1)
        elif k == 7 and d < self.max_depth:
            self.if_(d)
        elif k == 8 and d < self.max_depth:
            self.match_(d)
        else:
            self.t(self.pick(CALLEES))
            self.args(d)

    def block(self, d: int, stmts: int | None = None) -> None:
        self.t("{")
        n = self.r.randint(0, 3) if stmts is None else stmts
        if d >= self.max_depth:
            n = min(n, 1)
        if n == 0 and self.chance(0.5):
            self.t("}")
            return
        self.nl()
        for _ in range(n):
            self.stmt(d)
            self.nl()
        self.t("}")

    # ---- declaration parts
    def param(self, simple: bool = False) -> None:
        self.t(self.lower())
        if not simple or self.chance(0.5):
            if self.chance(0.9):
                self.t(":")
                self.type_()
            if not simple and self.chance(0.15):
                self.t("=")
                self.simple()

    def params(self, n: int | None = None) -> None:
        self.t("(")
        self.comma_list(range(self.r.randint(0, 3) if n is None else n), lambda _: self.param())
        self.t(")")

    def ret(self) -> None:
        if self.chance(0.65):
            self.t("to" if self.chance(0.9) else "->")
            self.type_()

    def fn_decorators(self) -> None:
        for _ in range(self.r.choice((0, 0, 1, 1, 2))):
            k = self.r.random()
            if k < 0.3:
                deco = self.pick(("@require", "@invariant", "@ensure"))
                self.t(deco, "(")
                self.cond()
                if deco == "@ensure" and self.chance(0.4):
                    self.t(",", "fallback", ":", self.lower())
                self.t(")")
            elif k < 0.55:
                self.t(self.pick(BARE_DECOS))
            elif k < 0.8:
                self.t(self.pick(COLON_KV_DECOS))
                if self.chance(0.7):
                    self.t("(")
                    self.comma_list(range(self.r.randint(1, 2)),
                                    lambda _: (self.t(self.lower(), ":"), self.literal()))
                    self.t(")")
            elif k < 0.88:
                self.t("@uses")
                if self.chance(0.7):
                    self.t("(")
                    self.comma_list(range(self.r.randint(1, 2)), lambda _: self.t(self.pick(EFFECTS[:6])))
                    self.t(")")
            elif k < 0.94:
                self.t("@inference")
                if self.chance(0.6):
                    self.t("(", self.pick(("cpu", "gpu")), ")")
            else:
                self.t("@pii")
                if self.chance(0.7):
                    self.t("(", self.string(double=True), ")")
            self.nl()

    def uses(self) -> None:
        if self.chance(0.2):
            self.t("uses")
            effs = self.r.sample(EFFECTS, self.r.randint(1, 3))
            if self.chance(0.15):
                effs.append("mcp")
            for i, e in enumerate(effs):
                if i:
                    self.t(",")
                self.t(e)
                if e == "mcp" and self.chance(0.6):
                    self.t("(", self.pick((self.lower(), self.typename())), ")")

    def fn_decl(self, body: bool = True, name: str | None = None, prefix: str | None = None) -> None:
        if prefix:  # `pub`/`async` do not combine with decorators (either order is an error)
            self.t(prefix)
        else:
            self.fn_decorators()
        self.t("fn", name or self.decl_name())
        if self.chance(0.1):
            self.t("<", "T")
            if self.chance(0.4):
                self.t(",", "U")
            self.t(">")
        self.params()
        self.uses()
        self.ret()
        if body:
            self.block(0, self.r.randint(1, 4))

    # ---- declarations (one method per construct kind)
    def d_function(self) -> None:
        k = self.r.random()
        self.fn_decl(prefix="pub" if k < 0.15 else "async" if k < 0.3 else None)

    def d_extern(self) -> None:
        self.t("extern", "fn", self.decl_name())
        self.params()
        self.ret()
        self.t("=", self.string(double=True))

    def d_ai_function(self) -> None:
        deco = self.pick(AI_DECOS + ("@hole",))
        self.t(deco)
        if deco != "@hole" and self.chance(0.6):
            self.t("(")
            if self.chance(0.5):
                self.t(self.string(double=True))
            else:
                self.comma_list(range(self.r.randint(1, 2)),
                                lambda _: (self.t(self.lower(), "="), self.deco_value()))
            self.t(")")
        self.nl()
        self.fn_decl(body=deco == "@hole" or self.chance(0.3))

    def deco_value(self) -> None:
        self.t(self.pick((self.string(double=True), str(self.r.randint(0, 9)), "0.2", self.lower())))

    def d_type(self) -> None:
        if self.chance(0.15):
            self.t("pub")
        self.t("type", self.decl_name(upper=True))
        if self.chance(0.5):
            self.struct_body()
        else:
            self.t("=")
            self.nl()
            for _ in range(self.r.randint(1, 4)):
                self.t("|", self.pick(CTORS + TYPES))
                if self.chance(0.5):
                    self.t("(")
                    n = self.r.randint(1, 3)
                    self.comma_list(range(n), lambda _: (self.t(self.lower(), ":"), self.type_()))
                    if self.chance(0.1):
                        self.t(",")
                    self.t(")")
                self.nl()

    def struct_body(self) -> None:
        self.t("{")
        self.nl()
        for _ in range(self.r.randint(0, 4)):
            self.t(self.lower(), ":")
            self.type_()
            if self.chance(0.3):
                self.t(",")
            self.nl()
        self.t("}")

    def d_table(self) -> None:
        self.t("@table", "type", self.decl_name(upper=True))
        self.struct_body()

    def d_index(self) -> None:
        self.t("@index", self.typename(), ".", self.lower(), "on", "(")
        self.comma_list(range(self.r.randint(1, 3)), lambda _: self.t(self.lower()))
        self.t(")")

    def d_import(self) -> None:
        self.t("import")
        self.comma_list(range(self.r.choice((1, 1, 2))), lambda _: self.import_item())

    def import_item(self) -> None:
        k = self.r.random()
        if k < 0.2:
            self.t("react", self.typename(), "from", self.string(double=True))
        elif k < 0.45:
            self.t("rust", ":", self.pick(("serde", "tokio", "regex")))
            if self.chance(0.5):
                self.t("(")
                self.comma_list(range(self.r.randint(1, 2)),
                                lambda _: (self.t(self.pick(("version", "path", "git", "rev")), ":"),
                                           self.t(self.string(double=True) if self.chance(0.7) else self.lower())))
                self.t(")")
            if self.chance(0.3):
                self.t("as", self.lower())
        else:
            segs = self.r.randint(1, 3)
            for i in range(segs):
                if i:
                    self.t(self.pick((".", ".", "/")))
                self.t(self.pick(LOWER + TYPES + ("env", "http")))
            if self.chance(0.3):
                self.t("as")
                if self.chance(0.5):
                    self.t(self.lower())
                else:
                    self.t("{")
                    self.comma_list(range(self.r.randint(1, 2)),
                                    lambda _: (self.t(self.lower()),
                                               self.t("as", self.lower()) if self.chance(0.3) else None))
                    self.t("}")

    def d_const(self) -> None:
        self.t("let")
        if self.chance(0.2):
            self.t("mut")
        self.t(self.decl_name())
        if self.chance(0.4):
            self.t(":")
            self.type_()
        self.t("=")
        self.expr(1)

    def d_mcp_tool(self) -> None:
        self.t(self.pick(("@mcp.tool", "@tool")))
        if self.chance(0.6):
            self.t(self.string(double=True))
        self.nl()
        self.fn_decl()

    def d_mcp_resource(self) -> None:
        self.t(self.pick(("@mcp.resource", "@resource")))
        if self.chance(0.5):
            self.t("(", self.string(double=True), ",", self.string(double=True), ")")
        else:
            self.t(self.string(double=True), self.string(double=True))
        self.nl()
        self.fn_decl()

    def d_test(self) -> None:
        self.t("@test")
        k = self.r.random()
        if k < 0.4:
            self.t("(", self.string(double=True), ")")
        elif k < 0.5:
            self.t("(", ")")
        self.nl()
        self.fn_decl()

    def d_forall(self) -> None:
        self.t("@forall")
        if self.chance(0.7):
            self.t("(")
            self.forall_arg()  # one binding only
            self.t(")")
        self.nl()
        self.fn_decl()

    def forall_arg(self) -> None:
        self.t(self.lower(), ":")
        if self.chance(0.6):
            self.t(self.pick(PRIM_TYPES))
        else:  # a generator expression
            self.t("gen", ".", self.pick(("int", "string", "list")), "(", str(self.r.randint(0, 5)),
                   ",", str(self.r.randint(6, 200)), ")")

    def d_scheduled(self) -> None:
        self.t("@scheduled")
        if self.chance(0.2):
            self.nl()
        self.t("(", self.string(double=True), ")")
        self.nl()
        self.fn_decl()

    def d_loading(self) -> None:
        self.t("@loading")
        self.nl()
        self.fn_decl()

    def _endpoint(self, kind: str) -> None:
        self.t("@endpoint", "(", "kind", ":", kind, ")")
        self.nl()
        self.fn_decl()

    def d_query(self) -> None:
        self._endpoint("query")

    def d_mutation(self) -> None:
        self._endpoint("mutation")

    def d_server_fn(self) -> None:
        self._endpoint("server")

    def d_v0_component(self) -> None:
        self.t("@v0")
        if self.chance(0.5):
            self.t("from")
        self.t(self.string(double=True), self.decl_name(upper=True), "{")
        self.nl()
        for _ in range(self.r.randint(0, 3)):
            self.t(self.lower())
            if self.chance(0.3):
                self.t("?")
            self.t(":")
            self.type_()
            self.nl()
        self.t("}")

    def d_routes(self) -> None:
        self.t("routes", "{")
        self.nl()
        for _ in range(self.r.randint(0, 3)):
            self.route(0)
            self.nl()
        for key in ("not_found", "error"):
            if self.chance(0.3):
                self.t(key, ":", self.typename())
                self.nl()
        self.t("}")

    def route(self, d: int) -> None:
        self.t(self.string(double=True), "to", self.typename())
        if self.chance(0.4):
            self.t("with")
            keys = self.r.sample(("loader", "pending", "error"), self.r.randint(1, 3))
            if len(keys) == 1 and self.chance(0.5):
                self.t(keys[0], ":", self.lower())
            else:
                self.t("(")
                self.comma_list(keys, lambda k: self.t(k, ":", self.lower()))
                self.t(")")
        if d < 1 and self.chance(0.2):
            self.t("{")
            self.nl()
            for _ in range(self.r.randint(1, 2)):
                self.route(d + 1)
                self.nl()
            self.t("}")

    def d_component(self) -> None:
        self.t("component", self.decl_name(upper=True))
        self.params()
        self.t("{")
        self.nl()
        members = ["state", "derived", "effect", "on", "stmt", "state", "derived"]
        self.r.shuffle(members)
        for m in members[:self.r.randint(0, 5)]:
            self.member(m)
            self.nl()
        if self.chance(0.85):
            self.t("view", ":")
            self.view(1)
            self.nl()
        self.t("}")
        if self.chance(0.4):  # at most one style block follows a component
            self.nl()
            self.t(self.pick(("style", "style", "raw_css")), "{")
            self.nl()
            for _ in range(self.r.randint(0, 2)):
                self.t(".", self.lower(), "{")
                self.nl()
                for _ in range(self.r.randint(0, 2)):
                    self.t(self.pick(("padding", "color", "opacity", "margin")), ":",
                           self.string(double=True))
                    self.nl()
                self.t("}")
                self.nl()
            self.t("}")

    def member(self, m: str) -> None:
        if m in ("state", "derived"):
            self.t(m, self.lower())
            if self.chance(0.5):
                self.t(":")
                self.type_()
            self.t("=")
            self.expr(1)
        elif m == "effect":
            self.t("effect")
            if self.chance(0.4):
                self.t("depends_on", "(")
                self.comma_list(range(self.r.randint(1, 2)), lambda _: self.t(self.lower()))
                self.t(")")
            self.t(":")
            self.effect_body()
        elif m == "on":
            self.t("on", self.pick(("mount", "cleanup")), ":")
            self.effect_body()
        else:
            self.stmt(1)

    def effect_body(self) -> None:
        """A block, or an expression that does not start with `{` (that would be a block)."""
        if self.chance(0.6):
            self.block(1)
        else:
            self.t(self.pick(CALLEES))
            self.args(1)

    def d_fragment(self) -> None:
        self.t("fragment", self.decl_name(upper=True))
        self.params()
        self.t("{")
        self.nl()
        self.view(1)
        self.nl()
        self.t("}")

    def d_url(self) -> None:
        self.t("url", self.decl_name(upper=True), "{")
        self.nl()
        for _ in range(self.r.randint(0, 4)):
            self.t(self.lower())
            if self.chance(0.5):
                self.t("(")
                n = self.r.randint(1, 2)
                for i in range(n):
                    if i:
                        self.t(",")
                    if self.chance(0.4):
                        self.t("?")
                    self.t(self.lower(), ":")
                    self.type_()
                self.t(")")
            if self.chance(0.2):
                self.t(",")
            self.nl()
        self.t("}")

    def d_state_machine(self) -> None:
        if self.chance(0.2):
            self.t("pub")
        if self.chance(0.2):
            self.t("partial")
        self.t("state_machine", self.decl_name(upper=True), "{")
        self.nl()
        states = self.r.sample(TYPES, self.r.randint(1, 4))
        for s in states:
            if self.chance(0.2):
                self.t("terminal")
            self.t("state", s)
            if self.chance(0.3):
                self.t("(", self.lower(), ":")
                self.type_()
                self.t(")")
            if self.chance(0.2):
                self.t(",")
            self.nl()
        for _ in range(self.r.randint(0, 3)):
            self.t("on", self.lower())
            if self.chance(0.3):
                self.t("(", self.lower(), ")")
            self.t("from", self.pick(states) if self.chance(0.8) else "any", "->", self.pick(states))
            if self.chance(0.2):
                self.t("(", self.lower(), ")")
            if self.chance(0.2):
                self.t(",")
            self.nl()
        self.t("}")

    def callable_(self) -> None:
        self.t(self.decl_name())
        self.params()
        self.ret()
        self.block(0, self.r.randint(1, 4))

    def d_workflow(self) -> None:
        if self.chance(0.2):
            self.t("@distributed_train", "(")
            self.comma_list(range(self.r.randint(1, 2)), lambda _: (self.t(self.lower(), "="), self.literal()))
            self.t(")")
            self.nl()
        self.t("workflow")
        self.callable_()

    def d_activity(self) -> None:
        self.t("activity")
        self.callable_()

    def d_actor(self) -> None:
        self.t("actor", self.decl_name(upper=True), "{")
        self.nl()
        for _ in range(self.r.randint(0, 3)):
            self.t("on", self.lower())
            self.params()
            self.ret()
            self.block(0, self.r.randint(1, 3))
            self.nl()
        self.t("}")

    def d_form(self) -> None:
        self.t("@form", self.decl_name(upper=True), "{")
        self.nl()
        for _ in range(self.r.randint(1, 4)):
            self.t("field", self.lower(), ":")
            self.type_()
            for _ in range(self.r.randint(0, 3)):
                mod = self.pick(("required", "optional", "hidden", "label", "pattern", "max_len",
                                 "min_len", "range", "default"))
                self.t(mod)
                if mod in ("label", "pattern"):
                    self.t("(", self.string(double=True), ")")
                elif mod in ("max_len", "min_len"):
                    self.t("(", str(self.r.randint(1, 200)), ")")
                elif mod == "range":
                    self.t("(", str(self.r.randint(0, 5)), ".", ".", str(self.r.randint(6, 10)), ")")
                elif mod == "default":
                    self.t("(")
                    self.simple()
                    self.t(")")
            self.nl()
        if self.chance(0.7):
            self.t("on_submit", ":", self.lower())
            self.nl()
        for key in ("success_redirect", "error_message"):
            if self.chance(0.4):
                self.t(key, ":", self.string(double=True))
                self.nl()
        self.t("}")

    def d_mobile(self) -> None:
        kind = self.pick(("@back_button", "@push", "@deep_link"))
        self.t(kind, "{")
        self.nl()
        for _ in range(self.r.randint(0, 3)):
            self.t(self.pick(("action", "confirm", "channel", "handler", "scheme", "route")), ":")
            # @back_button and @push values are names; @deep_link values may be strings too
            values = [self.lower(), self.typename()] + ([self.string(double=True)] if kind == "@deep_link" else [])
            self.t(self.pick(values))
            self.nl()
        self.t("}")

    def d_tokens(self) -> None:
        self.t("@tokens", "{")
        self.nl()
        for _ in range(self.r.randint(0, 4)):
            k = self.pick(("color", "spacing", "radius", "shadow", "font"))
            if k == "color":
                self.t("color", self.lower(), "light", ":", self.string(double=True), "dark", ":",
                       self.string(double=True))
            elif k == "font":
                self.t("font", self.lower(), "family", ":", self.string(double=True))
            else:
                self.t(k, self.lower(), ":", self.string(double=True))
            self.nl()
        self.t("}")


# Forms the reference parser must reject (vox-syntax.md: retired forms and the "Must be rejected"
# list, plus the known-error notes at its top). {f} is a function name, {N} a type name.
MUST_REJECT = (
    ("function", "@component fn {N}() {{\n    view: Text(value = \"x\")\n}}\n"),
    ("function", "agent {N} {{\n    on ask(q: str) to str {{\n        return q\n    }}\n}}\n"),
    ("function", "http get \"/{f}\" to str {{\n    return \"x\"\n}}\n"),
    ("function", "@server fn {f}() to int {{\n    return 1\n}}\n"),
    ("function", "@query fn {f}() to int {{\n    return 1\n}}\n"),
    ("function", "@mutation fn {f}(x: int) {{\n    save(x)\n}}\n"),
    ("function", "@llm fn {f}(x: str) to str\n"),
    ("const", "env {{\n    API_KEY: \"x\"\n}}\n"),
    ("function", "pub async fn {f}() to int {{\n    return 1\n}}\n"),
    ("function", "fn {f}(a: int,\n    b: int) to int {{\n    return a\n}}\n"),
    ("function", "fn {f}() to int {{\n    return (1 +\n        2)\n}}\n"),
    ("function", "fn {f}() {{\n    let y = 1\n        + 2\n}}\n"),
    ("function", "fn {f}(x: Shape) to int {{\n    match x {{\n        Circle -> 1\n    }}\n}}\n"),
    ("component", "component {N}() {{\n    view: <div>hi</div>\n}}\n"),
    ("function", "fn {f}() {{\n    let g = () => 1\n}}\n"),
    ("function", "fn {f}() {{\n    let z = g()?.z\n}}\n"),
    ("function", "@deprecated(\"use another\")\nfn {f}() {{\n    log(1)\n}}\n"),
    ("function", "fn {f}() to int\n{{\n    return 1\n}}\n"),
    ("function", "fn {f}(x: int) {{\n    if x > 0\n    {{\n        log(x)\n    }}\n}}\n"),
    ("component", "component {N}()\n{{\n    view: Text(value = \"x\")\n}}\n"),
    ("type", "type {N} = User\n"),
    ("function", "fn {f}() {{\n    let x = ()\n}}\n"),
    ("actor", "actor {N} {{\n    state n: int = 0\n    on hit() {{\n        n += 1\n    }}\n}}\n"),
    ("routes", "routes {{\n    \"/\" to Home,\n    \"/a\" to About\n}}\n"),
    ("test", "@test('single quoted label')\nfn {f}() {{\n    assert(true)\n}}\n"),
    ("const", "let {f} = 99999999999999999999\n"),
    ("function", "@hole\nfn {f}(x: str) to str\n"),
    ("function", "fn {f}(a: int, ) to int {{\n    return a\n}}\n"),
    ("function", "fn {f}<T,\n    U>(a: T) to T {{\n    return a\n}}\n"),
    ("tokens", "@tokens {{\n    spacing sm: \"4px\",\n    spacing md: \"8px\"\n}}\n"),
    ("function", "fn {f}(x: int) {{\n    while x > 0\n    {{\n        x -= 1\n    }}\n}}\n"),
    ("component", "component {N}() {{\n    view: Column() {{\n        , Text(value = \"x\")\n    }}\n}}\n"),
)


# ---- rendering and noise

_NO_SPACE_BEFORE = {",", ")", "]", ".", ":", "?"}
_NO_SPACE_AFTER = {"(", "[", "."}


def _wordish(tok: str) -> bool:
    return tok[:1].isalnum() or tok[:1] in "_@" or tok in (")", "]")


def render(tokens: list[str]) -> str:
    out: list[str] = []
    depth = 0
    prev = NL
    for tok in tokens:
        if tok == NL:
            out.append(NL)
            prev = NL
            continue
        if prev == NL:
            indent = depth - (1 if tok == "}" else 0)
            out.append("    " * max(0, indent))
        elif not (tok in _NO_SPACE_BEFORE or prev in _NO_SPACE_AFTER
                  or (tok in ("(", "[") and _wordish(prev))):
            out.append(" ")
        out.append(tok)
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
        prev = tok
    return "".join(out).rstrip(" ") + "\n"


def _swap_quotes(tok: str) -> str:
    q = tok[0]
    other = "'" if q == '"' else '"'
    return other + tok[1:-1] + other


def add_noise(rng: random.Random, tokens: list[str], rate: float) -> tuple[list[str], list[str], int]:
    """Edits sprinkled at token boundaries: (new tokens, edit descriptions, index of the first)."""
    out: list[str] = []
    edits: list[str] = []
    first = -1
    for i, tok in enumerate(tokens):
        if i and rng.random() < rate:
            op = rng.choice(("nl", "nl", "nl", "comma", "comma", "quote", "drop", "unnl"))
            if op == "nl":
                out.append(NL)
            elif op == "comma":
                out.append(",")
            elif op == "quote" and tok[:1] in ("'", '"'):
                tok = _swap_quotes(tok)
            elif op == "drop":
                out.append(rng.choice((";", "!", "&")))
            elif op == "unnl" and tok == NL:
                tok = None
            else:
                op = None
            if op:
                edits.append(f"{op}@{i}")
                if first < 0:
                    first = len(out)
        if tok is not None:
            out.append(tok)
    return out, edits, first


def _line_of_token(tokens: list[str], idx: int) -> int:
    return 1 + sum(1 for t in tokens[:idx] if t == NL)


def generate_program(rng: random.Random, noisy_share: float = 0.65,
                     construct: str | None = None, reject_share: float = 0.04) -> Generated:
    if construct is None and rng.random() < reject_share:
        kind, template = rng.choice(MUST_REJECT)
        text = template.format(f=rng.choice(LOWER) + rng.choice(("", "_x", "2")),
                               N=rng.choice(TYPES) + rng.choice(("", "View", "2")))
        return Generated(kind, text, text, False, "a form the reference must reject",
                         expect_ok=False)
    construct = construct or rng.choice(CONSTRUCTS)
    g = Gen(rng, max_depth=rng.choice((1, 2, 2, 3)))
    if construct != "import" and rng.random() < 0.1:
        g.d_import()
        g.nl()
        g.nl()
    getattr(g, "d_" + construct)()
    if rng.random() < 0.15:
        # a second declaration of the same kind: on the next line, after a blank line, or on the
        # same line (how declarations are separated is part of the grammar too)
        g.t(*rng.choice(((NL,), (NL, NL), ())))
        getattr(g, "d_" + construct)()
    g.nl()
    clean = render(g.out)
    kind = TAXONOMY_KIND.get(construct, construct)
    if rng.random() >= noisy_share:
        return Generated(kind, clean, clean, False)
    rate = rng.choice((0.005, 0.01, 0.02, 0.05))
    toks, edits, first = add_noise(rng, g.out, rate)
    if not edits:  # make sure a noisy program has at least one edit
        toks, edits, first = add_noise(rng, g.out, 1.0 / max(1, len(g.out)) * 3)
    text = render(toks)
    line = _line_of_token(toks, first) if first >= 0 else 0
    return Generated(kind, text, clean, True, f"{len(edits)} noise edits at rate {rate}: "
                     + " ".join(edits[:8]), line)


def main() -> None:
    ap = argparse.ArgumentParser(description="Print random Vox programs of the grammar generator.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--construct", choices=CONSTRUCTS)
    ap.add_argument("--noisy", action="store_true", help="sprinkle noise into every program")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    for _ in range(args.n):
        p = generate_program(rng, 1.0 if args.noisy else 0.0, args.construct)
        print(f"// construct: {p.construct}" + (f"  ({p.detail})" if p.noisy else ""))
        print(p.text)


if __name__ == "__main__":
    main()
