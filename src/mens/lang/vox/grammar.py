"""The Vox grammar's word lists (token kinds that play a role, decorator groups, view-call
callees) and the parser's error type, shared by the parser modules."""

from __future__ import annotations


class VoxParseError(Exception):
    """A syntax error at a 1-based line and column."""

    def __init__(self, line: int, col: int, message: str, offset: int = 0):
        super().__init__(f"{line}:{col}: {message}")
        self.line, self.col, self.message, self.offset = line, col, message, offset


NAME = frozenset("ID TY type on state derived effect mount cleanup view component http env to in".split())
SEG = frozenset(("ID", "TY", "env", "http"))
DECL_WORDS = frozenset(("routes", "url", "state_machine", "partial"))   # words that start declarations
BINARY = {"|>": 1, "or": 3, "and": 5, "with": 5, "is": 7, "isnt": 7, "==": 7, "!=": 7,
          "<": 9, ">": 9, "<=": 9, ">=": 9, "+": 11, "-": 11, "*": 13, "/": 13, "%": 13}
POSTFIX = frozenset(("(", ".", "["))
ASSIGN = frozenset(("=", "+=", "-=", "*=", "/="))
LITERAL = frozenset(("INT", "FLOAT", "DEC", "STR", "SSTR"))
# Tokens that can start an expression: `exprs.PRIMARY`'s keys (checked there), literals, names, prefix ops.
EXPR_START = frozenset(("true", "false", "(", "[", "{", "if", "match", "for", "fn", "@cancellable", "spawn",
                        "side_effect", "workflow", "env", "to", "http")) | LITERAL | {"ID", "TY", "not", "-"}
NO_RETURN_VALUE = frozenset(("NL", "}", "EOF"))

FN_DECO_BARE = frozenset("@pure @reactive @remote @deprecated @fuzz @native @training_step".split())
# Decorators whose optional `(…)` holds comma-separated items, as in the reference: an item is
# one token of any kind, or (where the decorator takes keys) a lower-case name, the separator
# and a value. `(` may be followed by newlines and so may `,`, but `)` and `,` must follow an
# item on its line. Value: (separator, separator required, value of an untyped key: one token
# of any kind (True) or nothing (False)); None: no keys, single tokens only.
FN_DECO_ITEMS = {
    **dict.fromkeys(("@ai", "@prompt", "@subagent", "@search", "@hole"), ("=", False, True)),
    **dict.fromkeys(("@cors", "@rate_limit", "@webhook", "@layer"), (":", True, True)),
    "@embed": (":", False, True),
    "@pii": ("", False, True),         # a name then any token, no separator (but `class:`)
    "@inference": ("=", False, False),
    "@uses": None,
}
_ID, _NAME, _STR, _INT, _BOOL, _LIST = {"ID"}, {"ID", "TY"}, {"STR"}, {"INT"}, {"true", "false"}, {"["}
# Keys whose value is typed, probed from the reference: the token is taken only when it is of
# one of these kinds, else nothing is (the `)` or `,` is then looked for there); `[` is a list
# of single tokens. A typed key may carry its own separator rule: (kinds, separator required).
FN_DECO_TYPED_KEYS = {
    ("@ai", "model"): _STR, ("@ai", "max_iterations"): _INT, ("@ai", "task_category"): _NAME,
    ("@ai", "tier_max"): _NAME, ("@ai", "strengths"): _LIST,
    ("@prompt", "redact"): _LIST, ("@prompt", "schema"): _NAME, ("@prompt", "stage"): _NAME,
    ("@subagent", "budget_usd"): _INT | {"FLOAT"}, ("@subagent", "complexity"): _INT,
    ("@subagent", "description"): _STR, ("@subagent", "max_depth"): _INT,
    ("@subagent", "parallel"): _BOOL, ("@subagent", "policy"): _NAME,
    ("@search", "corpus"): _NAME, ("@search", "into"): _NAME, ("@search", "policy"): _NAME | _STR,
    ("@search", "query"): _NAME | _STR, ("@search", "top_k"): _INT,
    ("@hole", "cache_key"): _NAME | _STR, ("@hole", "constraints"): _LIST,
    ("@hole", "reviewer"): _NAME, ("@hole", "spec"): _NAME | _STR,
    ("@pii", "class"): (_ID, ":"),
    ("@cors", "allow_credentials"): _ID | _BOOL, ("@cors", "origins"): _STR | _LIST,
    ("@rate_limit", "by"): _ID, ("@rate_limit", "max"): _INT, ("@rate_limit", "max_requests"): _INT,
    ("@rate_limit", "window"): _INT, ("@rate_limit", "window_secs"): _INT,
    ("@embed", "dimensions"): _INT, ("@embed", "model"): _STR, ("@embed", "source_field"): _STR,
    ("@webhook", "idempotent"): _ID | _BOOL, ("@webhook", "provider"): _ID,
    ("@webhook", "replay_window_secs"): _INT, ("@webhook", "secret"): _STR,
    ("@layer", "tier"): _ID,
    ("@inference", "model"): _STR,
}
FN_DECO_BALANCED = frozenset(("@auth", "@offline_capable", "@collaborative"))  # (…), parens balanced
FN_DECO_EXPR = frozenset(("@require", "@invariant", "@ensure"))
FN_DECO = FN_DECO_BARE | frozenset(FN_DECO_ITEMS) | FN_DECO_BALANCED | FN_DECO_EXPR
AI_DECOS = frozenset(("@ai", "@prompt", "@subagent", "@search", "@hole"))
EFFECTS = frozenset("net db fs env clock random nothing mutate gpu_compute mcp".split())

