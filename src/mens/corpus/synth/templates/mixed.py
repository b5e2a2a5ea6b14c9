"""Templates for synthetic Vox programs, part 4: larger programs that combine several constructs
(a table with its endpoints and the component that uses them, an actor and its client), and
expression forms the single-construct templates rarely show: literal patterns in `match`,
`?` on results, `x => …` lambdas, `loop`/`break`, conditional views, `on cleanup`; and
module-level declarations: extern functions, constants, imports.

Same shape as `templates.core`: each template takes a `Ctx` and returns a `Draft`."""

from __future__ import annotations

from mens.corpus.synth.templates.core import Ctx, Draft, listing, render
from mens.corpus.synth.templates.tables import fresh_message
from mens.corpus.synth.words import SAMPLE_WORDS, an


def app_slice(c: Ctx) -> Draft:
    """Table + query + mutation + a component that lists rows and adds one."""
    e, fields = c.e, c.fields(2, 3)
    s = c.pick([f for f in fields if f.type == "str"])
    T, p, v = e.type_name, e.plural, e.var
    label = c.pick(("Add", "Save", "Create", "Add " + e.words))
    lister, creator, manager, empty = f"list_{p}", f"create_{v}", f"{T}Manager", f"{s.words} is required"
    if c.made_up:  # made-up endpoint and component names, button label and error, each stated
        lister, creator = c.fresh_names(2)
        manager = c.fresh_names(1, True)[0]
        label, empty = c.fresh_text().capitalize(), fresh_message(c, s.words)
    code = c.struct(fields, head="@table type") + "\n\n" + render("""
        @endpoint(kind: query)
        fn $lister() to List[$T] {
            return db.$T.all()
        }

        @endpoint(kind: mutation)
        fn $creator($s: str) to Result[str] {
            if len($s) is 0 {
                return Error("$empty")
            }
            db.$T.insert({ $s: $s })
            return Ok($s)
        }

        component $manager() {
            state rows: List[$T] = []
            state draft: str = ""
            on mount: {
                rows = $lister()
            }
            view: Column(gap = 2) {
                for row in rows {
                    Text(value = row.$s)
                }
                Input(value = draft, on_input = fn(x) { draft = x })
                Button(on_click = fn() {
                    $creator(draft)
                    rows = $lister()
                }) {
                    Text(value = "$label")
                }
            }
        }""", lister=lister, creator=creator, manager=manager, T=T, s=s.name, empty=empty, label=label)
    what = f"declares {an(T)} `{T}` table, a query endpoint listing every {e.words}, a mutation endpoint " \
           f"creating one from its {s.words} (rejecting an empty one), and a `{T}Manager` component that loads " \
           f"the rows on mount, shows each {s.words}, and has an input whose \"{label}\" button creates a " \
           f"{e.words} and reloads the list"
    if c.made_up:
        what = f"declares {an(T)} `{T}` table, a query `{lister}` listing every {e.words}, a mutation " \
               f"`{creator}` inserting one from its {s.words} (Error(\"{empty}\") if empty, else Ok({s.name})), " \
               f"and a `{manager}` component that loads the rows on mount, shows each {s.words}, and has an " \
               f"input with a \"{label}\" button that creates a {e.words} and reloads the list"
    return Draft(code, f"a small full-stack {e.domain} feature", what, "component", 7)


_CODES = (
    ("http_status_text", "an HTTP status code", [(200, "ok"), (201, "created"), (404, "not found"), (500, "server error")]),
    ("weekday_name", "a weekday number (1 = Monday)", [(1, "Monday"), (2, "Tuesday"), (3, "Wednesday"), (6, "Saturday"), (7, "Sunday")]),
    ("medal_for", "a finishing place", [(1, "gold"), (2, "silver"), (3, "bronze")]),
    ("size_name", "a size code", [(0, "small"), (1, "medium"), (2, "large")]),
)


def fn_match_literal(c: Ctx) -> Draft:
    if c.made_up:
        return _match_literal_made_up(c)
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


def _match_literal_made_up(c: Ctx) -> Draft:
    """fn_match_literal with made-up function names, codes, texts and fallback, all stated."""
    name, back = c.fresh_names(2)
    keys = c.sample(range(0, 60), c.num(2, 4))
    texts: list[str] = []
    for _ in keys:
        texts.append(c.fresh_text())
    other = c.fresh_text()
    rows = list(zip(keys, texts))
    arms = "\n".join(f'        {k} => "{text}"' for k, text in rows)
    code = f"fn {name}(code: int) to str {{\n    match code {{\n{arms}\n        _ => \"{other}\"\n    }}\n}}\n"
    tail = ""
    if c.chance(0.5):
        arms = "\n".join(f'        "{text}" => {k}' for k, text in rows)
        code += f"\nfn {back}(text: str) to int {{\n    match text {{\n{arms}\n        _ => 0 - 1\n    }}\n}}\n"
        tail = f", plus `{back}`, the reverse lookup from text to code (-1 when unknown) matching on string literals"
    mapping = listing(f'{k} to "{text}"' for k, text in rows)
    what = c.pick(("maps a code {} with a match on integer literals, and any other code to \"{}\"",
                   "turns an int code into text with a match on integer literals: {}, anything else to \"{}\"")
                  ).format(mapping, other)
    return Draft(code, f"a function `{name}`", what + tail, "function", 3)


