"""The Vox language pack: lexer, parser, AST and construct taxonomy behind `LanguagePack`."""

from __future__ import annotations

import hashlib
import re
from itertools import compress, repeat
from operator import ne

from mens.lang.base import Analysis, Construct, Diagnostic, LanguagePack, Span
from mens.lang.vox.lexer import DECORATORS, KEYWORDS, Lexed, lexed, tokenize
from mens.lang.vox.meta import DocFinder, metadata
from mens.lang.vox.parser import Parser, VoxParseError, gc_paused, parse
from mens.lang.vox.taxonomy import TAXONOMY, classify

__all__ = ["VoxPack", "VoxParseError", "parse", "tokenize", "TAXONOMY"]

_DROPPED_HINT = {
    "!": "Vox has no '!' operator; use 'not'",
    "&": "Vox has no '&' operator; use 'and'",
    ";": "Vox needs no ';'",
    "@": "unknown decorator",
}
_PARTIAL_DECO = re.compile(r"@[a-z_.0-9]*\Z")
_PARTIAL_WORD = re.compile(r"(?<![A-Za-z0-9_@.])[A-Za-z_][A-Za-z0-9_]*\Z")
# Words a prefix may be heading for: keywords and the contextual words of vox-syntax.md.
_WORDS = sorted(set(KEYWORDS) | set((
    "routes url state_machine partial terminal from any as rust react uses key style raw_css field "
    "on_submit loader pending kind fallback version query mutation server depends_on light dark "
    "family color spacing radius shadow font not_found error required optional hidden label "
    "pattern max_len min_len range default success_redirect error_message net db fs clock random "
    "nothing mcp").split()))
_CLOSER = {"(": ")", "[": "]", "{": "\n}"}
_FINISH_STEPS = 24
_OPERATOR_TAILS = {"-": (">", "="), "=": (">", "="), "|": (">",), "<": ("=",), ">": ("=",),
                   "!": ("=",), "+": ("=",), "*": ("=",), "/": ("=",)}


# closing_suffix's second way: what to append when the parser, at the end of the input, expects
# something. A quoted token it names (a closing bracket first), or for a described one a filler.
_EOF_EXPECTED = re.compile(r"unexpected end of input: expected (.*)")
_EXPECTATION_END = re.compile(r" (?:after|before|to|in|between|for|as) ")
_REMARK = re.compile(r" \([^)]*\)")  # "(a message handler)", "(after an unterminated string)"
_FILLERS = (("expression", "0"), ("type", "int"), ("pattern", "_"), ("module path", "x"), ("string", '""'),
            ("double-quoted", '""'), ("path", '""'), ("name", "x"), ("variable", "x"), ("state", "x"),
            ("integer", "0"), ("number", "0"), ("range", "0"), ("value", "0"), ("query, mutation", "query"),
            ("effect", "db"), ("loader, pending", "loader"))
_TIGHT = {")": ")", "]": "]", "}": "\n}", "(": "(", "[": "[", ".": ".", ",": ", ", ":": ": "}


def _expected_text(message: str) -> str | None:
    """Text that gives the parser what an end-of-input `message` says it expected, or None."""
    m = _EOF_EXPECTED.match(message)
    if m is None:
        return None
    head = _EXPECTATION_END.split(_REMARK.sub("", m.group(1)), 1)[0]
    quoted = re.findall(r"'([^']+)'", head)
    closer = next((q for q in quoted if q in (")", "]", "}")), None)
    if closer or (quoted and head.startswith("'")):
        token = closer or quoted[0]
        return _TIGHT.get(token, f" {token} ")
    return next((f" {filler}" for word, filler in _FILLERS if word in head), None)


def _finish_by_parser(text: str, suffix: str) -> str | None:
    """`suffix` grown by what the parser expects at the end until `text + suffix` parses, or None."""
    for _ in range(_FINISH_STEPS):
        err = _parsed(text + suffix, False)[1]
        if err is None:
            return suffix
        more = _expected_text(err.message)
        if more is None and suffix.endswith("\n}"):  # a brace that may not open a line (import lists)
            suffix = suffix[:-2] + " }"
        elif more is None:
            return None
        else:
            suffix += more
    return None


