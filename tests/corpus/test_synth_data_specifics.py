"""Made-up specifics in the data and mixed templates (`Ctx.made_up`, `--made-up-subjects`): a
template about a made-up subject also makes up what it would take from a short list (cron lines,
URIs, descriptions, variant, index, test, constant and function names, messages …), writes it in
the code and states it in the prompt, so the only way to write it is to copy it; with `made_up`
False every template draws and writes exactly what it did before."""

from __future__ import annotations

import hashlib
import random
import re

import pytest

from mens.corpus.synth.english import ENGLISH_WORDS
from mens.corpus.synth.templates import data, mixed, tables
from mens.corpus.synth.templates.core import Ctx
from mens.corpus.synth.words import CRON, ENTITIES, SAMPLE_WORDS, made_up_entity
from mens.lang import get_pack

TEMPLATES = {name: getattr(data, name) for name in (
    "type_struct", "type_adt", "fn_option", "test_fns", "forall_prop", "mcp_tool", "mcp_resource", "ai_function",
    "scheduled_job")} | \
    {name: getattr(tables, name) for name in ("table_query", "table_mutation", "table_plain", "table_index", "server_fn")} | \
    {name: getattr(mixed, name) for name in (
        "app_slice", "fn_match_literal", "fn_result_chain", "fn_loop_break", "component_conditional",
        "actor_client", "fn_extern", "fn_const", "fn_import")}

# What a made-up draft declares or writes that no word list holds: its declared names
# (functions, types, variants, components, actors and their handlers, constants, indexes) and
# its string literals.
_DECLARED = re.compile(r"(?:(?:\bfn|\btype|\bcomponent|\bactor|\bon|\blet(?: mut)?|\|)\s+|@index \w+\.|^    (?=\w+: ))"
                       r"([A-Za-z_]\w*)", re.M)
_LITERAL = re.compile(r'"([^"]*)"')
# Locals and builtins that templates write the same every time (not specifics).
_FIXED = {"x", "n", "a", "b", "next", "value", "total", "stale", "rows", "imported", "found", "counter",
          "draft", "mount", "cleanup", "mut", "view"}


# How the templates build names and strings for real subjects (`new_book`, `BookCounter`,
# "saved" …): a made-up draft must show none of them.
_OLD_PREFIXES = ("new", "find", "all", "sweep", "import", "list", "create", "count", "add", "set", "remove",
                 "parse", "first", "prop", "double", "abs", "cap", "classify", "is", "max", "default", "clamp",
                 "prepare", "combined", "test", "by")
_OLD_TYPE_SUFFIXES = ("Manager", "Counter", "Event", "Change", "Outcome", "Signal", "Action", "Label", "Class",
                      "Verdict", "Tone")
_OLD_WORDS = {"bump", "current", "feed", "minimum", "now_ms", "random_unit", "cpu_count", "saved", "shown",
              "hidden", "Toggle", "Add", "Save", "Create", "unknown", "other", "n/a", "-", "Date.now",
              "Math.random", "os.cpus", "std.math", "helpers"}  # (an English word may be a made-up name)


def _old_style(item: str, entity) -> bool:
    words = (entity.var, entity.plural, *(f.name for f in entity.fields))
    return (item in _OLD_WORDS and item not in ENGLISH_WORDS) \
        or any(item.startswith(f"{p}_{w}") for p in _OLD_PREFIXES for w in words) \
        or any(item.endswith(f"{w}_{s}") for w in words for s in ("of", "total", "or_default")) \
        or any(item == entity.type_name + s for s in _OLD_TYPE_SUFFIXES) \
        or bool(re.fullmatch(rf"{entity.type_name}[A-Z]\w*Toggle", item)) \
        or item.startswith(("Every ", "Find ", "Classify the ", "no such ", "Add ")) \
        or item.endswith((" is required", " cannot be negative")) \
        or entity.domain + "://" in item


@pytest.fixture(scope="module")
def pack():
    return get_pack("vox")


def _made_up(name: str, seed: int):
    rng = random.Random(seed)
    entity = made_up_entity(rng, 0.5)
    return entity, TEMPLATES[name](Ctx(rng, entity, True, 0.5))


