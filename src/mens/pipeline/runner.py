"""`mens pipeline`: run the stages in order, skipping each one whose inputs are unchanged.

    extract → pairs → validate → generate-data → mix → eval → train-scratch-base → train
            → [dpo → rl] → bench → gate → card → report

(dpo and rl run only when the config has a `dpo:` / `rl:` section; bench and what follows then
judge the last of them.)

Each stage declares its input paths, its parameters, the language packs it depends on and its
outputs (`mens.pipeline.stages`). Before running a stage the engine fingerprints the inputs'
contents, the parameters, the packs' `fingerprint()` and the source of the mens code that makes
the outputs (`mens.pipeline.fingerprint`); when all of these equal what
`<work dir>/pipeline_state.json` recorded after the stage last succeeded, and the outputs still
exist, the stage is skipped and says so. Otherwise it runs, and the reason is shown (no previous
run, which input changed, a config or grammar change, a missing output). So a change to the
Vox grammar re-runs extract and everything whose inputs then change; a touched source file
re-runs extract, and downstream stages re-run only if their inputs really changed.

The first failing stage stops the run with its message. A blocking gate failure is the one
exception: card and report still render (they show why), then the pipeline exits 1.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mens.errors import GateFailure, MensError
from mens.pipeline.fingerprint import CONTENT_HASH_LIMIT, fingerprint_block, input_hashes
from mens.files import hold_lock, release_lock, write_json_atomic
from mens.progress import say

STATE_NAME = "pipeline_state.json"


@dataclass
class Stage:
    """One step of the pipeline. `run(ctx)` does the work and returns key figures."""

    name: str
    inputs: Callable[["Context"], list[Path]]
    outputs: Callable[["Context"], list[Path]]
    run: Callable[["Context"], dict[str, Any]]
    params: Callable[["Context"], dict[str, Any]] = lambda ctx: {}
    packs: Callable[["Context"], list[str]] = lambda ctx: []
    needed: Callable[["Context"], str | None] = lambda ctx: None   # a reason not to run, or None
    help: str = ""
    # mens packages whose source made the outputs: a new mens version (or a local edit) re-runs
    # the stages whose code changed, not only those whose inputs did.
    code: tuple[str, ...] = ("mens",)


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
            raise MensError(f"'{name}' must be a mapping", "pipeline config", "see examples/pipeline.yaml")
        return value

    def path(self, value: str | Path) -> Path:
        """A config path: `{work_dir}` expanded, relative ones resolved against the config's folder."""
        text = str(value).replace("{work_dir}", str(self.work))
        p = Path(os.path.expanduser(text))
        return p if p.is_absolute() else (self.base_dir / p)

    def work_file(self, *parts: str) -> Path:
        """A path under the work dir, e.g. `work_file("corpus", "units.jsonl")`."""
        return self.work.joinpath(*parts)


@dataclass
class StageOutcome:
    name: str
    status: str            # ran | skipped | not needed | failed | planned
    reason: str
    seconds: float = 0.0
    figures: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


# ---------------------------------------------------------------- fingerprints

def fingerprint(ctx: Context, stage: Stage) -> dict[str, Any]:
    """The stage's fingerprint block now: its inputs (big files by size and mtime), params,
    packs and code (`mens.pipeline.fingerprint`)."""
    return fingerprint_block(input_hashes(stage.inputs(ctx), content_limit=CONTENT_HASH_LIMIT),
                             stage.params(ctx), stage.packs(ctx), code=stage.code)


def why_run(old: dict | None, new: dict, outputs: list[Path]) -> str | None:
    """Why a stage must run, or None when its fingerprint matches and its outputs exist."""
    if not old or "fingerprint" not in old:
        return "no previous run"
    prev = old["fingerprint"]
    if prev.get("packs") != new["packs"]:
        changed = [n for n in new["packs"] if prev.get("packs", {}).get(n) != new["packs"][n]]
        return f"language pack changed: {', '.join(changed) or 'set of packs'}"
    if prev.get("code") != new.get("code"):
        changed = [n for n in new.get("code", {}) if prev.get("code", {}).get(n) != new["code"][n]]
        return f"mens code changed: {', '.join(changed) or 'stage code'}"
    if prev.get("params") != new["params"]:
        keys = sorted(k for k in set(prev.get("params", {})) | set(new["params"])
                      if prev.get("params", {}).get(k) != new["params"].get(k))
        return f"config changed: {', '.join(keys)}"
    if prev.get("inputs") != new["inputs"]:
        old_in, new_in = prev.get("inputs", {}), new["inputs"]
        changed = [p for p in new_in if old_in.get(p) != new_in[p]] + [p for p in old_in if p not in new_in]
        shown = ", ".join(Path(p).name for p in changed[:3]) + (f" (+{len(changed) - 3} more)" if len(changed) > 3 else "")
        return f"input changed: {shown}"
    missing = [p for p in outputs if not p.exists()]
    if missing:
        return f"output missing: {missing[0].name}"
    return None


