"""Synthetic Vox (or Python) programs with natural-language prompts (`mens generate-data` writes
them: synth/stage.py).

    generate(limit, seed, *, stats=None, pack=None, lang="vox") -> Iterator[Pair]  # parse-checked, deduped
    write_vox_tree(out_dir, n_files, seed) -> int                       # .vox files for bench/corpus_speed
    drafts(seed) -> Iterator[(template, Draft, prompt, domain)]        # unchecked, for the oracle script

Programs are composed from templates (`templates/*.py`) over word lists of domains, entities
and typed fields (`words.py`). Every draft is parsed with the Vox language pack and dropped (and
counted) when it does not parse; duplicates are dropped by the pack's structural hash. Output is
deterministic for a seed: one `random.Random(seed)` drives every choice, and templates are
visited in seeded shuffled rounds so every construct kind is covered evenly whatever the limit.
`lang="python"` makes Python programs the same way from templates/python.py (LANGS).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterator

from mens.corpus.synth.templates import app, core, data, flow, mixed, python, tables
from mens.corpus.synth.templates.core import Ctx, Draft
from mens.corpus.synth.words import (CONTEXTS, ENTITIES, MADE_UP_SHARE, PHRASINGS, RENAME_ASKS, RESERVED,
                                     made_up_entity, made_up_name)
from mens.errors import MensError
from mens.lang import LanguagePack, get_pack
from mens.files import atomic_path
from mens.records import Pair

Template = Callable[[Ctx], Draft]

# name -> template. The name becomes `source: "synthetic:<name>"`. To add a construct, write a
# template in one of the templates/ modules and list it here (see docs/synthetic-data.md).
TEMPLATES: dict[str, Template] = {
    "fn_arith": core.fn_arith,
    "fn_guard": core.fn_guard,
    "fn_string": core.fn_string,
    "fn_list_loop": core.fn_list_loop,
    "fn_while": core.fn_while,
    "fn_pipeline": core.fn_pipeline,
    "fn_generic": core.fn_generic,
    "fn_contracts": core.fn_contracts,
    "fn_extern": mixed.fn_extern,
    "const": mixed.fn_const,
    "import": mixed.fn_import,
    "type_struct": data.type_struct,
    "type_adt": data.type_adt,
    "fn_option": data.fn_option,
    "test": data.test_fns,
    "forall": data.forall_prop,
    "mcp_tool": data.mcp_tool,
    "mcp_resource": data.mcp_resource,
    "ai_function": data.ai_function,
    "scheduled": data.scheduled_job,
    "table_query": tables.table_query,
    "table_mutation": tables.table_mutation,
    "table": tables.table_plain,
    "table_index": tables.table_index,
    "server_fn": tables.server_fn,
    "component_counter": app.component_counter,
    "component_list": app.component_list,
    "component_styled": app.component_styled,
    "fragment": app.fragment,
    "loading": app.loading_view,
    "routes": flow.routes_table,
    "url": flow.url_map,
    "workflow": flow.workflow,
    "activity": flow.activity_only,
    "actor": flow.actor,
    "state_machine": flow.state_machine,
    "form": app.form,
    "mobile": app.mobile,
    "tokens": app.tokens,
    "v0_component": app.v0_component,
    "app_slice": mixed.app_slice,
    "fn_match_literal": mixed.fn_match_literal,
    "fn_result_chain": mixed.fn_result_chain,
    "fn_loop_break": mixed.fn_loop_break,
    "component_conditional": mixed.component_conditional,
    "actor_client": mixed.actor_client,
}


@dataclass
class SynthStats:
    """What a generate() run did: drafts tried, kept, and why the others were dropped."""

    drafts: int = 0
    kept: int = 0
    parse_failures: int = 0
    duplicates: int = 0
    exhausted: bool = False  # stopped early: the templates could not produce `limit` distinct programs
    by_category: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)  # first few "template: parser message"

    def to_dict(self) -> dict:
        return {"drafts": self.drafts, "kept": self.kept, "parse_failures": self.parse_failures,
                "duplicates": self.duplicates, "exhausted": self.exhausted,
                "by_category": dict(sorted(self.by_category.items())), "failures": self.failures}


# `fn name(params) [uses effects] to Type {` at the start of a line: a signature a prompt can quote.
_SIGNATURE = re.compile(r"^(?:pub )?fn (\w+)(\([^)\n]*\)(?: uses [\w, ]+)? to [^{\n]+?) \{", re.M)


def with_signature(prompt: str, code: str, signature: re.Pattern = _SIGNATURE) -> str:
    """The prompt with its first quoted function name (`` `name` ``) given its signature from the
    code (`` `name(x: int) to int` ``), as a user who knows the interface writes it; unchanged
    when the code declares no such function."""
    for m in signature.finditer(code):
        quoted = f"`{m.group(1)}`"
        if quoted in prompt:
            return prompt.replace(quoted, f"`{m.group(1)}{m.group(2)}`", 1)
    return prompt


_QUOTED_NAME = re.compile(r"`([A-Za-z_]\w*)")


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"  # what re's \w matches in a str pattern


class _WholeWord:
    r"""An identifier `name` as a whole word: not inside a longer one, nor a decorator or member
    (`@x`, `.x`) — except a table named after `db.` (`db.Ledger.insert`), which is the table's
    name. The regex `(?:(?<![\w@.])|(?<=\bdb\.))NAME(?!\w)` by hand (tests/corpus/test_synth.py
    checks them equal), because compiling one for every made-up name was half of generate-data's
    time (re caches 512 patterns; 20,000 pairs: 13.7 -> ~7 s)."""

    def __init__(self, name: str):
        self.name = name

    def _at(self, text: str, i: int) -> bool:
        end = i + len(self.name)
        if end < len(text) and _is_word_char(text[end]):
            return False
        if i == 0 or not (_is_word_char(text[i - 1]) or text[i - 1] in "@."):
            return True
        return i >= 3 and text.startswith("db.", i - 3) and (i == 3 or not _is_word_char(text[i - 4]))

    def _starts(self, text: str) -> Iterator[int]:
        i = text.find(self.name)
        while i >= 0:
            if self._at(text, i):
                yield i
                i = text.find(self.name, i + len(self.name))
            else:
                i = text.find(self.name, i + 1)

    def search(self, text: str) -> bool:
        return next(self._starts(text), None) is not None

    def sub(self, new: str, text: str) -> str:
        out, last = [], 0
        for i in self._starts(text):
            out += [text[last:i], new]
            last = i + len(self.name)
        return "".join(out) + text[last:]


def _has_word(word: str, text: str) -> bool:
    """re.search(rf"\b{word}\b", text) for an identifier `word`, without compiling a pattern
    for every new made-up name."""
    start = text.find(word)
    while start >= 0:
        end = start + len(word)
        if (start == 0 or not _is_word_char(text[start - 1])) and (end == len(text) or not _is_word_char(text[end])):
            return True
        start = text.find(word, start + 1)
    return False


def with_made_up_names(prompt: str, code: str, rng: random.Random, english: float = 0.0,
                       reserved: frozenset[str] = RESERVED) -> tuple[str, str]:
    """The prompt and code with each name the prompt quotes (`` `name…` ``) that the code uses
    replaced, everywhere as a whole word, by a made-up one (`velmo_rask`, `VelmoRask` for a type).
    Why: the templates' names come from a few hundred domain words, so a model can guess them
    without reading the prompt and never learns to copy the name it is asked for; a made-up name
    can only be copied. Names inside longer ones (`test_total_pages_1`) keep their old words."""
    for old in dict.fromkeys(_QUOTED_NAME.findall(prompt)):
        word = _WholeWord(old)
        if old in reserved or not word.search(code):
            continue
        new = made_up_name(rng, old[0].isupper(), english)
        if old.isupper():  # a constant (`MAX_PAGES`): `VelmoRask` -> `VELMO_RASK`
            new = re.sub(r"(?<!^)(?=[A-Z])", "_", new).upper()
        if new in reserved or _has_word(new, code + prompt):
            continue
        prompt, code = word.sub(new, prompt), word.sub(new, code)
    return prompt, code


# A struct or table the code declares, with its `name: type` lines.
_STRUCT = re.compile(r"^(@table )?(?:pub )?type ([A-Z]\w*) \{\n((?:    \w+: [^\n]+\n)+)\}", re.M)


def vox_structs(code: str) -> Iterator[tuple[str, str, list[str]]]:
    """(kind, name, `field: type` lines) of each struct or table `code` declares."""
    for m in _STRUCT.finditer(code):
        table, name, body = m.groups()
        yield "table" if table else "type", name, [line.strip().rstrip(",") for line in body.splitlines()]

FIELD_NOTES = (
    "The `{name}` {kind} has {fields}.",
    "Fields of `{name}`: {fields}.",
    "`{name}` holds {fields}.",
    "Its `{name}` {kind} is {fields}.",
    "Use a `{name}` {kind} with {fields}.",
)


def with_fields(prompt: str, code: str, rng: random.Random, structs=vox_structs) -> str:
    """The prompt with the fields of each struct or table the code declares spelled out —
    `` `Ledger` (mowu: str, weck: int) `` where it quotes the type, else a sentence after it
    (FIELD_NOTES) — unless the prompt names them all already. Why: a made-up subject's fields
    (words.made_up_entity) cannot be guessed, and users who want a table say what is in it."""
    for kind, name, fields in structs(code):
        named = (re.search(rf"\b{re.escape(n)}\b", prompt) or re.search(rf"\b{re.escape(n.replace('_', ' '))}\b", prompt)
                 for n in (f.split(":")[0] for f in fields))
        if all(named):
            continue
        listed = ", ".join(fields)
        quoted = f"`{name}`"
        if quoted in prompt and f"{quoted} (" not in prompt and rng.random() < 0.5:
            prompt = prompt.replace(quoted, f"{quoted} ({listed})", 1)
        else:
            note = rng.choice(FIELD_NOTES).format(name=name, kind=kind, fields=listed)
            prompt = f"{prompt} {note}"
    return prompt


# A declaration's name: what a rename edit may change.
_DECLARED = re.compile(r"(?:\bfn|\btype|\bcomponent|\bactor|\bworkflow|\bactivity)\s+([A-Za-z_]\w*)")
EDIT_SHARE = 0.4        # of the drafts short enough (most), turned into rename edits: ~a quarter of all pairs
EDIT_MAX_CHARS = 330    # the code appears twice (prompt and answer); both fit a 256-token row


@dataclass(frozen=True)
class SynthLang:
    """What drafting needs of a language beside its templates: the pack (and fence tag) that
    checks its programs, the phrasings that ask for it, the names a made-up one must not be, and
    the patterns of a signature a prompt can quote, a declaration a rename may change and a
    struct whose fields a made-up subject's prompt spells out."""

    name: str
    templates: dict[str, Template]
    phrasings: tuple[str, ...]
    rename_asks: tuple[str, ...]
    reserved: frozenset[str]
    signature: re.Pattern
    declared: re.Pattern
    structs: Callable[[str], Iterator[tuple[str, str, list[str]]]]