def _comment_at_end(lx: Lexed) -> str | None:
    """The line comment the lexed text ends in, or None. Comments are skipped blanks to the
    lexer: one after the last token runs to the end."""
    tail = lx.text[lx.ends[-2] if len(lx.ends) > 1 else 0:]
    at = min((i for i in (tail.find("//"), tail.find("#")) if i >= 0), default=-1)
    return tail[at:] if at >= 0 and "\n" not in tail[at:] else None


def _open_string(lx: Lexed) -> str | None:
    """The unterminated string literal the lexed text ends in, or None."""
    last_token = lx.starts[-2] if len(lx.starts) > 1 else -1
    if lx.open_strings and lx.open_strings[-1] > last_token:
        return lx.text[lx.open_strings[-1]:]
    return None


def _quote_closing(lx: Lexed) -> str:
    """What closes the string the text ends in: its quote, after a backslash where the text
    ends in an odd run of them (which would escape the quote)."""
    odd_backslashes = (len(lx.text) - len(lx.text.rstrip("\\"))) % 2
    return "\\" * odd_backslashes + lx.text[lx.open_strings[-1]]


def _dropped_warnings(lx: Lexed) -> list[tuple[int, str]]:
    out = []
    for off in lx.dropped:
        ch = lx.text[off]
        hint = _DROPPED_HINT.get(ch, "not a Vox token")
        out.append((off, f"dropped character {ch!r} ({hint})"))
    return out


def _completions(text: str, limit: int = 16) -> list[str]:
    """Ways to finish the token `text` ends in, for viable_prefix."""
    out: list[str] = []
    m = _PARTIAL_DECO.search(text)
    if m:
        out += [d[len(m.group()):] for d in DECORATORS if d.startswith(m.group()) and d != m.group()]
    else:
        m = _PARTIAL_WORD.search(text)
        if m:
            out += [w[len(m.group()):] for w in _WORDS if w.startswith(m.group()) and w != m.group()]
            if m.group() in _WORDS:  # a name on its way that is a keyword so far: `fn is` of `is_leap`
                out.insert(0, "_")
        elif text and text[-1] in _OPERATOR_TAILS:
            out += list(_OPERATOR_TAILS[text[-1]])
    return out[:limit]


def _canonical_string(token: str) -> str:
    return "\x01" + token[1:-1].replace("\\'", "'").replace('\\"', '"')


