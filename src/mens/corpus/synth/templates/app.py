"""Templates for synthetic Vox programs, part 3: the application side — components (state,
derived, effect, mount, view calls, style blocks), fragments, loading views, routes, url maps,
workflows and activities, actors, state machines, forms, mobile blocks, design tokens and @v0.

Same shape as `templates.core`: each template takes a `Ctx` and returns a `Draft`."""

from __future__ import annotations

from mens.corpus.synth.templates.core import Ctx, Draft, render
from mens.corpus.synth.words import UI_LABELS, an


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line if line else line for line in text.strip("\n").split("\n"))


# ---------------------------------------------------------------- components

def component_counter(c: Ctx) -> Draft:
    e = c.e
    x = c.pick(e.of("int"))
    step, factor = c.num(1, 10), c.num(2, 5)
    name = f"{e.type_name}{x.name.title().replace('_', '')}Counter"
    label = c.pick(UI_LABELS)
    gap = c.num(1, 4)
    code = render("""
        component $name(start: int) {
            state $x: int = start
            derived scaled: int = $x * $factor
            view: Column(gap = $gap) {
                Text(value = "$words")
                Text(value = scaled)
                Button(on_click = fn() { $x += $step }) {
                    Text(value = "$label")
                }
            }
        }""", name=name, x=x.name, factor=factor, gap=gap, words=f"{e.words} {x.words}".capitalize(),
                  step=step, label=label)
    what = f"keeps a {x.words} counter in state starting from a prop, derives it times {factor}, and " \
           f"shows a \"{label}\" button that adds {step}"
    return Draft(code, f"a UI component `{name}`", what, "component", 5)


