"""Templates for synthetic Vox programs, part 2: data types and ADTs, tables, indexes and
endpoints, tests and properties, MCP tools/resources, AI functions, scheduled jobs.

Same shape as `templates.core`: each template takes a `Ctx` and returns a `Draft`."""

from __future__ import annotations

from mens.corpus.synth.templates.core import Ctx, Draft, obj, params, render
from mens.corpus.synth.words import CRON, an


# ---------------------------------------------------------------- data types

def type_struct(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 5)
    pub = "pub " if c.chance(0.3) else ""
    code = c.struct(fields, head=pub + "type") + "\n\n" + render("""

        fn new_$v($params) to $T {
            return $obj
        }""", v=e.var, params=params(fields), T=e.type_name, obj=obj(fields))
    listed = ", ".join(f"{f.words} ({f.type})" for f in fields)
    what = f"has the fields {listed}, plus a constructor function `new_{e.var}` that builds one from its fields"
    return Draft(code, f"a struct type `{e.type_name}`", what, "type", 2)


_VARIANTS = ("Created", "Updated", "Archived", "Restored", "Flagged", "Removed", "Approved",
             "Rejected", "Queued", "Shipped", "Cancelled", "Expired", "Paused", "Resumed")


def type_adt(c: Ctx) -> Draft:
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


