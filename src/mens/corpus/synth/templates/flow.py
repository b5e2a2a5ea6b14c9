"""Templates for synthetic Vox programs, part 4: how an application flows — routes, url maps,
durable workflows and activities, actors, state machines.

Same shape as `templates.core`: each template takes a `Ctx` and returns a `Draft`. With
`c.made_up` a template makes up the specifics it would otherwise take from a short list (route
paths, pages, handler, state and activity names) and says each in the prompt (see templates.app)."""

from __future__ import annotations

from mens.corpus.synth.templates.core import Ctx, Draft, indent, listing, render
from mens.corpus.synth.words import an


# ---------------------------------------------------------------- routes and url maps

def routes_table(c: Ctx) -> Draft:
    e = c.e
    if c.made_up:
        return _routes_made_up(c)
    T = e.type_name
    loader = c.chance(0.6)
    nested = c.chance(0.4)
    entries = ['"/" to Home', f'"/{e.plural}" to {T}List' + (f" with loader: load_{e.plural}" if loader else "")]
    page = c.pick(("detail", "show", "info", "item", "view_one"))
    entries.append(f'"/{e.plural}/{page}" to {T}Detail with (loader: load_{e.var}, pending: {T}Spinner)')
    if c.chance(0.5):
        entries.insert(1, f'"/{c.pick(("about", "help", "contact", "faq"))}" to {c.pick(("About", "Help", "Contact", "Faq"))}Page')
    if nested:
        entries.append(f'"/admin" to AdminShell {{\n        "/{e.plural}" to {T}Admin\n    }}')
    entries.append("not_found: NotFound")
    code = render("""
        component Home() {
            view: Text(value = "$title")
        }

        component NotFound() {
            view: Text(value = "$missing")
        }
        """, title=f"{e.domain.title()} {c.pick(('home', 'start', 'overview', 'dashboard'))}",
            missing=c.pick(("Nothing here", "Page not found", "No such page", "Lost?"))) + "\nroutes {\n" + "\n".join("    " + x for x in entries) + "\n}\n"
    what = f"maps / to Home, /{e.plural} to a list page" + (" with a loader" if loader else "") + \
        ", a detail page with a loader and a pending view" + (", nested admin routes" if nested else "") + \
        ", and a not-found page"
    return Draft(code, f"a routes table for {an(e.domain)} {e.domain} app", what, "routes", 5)


def _routes_made_up(c: Ctx) -> Draft:
    """A routes table of made-up paths and pages, two or three routes (the whole table fits a
    training row), each one said in the prompt."""
    home, missing = c.fresh(True), c.fresh(True)
    lines, said = [f'"/" to {home}'], [f'"/" to `{home}`']
    for _ in range(c.num(1, 2)):
        path, page = "/" + c.fresh(), c.fresh(True)
        extra = c.num(0, 3)
        if extra == 1:
            loader = c.fresh()
            lines.append(f'"{path}" to {page} with loader: {loader}')
            said.append(f'"{path}" to `{page}` (loader `{loader}`)')
        elif extra == 2:
            loader, pending = c.fresh(), c.fresh(True)
            lines.append(f'"{path}" to {page} with (loader: {loader}, pending: {pending})')
            said.append(f'"{path}" to `{page}` (loader `{loader}`, pending view `{pending}`)')
        elif extra == 3:
            inner, child = "/" + c.fresh(), c.fresh(True)
            lines.append(f'"{path}" to {page} {{\n        "{inner}" to {child}\n    }}')
            said.append(f'"{path}" to `{page}`, with "{inner}" to `{child}` nested under it')
        else:
            lines.append(f'"{path}" to {page}')
            said.append(f'"{path}" to `{page}`')
    lines.append(f"not_found: {missing}")
    code = "routes {\n" + "\n".join("    " + x for x in lines) + "\n}\n"
    what = c.pick(("routes ", "maps ", "sends ")) + listing(said) + \
        c.pick((f", with `{missing}` as the not-found page", f"; unknown paths go to `{missing}`"))
    return Draft(code, f"a routes table for {an(c.e.domain)} {c.e.domain} app", what, "routes", 5)