def work_digest(fp: dict[str, Any]) -> str:
    """The digest of what a stage works on — inputs, params, packs — without mens's code."""
    return hashlib.sha256(json.dumps({k: fp.get(k) for k in ("inputs", "params", "packs")},
                                     sort_keys=True, default=str).encode()).hexdigest()[:16]


def resumable(attempt: str | dict | None, fp: dict[str, Any]) -> bool:
    """Whether an interrupted attempt (pipeline_state.json's `attempts`) may be resumed now: the
    same inputs, params and packs (older states kept the full digest only)."""
    if isinstance(attempt, dict):
        return attempt.get("work") == work_digest(fp)
    return attempt == fp["digest"]


def stage_check(ctx: Context, state: dict[str, Any], stage: Stage) -> tuple[dict[str, Any], str | None]:
    """The stage's fingerprint now, and why it must run against `state` (None: up to date)."""
    fp = fingerprint(ctx, stage)
    return fp, why_run(state["stages"].get(stage.name), fp, stage.outputs(ctx))


def first_stale(ctx: Context, stages: list[Stage]) -> str | None:
    """'stage: why' for the first of `stages` that would run now, or None when all are up to
    date: what the summary says before it quotes results that later stages have outdated."""
    state = load_state(ctx.work)
    for stage in stages:
        if not stage.needed(ctx) and (reason := stage_check(ctx, state, stage)[1]):
            return f"{stage.name}: {reason}"
    return None


# ---------------------------------------------------------------- state

def load_state(work: Path) -> dict[str, Any]:
    path = work / STATE_NAME
    if not path.is_file():
        return {"stages": {}}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return {"stages": {}}  # a damaged state only costs a full re-run
    return state if isinstance(state.get("stages"), dict) else {"stages": {}}


def save_state(work: Path, state: dict[str, Any]) -> None:
    write_json_atomic(work / STATE_NAME, state)


# ---------------------------------------------------------------- config

def load_config(path: str | Path, model: str | None = None) -> Context:
    from mens.files import read_yaml

    path = Path(path)
    config = read_yaml(path, "pipeline config", "give a YAML file like examples/pipeline.yaml") or {}
    if not isinstance(config, dict):
        raise MensError("pipeline config must be a mapping", str(path), "see examples/pipeline.yaml")
    check_keys(config, str(path))
    base = path.resolve().parent
    work = Path(str(config.get("work_dir") or "out/pipeline"))
    work = (work if work.is_absolute() else base / work).resolve()
    configured = config.get("model")  # a folder beside the config (the shipped base) or a hub id
    if isinstance(configured, str) and (base / os.path.expanduser(configured)).exists():
        configured = str((base / os.path.expanduser(configured)).resolve())
    ctx = Context(config=config, base_dir=base, work=work, model=model or configured)
    for source in ctx.section("corpus").get("sources") or []:  # named now, not by the extract stage
        if "{work_dir}" not in str(source) and not ctx.path(source).exists():
            raise MensError(f"corpus source not found: {ctx.path(source)}", f"{path}: corpus.sources",
                            "list existing source and docs folders (relative to the config's folder)")
    policy = ctx.path(ctx.section("gate").get("policy", "gates.yaml"))
    if policy.is_file():  # a policy mistake is named now, not by the gate stage after training
        from mens.evaluate.gates import load_policy

        load_policy(policy)
    return ctx


