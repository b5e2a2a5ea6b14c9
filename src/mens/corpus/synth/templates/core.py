"""Templates for synthetic Vox programs, part 1: the shared machinery (`Draft`, `Ctx`, `render`)
and plain functions: arithmetic, guards, strings, loops, pipelines, generics, contracts. The
first six are ported to Python (python.py): what they ask for is plain.py's, the Vox code here.

A template is `fn(ctx) -> Draft`: it renders one complete Vox program about a domain entity and
says, in words, what the program does. Code is written with `string.Template` (`$name`) because
Vox is full of braces that `str.format` would need doubled. Templates never check syntax
themselves: `mens.corpus.synth.generate` parses every draft with the Vox pack and drops failures."""

from __future__ import annotations

import random
from dataclasses import dataclass
from string import Template
from textwrap import dedent

from mens.corpus.synth.templates import plain
from mens.corpus.synth.words import RESERVED, SAMPLE_WORDS, Entity, Field, an, short_made_up_name


@dataclass
class Draft:
    code: str
    noun: str        # what to write, e.g. "a function `total_pages`"
    what: str        # third-person verb phrase: "returns the sum of …"
    category: str    # taxonomy kind the prompt is about
    difficulty: int  # 1-10


class Ctx:
    """One template call's randomness and subject entity. `made_up` (the subject is made up,
    `words.made_up_entity`): the template should also make up the specifics it would otherwise
    take from a short list (a cron line, a URI, handler names, route paths …) with `c.fresh()`
    and state them in the prompt, as a user who knows what they want does, so that the only way
    to write them is to copy them; with it False a template draws exactly what it drew before."""

    def __init__(self, rng: random.Random, entity: Entity, made_up: bool = False, english: float = 0.0):
        self.rng, self.e, self.made_up, self.english = rng, entity, made_up, english
        self._taken: set[str] | None = None  # what fresh() must not give: made on its first call

    def fresh(self, capitalised: bool = False) -> str:
        """A made-up name (name()) new to this draft: not the subject's type, var, plural or a
        field, not a name templates write anyway (WRITTEN), not one fresh() gave before."""
        if self._taken is None:
            e = self.e
            self._taken = {n.lower() for n in (e.var, e.plural, e.type_name, *(f.name for f in e.fields))} | \
                WRITTEN | set(SAMPLE_WORDS)
        while True:
            name = self.name(capitalised)
            if name.lower() not in self._taken:
                self._taken.add(name.lower())
                return name

    def fresh_names(self, k: int, capitalised: bool = False) -> list[str]:
        return [self.fresh(capitalised) for _ in range(k)]

    def fresh_text(self) -> str:
        """Made-up words for a string literal the prompt quotes: "velmo rask", "lines capture"."""
        return self.fresh().replace("_", " ")

    def name(self, capitalised: bool = False) -> str:
        """A made-up identifier of one or two words (words.short_made_up_name), never a reserved word."""
        while True:
            name = short_made_up_name(self.rng, capitalised, self.english)
            if name not in RESERVED:
                return name

    def pick(self, seq):
        return self.rng.choice(seq)

    def sample(self, seq, k: int):
        return self.rng.sample(list(seq), k)

    def num(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def lit(self, f: Field) -> str:
        """A literal value for a field."""
        if f.type == "int":
            return str(self.num(1, 400))
        if f.type == "bool":
            return self.pick(("true", "false"))
        if f.type == "float":
            return f"{self.num(0, 99)}.{self.num(0, 9)}"
        return '"' + self.pick(SAMPLE_WORDS) + '"'

    def struct(self, fields: list[Field], head: str = "type") -> str:
        sep = "," if self.chance(0.3) else ""
        body = "\n".join(f"    {f.name}: {f.type}{sep}" for f in fields)
        return f"{head} {self.e.type_name} {{\n{body}\n}}"

    def fields(self, k_min: int = 2, k_max: int = 4) -> list[Field]:
        """A random subset of the entity's fields (order kept), always with a str and an int."""
        e = self.e
        must = [self.pick(e.of("str")), self.pick(e.of("int"))]
        rest = [f for f in e.fields if f not in must]
        extra = self.sample(rest, min(len(rest), self.num(max(0, k_min - 2), max(0, k_max - 2))))
        return [f for f in e.fields if f in must or f in extra]


# Names the templates write whatever the subject (locals, builtins, view calls): never made up
# for something else in the same program.
WRITTEN = frozenset(w.lower() for w in """id page query visible scaled start value reason checked ref resp
left attempts amount self r v at log load new_reference len contains filter Text Row Column Button Input
Card Ok Error set slice map spawn assert print http db str int bool float Some None List Option Result
Set Map""".split())


def indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line if line else line for line in text.strip("\n").split("\n"))


