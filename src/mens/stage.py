"""The Stage seam: all `mens pipeline` knows of a stage, and what a stage's own command shares
with it. A stage module declares its `STAGE` once; `mens corpus …` adds `STAGE.command` and
`mens pipeline` runs `STAGE` in its place (mens.corpus.stages lists the corpus stages, a line
each; mens.pipeline.stages the training and judging ones after them).

    Context     the resolved pipeline config, its work dir and path helpers
    Stage       name; inputs, outputs, params, packs, code (what its fingerprint covers); run(ctx)
                → key figures; needed(ctx) → a reason not to run; the config `section` it owns,
                with its `options` (read when the config is), any further `check`, and the
                `preflight` of what must already exist
    Command     a stage's own `mens …` command: its arguments and run(args)
    Options     a config section as a dataclass that checks itself (`Options.read`): an unknown
                key names the closest known one, a value its field's rule (`option`)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from mens.errors import MensError, did_you_mean

SEE = "see examples/pipeline.yaml"


@dataclass
class Context:
    """The resolved pipeline config plus helpers shared by the stages."""

    config: dict[str, Any]
    base_dir: Path                      # relative paths in the config are relative to this
    work: Path
    model: str | None = None            # --model: fine-tune this instead of the scratch base
    resume: bool = False                # the running stage was interrupted before with these same inputs
    figures: dict[str, dict[str, Any]] = field(default_factory=dict)

    def section(self, name: str) -> dict[str, Any]:
        value = self.config.get(name) or {}
        if not isinstance(value, dict):
            raise MensError(f"'{name}' must be a mapping", "pipeline config", SEE)
        return value

    def path(self, value: str | Path) -> Path:
        """A config path: `{work_dir}` expanded, relative ones resolved against the config's folder."""
        text = str(value).replace("{work_dir}", str(self.work))
        p = Path(os.path.expanduser(text))
        return p if p.is_absolute() else (self.base_dir / p)

    def work_file(self, *parts: str) -> Path:
        """A path under the work dir, e.g. `work_file("corpus", "units.jsonl")`."""
        return self.work.joinpath(*parts)

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", 0))


@dataclass
class Command:
    """A stage's own command: `mens GROUP NAME` (`mens NAME` with no group)."""

    name: str
    help: str
    arguments: Callable[[Any], None]    # adds the command's arguments to its argparse parser
    run: Callable[[Any], int]           # the parsed arguments → exit code
    description: str = ""
    group: str | None = "corpus"
    source: str | None = None           # the argument naming its input: where an OS error without a path is placed


@dataclass
class Stage:
    """One step of the pipeline. `run(ctx)` does the work and returns key figures."""

    name: str
    inputs: Callable[[Context], list[Path]]
    outputs: Callable[[Context], list[Path]]
    run: Callable[[Context], dict[str, Any]]
    params: Callable[[Context], dict[str, Any]] = lambda ctx: {}
    packs: Callable[[Context], list[str]] = lambda ctx: []
    needed: Callable[[Context], str | None] = lambda ctx: None   # a reason not to run, or None
    help: str = ""
    # mens packages whose source made the outputs: a new mens version (or a local edit) re-runs
    # the stages whose code changed, not only those whose inputs did.
    code: tuple[str, ...] = ("mens",)
    section: str | None = None          # the config key this stage owns
    options: type[Options] | None = None  # that section's keys and values, read with the config
    check: Callable[[Context, str], None] | None = None  # more of its section's values, checked with them
    # What must already exist (its source folders, a policy file): looked at once every stage's
    # values are known good, so a misspelt key is named before a folder the config names wrongly.
    preflight: Callable[[Context, str], None] | None = None
    command: Command | None = None

    def validate(self, ctx: Context, where: str) -> None:
        """Its config section now, when the config is read: a mistake found by the stage itself
        would cost every stage before it."""
        if self.options is not None and self.section in ctx.config:
            self.options.read(ctx.config[self.section], self.section, where)
        if self.check is not None:
            self.check(ctx, where)


# ---------------------------------------------------------------- options

def option(default: Any = None, ok: Callable[[Any], bool] | None = None, want: str = "") -> Any:
    """A field of an Options class: its default and the rule a given value must pass (`want`
    says the rule in the error: "generate_data.count must be 0 or more, got -1")."""
    return field(default=default, metadata={"ok": ok, "want": want})


def whole(low: int | None = None) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and (low is None or v >= low)


def number(low: float, high: float = float("inf"), *, below_high: bool = False) -> Callable[[Any], bool]:
    return lambda v: (isinstance(v, (int, float)) and not isinstance(v, bool)
                      and low <= v and (v < high if below_high else v <= high))


def strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def text(v: Any) -> bool:
    return isinstance(v, str)


def flag(v: Any) -> bool:
    return isinstance(v, bool)


@dataclass
class Options:
    """A stage's config section, checked as it is read (litgpt's self-validating argument
    dataclasses): an unknown key is refused with the closest known one, each given value must
    pass its field's rule; a value left out (or null) keeps the field's default."""

    @classmethod
    def read(cls, section: Any, name: str, where: str):
        if section is None:
            section = {}
        if not isinstance(section, dict):
            raise MensError(f"'{name}' must be a mapping", where, SEE)
        known = [f.name for f in fields(cls)]
        unknown = sorted(str(k) for k in section if str(k) not in known)
        if unknown:
            raise MensError(f"unknown key(s) in '{name}': {', '.join(unknown)}", where,
                            did_you_mean(unknown[0], known, f"use {', '.join(sorted(known))}"))
        for f in fields(cls):
            value, ok = section.get(f.name), f.metadata.get("ok")
            if value is not None and ok is not None and not ok(value):
                key = f"{name}.{f.name}"
                raise MensError(f"{key} must be {f.metadata['want']}, got {value!r}", where, f"fix {key} ({SEE})")
        return cls(**{str(k): v for k, v in section.items() if v is not None})