# The keys each section may hold: a misspelt key (`max_step:`) is an error, not a silent default.
# `train` and `scratch` take every `mens train` field (scratch also `data`); `mix` is checked by
# mens.corpus.mix with the same rule.
_SECTION_KEYS = {
    "gather": {"stdlib", "packages", "max_file_bytes"},
    "corpus": {"sources", "langs"},
    "generate_data": {"count", "seed", "copy_drills", "code_drills", "english_names", "drill_english_names",
                      "made_up_names", "made_up_subjects", "lang"},
    "bench": {"path", "k", "samples", "temperature", "seed", "limit", "max_new_tokens", "batch_size", "grammar",
              "compare_base"},
    "gate": {"policy"},
    "ship": {"to", "dtype"},
}
_TOP_KEYS = {"work_dir", "seed", "model", "mix", "train", "scratch", "dpo", "rl", *_SECTION_KEYS}


def _training_keys() -> dict[str, set[str]]:
    """`dpo` and `rl` take their command's options (DpoOptions / RlOptions fields) plus the data."""
    from dataclasses import fields

    from mens.rl.dpo import DpoOptions
    from mens.rl.grpo import RlOptions

    return {"dpo": {"data", *(f.name for f in fields(DpoOptions))},
            "rl": {"prompts", *(f.name for f in fields(RlOptions))}}


def check_keys(config: dict[str, Any], where: str) -> None:
    from mens.train.config import canonical_fields, resolve_config

    if config.get("train") is False and config.get("model"):
        raise MensError("train: false with a model: there is nothing to train the model into", where,
                        "drop `train: false` to fine-tune the model, or `model` to train a scratch base")
    for name in ("train", "scratch"):  # `mens train` fields, their TRL/HF aliases, and scratch's `data`
        if isinstance(config.get(name), dict):
            fields_ = canonical_fields(config[name], f"{where}: {name}",
                                       extra=frozenset({"data"} if name == "scratch" else ()))
            # Their values as `mens train` will check them, now rather than after the stages
            # before (the base model is the pipeline's to name: a stand-in here).
            flags = {"backend": "scratch" if name == "scratch" else "qlora", "preset": "tiny", "model": "base",
                     **{k: v for k, v in fields_.items() if k != "data"}}
            try:
                resolve_config(flags)
            except MensError as exc:
                raise MensError(exc.what, f"{where}: {name}", exc.todo) from None
    allowed = {**_SECTION_KEYS, **(_training_keys() if "dpo" in config or "rl" in config else {})}
    unknown = sorted(set(map(str, config)) - _TOP_KEYS)
    if unknown:
        raise MensError(f"unknown key(s) {', '.join(unknown)}", where,
                        f"use {', '.join(sorted(_TOP_KEYS))} (see examples/pipeline.yaml)")
    for name, keys in allowed.items():
        section = config.get(name)
        if isinstance(section, dict):
            bad = sorted(str(k) for k in section if str(k) not in keys)
            if bad:
                raise MensError(f"unknown key(s) in '{name}': {', '.join(bad)}", where,
                                f"use {', '.join(sorted(keys))}")
    _check_own_values(config, where)
    _check_mix(config, where)
    _check_training_values(config, where)


def _check_mix(config: dict[str, Any], where: str) -> None:
    """The `mix` section (a mix.yaml minus `output`), checked by the mix's own parser when the
    config is read: a `wieght: 2` or a `weight: -1` found only by the mix stage costs the corpus
    stages before it. Paths are not looked up: the stages before the mix make them."""
    from mens.corpus.mix import parse_config

    section = config.get("mix")
    if section is None:
        return
    if not isinstance(section, dict):
        raise MensError(f"mix must be a mapping, got {section!r}", where, "fix mix (see examples/pipeline.yaml)")
    if "output" in section:
        raise MensError("mix.output is set by the pipeline (WORK_DIR/data/train.jsonl)", where,
                        "leave mix.output out")
    sources = section.get("sources") or ["pairs.valid.jsonl"]  # the stage's defaults stand in when none
    parse_config({**section, "sources": sources, "output": "train.jsonl"}, Path("."), f"{where}: mix")


