"""Templates for synthetic Vox programs, part 2: data types and ADTs, tests and properties,
MCP tools/resources, AI functions, scheduled jobs (tables and endpoints: templates.tables).

Same shape as `templates.core`: each template takes a `Ctx` and returns a `Draft`."""

from __future__ import annotations

from mens.corpus.synth.templates.core import Ctx, Draft, listing, obj, params, render
from mens.corpus.synth.words import CRON, an


# ---------------------------------------------------------------- made-up specifics (Ctx.made_up)

def made_up_cron(c: Ctx) -> str:
    """A random valid five-field cron line: "15 4 * * 1", "*/20 * * * *", "7 */3 * * *" …"""
    m, h, form = c.num(0, 59), c.num(0, 23), c.num(0, 4)
    if form == 0:
        return f"{m} {h} * * *"
    if form == 1:
        return f"*/{c.pick((2, 5, 10, 12, 20, 30))} * * * *"
    if form == 2:
        return f"{m} */{c.num(2, 12)} * * *"
    if form == 3:
        return f"{m} {h} * * {c.num(0, 6)}"
    return f"{m} {h} {c.num(1, 28)} * *"


# ---------------------------------------------------------------- data types

def type_struct(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 5)
    pub = "pub " if c.chance(0.3) else ""
    ctor, noun = f"new_{e.var}", f"a struct type `{e.type_name}`"
    if c.made_up:
        ctor = c.fresh_names(1)[0]
        noun = f"a {'public ' if pub else ''}struct type `{e.type_name}`"
    code = c.struct(fields, head=pub + "type") + "\n\n" + render("""

        fn $ctor($params) to $T {
            return $obj
        }""", ctor=ctor, params=params(fields), T=e.type_name, obj=obj(fields))
    listed = ", ".join(f"{f.words} ({f.type})" for f in fields)
    tail = "plus a constructor function `{}` that builds one from its fields"
    if c.made_up:
        tail = c.pick((tail, "and a function `{}` that takes every field and returns one",
                       "with a constructor `{}` taking its fields in order"))
    what = f"has the fields {listed}, " + tail.format(ctor)
    return Draft(code, noun, what, "type", 2)


_VARIANTS = ("Created", "Updated", "Archived", "Restored", "Flagged", "Removed", "Approved",
             "Rejected", "Queued", "Shipped", "Cancelled", "Expired", "Paused", "Resumed")


def type_adt(c: Ctx) -> Draft:
    if c.made_up:
        return _type_adt_made_up(c)
    e = c.e
    suffix = c.pick(("Event", "Change", "Outcome", "Signal", "Action"))
    adt = e.type_name + suffix
    variants = c.sample(_VARIANTS, c.num(3, 5))
    lines, arms, says = [], [], []
    score_mode = c.chance(0.5)
    for v in variants:
        fields = c.sample(e.fields, c.num(0, 2))
        if fields:
            lines.append(f"    | {v}({params(fields)})")
        else:
            lines.append(f"    | {v}")
        if score_mode:
            ints = [f for f in fields if f.type == "int"]
            strs = [f for f in fields if f.type == "str"]
            value = ints[0].name if ints else (f"len({strs[0].name})" if strs else str(c.num(0, 9)))
            binds = ", ".join(f.name if f in ints[:1] or (not ints and f in strs[:1]) else "_" for f in fields)
        else:
            strs = [f for f in fields if f.type == "str"]
            value = f'"{v.lower()} " + {strs[0].name}' if strs else f'"{v.lower()}"'
            binds = ", ".join(f.name if f in strs[:1] else "_" for f in fields)
        pattern = f"{v}({binds})" if fields else v
        arms.append(f"        {pattern} => {value}")
        says.append(v)
    ret = "int" if score_mode else "str"
    fname = f"{'score' if score_mode else 'describe'}_{e.var}_{suffix.lower()}"
    code = f"type {adt} =\n" + "\n".join(lines) + "\n\n" + \
        f"fn {fname}(x: {adt}) to {ret} {{\n    match x {{\n" + "\n".join(arms) + "\n    }\n}\n"
    what = f"has the variants {', '.join(says)}, and a function `{fname}` that matches on it and " + \
        ("returns a number for each case" if score_mode else "returns a short description of each case")
    return Draft(code, f"an algebraic data type `{adt}`", what, "type", 4)