def listing(items) -> str:
    """Items joined in English: `a`, `a and b`, `a, b and c`."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def render(tpl: str, **kw) -> str:
    return Template(dedent(tpl).strip("\n")).substitute(kw) + "\n"


def params(fields: list[Field]) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in fields)


def obj(fields: list[Field]) -> str:
    return "{ " + ", ".join(f"{f.name}: {f.name}" for f in fields) + " }"


# ---------------------------------------------------------------- plain functions
# What each asks for (draws, name, sentence) is plain.py's, shared with python.py; here is the Vox.

_ARITH_CODE = {  # ARITH stem -> the Vox expression (ints divide to an int)
    "total": "$a * $b",
    "sum": "$a + $b",
    "gap": "$a - $b",
    "mean": "($a + $b) / 2",
    "share": "$a * $k / 100",
    "bucket": "$a / $k",
    "rest": "$a % $k",
    "weighted": "$a * $k + $b",
}


def fn_arith(c: Ctx) -> Draft:
    spec = plain.arith_spec(c)
    a, b = spec.a.name, spec.b.name
    body = Template(_ARITH_CODE[spec.stem]).substitute(a=a, b=b, k=spec.k)
    pure = "@pure\n" if c.chance(0.3) else ""
    pub = "pub " if not pure and c.chance(0.2) else ""
    if c.chance(0.5):
        code = render("""
            ${pure}${pub}fn $name($a: int, $b: int) to int {
                return $body
            }""", pure=pure, pub=pub, name=spec.name, a=a, b=b, body=body)
    else:
        code = render("""
            ${pure}${pub}fn $name($a: int, $b: int) to int {
                let result = $body
                return result
            }""", pure=pure, pub=pub, name=spec.name, a=a, b=b, body=body)
    return Draft(code, f"a function `{spec.name}`", spec.what, "function", 1)


def fn_guard(c: Ctx) -> Draft:
    x, lo, hi, name = plain.guard_spec(c)
    code = render("""
        fn $name($x: int) to Result[int] {
            if $x < $lo {
                return Error("$words must be at least $lo")
            }
            if $x > $hi {
                return Error("$words must be at most $hi")
            }
            return Ok($x)
        }""", name=name, x=x.name, lo=lo, hi=hi, words=x.words)
    what = f"returns Ok with {c.e.a}'s {x.words} when it is between {lo} and {hi}, " \
           f"and an Error explaining which bound was broken otherwise"
    return Draft(code, f"a guard function `{name}`", what, "function", 2)


_STRING_CODE = {  # StringSpec.shape -> the Vox function over $a (and $b), $arg the spec's
    "label": """
        fn $name($a: str, $b: str) to str {
            return $a + "$arg" + $b
        }""",
    "fallback": """
        fn $name($a: str) to str {
            if len($a) is 0 {
                return "$arg"
            }
            return $a
        }""",
    "short": """
        fn $name($a: str) to str {
            if len($a) <= $arg {
                return $a
            }
            return slice($a, 0, $arg) + "~"
        }""",
}


def fn_string(c: Ctx) -> Draft:
    spec = plain.string_spec(c)
    code = render(_STRING_CODE[spec.shape], name=spec.name, a=spec.s1.name, b=spec.s2.name, arg=spec.arg)
    return Draft(code, f"a string function `{spec.name}`", spec.what, "function", 2)


_LIST_LOOP_CODE = {  # ListLoopSpec.mode -> the Vox loop over $p, each $v, its int $x or flag $f
    "sum": """
        let mut total = 0
        for $v in $p {
            total += $v.$x
        }
        return total""",
    "max": """
        let mut best = 0
        for $v in $p {
            if $v.$x > best {
                best = $v.$x
            }
        }
        return best""",
    "count": """
        let mut count = 0
        for $v in $p {
            if $v.$f {
                count += 1
            }
        }
        return count""",
}


def fn_list_loop(c: Ctx) -> Draft:
    e, spec = c.e, plain.list_loop_spec(c)
    flag = spec.flag.name if spec.flag else ""
    loop = render(_LIST_LOOP_CODE[spec.mode], v=e.var, p=e.plural, x=spec.x.name, f=flag)
    body = "\n".join("    " + line for line in loop.strip().split("\n"))
    code = c.struct(spec.fields) + f"\n\nfn {spec.name}({e.plural}: List[{e.type_name}]) to int {{\n{body}\n}}\n"
    return Draft(code, f"{an(e.type_name)} `{e.type_name}` type and a function `{spec.name}`", spec.what,
                 "function", 3)


_LOOP_CODE = {  # LOOPS stem -> the Vox body over the int $n and the drawn $k
    "digit_sum": """
        let mut rest = $n
        let mut total = 0
        while rest > 0 {
            total += rest % 10
            rest = rest / 10
        }
        return total""",
    "gcd_with_$k": """
        let mut a = $n
        let mut b = $k
        while b > 0 {
            let t = b
            b = a % b
            a = t
        }
        return a""",
    "halvings": """
        let mut rest = $n
        let mut steps = 0
        while rest > 1 {
            rest = rest / 2
            steps += 1
        }
        return steps""",
    "steps_to_$k": """
        let mut level = 0
        let mut steps = 0
        loop {
            if level >= $n {
                break
            }
            level += $k
            steps += 1
        }
        return steps""",
    "triangle": """
        let mut i = 1
        let mut total = 0
        while i <= $n {
            total += i
            i += 1
        }
        return total""",
}


def fn_while(c: Ctx) -> Draft:
    x, stem, k, name, what = plain.while_spec(c)
    body = Template(dedent(_LOOP_CODE[stem]).strip()).substitute(n=x.name, k=k)
    body = "\n".join("    " + line for line in body.split("\n"))
    code = f"fn {name}({x.name}: int) to int {{\n{body}\n}}\n"
    return Draft(code, f"a function `{name}`", what + ", using a loop", "function", 3)


def fn_pipeline(c: Ctx) -> Draft:
    e, (fields, x, s, k, cmp, name, what) = c.e, plain.pipeline_spec(c)
    code = c.struct(fields) + "\n\n" + render("""

        fn $name($p: List[$T]) to List[str] {
            return $p |> filter(fn($v) $v.$x $cmp $k) |> map(fn($v) $v.$s)
        }""", name=name, p=e.plural, T=e.type_name, v=e.var[0], x=x.name, cmp=cmp, k=k, s=s.name)
    return Draft(code, f"{an(e.type_name)} `{e.type_name}` type and a function `{name}`",
                 what + ", using |> with filter and map", "function", 4)


def fn_generic(c: Ctx) -> Draft:
    variant = c.num(0, 2)
    tv = c.pick(("T", "Item", "V", "A"))
    if variant == 0:
        name = c.pick(("first_or", "head_or", "first_else"))
        code = render("""
            fn $name<$T>(items: List[$T], otherwise: $T) to $T {
                if len(items) is 0 {
                    return otherwise
                }
                return items[0]
            }""", name=name, T=tv)
        what = "returns the first element of a generic list, or a given value when the list is empty"
    elif variant == 1:
        name = c.pick(("count_where", "count_matching", "tally"))
        code = render("""
            fn $name<$T>(items: List[$T], keep: fn($T) to bool) to int {
                let mut n = 0
                for item in items {
                    if keep(item) {
                        n += 1
                    }
                }
                return n
            }""", name=name, T=tv)
        what = "counts how many elements of a generic list satisfy a predicate function"
    else:
        name = c.pick(("last_of", "final_item", "tail_value"))
        code = render("""
            fn $name<$T>(items: List[$T]) to Option[$T] {
                if len(items) is 0 {
                    return None
                }
                return Some(items[len(items) - 1])
            }""", name=name, T=tv)
        what = "returns Some(last element) of a generic list, or None when it is empty"
    x = c.pick(c.e.of("int"))
    use = f"\nfn {c.e.var}_{name}_{x.name}({x.name}s: List[int]) to int {{\n    return {name}({x.name}s, 0)\n}}\n" \
        if variant == 0 else ""
    return Draft(code + use, f"a generic function `{name}<{tv}>`", what, "function", 4)


def fn_contracts(c: Ctx) -> Draft:
    a, b = c.sample(c.e.of("int"), 2)
    name = f"split_{a.name}_by_{b.name}"
    ensure = c.pick(("@ensure(result >= 0)", "@ensure(result >= 0, fallback: zero_share)"))
    code = render("""
        @require($b > 0)
        $ensure
        fn $name($a: int, $b: int) to int {
            return $a / $b
        }""", a=a.name, b=b.name, name=name, ensure=ensure)
    if "fallback" in ensure:
        code += "\nfn zero_share() to int {\n    return 0\n}\n"
    what = f"divides {a.words} by {b.words}, declaring with @require that {b.words} is positive " \
           f"and with @ensure that the result is not negative"
    return Draft(code, f"a function `{name}` with contracts", what, "function", 5)
