"""Templates for synthetic Vox programs, part 3: the application's screens — components (state,
derived, effect, mount, view calls, style blocks), fragments, loading views, forms, mobile
blocks, design tokens and @v0 (routes, url maps, workflows and actors: templates.flow).

Same shape as `templates.core`: each template takes a `Ctx` and returns a `Draft`."""

from __future__ import annotations

from mens.corpus.synth.templates.core import Ctx, Draft, indent, listing, render
from mens.corpus.synth.words import UI_LABELS, an


# With `c.made_up` (a made-up subject) a template also makes up the specifics it would otherwise
# take from a short list (route paths, handler and state names, token names, labels …) and says
# each of them in the prompt, so the program is fully determined by the request and the only
# way to write those specifics is to copy them. Without it, every template draws exactly what it
# drew before (the same data for a seed): every new draw sits behind `if c.made_up`.

# ---------------------------------------------------------------- components

def component_counter(c: Ctx) -> Draft:
    e = c.e
    x = c.pick(e.of("int"))
    step, factor = c.num(1, 10), c.num(2, 5)
    name = f"{e.type_name}{x.name.title().replace('_', '')}Counter"
    if c.made_up:
        label, start, scaled = c.fresh_text().capitalize(), c.fresh(), c.fresh()
    else:
        label, start, scaled = c.pick(UI_LABELS), "start", "scaled"
    gap = c.num(1, 4)
    title = f"{e.words} {x.words}".capitalize()
    code = render("""
        component $name($start: int) {
            state $x: int = $start
            derived $scaled: int = $x * $factor
            view: Column(gap = $gap) {
                Text(value = "$words")
                Text(value = $scaled)
                Button(on_click = fn() { $x += $step }) {
                    Text(value = "$label")
                }
            }
        }""", name=name, x=x.name, factor=factor, gap=gap, words=title,
                  step=step, label=label, start=start, scaled=scaled)
    what = f"keeps a {x.words} counter in state starting from a prop, derives it times {factor}, and " \
           f"shows a \"{label}\" button that adds {step}"
    if c.made_up:
        what = f"keeps `{x.name}` in state (from the prop `{start}`) and derives `{scaled}` = {x.name} * " \
               f"{factor}; a column (gap {gap}) shows \"{title}\", {scaled} and a \"{label}\" button that " \
               f"adds {step} to {x.name}"
    return Draft(code, f"a UI component `{name}`", what, "component", 5)


