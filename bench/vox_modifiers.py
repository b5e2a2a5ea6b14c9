"""Modifier orders and decorator argument grammars for the differential Vox fuzzers.

What comes before a declaration's keyword is where the Vox pack and the reference compiler have
disagreed on programs outside this repository (`async @reactive fn`, `@ai(strengths =
[codegen])`), and the other sources reach it only through what examples/ and the generators
already hold. This module writes it afresh:

  decorator(rng)       any decorator, with an argument list from a random grammar: keys of every
                       decorator (so each meets the others' keys and words none is known to take),
                       `=`, `:` or no separator, values of every kind (strings of both quotes,
                       numbers, names, booleans, lists of single tokens, brackets, nothing),
                       newlines after `(` and `,` or before `)`, trailing commas, no `)`;
  modifier_prefix(rng) one to three of `pub`, `async`, modifier and dispatching decorators and the
                       @-forms that start declarations (`@table`, `@form`, `@v0 "…"` …), in any
                       order, on one line or several;
  modifier_program()   a clean program of any construct kind (bench/vox_grammar_gen.py) with such a
                       prefix before its declaration ("prefix"), a function whose decorators are
                       argued at random ("deco_args"), or a function whose `pub`, `async` and
                       decorators come in a random order ("order");
  modifier_mutant()    the same two edits made to any program: a prefix before one of its top-level
                       declarations, or a decorator's arguments rewritten.

bench/vox_conformance.py draws its "modifiers" source from here and scripts/fuzz_vox_with_oracle
uses both edits. The tables name forms, not verdicts: what the reference accepts is the oracle's
to say.
"""

from __future__ import annotations

import random
import re

# Keys that decorators take (vox-syntax.md and the conformance suite's findings) and words no
# decorator is known to take: a typed key of one decorator transplanted to another is how a
# typed key nobody listed shows up.
KEYS = ("model max_iterations task_category tier_max strengths redact schema stage budget_usd complexity "
        "description max_depth parallel policy corpus into query top_k cache_key constraints reviewer spec "
        "class allow_credentials origins by max max_requests window window_secs dimensions source_field "
        "idempotent provider replay_window_secs secret tier kind fallback strategy epochs "
        "weaknesses capabilities temperature tags retries timeout cost version name mode region cache "
        "tools examples format language role").split()
ODD_KEYS = ("Model", "type", "fn", "state", "key", "_", "x1")
ARGUED = ("@ai @prompt @subagent @search @hole @cors @rate_limit @webhook @layer @embed @pii @inference "
          "@uses @auth @offline_capable @collaborative @distributed_train").split()
BARE = "@pure @reactive @remote @deprecated @fuzz @native @training_step".split()
EXPR = ("@require(x > 0)", "@invariant(n >= 0)", "@ensure(ok)", "@ensure(ok, fallback: f)")
DISPATCH = ('@test', '@test("t")', '@endpoint(kind: query)', '@endpoint(kind: mutation)',
            '@endpoint(kind: server)', '@scheduled("0 * * * *")', '@tool "d"', '@mcp.tool "d"',
            '@resource("u://x", "d")', '@mcp.resource "u://x" "d"', '@forall(x: int)', '@loading')
DECL_FORMS = ('@table', '@index', '@form', '@tokens', '@v0 "chat-1"', '@push', '@back_button', '@deep_link',
              '@distributed_train(epochs = 2)', '@component', '@cancellable')
WORDS = ("pub", "async", "extern", "partial", "pub", "async")
LIST_ITEMS = ("codegen", "review", "Pro", '"s"', "'s'", "3", "-1", "a.b", "@pure", "fn", "[", "]", "(", "")


def _value(rng: random.Random) -> str:
    k = rng.randrange(14)
    if k == 0:
        return '"' + rng.choice(("m", "gpt-4o", "", "a b")) + '"'
    if k == 1:
        return "'" + rng.choice(("m", "x")) + "'"
    if k == 2:
        return rng.choice(("0", "3", "42", "9223372036854775808"))
    if k == 3:
        return rng.choice(("0.5", "1.5dec", "-1", "1e5"))
    if k == 4:
        return rng.choice(("codegen", "user_id", "gold", "cpu"))
    if k == 5:
        return rng.choice(("CodeGen", "Pro", "Elite", "Gold"))
    if k == 6:
        return rng.choice(("true", "false"))
    if k in (7, 8, 9):
        items = [rng.choice(LIST_ITEMS) for _ in range(rng.choice((0, 1, 1, 2, 3)))]
        sep = rng.choice((", ", ", ", ",\n    ", "\n, ", " "))
        return "[" + sep.join(items) + rng.choice(("", "", ",")) + "]"
    if k == 10:
        return rng.choice(("(", ")", "{", "}", "]", ",", ":"))
    if k == 11:
        return rng.choice(("fn", "state", "to", "match"))
    if k == 12:
        return rng.choice(("a.b", "f(x)", "x + 1"))
    return ""  # the value left out


