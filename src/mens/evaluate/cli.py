"""`mens bench`, `mens gate`, `mens card`, `mens report`: thin wrappers over mens.evaluate.*."""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    card = sub.add_parser("card", help="(re)render MODEL_CARD.md of a run from the files in it",
                          description="Render MODEL_CARD.md from the run's manifest, eval, bench and gate results.")
    card.add_argument("run", type=Path, help="run directory")
    card.set_defaults(func=_card)


def _card(args) -> int:
    from mens.evaluate.card import write_card
    from mens.progress import say

    path = write_card(args.run)
    say(f"wrote {path}")
    print(path)
    return 0