def _type_adt_made_up(c: Ctx) -> Draft:
    """type_adt with a made-up type, variants and function, each variant's payload and each
    arm's result spelled out."""
    e = c.e
    adt, *variants = c.fresh_names(1 + c.num(2, 4), True)
    fname = c.fresh_names(1)[0]
    score_mode = c.chance(0.5)
    lines, arms, shown, results = [], [], [], []
    for v in variants:
        fields = c.sample(e.fields, c.num(0, 2))
        lines.append(f"    | {v}({params(fields)})" if fields else f"    | {v}")
        shown.append(f"`{v}({params(fields)})`" if fields else f"`{v}`")
        ints = [f for f in fields if f.type == "int"]
        strs = [f for f in fields if f.type == "str"]
        if score_mode:
            if ints:
                value, result = ints[0].name, ints[0].name
            elif strs:
                value, result = f"len({strs[0].name})", f"the length of {strs[0].name}"
            else:
                value = result = str(c.num(0, 9))
            binds = ", ".join(f.name if f in ints[:1] or (not ints and f in strs[:1]) else "_" for f in fields)
            results.append(result)
        else:
            # The name as it is (a made-up name may be renamed as a whole word, in literals too).
            value = f'"{v} " + {strs[0].name}' if strs else f'"{v}"'
            binds = ", ".join(f.name if f in strs[:1] else "_" for f in fields)
        arms.append(f"        {f'{v}({binds})' if fields else v} => {value}")
    ret = "int" if score_mode else "str"
    code = f"type {adt} =\n" + "\n".join(lines) + "\n\n" + \
        f"fn {fname}(x: {adt}) to {ret} {{\n    match x {{\n" + "\n".join(arms) + "\n    }\n}\n"
    if score_mode:
        returns = f"returns {listing(results)} for them respectively"
    else:
        returns = c.pick(("returns the variant's name as a string, followed by a space and its first str "
                          "field when it has one",
                          "returns the case's name, plus a space and its first str field if it has one"))
    what = c.pick(("has the variants {}, and a function `{}` that matches on it and {}",
                   "has the cases {}; a function `{}` matches on it and {}")).format(listing(shown), fname, returns)
    return Draft(code, f"an algebraic data type `{adt}`", what, "type", 4)


