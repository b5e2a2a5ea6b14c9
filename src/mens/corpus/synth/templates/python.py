"""Templates for synthetic Python programs (`mens generate-data --lang python`): the plain-function
templates of core.py — arithmetic, guards, strings, loops over lists, while loops, filter-and-map —
and a dataclass and constants, ported to idiomatic Python 3 with type hints. Same subjects,
fields, made-up names and "what it does" sentences as the Vox ones, rendered as Python; a share
carry a one-line docstring. They are ports of the Vox templates, not of any bench: a tiny base
learns from them the shape of the requests it will get (a short function, the name copied from
the request, an answer that stops where the function ends).

The generation loop is generate.py's, with PYTHON's phrasings, reserved words and signature
pattern (generate.LANGS); every draft is parsed with the Python pack and deduplicated by its
structural hash there."""

from __future__ import annotations

import builtins
import keyword
import re
from string import Template
from textwrap import dedent

from mens.corpus.synth.templates.core import Ctx, Draft, render
from mens.corpus.synth.words import PHRASINGS, RENAME_ASKS, RESERVED, SAMPLE_WORDS, Field, an

# Names of the held-out Python bench's tasks (examples/base/bench) that made-up names of English
# words (english.ENGLISH_WORDS, which leaves out the Vox bench's words only) could form: never
# made up, so no bench name is a training name (tests/corpus/test_synth_python.py checks).
HELD_OUT_NAMES = frozenset("available days limit names record split_timer wrapper".split())
# What a made-up name must never be in Python: the Vox words (so the Vox and Python names come
# from one pool), Python's keywords and soft keywords, its builtins (a function called `len`
# would parse and shadow the builtin), and the bench's names above.
PY_RESERVED = RESERVED | frozenset(keyword.kwlist) | frozenset(keyword.softkwlist) | HELD_OUT_NAMES | \
    frozenset(n for n in dir(builtins) if not n.startswith("_"))

# The Vox phrasings asking for Python, and a few in the words Python users write ("a Python
# function `x`", "type hints"). `{lang_noun}` is the noun with "Python" after its article.
PY_PHRASINGS = tuple(p.replace("Vox", "Python") for p in PHRASINGS) + (
    "Write {lang_noun} that {what}.",
    "Write {lang_noun}. It {what}.",
    "I need {lang_noun}: it {what}.",
    "Python 3 with type hints: {noun} that {what}.",
    "Give me Python code for {noun}, which {what}.",
)
PY_RENAME_ASKS = tuple(a.replace("Vox", "Python") for a in RENAME_ASKS)

# `def name(params) -> Type:` at the start of a line: a signature a prompt can quote.
PY_SIGNATURE = re.compile(r"^def (\w+)(\([^)\n]*\) -> [^:\n]+):$", re.M)
# A declaration's name: what a rename edit may change.
PY_DECLARED = re.compile(r"(?:\bdef|\bclass)\s+([A-Za-z_]\w*)")
# A dataclass the code declares, with its `name: type` lines.
_DATACLASS = re.compile(r"^@dataclass\nclass ([A-Z]\w*):\n((?:    \w+: [^\n]+\n)+)", re.M)

DOCSTRING_SHARE = 0.3
DATACLASS_IMPORT = "from dataclasses import dataclass\n\n\n"


def py_structs(code: str):
    """(kind, name, `field: type` lines) of each dataclass in `code`: generate.with_fields spells
    a made-up subject's fields out in the prompt from them."""
    for m in _DATACLASS.finditer(code):
        yield "dataclass", m.group(1), [line.strip() for line in m.group(2).splitlines()]


def _docstring(c: Ctx, what: str) -> str:
    """A one-line docstring saying `what` ("Adds up the pages of …"), for a share of the
    functions; "" for the rest. Third person, as the sentence is: its verbs stay in agreement."""
    return f'    """{what[0].upper()}{what[1:]}."""\n' if c.chance(DOCSTRING_SHARE) else ""


