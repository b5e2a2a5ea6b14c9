"""The training stages of `mens pipeline`: the scratch base, the fine-tune, and the optional
preference (`dpo:`) and RL (`rl:`) runs, each a call of the function its CLI command wraps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from mens.errors import MensError
from mens.pipeline.judging import base_source, held_out
from mens.stage import Context


def _train_flags(ctx: Context, section: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """`mens train` fields from a config section; paths in it resolved like every config path."""
    from mens.train.config import canonical_fields

    flags = dict(defaults)
    flags.update(canonical_fields(ctx.section(section), f"pipeline config: {section}", frozenset({"data"})))
    flags.setdefault("seed", int(ctx.config.get("seed", 0)))
    for key in ("data", "bench", "raw_text", "curriculum_data"):
        if flags.get(key):
            flags[key] = str(ctx.path(flags[key]).resolve())
    if flags.get("bench"):  # the curves while training measure what the bench stage measures
        flags.setdefault("bench_max_new_tokens", int(ctx.section("bench").get("max_new_tokens", 256)))
        flags.setdefault("bench_batch_size", int(ctx.section("bench").get("batch_size", 8)))
    return flags


def check_training(name: str) -> Callable[[Context, str], None]:
    """The `train:` / `scratch:` section: `mens train` fields (their TRL/HF aliases, and scratch's
    `data`), and their values as `mens train` will check them, when the config is read rather
    than after the stages before (the base model is the pipeline's to name: a stand-in here)."""
    def check(ctx: Context, where: str) -> None:
        from mens.train.config import canonical_fields, resolve_config

        section = ctx.config.get(name)
        if name == "train" and section is False and ctx.config.get("model"):
            raise MensError("train: false with a model: there is nothing to train the model into", where,
                            "drop `train: false` to fine-tune the model, or `model` to train a scratch base")
        if not isinstance(section, dict):
            return
        fields_ = canonical_fields(section, f"{where}: {name}", extra=frozenset({"data"} if name == "scratch" else ()))
        flags = {"backend": "scratch" if name == "scratch" else "qlora", "preset": "tiny", "model": "base",
                 **{k: v for k, v in fields_.items() if k != "data"}}
        try:
            resolve_config(flags)
        except MensError as exc:
            raise MensError(exc.what, f"{where}: {name}", exc.todo) from None

    return check


def check_rl_section(name: str) -> Callable[[Context, str], None]:
    """The `dpo:` / `rl:` section: its command's options (DpoOptions / RlOptions, which check
    their own values) plus its data, when the config is read rather than after training."""
    def check(ctx: Context, where: str) -> None:
        section = ctx.config.get(name)
        if not isinstance(section, dict):
            return
        from dataclasses import fields

        from mens.errors import did_you_mean
        from mens.rl.dpo import DpoOptions
        from mens.rl.grpo import RlOptions

        cls, data = (DpoOptions, "data") if name == "dpo" else (RlOptions, "prompts")
        keys = {data, *(f.name for f in fields(cls))}
        bad = sorted(str(k) for k in section if str(k) not in keys)
        if bad:
            raise MensError(f"unknown key(s) in '{name}': {', '.join(bad)}", where,
                            did_you_mean(bad[0], keys, f"use {', '.join(sorted(keys))}"))
        values = {str(k): v for k, v in section.items() if k != data}
        cls(**{"seed": ctx.config.get("seed", 0), **values}).check(f"{where}: {name}")

    return check


def scratch_params(ctx: Context) -> dict[str, Any]:
    return _train_flags(ctx, "scratch", {"backend": "scratch", "preset": "tiny"})


def scratch_inputs(ctx: Context) -> list[Path]:
    """The base's training data: `scratch.data` (a pairs file) when given, else the mix; plus
    `scratch.raw_text` (a folder of text trained on whole, e.g. the sources) and
    `scratch.curriculum_data` (pairs trained on first, e.g. the copy drills)."""
    p = scratch_params(ctx)
    return [Path(p["data"]) if p.get("data") else ctx.work_file("data", "train.jsonl")] + \
        [Path(p[key]) for key in ("raw_text", "curriculum_data") if p.get(key)]


def train_params(ctx: Context) -> dict[str, Any]:
    return {**_train_flags(ctx, "train", {"backend": "qlora", "preset": "tiny"}), "model": base_source(ctx)}


def base_inputs(ctx: Context) -> list[Path]:
    p = Path(os.path.expanduser(base_source(ctx)))
    return [p] if ctx.model is None or p.exists() else []  # a hub id: its name is in the params


def _train_into(ctx: Context, flags: dict[str, Any], out: Path, data_dir: Path) -> dict[str, Any]:
    from mens.train.config import resolve_config
    from mens.train.loop import train

    flags = {**{k: v for k, v in flags.items() if k != "data"}, "data_dir": str(data_dir), "output_dir": str(out)}
    cfg = resolve_config(flags)
    # A stale run must start over (resuming would continue the old trajectory); a run that was
    # interrupted with these very inputs continues from its last checkpoint.
    from mens.train.launch import launches_ranks

    if launches_ranks(cfg):  # `nproc: N`: the ranks are processes of their own
        return _train_in_ranks(cfg, force_restart=not ctx.resume)
    outcome = train(cfg, force_restart=not ctx.resume)
    if outcome.status not in ("completed", "already-completed"):
        raise MensError(f"training ended with status {outcome.status}", str(out), "re-run the pipeline to resume")
    return {"steps": outcome.steps, "final_loss": outcome.final_loss, "val_loss": outcome.val_loss}


def _train_in_ranks(cfg, force_restart: bool) -> dict[str, Any]:
    """The stage's run in cfg.nproc local processes (mens.train.launch); its figures from the
    manifest rank 0 wrote."""
    from mens.hf import read_manifest
    from mens.train.launch import launch

    code = launch(cfg, force_restart)
    if code == 130:
        raise KeyboardInterrupt
    manifest = read_manifest(Path(cfg.output_dir)) if code == 0 else {}
    if manifest.get("status") != "completed":
        raise MensError(f"training ended with exit code {code}", str(cfg.output_dir),
                        "see the lines above; re-run the pipeline to resume")
    res = manifest.get("results", {})
    return {"steps": res.get("steps"), "final_loss": res.get("final_loss"), "val_loss": res.get("val_loss")}


def stage_scratch(ctx: Context) -> dict[str, Any]:
    # `scratch.data` (any pairs file) is handed to `mens train` as is: base/training_manifest.json
    # records its path and sha256, so the base still says what it learnt from.
    params = scratch_params(ctx)
    data_dir = Path(params["data"]) if params.get("data") else ctx.work_file("data")
    return _train_into(ctx, params, ctx.work_file("base"), data_dir)


def stage_train(ctx: Context) -> dict[str, Any]:
    return _train_into(ctx, train_params(ctx), ctx.work_file("run"), ctx.work_file("data"))


def after_sft(ctx: Context, stage: str) -> Path:
    """The run a stage starts from: dpo from the fine-tune, rl from dpo when there is one."""
    return ctx.work_file("dpo") if stage == "rl" and "dpo" in ctx.config else ctx.work_file("run")


def off(name: str) -> Callable[[Context], str | None]:
    return lambda ctx: None if name in ctx.config else f"no `{name}:` section in the config"


def dpo_params(ctx: Context) -> dict[str, Any]:
    from dataclasses import asdict

    from mens.rl.dpo import DpoOptions

    sec = dict(ctx.section("dpo"))
    data = sec.pop("data", None)
    opts = DpoOptions(**{"seed": int(ctx.config.get("seed", 0)), **sec}).check("pipeline config: dpo")
    return {"data": str(ctx.path(data).resolve()) if data else None, **asdict(opts)}


def dpo_data(ctx: Context) -> Path:
    data = dpo_params(ctx)["data"]
    return Path(data) if data else ctx.work_file("corpus", "pairs.valid.jsonl")


def stage_dpo(ctx: Context) -> dict[str, Any]:
    from mens.rl.cli import _refuse_bench_overlap
    from mens.rl.dpo import DpoOptions, dpo

    params, bench = dpo_params(ctx), held_out(ctx)
    data = params.pop("data")
    if data is None:  # pairs from the corpus's error-correction lane, bench tasks dropped
        from mens.corpus.prefs import make_prefs

        data = ctx.work_file("corpus", "prefs.jsonl")
        make_prefs([ctx.work_file("corpus", "pairs.valid.jsonl")], data, bench=bench)
    elif bench is not None:
        _refuse_bench_overlap(bench, Path(data))
    trainer = dpo(str(after_sft(ctx, "dpo")), data, ctx.work_file("dpo"), DpoOptions(**params),
                  force_restart=not ctx.resume)
    last = next((h for h in reversed(trainer.state.log_history) if "rewards/margins" in h), {})
    return {"steps": trainer.state.global_step, "reward margin": last.get("rewards/margins")}


def rl_params(ctx: Context) -> dict[str, Any]:
    from dataclasses import asdict

    from mens.rl.grpo import RlOptions

    sec = dict(ctx.section("rl"))
    prompts = sec.pop("prompts", None)
    if not prompts:
        raise MensError("no rl prompts", "pipeline config: rl.prompts",
                        "give a JSONL of {prompt, lang?, expect_contains?, tests?} (docs/rl.md)")
    opts = RlOptions(**{"seed": int(ctx.config.get("seed", 0)), **sec}).check("pipeline config: rl")
    return {"prompts": str(ctx.path(prompts).resolve()), **asdict(opts)}


def stage_rl(ctx: Context) -> dict[str, Any]:
    from mens.rl.grpo import RlOptions, grpo

    params = rl_params(ctx)
    prompts = params.pop("prompts")
    trainer = grpo(str(after_sft(ctx, "rl")), prompts, ctx.work_file("rl"), RlOptions(**params), bench=held_out(ctx),
                   force_restart=not ctx.resume)
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    return {"steps": trainer.state.global_step, "first reward": rewards[0] if rewards else None,
            "last reward": rewards[-1] if rewards else None}