def _item(rng: random.Random) -> str:
    k = rng.random()
    if k < 0.7:
        key = rng.choice(KEYS) if rng.random() < 0.9 else rng.choice(ODD_KEYS)
        sep = rng.choice((" = ", " = ", ": ", ": ", " ", "="))
        return key + sep + _value(rng)
    if k < 0.85:
        return '"' + rng.choice(("desc", "pii", "")) + '"'
    return _value(rng)


def decorator_args(rng: random.Random) -> str:
    """`( … )` of a random argument grammar (see the module doc)."""
    items = [_item(rng) for _ in range(rng.choice((0, 1, 1, 2, 2, 3)))]
    sep = rng.choice((", ", ", ", ", ", ",\n    ", "\n    , ", " "))
    body = sep.join(items) + rng.choice(("",) * 6 + (",",))
    open_, close = "(" + rng.choice(("",) * 7 + ("\n    ",)), rng.choice(("",) * 7 + ("\n",)) + ")"
    return open_ + body + (close if rng.random() < 0.97 else "")


def decorator(rng: random.Random) -> str:
    k = rng.random()
    if k < 0.6:
        deco = rng.choice(ARGUED)
        return deco + (decorator_args(rng) if rng.random() < 0.85 else "")
    if k < 0.8:
        deco = rng.choice(BARE)
        return deco + (decorator_args(rng) if rng.random() < 0.1 else "")
    if k < 0.9:
        return rng.choice(EXPR)
    return rng.choice(DISPATCH)


def modifier_prefix(rng: random.Random) -> str:
    """One to three modifiers in any order, each followed by a space or a newline."""
    parts = []
    for _ in range(rng.choice((1, 1, 1, 1, 2, 2, 2, 3))):
        k = rng.random()  # mostly forms that often parse, so that what follows them is judged too
        word = (decorator(rng) if k < 0.55 else rng.choice(WORDS) if k < 0.8 else rng.choice(DISPATCH)
                if k < 0.93 else rng.choice(DECL_FORMS))
        parts.append(word + rng.choice((" ", "\n", "\n") if word.startswith("@") else (" ", " ", "\n")))
    return "".join(parts)


def modifier_program(rng: random.Random, gg) -> tuple[str, str, str, int]:
    """(text, kind, construct, line of the edit): a clean grammar program of any construct with a
    prefix before its declaration, or a function with randomly argued decorators."""
    body = rng.choice(("fn f(x: str) to str {\n    return x\n}\n", "fn f(x: str) to str\n", "fn g() {}\n"))
    k = rng.random()
    if k < 0.3:
        decos = "".join(decorator(rng) + rng.choice(("\n", "\n", " ")) for _ in range(rng.choice((1, 1, 2))))
        return decos + body, "deco_args", "function", 1
    if k < 0.55:  # a function's modifiers in a random order
        heads = [w for w in ("pub", "async") if rng.random() < 0.5] + [rng.choice(BARE)]
        heads += [rng.choice((rng.choice(BARE), rng.choice(DISPATCH), rng.choice(ARGUED) + "(model = \"m\")"))
                  for _ in range(rng.choice((0, 1, 1, 2)))]
        rng.shuffle(heads)
        return "".join(h + rng.choice((" ", "\n")) for h in heads) + body, "order", "function", 1
    g = gg.generate_program(rng, noisy_share=0.0, construct=rng.choice(gg.CONSTRUCTS), reject_share=0.0)
    text, line = _prefix_at(g.text, rng, first=True)
    return text, "prefix", g.construct, line


def _decl_starts(text: str) -> list[int]:
    """Offsets of lines that start a top-level declaration (not an import, comment or `}`)."""
    return [m.start() for m in re.finditer(r"(?m)^(?![ \t}\n/]|import\b)", text) if m.start() < len(text)]


def _prefix_at(text: str, rng: random.Random, first: bool = False) -> tuple[str, int]:
    starts = _decl_starts(text) or [0]
    at = starts[0] if first else rng.choice(starts)
    return text[:at] + modifier_prefix(rng) + text[at:], text.count("\n", 0, at) + 1


DECO_CALL = re.compile(r"@[a-z_.]+(?:\([^()\n]*\))?")


def modifier_mutant(text: str, rng: random.Random) -> tuple[str, str] | None:
    """(mutant, what was done) of any program: a prefix before one of its declarations, or one
    decorator's arguments rewritten; None when neither applies."""
    decos = [m for m in DECO_CALL.finditer(text) if m.group(0).split("(")[0] in ARGUED + BARE]
    if decos and rng.random() < 0.5:
        m = rng.choice(decos)
        new = m.group(0).split("(")[0] + decorator_args(rng)
        return text[:m.start()] + new + text[m.end():], f"args of {m.group(0)[:30]!r} → {new[:40]!r}"
    if not _decl_starts(text):
        return None
    out, line = _prefix_at(text, rng)
    return out, f"modifiers before line {line}"
