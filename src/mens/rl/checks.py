"""Value checks of the `mens dpo` / `mens rl` options (DpoOptions, RlOptions), run before any model
loads: each bad value is one MensError naming the field (or the flag that set it) and the fix.

`flags` maps a field to the flag that set it (`{"beta": "--beta"}`): the error then names the
flag; a field from a config file is named by the file."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, Iterable

from mens.errors import MensError, did_you_mean


class Checker:
    def __init__(self, opts: Any, where: str, flags: dict[str, str] | None = None):
        self.opts, self.where, self.flags = opts, where, flags or {}

    def fail(self, name: str, what: str, todo: str) -> MensError:
        return MensError(what, self.flags.get(name, self.where), todo)

    def _label(self, name: str) -> str:
        return self.flags.get(name, name)

    def whole(self, *names: str, least: int = 1) -> None:
        for name in names:
            v = getattr(self.opts, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < least:
                raise self.fail(name, f"{name} must be a whole number, {least} or more, got {v!r}",
                                f"give {self._label(name)} {max(least, 1)} or more")

    def positive(self, *names: str) -> None:
        for name in names:
            v = getattr(self.opts, name)
            if not is_number(v) or v <= 0:
                raise self.fail(name, f"{name} must be a positive number, got {v!r}",
                                f"give {self._label(name)} above 0")

    def not_negative(self, *names: str) -> None:
        for name in names:
            v = getattr(self.opts, name)
            if not is_number(v) or v < 0:
                raise self.fail(name, f"{name} must be 0 or more, got {v!r}", f"give {self._label(name)} 0 or more")

    def seed(self) -> None:
        v = self.opts.seed
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**32:
            raise self.fail("seed", f"seed must be 0 to 2**32-1, got {v!r}", "give a non-negative whole number")

    def boolean(self, *names: str) -> None:
        for name in names:
            v = getattr(self.opts, name)
            if not isinstance(v, bool):
                raise self.fail(name, f"{name} must be true or false, got {v!r}", f"fix {name}")

    def choice(self, name: str, allowed: Iterable[str]) -> None:
        v, allowed = getattr(self.opts, name), tuple(allowed)
        if v not in allowed:
            raise self.fail(name, f"{name} must be one of {', '.join(allowed)}, got {v!r}", f"fix {name}")


def is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def known_keys(data: dict[Any, Any], cls: type, where: str, docs: str = "docs/rl.md") -> dict[str, Any]:
    """`data` (a config mapping) with dashes read as underscores; an unknown key is refused with
    the closest field name as the fix."""
    names = {f.name for f in fields(cls)}
    out = {}
    for raw, value in data.items():
        key = str(raw).replace("-", "_")
        if key not in names:
            raise MensError(f"unknown config key {raw!r}", where,
                            did_you_mean(key, names, f"use {', '.join(sorted(names))} ({docs})"))
        out[key] = value
    return out