VOX = SynthLang("vox", TEMPLATES, PHRASINGS, RENAME_ASKS, RESERVED, _SIGNATURE, _DECLARED, vox_structs)
# The languages with templates: `mens generate-data --lang`.
LANGS = {"vox": VOX, "python": SynthLang("python", python.PY_TEMPLATES, python.PY_PHRASINGS, python.PY_RENAME_ASKS,
                                          python.PY_RESERVED, python.PY_SIGNATURE, python.PY_DECLARED,
                                          python.py_structs)}


def synth_lang(name: str) -> SynthLang:
    if name not in LANGS:
        raise MensError(f"no templates for --lang {name!r}", "generate-data", f"pass one of {', '.join(LANGS)}")
    return LANGS[name]


def as_rename_edit(code: str, rng: random.Random, english: float = 0.0,
                   lang: SynthLang = VOX) -> tuple[str, str] | None:
    """A rename request over `code` and the renamed code: one declared name (a function, type,
    component …) becomes a made-up one (or its words reordered), everywhere as a whole word.
    Why: answering it means copying the program and the new name from the prompt, the skill a
    small model lacks when it invents the name it was asked for (measured in docs/performance.md
    "Quickstart quality"); it is also a request users make. None when the code declares no name."""
    names = [n for n in dict.fromkeys(lang.declared.findall(code)) if n not in lang.reserved]
    if not names:
        return None
    old = rng.choice(names)
    new = made_up_name(rng, old[0].isupper(), english)
    shuffled = old.split("_")
    rng.shuffle(shuffled)
    if rng.random() < 0.3 and not old[0].isupper() and "_".join(shuffled) != old and not shuffled[0][:1].isdigit():
        new = "_".join(shuffled)
    if new in lang.reserved or _has_word(new, code):
        return None
    ask = rng.choice(lang.rename_asks).format(old=old, new=new)
    shown = f"```{lang.name}\n{code}```"
    prompt = f"{ask}\n{shown}" if rng.random() < 0.5 else f"{shown}\n{ask}"
    return prompt, _WholeWord(old).sub(new, code)