def fn_result_chain(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    s = c.pick(c.e.of("str"))
    lo = c.num(0, 20)
    parse, total, low = f"parse_{x.name}", f"{c.e.var}_{x.name}_total", f"{x.words} below {lo}"
    if c.made_up:
        parse, total = c.fresh_names(2)
        low = fresh_message(c, x.words)
    code = render("""
        fn $parse(text: str) to Result[int] {
            let n = to_int(text)?
            if n < $lo {
                return Error("$low")
            }
            return Ok(n)
        }

        fn $total(first: str, second: str) to Result[int] {
            let a = $parse(first)?
            let b = $parse(second)?
            return Ok(a + b)
        }""", parse=parse, total=total, low=low, lo=lo)
    what = f"parses two {x.words} values from text, propagating any error with the ? operator, and " \
           f"returns their sum; values below {lo} are rejected"
    if c.made_up:
        what = f"parses two {x.words} values from text with to_int, propagating any error with the ? operator, " \
               f"and returns their sum; `{parse}` rejects a value below {lo} with Error(\"{low}\")"
    return Draft(code, f"functions `{parse}` and `{total}`", what, "function", 5)


def fn_loop_break(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    limit = c.num(50, 5000)
    name = f"first_{x.name}_over_{limit}"
    lam = c.chance(0.5)
    if c.made_up:
        name = c.fresh_names(1)[0]
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
    if c.made_up:
        what = f"starts from a given {x.words} value and keeps doubling it plus one inside a loop until it " \
               f"exceeds {limit}, then returns it; the step is a lambda: {grow}"
    return Draft(code, f"a function `{name}`", what, "function", 4)


def component_conditional(c: Ctx) -> Draft:
    e = c.e
    flag = c.pick(e.of("bool"))
    s = c.pick(e.of("str"))
    name = f"{e.type_name}{flag.name.title().replace('_', '')}Toggle"
    on_text, off_text = c.sample(SAMPLE_WORDS, 2)
    gap, button, shown, hidden = c.num(1, 3), "Toggle", "shown", "hidden"
    if c.made_up:  # made-up component name, texts, button label and log messages, each stated
        name = c.fresh_names(1, True)[0]
        texts: list[str] = []
        for _ in range(4):
            texts.append(c.fresh_text())
        on_text, off_text, shown, hidden = texts
        button = c.fresh_text().capitalize()
    code = render("""
        component $name($s: str, initially: bool) {
            state $f: bool = initially
            on mount: log("$shown", $s)
            on cleanup: log("$hidden", $s)
            view: Column(gap = $gap) {
                Text(value = $s)
                if $f {
                    Text(value = "$on")
                } else {
                    Text(value = "$off")
                }
                Button(on_click = fn() { $f = not $f }) {
                    Text(value = "$button")
                }
            }
        }""", name=name, s=s.name, f=flag.name, gap=gap, on=on_text, off=off_text, button=button,
                  shown=shown, hidden=hidden)
    what = f"shows {e.a}'s {s.words}, keeps its {flag.words} flag in state, renders \"{on_text}\" or " \
           f"\"{off_text}\" with an if/else inside the view, flips the flag on a button press, and logs on " \
           f"mount and cleanup"
    if c.made_up:
        what = f"takes {an(s.words)} {s.words} and a bool initially, shows the {s.words} in a Column with gap {gap}, " \
               f"keeps its {flag.words} flag in state (starting as initially), renders \"{on_text}\" or " \
               f"\"{off_text}\" with an if/else, flips the flag with a \"{button}\" button, and logs " \
               f"\"{shown}\" on mount and \"{hidden}\" on cleanup, each with the {s.words}"
    return Draft(code, f"a component `{name}`", what, "component", 5)


def actor_client(c: Ctx) -> Draft:
    e = c.e
    x = c.pick(e.of("int"))
    name = f"{e.type_name}Counter"
    times = c.num(2, 5)
    steps = [c.num(1, 20) for _ in range(times)]
    bump, current, count = "bump", "current", f"count_{e.plural}"
    if c.made_up:  # made-up actor, handler and function names; handler names are not backticked,
        name = c.fresh_names(1, True)[0]  # as generate.with_made_up_names skips `counter.x`
        bump, current, count = c.fresh_names(3)
    calls = "\n".join(f"    counter.{bump}({k})" for k in steps)
    code = render("""
        actor $name {
            on $bump(by: int) to int {
                self.$x += by
                return self.$x
            }
            on $current() to int {
                return self.$x
            }
        }
        """, name=name, x=x.name, bump=bump, current=current) + \
        f"\nfn {count}() to int {{\n    let counter = spawn({name})\n{calls}\n    return counter.{current}()\n}}\n"
    what = f"accumulates a {x.words} total, plus a function `{count}` that spawns the actor, sends it " \
           f"{times} bump messages and returns the current total"
    if c.made_up:
        what = f"keeps a total in self.{x.name}, with a handler {bump}(by: int) that adds to it and returns it and " \
               f"a handler {current}() that returns it, plus a function `{count}` that spawns the actor, sends it " \
               f"{bump} messages with {listing(str(k) for k in steps)} and returns {current}()"
    return Draft(code, f"an actor `{name}`", what, "actor", 6)


# ---------------------------------------------------------------- module-level declarations

def fn_extern(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    host = c.pick((("now_ms", "Date.now", "the current time in milliseconds"),
                   ("random_unit", "Math.random", "a random number"),
                   ("cpu_count", "os.cpus", "the number of CPUs")))
    fname, target, says = host
    name = f"{x.name}_plus_{fname}"
    if c.made_up:  # a made-up host function and names, stated
        fname, name, owner, member = c.fresh_names(4)
        target, says = f"{owner.split('_')[0]}.{member}", "an int"
    code = render("""
        extern fn $f() to int = "$target"

        fn $name($x: int) to int {
            return $x + $f()
        }""", f=fname, target=target, name=name, x=x.name)
    what = f"declares the host function {target} as an extern `{fname}` returning {says} and adds it to {x.words}"
    if c.made_up:
        what = c.pick(("declares the host function \"{}\" as an extern `{}` returning {} and adds it to {}",
                       "binds the host function \"{}\" to an extern `{}` (returning {}) and adds its value to {}")
                      ).format(target, fname, says, x.words)
    return Draft(code, f"an extern function and a function `{name}`", what, "function", 3)


def fn_const(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    s = c.pick(c.e.of("str"))
    hi, dflt = c.num(10, 9999), c.pick(SAMPLE_WORDS)
    cap, label = f"max_{x.name}", f"default_{s.name}"
    typed = ": int" if c.chance(0.5) else ""
    clamp, fill = f"clamp_{x.name}", f"{s.name}_or_default"
    if c.made_up:  # made-up constant and function names and default text, each stated
        cap, label, clamp, fill = c.fresh_names(4)
        dflt = c.fresh_text()
    code = render("""
        let $cap$typed = $hi
        let $label = "$dflt"

        fn $clamp($x: int) to int {
            if $x > $cap {
                return $cap
            }
            return $x
        }

        fn $fill($s: str) to str {
            if len($s) is 0 {
                return $label
            }
            return $s
        }""", cap=cap, typed=typed, hi=hi, label=label, dflt=dflt, x=x.name, s=s.name, clamp=clamp, fill=fill)
    what = f"defines constants `{cap}` = {hi} and `{label}` = \"{dflt}\" and uses them to clamp a " \
           f"{x.words} and to fill in an empty {s.words}"
    if c.made_up:
        what = f"defines constants `{cap}{typed}` = {hi} and `{label}` = \"{dflt}\", with a function `{clamp}` " \
               f"capping a {x.words} at `{cap}` and `{fill}` returning `{label}` for an empty {s.words}"
    return Draft(code, "module-level constants", what, "const", 2)


_IMPORTS = (
    ("import std.math", "math.max"), ("import std.strings as strings", "strings.concat"),
    ("import std.collections.list as lists", "lists.append"), ("import app/helpers", "helpers.tidy"),
    ("import rust:chrono as chrono", "chrono.ts"), ("import std.json", "json.encode"),
)


def _made_up_import(c: Ctx, a: str, b: str, alias: str, fn: str) -> tuple[str, str]:
    """An import of a made-up module (of four forms) and a call into it."""
    form = c.num(0, 3)
    if form == 0:
        return f"import std.{b}", f"{b}.{fn}"
    if form == 1:
        return f"import std.{a}.{b} as {alias}", f"{alias}.{fn}"
    if form == 2:
        return f"import {a}/{b}", f"{b}.{fn}"
    return f"import rust:{b} as {alias}", f"{alias}.{fn}"


def fn_import(c: Ctx) -> Draft:
    if c.made_up:
        return _import_made_up(c)
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


def _import_made_up(c: Ctx) -> Draft:
    """fn_import with made-up modules, aliases, called functions and function name, all stated."""
    names = c.fresh_names(9)
    (imp1, call1), (imp2, call2) = _made_up_import(c, *names[0:4]), _made_up_import(c, *names[4:8])
    prepare, x, s = names[8], c.pick(c.e.of("int")), c.pick(c.e.of("str"))
    joined = imp1 + ", " + imp2.removeprefix("import ") if c.chance(0.4) else imp1 + "\n" + imp2
    code = render("""
        $imports

        fn $prepare($s: str, $x: int) to str {
            let a = $call1($s, $x)
            let b = $call2(a)
            return b
        }""", imports=joined, prepare=prepare, s=s.name, x=x.name, call1=call1, call2=call2)
    what = f"imports {imp1.removeprefix('import ')} and {imp2.removeprefix('import ')}, and has a function " \
           f"`{prepare}` that passes {c.e.a}'s {s.words} and {x.words} to {call1}, then that result to {call2}, " \
           f"and returns it"
    return Draft(code, "a module with imports", what, "import", 3)