def fn_option(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    s = c.pick([f for f in fields if f.type == "str"])
    x = c.pick([f for f in fields if f.type == "int"])
    code = c.struct(fields) + "\n\n" + render("""

        fn find_$v($p: List[$T], wanted: str) to Option[$T] {
            for $v in $p {
                if $v.$s is wanted {
                    return Some($v)
                }
            }
            return None
        }

        fn ${x}_of($p: List[$T], wanted: str) to int {
            match find_$v($p, wanted) {
                Some(found) => found.$x
                None => 0
            }
        }""", v=e.var, p=e.plural, T=e.type_name, s=s.name, x=x.name)
    what = f"looks {e.a} up by {s.words} and returns an Option, plus `{x.name}_of`, which " \
           f"matches on Some/None to return its {x.words} or 0"
    return Draft(code, f"a function `find_{e.var}`", what, "function", 4)


# ---------------------------------------------------------------- tests and properties

def test_fns(c: Ctx) -> Draft:
    a, b = c.sample(c.e.of("int"), 2)
    name = f"combined_{a.name}"
    k = c.num(2, 9)
    code = render("""
        fn $name($a: int, $b: int) to int {
            return $a * $k + $b
        }
        """, name=name, a=a.name, b=b.name, k=k)
    tests = []
    for _ in range(c.num(2, 3)):
        x, y = c.num(0, 50), c.num(0, 50)
        label = f'("{name} of {x} and {y}")' if c.chance(0.4) else ""
        tests.append(f"@test{label}\nfn test_{name}_{x}_{y}() {{\n    assert({name}({x}, {y}) is {x * k + y})\n}}\n")
    code += "\n" + "\n".join(tests)
    what = f"computes {a.words} times {k} plus {b.words}, followed by {len(tests)} @test functions " \
           f"that assert concrete results"
    return Draft(code, f"a function `{name}` with unit tests", what, "test", 3)


def forall_prop(c: Ctx) -> Draft:
    x = c.pick(c.e.of("int"))
    variant = c.num(0, 2)
    if variant == 0:
        fn = f"double_{x.name}"
        code = f"fn {fn}({x.name}: int) to int {{\n    return {x.name} * 2\n}}\n"
        prop, says = f"{fn}(n) % 2 is 0", "its result is always even"
    elif variant == 1:
        fn = f"abs_{x.name}"
        code = f"fn {fn}({x.name}: int) to int {{\n    if {x.name} < 0 {{\n        return 0 - {x.name}\n    }}\n    return {x.name}\n}}\n"
        prop, says = f"{fn}(n) >= 0", "its result is never negative"
    else:
        k = c.num(2, 50)
        fn = f"cap_{x.name}"
        code = f"fn {fn}({x.name}: int) to int {{\n    if {x.name} > {k} {{\n        return {k}\n    }}\n    return {x.name}\n}}\n"
        prop, says = f"{fn}(n) <= {k}", f"its result never exceeds {k}"
    code += f"\n@forall(n: int)\nfn prop_{fn}(n: int) to bool {{\n    return {prop}\n}}\n"
    what = f"is checked by a @forall property test stating that {says}"
    return Draft(code, f"a function `{fn}`", what, "forall", 4)


# ---------------------------------------------------------------- MCP, AI, scheduled

def mcp_tool(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    s = c.pick([f for f in fields if f.type == "str"])
    deco = c.pick(("@mcp.tool", "@tool"))
    desc = f"Find {e.plural_words} by {s.words}"
    code = c.struct(fields, head="@table type") + "\n\n" + render("""

        $deco "$desc"
        fn find_${p}_by_$s($s: str) uses db to List[$T] {
            return db.$T.filter({ $s: $s })
        }""", deco=deco, desc=desc, p=e.plural, s=s.name, T=e.type_name)
    what = f"is exposed as an MCP tool described as \"{desc}\" and returns the matching rows of {an(e.type_name)} `{e.type_name}` table"
    return Draft(code, f"an MCP tool `find_{e.plural}_by_{s.name}`", what, "mcp_tool", 4)


def mcp_resource(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    uri = f"{e.domain}://{e.plural}/all"
    desc = f"Every {e.words} in the {e.domain} database"
    form = c.chance(0.5)
    deco = f'@mcp.resource("{uri}", "{desc}")' if form else f'@resource "{uri}" "{desc}"'
    code = c.struct(fields, head="@table type") + "\n\n" + render("""

        $deco
        fn all_$p() uses db to List[$T] {
            return db.$T.all()
        }""", deco=deco, p=e.plural, T=e.type_name)
    what = f"publishes all rows of {an(e.type_name)} `{e.type_name}` table as the MCP resource {uri}"
    return Draft(code, f"an MCP resource `all_{e.plural}`", what, "mcp_resource", 4)


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
    code = f"type {adt} =\n" + "\n".join(f"    | {lab}" for lab in labels) + "\n\n" + \
        f"{deco}{arg}\nfn {fname}({s.name}: str) to {adt}\n"
    if c.chance(0.5):
        first = labels[0]
        code += "\n" + render("""
            fn is_$low($s: str) to bool {
                match $f($s) {
                    $first => true
                    _ => false
                }
            }""", low=first.lower(), s=s.name, f=fname, first=first)
    what = f"is an {deco} function with no body that classifies {e.a}'s {s.words} into " \
           f"a `{adt}` ({', '.join(labels)})"
    return Draft(code, f"an AI function `{fname}`", what, "ai_function", 4)


def scheduled_job(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    cron, says = c.pick(CRON)
    flag = c.pick(e.of("bool"))
    name = f"sweep_{flag.name}_{e.plural}"
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


# ---------------------------------------------------------------- tables and endpoints

def table_query(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    s = c.pick([f for f in fields if f.type == "str"])
    x = c.pick([f for f in fields if f.type == "int"])
    variant = c.num(0, 2)
    if variant == 0:
        name, ret = f"{e.plural}_by_{s.name}", f"List[{e.type_name}]"
        args, body = f"{s.name}: str", f"return db.{e.type_name}.filter({{ {s.name}: {s.name} }})"
        what = f"returns every {e.words} with a given {s.words}"
    elif variant == 1:
        name, ret = f"count_{e.plural}", "int"
        args, body = "", f"return len(db.{e.type_name}.all())"
        what = f"returns how many {e.plural_words} are stored"
    else:
        k = c.num(1, 500)
        name, ret = f"{e.plural}_over_{x.name}", f"List[{e.type_name}]"
        args = f"minimum: int = {k}"
        body = f"return db.{e.type_name}.all() |> filter(fn(r) r.{x.name} > minimum)"
        what = f"returns the {e.plural_words} whose {x.words} is above a minimum (default {k})"
    code = c.struct(fields, head="@table type") + "\n\n" + render("""

        @endpoint(kind: query)
        fn $name($args) to $ret {
            $body
        }""", name=name, args=args, ret=ret, body=body)
    return Draft(code, f"{an(e.type_name)} `{e.type_name}` table and a query endpoint `{name}`", what, "query", 4)


def table_mutation(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    s = c.pick([f for f in fields if f.type == "str"])
    x = c.pick([f for f in fields if f.type == "int"])
    variant = c.num(0, 2)
    if variant == 0:
        name = f"add_{e.var}"
        body = render("""
            if len($s) is 0 {
                return Error("$sw is required")
            }
            if $x < 0 {
                return Error("$xw cannot be negative")
            }
            db.$T.insert($obj)
            return Ok("saved")""", s=s.name, sw=s.words, x=x.name, xw=x.words, T=e.type_name, obj=obj(fields))
        args = params(fields)
        what = f"validates that {s.words} is not empty and {x.words} is not negative, then inserts a " \
               f"new {e.words} and returns Ok or an Error"
    elif variant == 1:
        name = f"set_{e.var}_{x.name}"
        body = render("""
            db.$T.update(id, { $x: $x })
            return Ok(id)""", T=e.type_name, x=x.name)
        args = f"id: str, {x.name}: int"
        what = f"updates the {x.words} of the {e.words} with a given id"
    else:
        name = f"remove_{e.var}"
        body = render("""
            let found = db.$T.find(id)
            match found {
                Some(row) => db.$T.delete(row.id)
                None => return Error("no such $w")
            }
            return Ok(id)""", T=e.type_name, w=e.words)
        args = "id: str"
        what = f"deletes {e.a} by id, returning an Error when it does not exist"
    body = "\n".join("    " + line for line in body.strip().split("\n"))
    code = c.struct(fields, head="@table type") + \
        f"\n\n@endpoint(kind: mutation)\nfn {name}({args}) to Result[str] {{\n{body}\n}}\n"
    return Draft(code, f"{an(e.type_name)} `{e.type_name}` table and a mutation endpoint `{name}`", what, "mutation", 5)


def table_plain(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 5)
    extra = c.pick(("tags: List[str]", "note: Option[str]", "created_at: int", "owner_id: str", ""))
    sep = "," if c.chance(0.3) else ""
    body = "\n".join(f"    {f.name}: {f.type}{sep}" for f in fields) + (f"\n    {extra}{sep}" if extra else "")
    code = f"@table type {e.type_name} {{\n{body}\n}}\n"
    listed = ", ".join(f.words for f in fields) + (f" and {extra.split(':')[0].replace('_', ' ')}" if extra else "")
    return Draft(code, f"a database table `{e.type_name}`", f"stores {e.plural_words} with {listed}", "table", 2)


def table_index(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(3, 5)
    cols = c.sample(fields, min(len(fields), c.num(1, 2)))
    idx = [f"@index {e.type_name}.by_{'_'.join(f.name for f in cols)} on ({', '.join(f.name for f in cols)})"]
    other = c.pick([f for f in fields if f not in cols] or fields)
    if c.chance(0.5) and other not in cols:
        idx.append(f"@index {e.type_name}.by_{other.name} on ({other.name})")
    code = c.struct(fields, head="@table type") + "\n\n" + "\n".join(idx) + "\n"
    first = ", ".join(f.words for f in cols)
    what = f"declares {an(e.type_name)} `{e.type_name}` table with " + \
        (f"an index on ({first})" if len(idx) == 1 else f"two indexes, on ({first}) and on ({other.words})")
    return Draft(code, f"a database table `{e.type_name}` with indexes", what, "index", 3)


def server_fn(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    code = c.struct(fields, head="@table type") + "\n\n" + render("""

        @endpoint(kind: server)
        fn import_$p(feed: str) uses net, db to int {
            let rows = http.get(feed)
            let mut imported = 0
            for row in rows {
                db.$T.insert(row)
                imported += 1
            }
            return imported
        }""", p=e.plural, T=e.type_name)
    what = f"downloads {e.plural_words} from a feed address with http.get, inserts each into the " \
           f"`{e.type_name}` table and returns how many it imported"
    return Draft(code, f"a server function `import_{e.plural}`", what, "server_fn", 4)
