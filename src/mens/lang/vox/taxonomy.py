"""The construct taxonomy of vox-syntax.md section 7: what kind of top-level construct a parsed
declaration is, read off its first tokens (decorator, keyword), plus the `ai_function` tag."""

from __future__ import annotations

from mens.lang.vox import ast as A

# Section 7, in the spec's order. Coverage is measured against this list.
TAXONOMY: tuple[str, ...] = (
    "function", "type", "import", "const", "mcp_tool", "mcp_resource", "test", "forall", "table",
    "index", "v0_component", "routes", "scheduled", "loading", "component", "fragment", "query",
    "mutation", "server_fn", "url", "state_machine", "workflow", "activity", "actor", "form",
    "mobile", "tokens", "ai_function",
)

AI_DECORATORS = frozenset(("@ai", "@prompt", "@subagent", "@search", "@hole"))


def classify(decl) -> tuple[str, str | None, tuple[str, ...]]:
    """(kind, name, tags) of one top-level declaration node."""
    if isinstance(decl, A.Function):
        ai = any(d.name in AI_DECORATORS for d in decl.decorators)
        return decl.kind, decl.name, (("ai_function",) if ai else ())
    if isinstance(decl, A.TypeDecl):
        return ("table" if decl.table else "type"), decl.name, ()
    if isinstance(decl, A.Component):
        return "component", decl.name, ()
    if isinstance(decl, A.Callable):
        return decl.kind, decl.name, ()
    if isinstance(decl, A.Actor):
        return "actor", decl.name, ()
    if isinstance(decl, A.Decl):
        return decl.kind, decl.name, ()
    raise TypeError(f"not a declaration: {type(decl).__name__}")
