"""Copy drills: requests to say back made-up names and signatures exactly.

    copy_drills(limit, seed) -> Iterator[Pair]      # "Repeat exactly: `velmo_rask(n: int) to str`"
    code_drills(limit, seed, english_names=0.0, lang="vox") -> Iterator[Pair]
        # "Declare `velmo_rask(n: int) to str` …" → `fn velmo_rask(…) {}`; lang="python": `def …: pass`

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
from dataclasses import dataclass, field
from typing import Callable, Iterator

from mens.corpus.synth.templates.python import DATACLASS_IMPORT, PY_RESERVED
from mens.corpus.synth.words import made_up_name
from mens.errors import MensError
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


@dataclass(frozen=True)
class DrillLang:
    """What one language's code drills are written in: its type names, the arrow before a return
    type, the asks, how a declaration is rendered, the Pair fields its rows carry, and the names a
    made-up one must not be (None: every draw is kept, as the Vox drills always did, so their
    output is byte for byte what it was before languages)."""

    types: tuple[str, ...]
    arrow: str
    signature_asks: tuple[str, ...]
    type_asks: tuple[str, ...]
    stub_asks: tuple[str, ...]
    signature: Callable[[str], str]                           # `name(params) -> T` -> its empty declaration
    record: Callable[[str, list[tuple[str, str]]], str]       # a type (dataclass) with these fields
    stubs: Callable[[list[str]], str]                         # empty functions of these names, in order
    response: Callable[[str], str] = lambda code: code
    fields: dict[str, str] = field(default_factory=dict)
    reserved: frozenset[str] | None = None


VOX_DRILLS = DrillLang(
    TYPES, " to ", SIGNATURE_ASKS, TYPE_ASKS, STUB_ASKS,
    signature=lambda sig: f"fn {sig} {{\n}}\n",
    record=lambda name, fields: f"type {name} {{\n" + "".join(f"    {f}: {ty}\n" for f, ty in fields) + "}\n",
    stubs=lambda names: "".join(f"fn {n}() {{\n}}\n" for n in names))

# Python's drills answer as the synthetic Python pairs do (generate.generate): the code in a
# ```python fence, `lang: python`, code only; the dataclass with its import line, as
# templates/python.py writes every dataclass, so the drill's answer is the shape the programs
# that follow have (and runs as it stands) — the import is the same few tokens every time, so
# it costs the copying nothing. Made-up names are none of PY_RESERVED (keywords, builtins, the
# held-out bench's names) and distinct within a drill (`def f(a, a)` parses, but does not compile).
PYTHON_DRILLS = DrillLang(
    ("int", "str", "bool", "float", "list[int]", "str | None", "dict[str, int]"), " -> ",
    tuple(a.replace("Vox", "Python") for a in SIGNATURE_ASKS),
    ("Declare a Python dataclass `{t}` with fields {f}.", "Python dataclass `{t}`, fields {f}; nothing else.",
     "Write only the dataclass `{t}` in Python: {f}."),
    tuple(a.replace("Vox", "Python") for a in STUB_ASKS),
    signature=lambda sig: f"def {sig}:\n    pass\n",
    record=lambda name, fields: DATACLASS_IMPORT + f"@dataclass\nclass {name}:\n" +
    "".join(f"    {f}: {ty}\n" for f, ty in fields),
    stubs=lambda names: "\n\n".join(f"def {n}():\n    pass\n" for n in names),
    response=lambda code: f"```python\n{code}```",
    fields={"lang": "python", "response_mode": "code_only"},
    reserved=PY_RESERVED)

DRILL_LANGS = {"vox": VOX_DRILLS, "python": PYTHON_DRILLS}


def code_drills(limit: int, seed: int, english_names: float = 0.0, lang: str = "vox") -> Iterator[Pair]:
    """Copy drills whose answers are code that parses (Vox, or Python: DRILL_LANGS): a signature
    declared with an empty body (half), a type with the asked-for fields (a quarter), empty
    functions of the listed names (a quarter). Every name comes from the prompt, as in
    copy_drills, but the model copies it into code, not back as prose: trained first they cost
    the code that follows less (bench parse 0.593 against 0.315 for copy_drills,
    docs/performance.md)."""
    if lang not in DRILL_LANGS:
        raise MensError(f"no code drills for --lang {lang!r}", "generate-data", f"pass one of {', '.join(DRILL_LANGS)}")
    spec = DRILL_LANGS[lang]
    rng = random.Random(f"code-drills-{seed}")
    used: set[str] = set()  # this drill's names, when spec.reserved asks for distinct ones

    def name(capitalised: bool = False) -> str:
        while True:
            made = made_up_name(rng, capitalised, english_names)
            if spec.reserved is None:
                return made
            if made not in spec.reserved and made not in used:
                used.add(made)
                return made

    for _ in range(limit):
        used.clear()
        r = rng.random()
        if r < 0.5:
            params = ", ".join(f"{name()}: {rng.choice(spec.types)}" for _ in range(rng.randint(0, 3)))
            returns = rng.choice(spec.types + (name(True),))
            sig = f"{name()}({params}){spec.arrow}{returns}"
            prompt, code = rng.choice(spec.signature_asks).format(s=sig), spec.signature(sig)
        elif r < 0.75:
            type_name = name(True)
            fields = [(name(), rng.choice(spec.types)) for _ in range(rng.randint(1, 4))]
            listed = ", ".join(f"`{f}: {ty}`" for f, ty in fields)
            prompt = rng.choice(spec.type_asks).format(t=type_name, f=listed)
            code = spec.record(type_name, fields)
        else:
            names = [name() for _ in range(rng.randint(2, 5))]
            prompt = rng.choice(spec.stub_asks).format(n=", ".join(f"`{n}`" for n in names))
            code = spec.stubs(names)
        yield Pair(prompt=prompt, response=spec.response(code), category="copy", lane="codegen",
                   source="synthetic:copy", **spec.fields)
