"""`mens vox …`: check and inspect Vox sources with the Vox language pack."""

from __future__ import annotations

from mens.cli import add_group


def register(sub) -> None:
    add_group(sub, "vox", "check Vox sources and list their constructs")
