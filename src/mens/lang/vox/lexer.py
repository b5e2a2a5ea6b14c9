"""The Vox lexer: one compiled regex, tokens as four parallel lists (kind, text, start, end).

Token kinds are interned strings: a keyword, symbol or decorator is its own text (`"fn"`, `"=="`,
`"@test"`); the rest are `ID` (lower-case identifier), `TY` (upper-case identifier), `INT`,
`FLOAT`, `DEC`, `STR`, `USTR` (a string still open at end of input), `NL` and `EOF`. Parallel
lists instead of one object per token keep the lexer near a microsecond a token, which is what
the parse-speed target (>= 1 MB/s on one core) needs. Line and column are computed from the
offset only when someone asks (errors, spans), by bisecting the line-start table.

Quirk kept from the reference lexer: characters that form no token (`;` `!` `&`, a bare `@`,
non-ASCII letters outside strings) are dropped; each one is reported as a warning.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import NamedTuple

KEYWORDS = (
    "fn let async mut if else while loop break continue match when fetching empty for in to "
    "return type dec import extern actor workflow activity side_effect spawn http pub with on state "
    "derived effect mount cleanup view component agent migrate env and or not is isnt true false "
    "fragment"
).split()

DECORATORS = (
    "@component @tool @mcp.tool @resource @mcp.resource @test @endpoint @table @index @native "
    "@loading @require @ensure @invariant @forall @fuzz @pure @reactive @scheduled @deprecated @v0 "
    "@ai @prompt @subagent @search @hole @cancellable @form @back_button @deep_link @push @tokens "
    "@cors @rate_limit @uses @pii @embed @webhook @auth @offline_capable @collaborative @layer "
    "@remote @inference @training_step @distributed_train"
).split()

SYMBOLS = "( ) [ ] { } : ? , . = == != += -= *= /= -> => |> | < > <= >= + - * / % _".split()

# Identifier text -> token kind; anything not here is a plain `ID`.
_ID_KIND: dict[str, str] = {w: w for w in KEYWORDS}
_ID_KIND["_"] = "_"
_INTERN: dict[str, str] = {s: s for s in SYMBOLS + DECORATORS}

_deco_alt = "|".join(re.escape(d[1:]) for d in sorted(DECORATORS, key=len, reverse=True))
_TOKEN = re.compile(
    r"[ \t\r\f\v]*(?:(?://|\#)[^\n]*)?"          # blanks, then at most one comment, are skipped
    r"(?:(\n)"                                    # 1 newline
    r"|([a-z_][a-zA-Z0-9_]*)"                     # 2 identifier or keyword
    r"|([A-Z][a-zA-Z0-9_]*)"                      # 3 type identifier
    r"|([0-9]+(?:\.[0-9]+)?(?:dec)?)"             # 4 INT / FLOAT / DEC
    r"|(\"[^\"\\]*(?:\\.[^\"\\]*)*\"|'[^'\\]*(?:\\.[^'\\]*)*')"  # 5 string (may span lines)
    r"|(==|!=|\+=|-=|\*=|/=|->|=>|\|>|<=|>=|[()\[\]{}:?,.=|<>+\-*/%])"  # 6 symbol
    r"|(@(?:" + _deco_alt + r"))"                 # 7 decorator (no word boundary after it)
    r"|([\"'].*)"                                 # 8 unterminated string: runs to end of input
    r"|(.)"                                       # 9 no token: dropped, with a warning
    r"|\Z)",                                     # trailing blanks/comment at end of input
    re.S,
)


class Token(NamedTuple):
    """One token, for callers outside the parser (the parser reads the parallel lists)."""

    kind: str
    text: str
    offset: int
    line: int
    col: int


class Lexed:
    """The token lists of one text, plus the dropped characters and a line table."""

    __slots__ = ("text", "kinds", "texts", "starts", "ends", "dropped", "_line_starts")

    def __init__(self, text: str):
        self.text = text
        self._line_starts: list[int] | None = None
        kinds: list[str] = []
        texts: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        dropped: list[int] = []
        ka, ta, sa, ea = kinds.append, texts.append, starts.append, ends.append
        id_kind, intern = _ID_KIND.get, _INTERN.__getitem__
        for m in _TOKEN.finditer(text):
            g = m.lastindex
            if g is None:          # only blanks/comment left before end of input
                continue
            tok = m.group(g)
            if g == 2:
                ka(id_kind(tok, "ID"))
            elif g == 1:
                ka("NL")
            elif g == 6 or g == 7:
                ka(intern(tok))
            elif g == 3:
                ka("TY")
            elif g == 5:
                ka("STR")
            elif g == 4:
                ka("DEC" if tok[-1] == "c" else ("FLOAT" if "." in tok else "INT"))
            elif g == 9:
                dropped.append(m.start(9))
                continue
            else:
                ka("USTR")
            ta(tok)
            ea(m.end())
            sa(m.end() - len(tok))
        n = len(text)
        ka("EOF")
        ta("")
        sa(n)
        ea(n)
        self.kinds, self.texts, self.starts, self.ends, self.dropped = kinds, texts, starts, ends, dropped

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def tokens(self) -> list[Token]:
        out = []
        for kind, tok, start in zip(self.kinds, self.texts, self.starts):
            line, col = self.line_col(start)
            out.append(Token(kind, tok, start, line, col))
        return out


def tokenize(text: str) -> list[Token]:
    """The token stream of `text` (newlines included, comments and blanks not), ending in EOF."""
    return Lexed(text).tokens()
