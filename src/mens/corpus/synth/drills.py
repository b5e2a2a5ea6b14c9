"""Copy drills: requests to say back made-up names and signatures exactly.

    copy_drills(limit, seed) -> Iterator[Pair]      # "Repeat exactly: `velmo_rask(n: int) to str`"
    code_drills(limit, seed) -> Iterator[Pair]      # "Declare `velmo_rask(n: int) to str` …" → `fn velmo_rask(…) {}`

A model that writes code for a request must carry the request's names into the code
(``define `fizz_word(n: int) to str` `` → `fn fizz_word(n: int) to str`). A small model trained
from scratch learns that only through an induction-style copy mechanism, and on ordinary code
pairs, where a name is a few tokens of a long answer, it does not form in the quickstart's
budget: the model writes a plausible name of its own (`fn zyr_shyr`). On drills, where every
answer token can only come from the prompt, it forms after ~1,000 steps; trained first (the
scratch base's `curriculum_data`), it carries over to the code that follows
(docs/performance.md, "Quickstart quality"). Names are made up so that nothing but copying
can predict them.
"""

from __future__ import annotations

import random
from typing import Iterator

from mens.corpus.synth.words import made_up_name
from mens.records import Pair

TYPES = ("int", "str", "bool", "float", "List[int]", "Option[str]", "Result[int]")
ASKS = ("Repeat exactly: {s}", "Copy this: `{s}`", "Say back `{s}`.", "Echo the text {s}",
        "{s}\nRepeat the line above.")


def _drill_text(rng: random.Random, english: float) -> str:
    """Half a quoted signature (`velmo_rask(n: int, gip: str) to List[int]`), half a run of names."""
    def name(capitalised: bool) -> str:
        return made_up_name(rng, capitalised, english)

    if rng.random() < 0.5:
        params = ", ".join(f"{name(False)}: {rng.choice(TYPES)}" for _ in range(rng.randint(0, 3)))
        returns = rng.choice(TYPES + (name(True),))
        return f"{name(False)}({params}) to {returns}"
    return " ".join(name(rng.random() < 0.3) for _ in range(rng.randint(2, 8)))


def copy_drills(limit: int, seed: int, english_names: float = 0.0) -> Iterator[Pair]:
    """`limit` copy drills, deterministic for a seed (`source: synthetic:copy`); `english_names`:
    the share of names made of English words (words.made_up_name)."""
    rng = random.Random(f"copy-drills-{seed}")
    for _ in range(limit):
        text = _drill_text(rng, english_names)
        yield Pair(prompt=rng.choice(ASKS).format(s=text), response=text, category="copy",
                   lane="codegen", source="synthetic:copy")


SIGNATURE_ASKS = ("Declare `{s}` in Vox with an empty body.", "Write the empty Vox function `{s}`.",
                  "Empty body, Vox: `{s}`", "Give `{s}` as a Vox declaration with no body yet.")
TYPE_ASKS = ("Declare a Vox type `{t}` with fields {f}.", "Vox type `{t}`, fields {f}; nothing else.",
             "Write only the type `{t}` in Vox: {f}.")
STUB_ASKS = ("Declare empty Vox functions {n}.", "Stub out {n} in Vox, in that order, empty bodies.",
             "Empty Vox functions, in order: {n}")


def code_drills(limit: int, seed: int, english_names: float = 0.0) -> Iterator[Pair]:
    """Copy drills whose answers are Vox that parses: a signature declared with an empty body
    (half), a type with the asked-for fields (a quarter), empty functions of the listed names (a
    quarter). Every name comes from the prompt, as in copy_drills, but the model copies it into
    code, not back as prose: trained first they cost the code that follows less (bench parse
    0.593 against 0.315 for copy_drills, docs/performance.md)."""
    rng = random.Random(f"code-drills-{seed}")

    def name(capitalised: bool = False) -> str:
        return made_up_name(rng, capitalised, english_names)

    for _ in range(limit):
        r = rng.random()
        if r < 0.5:
            params = ", ".join(f"{name()}: {rng.choice(TYPES)}" for _ in range(rng.randint(0, 3)))
            returns = rng.choice(TYPES + (name(True),))
            sig = f"{name()}({params}) to {returns}"
            prompt, code = rng.choice(SIGNATURE_ASKS).format(s=sig), f"fn {sig} {{\n}}\n"
        elif r < 0.75:
            type_name = name(True)
            fields = [(name(), rng.choice(TYPES)) for _ in range(rng.randint(1, 4))]
            listed = ", ".join(f"`{f}: {ty}`" for f, ty in fields)
            prompt = rng.choice(TYPE_ASKS).format(t=type_name, f=listed)
            code = f"type {type_name} {{\n" + "".join(f"    {f}: {ty}\n" for f, ty in fields) + "}\n"
        else:
            names = [name() for _ in range(rng.randint(2, 5))]
            prompt = rng.choice(STUB_ASKS).format(n=", ".join(f"`{n}`" for n in names))
            code = "".join(f"fn {n}() {{\n}}\n" for n in names)
        yield Pair(prompt=prompt, response=code, category="copy", lane="codegen", source="synthetic:copy")
