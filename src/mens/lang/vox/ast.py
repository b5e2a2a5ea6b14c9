"""Vox AST: slotted dataclasses. Every node records `start`/`end`, 0-based character offsets
[start, end) into the source; `lexer.Lexed.line_col(offset)` turns them into lines and columns.

The tree keeps what a tool needs to read a program (names, parameters, types, calls and view
children, patterns, statements); declarations whose inside is pure configuration (forms,
tokens, mobile blocks, routes, url and state machines) keep their entries as small tuples.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Node:
    start: int
    end: int


# ----------------------------------------------------------------- types and patterns

@dataclass(slots=True)
class TypeRef(Node):
    name: str                       # "int", "List", "_", "dec", or an INT literal for Tensor[2]
    args: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class FnType(Node):
    params: list[Any]
    ret: Any = None


@dataclass(slots=True)
class Pattern(Node):
    kind: str                       # "wild" | "bind" | "ctor" | "tuple" | "int" | "str"
    name: str | None = None
    items: list[Pattern] = field(default_factory=list)


# ----------------------------------------------------------------- expressions

@dataclass(slots=True)
class Name(Node):
    name: str


@dataclass(slots=True)
class Literal(Node):
    kind: str                       # INT FLOAT DEC STR bool unit
    value: str


@dataclass(slots=True)
class Unary(Node):
    op: str
    operand: Any


@dataclass(slots=True)
class Binary(Node):
    op: str
    left: Any
    right: Any


@dataclass(slots=True)
class Try(Node):
    expr: Any


@dataclass(slots=True)
class Arg(Node):
    name: str | None                # named argument (attr_ prefix stripped) or positional
    value: Any


@dataclass(slots=True)
class Call(Node):
    callee: Any
    args: list[Arg]
    view: bool = False              # a view call: bare upper-case/primitive/tag callee, named args
    children: list[Any] | None = None


@dataclass(slots=True)
class Member(Node):
    obj: Any
    name: str


@dataclass(slots=True)
class Index(Node):
    obj: Any
    index: Any


@dataclass(slots=True)
class ListLit(Node):
    items: list[Any]


@dataclass(slots=True)
class TupleLit(Node):
    items: list[Any]


@dataclass(slots=True)
class ObjectLit(Node):
    entries: list[tuple[str, Any]]


@dataclass(slots=True)
class Block(Node):
    stmts: list[Any]


@dataclass(slots=True)
class If(Node):
    cond: Any
    then: Block
    orelse: Any = None


@dataclass(slots=True)
class MatchArm(Node):
    pattern: Pattern
    body: Any


@dataclass(slots=True)
class Match(Node):
    subject: Any
    arms: list[MatchArm]


@dataclass(slots=True)
class For(Node):
    names: list[str]
    iterable: Any
    key: Any
    body: Any


@dataclass(slots=True)
class Lambda(Node):
    params: list[Param]
    ret: Any
    body: Any
    cancellable: bool = False


@dataclass(slots=True)
class Special(Node):
    kind: str                       # "spawn" | "side_effect" | "workflow.version"
    body: Any


# ----------------------------------------------------------------- statements

@dataclass(slots=True)
class Let(Node):
    pattern: Pattern
    mutable: bool
    type: Any
    value: Any


@dataclass(slots=True)
class Return(Node):
    value: Any = None


@dataclass(slots=True)
class While(Node):
    cond: Any
    body: Block


@dataclass(slots=True)
class Loop(Node):
    body: Block


@dataclass(slots=True)
class Jump(Node):
    kind: str                       # "break" | "continue"


@dataclass(slots=True)
class Assign(Node):
    target: Any
    op: str                         # = += -= *= /=
    value: Any


@dataclass(slots=True)
class ExprStmt(Node):
    expr: Any


# ----------------------------------------------------------------- declarations

@dataclass(slots=True)
class Param(Node):
    name: str
    type: Any = None
    default: Any = None


@dataclass(slots=True)
class Field(Node):
    name: str
    type: Any
    optional: bool = False


@dataclass(slots=True)
class Decorator(Node):
    name: str                       # "@test", "@endpoint" …
    args: str | None = None         # source text of its argument list, if any


@dataclass(slots=True)
class Function(Node):
    kind: str                       # taxonomy kind: function, test, query, mcp_tool …
    name: str
    params: list[Param]
    ret: Any
    body: Block | None
    decorators: list[Decorator] = field(default_factory=list)
    generics: list[str] = field(default_factory=list)
    uses: list[str] = field(default_factory=list)
    pub: bool = False
    is_async: bool = False


@dataclass(slots=True)
class Variant(Node):
    name: str
    fields: list[Field]


@dataclass(slots=True)
class TypeDecl(Node):
    name: str
    fields: list[Field] | None = None        # a struct
    variants: list[Variant] | None = None    # an ADT
    table: bool = False
    pub: bool = False


@dataclass(slots=True)
class Component(Node):
    name: str
    params: list[Param]
    members: list[Any]                       # Member decls and statements
    styles: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class ComponentMember(Node):
    kind: str                                # state derived effect mount cleanup view
    name: str | None
    type: Any
    value: Any
    depends_on: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Callable(Node):
    kind: str                                # workflow | activity | handler (actor `on`)
    name: str
    params: list[Param]
    ret: Any
    body: Block


@dataclass(slots=True)
class Actor(Node):
    name: str
    handlers: list[Callable]
    state: list[ComponentMember] = field(default_factory=list)


@dataclass(slots=True)
class Decl(Node):
    """Declarations that are configuration: import, const, extern, fragment, v0, table index,
    url, state_machine, form, mobile, tokens, routes. `items` holds their entries."""

    kind: str
    name: str | None
    items: list[Any] = field(default_factory=list)
    value: Any = None


@dataclass(slots=True)
class Module(Node):
    decls: list[Any]
    script: list[Any] = field(default_factory=list)   # top-level statements (script mode)