def fn_option(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    s = c.pick([f for f in fields if f.type == "str"])
    x = c.pick([f for f in fields if f.type == "int"])
    find, get = f"find_{e.var}", f"{x.name}_of"
    if c.made_up:
        find, get = c.fresh_names(2)
    code = c.struct(fields) + "\n\n" + render("""

        fn $find($p: List[$T], wanted: str) to Option[$T] {
            for $v in $p {
                if $v.$s is wanted {
                    return Some($v)
                }
            }
            return None
        }

        fn $get($p: List[$T], wanted: str) to int {
            match $find($p, wanted) {
                Some(found) => found.$x
                None => 0
            }
        }""", find=find, get=get, v=e.var, p=e.plural, T=e.type_name, s=s.name, x=x.name)
    what = f"looks {e.a} up by {s.words} and returns an Option, plus `{get}`, which " \
           f"matches on Some/None to return its {x.words} or 0"
    if c.made_up:
        what = f"looks {e.a} up by {s.words} in a list of {e.plural_words} and returns an Option, plus `{get}`, " \
               f"which matches on Some/None to return its {x.words} or 0"
        return Draft(code, f"{an(e.type_name)} `{e.type_name}` type and a function `{find}`", what, "function", 4)
    return Draft(code, f"a function `{find}`", what, "function", 4)


# ---------------------------------------------------------------- tests and properties

def test_fns(c: Ctx) -> Draft:
    a, b = c.sample(c.e.of("int"), 2)
    name = f"combined_{a.name}"
    k = c.num(2, 9)
    if c.made_up:
        name = c.fresh_names(1)[0]
    code = render("""
        fn $name($a: int, $b: int) to int {
            return $a * $k + $b
        }
        """, name=name, a=a.name, b=b.name, k=k)
    tests, told, used = [], [], [name]
    for _ in range(c.num(2, 3)):
        x, y = c.num(0, 50), c.num(0, 50)
        label = f'("{name} of {x} and {y}")' if c.chance(0.4) else ""
        test = f"test_{name}_{x}_{y}"
        if c.made_up:  # a made-up test name and label, each stated
            test = c.fresh_names(1)[0]
            used.append(test)
            text = c.fresh_text()
            label = f'("{text}")' if label else ""
            told.append(f"`{test}`" + (f' (labelled "{text}")' if label else "") + f" checking {name}({x}, {y})")
        tests.append(f"@test{label}\nfn {test}() {{\n    assert({name}({x}, {y}) is {x * k + y})\n}}\n")
    code += "\n" + "\n".join(tests)
    what = f"computes {a.words} times {k} plus {b.words}, followed by {len(tests)} @test functions " \
           f"that assert concrete results"
    if c.made_up:
        what = f"computes {a.words} times {k} plus {b.words}, followed by @test functions " + listing(told) + \
            c.pick((", each asserting the exact result", " that assert the result it must give"))
    return Draft(code, f"a function `{name}` with unit tests", what, "test", 3)


def forall_prop(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    variant = c.num(0, 2)
    made = c.fresh_names(2) if c.made_up else None  # the function and the property
    if variant == 0:
        fn = made[0] if made else f"double_{x.name}"
        does = f"doubles {an(x.words)} {x.words}"
        code = f"fn {fn}({x.name}: int) to int {{\n    return {x.name} * 2\n}}\n"
        prop, says = f"{fn}(n) % 2 is 0", "its result is always even"
    elif variant == 1:
        fn = made[0] if made else f"abs_{x.name}"
        does = f"returns the absolute value of {an(x.words)} {x.words}"
        code = f"fn {fn}({x.name}: int) to int {{\n    if {x.name} < 0 {{\n        return 0 - {x.name}\n    }}\n    return {x.name}\n}}\n"
        prop, says = f"{fn}(n) >= 0", "its result is never negative"
    else:
        k = c.num(2, 50)
        fn = made[0] if made else f"cap_{x.name}"
        does = f"caps {an(x.words)} {x.words} at {k}"
        code = f"fn {fn}({x.name}: int) to int {{\n    if {x.name} > {k} {{\n        return {k}\n    }}\n    return {x.name}\n}}\n"
        prop, says = f"{fn}(n) <= {k}", f"its result never exceeds {k}"
    prop_fn = made[1] if made else f"prop_{fn}"
    code += f"\n@forall(n: int)\nfn {prop_fn}(n: int) to bool {{\n    return {prop}\n}}\n"
    what = f"is checked by a @forall property test stating that {says}"
    if made:
        what = f"{does}, checked by a @forall property test `{prop_fn}` (over n: int) stating that {says}"
    return Draft(code, f"a function `{fn}`", what, "forall", 4)


# ---------------------------------------------------------------- MCP, AI, scheduled

def mcp_tool(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    s = c.pick([f for f in fields if f.type == "str"])
    deco = c.pick(("@mcp.tool", "@tool"))
    desc = f"Find {e.plural_words} by {s.words}"
    name = f"find_{e.plural}_by_{s.name}"
    if c.made_up:
        name, desc = c.fresh_names(1)[0], c.fresh_text().capitalize()
    code = c.struct(fields, head="@table type") + "\n\n" + render("""

        $deco "$desc"
        fn $name($s: str) uses db to List[$T] {
            return db.$T.filter({ $s: $s })
        }""", deco=deco, desc=desc, name=name, s=s.name, T=e.type_name)
    what = f"is exposed as an MCP tool described as \"{desc}\" and returns the matching rows of {an(e.type_name)} `{e.type_name}` table"
    if c.made_up:
        what = f"is exposed with {deco} as an MCP tool described as \"{desc}\" and returns the rows of " \
               f"{an(e.type_name)} `{e.type_name}` table whose {s.words} equals the one given"
    return Draft(code, f"an MCP tool `{name}`", what, "mcp_tool", 4)


def mcp_resource(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    uri = f"{e.domain}://{e.plural}/all"
    desc = f"Every {e.words} in the {e.domain} database"
    form = c.chance(0.5)
    name = f"all_{e.plural}"
    if c.made_up:
        name, scheme, host, path = c.fresh_names(4)
        uri, desc = f"{scheme.split('_')[0]}://{host}/{path}", c.fresh_text().capitalize()
    deco = f'@mcp.resource("{uri}", "{desc}")' if form else f'@resource "{uri}" "{desc}"'
    code = c.struct(fields, head="@table type") + "\n\n" + render("""

        $deco
        fn $name() uses db to List[$T] {
            return db.$T.all()
        }""", deco=deco, name=name, T=e.type_name)
    what = f"publishes all rows of {an(e.type_name)} `{e.type_name}` table as the MCP resource {uri}"
    if c.made_up:
        how = "@mcp.resource" if form else "@resource"
        what = c.pick(("publishes all rows of {} `{}` table as the MCP resource \"{}\" described as \"{}\" (use {})",
                       "serves every row of {} `{}` table at the resource URI \"{}\" with the description \"{}\", "
                       "declared with {}")).format(an(e.type_name), e.type_name, uri, desc, how)
    return Draft(code, f"an MCP resource `{name}`", what, "mcp_resource", 4)


def ai_function(c: Ctx) -> Draft:
    e = c.e
    s = c.pick(e.of("str"))
    labels = c.sample(("Urgent", "Routine", "Spam", "Positive", "Negative", "Neutral", "Unclear",
                       "High", "Low", "Medium"), c.num(2, 4))
    adt = f"{e.type_name}{c.pick(('Label', 'Class', 'Verdict', 'Tone'))}"
    deco = c.pick(("@ai", "@prompt"))
    instruction = f"Classify the {s.words} of {e.a}"
    arg = f'("{instruction}")' if c.chance(0.7) else ""
    fname = f"classify_{e.var}_{s.name}"
    if c.made_up:  # made-up labels, type, instruction and function names, each stated
        adt, *labels = c.fresh_names(1 + len(labels), True)
        fname, helper = c.fresh_names(2)
        instruction = c.fresh_text().capitalize()
        arg = f'("{instruction}")' if arg else ""
    code = f"type {adt} =\n" + "\n".join(f"    | {lab}" for lab in labels) + "\n\n" + \
        f"{deco}{arg}\nfn {fname}({s.name}: str) to {adt}\n"
    also = ""
    if c.chance(0.5):
        first = labels[0]
        low = helper if c.made_up else first.lower()
        code += "\n" + render("""
            fn is_$low($s: str) to bool {
                match $f($s) {
                    $first => true
                    _ => false
                }
            }""", low=low, s=s.name, f=fname, first=first)
        also = f", plus `is_{low}`, true when it returns `{first}`"
    what = f"is an {deco} function with no body that classifies {e.a}'s {s.words} into " \
           f"a `{adt}` ({', '.join(labels)})"
    if c.made_up:
        told = f' with the instruction "{instruction}"' if arg else ""
        what = f"is an {deco} function with no body{told} that classifies {e.a}'s {s.words} into " \
               f"a `{adt}` with the cases {listing(f'`{lab}`' for lab in labels)}{also}"
    return Draft(code, f"an AI function `{fname}`", what, "ai_function", 4)


def scheduled_job(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    cron, says = c.pick(CRON)
    flag = c.pick(e.of("bool"))
    name = f"sweep_{flag.name}_{e.plural}"
    if c.made_up:
        cron, name = made_up_cron(c), c.fresh_names(1)[0]
        says = c.pick(('on the cron schedule "{}"', 'on cron "{}"', 'with the schedule "{}"')).format(cron)
    code = c.struct(fields + ([flag] if flag not in fields else []), head="@table type") + "\n\n" + render("""

        @scheduled("$cron")
        fn $name() uses db {
            let stale = db.$T.filter({ $f: true })
            for row in stale {
                db.$T.delete(row.id)
            }
        }""", cron=cron, name=name, T=e.type_name, f=flag.name)
    what = f"runs {says} and deletes every {e.words} whose {flag.words} flag is true"
    return Draft(code, f"a scheduled job `{name}`", what, "scheduled", 3)
