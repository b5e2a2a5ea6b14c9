"""Copy drills: requests to say back made-up names and signatures exactly.

    copy_drills(limit, seed) -> Iterator[Pair]      # "Repeat exactly: `velmo_rask(n: int) to str`"

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