def _specifics(code: str, entity) -> set[str]:
    subject = {entity.var, entity.plural, entity.type_name, *(f.name for f in entity.fields)}
    names = set(_DECLARED.findall(code)) - _FIXED - subject
    return names | {lit.strip() for lit in _LITERAL.findall(code)}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_made_up_specifics_are_in_the_code_and_stated_in_the_prompt(name, pack):
    seen = set()
    for seed in range(40):
        entity, draft = _made_up(name, seed)
        analysis = pack.analyze(draft.code)
        assert analysis.ok, (name, seed, analysis.error, draft.code)
        told = draft.noun + " " + draft.what
        specifics = _specifics(draft.code, entity)
        for item in specifics:
            assert item in told, (name, seed, item, told, draft.code)
            assert not _old_style(item, entity), (name, seed, item, draft.code)
        seen |= specifics
    # Made up, not drawn from the lists the templates use for real subjects.
    assert seen and not seen & set(SAMPLE_WORDS) and not seen & {line for line, _ in CRON}, (name, seen)


def test_scheduled_job_states_a_made_up_cron_line(pack):
    lines = set()
    for seed in range(60):
        _, draft = _made_up("scheduled_job", seed)
        cron = re.search(r'@scheduled\("([^"]+)"\)', draft.code).group(1)
        assert len(cron.split()) == 5 and f'"{cron}"' in draft.what, draft.what
        lines.add(cron)
    assert len(lines) > 40 and not lines & {line for line, _ in CRON}


def test_mcp_resource_uri_and_description_are_made_up_and_quoted():
    for seed in range(30):
        entity, draft = _made_up("mcp_resource", seed)
        uri, desc = re.search(r'"(\w+://\w+/\w+)"[, ]+"([^"]+)"', draft.code).groups()
        assert f'"{uri}"' in draft.what and f'"{desc}"' in draft.what
        assert not uri.startswith(entity.domain + "://") and not uri.endswith("/all")
        assert uri == uri.lower()


def test_type_adt_states_each_variant_with_its_payload_and_each_result():
    for seed in range(30):
        _, draft = _made_up("type_adt", seed)
        variants = re.findall(r"^    \| (\w+(?:\([^)]*\))?)$", draft.code, re.M)
        assert 2 <= len(variants) <= 4
        for variant in variants:
            assert f"`{variant}`" in draft.what, (variant, draft.what)
        if " to int {" in draft.code:  # the score mode: each arm's result, in order
            results = re.findall(r"=> (.+)$", draft.code, re.M)
            for result in results:
                said = re.sub(r"len\((\w+)\)", r"the length of \1", result)
                assert said in draft.what, (said, draft.what)


def test_numbers_the_code_checks_are_stated():
    """Test inputs, bump messages and matched codes are in the prompt, not only in the code."""
    for seed in range(20):
        _, draft = _made_up("test_fns", seed)
        for call in re.findall(r"assert\((\w+\(\d+, \d+\))", draft.code):
            assert call in draft.what
        _, draft = _made_up("actor_client", seed)
        for k in re.findall(r"counter\.\w+\((\d+)\)", draft.code):
            assert re.search(rf"\b{k}\b", draft.what)
        _, draft = _made_up("fn_match_literal", seed)
        for k, text in re.findall(r'^        (\d+) => "([^"]+)"$', draft.code, re.M):
            assert f'{k} to "{text}"' in draft.what


def _digest(seeds: int = 40) -> str:
    """Every template over real subjects (made_up False): code, prompt words and the next draw."""
    h = hashlib.sha256()
    for name in TEMPLATES:
        for seed in range(seeds):
            rng = random.Random(seed)
            d = TEMPLATES[name](Ctx(rng, rng.choice(ENTITIES)))
            h.update(f"{d.code}\0{d.noun}\0{d.what}\0{d.category}\0{d.difficulty}\0{rng.random()}\n".encode())
    return h.hexdigest()


def test_real_subjects_draw_and_write_exactly_what_they_did_before():
    """With `made_up` False the templates make the data of before, bit for bit, and consume the
    same random draws (the digest was taken from the templates before made-up specifics; it
    changes only if a template, or the word lists it draws from, change on purpose)."""
    assert _digest() == "6912416f5ff568b40a6389ea8a3c71d92f3f6b09eb1cbece34b3f348675ff7fc"