def drafts(seed: int, edit_share: float = EDIT_SHARE, english_names: float = 0.0,
           made_up_names: float = MADE_UP_SHARE,
           made_up_subjects: float = 0.0, lang: SynthLang = VOX) -> Iterator[tuple[str, Draft, str, str]]:
    """An endless seeded stream of (template name, draft, prompt, domain), unchecked. Four in
    five prompts that name a function quote its whole signature, a share (`made_up_names`, half
    by default) have their quoted names made up (with_made_up_names), and about a third open with the situation (CONTEXTS): a small
    model learns to read the request, not one phrasing. A share (`edit_share`) of the short
    programs become rename edits instead (as_rename_edit; template name `<template>:rename`).
    `english_names`: the share of made-up names built from English words (words.made_up_name).
    `made_up_subjects`: the share of programs about a made-up subject (words.made_up_entity)
    whose prompt spells out its fields (with_fields) and the template's specifics (Ctx.made_up).
    `lang`: the language's templates and phrasings (LANGS)."""
    rng = random.Random(seed)
    names = list(lang.templates)
    while True:
        rng.shuffle(names)
        for name in names:
            made_up = bool(made_up_subjects) and rng.random() < made_up_subjects  # no draw at 0: same data
            entity = made_up_entity(rng, english_names) if made_up else rng.choice(ENTITIES)
            draft = lang.templates[name](Ctx(rng, entity, made_up, english_names))
            lang_noun = f"a {lang.name.capitalize()} {draft.noun.partition(' ')[2]}"  # "a Python function `x`"
            prompt = rng.choice(lang.phrasings).format(noun=draft.noun, what=draft.what, lang_noun=lang_noun)
            if rng.random() < 0.8:
                prompt = with_signature(prompt, draft.code, lang.signature)
            if made_up:
                prompt = with_fields(prompt, draft.code, rng, lang.structs)
            if rng.random() < made_up_names:
                prompt, code = with_made_up_names(prompt, draft.code, rng, english_names, lang.reserved)
                draft = replace(draft, code=code)
            prompt = prompt[0].upper() + prompt[1:]
            if rng.random() < 0.35:
                field = rng.choice(entity.of("str", "int")).words
                context = rng.choice(CONTEXTS).format(domain=entity.domain, Domain=entity.domain.capitalize(),
                                                      plural=entity.plural_words, thing=entity.a, field=field)
                prompt = f"{context} {prompt}"
            if edit_share and len(draft.code) <= EDIT_MAX_CHARS and rng.random() < edit_share:
                edit = as_rename_edit(draft.code, rng, english_names, lang)
                if edit is not None:
                    prompt, code = edit
                    yield name + ":rename", replace(draft, code=code), prompt, entity.domain
                    continue
            yield name, draft, prompt, entity.domain


