"""The language-neutral half of the plain-function templates (arithmetic, guards, strings, loops
over a list, while loops, filter-and-map): what each one asks for — the draws, the function's
name and the English sentence that says what it does. core.py writes the asked-for function in
Vox, python.py in Python; each reads its spec here and adds only its code (and the words of the
sentence that name a language feature: "using a while loop", "raises a ValueError").

Why one spec for both: the Python templates are ports of the Vox ones, so a name stem or a
sentence fixed here is fixed in both languages. A spec makes exactly the draws the Vox
templates made before Python, in their order, and the language's template draws its own
(`@pure`, a docstring, one of two bodies) only after it: the Vox output stays byte for byte what
tests/corpus/test_synth_python.py pins. Tables are tuples drawn with `c.pick`, so a row added
or moved changes every language's stream from that draw on; a code table is keyed by stem."""

from __future__ import annotations

from string import Template
from typing import TYPE_CHECKING, NamedTuple

from mens.corpus.synth.words import SAMPLE_WORDS, Field, an

if TYPE_CHECKING:  # core.py imports this module for its Vox templates
    from mens.corpus.synth.templates.core import Ctx

# (stem, what it does) of fn_arith: `{a}`/`{b}` are the two int fields' words, `{k}` a number.
ARITH = (
    ("total", "multiplies {a} by {b}"),
    ("sum", "adds {a} and {b}"),
    ("gap", "returns {a} minus {b}"),
    ("mean", "returns the average of {a} and {b}"),
    ("share", "returns {k} percent of {a}"),
    ("bucket", "returns which bucket of size {k} {a} falls into"),
    ("rest", "returns {a} modulo {k}"),
    ("weighted", "returns {a} times {k} plus {b}"),
)

# (stem, what it computes) of fn_while: `$k` is a number drawn for the loop; the sentence is
# followed by the int field it runs on ("… of a pages value").
LOOPS = (
    ("digit_sum", "the sum of the decimal digits of"),
    ("gcd_with_$k", "the greatest common divisor of $k and"),
    ("halvings", "how many times you can halve"),
    ("steps_to_$k", "how many steps of $k it takes to climb to"),
    ("triangle", "the sum of all whole numbers from 1 up to"),
)

GUARD_VERBS = ("validate", "check", "checked", "sanitize")
LABEL_SEPARATORS = (" - ", " / ", ", ", " by ")
COMPARISON_WORDS = {">": "more than", "<": "less than", ">=": "at least"}


class ArithSpec(NamedTuple):
    a: Field
    b: Field
    stem: str  # the ARITH row: the code table's key
    k: int
    name: str
    what: str


class GuardSpec(NamedTuple):
    x: Field
    lo: int
    hi: int
    name: str  # the sentence names what the language does on a broken bound: the template writes it


class StringSpec(NamedTuple):
    shape: str  # "label" (joins s1 and s2 with `arg`), "fallback" (s1 or `arg`), "short" (s1 cut to `arg`)
    s1: Field
    s2: Field
    arg: str | int  # the separator, the fallback word or the length
    name: str
    what: str


class ListLoopSpec(NamedTuple):
    fields: list[Field]  # the struct's (dataclass's) fields
    x: Field             # the int field summed or maxed
    flag: Field | None   # the bool field counted
    mode: str            # "sum", "max" or "count"
    name: str
    what: str


class WhileSpec(NamedTuple):
    x: Field
    stem: str  # the LOOPS row, `$k` unfilled: the code table's key
    k: int
    name: str
    what: str  # "computes …": the template says how ("using a loop")


class PipelineSpec(NamedTuple):
    fields: list[Field]
    x: Field   # the int field compared
    s: Field   # the str field returned
    k: int
    cmp: str   # ">", "<" or ">="
    name: str
    what: str  # "keeps … and returns their …s": the template says how


def arith_spec(c: Ctx) -> ArithSpec:
    a, b = c.sample(c.e.of("int"), 2)
    stem, says = c.pick(ARITH)
    k = c.num(2, 99)
    what = "takes " + c.e.a + "'s " + a.words + " and " + b.words + " and " + says.format(a=a.words, b=b.words, k=k)
    return ArithSpec(a, b, stem, k, f"{c.e.var}_{stem}_{a.name}", what)


def guard_spec(c: Ctx) -> GuardSpec:
    x = c.pick(c.e.of("int"))
    lo, hi = c.num(0, 10), c.num(50, 5000)
    return GuardSpec(x, lo, hi, c.pick(GUARD_VERBS) + f"_{x.name}")


def string_spec(c: Ctx) -> StringSpec:
    s1, s2 = c.sample(c.e.of("str"), 2) if len(c.e.of("str")) > 1 else (c.e.of("str")[0],) * 2
    variant = c.num(0, 2)
    if variant == 0 and s1 != s2:
        sep = c.pick(LABEL_SEPARATORS)
        what = f"joins {c.e.a}'s {s1.words} and {s2.words} with \"{sep}\" between them"
        return StringSpec("label", s1, s2, sep, f"{c.e.var}_label", what)
    if variant == 1:
        fallback = c.pick(SAMPLE_WORDS)
        what = f"returns the {s1.words} unchanged, or \"{fallback}\" when it is empty"
        return StringSpec("fallback", s1, s2, fallback, f"{s1.name}_or_{fallback}", what)
    n = c.num(3, 40)
    what = f"shortens a {s1.words} to at most {n} characters, adding \"~\" when it cut something"
    return StringSpec("short", s1, s2, n, f"short_{s1.name}", what)


def list_loop_spec(c: Ctx) -> ListLoopSpec:
    e, fields = c.e, c.fields(2, 4)
    x = c.pick([f for f in fields if f.type == "int"])
    flag = next((f for f in fields if f.type == "bool"), None)
    mode = c.pick(("sum", "max", "count") if flag else ("sum", "max"))
    if mode == "sum":
        name, what = f"total_{x.name}", f"adds up the {x.words} of every {e.words} in a list"
    elif mode == "max":
        name, what = f"max_{x.name}", f"returns the largest {x.words} in a list of {e.plural_words} (0 for an empty list)"
    else:
        name, what = f"count_{flag.name}", f"counts the {e.plural_words} whose {flag.words} flag is set"
    return ListLoopSpec(fields, x, flag, mode, name, what)


def while_spec(c: Ctx) -> WhileSpec:
    x = c.pick(c.e.of("int"))
    stem, says = c.pick(LOOPS)
    k = c.num(2, 12)
    name = f"{x.name}_" + Template(stem).substitute(k=k)
    what = "computes " + Template(says).substitute(k=k) + f" {an(x.words)} {x.words} value"
    return WhileSpec(x, stem, k, name, what)


def pipeline_spec(c: Ctx) -> PipelineSpec:
    e, fields = c.e, c.fields(2, 4)
    x = c.pick([f for f in fields if f.type == "int"])
    s = c.pick([f for f in fields if f.type == "str"])
    k, cmp = c.num(1, 300), c.pick(tuple(COMPARISON_WORDS))
    what = f"keeps the {e.plural_words} with {COMPARISON_WORDS[cmp]} {k} {x.words} and returns their {s.words}s"
    return PipelineSpec(fields, x, s, k, cmp, f"{s.name}s_of_{e.plural}_by_{x.name}", what)
