"""`mens pipeline`: run the stages in order, skipping each one whose inputs are unchanged.

    extract → pairs → validate → generate-data → mix → eval → train-scratch-base → train
            → [dpo → rl] → bench → gate → card → report

(dpo and rl run only when the config has a `dpo:` / `rl:` section; bench and what follows then
judge the last of them.)

Each stage declares its input paths, its parameters, the language packs it depends on and its
outputs (`mens.stage.Stage`: mens.corpus.stages and mens.pipeline.stages list them). Before running a stage the engine fingerprints the inputs'
contents, the parameters, the packs' `fingerprint()` and the source of the mens code that makes
the outputs (`mens.fingerprint`); when all of these equal what
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

from mens.errors import GateFailure, MensError, did_you_mean
from mens.fingerprint import CONTENT_HASH_LIMIT, fingerprint_block, input_hashes
from mens.files import hold_lock, release_lock, write_json_atomic
from mens.progress import say
from mens.stage import Context, Stage, whole

STATE_NAME = "pipeline_state.json"


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
    packs and code (`mens.fingerprint`)."""
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


def resumable(attempt: dict | None, fp: dict[str, Any]) -> bool:
    """Whether an interrupted attempt (pipeline_state.json's `attempts`) may be resumed now: the
    same inputs, params and packs."""
    return isinstance(attempt, dict) and attempt.get("work") == work_digest(fp)


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

def load_config(path: str | Path, model: str | None = None, stages: list[Stage] | None = None) -> Context:
    """The config at `path`, checked whole before any stage runs: its own keys here, each
    stage's section by the stage that owns it (`Stage.validate`; all stages, whatever --stages
    picks, so a config stays valid as a whole)."""
    from mens.files import read_yaml

    path = Path(path)
    config = read_yaml(path, "pipeline config", "give a YAML file like examples/pipeline.yaml") or {}
    if not isinstance(config, dict):
        raise MensError("pipeline config must be a mapping", str(path), "see examples/pipeline.yaml")
    if stages is None:
        from mens.pipeline.stages import all_stages

        stages = all_stages()
    base = path.resolve().parent
    _check_own_keys(config, str(path), stages)
    work = Path(str(config.get("work_dir") or "out/pipeline"))
    work = (work if work.is_absolute() else base / work).resolve()
    configured = config.get("model")  # a folder beside the config (the shipped base) or a hub id
    if isinstance(configured, str) and (base / os.path.expanduser(configured)).exists():
        configured = str((base / os.path.expanduser(configured)).resolve())
    ctx = Context(config=config, base_dir=base, work=work, model=model or configured)
    for stage in stages:
        stage.validate(ctx, str(path))
    for stage in stages:
        if stage.preflight is not None:
            stage.preflight(ctx, str(path))
    return ctx


# The keys the pipeline reads itself; every other top-level key is a stage's section.
_OWN = {"work_dir": (lambda v: isinstance(v, str), "a path"),
        "seed": (whole(-2**63), "a whole number"),
        "model": (lambda v: isinstance(v, str), "a model path or hub id")}


def _check_own_keys(config: dict[str, Any], where: str, stages: list[Stage]) -> None:
    """A misspelt key (`max_step:`) is an error, not a silent default; a `seed: abc` is found
    when the config is read, not by the stage that reads it after others have run."""
    known = set(_OWN) | {s.section for s in stages if s.section}
    unknown = sorted(set(map(str, config)) - known)
    if unknown:
        raise MensError(f"unknown key(s) {', '.join(unknown)}", where,
                        did_you_mean(unknown[0], known, f"use {', '.join(sorted(known))} (see examples/pipeline.yaml)"))
    for key, (ok, want) in _OWN.items():
        if config.get(key) is not None and not ok(config[key]):
            raise MensError(f"{key} must be {want}, got {config[key]!r}", where, f"fix {key} (see examples/pipeline.yaml)")


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
        if ctx.resume and attempts[stage.name].get("digest") != fp["digest"]:
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
