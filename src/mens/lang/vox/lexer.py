"""The Vox lexer: one compiled regex, tokens as four parallel lists (kind, text, start, end).

Token kinds are strings: a keyword, symbol or decorator is its own text (`"fn"`, `"=="`,
`"@test"`); the rest are `ID` (lower-case identifier), `TY` (upper-case identifier), `INT`,
`FLOAT`, `DEC`, `STR` (double-quoted), `SSTR` (single-quoted: the reference's parser tells them
apart), `NL` and `EOF`. The token stream is the reference lexer's, token for token (checked by
differential fuzzing of `--tokens`). There is
no per-token Python code: `findall` yields (skipped, token) pairs, offsets are running sums and
kinds come from a dict, all at C speed, which is what the parse-speed target (>= 1 MB/s on one
core) needs. Line and column are computed from an offset only when someone asks (errors, spans),
by bisecting the line-start table.

Quirks kept from the reference lexer: characters that form no token (`;` `!` `&`, a bare `@`,
non-ASCII letters outside strings, a lone `\r`), integers beyond 64 bits, unclosed strings and
the `@`-prefix of an unknown decorator are error tokens, which its parser never sees: they are
dropped here, each reported as a warning.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from itertools import accumulate
from operator import add, sub
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
JSX = "</> </ /> <>".split()   # tokens of the reference lexer that no rule of its parser takes

_deco_alt = "|".join(re.escape(d[1:]) for d in sorted(DECORATORS, key=len, reverse=True))
# The reference lexer is a DFA (logos): on `@foo` it consumes the longest prefix of some
# decorator (`@fo`, a prefix of `@forall`), fails, and emits that prefix as an error token; lexing
# resumes after it, so `o` becomes an identifier. Every proper prefix, longest first, reproduces it.
_deco_prefixes = sorted({d[1:i] for d in DECORATORS for i in range(2, len(d))} - {d[1:] for d in DECORATORS},
                        key=len, reverse=True)
_deco_partial = "|".join(re.escape(p) for p in _deco_prefixes)
# An escape is a backslash and any character but a newline; strings may span lines. A string
# that is not closed is an error token (dropped) that ends at end of input or at a backslash
# directly before a newline (the backslash included), as in the reference.
_STRING = r"\"[^\"\\]*(?:\\[^\n][^\"\\]*)*\"|'[^'\\]*(?:\\[^\n][^'\\]*)*'"
_OPEN_STRING = r"\"[^\"\\]*(?:\\[^\n][^\"\\]*)*\\?|'[^'\\]*(?:\\[^\n][^'\\]*)*\\?"
# Group 1 is what is skipped before a token (blanks, then at most one comment); group 2 is the
# token. `findall` then yields (skipped, token) pairs at C speed, and offsets are running sums.
_TOKEN = re.compile(
    r"([ \t]*(?:(?://|\#)[^\r\n]*)?)"
    r"(\r?\n"                                    # newline
    r"|[a-z_][a-zA-Z0-9_]*"                      # identifier or keyword
    r"|[A-Z][a-zA-Z0-9_]*"                       # type identifier
    r"|[0-9]+(?:\.[0-9]+)?(?:dec)?"              # INT / FLOAT / DEC
    r"|" + _STRING +                             # string (may span lines)
    r"|</>|</|/>|<>"                             # the reference's JSX tokens (no Vox rule takes them)
    r"|==|!=|\+=|-=|\*=|/=|->|=>|\|>|<=|>="      # two-character symbols
    r"|[()\[\]{}:?,.=|<>+\-*/%]"                 # one-character symbols
    r"|@(?:" + _deco_alt + r")"                  # decorator (no word boundary after it)
    r"|@(?:" + _deco_partial + r")?"             # an unknown decorator's error token
    r"|" + _OPEN_STRING +                        # unterminated string: an error token
    r"|."                                        # no token: dropped, with a warning
    r"|\Z)",                                     # trailing blanks/comment at end of input
    re.S,
)
_STRING_RE = re.compile(_STRING, re.S)
INT_MAX = 2**63 - 1   # a larger integer literal is an error token in the reference (dropped)


class _KindTable(dict):
    """Token text -> kind. Keywords, symbols and decorators are seeded; identifiers and numbers
    are classified on first sight and remembered (bounded), strings are classified each time."""

    def __missing__(self, tok: str) -> str:
        c = tok[0]
        if c == '"' or c == "'":
            if not _STRING_RE.fullmatch(tok):
                return "USTR"
            return "STR" if c == '"' else "SSTR"
        if "a" <= c <= "z" or c == "_":
            kind = "ID"
        elif "A" <= c <= "Z":
            kind = "TY"
        elif "0" <= c <= "9":
            kind = "DEC" if tok[-1] == "c" else ("FLOAT" if "." in tok else
                                                 "INT" if int(tok) <= INT_MAX else "DROP")
        else:
            kind = "DROP"
        if len(self) < 100_000:
            self[tok] = kind
        return kind


_KINDS = _KindTable({w: w for w in KEYWORDS + SYMBOLS + DECORATORS + JSX})
_KINDS["\n"] = _KINDS["\r\n"] = "NL"


class Token(NamedTuple):
    """One token, for callers outside the parser (the parser reads the parallel lists)."""

    kind: str
    text: str
    offset: int
    line: int
    col: int


class Lexed:
    """The token lists of one text, plus the dropped characters and a line table."""

    __slots__ = ("text", "kinds", "texts", "starts", "ends", "dropped", "open_strings", "_line_starts")

    def __init__(self, text: str):
        self.text = text
        self._line_starts: list[int] | None = None
        pairs = _TOKEN.findall(text)
        while pairs and not pairs[-1][1]:
            pairs.pop()                      # end-of-input matches after trailing blanks/comments
        if pairs:
            skipped, toks = zip(*pairs)
            sizes = list(map(len, toks))
            ends = list(accumulate(map(add, map(len, skipped), sizes)))
            starts = list(map(sub, ends, sizes))
            kinds = list(map(_KINDS.__getitem__, toks))
            texts = list(toks)
        else:
            kinds, texts, starts, ends = [], [], [], []
        dropped: list[int] = []
        # Where unclosed strings began (dropped like the reference; errors after one mention it).
        self.open_strings = [starts[i] for i, k in enumerate(kinds) if k == "USTR"] if "USTR" in kinds else []
        if "DROP" in kinds or "USTR" in kinds:
            keep = [i for i, k in enumerate(kinds) if k != "DROP" and k != "USTR"]
            dropped = [starts[i] for i, k in enumerate(kinds) if k == "DROP" or k == "USTR"]
            kinds = [kinds[i] for i in keep]
            texts = [texts[i] for i in keep]
            starts = [starts[i] for i in keep]
            ends = [ends[i] for i in keep]
        n = len(text)
        kinds.append("EOF")
        texts.append("")
        starts.append(n)
        ends.append(n)
        self.kinds, self.texts, self.starts, self.ends, self.dropped = kinds, texts, starts, ends, dropped

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        if self._line_starts is None:
            # Line i+1 starts one past the end of line i: running sums of (length + 1).
            lengths = map(len, self.text.split("\n")[:-1])
            self._line_starts = list(accumulate(map((1).__add__, lengths), initial=0))
        line = bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def tokens(self) -> list[Token]:
        out = []
        for kind, tok, start in zip(self.kinds, self.texts, self.starts):
            line, col = self.line_col(start)
            out.append(Token(kind, tok, start, line, col))
        return out


@functools.lru_cache(maxsize=8)
def lexed(text: str) -> Lexed:
    """`Lexed(text)`, shared by the last few texts asked about: grammar-constrained decoding asks
    of each candidate prefix whether it ends in free text and whether it is viable, two lexings of
    the same text otherwise. A Lexed is never changed once built (the parser only reads it)."""
    return Lexed(text)


def tokenize(text: str) -> list[Token]:
    """The token stream of `text` (newlines included, comments and blanks not), ending in EOF."""
    return Lexed(text).tokens()