class VoxPack(LanguagePack):
    name = "vox"
    extensions = (".vox",)
    fence_tags = ("vox",)
    comment_prefixes = ("//", "#")
    grammar_version = "1"
    taxonomy = TAXONOMY

    def analyze(self, text: str, *, script: bool = False) -> Analysis:
        parser, error = _parsed(text, script)
        if parser is None:
            return Analysis(ok=False, error=error)
        lx = parser.lx
        docs = DocFinder(text) if parser.decls else None
        constructs = []
        for d in parser.decls:
            kind, name, tags = classify(d)
            sl, sc = lx.line_col(d.start)
            el, ec = lx.line_col(d.end)
            constructs.append(Construct(kind, name, Span(sl, sc, el, ec, d.start, d.end),
                                        docs.doc_above(sl), tags))
        warnings = [(off, msg) for off, msg in _dropped_warnings(lx)] + parser.warnings
        warnings.sort(key=lambda w: w[0])
        diags = [Diagnostic(*lx.line_col(off), msg) for off, msg in warnings]
        return Analysis(ok=error is None, error=error, constructs=constructs, warnings=diags)

    def viable_prefix(self, text: str) -> bool:
        """True when `text` parses, fails only because it ended, or ends in a word, decorator or
        operator still being typed (`@endp`, `kind: que`, `=` of `=>`) whose completion would;
        ending in an open string, when the string closed would; in a comment, when a newline would."""
        def unfinished_at_most(candidate: str) -> bool:   # the parse alone, not analyze()'s extras
            err = _parsed(candidate, False)[1]
            return err is None or "end of input" in err.message

        parser, err = _parsed(text, False)
        if parser is not None and _open_string(parser.lx) is not None:
            # The lexer drops a string left open at the end, so the parser never sees it: close
            # it and ask whether a string may stand there at all (not after `type T { start`).
            return unfinished_at_most(text + _quote_closing(parser.lx))
        if parser is not None and _comment_at_end(parser.lx) is not None:
            # Only a newline ends a line comment: where none may stand (inside `@mcp.resource(…`)
            # nothing that follows the comment can parse.
            return unfinished_at_most(text + "\n")
        if err is None or "end of input" in err.message:
            return True
        return any(unfinished_at_most(text + rest) for rest in _completions(text))

    def free_text_at_end(self, text: str) -> str | None:
        lx = lexed(text)
        open_string = _open_string(lx)
        return open_string if open_string is not None else _comment_at_end(lx)

    def closing_suffix(self, text: str) -> str | None:
        """The open string's quote, then the open brackets closed innermost first (a brace on a
        line of its own) when that makes `text` parse; else what the parser expects at the end,
        step by step (`if c` → ` {` + `\n}`, `let x =` → ` 0`); None when neither ends it."""
        lx = lexed(text)
        suffix = ""
        if _open_string(lx) is not None:
            suffix = _quote_closing(lx)
        elif _comment_at_end(lx):
            suffix = "\n"  # whatever closes the code must not land in the comment
        stack: list[str] = []
        for kind in lx.kinds:
            if kind in _CLOSER:
                stack.append(_CLOSER[kind])
            elif stack and kind == stack[-1].strip():
                stack.pop()
        closers = "".join(reversed(stack))
        brackets = suffix + (closers[1:] if closers.startswith("\n") and text.endswith("\n") and not suffix
                             else closers)
        # The brackets closed, as they are when that parses; where it does not (`if c` wants a
        # block, `fn f(x:` a type), grown by what the parser says it expects at the end, one step
        # at a time; else the same from the quote alone, or from each way of finishing a word
        # being typed (`fn f() t`).
        starts = dict.fromkeys((brackets, suffix, *(() if suffix else _completions(text))))
        return next((done for start in starts if (done := _finish_by_parser(text, start)) is not None), None)

    def check_and_hash(self, text: str, *, script: bool = False) -> tuple[Diagnostic | None, str | None]:
        """One lexing serves the parse and the hash (corpus validate's two questions)."""
        parser, error = _parsed(text, script)
        return (error, None) if error is not None else (None, _hash_tokens(parser.lx, text))

    def structural_hash(self, text: str) -> str:
        return _hash_tokens(Lexed(text), text)

    def metadata(self, text: str) -> dict:
        return metadata(text)


def _parsed(text: str, script: bool) -> tuple[Parser | None, Diagnostic | None]:
    """The parser after its run (None when even lexing failed) and the first syntax error."""
    try:
        parser = Parser(text, script)
    except Exception as exc:  # the lexer never fails on str input; defend the contract anyway
        return None, Diagnostic(1, 1, f"internal lexer error: {exc}")
    try:
        with gc_paused():
            parser.run()
    except VoxParseError as exc:
        return parser, Diagnostic(exc.line, exc.col, exc.message)
    return parser, None


def _hash_tokens(lx: Lexed, text: str) -> str:
    # Token texts without newlines (comments and blanks are not tokens), NUL-separated; the
    # filtering and joining run at C speed (corpus validate hashes every response).
    kept = list(compress(lx.texts, map(ne, lx.kinds, repeat("NL"))))
    # '…' and "…" mean the same string: hash one canonical spelling (body with the quote
    # escapes resolved), so copies differing only in quote style dedupe.
    if "'" in text or '"' in text:
        kept = [_canonical_string(t) if t[:1] in "'\"" else t for t in kept]
    return hashlib.sha256("\x00".join(kept).encode("utf-8", "surrogatepass")).hexdigest()