def url_map(c: Ctx) -> Draft:
    e = c.e
    s = c.pick(e.of("str"))
    if c.made_up:
        return _url_map_made_up(c, s)
    entries = [c.pick(("home", "start", "landing")), f"{e.var}_page(id: str)",
               f"{e.plural}_search(? {s.name}: str, ? page: int)"]
    for extra in c.sample((f"new_{e.var}", f"edit_{e.var}(id: str)", "settings", f"{e.plural}_export",
                           f"{e.var}_history(id: str, ? limit: int)"), c.num(0, 3)):
        entries.insert(c.num(1, len(entries)), extra)
    code = f"url {e.type_name}Links {{\n" + "\n".join("    " + x for x in entries) + "\n}\n"
    what = f"declares typed links for {an(e.domain)} {e.domain} app: a home page, {e.a} page by id and a " \
           f"search page with optional {s.words} and page parameters"
    return Draft(code, f"a url map `{e.type_name}Links`", what, "url", 3)


def _url_map_made_up(c: Ctx, s) -> Draft:
    e = c.e
    home, one, search = c.fresh(), c.fresh(), c.fresh()
    entries = [(home, f"`{home}`"), (f"{one}(id: str)", f"`{one}(id: str)`"),
               (f"{search}(? {s.name}: str, ? page: int)",
                f"`{search}` with optional `{s.name}: str` and `page: int` parameters")]
    if c.chance(0.4):
        extra = c.fresh()
        entries.insert(c.num(1, len(entries)), (f"{extra}(id: str)", f"`{extra}(id: str)`"))
    code = f"url {e.type_name}Links {{\n" + "\n".join("    " + x for x, _ in entries) + "\n}\n"
    what = c.pick(("declares the typed links ", "lists the links ")) + listing([w for _, w in entries])
    return Draft(code, f"a url map `{e.type_name}Links`", what, "url", 3)


# ---------------------------------------------------------------- durable work and actors

def workflow(c: Ctx) -> Draft:
    e = c.e
    s, x = c.pick(e.of("str")), c.pick(e.of("int"))
    if c.made_up:
        return _workflow_made_up(c, s, x)
    wf = f"process_{e.var}"
    extra = c.pick(("", "side_effect", "version"))
    # workflow.version takes a change id (a string literal) and the oldest and newest supported
    # versions (non-negative integer literals).
    oldest = c.num(0, 2)
    pre = {"": "",
           "side_effect": "    let ref = side_effect { new_reference() }\n",
           "version": f"    let v = workflow.version(\"{wf}-limits\", {oldest}, {oldest + c.num(1, 3)})\n"}[extra]
    code = render("""
        activity check_$v($s: str, $x: int) to Result[int] {
            if $x < 0 {
                return Error("negative $xw")
            }
            return Ok($x)
        }

        activity record_$v($s: str, $x: int) to str {
            db.$T.insert({ $s: $s, $x: $x })
            return $s
        }

        """, v=e.var, s=s.name, x=x.name, xw=x.words, T=e.type_name)
    body = render("""
        let checked = check_$v($s, $x)
        match checked {
            Ok(value) => record_$v($s, value)
            Error(reason) => return "rejected: " + reason
        }
        return "recorded"
        """, v=e.var, s=s.name, x=x.name)
    code += f"\nworkflow {wf}({s.name}: str, {x.name}: int) to str {{\n{pre}{indent(body, 4)}\n}}\n"
    what = f"first runs an activity that checks the {x.words}, then an activity that records the " \
           f"{e.words}, and returns \"recorded\" or the rejection reason" + \
        {"": "", "side_effect": "; it also makes a reference inside side_effect",
         "version": "; it also marks a version point with workflow.version"}[extra]
    return Draft(code, f"a durable workflow `{wf}` with two activities", what, "workflow", 6)


