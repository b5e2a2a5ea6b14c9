"""Templates for synthetic Vox programs, part 1: the shared machinery (`Draft`, `Ctx`, `render`)
and plain functions: arithmetic, guards, strings, loops, pipelines, generics, contracts.

A template is `fn(ctx) -> Draft`: it renders one complete Vox program about a domain entity and
says, in words, what the program does. Code is written with `string.Template` (`$name`) because
Vox is full of braces that `str.format` would need doubled. Templates never check syntax
themselves: `mens.corpus.synth.generate` parses every draft with the Vox pack and drops failures."""

from __future__ import annotations

import random
from dataclasses import dataclass
from string import Template
from textwrap import dedent

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

_ARITH = (
    ("total", "$a * $b", "multiplies {a} by {b}"),
    ("sum", "$a + $b", "adds {a} and {b}"),
    ("gap", "$a - $b", "returns {a} minus {b}"),
    ("mean", "($a + $b) / 2", "returns the average of {a} and {b}"),
    ("share", "$a * $k / 100", "returns {k} percent of {a}"),
    ("bucket", "$a / $k", "returns which bucket of size {k} {a} falls into"),
    ("rest", "$a % $k", "returns {a} modulo {k}"),
    ("weighted", "$a * $k + $b", "returns {a} times {k} plus {b}"),
)


def fn_arith(c: Ctx) -> Draft:
    a, b = c.sample(c.e.of("int"), 2)
    op, expr, says = c.pick(_ARITH)
    k = c.num(2, 99)
    name = f"{c.e.var}_{op}_{a.name}"
    body = Template(expr).substitute(a=a.name, b=b.name, k=k)
    pure = "@pure\n" if c.chance(0.3) else ""
    pub = "pub " if not pure and c.chance(0.2) else ""
    if c.chance(0.5):
        code = render("""
            ${pure}${pub}fn $name($a: int, $b: int) to int {
                return $body
            }""", pure=pure, pub=pub, name=name, a=a.name, b=b.name, body=body)
    else:
        code = render("""
            ${pure}${pub}fn $name($a: int, $b: int) to int {
                let result = $body
                return result
            }""", pure=pure, pub=pub, name=name, a=a.name, b=b.name, body=body)
    what = "takes " + c.e.a + "'s " + a.words + " and " + b.words + " and " + \
        says.format(a=a.words, b=b.words, k=k)
    return Draft(code, f"a function `{name}`", what, "function", 1)