def _check_own_values(config: dict[str, Any], where: str) -> None:
    """The types and ranges of what the pipeline itself reads (seed, paths, corpus, generate_data,
    mix sources, bench, gate), checked when the config is read: a `bench.k: -1` found only when
    the bench stage is reached wastes the corpus and training stages before it."""
    def whole(v: Any, low: int) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= low

    def strings(v: Any) -> bool:
        return isinstance(v, list) and all(isinstance(x, str) for x in v)

    sections = {name: config.get(name) if isinstance(config.get(name), dict) else {}
                for name in ("corpus", "generate_data", "mix", "bench", "gate")}
    checks = [("seed", config.get("seed"), lambda v: whole(v, -2**63), "a whole number"),
              ("work_dir", config.get("work_dir"), lambda v: isinstance(v, str), "a path"),
              ("model", config.get("model"), lambda v: isinstance(v, str), "a model path or hub id"),
              ("corpus.sources", sections["corpus"].get("sources"), strings, "a list of folders, e.g. [vox, docs]"),
              ("corpus.langs", sections["corpus"].get("langs"), strings, "a list of grammar names, e.g. [rust]"),
              ("generate_data.count", sections["generate_data"].get("count"), lambda v: whole(v, 0), "0 or more"),
              ("generate_data.seed", sections["generate_data"].get("seed"), lambda v: whole(v, -2**63),
               "a whole number"),
              ("generate_data.copy_drills", sections["generate_data"].get("copy_drills"), lambda v: whole(v, 0),
               "0 or more"),
              ("generate_data.code_drills", sections["generate_data"].get("code_drills"), lambda v: whole(v, 0),
               "0 or more"),
              ("generate_data.lang", sections["generate_data"].get("lang"), _has_templates,
               "a language with templates (vox, python)"),
              *[(f"generate_data.{key}", sections["generate_data"].get(key),
                 lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1, "a share from 0 to 1")
                for key in ("english_names", "drill_english_names", "made_up_names", "made_up_subjects")],
              ("mix.sources", sections["mix"].get("sources"),
               lambda v: isinstance(v, list) and all(isinstance(x, str) or (isinstance(x, dict) and "path" in x)
                                                     for x in v), "a list of paths or {path, weight} mappings"),
              ("bench.path", sections["bench"].get("path"), lambda v: isinstance(v, str), "a bench file or folder"),
              ("bench.grammar", sections["bench"].get("grammar"), lambda v: isinstance(v, str), "a language name"),
              ("bench.seed", sections["bench"].get("seed"), lambda v: whole(v, -2**63), "a whole number"),
              ("bench.temperature", sections["bench"].get("temperature"),
               lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf"),
               "0 (greedy) or more"),
              ("bench.compare_base", sections["bench"].get("compare_base"), lambda v: isinstance(v, bool),
               "true or false"),
              ("gate.policy", sections["gate"].get("policy"), lambda v: isinstance(v, str), "a gate policy YAML")]
    checks += [(f"bench.{key}", sections["bench"].get(key), lambda v: whole(v, 1), "a whole number, 1 or more")
               for key in ("k", "samples", "limit", "max_new_tokens", "batch_size")]
    for key, value, ok, want in checks:
        if value is not None and not ok(value):
            raise MensError(f"{key} must be {want}, got {value!r}", where, f"fix {key} (see examples/pipeline.yaml)")


def _has_templates(lang: Any) -> bool:
    from mens.corpus.synth.generate import LANGS  # the templates: imported only when a config names a lang

    return lang in LANGS


def _check_training_values(config: dict[str, Any], where: str) -> None:
    """The `dpo:` / `rl:` values, checked when the config is read rather than when the stage is
    reached after corpus and training (DpoOptions.check, RlOptions.check)."""
    if not isinstance(config.get("dpo"), dict) and not isinstance(config.get("rl"), dict):
        return
    from mens.rl.dpo import DpoOptions
    from mens.rl.grpo import RlOptions

    for name, cls, data in (("dpo", DpoOptions, "data"), ("rl", RlOptions, "prompts")):
        section = config.get(name)
        if isinstance(section, dict):
            values = {str(k): v for k, v in section.items() if k != data}
            cls(**{"seed": config.get("seed", 0), **values}).check(f"{where}: {name}")


def select(stages: list[Stage], names: str | None) -> list[Stage]:
    if not names:
        return stages
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {s.name for s in stages}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise MensError(f"unknown stage(s): {', '.join(unknown)}", "--stages",
                        f"choose from {', '.join(s.name for s in stages)}")
    return [s for s in stages if s.name in wanted]


# ---------------------------------------------------------------- the run