PRIMITIVES = frozenset(("stack column row wrap text heading link image button panel card list "
                        "list_item route_outlet overlay toast drawer modal").split())
# Lower-case callees that make a call with only named arguments a view call (taking a `{ … }`
# child block), as probed from the reference: a subset of HTML and SVG tags (no `div`, `h1`,
# `ul`, `li`, `p` or `a`).
HTML_TAGS = frozenset(("abbr article aside audio b blockquote br button canvas caption cite code "
                       "details dialog em embed fieldset figcaption figure footer form head header "
                       "hr i iframe img input kbd label legend link main meta nav noscript object "
                       "option param pre q script section select small source span strong style "
                       "summary table tbody td textarea tfoot th thead title tr track video svg "
                       "path circle rect line polyline polygon g defs use text ellipse stop mask "
                       "pattern symbol marker tspan filter image clip_path foreign_object "
                       "linear_gradient radial_gradient fe_gaussian_blur").split())
FORM_FLAGS = frozenset(("required", "optional", "hidden"))
FORM_ARG = {"label": "STR", "pattern": "STR", "max_len": "INT", "min_len": "INT"}

# What starts a declaration in script mode (everything else is a top-level statement).
SCRIPT_DECL = frozenset(("import component @loading @test @v0 @endpoint @forall @scheduled @tool "
                         "@mcp.tool @resource @mcp.resource fn pub type actor workflow activity "
                         "@table @index async").split())

RETIRED_DECORATORS = {
    "server": "`@server` is retired; use @endpoint(kind: server)",
    "query": "`@query` is retired; use @endpoint(kind: query)",
    "mutation": "`@mutation` is retired; use @endpoint(kind: mutation)",
    "llm": "`@llm` is retired; use @ai",
}


def _describe(kind: str, text: str) -> str:
    if kind == "NL":
        return "newline"
    if kind == "ID":
        return f"identifier '{text}'"
    if kind == "TY":
        return f"name '{text}'"
    if kind in ("INT", "FLOAT", "DEC"):
        return f"number {text}"
    if kind == "STR" or kind == "SSTR":
        return "string"
    if kind[0] == "@":
        return f"decorator '{kind}'"
    if kind[0].isalpha():
        return f"keyword '{kind}'"
    return f"'{kind}'"


RETIRED_FORMS = {
    "http": "top-level `http` routes are retired; use @endpoint(kind: …) functions",
    "agent": "`agent` declarations are retired; use actor, workflow or @ai functions",
    "env": "`env` blocks are retired; read settings with env.get(\"NAME\")",
    "<": "angle-bracket JSX is not Vox; write view calls such as Column() { Text(value = \"hi\") }",
    "@component": "`@component fn` is retired; declare `component Name(…) { … }`",
}
EXPR_HINTS = {
    "<": "angle-bracket JSX is not Vox; write view calls",
}
STMT_HINTS = {
    "+": "an operator cannot start a line; keep it on the line of its left operand",
    "*": "an operator cannot start a line; keep it on the line of its left operand",
    "/": "an operator cannot start a line; keep it on the line of its left operand",
    "and": "an operator cannot start a line; keep it on the line of its left operand",
    "or": "an operator cannot start a line; keep it on the line of its left operand",
    "|>": "an operator cannot start a line; keep it on the line of its left operand",
    ".": "'.' must be on the same line as the expression before it ('?' ends a postfix chain)",
    "<": "angle-bracket JSX is not Vox; write view calls",
    "fn": "named functions are declared at top level",
}