def generate(limit: int, seed: int, *, stats: SynthStats | None = None, pack: LanguagePack | None = None,
             edit_share: float = EDIT_SHARE, english_names: float = 0.0,
             made_up_names: float = MADE_UP_SHARE, made_up_subjects: float = 0.0,
             lang: str = "vox") -> Iterator[Pair]:
    """Yield up to `limit` distinct synthetic pairs of `lang` (LANGS: Vox by default) that parse,
    deterministically for `seed`. Pass a `SynthStats` to learn what was dropped and why."""
    if limit < 0:
        raise MensError(f"--limit must be 0 or more, got {limit}", "generate-data", "pass a count")
    spec = synth_lang(lang)
    stats = stats if stats is not None else SynthStats()
    pack = pack or get_pack(spec.name)
    seen: set[str] = set()
    # Give up when most recent drafts are duplicates: the templates' space is used up.
    max_drafts = limit * 20 + 100
    for name, draft, prompt, domain in drafts(seed, edit_share, english_names, made_up_names, made_up_subjects, spec):
        if stats.kept >= limit:
            return
        if stats.drafts >= max_drafts:
            stats.exhausted = True
            return
        stats.drafts += 1
        analysis = pack.analyze(draft.code)
        if not analysis.ok:
            stats.parse_failures += 1
            if len(stats.failures) < 20:
                stats.failures.append(f"{name}: {analysis.error}")
            continue
        digest = pack.structural_hash(draft.code)
        if digest in seen:
            stats.duplicates += 1
            continue
        seen.add(digest)
        stats.kept += 1
        stats.by_category[draft.category] += 1
        lines = draft.code.count("\n")
        difficulty = max(1, min(10, draft.difficulty + (lines > 20) + (lines > 35)))
        yield Pair(prompt=prompt, response=f"```{spec.name}\n{draft.code}```", category=draft.category,
                   rating=3, difficulty=difficulty, lane="codegen", response_mode="code_only",
                   lang=spec.name, source=f"synthetic:{name}",
                   metadata={"template": name.partition(":")[0], "domain": domain, "seed": seed,
                             **({"task": name.partition(":")[2]} if ":" in name else {})})


