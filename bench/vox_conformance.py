"""Vox conformance: differential fuzzing of mens's Vox parser against the reference parser.

    .venv/bin/python bench/vox_conformance.py --oracle ../shared/tools/vox-ref-oracle \\
        [--count 20000] [--seed 0] [--json bench/results/vox_conformance.json] \\
        [--cases-dir bench/results/vox_disagreements] [--check-sources]

Programs come from five seeded sources:
  examples  the files of examples/vox (module mode) and examples/vox-script (script mode), each
            once unmutated ("original") and then as single-edit mutants;
  synth     programs of mens's synthetic generator (mens.corpus.synth), unmutated and mutated;
  grammar   random programs of bench/vox_grammar_gen.py, one top-level declaration each, "clean"
            or "noisy" (newlines, commas, quote swaps and dropped characters sprinkled in), plus
            a few "must_reject" forms (retired constructs, the spec's known errors);
  idioms    examples and synth programs with one to three idioms of other languages written in
            ("idiom": `->` for `to`, `let mut`, `elif`, `List<int>`, `x++`, `;` line ends …,
            bench/vox_idioms.py) or two to four of the mutation kinds below stacked ("stacked");
  modifiers what comes before a declaration's keyword (bench/vox_modifiers.py): one to three of
            `pub`, `async`, decorators and @-forms in any order before a clean grammar program of
            every construct kind ("prefix"), functions whose decorators take argument lists of a
            random grammar ("deco_args") and functions whose modifiers come in a random order
            ("order").
Mutation kinds: delete/duplicate a line or a token; a newline before `{`, after an operator,
inside brackets or before any token; drop a bracket; a comma at a block entry's end, before a
closing bracket or after an opening one; drop a comma; swap a string's quotes; replace a
keyword, symbol or decorator by another; insert a character that forms no token (; ! & @ é);
truncate the file.

Both parsers judge every program: the oracle in batches over files in one temp dir (thousands
per call), mens in process (`get_pack("vox").analyze`; an exception or a hang counts as its own
disagreement, "mens crashed"). The report: verdict agreement overall and by source, mutation
kind and construct (the taxonomy kind of the top-level declaration holding the edit), the two
directions of disagreement (mens accepts what the oracle rejects = over-acceptance, the worst;
mens rejects what the oracle accepts), first-error line agreement where both reject, and the
biggest disagreement classes. Writes the JSON summary and the disagreeing cases (capped per kind
and direction; index.jsonl lists them). Exit status 0 whatever the agreement; 2 on bad usage.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))  # vox_grammar_gen, next to this file

# The reference grammar's vocabulary (vox-syntax.md §1), kept here so the fuzzer does not lean
# on the lexer under test for what to insert.
KEYWORDS = (
    "fn let async mut if else while loop break continue match when fetching empty for in to "
    "return type dec import extern actor workflow activity side_effect spawn http pub with on state "
    "derived effect mount cleanup view component agent migrate env and or not is isnt true false "
    "fragment"
).split()
CONTEXTUAL = (
    "routes url state_machine partial terminal from any as rust react uses key style raw_css "
    "field on_submit loader pending kind fallback version query mutation server depends_on "
    "not_found error required optional hidden label pattern max_len min_len range default "
    "color spacing radius shadow font family light dark success_redirect error_message"
).split()
DECORATORS = (
    "@component @tool @mcp.tool @resource @mcp.resource @test @endpoint @table @index @native "
    "@loading @require @ensure @invariant @forall @fuzz @pure @reactive @scheduled @deprecated @v0 "
    "@ai @prompt @subagent @search @hole @cancellable @form @back_button @deep_link @push @tokens "
    "@cors @rate_limit @uses @pii @embed @webhook @auth @offline_capable @collaborative @layer "
    "@remote @inference @training_step @distributed_train"
).split()
SYMBOLS = "( ) [ ] { } : ? , . = == != += -= *= /= -> => |> | < > <= >= + - * / % _".split()
OPERATORS = set("== != += -= *= /= -> => |> | < > <= >= + - * / % = : and or is isnt not with".split())
BRACKETS = set("()[]{}")
DROPPED_CHARS = [";", ";", "!", "!", "&", "&", "@", "\u00e9"]

# taxonomy kind of a declaration from its first word, for lines mens's own parse left uncovered
_FIRST_WORD_KIND = {
    "fn": "function", "pub": "function", "async": "function", "extern": "function",
    "type": "type", "import": "import", "let": "const", "@mcp.tool": "mcp_tool", "@tool": "mcp_tool",
    "@mcp.resource": "mcp_resource", "@resource": "mcp_resource", "@test": "test",
    "@forall": "forall", "@table": "table", "@index": "index", "@v0": "v0_component",
    "routes": "routes", "@scheduled": "scheduled", "@loading": "loading",
    "component": "component", "fragment": "fragment", "url": "url",
    "state_machine": "state_machine", "partial": "state_machine", "workflow": "workflow",
    "@distributed_train": "workflow", "activity": "activity", "actor": "actor", "@form": "form",
    "@back_button": "mobile", "@deep_link": "mobile", "@push": "mobile", "@tokens": "tokens",
}
_ENDPOINT_KIND = {"query": "query", "mutation": "mutation", "server": "server_fn"}

MUTATION_KINDS = (
    "delete_line", "dup_line", "delete_token", "dup_token", "nl_before_brace", "nl_after_operator",
    "nl_in_brackets", "nl_before_token", "drop_bracket", "comma_entry_end", "comma_before_close",
    "comma_after_open", "drop_comma", "swap_quotes", "swap_keyword", "swap_symbol",
    "swap_decorator", "insert_dropped_char", "truncate",
)
DIRECTIONS = ("over", "under", "crash")  # mens accepts / oracle rejects; the reverse; mens raised


# --------------------------------------------------------------------------------------------
# programs


@dataclass
class Program:
    idx: int
    source: str          # examples | synth | grammar | idioms | modifiers
    kind: str            # a mutation kind, "original", or "clean"/"noisy" for grammar programs
    construct: str
    script: bool
    text: str
    origin: str          # file path, synth template, or grammar construct + number
    detail: str = ""     # what the mutation did
    at_line: int = 0     # line of the edit in the mutant (0: none)
    oracle: tuple | None = None  # (ok, line, col, message)
    mens: tuple | None = None    # (ok, line, col, message) or ("crash", 0, 0, message)


@dataclass
class Base:
    """A program to mutate: its text, tokens and the construct kind of each line."""

    source: str
    origin: str
    text: str
    script: bool
    toks: list = field(default_factory=list)       # (kind, text, start, end), no EOF
    line_kind: list = field(default_factory=list)  # index line-1 -> construct kind
    line_starts: list = field(default_factory=list)

    def line_of(self, offset: int) -> int:
        from bisect import bisect_right
        return bisect_right(self.line_starts, offset)

    def construct_at(self, offset: int) -> str:
        line = self.line_of(offset)
        return self.line_kind[line - 1] if 0 < line <= len(self.line_kind) else "(outside)"


def make_base(source: str, origin: str, text: str, script: bool, pack) -> Base:
    from mens.lang.vox.lexer import tokenize

    b = Base(source, origin, text, script)
    b.toks = [(t.kind, t.text, t.offset, t.offset + len(t.text)) for t in tokenize(text) if t.kind != "EOF"]
    lines = text.split("\n")
    starts, pos = [], 0
    for ln in lines:
        starts.append(pos)
        pos += len(ln) + 1
    b.line_starts = starts
    kinds = _heuristic_line_kinds(lines)
    try:
        analysis = pack.analyze(text, script=script)
        for c in analysis.constructs:
            for ln in range(c.span.start_line, min(c.span.end_line, len(kinds)) + 1):
                kinds[ln - 1] = c.kind
    except Exception:  # noqa: BLE001 - a crashing parser still leaves the heuristic
        pass
    b.line_kind = kinds
    return b


def _heuristic_line_kinds(lines: list[str]) -> list[str]:
    """Construct kind per line: a declaration starts at a column-1 line that is not a comment, a
    closing brace or blank, and runs to the next one."""
    kinds, cur = [], "(outside)"
    for ln in lines:
        s = ln.strip()
        if ln[:1] not in ("", " ", "\t", "}", "/", "#", ")", "]") and s:
            first = re.split(r"[\s({]", s, maxsplit=1)[0]
            if first == "@endpoint":
                m = re.search(r"kind\s*:\s*(\w+)", s)
                cur = _ENDPOINT_KIND.get(m.group(1), "function") if m else "function"
            elif first.startswith("@") and first not in _FIRST_WORD_KIND:
                cur = "function"  # a function decorator line
            else:
                cur = _FIRST_WORD_KIND.get(first, cur if first in ("|",) else "(outside)")
        kinds.append(cur)
    return kinds


# --------------------------------------------------------------------------------------------
# mutations: each takes (base, rng) and returns (new text, offset of the edit, detail) or None


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _splice(text: str, start: int, end: int, new: str) -> str:
    """Replace text[start:end] by `new`, adding a space where two words would otherwise fuse."""
    left = text[start - 1] if start > 0 else ""
    right = text[end] if end < len(text) else ""
    if new == "" and left and right and _word_char(left) and _word_char(right):
        new = " "
    return text[:start] + new + text[end:]


def _pick(rng, toks, pred):
    cands = [i for i, t in enumerate(toks) if pred(i, t)]
    return rng.choice(cands) if cands else None


def _pos(b: Base, offset: int) -> str:
    line = b.line_of(offset)
    return f"{line}:{offset - b.line_starts[line - 1] + 1}"


def _enclosing(toks) -> list[str]:
    """For each token, the innermost open bracket around it ('' at top level)."""
    stack, out = [], []
    closer = {")": "(", "]": "[", "}": "{"}
    for k, _t, _s, _e in toks:
        if k in closer:
            if stack and stack[-1] == closer[k]:
                stack.pop()
        out.append(stack[-1] if stack else "")
        if k in ("(", "[", "{"):
            stack.append(k)
    return out


def m_delete_line(b, rng):
    lines = b.text.split("\n")
    cands = [i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith(("//", "#"))]
    if not cands:
        return None
    i = rng.choice(cands)
    off = b.line_starts[i]
    return "\n".join(lines[:i] + lines[i + 1:]), off, f"delete line {i + 1}: {lines[i].strip()[:60]!r}"


def m_dup_line(b, rng):
    lines = b.text.split("\n")
    cands = [i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith(("//", "#"))]
    if not cands:
        return None
    i = rng.choice(cands)
    return ("\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]), b.line_starts[i],
            f"duplicate line {i + 1}: {lines[i].strip()[:60]!r}")


def m_delete_token(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[0] != "NL")
    if i is None:
        return None
    k, t, s, e = b.toks[i]
    return _splice(b.text, s, e, ""), s, f"delete token {t!r} at {_pos(b, s)}"


def m_dup_token(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[0] != "NL")
    if i is None:
        return None
    k, t, s, e = b.toks[i]
    return b.text[:e] + " " + t + b.text[e:], s, f"duplicate token {t!r} at {_pos(b, s)}"


def _insert_before(b, i, new, what):
    k, t, s, e = b.toks[i]
    return b.text[:s] + new + b.text[s:], s, f"{what} before {t!r} at {_pos(b, s)}"


def _insert_after(b, i, new, what):
    k, t, s, e = b.toks[i]
    return b.text[:e] + new + b.text[e:], s, f"{what} after {t!r} at {_pos(b, s)}"


def m_nl_before_brace(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[0] == "{")
    return None if i is None else _insert_before(b, i, "\n", "newline")


def m_nl_after_operator(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[1] in OPERATORS)
    return None if i is None else _insert_after(b, i, "\n", "newline")


def m_nl_in_brackets(b, rng):
    enc = _enclosing(b.toks)
    toks = b.toks

    def ok(i, t):
        return ((t[0] in ("(", "[") ) or (t[0] == "," and enc[i] in ("(", "["))
                or (t[0] in (")", "]") and i > 0))
    i = _pick(rng, toks, ok)
    if i is None:
        return None
    if toks[i][0] in (")", "]"):
        return _insert_before(b, i, "\n", "newline")
    return _insert_after(b, i, "\n", "newline")


def m_nl_before_token(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[0] != "NL" and i > 0 and b.toks[i - 1][0] != "NL")
    return None if i is None else _insert_before(b, i, "\n", "newline")


def m_drop_bracket(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[0] in BRACKETS)
    if i is None:
        return None
    k, t, s, e = b.toks[i]
    return _splice(b.text, s, e, ""), s, f"drop {t!r} at {_pos(b, s)}"


def m_comma_entry_end(b, rng):
    """A comma at the end of a line inside braces (between the entries of a block)."""
    enc = _enclosing(b.toks)
    toks = b.toks
    i = _pick(rng, toks, lambda i, t: t[0] == "NL" and enc[i] == "{" and i > 0
              and toks[i - 1][0] not in ("NL", "{", ","))
    return None if i is None else _insert_before(b, i, ",", "comma")


def m_comma_before_close(b, rng):
    toks = b.toks
    i = _pick(rng, toks, lambda i, t: t[0] in (")", "]", "}") and i > 0
              and toks[i - 1][0] not in ("(", "[", "{", ","))
    return None if i is None else _insert_before(b, i, ",", "comma")


def m_comma_after_open(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[0] in ("(", "[", "{"))
    return None if i is None else _insert_after(b, i, ",", "comma")


def m_drop_comma(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[0] == ",")
    if i is None:
        return None
    k, t, s, e = b.toks[i]
    return _splice(b.text, s, e, ""), s, f"drop ',' at {_pos(b, s)}"


def m_swap_quotes(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[0] in ("STR", "USTR"))
    if i is None:
        return None
    k, t, s, e = b.toks[i]
    q = t[0]
    other = "'" if q == '"' else '"'
    new = other + t[1:-1] + other if k == "STR" and len(t) >= 2 else other + t[1:]
    return b.text[:s] + new + b.text[e:], s, f"swap quotes of {t[:30]!r} at {_pos(b, s)}"


def _replace(b, i, new, what):
    k, t, s, e = b.toks[i]
    left = b.text[s - 1] if s > 0 else ""
    right = b.text[e] if e < len(b.text) else ""
    pad_l = " " if left and _word_char(left) and _word_char(new[0]) else ""
    pad_r = " " if right and _word_char(right) and _word_char(new[-1]) else ""
    return b.text[:s] + pad_l + new + pad_r + b.text[e:], s, f"{what} {t!r} -> {new!r} at {_pos(b, s)}"


_KW_SET = set(KEYWORDS) | set(CONTEXTUAL)


def m_swap_keyword(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[1] in _KW_SET)
    if i is None:
        return None
    pool = KEYWORDS + CONTEXTUAL
    new = rng.choice([w for w in pool if w != b.toks[i][1]])
    return _replace(b, i, new, "replace keyword")


def m_swap_symbol(b, rng):
    syms = set(SYMBOLS)
    i = _pick(rng, b.toks, lambda i, t: t[0] in syms)
    if i is None:
        return None
    new = rng.choice([w for w in SYMBOLS if w != b.toks[i][1]])
    return _replace(b, i, new, "replace symbol")


def m_swap_decorator(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[1].startswith("@"))
    if i is None:
        return None
    new = rng.choice([w for w in DECORATORS if w != b.toks[i][1]])
    return _replace(b, i, new, "replace decorator")


def m_insert_dropped_char(b, rng):
    i = _pick(rng, b.toks, lambda i, t: t[0] != "NL")
    if i is None:
        return None
    c = rng.choice(DROPPED_CHARS)
    if rng.random() < 0.5:
        return _insert_before(b, i, c, f"insert {c!r}")
    return _insert_after(b, i, c, f"insert {c!r}")


def m_truncate(b, rng):
    if not b.toks:
        return None
    lo = b.toks[0][2]
    off = rng.randrange(lo, len(b.text)) if len(b.text) > lo else lo
    return b.text[:off], max(0, min(off, len(b.text) - 1)), f"truncate at {_pos(b, min(off, len(b.text) - 1))}"


MUTATORS = {name: globals()["m_" + name] for name in MUTATION_KINDS}


def mutate(b: Base, kind: str, rng) -> tuple[str, int, str] | None:
    return MUTATORS[kind](b, rng)


def mutants(bases: list[Base], n: int, rng, source: str, start_idx: int) -> list[Program]:
    """`n` distinct single-edit mutants, mutation kinds in seeded rounds so each gets an even
    share. A kind whose space is used up (the bases hold only so many commas) leaves the rounds
    after many misses in a row, and the other kinds fill its share."""
    out: list[Program] = []
    seen = {b.text for b in bases}
    kinds = list(MUTATION_KINDS)
    misses = Counter()
    order: list[str] = []
    while len(out) < n and kinds:
        if not order:
            order = kinds[:]
            rng.shuffle(order)
        kind = order.pop()
        got = None
        for _ in range(20):  # a kind may not apply to every base, or repeat an earlier mutant
            b = rng.choice(bases)
            got = mutate(b, kind, rng)
            if got is not None and got[0] not in seen:
                break
            got = None
        if got is None:
            misses[kind] += 1
            if misses[kind] >= 10:
                kinds.remove(kind)
                order = [k for k in order if k != kind]
            continue
        misses[kind] = 0
        text, off, detail = got
        seen.add(text)
        line = text.count("\n", 0, min(off, len(text))) + 1
        out.append(Program(start_idx + len(out), source, kind, b.construct_at(off), b.script, text,
                           b.origin, detail, line))
    return out


def idiom_mutants(bases: list[Base], n: int, rng, start_idx: int, pack) -> list[Program]:
    """`n` distinct programs: 60 % with one to three idioms of other languages written in
    (bench/vox_idioms.py), 40 % with two to four of the single edits above stacked (each edit on
    the text the one before left)."""
    from vox_idioms import idiom_mutant

    out: list[Program] = []
    seen = {b.text for b in bases}
    misses = 0
    while len(out) < n and misses < 1000:
        b = rng.choice(bases)
        if rng.random() < 0.6:
            kind, got = "idiom", idiom_mutant(b.text, rng, rng.choice((1, 1, 1, 2, 3)))
        else:
            kind, got, cur, details, first = "stacked", None, b, [], None
            for _ in range(rng.choice((2, 2, 3, 4))):
                step = mutate(cur, rng.choice(MUTATION_KINDS), rng)
                if step is None:
                    continue
                details.append(step[2])
                first = step[1] if first is None else min(first, step[1])
                cur = make_base(b.source, b.origin, step[0], b.script, pack)
                got = (step[0], first, "; ".join(details))
        if got is None or got[0] in seen:
            misses += 1
            continue
        text, off, detail = got
        seen.add(text)
        line = text.count("\n", 0, min(off, len(text))) + 1
        out.append(Program(start_idx + len(out), "idioms", kind, b.construct_at(min(off, len(b.text) - 1)),
                           b.script, text, b.origin, detail, line))
    return out


# --------------------------------------------------------------------------------------------
# the two parsers


_LINE_COL = re.compile(r"^(\d+):(\d+)$")


def run_oracle(oracle: Path, programs: list[Program], tmp: Path, batch: int, progress) -> None:
    """Fill program.oracle for every program: one file each, the oracle over thousands a call."""
    for p in programs:
        (tmp / f"p{p.idx:06d}.vox").write_text(p.text, encoding="utf-8")
    by_name = {f"p{p.idx:06d}.vox": p for p in programs}
    for script in (False, True):
        group = [p for p in programs if p.script == script]
        for lo in range(0, len(group), batch):
            chunk = group[lo:lo + batch]
            cmd = [str(oracle)] + (["--script"] if script else []) + [f"p{p.idx:06d}.vox" for p in chunk]
            res = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, errors="replace")
            for line in res.stdout.splitlines():
                parts = line.split("\t")
                p = by_name.get(parts[1]) if len(parts) > 1 else None
                if p is None:
                    continue
                if parts[0] == "OK":
                    p.oracle = (True, 0, 0, "")
                else:
                    m = _LINE_COL.match(parts[2]) if len(parts) > 2 else None
                    ln, col = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
                    p.oracle = (False, ln, col, "\t".join(parts[3:]).strip())
            for p in chunk:
                if p.oracle is None:
                    p.oracle = (False, 0, 0, f"oracle gave no verdict (exit {res.returncode}): "
                                + res.stderr.strip()[-200:])
            progress(len(chunk))


class _Hang(Exception):
    pass


def _alarm(_sig, _frame):
    raise _Hang()


def run_mens(programs: list[Program], timeout: float, progress) -> None:
    from mens.lang import get_pack

    pack = get_pack("vox")
    use_alarm = hasattr(signal, "setitimer")
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
    done = 0
    try:
        for p in programs:
            try:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, timeout)
                a = pack.analyze(p.text, script=p.script)
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                if a.ok:
                    p.mens = (True, 0, 0, "")
                else:
                    e = a.error
                    p.mens = (False, e.line, e.col, e.message)
            except _Hang:
                p.mens = ("crash", 0, 0, f"no verdict within {timeout:g} s (hang?)")
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - any exception from mens is a finding
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                p.mens = ("crash", 0, 0, f"{type(exc).__name__}: {str(exc)[:200]}")
            done += 1
            if done % 500 == 0:
                progress(500)
        if done % 500:
            progress(done % 500)
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


# --------------------------------------------------------------------------------------------
# scoring and reports


def outcome(p: Program) -> str:
    m_ok, o_ok = p.mens[0], p.oracle[0]
    if m_ok == "crash":
        return "crash"
    if m_ok and not o_ok:
        return "over"
    if o_ok and not m_ok:
        return "under"
    return "agree"


class Tally:
    __slots__ = ("n", "agree", "over", "under", "crash", "both_err", "line_same", "pos_same", "both_ok")

    def __init__(self):
        self.n = self.agree = self.over = self.under = self.crash = 0
        self.both_err = self.line_same = self.pos_same = self.both_ok = 0

    def add(self, p: Program, out: str) -> None:
        self.n += 1
        if out == "agree":
            self.agree += 1
            if p.oracle[0]:
                self.both_ok += 1
            else:
                self.both_err += 1
                self.line_same += p.oracle[1] == p.mens[1]
                self.pos_same += p.oracle[1:3] == p.mens[1:3]
        else:
            setattr(self, out, getattr(self, out) + 1)

    def as_dict(self) -> dict:
        return {"programs": self.n, "agree": self.agree,
                "agree_pct": _pct(self.agree, self.n),
                "mens_accepts_oracle_rejects": self.over,
                "mens_rejects_oracle_accepts": self.under, "mens_crashed": self.crash,
                "both_accept": self.both_ok, "both_reject": self.both_err,
                "first_error_line_agree_pct": _pct(self.line_same, self.both_err),
                "first_error_line_col_agree_pct": _pct(self.pos_same, self.both_err)}


def _pct(a: int, b: int) -> float | None:
    return round(100.0 * a / b, 2) if b else None


def _norm_message(msg: str) -> str:
    msg = re.sub(r"`[^`]*`", "`…`", msg)
    msg = re.sub(r"\d+", "N", msg)
    return msg[:120]


def _snippet(p: Program, radius: int = 1) -> str:
    """The lines around the edit and around the first error either parser reports."""
    lines = p.text.split("\n")
    focus = {ln for ln in (p.at_line, p.oracle[1] if p.oracle else 0, p.mens[1] if p.mens else 0) if ln}
    keep = sorted({i for ln in focus for i in range(max(0, ln - 1 - radius), min(len(lines), ln + radius))})
    out, prev = [], None
    for i in keep:
        if prev is not None and i != prev + 1:
            out.append("   ...")
        out.append(f"{i + 1:4d}| {lines[i]}")
        prev = i
    return "\n".join(out)


def summarize(programs: list[Program], top: int) -> dict:
    overall = Tally()
    tables = {"by_source": defaultdict(Tally), "by_kind": defaultdict(Tally),
              "by_construct": defaultdict(Tally), "by_source_kind": defaultdict(Tally)}
    classes: dict[tuple, list[Program]] = defaultdict(list)
    for p in programs:
        out = outcome(p)
        overall.add(p, out)
        tables["by_source"][p.source].add(p, out)
        tables["by_kind"][p.kind].add(p, out)
        tables["by_construct"][p.construct].add(p, out)
        tables["by_source_kind"][f"{p.source}/{p.kind}"].add(p, out)
        if out == "over":
            classes[(out, "oracle: " + _norm_message(p.oracle[3]))].append(p)
        elif out == "under":
            classes[(out, "mens: " + _norm_message(p.mens[3]))].append(p)
        elif out == "crash":
            classes[(out, "mens: " + _norm_message(p.mens[3]))].append(p)
    ranked = sorted(classes.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    cls = []
    for (direction, key), ps in ranked[:top]:
        cls.append({"direction": direction, "class": key, "count": len(ps),
                    "kinds": dict(Counter(p.kind for p in ps).most_common(5)),
                    "examples": [_case_dict(p) for p in ps[:3]]})
    return {"totals": overall.as_dict(),
            **{name: {k: t.as_dict() for k, t in sorted(tab.items())} for name, tab in tables.items()},
            "classes": cls}


def _case_dict(p: Program) -> dict:
    return {"id": p.idx, "source": p.source, "kind": p.kind, "construct": p.construct,
            "script": p.script, "origin": p.origin, "detail": p.detail, "at_line": p.at_line,
            "oracle": {"ok": p.oracle[0], "line": p.oracle[1], "col": p.oracle[2], "message": p.oracle[3]},
            "mens": {"ok": p.mens[0], "line": p.mens[1], "col": p.mens[2], "message": p.mens[3]},
            "snippet": _snippet(p)}


def write_cases(programs: list[Program], cases_dir: Path, cap: int) -> int:
    """The disagreeing programs as .vox files plus index.jsonl, at most `cap` per (kind, direction)."""
    if cases_dir.exists():
        for f in cases_dir.iterdir():
            if f.is_file() and (f.suffix == ".vox" or f.name == "index.jsonl"):
                f.unlink()
    cases_dir.mkdir(parents=True, exist_ok=True)
    per = Counter()
    written = 0
    with open(cases_dir / "index.jsonl", "w", encoding="utf-8") as index:
        for p in programs:
            out = outcome(p)
            if out == "agree":
                continue
            per[(p.kind, out)] += 1
            if per[(p.kind, out)] > cap:
                continue
            name = f"{out}_{p.source}_{p.kind}_{p.idx:06d}.vox"
            (cases_dir / name).write_text(p.text, encoding="utf-8")
            rec = _case_dict(p)
            rec["file"] = name
            rec["direction"] = {"over": "mens accepts, oracle rejects",
                                "under": "mens rejects, oracle accepts",
                                "crash": "mens crashed"}[out]
            index.write(json.dumps(rec, ensure_ascii=False) + "\n")
            written += 1
    return written


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.1f}"


def print_table(title: str, rows: dict[str, dict], out=sys.stdout) -> None:
    head = f"{'':<34} {'programs':>8} {'agree%':>7} {'over':>6} {'under':>6} {'crash':>6} {'line%':>6}"
    print(f"\n{title}", file=out)
    print(head, file=out)
    print("-" * len(head), file=out)
    for name, d in rows.items():
        print(f"{name:<34} {d['programs']:>8} {_fmt(d['agree_pct']):>7} "
              f"{d['mens_accepts_oracle_rejects']:>6} {d['mens_rejects_oracle_accepts']:>6} "
              f"{d['mens_crashed']:>6} {_fmt(d['first_error_line_agree_pct']):>6}", file=out)


class Progress:
    def __init__(self, label: str, total: int):
        self.label, self.total, self.done, self.t0 = label, total, 0, time.perf_counter()
        self.tty = sys.stderr.isatty()
        self._last = 0.0
        self(0)

    def __call__(self, k: int) -> None:
        self.done += k
        now = time.perf_counter()
        if self.done < self.total and now - self._last < (0.2 if self.tty else 5.0):
            return
        self._last = now
        msg = f"{self.label}: {self.done}/{self.total} ({now - self.t0:.1f} s)"
        if self.tty:
            print("\r" + msg, end="\n" if self.done >= self.total else "", file=sys.stderr, flush=True)
        else:
            print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------


def build_programs(args, pack) -> tuple[list[Program], dict]:
    rng = random.Random(args.seed)
    weights = ([float(x) for x in args.split.split(",")] + [0.0, 0.0])[:5]  # fewer numbers: no idioms/modifiers
    total = sum(weights)
    n_ex = round(args.count * weights[0] / total)
    n_syn = round(args.count * weights[1] / total)
    n_idiom = round(args.count * weights[3] / total)
    n_mod = round(args.count * weights[4] / total)
    n_gram = args.count - n_ex - n_syn - n_idiom - n_mod
    programs: list[Program] = []
    bases_info: dict = {}

    # a) the examples
    ex_bases = []
    for d, script in ((args.examples, False), (args.examples_script, True)):
        for f in sorted(d.rglob("*.vox")):
            ex_bases.append(make_base("examples", str(f.relative_to(REPO) if f.is_relative_to(REPO) else f),
                                      f.read_text(encoding="utf-8"), script, pack))
    if n_ex:
        for b in ex_bases[:n_ex]:
            programs.append(Program(len(programs), "examples", "original", _main_kind(b),
                                    b.script, b.text, b.origin))
        programs += mutants(ex_bases, n_ex - len(programs), rng, "examples", len(programs))

    # b) the synthetic generator
    syn_bases = []
    if n_syn or n_idiom:
        from mens.corpus.synth.generate import code_of, generate

        n_bases = max(20, min(2000, max(n_syn, n_idiom) // 10))
        for pair in generate(n_bases, args.seed):
            syn_bases.append(make_base("synth", pair.source, code_of(pair), False, pack))
        n_orig = min(len(syn_bases), n_syn // 10)
        for b in syn_bases[:n_orig]:
            programs.append(Program(len(programs), "synth", "original", _main_kind(b),
                                    False, b.text, b.origin))
        programs += mutants(syn_bases, n_syn - n_orig, rng, "synth", len(programs))

    # c) other languages' idioms written into the examples and synth programs, and stacked edits
    if n_idiom:
        programs += idiom_mutants(ex_bases + syn_bases, n_idiom, rng, len(programs), pack)

    # d) grammar-driven programs
    clean_twins: list[Program] = []
    if n_gram:
        try:
            import vox_grammar_gen as gg
        except ImportError:
            gg = None
        if gg is None:
            print("vox_conformance: bench/vox_grammar_gen.py not found; no grammar programs",
                  file=sys.stderr)
        else:
            grng = random.Random(args.seed * 1_000_003 + 7)
            for i in range(n_gram):
                g = gg.generate_program(grng, noisy_share=args.noisy_share,
                                        reject_share=args.reject_share)
                kind = "must_reject" if not g.expect_ok else "noisy" if g.noisy else "clean"
                programs.append(Program(len(programs), "grammar", kind,
                                        g.construct, False, g.text, f"grammar:{g.construct}#{i}",
                                        g.detail, g.first_noise_line))
                if g.noisy:
                    clean_twins.append(Program(-1, "grammar", "clean-twin", g.construct, False,
                                               g.clean_text, f"grammar:{g.construct}#{i}"))
    # e) modifier orders and decorator argument grammars before every construct kind
    if n_mod:
        import vox_grammar_gen as gg
        from vox_modifiers import modifier_program

        mrng = random.Random(args.seed * 1_000_003 + 11)
        for i in range(n_mod):
            text, kind, construct, line = modifier_program(mrng, gg)
            script = mrng.random() < 0.15  # a script's declarations start with fewer words
            programs.append(Program(len(programs), "modifiers", kind, construct, script, text,
                                    f"modifiers:{construct}#{i}", "", line))
    bases_info = {"examples": ex_bases, "synth": syn_bases, "grammar_twins": clean_twins}
    return programs, bases_info


def _main_kind(b: Base) -> str:
    """The construct of an unmutated file: its most common line kind."""
    kinds = [k for k in b.line_kind if k != "(outside)"]
    return Counter(kinds).most_common(1)[0][0] if kinds else "(outside)"


def check_sources(oracle: Path, info: dict, programs: list[Program], tmp: Path, batch: int) -> dict:
    """Oracle verdicts on every unmutated source: the examples, the synth bases, and the clean
    version of every grammar program."""
    extra: list[Program] = []
    idx = 900_000
    for b in info["examples"] + info["synth"]:
        extra.append(Program(idx, b.source, "source", "", b.script, b.text, b.origin))
        idx += 1
    for p in programs:
        if p.source == "grammar" and p.kind == "clean":
            extra.append(Program(idx, "grammar", "source", p.construct, False, p.text, p.origin))
            idx += 1
    for p in info["grammar_twins"]:
        extra.append(Program(idx, "grammar", "source", p.construct, False, p.text, p.origin))
        idx += 1
    sub = tmp / "sources"
    sub.mkdir(exist_ok=True)
    run_oracle(oracle, extra, sub, batch, lambda k: None)
    result: dict = {}
    must = [p for p in programs if p.kind == "must_reject"]
    result["must_reject_accepted_by_oracle"] = sorted({p.text for p in must if p.oracle[0]})
    for source in ("examples", "synth", "grammar"):
        ps = [p for p in extra if p.source == source]
        rejected = [p for p in ps if not p.oracle[0]]
        by_c = Counter(p.construct for p in rejected) if source == "grammar" else {}
        result[source] = {"checked": len(ps), "rejected": len(rejected),
                          "rejected_by_construct": dict(by_c),
                          "list": [{"origin": p.origin, "line": p.oracle[1], "col": p.oracle[2],
                                    "message": p.oracle[3],
                                    **({"text": p.text} if source != "examples" else {})}
                                   for p in rejected[:100]]}
    return result


def main() -> int:
    ap = argparse.ArgumentParser(
        prog="vox_conformance.py", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--oracle", type=Path, required=True, metavar="PATH",
                    help="the vox-ref-oracle binary (the reference lexer+parser), e.g. "
                         "../shared/tools/vox-ref-oracle; exit 2 when it is missing")
    ap.add_argument("--count", type=int, default=20000, metavar="N",
                    help="programs in all, over the five sources (default 20000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    ap.add_argument("--split", default="4,3,3,2,2", metavar="E,S,G[,I[,M]]",
                    help="relative shares of the examples, synth, grammar, idioms and modifiers "
                         "sources (default 4,3,3,2,2; fewer numbers: no idioms, no modifiers)")
    ap.add_argument("--noisy-share", type=float, default=0.65, metavar="F",
                    help="share of grammar programs with noise sprinkled in (default 0.65)")
    ap.add_argument("--reject-share", type=float, default=0.04, metavar="F",
                    help="share of grammar programs that are forms the reference must reject: "
                         "retired constructs, known errors of vox-syntax.md (default 0.04)")
    ap.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "vox_conformance.json",
                    metavar="PATH", help="the JSON summary (default bench/results/vox_conformance.json)")
    ap.add_argument("--cases-dir", type=Path, default=REPO / "bench" / "results" / "vox_disagreements",
                    metavar="DIR",
                    help="the disagreeing programs, a .vox file each plus index.jsonl; its old "
                         ".vox files are removed first (default bench/results/vox_disagreements/)")
    ap.add_argument("--cases-cap", type=int, default=30, metavar="N",
                    help="cases written per (kind, direction); all are counted (default 30)")
    ap.add_argument("--check-sources", action="store_true",
                    help="also check that the oracle accepts every unmutated source (examples/vox, "
                         "examples/vox-script, the synth programs, the clean version of every "
                         "grammar program) and rejects every must-reject form; list the others")
    ap.add_argument("--examples", type=Path, default=REPO / "examples" / "vox", help=argparse.SUPPRESS)
    ap.add_argument("--examples-script", type=Path, default=REPO / "examples" / "vox-script",
                    help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=4000, metavar="N",
                    help="files per oracle invocation (default 4000)")
    ap.add_argument("--timeout", type=float, default=5.0, metavar="S",
                    help="seconds mens may take on one program before it counts as a crash (hang) "
                         "(default 5)")
    ap.add_argument("--top", type=int, default=15, metavar="N",
                    help="disagreement classes to print (default 15)")
    args = ap.parse_args()

    if not args.oracle.is_file() or not os.access(args.oracle, os.X_OK):
        print(f"vox_conformance: no executable oracle at {args.oracle}", file=sys.stderr)
        return 2
    if args.count < 1:
        print("vox_conformance: --count must be at least 1", file=sys.stderr)
        return 2
    try:
        split = [float(x) for x in args.split.split(",")]
        assert len(split) in (3, 4, 5) and all(x >= 0 for x in split) and sum(split) > 0
    except (ValueError, AssertionError):
        print("vox_conformance: --split takes three to five non-negative numbers, e.g. 4,3,3,2,2",
              file=sys.stderr)
        return 2

    from mens.lang import get_pack

    pack = get_pack("vox")
    t0 = time.perf_counter()
    programs, info = build_programs(args, pack)
    t_gen = time.perf_counter() - t0
    print(f"generated {len(programs)} programs in {t_gen:.1f} s", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="vox_conformance_") as tmpname:
        tmp = Path(tmpname)
        t1 = time.perf_counter()
        run_oracle(args.oracle.resolve(), programs, tmp, args.batch, Progress("oracle", len(programs)))
        t_oracle = time.perf_counter() - t1
        t2 = time.perf_counter()
        run_mens(programs, args.timeout, Progress("mens", len(programs)))
        t_mens = time.perf_counter() - t2
        sources = None
        if args.check_sources:
            sources = check_sources(args.oracle.resolve(), info, programs, tmp, args.batch)

    summary = summarize(programs, args.top)
    n_cases = write_cases(programs, args.cases_dir, args.cases_cap)
    elapsed = time.perf_counter() - t0
    mb = sum(len(p.text.encode("utf-8")) for p in programs) / 1e6
    report = {
        "date": _dt.date.today().isoformat(),
        "command": "python bench/vox_conformance.py " + " ".join(sys.argv[1:]),
        "git_commit": _git_head(),
        # mens is judged as it is in the working tree: list the parser files changed since HEAD
        "mens_vox_uncommitted": _dirty("src/mens/lang/vox"),
        "seed": args.seed, "count": len(programs), "mb": round(mb, 3),
        "seconds": {"generate": round(t_gen, 2), "oracle": round(t_oracle, 2),
                    "mens": round(t_mens, 2), "total": round(elapsed, 2)},
        **summary,
        "cases_written": n_cases,
    }
    if sources is not None:
        report["check_sources"] = sources

    t = summary["totals"]
    print(f"\nVox conformance — {t['programs']} programs ({mb:.1f} MB), seed {args.seed}: "
          f"verdicts agree on {_fmt(t['agree_pct'])}%")
    print(f"  mens accepts / oracle rejects (over-acceptance): {t['mens_accepts_oracle_rejects']}")
    print(f"  mens rejects / oracle accepts:                   {t['mens_rejects_oracle_accepts']}")
    print(f"  mens crashed:                                    {t['mens_crashed']}")
    print(f"  first-error line agrees where both reject:       {_fmt(t['first_error_line_agree_pct'])}% "
          f"of {t['both_reject']}")
    print_table("By source", summary["by_source"])
    print_table("By kind (mutation kind; original; grammar clean/noisy)", summary["by_kind"])
    print_table("By construct", summary["by_construct"])
    print(f"\nBiggest disagreement classes (over = mens accepts what the oracle rejects):")
    for c in summary["classes"]:
        kinds = ", ".join(f"{k} {v}" for k, v in c["kinds"].items())
        print(f"  {c['count']:>6}  {c['direction']:<5} {c['class']}  [{kinds}]")
    if sources is not None:
        print("\nUnmutated sources the oracle rejects:")
        for source, r in sources.items():
            if source == "must_reject_accepted_by_oracle":
                if r:
                    print(f"  must-reject forms the oracle accepts: {len(r)}")
                    for text in r[:5]:
                        print("    " + text.replace(chr(10), chr(10) + "    "))
                continue
            print(f"  {source}: {r['rejected']} of {r['checked']}"
                  + (f"  by construct: {r['rejected_by_construct']}" if r["rejected_by_construct"] else ""))
            for item in r["list"][:20 if source != "grammar" else 10]:
                print(f"    {item['origin']}  {item['line']}:{item['col']}  {item['message']}")
    print(f"\ntime: generate {t_gen:.1f} s, oracle {t_oracle:.1f} s, mens {t_mens:.1f} s, "
          f"total {elapsed:.1f} s")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.json} and {n_cases} cases under {args.cases_dir}")
    return 0


def _dirty(path: str) -> list[str] | None:
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", path], cwd=REPO,
                             capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [line[3:] for line in out.splitlines()]


def _git_head() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


if __name__ == "__main__":
    sys.exit(main())