def fn_guard(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    lo, hi = c.num(0, 10), c.num(50, 5000)
    name = c.pick(("validate", "check", "checked", "sanitize")) + f"_{x.name}"
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


def fn_string(c: Ctx) -> Draft:
    s1, s2 = c.sample(c.e.of("str"), 2) if len(c.e.of("str")) > 1 else (c.e.of("str")[0],) * 2
    variant = c.num(0, 2)
    if variant == 0 and s1 != s2:
        sep = c.pick((" - ", " / ", ", ", " by "))
        name = f"{c.e.var}_label"
        code = render("""
            fn $name($a: str, $b: str) to str {
                return $a + "$sep" + $b
            }""", name=name, a=s1.name, b=s2.name, sep=sep)
        what = f"joins {c.e.a}'s {s1.words} and {s2.words} with \"{sep}\" between them"
    elif variant == 1:
        fallback = c.pick(SAMPLE_WORDS)
        name = f"{s1.name}_or_{fallback}"
        code = render("""
            fn $name($a: str) to str {
                if len($a) is 0 {
                    return "$fb"
                }
                return $a
            }""", name=name, a=s1.name, fb=fallback)
        what = f"returns the {s1.words} unchanged, or \"{fallback}\" when it is empty"
    else:
        n = c.num(3, 40)
        name = f"short_{s1.name}"
        code = render("""
            fn $name($a: str) to str {
                if len($a) <= $n {
                    return $a
                }
                return slice($a, 0, $n) + "~"
            }""", name=name, a=s1.name, n=n)
        what = f"shortens a {s1.words} to at most {n} characters, adding \"~\" when it cut something"
    return Draft(code, f"a string function `{name}`", what, "function", 2)


def fn_list_loop(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    x = c.pick([f for f in fields if f.type == "int"])
    flag = next((f for f in fields if f.type == "bool"), None)
    mode = c.pick(("sum", "max", "count") if flag else ("sum", "max"))
    if mode == "sum":
        name, what = f"total_{x.name}", f"adds up the {x.words} of every {e.words} in a list"
        loop = render("""
            let mut total = 0
            for $v in $p {
                total += $v.$x
            }
            return total""", v=e.var, p=e.plural, x=x.name)
    elif mode == "max":
        name, what = f"max_{x.name}", f"returns the largest {x.words} in a list of {e.plural_words} (0 for an empty list)"
        loop = render("""
            let mut best = 0
            for $v in $p {
                if $v.$x > best {
                    best = $v.$x
                }
            }
            return best""", v=e.var, p=e.plural, x=x.name)
    else:
        name, what = f"count_{flag.name}", f"counts the {e.plural_words} whose {flag.words} flag is set"
        loop = render("""
            let mut count = 0
            for $v in $p {
                if $v.$f {
                    count += 1
                }
            }
            return count""", v=e.var, p=e.plural, f=flag.name)
    body = "\n".join("    " + line for line in loop.strip().split("\n"))
    code = c.struct(fields) + f"\n\nfn {name}({e.plural}: List[{e.type_name}]) to int {{\n{body}\n}}\n"
    return Draft(code, f"{an(e.type_name)} `{e.type_name}` type and a function `{name}`", what, "function", 3)


_LOOPS = (
    ("digit_sum", "the sum of the decimal digits of", """
        let mut rest = $n
        let mut total = 0
        while rest > 0 {
            total += rest % 10
            rest = rest / 10
        }
        return total"""),
    ("gcd_with_$k", "the greatest common divisor of $k and", """
        let mut a = $n
        let mut b = $k
        while b > 0 {
            let t = b
            b = a % b
            a = t
        }
        return a"""),
    ("halvings", "how many times you can halve", """
        let mut rest = $n
        let mut steps = 0
        while rest > 1 {
            rest = rest / 2
            steps += 1
        }
        return steps"""),
    ("steps_to_$k", "how many steps of $k it takes to climb to", """
        let mut level = 0
        let mut steps = 0
        loop {
            if level >= $n {
                break
            }
            level += $k
            steps += 1
        }
        return steps"""),
    ("triangle", "the sum of all whole numbers from 1 up to", """
        let mut i = 1
        let mut total = 0
        while i <= $n {
            total += i
            i += 1
        }
        return total"""),
)


def fn_while(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    stem, says, body = c.pick(_LOOPS)
    k = c.num(2, 12)
    name = f"{x.name}_" + Template(stem).substitute(k=k)
    body = Template(dedent(body).strip()).substitute(n=x.name, k=k)
    body = "\n".join("    " + line for line in body.split("\n"))
    code = f"fn {name}({x.name}: int) to int {{\n{body}\n}}\n"
    what = "computes " + Template(says).substitute(k=k) + f" {an(x.words)} {x.words} value, using a loop"
    return Draft(code, f"a function `{name}`", what, "function", 3)


def fn_pipeline(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    x = c.pick([f for f in fields if f.type == "int"])
    s = c.pick([f for f in fields if f.type == "str"])
    k, cmp = c.num(1, 300), c.pick((">", "<", ">="))
    word = {">": "more than", "<": "less than", ">=": "at least"}[cmp]
    name = f"{s.name}s_of_{e.plural}_by_{x.name}"
    v = e.var[0]
    code = c.struct(fields) + "\n\n" + render("""

        fn $name($p: List[$T]) to List[str] {
            return $p |> filter(fn($v) $v.$x $cmp $k) |> map(fn($v) $v.$s)
        }""", name=name, p=e.plural, T=e.type_name, v=v, x=x.name, cmp=cmp, k=k, s=s.name)
    what = f"keeps the {e.plural_words} with {word} {k} {x.words} and returns their {s.words}s, " \
           f"using |> with filter and map"
    return Draft(code, f"{an(e.type_name)} `{e.type_name}` type and a function `{name}`", what, "function", 4)


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