def run_pipeline(ctx: Context, stages: list[Stage], *, dry_run: bool = False,
                 on_stage: Callable[[StageOutcome], None] | None = None) -> list[StageOutcome]:
    """Run (or, dry, plan) the stages in order. Returns one outcome per stage; raises the first
    failure's error after recording it (GateFailure from the gate only after card and report).
    A run holds the work dir's lock: a second pipeline on it stops at once (files.hold_lock)."""
    if dry_run:
        return _run_stages(ctx, stages, dry_run, on_stage)
    hold_lock(ctx.work, "pipeline work dir")
    try:
        return _run_stages(ctx, stages, dry_run, on_stage)
    finally:
        release_lock(ctx.work)


def _run_stages(ctx: Context, stages: list[Stage], dry_run: bool,
                on_stage: Callable[[StageOutcome], None] | None) -> list[StageOutcome]:
    if not dry_run:  # a dry run writes nothing, not even an empty work dir
        ctx.work.mkdir(parents=True, exist_ok=True)
    state = load_state(ctx.work)
    outcomes: list[StageOutcome] = []
    gate_failure: GateFailure | None = None
    upstream_runs = False  # dry run: once a stage would run, downstream inputs are not yet known
    for stage in stages:
        skip_reason = stage.needed(ctx)
        if skip_reason:
            outcome = StageOutcome(stage.name, "not needed", skip_reason)
            _emit(outcomes, outcome, on_stage)
            continue
        old = state["stages"].get(stage.name)
        fp, reason = stage_check(ctx, state, stage)
        if reason is None and not (dry_run and upstream_runs):
            ctx.figures[stage.name] = old.get("figures", {})
            _emit(outcomes, StageOutcome(stage.name, "skipped", "unchanged", 0.0, old.get("figures", {})), on_stage)
            continue
        if dry_run:
            reason = reason or "may run: an earlier stage runs first"
            upstream_runs = True
            _emit(outcomes, StageOutcome(stage.name, "planned", reason), on_stage)
            continue
        # A stage that was cut off (Ctrl+C, a crash) with the same inputs, config and packs may
        # resume its own work — training continues from its last checkpoint instead of starting
        # over. A change to mens's own code alone does not throw hours of training away: the
        # stage resumes and says so (training itself refuses a checkpoint of another config).
        attempts = state.setdefault("attempts", {})
        ctx.resume = resumable(attempts.get(stage.name), fp)
        if ctx.resume and attempts[stage.name] != fp["digest"] and attempts[stage.name].get("digest") != fp["digest"]:
            say(f"[{stage.name}] resuming the interrupted run although mens's code changed since it started")
        attempts[stage.name] = {"digest": fp["digest"], "work": work_digest(fp)}
        save_state(ctx.work, state)
        started = time.time()
        try:
            figures = stage.run(ctx) or {}
        except GateFailure as exc:
            if stage.name != "gate":
                _emit(outcomes, StageOutcome(stage.name, "failed", reason, time.time() - started, error=str(exc)), on_stage)
                raise
            gate_failure, figures = exc, getattr(exc, "figures", {})
        except MensError as exc:
            _emit(outcomes, StageOutcome(stage.name, "failed", reason, time.time() - started, error=exc.format()), on_stage)
            raise
        except Exception as exc:
            _emit(outcomes, StageOutcome(stage.name, "failed", reason, time.time() - started,
                                         error=f"{type(exc).__name__}: {exc}"), on_stage)
            raise
        seconds = time.time() - started
        ctx.figures[stage.name] = figures
        status = "failed" if gate_failure is not None and stage.name == "gate" else "ran"
        entry = {"fingerprint": fp, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "seconds": round(seconds, 2), "figures": figures}
        attempts.pop(stage.name, None)
        if status == "ran":
            state["stages"][stage.name] = entry
        else:
            state["stages"].pop(stage.name, None)  # a failed gate re-runs next time
        save_state(ctx.work, state)
        _emit(outcomes, StageOutcome(stage.name, status, reason, seconds, figures,
                                     error=str(gate_failure) if status == "failed" else None), on_stage)
    if gate_failure is not None:
        raise gate_failure
    return outcomes


def _emit(outcomes: list[StageOutcome], outcome: StageOutcome, on_stage) -> None:
    outcomes.append(outcome)
    if on_stage:
        on_stage(outcome)


def format_figures(figures: dict[str, Any]) -> str:
    parts = []
    for k, v in figures.items():
        if isinstance(v, float):
            v = f"{v:.4g}"
        parts.append(f"{k} {v}")
    return ", ".join(parts)
