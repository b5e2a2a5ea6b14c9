"""A language pack over any tree-sitter grammar: `TreeSitterPack("rust")`, `--lang rust`.

The grammar comes from an installed per-language wheel (`tree-sitter-rust` → module
`tree_sitter_rust`, which ships the compiled grammar), else from `tree-sitter-language-pack`
(whose grammars are fetched once into its cache and then work offline). Syntax errors are the
tree's first ERROR or MISSING node; constructs are the top-level named nodes (comments and
attributes excepted), with common node types mapped to taxonomy kinds and any other kept as its
node type; the doc of a construct is the comment block just above it. The structural hash covers
the leaf tokens without comments. `viable_prefix` reads tree-sitter's error recovery (below).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import re

from mens.errors import MensError
from mens.lang.base import Analysis, Construct, Diagnostic, LanguagePack, Span

# Node type → taxonomy kind, shared by the C-family, Rust, Go, Java, JS/TS, Ruby … grammars.
KIND_MAP = {
    "function_item": "function", "function_declaration": "function", "function_definition": "function",
    "method_declaration": "function", "method": "function", "generator_function_declaration": "function",
    "class_declaration": "class", "class_definition": "class", "class_specifier": "class", "class": "class",
    "struct_item": "struct", "struct_specifier": "struct", "struct_declaration": "struct",
    "enum_item": "enum", "enum_declaration": "enum", "enum_specifier": "enum",
    "trait_item": "trait", "interface_declaration": "interface", "protocol_declaration": "interface",
    "impl_item": "impl", "module": "module", "mod_item": "module", "namespace_definition": "module",
    "use_declaration": "import", "import_statement": "import", "import_declaration": "import",
    "preproc_include": "import", "extern_crate_declaration": "import", "package_clause": "package",
    "const_item": "const", "static_item": "const", "const_declaration": "const",
    "type_item": "type", "type_alias_declaration": "type", "type_declaration": "type",
    "type_definition": "type", "macro_definition": "macro", "macro_rules!": "macro",
}
TAXONOMY = ("function", "test_function", "class", "struct", "enum", "trait", "interface", "impl",
            "module", "import", "const", "type", "macro")
EXTENSIONS = {
    "rust": (".rs",), "javascript": (".js", ".mjs", ".cjs", ".jsx"), "typescript": (".ts", ".mts", ".cts"),
    "tsx": (".tsx",), "go": (".go",), "c": (".c", ".h"), "cpp": (".cc", ".cpp", ".cxx", ".hpp", ".hh"),
    "java": (".java",), "ruby": (".rb",), "bash": (".sh", ".bash"), "c_sharp": (".cs",), "kotlin": (".kt",),
    "swift": (".swift",), "php": (".php",), "scala": (".scala",), "lua": (".lua",), "haskell": (".hs",),
    "ocaml": (".ml",), "elixir": (".ex", ".exs"), "zig": (".zig",), "julia": (".jl",), "dart": (".dart",),
}
FENCE_ALIASES = {
    "rust": ("rs",), "javascript": ("js", "jsx"), "typescript": ("ts",), "bash": ("sh", "shell"),
    "c_sharp": ("csharp", "cs"), "cpp": ("c++",), "ruby": ("rb",), "kotlin": ("kt",), "go": ("golang",),
}
HASH_COMMENTS = {"bash", "ruby", "elixir", "julia", "r", "perl", "make", "yaml", "toml", "nix"}
DASH_COMMENTS = {"lua", "haskell", "sql", "elm", "ada"}
_ATTRIBUTES = {"attribute_item", "inner_attribute_item", "decorator", "attribute", "annotation",
               "marker_annotation"}
_PAIRS = {"(": ")", "[": "]", "{": "}", "${": "}"}
_UNPAIRED_BRACKETS = {"bash"}  # `case x in a)`: a `)` that closes nothing
_LAST_WORD = re.compile(r"(?<!\w)[^\W\d]\w*\Z")
_LAST_NUMBER = re.compile(r"(?<![\w.])\d[\w.]*(?:[eE][+-])?\Z")
_LAST_PUNCT = re.compile(r"[^\w\s]{1,3}\Z")
_OPENER = re.compile(r"[A-Za-z]{0,2}(#*)([\"'`])")


def _load_language(name: str):
    """(tree_sitter.Language, version string) for `name`, or raise MensError."""
    import tree_sitter

    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise MensError(f"not a grammar name: {name!r}", "--lang", "use a name such as rust or typescript")
    try:
        module = importlib.import_module(f"tree_sitter_{name}")
        factory = getattr(module, "language", None) or getattr(module, f"language_{name}")
        dist = f"tree-sitter-{name.replace('_', '-')}"
        return tree_sitter.Language(factory()), f"{dist} {importlib.metadata.version(dist)}"
    except (ImportError, AttributeError, importlib.metadata.PackageNotFoundError):
        pass
    try:
        import tree_sitter_language_pack as pack

        return pack.get_language(name), f"tree-sitter-language-pack {importlib.metadata.version('tree-sitter-language-pack')}"
    except Exception as exc:  # the pack raises its own error types (unknown name, no network)
        reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
        raise MensError(f"no tree-sitter grammar {name!r} ({reason})", "--lang",
                        f"pip install tree-sitter-{name.replace('_', '-')}, or use a built-in pack "
                        "(vox, python)") from None


class TreeSitterPack(LanguagePack):
    taxonomy = TAXONOMY

    def __init__(self, name: str):
        import tree_sitter

        self.name = name
        self.language, self.grammar_version = _load_language(name)
        self.parser = tree_sitter.Parser(self.language)
        self.extensions = EXTENSIONS.get(name, ())
        self.fence_tags = (name,) + FENCE_ALIASES.get(name, ())
        self.comment_prefixes = ("#",) if name in HASH_COMMENTS else ("--",) if name in DASH_COMMENTS else ("//",)
        lang = self.language
        # The grammar's literal tokens (keywords, operators, quotes): what a half-typed last token
        # may be growing into.
        self._tokens = tuple(sorted({lang.node_kind_for_id(i) for i in range(lang.node_kind_count)
                                     if not lang.node_kind_is_named(i) and lang.node_kind_is_visible(i)}))
        self._lookahead: dict[int, frozenset[int]] = {}
        self._viable = functools.lru_cache(maxsize=512)(self._judge)

    def __reduce__(self):
        # Rebuilt by name in worker processes (the parser itself does not pickle).
        return (TreeSitterPack, (self.name,))

    def analyze(self, text: str, *, script: bool = False) -> Analysis:
        data = text.encode("utf-8")
        root = self.parser.parse(data).root_node
        if root.has_error:
            node = _first_error(root)
            line, col = (node.start_point.row, node.start_point.column) if node else (0, 0)
            what = f"missing {node.type}" if node is not None and node.is_missing else "syntax error"
            snippet = data[node.start_byte:node.end_byte][:20].decode("utf-8", "replace") if node else ""
            message = f"{what} near {snippet!r}" if snippet and not node.is_missing else what
            return Analysis(ok=False, error=Diagnostic(line + 1, _char_col(data, node, col) + 1, message))
        return Analysis(ok=True, constructs=self._constructs(root, data, text))

    def _constructs(self, root, data: bytes, text: str) -> list[Construct]:
        out: list[Construct] = []
        ascii_only = len(data) == len(text)
        to_char = (lambda b: b) if ascii_only else (lambda b: len(data[:b].decode("utf-8", "ignore")))
        comments: list = []
        attrs: list = []
        for node in root.named_children:
            if "comment" in node.type:
                adjacent = comments and comments[-1].end_point.row >= node.start_point.row - 1
                comments = comments + [node] if adjacent else [node]
                continue
            if node.type in _ATTRIBUTES:
                attrs.append(node)
                continue
            target = node
            if node.type in ("export_statement", "decorated_definition"):
                target = node.child_by_field_name("declaration") or node.child_by_field_name("definition") \
                    or (node.named_children[-1] if node.named_children else node)
            kind = KIND_MAP.get(target.type, target.type)
            if target.type in ("lexical_declaration", "variable_declaration") and target.text.startswith(b"const"):
                kind = "const"
            name_node = target.child_by_field_name("name") or target.child_by_field_name("type")
            if name_node is None and kind == "const" and target.named_children:
                name_node = target.named_children[0].child_by_field_name("name")
            name = name_node.text.decode("utf-8", "replace") if name_node is not None else None
            if kind == "function" and any(b"test" in a.text for a in attrs):
                kind = "test_function"
            first = attrs[0] if attrs else node
            start, end = to_char(first.start_byte), to_char(node.end_byte)
            span = Span(first.start_point.row + 1, to_char(first.start_byte) - to_char(
                first.start_byte - first.start_point.column) + 1, node.end_point.row + 1,
                end - to_char(node.end_byte - node.end_point.column) + 1, start, end)
            doc = None
            if comments and comments[-1].end_point.row >= first.start_point.row - 1:
                doc = _comment_text(comments, self.comment_prefixes)
            out.append(Construct(kind, name, span, doc))
            comments, attrs = [], []
        return out

    def viable_prefix(self, text: str) -> bool:
        """Could `text` still grow into a source that parses? True when it parses, or when its
        ERROR and MISSING nodes all sit at the end of the input (tree-sitter wraps input that ends
        early in an ERROR running to EOF, or inserts a MISSING closer there) and no token inside
        those ERRORs was one the parser could not take where it stood; also when growing the last,
        half-typed token (a keyword, an operator, a number's digits, a string's closing quote)
        makes it so. An approximation: error recovery is heuristic."""
        return self._viable(text)

    def _judge(self, text: str, grow_last_token: bool = True) -> bool:
        data = text.encode("utf-8")
        root = self.parser.parse(data).root_node
        if not root.has_error:
            return True
        first_bad = self._first_bad_error(root, len(data))
        if first_bad is None:
            return True
        return grow_last_token and any(self._judge(t, False) for t in self._grown(text, first_bad))

    def _first_bad_error(self, root, size: int):
        """The first error that no further input can mend, or None. Besides ERROR and MISSING
        nodes before the last token, a token can be one: a bracket that closes nothing, or a token
        inside an ERROR that the parse state tree-sitter recorded for it does not accept (how a
        wrong last token shows, since the ERROR it sits in runs to the end like an unfinished one)."""
        end, node = 0, root
        while node.child_count:  # the end of the last real token (comments and MISSING excepted)
            kids = [c for c in node.children if not c.is_missing and "comment" not in c.type]
            if not kids:
                break
            node = kids[-1]
            end = node.end_byte
        bad, opened, in_errors = [], [], []
        # In document order, down the error spine only: error-free subtrees are complete, so
        # balanced and acceptable where they stand.
        stack = [(iter(root.children), False)]
        while stack:
            children, in_error = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
            elif "comment" in child.type or (child.is_extra and not child.is_error):
                continue
            elif child.is_missing or child.is_error:
                if child.end_byte < end:
                    bad.append(child)
                stack.append((iter(child.children), True))
            elif child.has_error:
                stack.append((iter(child.children), in_error))
            else:
                if child.type in _PAIRS:
                    opened.append(child.type)
                elif child.type in (")", "]", "}") and self.name not in _UNPAIRED_BRACKETS:
                    if not opened or _PAIRS[opened.pop()] != child.type:
                        bad.append(child)
                if in_error and child.child_count == 0:
                    in_errors.append(child)
        if in_errors and in_errors[-1].end_byte == size and re.fullmatch(rb"\w+", in_errors[-1].text or b""):
            in_errors.pop()  # a word at the very end may still grow into another token
        bad += [n for n in in_errors if not self._fits(n)]
        return min(bad, key=lambda n: (n.start_byte, n.end_byte), default=None)

    def _fits(self, node) -> bool:
        """Does the parse state recorded for `node` take a node of its kind?"""
        state = node.parse_state
        if not state or state == 0xFFFF:  # none recorded
            return True
        symbols = self._lookahead.get(state)
        if symbols is None:
            it = self.language.lookahead_iterator(state)
            symbols = self._lookahead[state] = frozenset(it.symbols() if it is not None else ())
        return node.grammar_id in symbols or node.kind_id in symbols

    def _grown(self, text: str, first_bad) -> list[str]:
        """`text` with its half-typed last token grown into one of the grammar's: a keyword (or a
        keyword into a name), a longer operator, a number with its digits; or with the string,
        raw string or block comment open at its end closed."""
        out: list[str] = []
        word = _LAST_WORD.search(text)
        if word:
            head, w = text[:word.start()], word.group()
            out += [head + k for k in self._tokens if k.startswith(w) and k != w and k[-1].isalnum()]
            if w in self._tokens:
                out.append(text + "_")
        if _LAST_NUMBER.search(text):
            out.append(text + "0")
        punct = _LAST_PUNCT.search(text)
        if punct:
            p = punct.group()
            for k in range(len(p), 0, -1):
                out += [text[:-k] + t for t in self._tokens if t.startswith(p[-k:]) and len(t) > k]
        escape = "\\" if (len(text) - len(text.rstrip("\\"))) % 2 else ""  # an odd backslash escapes
        opener = _OPENER.match(first_bad.type if first_bad.is_missing else
                               first_bad.text[:8].decode("utf-8", "replace"))
        if opener:
            out.append(text + escape + opener.group(2) + opener.group(1))
        out += [text + escape + q for q in "\"'`" if q in text]
        raw = re.findall(r'r(#+)"', text)
        if raw:
            out.append(text + escape + '"' + raw[-1])
        if "/*" in text:
            out.append(text + "*/")
        return out

    def structural_hash(self, text: str) -> str:
        root = self.parser.parse(text.encode("utf-8")).root_node
        h = hashlib.sha256()
        stack = [root]
        while stack:
            node = stack.pop()
            if "comment" in node.type:
                continue
            if node.child_count == 0:
                h.update(node.type.encode() + b"\x00" + (node.text or b"") + b"\x01")
            else:
                stack.extend(reversed(node.children))
        return h.hexdigest()[:16]

    def fingerprint(self) -> str:
        base = super().fingerprint()
        return hashlib.sha256(f"{base}:{self.grammar_version}".encode()).hexdigest()[:16]


def _first_error(root):
    """The first ERROR or MISSING node in document order."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            return node
        if node.has_error:
            stack.extend(reversed(node.children))
    return None


def _char_col(data: bytes, node, byte_col: int) -> int:
    if node is None:
        return 0
    line_start = node.start_byte - byte_col
    return len(data[line_start:node.start_byte].decode("utf-8", "ignore"))


def _comment_text(nodes, prefixes: tuple[str, ...]) -> str | None:
    lines = []
    for node in nodes:
        for line in node.text.decode("utf-8", "replace").splitlines():
            line = line.strip()
            for marker in ("/**", "*/", "/*", "///", "//!") + tuple(prefixes):
                if line.startswith(marker):
                    line = line[len(marker):]
            line = line.lstrip("*!/ ").rstrip("*/ ").strip()
            if line:
                lines.append(line)
    return " ".join(lines) or None
