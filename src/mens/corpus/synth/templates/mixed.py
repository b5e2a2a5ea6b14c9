"""Templates for synthetic Vox programs, part 4: larger programs that combine several constructs
(a table with its endpoints and the component that uses them, an actor and its client), and
expression forms the single-construct templates rarely show: literal patterns in `match`,
`?` on results, `x => …` lambdas, `loop`/`break`, conditional views, `on cleanup`; and
module-level declarations: extern functions, constants, imports.

Same shape as `templates.core`: each template takes a `Ctx` and returns a `Draft`."""

from __future__ import annotations

from mens.corpus.synth.templates.core import Ctx, Draft, render
from mens.corpus.synth.words import SAMPLE_WORDS, an


def app_slice(c: Ctx) -> Draft:
    """Table + query + mutation + a component that lists rows and adds one."""
    e, fields = c.e, c.fields(2, 3)
    s = c.pick([f for f in fields if f.type == "str"])
    T, p, v = e.type_name, e.plural, e.var
    label = c.pick(("Add", "Save", "Create", "Add " + e.words))
    code = c.struct(fields, head="@table type") + "\n\n" + render("""
        @endpoint(kind: query)
        fn list_$p() to List[$T] {
            return db.$T.all()
        }

        @endpoint(kind: mutation)
        fn create_$v($s: str) to Result[str] {
            if len($s) is 0 {
                return Error("$sw is required")
            }
            db.$T.insert({ $s: $s })
            return Ok($s)
        }

        component ${T}Manager() {
            state rows: List[$T] = []
            state draft: str = ""
            on mount: {
                rows = list_$p()
            }
            view: Column(gap = 2) {
                for row in rows {
                    Text(value = row.$s)
                }
                Input(value = draft, on_input = fn(x) { draft = x })
                Button(on_click = fn() {
                    create_$v(draft)
                    rows = list_$p()
                }) {
                    Text(value = "$label")
                }
            }
        }""", p=p, T=T, v=v, s=s.name, sw=s.words, label=label)
    what = f"declares {an(T)} `{T}` table, a query endpoint listing every {e.words}, a mutation endpoint " \
           f"creating one from its {s.words} (rejecting an empty one), and a `{T}Manager` component that loads " \
           f"the rows on mount, shows each {s.words}, and has an input whose \"{label}\" button creates a " \
           f"{e.words} and reloads the list"
    return Draft(code, f"a small full-stack {e.domain} feature", what, "component", 7)


_CODES = (
    ("http_status_text", "an HTTP status code", [(200, "ok"), (201, "created"), (404, "not found"), (500, "server error")]),
    ("weekday_name", "a weekday number (1 = Monday)", [(1, "Monday"), (2, "Tuesday"), (3, "Wednesday"), (6, "Saturday"), (7, "Sunday")]),
    ("medal_for", "a finishing place", [(1, "gold"), (2, "silver"), (3, "bronze")]),
    ("size_name", "a size code", [(0, "small"), (1, "medium"), (2, "large")]),
)


def fn_match_literal(c: Ctx) -> Draft:
    base, says, table = c.pick(_CODES)
    rows = c.sample(table, c.num(2, len(table)))
    other = c.pick(("unknown", "other", "n/a", "-"))
    name = f"{c.e.var}_{base}"
    arms = "\n".join(f'        {k} => "{text}"' for k, text in rows)
    code = f"fn {name}(code: int) to str {{\n    match code {{\n{arms}\n        _ => \"{other}\"\n    }}\n}}\n"
    if c.chance(0.5):  # and the reverse direction, matching on string patterns
        back = "\n".join(f'        "{text}" => {k}' for k, text in rows)
        code += f"\nfn {c.e.var}_{base}_code(text: str) to int {{\n    match text {{\n{back}\n        _ => 0 - 1\n    }}\n}}\n"
        tail = ", plus the reverse lookup from text to code (-1 when unknown) matching on string literals"
    else:
        tail = ""
    what = f"turns {says} into text with a match on integer literals, falling back to \"{other}\"" + tail
    return Draft(code, f"a function `{name}`", what, "function", 3)


