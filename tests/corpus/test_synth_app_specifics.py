"""The application templates (templates/app.py, templates/flow.py) about a made-up subject (`Ctx.made_up`): the
specifics they used to take from short lists (route paths, page, handler, state, token and class
names, labels, URIs …) are made up, appear in the code and are said in the prompt, so that the
program is fully determined by the request and a model can only write them by copying; the code
parses. Without `made_up` the templates draw no made-up name (their data is that of before)."""

from __future__ import annotations

import random
import re

import pytest

from mens.corpus.synth.templates import app, flow
from mens.corpus.synth.templates.core import Ctx
from mens.corpus.synth.words import ENTITIES, made_up_entity
from mens.lang import get_pack


@pytest.fixture(scope="module")
def pack():
    return get_pack("vox")


class RecordingCtx(Ctx):
    """A Ctx that remembers every made-up name it hands out."""

    def __init__(self, *args):
        super().__init__(*args)
        self.drawn: list[str] = []

    def name(self, capitalised: bool = False) -> str:
        name = super().name(capitalised)
        self.drawn.append(name)
        return name


# template -> (category the code must hold, the fewest made-up names its code must carry)
TEMPLATES = {
    app.component_counter: ("component", 3),   # label, prop, derived name
    app.component_list: ("component", 2),      # query state, loader
    app.component_styled: ("component", 1),    # style class
    app.fragment: ("fragment", 1),             # fragment name
    app.loading_view: ("loading", 1),          # the text shown
    flow.routes_table: ("routes", 4),           # home, not-found page, a path and its page
    flow.url_map: ("url", 3),                   # the link names
    flow.workflow: ("workflow", 4),             # workflow, two activities, the result
    flow.activity_only: ("activity", 2),        # host, activity name
    flow.actor: ("actor", 5),                   # actor, three handlers, the parameter
    flow.state_machine: ("state_machine", 7),   # machine, three or more states, their events, cancel
    app.form: ("form", 2),                     # submit handler, redirect path
    app.mobile: ("mobile", 2),                 # target/confirm, uri/screen, topic/handler
    app.tokens: ("tokens", 2),                 # a color and a spacing
    app.v0_component: ("v0_component", 0),     # a design file when not from a description
}

# What a program may write without the prompt saying it: keywords, view primitives and their
# arguments, construct keys, builtins and the templates' own locals.
FIXED = set("""
fn let mut while if else return to str int bool float on view derived state component effect mount match
for in type activity workflow routes url not_found with loader pending field on_submit success_redirect
error_message required optional label max_len range default terminal from any state_machine actor self db
insert http get ok side_effect new_reference version log filter contains fragment style padding border_radius
class_name on_click on_input gap color light dark spacing radius font family target confirm uri screen
topic handler id page attempts Text Column Row Button Input Card Ok Error Result List true false
left resp value reason ref v r
""".split())


def _forms(name: str) -> list[str]:
    """How a made-up name can appear in a program: as is, or as words, a label, a host, a font."""
    words = name.replace("_", " ")
    return [name, words.capitalize(), words.title(), words, name.replace("_", "-")]


def _drafts(fn, n: int = 40):
    for seed in range(n):
        rng = random.Random(seed)
        ctx = RecordingCtx(rng, made_up_entity(rng, 0.5), True, 0.5)
        yield ctx, fn(ctx)


def _kinds(analysis) -> set[str]:
    return {c.kind for c in analysis.constructs} | {t for c in analysis.constructs for t in c.tags}


@pytest.mark.parametrize("fn", list(TEMPLATES), ids=lambda fn: fn.__name__)
def test_made_up_specifics_are_in_the_code_and_the_prompt(fn, pack):
    category, fewest = TEMPLATES[fn]
    for ctx, draft in _drafts(fn):
        said = draft.noun + " " + draft.what
        used = 0
        for name in dict.fromkeys(ctx.drawn):
            raw = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", draft.code)
            form = name if raw else next((f for f in _forms(name)[1:] if f in draft.code), None)
            if form is None:
                continue  # drawn and set aside (it clashed with another name)
            used += 1
            assert form in said, (fn.__name__, form, said, draft.code)
        assert used >= fewest, (fn.__name__, used, ctx.drawn, draft.code)
        analysis = pack.analyze(draft.code)
        assert analysis.ok and not analysis.warnings, (fn.__name__, analysis.error, draft.code)
        assert category in _kinds(analysis), (fn.__name__, _kinds(analysis))


@pytest.mark.parametrize("fn", list(TEMPLATES), ids=lambda fn: fn.__name__)
def test_made_up_programs_write_nothing_the_prompt_does_not_say(fn):
    """Every string literal of the code is in the prompt, and every name is in it too, or is one
    of the subject's (the generator spells out a declared type's fields) or a fixed word."""
    for ctx, draft in _drafts(fn, 20):
        said = draft.noun + " " + draft.what
        e = ctx.e
        subject = {e.var, e.plural, e.type_name, *(f.name for f in e.fields)}
        for literal in re.findall(r'"([^"]*)"', draft.code):
            assert literal in said or literal == "", (fn.__name__, literal, said, draft.code)
        code = re.sub(r'"[^"]*"', '""', draft.code)
        for name in set(re.findall(r"[A-Za-z_]\w*", code)) - FIXED - subject:
            assert name in said or name.replace("_", " ") in said or name.lower() in said.lower(), \
                (fn.__name__, name, said, draft.code)


@pytest.mark.parametrize("fn", list(TEMPLATES), ids=lambda fn: fn.__name__)
def test_without_a_made_up_subject_no_name_is_made_up(fn):
    """made_up False: the template draws what it drew before, so it makes up no name."""
    for seed in range(4):
        for entity in ENTITIES[:12]:
            ctx = RecordingCtx(random.Random(seed), entity)
            fn(ctx)
            assert ctx.drawn == []
