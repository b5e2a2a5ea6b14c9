"""Prompt templates for `corpus pairs`. Language-neutral: a construct is described by its taxonomy
kind (`test_function` → "test function"), its name and its doc comment."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

from mens.corpus.units import Unit
from mens.lang import LanguagePack

_DISPLAY = {"typescript": "TypeScript", "javascript": "JavaScript", "cpp": "C++", "csharp": "C#",
            "c_sharp": "C#", "php": "PHP", "html": "HTML", "css": "CSS", "sql": "SQL", "tsx": "TSX"}
_NOUNS = {"const": "constant", "fn": "function", "test_function": "test", "async_function": "async function"}

FILE_TEMPLATES = (
    "Write a {lang} module `{stem}`{with_kinds}.",
    "Create the {lang} file `{stem}`{with_kinds}.",
    "Implement `{stem}` in {lang}{with_kinds}.",
)
DESCRIBED_FILE_TEMPLATES = (
    "{desc}",
    "Write {lang} code for this: {desc}",
    "In {lang}: {desc}",
)
CONSTRUCT_TEMPLATES = (
    "Write a {lang} {noun} named `{name}`.",
    "Implement the {noun} `{name}` in {lang}.",
    "Show the {lang} definition of the {noun} `{name}`.",
    "Give me {lang} code for a {noun} called `{name}`.",
)
DOCUMENTED_TEMPLATES = (
    "Write a {lang} {noun} `{name}`: {doc}",
    "{doc_sentence} Implement it in {lang} as the {noun} `{name}`.",
    "In {lang}, define the {noun} `{name}`. It should do this: {doc}",
)
# Extra phrasings for kinds whose purpose shapes the request (any language has tests and types).
KIND_TEMPLATES = {
    "test": ("Write a {lang} test `{name}`.", "Add a {lang} test called `{name}` for this behaviour."),
    "type": ("Define the {lang} type `{name}`.", "Declare a {lang} data type named `{name}`."),
    "class": ("Write a {lang} class `{name}`.", "Create the class `{name}` in {lang}."),
}
UNNAMED_TEMPLATES = (
    "Write a {lang} {noun} for the `{stem}` module.",
    "Show a {lang} {noun} as used in `{stem}`.",
)
DOC_CODE_TEMPLATES = (
    "{context}\n\nShow this in {lang} code.",
    "{heading}: write a {lang} example.\n\n{context}",
    "Write {lang} code that illustrates \"{heading}\".",
)
PROSE_TEMPLATES = (
    "Explain \"{heading}\" in {lang}.",
    "What does the {lang} documentation say under \"{heading}\"?",
    "In {lang}, what should I know about \"{heading}\"?",
    "Describe \"{heading}\"{page}.",
)
FIX_TEMPLATES = (
    "This {lang} code does not parse:\n\n{code}\n\nThe parser reports `{error}`. Fix it.",
    "Fix the syntax error in this {lang} code (the parser says `{error}`):\n\n{code}",
    "{code}\n\nThis fails with `{error}`. Give the corrected {lang} code.",
)
FOLLOWUP_TEMPLATES = (
    "Now add the {noun} `{name}` next to `{prev}`.",
    "Good. Extend it with a {noun} called `{name}`.",
    "Next, also write the {noun} `{name}`{doc_clause}.",
)


def display_name(lang: str) -> str:
    return _DISPLAY.get(lang, lang[:1].upper() + lang[1:])


def noun(kind: str) -> str:
    return _NOUNS.get(kind, kind.replace("_", " "))


def plural(word: str) -> str:
    """"class" → "classes" (not "classs"), "function" → "functions"."""
    return word + ("es" if word.endswith(("s", "x", "ch", "sh")) else "s")


def article(word: str) -> str:
    """"an if statement", "an async function", "a class"."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text.endswith((".", "!", "?")) else text + "."


def _with_kinds(kinds: list[str]) -> str:
    counts = Counter(k for k in kinds if k != "import")
    if not counts:
        return ""
    parts = [f"{n} {plural(noun(k))}" if n > 1 else f"{article(noun(k))} {noun(k)}"
             for k, n in sorted(counts.items())]
    return " with " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])


def file_prompt(unit: Unit, lang: str, rng: random.Random) -> str:
    meta = unit.frontmatter or {}
    if isinstance(meta.get("training_prompt"), str) and meta["training_prompt"].strip():
        return meta["training_prompt"].strip()
    stem = Path(unit.path).stem
    if unit.doc_comment:
        return rng.choice(DESCRIBED_FILE_TEMPLATES).format(desc=_sentence(unit.doc_comment), lang=lang)
    return rng.choice(FILE_TEMPLATES).format(lang=lang, stem=stem, with_kinds=_with_kinds(unit.constructs))


def _family(kind: str) -> str | None:
    return next((f for f in KIND_TEMPLATES if f in kind.split("_")), None)


def construct_prompt(unit: Unit, lang: str, rng: random.Random) -> str:
    fields = dict(lang=lang, noun=noun(unit.construct), name=unit.name, stem=Path(unit.path).stem)
    if not unit.name:
        return rng.choice(UNNAMED_TEMPLATES).format(**fields)
    if unit.doc_comment and unit.doc_comment.strip():
        doc = " ".join(unit.doc_comment.split())
        return rng.choice(DOCUMENTED_TEMPLATES).format(doc=doc, doc_sentence=_sentence(doc), **fields)
    family = _family(unit.construct)
    choices = CONSTRUCT_TEMPLATES + (KIND_TEMPLATES[family] if family else ())
    return rng.choice(choices).format(**fields)


def doc_code_prompt(unit: Unit, lang: str, rng: random.Random) -> str:
    heading = (unit.heading or Path(unit.path).stem).strip()
    context = (unit.context or "").strip()
    templates = DOC_CODE_TEMPLATES if context else DOC_CODE_TEMPLATES[2:]
    return rng.choice(templates).format(heading=heading, context=context, lang=lang).strip()


def prose_prompt(unit: Unit, lang: str, rng: random.Random) -> str:
    heading = (unit.heading or "this topic").strip()
    page = f" (from the {unit.context.strip()} docs)" if unit.context and unit.context.strip() != heading else ""
    templates = PROSE_TEMPLATES if lang else PROSE_TEMPLATES[3:]
    return rng.choice(templates).format(heading=heading, lang=lang, page=page)


def fix_prompt(broken: str, error: str, pack: LanguagePack, lang: str, rng: random.Random) -> str:
    from mens.corpus.pairs import fence

    return rng.choice(FIX_TEMPLATES).format(code=fence(broken, pack), error=error, lang=lang)


def summary(doc: str) -> str:
    """The first sentence of a doc comment's first paragraph, on one line: what a clause in a
    request can hold (a whole docstring brings its `Args:` and `:param x:` sections along)."""
    first = " ".join(doc.strip().split("\n\n")[0].split())
    return re.split(r"(?<=[.!?])\s", first, maxsplit=1)[0]


def followup_prompt(unit: Unit, previous: Unit, lang: str, rng: random.Random) -> str:
    # "…the function `f`: Return the first item" reads right whatever the docstring's mood
    # ("that return the first item" did not).
    what = summary(unit.doc_comment or "").rstrip(".")
    doc = f": {what}" if what else ""
    return rng.choice(FOLLOWUP_TEMPLATES).format(noun=noun(unit.construct), name=unit.name or "it",
                                                 prev=previous.name or "the previous code",
                                                 doc_clause=doc, lang=lang)