def _fn(c: Ctx, signature: str, body: str, what: str) -> str:
    """`def signature:` with an optional docstring and `body` (dedented) indented under it."""
    lines = dedent(body).strip("\n")
    return f"def {signature}:\n{_docstring(c, what)}" + "\n".join("    " + ln if ln else ln for ln in lines.split("\n")) + "\n"


def _fresh_names(c: Ctx, k: int) -> list[str]:
    """`k` new made-up names (Ctx.fresh) that are none of PY_RESERVED."""
    names: list[str] = []
    while len(names) < k:
        name = c.fresh()
        if name not in PY_RESERVED:
            names.append(name)
    return names


def _dataclass(c: Ctx, fields: list[Field]) -> str:
    body = "\n".join(f"    {f.name}: {f.type}" for f in fields)
    return f"@dataclass\nclass {c.e.type_name}:\n{body}\n"


# ---------------------------------------------------------------- plain functions

_ARITH = (  # (stem, expression, return type, what it does): core._ARITH with Python's // and /
    ("total", "$a * $b", "int", "multiplies {a} by {b}"),
    ("sum", "$a + $b", "int", "adds {a} and {b}"),
    ("gap", "$a - $b", "int", "returns {a} minus {b}"),
    ("mean", "($a + $b) / 2", "float", "returns the average of {a} and {b}"),
    ("share", "$a * $k // 100", "int", "returns {k} percent of {a}, rounded down"),
    ("bucket", "$a // $k", "int", "returns which bucket of size {k} {a} falls into"),
    ("rest", "$a % $k", "int", "returns {a} modulo {k}"),
    ("weighted", "$a * $k + $b", "int", "returns {a} times {k} plus {b}"),
)


def fn_arith(c: Ctx) -> Draft:
    a, b = c.sample(c.e.of("int"), 2)
    op, expr, ret, says = c.pick(_ARITH)
    k = c.num(2, 99)
    name = f"{c.e.var}_{op}_{a.name}"
    value = Template(expr).substitute(a=a.name, b=b.name, k=k)
    body = f"return {value}" if c.chance(0.5) else f"result = {value}\nreturn result"
    what = "takes " + c.e.a + "'s " + a.words + " and " + b.words + " and " + says.format(a=a.words, b=b.words, k=k)
    code = _fn(c, f"{name}({a.name}: int, {b.name}: int) -> {ret}", body, what)
    return Draft(code, f"a function `{name}`", what, "function", 1)