def fn_result_chain(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    s = c.pick(c.e.of("str"))
    lo = c.num(0, 20)
    code = render("""
        fn parse_$x(text: str) to Result[int] {
            let n = to_int(text)?
            if n < $lo {
                return Error("$xw below $lo")
            }
            return Ok(n)
        }

        fn ${v}_${x}_total(first: str, second: str) to Result[int] {
            let a = parse_$x(first)?
            let b = parse_$x(second)?
            return Ok(a + b)
        }""", x=x.name, xw=x.words, lo=lo, v=c.e.var)
    what = f"parses two {x.words} values from text, propagating any error with the ? operator, and " \
           f"returns their sum; values below {lo} are rejected"
    return Draft(code, f"functions `parse_{x.name}` and `{c.e.var}_{x.name}_total`",
                 what, "function", 5)


def fn_loop_break(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    limit = c.num(50, 5000)
    name = f"first_{x.name}_over_{limit}"
    lam = c.chance(0.5)
    grow = "let next = fn(n) n * 2 + 1" if not lam else "let next = n => n * 2 + 1"
    code = render("""
        fn $name(start: int) to int {
            $grow
            let mut value = start
            loop {
                if value > $limit {
                    break
                }
                value = next(value)
            }
            return value
        }""", name=name, grow=grow, limit=limit)
    what = f"starts from a given {x.words} value and keeps doubling it plus one inside a loop until it exceeds {limit}, " \
           f"then returns it; the step is a lambda"
    return Draft(code, f"a function `{name}`", what, "function", 4)


def component_conditional(c: Ctx) -> Draft:
    e = c.e
    flag = c.pick(e.of("bool"))
    s = c.pick(e.of("str"))
    name = f"{e.type_name}{flag.name.title().replace('_', '')}Toggle"
    on_text, off_text = c.sample(SAMPLE_WORDS, 2)
    code = render("""
        component $name($s: str, initially: bool) {
            state $f: bool = initially
            on mount: log("shown", $s)
            on cleanup: log("hidden", $s)
            view: Column(gap = $gap) {
                Text(value = $s)
                if $f {
                    Text(value = "$on")
                } else {
                    Text(value = "$off")
                }
                Button(on_click = fn() { $f = not $f }) {
                    Text(value = "Toggle")
                }
            }
        }""", name=name, s=s.name, f=flag.name, gap=c.num(1, 3), on=on_text, off=off_text)
    what = f"shows {e.a}'s {s.words}, keeps its {flag.words} flag in state, renders \"{on_text}\" or " \
           f"\"{off_text}\" with an if/else inside the view, flips the flag on a button press, and logs on " \
           f"mount and cleanup"
    return Draft(code, f"a component `{name}`", what, "component", 5)


def actor_client(c: Ctx) -> Draft:
    e = c.e
    x = c.pick(e.of("int"))
    name = f"{e.type_name}Counter"
    times = c.num(2, 5)
    calls = "\n".join(f"    counter.bump({c.num(1, 20)})" for _ in range(times))
    code = render("""
        actor $name {
            on bump(by: int) to int {
                self.$x += by
                return self.$x
            }
            on current() to int {
                return self.$x
            }
        }
        """, name=name, x=x.name) + \
        f"\nfn count_{e.plural}() to int {{\n    let counter = spawn({name})\n{calls}\n    return counter.current()\n}}\n"
    what = f"accumulates a {x.words} total, plus a function `count_{e.plural}` that spawns the actor, sends it " \
           f"{times} bump messages and returns the current total"
    return Draft(code, f"an actor `{name}`", what, "actor", 6)


# ---------------------------------------------------------------- module-level declarations

def fn_extern(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    host = c.pick((("now_ms", "Date.now", "the current time in milliseconds"),
                   ("random_unit", "Math.random", "a random number"),
                   ("cpu_count", "os.cpus", "the number of CPUs")))
    fname, target, says = host
    name = f"{x.name}_plus_{fname}"
    code = render("""
        extern fn $f() to int = "$target"

        fn $name($x: int) to int {
            return $x + $f()
        }""", f=fname, target=target, name=name, x=x.name)
    what = f"declares the host function {target} as an extern `{fname}` returning {says} and adds it to {x.words}"
    return Draft(code, f"an extern function and a function `{name}`", what, "function", 3)


def fn_const(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    s = c.pick(c.e.of("str"))
    hi, dflt = c.num(10, 9999), c.pick(SAMPLE_WORDS)
    cap, label = f"max_{x.name}", f"default_{s.name}"
    typed = ": int" if c.chance(0.5) else ""
    code = render("""
        let $cap$typed = $hi
        let $label = "$dflt"

        fn clamp_$x($x: int) to int {
            if $x > $cap {
                return $cap
            }
            return $x
        }

        fn ${s}_or_default($s: str) to str {
            if len($s) is 0 {
                return $label
            }
            return $s
        }""", cap=cap, typed=typed, hi=hi, label=label, dflt=dflt, x=x.name, s=s.name)
    what = f"defines constants `{cap}` = {hi} and `{label}` = \"{dflt}\" and uses them to clamp a " \
           f"{x.words} and to fill in an empty {s.words}"
    return Draft(code, "module-level constants", what, "const", 2)


_IMPORTS = (
    ("import std.math", "math.max"), ("import std.strings as strings", "strings.concat"),
    ("import std.collections.list as lists", "lists.append"), ("import app/helpers", "helpers.tidy"),
    ("import rust:chrono as chrono", "chrono.ts"), ("import std.json", "json.encode"),
)


def fn_import(c: Ctx) -> Draft:
    (imp1, call1), (imp2, call2) = c.sample(_IMPORTS, 2)
    x = c.pick(c.e.of("int"))
    s = c.pick(c.e.of("str"))
    joined = imp1 + ", " + imp2.removeprefix("import ") if c.chance(0.4) else imp1 + "\n" + imp2
    code = render("""
        $imports

        fn prepare_$v($s: str, $x: int) to str {
            let a = $call1($s, $x)
            let b = $call2(a)
            return b
        }""", imports=joined, v=c.e.var, s=s.name, x=x.name, call1=call1, call2=call2)
    what = f"imports {imp1.removeprefix('import ')} and {imp2.removeprefix('import ')} and uses " \
           f"{call1} and {call2} to prepare {c.e.a}'s {s.words}"
    return Draft(code, "a module with imports", what, "import", 3)