def _workflow_made_up(c: Ctx, s, x) -> Draft:
    """`workflow` with made-up workflow, activity and result names, each said in the prompt."""
    e = c.e
    wf, check, record, done = c.fresh(), c.fresh(), c.fresh(), c.fresh_text()
    extra = c.pick(("", "", "", "", "side_effect", "version"))
    oldest = c.num(0, 2)
    newest = oldest + c.num(1, 3)
    pre = {"": "",
           "side_effect": "    let ref = side_effect { new_reference() }\n",
           "version": f"    let v = workflow.version(\"{wf}-limits\", {oldest}, {newest})\n"}[extra]
    code = render("""
        activity $check($x: int) to Result[int] {
            if $x < 0 {
                return Error("negative $xw")
            }
            return Ok($x)
        }

        activity $record($s: str, $x: int) to str {
            db.$T.insert({ $s: $s, $x: $x })
            return $s
        }

        """, check=check, record=record, s=s.name, x=x.name, xw=x.words, T=e.type_name)
    body = render("""
        match $check($x) {
            Ok(value) => $record($s, value)
            Error(reason) => return "rejected: " + reason
        }
        return "$done"
        """, check=check, record=record, s=s.name, x=x.name, done=done)
    code += f"\nworkflow {wf}({s.name}: str, {x.name}: int) to str {{\n{pre}{indent(body, 4)}\n}}\n"
    what = f"runs the activity `{check}({x.name}: int) to Result[int]` (Error \"negative {x.words}\" if " \
           f"{x.name} < 0, else Ok); on Ok, `{record}({s.name}: str, {x.name}: int) to str` inserts both into " \
           f"db.{e.type_name} and returns {s.name}; it returns \"{done}\", or \"rejected: \" + the reason" + \
        {"": "", "side_effect": "; first it gets a ref from new_reference() inside side_effect",
         "version": f"; first it marks version \"{wf}-limits\" ({oldest} to {newest}) with workflow.version"}[extra]
    return Draft(code, f"a durable workflow `{wf}({s.name}: str, {x.name}: int) to str`", what, "workflow", 6)


def activity_only(c: Ctx) -> Draft:
    e = c.e
    s = c.pick(e.of("str"))
    if c.made_up:
        host = c.fresh().replace("_", "-") + c.pick((".com", ".org", ".net", ".io", ".internal"))
        tries = c.num(1, 9)
        name = c.fresh()
    else:
        host = c.pick(("api.example.com", "records.internal", "data.example.org", "svc.local"))
        tries = c.num(1, 9)
        name = f"{c.pick(('fetch', 'pull', 'load', 'read'))}_{e.var}_{s.name}"
    code = render("""
        activity $name(id: str, attempts: int = $tries) to str {
            let mut left = attempts
            while left > 0 {
                let resp = http.get("https://$host/$p/" + id)
                if resp.ok {
                    return resp.$s
                }
                left -= 1
            }
            return ""
        }""", name=name, p=e.plural, s=s.name, host=host, tries=tries)
    what = f"fetches {e.a} by id from {host} over HTTP, retrying up to {tries} times by default, and " \
           f"returns its {s.words} (an empty string if every try failed)"
    if c.made_up:
        what = f"GETs \"https://{host}/{e.plural}/\" + id, up to `attempts` (default {tries}) tries, and " \
               f"returns the response's {s.name} once one is ok (\"\" if none was)"
    return Draft(code, f"an activity `{name}`", what, "activity", 4)