def component_list(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    s = c.pick([f for f in fields if f.type == "str"])
    name = f"{e.type_name}Browser"
    effect = c.pick(("effect: log(query)", "effect depends_on(query): {\n    log(\"search\", query)\n}"))
    code = c.struct(fields) + "\n\n" + render("""
        component $name() {
            state $p: List[$T] = []
            state query: str = ""
            derived visible: List[$T] = $p |> filter(fn(r) contains(r.$s, query))
            on mount: {
                $p = load_$p()
            }
            $effect
            view: Column(gap = 1) {
                Input(value = query, on_input = fn(v) { query = v })
                for r in visible {
                    Text(value = r.$s)
                }
            }
        }""", name=name, p=e.plural, T=e.type_name, s=s.name, effect=_indent(effect, 4).strip())
    what = f"loads {e.plural_words} on mount, keeps a search query in state, derives the {e.plural_words} " \
           f"whose {s.words} contains the query, logs query changes in an effect, and renders an input " \
           f"plus one text line per match"
    return Draft(code, f"a searchable list component `{name}`", what, "component", 6)


def component_styled(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    name = f"{e.type_name}Card"
    pad, radius = c.num(2, 24), c.num(0, 12)
    lines = "\n".join(f"        Text(value = {e.var}.{f.name})" for f in fields if f.type == "str")
    code = c.struct(fields) + "\n\n" + render("""
        component $name($v: $T) {
            view: Card(class_name = "card") {
        $lines
            }
        }
        style {
            .card {
                padding: "${pad}px"
                border_radius: "${radius}px"
            }
        }""", name=name, v=e.var, T=e.type_name, lines=lines, pad=pad, radius=radius)
    what = f"shows the text fields of {e.a} inside a card and styles the card with a style block " \
           f"({pad}px padding, {radius}px corner radius)"
    return Draft(code, f"a styled component `{name}`", what, "component", 4)


def fragment(c: Ctx) -> Draft:
    e = c.e
    s, x = c.pick(e.of("str")), c.pick(e.of("int"))
    name = f"{e.type_name}{c.pick(('Badge', 'Chip', 'Summary', 'Line'))}"
    code = render("""
        fragment $name($s: str, $x: int) {
            Row(gap = $gap) {
                Text(value = $s)
                Text(value = $x)
            }
        }""", name=name, s=s.name, x=x.name, gap=c.num(1, 3))
    what = f"renders {e.a}'s {s.words} and {x.words} side by side in a row"
    return Draft(code, f"a fragment `{name}`", what, "fragment", 3)


def loading_view(c: Ctx) -> Draft:
    e = c.e
    text = c.pick(("Loading", "Fetching", "Please wait for", "Preparing", "Syncing")) + f" {e.plural_words}" + \
        c.pick(("", " now", ", almost there", " for you"))
    code = render("""
        @loading
        fn ${p}_loading() {
            Column(gap = $gap) {
                Text(value = "$text")
            }
        }""", p=e.plural, gap=c.num(1, 4), text=text)
    return Draft(code, f"a @loading view `{e.plural}_loading`",
                 f"shows \"{text}\" while the {e.plural_words} page loads", "loading", 2)


def routes_table(c: Ctx) -> Draft:
    e = c.e
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
        f", a detail page with a loader and a pending view" + (", nested admin routes" if nested else "") + \
        ", and a not-found page"
    return Draft(code, f"a routes table for {an(e.domain)} {e.domain} app", what, "routes", 5)


def url_map(c: Ctx) -> Draft:
    e = c.e
    s = c.pick(e.of("str"))
    entries = [c.pick(("home", "start", "landing")), f"{e.var}_page(id: str)",
               f"{e.plural}_search(? {s.name}: str, ? page: int)"]
    for extra in c.sample((f"new_{e.var}", f"edit_{e.var}(id: str)", "settings", f"{e.plural}_export",
                           f"{e.var}_history(id: str, ? limit: int)"), c.num(0, 3)):
        entries.insert(c.num(1, len(entries)), extra)
    code = f"url {e.type_name}Links {{\n" + "\n".join("    " + x for x in entries) + "\n}\n"
    what = f"declares typed links for {an(e.domain)} {e.domain} app: a home page, {e.a} page by id and a " \
           f"search page with optional {s.words} and page parameters"
    return Draft(code, f"a url map `{e.type_name}Links`", what, "url", 3)


# ---------------------------------------------------------------- durable work and actors

def workflow(c: Ctx) -> Draft:
    e = c.e
    s, x = c.pick(e.of("str")), c.pick(e.of("int"))
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
    code += f"\nworkflow {wf}({s.name}: str, {x.name}: int) to str {{\n{pre}{_indent(body, 4)}\n}}\n"
    what = f"first runs an activity that checks the {x.words}, then an activity that records the " \
           f"{e.words}, and returns \"recorded\" or the rejection reason" + \
        {"": "", "side_effect": "; it also makes a reference inside side_effect",
         "version": "; it also marks a version point with workflow.version"}[extra]
    return Draft(code, f"a durable workflow `{wf}` with two activities", what, "workflow", 6)


def activity_only(c: Ctx) -> Draft:
    e = c.e
    s = c.pick(e.of("str"))
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
    return Draft(code, f"an activity `{name}`", what, "activity", 4)


def actor(c: Ctx) -> Draft:
    e = c.e
    x = c.pick(e.of("int"))
    name = f"{e.type_name}{c.pick(('Tracker', 'Keeper', 'Ledger', 'Tally'))}"
    limit = c.num(10, 1000)
    code = render("""
        actor $name {
            on add(amount: int) to int {
                self.$x += amount
                return self.$x
            }
            on reset() {
                self.$x = 0
            }
            on over_limit() to bool {
                return self.$x > $limit
            }
        }""", name=name, x=x.name, limit=limit)
    what = f"keeps a running {x.words} total and handles three messages: add an amount, reset to zero, " \
           f"and report whether the total is over {limit}"
    return Draft(code, f"an actor `{name}`", what, "actor", 5)


_LIFECYCLES = (("Draft", "Submitted", "Approved", "Archived"), ("Open", "Assigned", "Resolved", "Closed"),
               ("Pending", "Active", "Suspended", "Ended"), ("New", "Packed", "Shipped", "Delivered"),
               ("Idle", "Running", "Finished", "Failed"))


def state_machine(c: Ctx) -> Draft:
    e = c.e
    states = list(c.pick(_LIFECYCLES))
    verbs = ("advance", "promote", "move_on", "proceed", "step")
    name = f"{e.type_name}Lifecycle"
    lines = []
    for i, s in enumerate(states):
        term = "terminal " if i == len(states) - 1 else ""
        arg = f"(at: int)" if i == 1 and c.chance(0.5) else ""
        lines.append(f"    {term}state {s}{arg}")
    for i in range(len(states) - 1):
        lines.append(f"    on {c.pick(verbs)}_{i + 1} from {states[i]} -> {states[i + 1]}")
    lines.append(f"    on cancel from any -> {states[-1]}")
    code = f"state_machine {name} {{\n" + "\n".join(lines) + "\n}\n"
    what = f"moves {e.a} through {', '.join(states)} (the last one terminal) and can be " \
           f"cancelled from any state"
    return Draft(code, f"a state machine `{name}`", what, "state_machine", 4)


# ---------------------------------------------------------------- forms, mobile, tokens, v0

def form(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    lines = []
    for f in fields:
        mods = []
        if f.type == "str":
            mods = ["required", f'label("{f.words.capitalize()}")', f"max_len({c.num(20, 200)})"]
        elif f.type == "int":
            mods = ["optional", f"range({c.num(0, 5)}..{c.num(10, 9999)})"]
        else:
            mods = [f"default({c.pick(('true', 'false'))})"]
        lines.append(f"    field {f.name}: {f.type} " + " ".join(mods[:c.num(1, len(mods))]))
    lines += [f"    on_submit: save_{e.var}", f'    success_redirect: "/{e.plural}"']
    if c.chance(0.5):
        lines.append(f'    error_message: "Could not save the {e.words}"')
    code = f"@form {e.type_name}Form {{\n" + "\n".join(lines) + "\n}\n"
    what = f"collects {', '.join(f.words for f in fields)} with validation modifiers, submits to " \
           f"save_{e.var} and redirects to /{e.plural}"
    return Draft(code, f"a form `{e.type_name}Form`", what, "form", 4)


def mobile(c: Ctx) -> Draft:
    e = c.e
    kind = c.pick(("@back_button", "@deep_link", "@push"))
    # @back_button and @push values are names (identifiers or type names); @deep_link values may
    # also be strings.
    if kind == "@back_button":
        confirm = c.pick(("confirm_leave", "save_draft", "discard_changes", "keep_editing"))
        body, says = f"    target: {e.type_name}{c.pick(('List', 'Home', 'Overview', 'Search'))}\n    confirm: {confirm}_{e.var}", "goes back to the previous screen"
    elif kind == "@deep_link":
        body, says = f"    uri: \"{e.domain}://{e.plural}/{c.num(1, 999)}\"\n    screen: {e.type_name}Detail", "opens the detail screen"
    else:
        topic = c.pick(("updates", "alerts", "reminders", "digest", "changes"))
        body, says = f"    topic: {e.plural}_{topic}_{c.num(1, 999)}\n    handler: on_{e.var}_push", "subscribes to a push topic"
    code = f"{kind} {{\n{body}\n}}\n"
    return Draft(code, f"a mobile {kind} block", f"{says} for {an(e.domain)} {e.domain} app", "mobile", 2)


def tokens(c: Ctx) -> Draft:
    def hexcolor() -> str:
        return "#" + "".join(c.pick("0123456789abcdef") for _ in range(6))
    lines = [f'    color {n} light: "{hexcolor()}" dark: "{hexcolor()}"'
             for n in c.sample(("primary", "accent", "surface", "danger", "muted"), c.num(1, 3))]
    lines.append(f'    spacing {c.pick(("sm", "md", "lg"))}: "{c.num(2, 32)}px"')
    if c.chance(0.6):
        lines.append(f'    radius {c.pick(("card", "pill", "input"))}: "{c.num(0, 16)}px"')
    if c.chance(0.5):
        lines.append(f'    font {c.pick(("body", "heading"))} family: "{c.pick(("Inter", "Source Sans", "Georgia"))}"')
    code = "@tokens {\n" + "\n".join(lines) + "\n}\n"
    return Draft(code, "design tokens", f"defines light and dark colors, spacing and other theme values "
                 f"for {an(c.e.domain)} {c.e.domain} app", "tokens", 2)


def v0_component(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    desc = f"A card that shows {e.a} with its {' and '.join(f.words for f in fields[:2])}"
    head = f'@v0 "{desc}"' if c.chance(0.6) else f'@v0 from "designs/{e.var}-card.png"'
    opt = c.pick(fields)
    props = "\n".join(f"    {f.name}{'?' if f is opt else ''}: {f.type}" for f in fields)
    code = f"{head} {e.type_name}Preview {{\n{props}\n}}\n"
    return Draft(code, f"a @v0 generated component `{e.type_name}Preview`",
                 f"declares its props ({', '.join(f.words for f in fields)}, with {opt.words} optional)",
                 "v0_component", 2)