def component_list(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    s = c.pick([f for f in fields if f.type == "str"])
    name = f"{e.type_name}Browser"
    effect = c.pick(("effect: log(query)", "effect depends_on(query): {\n    log(\"search\", query)\n}"))
    query, load, head = "query", f"load_{e.plural}", c.struct(fields) + "\n\n"
    if c.made_up:  # shorter: no type declaration (the prompt names the field), an effect a third of the time
        query, load, head = c.fresh(), c.fresh(), ""
        effect = f"effect: log({query})" if c.chance(0.3) else ""
    code = head + render("""
        component $name() {
            state $p: List[$T] = []
            state $query: str = ""
            derived visible: List[$T] = $p |> filter(fn(r) contains(r.$s, $query))
            on mount: {
                $p = $load()
            }
            $effect
            view: Column(gap = 1) {
                Input(value = $query, on_input = fn(v) { $query = v })
                for r in visible {
                    Text(value = r.$s)
                }
            }
        }""", name=name, p=e.plural, T=e.type_name, s=s.name, effect=indent(effect, 4).strip(),
                                                query=query, load=load).replace("\n    \n", "\n")
    what = f"loads {e.plural_words} on mount, keeps a search query in state, derives the {e.plural_words} " \
           f"whose {s.words} contains the query, logs query changes in an effect, and renders an input " \
           f"plus one text line per match"
    if c.made_up:
        what = f"keeps `{e.plural}: List[{e.type_name}]` (set by `{load}()` on mount) and a query `{query}`, " \
               f"derives `visible`, those whose {s.name} contains {query}, " + \
            ("logs the query in an effect, " if effect else "") + \
            f"and renders an input for {query} and, for each of visible, a text line of its {s.name}"
    return Draft(code, f"a searchable list component `{name}`", what, "component", 6)


def component_styled(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 3)
    name = f"{e.type_name}Card"
    pad, radius = c.num(2, 24), c.num(0, 12)
    cls = c.fresh() if c.made_up else "card"
    lines = "\n".join(f"        Text(value = {e.var}.{f.name})" for f in fields if f.type == "str")
    code = c.struct(fields) + "\n\n" + render("""
        component $name($v: $T) {
            view: Card(class_name = "$cls") {
        $lines
            }
        }
        style {
            .$cls {
                padding: "${pad}px"
                border_radius: "${radius}px"
            }
        }""", name=name, v=e.var, T=e.type_name, lines=lines, pad=pad, radius=radius, cls=cls)
    what = f"shows the text fields of {e.a} inside a card and styles the card with a style block " \
           f"({pad}px padding, {radius}px corner radius)"
    if c.made_up:
        shown = listing([f.name for f in fields if f.type == "str"])
        what = f"takes `{e.var}: {e.type_name}` and shows its {shown} as text in a Card of class \"{cls}\"; " \
               f"a style block gives .{cls} {pad}px padding and a {radius}px border radius"
    return Draft(code, f"a styled component `{name}`", what, "component", 4)


def fragment(c: Ctx) -> Draft:
    e = c.e
    s, x = c.pick(e.of("str")), c.pick(e.of("int"))
    name = c.fresh(True) if c.made_up else f"{e.type_name}{c.pick(('Badge', 'Chip', 'Summary', 'Line'))}"
    gap = c.num(1, 3)
    code = render("""
        fragment $name($s: str, $x: int) {
            Row(gap = $gap) {
                Text(value = $s)
                Text(value = $x)
            }
        }""", name=name, s=s.name, x=x.name, gap=gap)
    what = f"renders {e.a}'s {s.words} and {x.words} side by side in a row"
    if c.made_up:
        what = c.pick((f"takes `{s.name}: str` and `{x.name}: int` and renders them as two texts in a row "
                       f"with gap {gap}",
                       f"renders its parameters `{s.name}` (a str) and `{x.name}` (an int) side by side in a "
                       f"Row (gap {gap})"))
    return Draft(code, f"a fragment `{name}`", what, "fragment", 3)


def loading_view(c: Ctx) -> Draft:
    e = c.e
    if c.made_up:
        text = c.fresh_text().capitalize() + c.pick(("", "...", f" {e.plural_words}"))
    else:
        text = c.pick(("Loading", "Fetching", "Please wait for", "Preparing", "Syncing")) + f" {e.plural_words}" + \
            c.pick(("", " now", ", almost there", " for you"))
    gap = c.num(1, 4)
    code = render("""
        @loading
        fn ${p}_loading() {
            Column(gap = $gap) {
                Text(value = "$text")
            }
        }""", p=e.plural, gap=gap, text=text)
    what = f"shows \"{text}\" while the {e.plural_words} page loads"
    if c.made_up:
        what = f"shows the text \"{text}\" in a column (gap {gap}) while the {e.plural_words} page loads"
    return Draft(code, f"a @loading view `{e.plural}_loading`", what, "loading", 2)


# ---------------------------------------------------------------- forms, mobile, tokens, v0

def form(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    lines, said = [], []
    for f in fields:
        mods = []
        if f.type == "str":
            mods = ["required", f'label("{f.words.capitalize()}")', f"max_len({c.num(20, 200)})"]
        elif f.type == "int":
            mods = ["optional", f"range({c.num(0, 5)}..{c.num(10, 9999)})"]
        else:
            mods = [f"default({c.pick(('true', 'false'))})"]
        kept = mods[:c.num(1, len(mods))]
        lines.append(f"    field {f.name}: {f.type} " + " ".join(kept))
        said.append(f"`{f.name}: {f.type}` (" + ", ".join(_modifier(m) for m in kept) + ")")
    save, to = (f"save_{e.var}", f"/{e.plural}") if not c.made_up else (c.fresh(), "/" + c.name())
    lines += [f"    on_submit: {save}", f'    success_redirect: "{to}"']
    failed = c.chance(0.5)
    if failed:
        lines.append(f'    error_message: "Could not save the {e.words}"')
    code = f"@form {e.type_name}Form {{\n" + "\n".join(lines) + "\n}\n"
    what = f"collects {', '.join(f.words for f in fields)} with validation modifiers, submits to " \
           f"save_{e.var} and redirects to /{e.plural}"
    if c.made_up:
        what = f"has fields {listing(said)}, submits to `{save}`, redirects to \"{to}\"" + \
            (f" and shows \"Could not save the {e.words}\" on error" if failed else "")
    return Draft(code, f"a form `{e.type_name}Form`", what, "form", 4)


def _modifier(mod: str) -> str:
    """A form field modifier in words: `max_len(80)` -> "at most 80 characters"."""
    head, _, arg = mod.partition("(")
    arg = arg.rstrip(")")
    return {"label": f"label {arg}", "max_len": f"at most {arg} characters", "range": f"range {arg}",
            "default": f"default {arg}"}.get(head, head)


def mobile(c: Ctx) -> Draft:
    e = c.e
    kind = c.pick(("@back_button", "@deep_link", "@push"))
    # @back_button and @push values are names (identifiers or type names); @deep_link values may
    # also be strings.
    if c.made_up:
        return _mobile_made_up(c, kind)
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


def _mobile_made_up(c: Ctx, kind: str) -> Draft:
    e = c.e
    if kind == "@back_button":
        target, confirm = c.fresh(True), c.fresh()
        body = f"    target: {target}\n    confirm: {confirm}"
        says = f"goes back to target `{target}` after confirm `{confirm}`"
    elif kind == "@deep_link":
        uri, screen = f"{c.fresh()}://{c.fresh()}", c.fresh(True)
        body = f"    uri: \"{uri}\"\n    screen: {screen}"
        says = f"opens the screen `{screen}` for the uri \"{uri}\""
    else:
        topic, handler = c.fresh(), c.fresh()
        body = f"    topic: {topic}\n    handler: {handler}"
        says = f"subscribes to the push topic `{topic}` with the handler `{handler}`"
    code = f"{kind} {{\n{body}\n}}\n"
    return Draft(code, f"a mobile {kind} block", f"{says} in {an(e.domain)} {e.domain} app", "mobile", 2)


def tokens(c: Ctx) -> Draft:
    def hexcolor() -> str:
        return "#" + "".join(c.pick("0123456789abcdef") for _ in range(6))
    if c.made_up:
        return _tokens_made_up(c, hexcolor)
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


def _tokens_made_up(c: Ctx, hexcolor) -> Draft:
    """One or two colors, a spacing and maybe a radius or font, of made-up names and values all said."""
    lines, said = [], []
    for _ in range(c.num(1, 2)):
        name, light, dark = c.fresh(), hexcolor(), hexcolor()
        lines.append(f'    color {name} light: "{light}" dark: "{dark}"')
        said.append(f'color `{name}` (light "{light}", dark "{dark}")')
    for kind in ("spacing", "radius"):
        if kind == "spacing" or c.chance(0.5):
            name, px = c.fresh(), f"{c.num(0, 32)}px"
            lines.append(f'    {kind} {name}: "{px}"')
            said.append(f'{kind} `{name}` "{px}"')
    if c.chance(0.4):
        name, family = c.fresh(), c.fresh_text().title()
        lines.append(f'    font {name} family: "{family}"')
        said.append(f'font `{name}` with family "{family}"')
    code = "@tokens {\n" + "\n".join(lines) + "\n}\n"
    return Draft(code, "design tokens", f"defines {listing(said)} for {an(c.e.domain)} {c.e.domain} app",
                 "tokens", 2)


def v0_component(c: Ctx) -> Draft:
    e, fields = c.e, c.fields(2, 4)
    desc = f"A card that shows {e.a} with its {' and '.join(f.words for f in fields[:2])}"
    described = c.chance(0.6)
    design = f"designs/{e.var}-card.png" if not c.made_up else f"designs/{c.name()}.png"
    head = f'@v0 "{desc}"' if described else f'@v0 from "{design}"'
    opt = c.pick(fields)
    props = "\n".join(f"    {f.name}{'?' if f is opt else ''}: {f.type}" for f in fields)
    code = f"{head} {e.type_name}Preview {{\n{props}\n}}\n"
    what = f"declares its props ({', '.join(f.words for f in fields)}, with {opt.words} optional)"
    if c.made_up:
        source = f"the description \"{desc}\"" if described else f"the design \"{design}\""
        what = f"comes from {source} and declares the props " + \
            listing([f"`{f.name}: {f.type}`" for f in fields]) + f", with {opt.name} optional"
    return Draft(code, f"a @v0 generated component `{e.type_name}Preview`", what, "v0_component", 2)