def actor(c: Ctx) -> Draft:
    e = c.e
    x = c.pick(e.of("int"))
    if c.made_up:
        name, add, amount, reset, over = c.fresh(True), c.fresh(), c.fresh(), c.fresh(), c.fresh()
    else:
        name = f"{e.type_name}{c.pick(('Tracker', 'Keeper', 'Ledger', 'Tally'))}"
        add, amount, reset, over = "add", "amount", "reset", "over_limit"
    limit = c.num(10, 1000)
    code = render("""
        actor $name {
            on $add($amount: int) to int {
                self.$x += $amount
                return self.$x
            }
            on $reset() {
                self.$x = 0
            }
            on $over() to bool {
                return self.$x > $limit
            }
        }""", name=name, x=x.name, limit=limit, add=add, amount=amount, reset=reset, over=over)
    what = f"keeps a running {x.words} total and handles three messages: add an amount, reset to zero, " \
           f"and report whether the total is over {limit}"
    if c.made_up:
        what = c.pick(("keeps a running total in self.{x} and has handlers ", "keeps self.{x} and answers "))
        what = what.format(x=x.name) + \
            f"`{add}({amount}: int) to int` (adds {amount}, returns the total), `{reset}()` (sets it to 0) " \
            f"and `{over}() to bool` (whether it is over {limit})"
    return Draft(code, f"an actor `{name}`", what, "actor", 5)


_LIFECYCLES = (("Draft", "Submitted", "Approved", "Archived"), ("Open", "Assigned", "Resolved", "Closed"),
               ("Pending", "Active", "Suspended", "Ended"), ("New", "Packed", "Shipped", "Delivered"),
               ("Idle", "Running", "Finished", "Failed"))


def state_machine(c: Ctx) -> Draft:
    e = c.e
    if c.made_up:
        return _state_machine_made_up(c)
    states = list(c.pick(_LIFECYCLES))
    verbs = ("advance", "promote", "move_on", "proceed", "step")
    name = f"{e.type_name}Lifecycle"
    lines = []
    for i, s in enumerate(states):
        term = "terminal " if i == len(states) - 1 else ""
        arg = "(at: int)" if i == 1 and c.chance(0.5) else ""
        lines.append(f"    {term}state {s}{arg}")
    for i in range(len(states) - 1):
        lines.append(f"    on {c.pick(verbs)}_{i + 1} from {states[i]} -> {states[i + 1]}")
    lines.append(f"    on cancel from any -> {states[-1]}")
    code = f"state_machine {name} {{\n" + "\n".join(lines) + "\n}\n"
    what = f"moves {e.a} through {', '.join(states)} (the last one terminal) and can be " \
           f"cancelled from any state"
    return Draft(code, f"a state machine `{name}`", what, "state_machine", 4)


def _state_machine_made_up(c: Ctx) -> Draft:
    """A state machine of three or four made-up states and made-up events, all said in the prompt."""
    e = c.e
    name = c.fresh(True)
    states = [c.fresh(True) for _ in range(c.pick((3, 3, 3, 4)))]
    events = [c.fresh() for _ in states[1:]]
    cancel, at = c.fresh(), (c.fresh() if c.chance(0.25) else "")
    lines = [f"    {'terminal ' if i == len(states) - 1 else ''}state {s}" + (f"({at}: int)" if i == 1 and at else "")
             for i, s in enumerate(states)]
    lines += [f"    on {ev} from {states[i]} -> {states[i + 1]}" for i, ev in enumerate(events)]
    lines.append(f"    on {cancel} from any -> {states[-1]}")
    code = f"state_machine {name} {{\n" + "\n".join(lines) + "\n}\n"
    listed = listing([f"`{s}`" for s in states])
    carries = f" (`{states[1]}` carries `{at}: int`)" if at else ""
    moves = listing([f"`{ev}`" for ev in events])
    what = c.pick((f"moves {e.a} through the states {listed}{carries} in order, the last one terminal, with "
                   f"one event per step ({moves}), and `{cancel}` from any state to the last",
                   f"has states {listed}{carries} ({states[-1]} is terminal); the events {moves} each move "
                   f"it one state on, and `{cancel}` goes from any state to {states[-1]}"))
    return Draft(code, f"a state machine `{name}`", what, "state_machine", 4)