def fn_guard(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    lo, hi = c.num(0, 10), c.num(50, 5000)
    name = c.pick(("validate", "check", "checked", "sanitize")) + f"_{x.name}"
    what = f"returns {c.e.a}'s {x.words} when it is between {lo} and {hi}, " \
           f"and raises a ValueError saying which bound was broken otherwise"
    code = _fn(c, f"{name}({x.name}: int) -> int", Template("""
        if $x < $lo:
            raise ValueError("$words must be at least $lo")
        if $x > $hi:
            raise ValueError("$words must be at most $hi")
        return $x""").substitute(x=x.name, lo=lo, hi=hi, words=x.words), what)
    return Draft(code, f"a guard function `{name}`", what, "function", 2)


def fn_string(c: Ctx) -> Draft:
    s1, s2 = c.sample(c.e.of("str"), 2) if len(c.e.of("str")) > 1 else (c.e.of("str")[0],) * 2
    variant = c.num(0, 2)
    if variant == 0 and s1 != s2:
        sep = c.pick((" - ", " / ", ", ", " by "))
        name, sig = f"{c.e.var}_label", f"{c.e.var}_label({s1.name}: str, {s2.name}: str) -> str"
        what = f"joins {c.e.a}'s {s1.words} and {s2.words} with \"{sep}\" between them"
        body = c.pick((f'return f"{{{s1.name}}}{sep}{{{s2.name}}}"', f'return {s1.name} + "{sep}" + {s2.name}'))
    elif variant == 1:
        fallback = c.pick(SAMPLE_WORDS)
        name, sig = f"{s1.name}_or_{fallback}", f"{s1.name}_or_{fallback}({s1.name}: str) -> str"
        what = f"returns the {s1.words} unchanged, or \"{fallback}\" when it is empty"
        body = c.pick((f'return {s1.name} or "{fallback}"', f'if not {s1.name}:\n    return "{fallback}"\nreturn {s1.name}'))
    else:
        n = c.num(3, 40)
        name, sig = f"short_{s1.name}", f"short_{s1.name}({s1.name}: str) -> str"
        what = f"shortens a {s1.words} to at most {n} characters, adding \"~\" when it cut something"
        body = f'if len({s1.name}) <= {n}:\n    return {s1.name}\nreturn {s1.name}[:{n}] + "~"'
    return Draft(_fn(c, sig, body, what), f"a string function `{name}`", what, "function", 2)


def fn_list_loop(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    x = c.pick([f for f in fields if f.type == "int"])
    flag = next((f for f in fields if f.type == "bool"), None)
    mode = c.pick(("sum", "max", "count") if flag else ("sum", "max"))
    v, p = e.var, e.plural
    if mode == "sum":
        name, what = f"total_{x.name}", f"adds up the {x.words} of every {e.words} in a list"
        body = c.pick((f"total = 0\nfor {v} in {p}:\n    total += {v}.{x.name}\nreturn total",
                       f"return sum({v}.{x.name} for {v} in {p})"))
    elif mode == "max":
        name, what = f"max_{x.name}", f"returns the largest {x.words} in a list of {e.plural_words} (0 for an empty list)"
        body = c.pick((f"best = 0\nfor {v} in {p}:\n    if {v}.{x.name} > best:\n        best = {v}.{x.name}\nreturn best",
                       f"return max(({v}.{x.name} for {v} in {p}), default=0)"))
    else:
        name, what = f"count_{flag.name}", f"counts the {e.plural_words} whose {flag.words} flag is set"
        body = f"count = 0\nfor {v} in {p}:\n    if {v}.{flag.name}:\n        count += 1\nreturn count"
    code = DATACLASS_IMPORT + _dataclass(c, fields) + "\n\n" + \
        _fn(c, f"{name}({p}: list[{e.type_name}]) -> int", body, what)
    return Draft(code, f"{an(e.type_name)} `{e.type_name}` dataclass and a function `{name}`", what, "function", 3)


_LOOPS = (  # core._LOOPS in Python: (stem, what it computes, body over $n and $k)
    ("digit_sum", "the sum of the decimal digits of", """
        rest = $n
        total = 0
        while rest > 0:
            total += rest % 10
            rest //= 10
        return total"""),
    ("gcd_with_$k", "the greatest common divisor of $k and", """
        a, b = $n, $k
        while b > 0:
            a, b = b, a % b
        return a"""),
    ("halvings", "how many times you can halve", """
        rest = $n
        steps = 0
        while rest > 1:
            rest //= 2
            steps += 1
        return steps"""),
    ("steps_to_$k", "how many steps of $k it takes to climb to", """
        level = 0
        steps = 0
        while True:
            if level >= $n:
                break
            level += $k
            steps += 1
        return steps"""),
    ("triangle", "the sum of all whole numbers from 1 up to", """
        i = 1
        total = 0
        while i <= $n:
            total += i
            i += 1
        return total"""),
)


def fn_while(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    stem, says, body = c.pick(_LOOPS)
    k = c.num(2, 12)
    name = f"{x.name}_" + Template(stem).substitute(k=k)
    what = "computes " + Template(says).substitute(k=k) + f" {an(x.words)} {x.words} value, using a while loop"
    code = _fn(c, f"{name}({x.name}: int) -> int", Template(dedent(body)).substitute(n=x.name, k=k), what)
    return Draft(code, f"a function `{name}`", what, "function", 3)


def fn_pipeline(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    x = c.pick([f for f in fields if f.type == "int"])
    s = c.pick([f for f in fields if f.type == "str"])
    k, cmp = c.num(1, 300), c.pick((">", "<", ">="))
    word = {">": "more than", "<": "less than", ">=": "at least"}[cmp]
    name = f"{s.name}s_of_{e.plural}_by_{x.name}"
    v = e.var[0]
    what = f"keeps the {e.plural_words} with {word} {k} {x.words} and returns their {s.words}s, " \
           f"using a list comprehension"
    body = f"return [{v}.{s.name} for {v} in {e.plural} if {v}.{x.name} {cmp} {k}]"
    code = DATACLASS_IMPORT + _dataclass(c, fields) + "\n\n" + \
        _fn(c, f"{name}({e.plural}: list[{e.type_name}]) -> list[str]", body, what)
    return Draft(code, f"{an(e.type_name)} `{e.type_name}` dataclass and a function `{name}`", what, "function", 4)


# ---------------------------------------------------------------- a dataclass, constants

def type_dataclass(c: Ctx) -> Draft:
    """data.type_struct in Python: a dataclass and a function that builds one from its fields."""
    e, fields = c.e, c.fields(2, 5)
    ctor = _fresh_names(c, 1)[0] if c.made_up else f"new_{e.var}"
    args = ", ".join(f"{f.name}: {f.type}" for f in fields)
    call = ", ".join(f"{f.name}={f.name}" for f in fields)
    code = DATACLASS_IMPORT + _dataclass(c, fields) + "\n\n" + render("""
        def $ctor($args) -> $T:
            return $T($call)""", ctor=ctor, args=args, T=e.type_name, call=call)
    listed = ", ".join(f"{f.words} ({f.type})" for f in fields)
    what = f"has the fields {listed}, plus a function `{ctor}` that builds one from its fields"
    return Draft(code, f"a dataclass `{e.type_name}`", what, "class", 2)


def fn_const(c: Ctx) -> Draft:
    """mixed.fn_const in Python: two module constants and the functions that use them."""
    x, s = c.pick(c.e.of("int")), c.pick(c.e.of("str"))
    hi, dflt = c.num(10, 9999), c.pick(SAMPLE_WORDS)
    cap, label = f"MAX_{x.name.upper()}", f"DEFAULT_{s.name.upper()}"
    clamp, fill = f"clamp_{x.name}", f"{s.name}_or_default"
    if c.made_up:  # made-up names and default text, each stated
        cap, label = (n.upper() for n in _fresh_names(c, 2))
        clamp, fill = _fresh_names(c, 2)
        dflt = c.fresh_text()
    typed = ": int" if c.chance(0.5) else ""
    code = render("""
        $cap$typed = $hi
        $label = "$dflt"


        def $clamp($x: int) -> int:
            return min($x, $cap)


        def $fill($s: str) -> str:
            return $s or $label""", cap=cap, typed=typed, hi=hi, label=label, dflt=dflt, x=x.name, s=s.name,
                  clamp=clamp, fill=fill)
    what = f"sets `{cap}` to {hi} and `{label}` to \"{dflt}\"; `{clamp}` caps {an(x.words)} {x.words} at `{cap}` " \
           f"and `{fill}` returns a {s.words}, or `{label}` when it is empty"
    noun = f"a module with the constants `{cap}` and `{label}` and the functions `{clamp}` and `{fill}`"
    return Draft(code, noun, what, "const", 2)


PY_TEMPLATES = {
    "fn_arith": fn_arith,
    "fn_guard": fn_guard,
    "fn_string": fn_string,
    "fn_list_loop": fn_list_loop,
    "fn_while": fn_while,
    "fn_pipeline": fn_pipeline,
    "type_dataclass": type_dataclass,
    "const": fn_const,
}
