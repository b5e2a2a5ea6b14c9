"""Templates for synthetic Python programs (`mens generate-data --lang python`): the plain-function
templates of core.py — arithmetic, guards, strings, loops over lists, while loops, filter-and-map —
and a dataclass and constants, ported to idiomatic Python 3 with type hints. Same subjects,
fields, made-up names and "what it does" sentences as the Vox ones (the plain functions' names
and sentences are plain.py's, read by both), rendered as Python; a share carry a one-line
docstring. They are ports of the Vox templates, not of any bench: a tiny base
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

from mens.corpus.synth.templates import plain
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
# What each asks for (draws, name, sentence) is plain.py's, shared with core.py; here is the Python.

_ARITH_CODE = {  # ARITH stem -> (the Python expression, its type): // where Vox's ints divide to an int
    "total": ("$a * $b", "int"),
    "sum": ("$a + $b", "int"),
    "gap": ("$a - $b", "int"),
    "mean": ("($a + $b) / 2", "float"),
    "share": ("$a * $k // 100", "int"),
    "bucket": ("$a // $k", "int"),
    "rest": ("$a % $k", "int"),
    "weighted": ("$a * $k + $b", "int"),
}


def fn_arith(c: Ctx) -> Draft:
    spec = plain.arith_spec(c)
    a, b = spec.a.name, spec.b.name
    expr, ret = _ARITH_CODE[spec.stem]
    value = Template(expr).substitute(a=a, b=b, k=spec.k)
    body = f"return {value}" if c.chance(0.5) else f"result = {value}\nreturn result"
    # `//` floors, and the sentence says so (Vox's ints floor too, but its pinned output predates this)
    what = spec.what + (", rounded down" if spec.stem == "share" else "")
    code = _fn(c, f"{spec.name}({a}: int, {b}: int) -> {ret}", body, what)
    return Draft(code, f"a function `{spec.name}`", what, "function", 1)


def fn_guard(c: Ctx) -> Draft:
    x, lo, hi, name = plain.guard_spec(c)
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
    spec = plain.string_spec(c)
    s1, s2, arg = spec.s1.name, spec.s2.name, spec.arg
    if spec.shape == "label":
        sig = f"{spec.name}({s1}: str, {s2}: str) -> str"
        body = c.pick((f'return f"{{{s1}}}{arg}{{{s2}}}"', f'return {s1} + "{arg}" + {s2}'))
    elif spec.shape == "fallback":
        sig = f"{spec.name}({s1}: str) -> str"
        body = c.pick((f'return {s1} or "{arg}"', f'if not {s1}:\n    return "{arg}"\nreturn {s1}'))
    else:
        sig = f"{spec.name}({s1}: str) -> str"
        body = f'if len({s1}) <= {arg}:\n    return {s1}\nreturn {s1}[:{arg}] + "~"'
    return Draft(_fn(c, sig, body, spec.what), f"a string function `{spec.name}`", spec.what, "function", 2)


def fn_list_loop(c: Ctx) -> Draft:
    e, spec = c.e, plain.list_loop_spec(c)
    v, p, x = e.var, e.plural, spec.x.name
    if spec.mode == "sum":
        body = c.pick((f"total = 0\nfor {v} in {p}:\n    total += {v}.{x}\nreturn total",
                       f"return sum({v}.{x} for {v} in {p})"))
    elif spec.mode == "max":
        body = c.pick((f"best = 0\nfor {v} in {p}:\n    if {v}.{x} > best:\n        best = {v}.{x}\nreturn best",
                       f"return max(({v}.{x} for {v} in {p}), default=0)"))
    else:
        body = f"count = 0\nfor {v} in {p}:\n    if {v}.{spec.flag.name}:\n        count += 1\nreturn count"
    code = DATACLASS_IMPORT + _dataclass(c, spec.fields) + "\n\n" + \
        _fn(c, f"{spec.name}({p}: list[{e.type_name}]) -> int", body, spec.what)
    return Draft(code, f"{an(e.type_name)} `{e.type_name}` dataclass and a function `{spec.name}`", spec.what,
                 "function", 3)


_LOOP_CODE = {  # LOOPS stem -> the Python body over the int $n and the drawn $k
    "digit_sum": """
        rest = $n
        total = 0
        while rest > 0:
            total += rest % 10
            rest //= 10
        return total""",
    "gcd_with_$k": """
        a, b = $n, $k
        while b > 0:
            a, b = b, a % b
        return a""",
    "halvings": """
        rest = $n
        steps = 0
        while rest > 1:
            rest //= 2
            steps += 1
        return steps""",
    "steps_to_$k": """
        level = 0
        steps = 0
        while True:
            if level >= $n:
                break
            level += $k
            steps += 1
        return steps""",
    "triangle": """
        i = 1
        total = 0
        while i <= $n:
            total += i
            i += 1
        return total""",
}


def fn_while(c: Ctx) -> Draft:
    x, stem, k, name, what = plain.while_spec(c)
    what += ", using a while loop"
    code = _fn(c, f"{name}({x.name}: int) -> int", Template(dedent(_LOOP_CODE[stem])).substitute(n=x.name, k=k), what)
    return Draft(code, f"a function `{name}`", what, "function", 3)


def fn_pipeline(c: Ctx) -> Draft:
    e, (fields, x, s, k, cmp, name, what) = c.e, plain.pipeline_spec(c)
    what += ", using a list comprehension"
    v = e.var[0]
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
