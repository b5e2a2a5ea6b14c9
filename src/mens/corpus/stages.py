"""The corpus stages, in the order `mens pipeline` runs them: one line each. Every module listed
defines its `STAGE` (mens.stage.Stage) once; `mens corpus …` adds its command from it and
`mens pipeline` runs it in its place. Adding a corpus stage is a module and a line here.

    corpus_stages() -> [Stage]
    CORPUS_CODE                 the mens code a corpus stage's output is made of (its fingerprint)
    corpus_langs(ctx), all_packs(ctx)  the config's extra grammars (corpus.langs); every pack a stage parses with
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mens.stage import Context, Stage

STAGE_MODULES = [
    "mens.corpus.installed",        # gather
    "mens.corpus.extract",          # extract
    "mens.corpus.pairs",            # pairs
    "mens.corpus.validate",         # validate
    "mens.corpus.synth.stage",      # generate-data
    "mens.corpus.mix",              # mix
    "mens.corpus.evaluate",         # eval
]

# The corpus stages' reports carry fingerprint blocks, so the fingerprint module is part of their code.
CORPUS_CODE = ("mens.corpus", "mens.records", "mens.files", "mens.fingerprint")


def corpus_stages() -> list[Stage]:
    return [importlib.import_module(name).STAGE for name in STAGE_MODULES]


def corpus_langs(ctx: Context) -> list[str]:
    return list(ctx.section("corpus").get("langs") or [])


def all_packs(ctx: Context) -> list[str]:
    from mens.lang import builtin_names

    return builtin_names() + [n for n in corpus_langs(ctx) if n not in builtin_names()]