def code_of(pair: Pair) -> str:
    """The source inside a synthetic pair's fenced response (```vox, ```python)."""
    return pair.response.partition("\n")[2].removesuffix("```")


def write_vox_tree(out_dir: str | Path, n_files: int, seed: int) -> int:
    """Write `n_files` synthetic `.vox` files (with `// ---` frontmatter) under
    `out_dir/<domain>/`, for the corpus speed benchmark. The directory is replaced atomically.
    Returns the number of files written (fewer than asked only if the templates ran out)."""
    written = 0
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        for i, pair in enumerate(generate(n_files, seed, edit_share=0)):  # files, not requests
            meta = pair.metadata
            folder = tmp / meta["domain"]
            folder.mkdir(exist_ok=True)
            description = pair.prompt.replace("\n", " ")
            head = ["// ---", f"// title: {meta['template']} example {i}",
                    f"// description: {description}", f"// constructs: {pair.category}",
                    "// training_eligible: true", "// ---"]
            if i % 3 == 0:  # a third carry an explicit training prompt, as real corpora do
                head.append(f"// @training_prompt: {description}")
            text = "\n".join(head) + "\n\n" + code_of(pair)
            (folder / f"{meta['template']}_{i:05d}.vox").write_text(text, encoding="utf-8")
            written += 1
    return written
