"""Templates for synthetic Vox programs, part 2b: tables, indexes, query and mutation endpoints,
server functions.

Same shape as `templates.core`: each template takes a `Ctx` and returns a `Draft`; with
`c.made_up` it makes up endpoint names, messages and columns and says each in the prompt."""

from __future__ import annotations

from mens.corpus.synth.templates.core import Ctx, Draft, listing, obj, params, render
from mens.corpus.synth.words import an


# ---------------------------------------------------------------- tables and endpoints

def table_query(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    s = c.pick([f for f in fields if f.type == "str"])
    x = c.pick([f for f in fields if f.type == "int"])
    variant = c.num(0, 2)
    made = c.fresh_names(2) if c.made_up else None  # the endpoint and its parameter
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
        low = made[1] if made else "minimum"
        args = f"{low}: int = {k}"
        body = f"return db.{e.type_name}.all() |> filter(fn(r) r.{x.name} > {low})"
        what = f"returns the {e.plural_words} whose {x.words} is above a minimum (default {k})"
        if made:
            what = f"returns the {e.plural_words} whose {x.words} is above a parameter `{low}` (an int, default {k})"
    if made:
        name = made[0]
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
        empty, negative, saved = f"{s.words} is required", f"{x.words} cannot be negative", "saved"
        if c.made_up:
            empty, negative, saved = fresh_message(c, s.words), fresh_message(c, x.words), c.fresh_text()
        body = render("""
            if len($s) is 0 {
                return Error("$empty")
            }
            if $x < 0 {
                return Error("$negative")
            }
            db.$T.insert($obj)
            return Ok("$saved")""", s=s.name, empty=empty, x=x.name, negative=negative, saved=saved,
                          T=e.type_name, obj=obj(fields))
        args = params(fields)
        what = f"validates that {s.words} is not empty and {x.words} is not negative, then inserts a " \
               f"new {e.words} and returns Ok or an Error"
        if c.made_up:
            what = f"returns Error(\"{empty}\") when {s.words} is empty and Error(\"{negative}\") when " \
                   f"{x.words} is negative, else inserts a new {e.words} and returns Ok(\"{saved}\")"
    elif variant == 1:
        name = f"set_{e.var}_{x.name}"
        body = render("""
            db.$T.update(id, { $x: $x })
            return Ok(id)""", T=e.type_name, x=x.name)
        args = f"id: str, {x.name}: int"
        what = f"updates the {x.words} of the {e.words} with a given id"
        if c.made_up:
            what += " and returns Ok(id)"
    else:
        name = f"remove_{e.var}"
        missing = f"no such {e.words}"
        if c.made_up:
            missing = fresh_message(c, e.words)
        body = render("""
            let found = db.$T.find(id)
            match found {
                Some(row) => db.$T.delete(row.id)
                None => return Error("$missing")
            }
            return Ok(id)""", T=e.type_name, missing=missing)
        args = "id: str"
        what = f"deletes {e.a} by id, returning an Error when it does not exist"
        if c.made_up:
            what = f"deletes {e.a} by id (a str), returning Error(\"{missing}\") when it does not exist and Ok(id) otherwise"
    if c.made_up:
        name = c.fresh_names(1)[0]
    body = "\n".join("    " + line for line in body.strip().split("\n"))
    code = c.struct(fields, head="@table type") + \
        f"\n\n@endpoint(kind: mutation)\nfn {name}({args}) to Result[str] {{\n{body}\n}}\n"
    return Draft(code, f"{an(e.type_name)} `{e.type_name}` table and a mutation endpoint `{name}`", what, "mutation", 5)


def fresh_message(c: Ctx, about: str) -> str:
    """A made-up error message: made-up words, sometimes after the words of what it is about."""
    return c.fresh_text() if c.chance(0.5) else f"{about} {c.fresh_text()}"


def table_plain(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 5)
    extra = c.pick(("tags: List[str]", "note: Option[str]", "created_at: int", "owner_id: str", ""))
    sep = "," if c.chance(0.3) else ""
    if c.made_up and extra:  # a made-up extra column of a type the entity's fields lack
        extra = f"{c.fresh_names(1)[0]}: {c.pick(('List[str]', 'Option[str]', 'Option[int]', 'List[int]', 'int', 'str'))}"
    body = "\n".join(f"    {f.name}: {f.type}{sep}" for f in fields) + (f"\n    {extra}{sep}" if extra else "")
    code = f"@table type {e.type_name} {{\n{body}\n}}\n"
    listed = ", ".join(f.words for f in fields) + (f" and {extra.split(':')[0].replace('_', ' ')}" if extra else "")
    what = f"stores {e.plural_words} with {listed}"
    if c.made_up:
        cols = [f"{f.name} ({f.type})" for f in fields] + ([f"{extra.split(': ')[0]} ({extra.split(': ')[1]})"] if extra else [])
        what = c.pick(("stores {} with {}", "holds {} in the columns {}", "keeps {}, each with {}")).format(
            e.plural_words, listing(cols))
    return Draft(code, f"a database table `{e.type_name}`", what, "table", 2)


def table_index(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(3, 5)
    cols = c.sample(fields, min(len(fields), c.num(1, 2)))
    names = [f"by_{'_'.join(f.name for f in cols)}"]
    idx = [f"@index {e.type_name}.{names[0]} on ({', '.join(f.name for f in cols)})"]
    other = c.pick([f for f in fields if f not in cols] or fields)
    if c.chance(0.5) and other not in cols:
        names.append(f"by_{other.name}")
        idx.append(f"@index {e.type_name}.{names[1]} on ({other.name})")
    if c.made_up:  # made-up index names, stated
        names = c.fresh_names(len(idx))
        idx = [f"@index {e.type_name}.{names[0]} on ({', '.join(f.name for f in cols)})"]
        if len(names) == 2:
            idx.append(f"@index {e.type_name}.{names[1]} on ({other.name})")
    code = c.struct(fields, head="@table type") + "\n\n" + "\n".join(idx) + "\n"
    first = ", ".join(f.words for f in cols)
    what = f"declares {an(e.type_name)} `{e.type_name}` table with " + \
        (f"an index on ({first})" if len(idx) == 1 else f"two indexes, on ({first}) and on ({other.words})")
    if c.made_up:
        on = [f"`{names[0]}` on ({', '.join(f.name for f in cols)})", f"`{names[-1]}` on ({other.name})"][:len(idx)]
        what = f"declares {an(e.type_name)} `{e.type_name}` table with " + \
            (c.pick(("an index {}", "one index, {}")).format(on[0]) if len(idx) == 1
             else f"two indexes, {on[0]} and {on[1]}")
    return Draft(code, f"a database table `{e.type_name}` with indexes", what, "index", 3)


def server_fn(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    name, feed = f"import_{e.plural}", "feed"
    if c.made_up:
        name, feed = c.fresh_names(2)
    code = c.struct(fields, head="@table type") + "\n\n" + render("""

        @endpoint(kind: server)
        fn $name($feed: str) uses net, db to int {
            let rows = http.get($feed)
            let mut imported = 0
            for row in rows {
                db.$T.insert(row)
                imported += 1
            }
            return imported
        }""", name=name, feed=feed, T=e.type_name)
    what = f"downloads {e.plural_words} from a feed address with http.get, inserts each into the " \
           f"`{e.type_name}` table and returns how many it imported"
    if c.made_up:
        what = f"downloads {e.plural_words} with http.get from the address in its str parameter `{feed}`, " \
               f"inserts each into the `{e.type_name}` table and returns how many it imported"
    return Draft(code, f"a server function `{name}`", what, "server_fn", 4)
