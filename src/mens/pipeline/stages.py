"""The stages of `mens pipeline`: what each reads, writes and depends on, and the call that does
the work. Each `run` calls the stage's own Python function (the same one its CLI command wraps)
and returns a few key figures for the summary table.

Work-dir layout (all under the config's `work_dir`, e.g. `out/quickstart/`):

    corpus/units.jsonl  pairs.jsonl  pairs.valid.jsonl  quarantine.jsonl  synthetic.jsonl
           copy_drills.jsonl (with generate_data.copy_drills: a scratch base's curriculum)
    data/train.jsonl (+ mix report)  eval_results.json
    base/   the tiny scratch base model (HF dir)      run/   the fine-tuned run (adapter, manifest,
    telemetry, eval/bench results, gate receipt, MODEL_CARD.md, report.html)
    dpo/  rl/   the optional `mens dpo` / `mens rl` runs (config sections `dpo:` / `rl:`), each over
    the one before it; the last run made is the one bench, gate, card and report judge
    corpus/prefs.jsonl   dpo's preference pairs (`mens corpus prefs` on pairs.valid.jsonl)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable

from mens.errors import GateFailure, MensError
from mens.pipeline.runner import Context, Stage

RESULT_FILES = {"benchmark_results.json", "gate_receipt.json", "eval_results.json", "MODEL_CARD.md",
                "report.html", "telemetry.jsonl"}


def _p(ctx: Context, *parts: str) -> Path:
    return ctx.work.joinpath(*parts)


def _langs(ctx: Context) -> list[str]:
    return list(ctx.section("corpus").get("langs") or [])


def _all_packs(ctx: Context) -> list[str]:
    from mens.lang import builtin_names

    return builtin_names() + [n for n in _langs(ctx) if n not in builtin_names()]


# ---------------------------------------------------------------- corpus

def _sources(ctx: Context) -> list[Path]:
    sources = ctx.section("corpus").get("sources") or []
    if not sources:
        raise MensError("no corpus sources", "pipeline config: corpus.sources", "list source and docs folders")
    return [ctx.path(s) for s in sources]


def _extract(ctx: Context) -> dict[str, Any]:
    from mens.corpus.extract import extract

    rep = extract(_sources(ctx), _p(ctx, "corpus", "units.jsonl"), langs=_langs(ctx))
    return {"units": rep.counts["units"], "files": rep.counts["files_used"]}


def _pairs(ctx: Context) -> dict[str, Any]:
    from mens.corpus.pairs import make_pairs

    rep = make_pairs(_p(ctx, "corpus", "units.jsonl"), _p(ctx, "corpus", "pairs.jsonl"),
                     seed=int(ctx.config.get("seed", 0)))
    return {"pairs": rep.counts["pairs"]}


def _validate(ctx: Context) -> dict[str, Any]:
    from mens.corpus.validate import validate

    rep = validate(_p(ctx, "corpus", "pairs.jsonl"), _p(ctx, "corpus", "pairs.valid.jsonl"),
                   quarantine=_p(ctx, "corpus", "quarantine.jsonl"))
    return {"kept": rep.counts["kept"], "rejected": rep.counts["rejected"]}


def _gen_params(ctx: Context) -> dict[str, Any]:
    sec = ctx.section("generate_data")
    params = {"count": int(sec.get("count", 0)), "seed": int(sec.get("seed", ctx.config.get("seed", 0)))}
    if sec.get("copy_drills"):
        params["copy_drills"] = int(sec["copy_drills"])
    return params


def _gen_outputs(ctx: Context) -> list[Path]:
    return [_p(ctx, "corpus", "synthetic.jsonl")] + \
        ([_p(ctx, "corpus", "copy_drills.jsonl")] if _gen_params(ctx).get("copy_drills") else [])


def _generate(ctx: Context) -> dict[str, Any]:
    from mens.corpus.synth.drills import copy_drills
    from mens.corpus.synth.generate import SynthStats, generate
    from mens.records import write_jsonl_atomic

    p = _gen_params(ctx)
    stats = SynthStats()
    n = write_jsonl_atomic(_p(ctx, "corpus", "synthetic.jsonl"), generate(p["count"], p["seed"], stats=stats))
    if p.get("copy_drills"):  # a scratch base's curriculum (scratch.curriculum_data)
        write_jsonl_atomic(_p(ctx, "corpus", "copy_drills.jsonl"), copy_drills(p["copy_drills"], p["seed"]))
        return {"rows": n, "copy_drills": p["copy_drills"]}
    return {"rows": n}


# ---------------------------------------------------------------- data

def _mix_sources(ctx: Context) -> list[dict[str, Any]]:
    sec = ctx.section("mix")
    sources = sec.get("sources") or [{"path": "{work_dir}/corpus/pairs.valid.jsonl"},
                                     {"path": "{work_dir}/corpus/synthetic.jsonl", "optional": True}]
    out = []
    for src in sources:
        src = {"path": src} if isinstance(src, str) else dict(src)
        src["path"] = str(ctx.path(src["path"]).resolve())
        out.append(src)
    return out


def _mix_params(ctx: Context) -> dict[str, Any]:
    sec = dict(ctx.section("mix"))
    sec["sources"] = _mix_sources(ctx)
    sec.setdefault("seed", int(ctx.config.get("seed", 0)))
    return sec


def _mix(ctx: Context) -> dict[str, Any]:
    from mens.corpus.mix import mix_pairs, parse_config

    # The `mix` section is a mix.yaml minus `output`: validated by the same parser, handed over
    # as a MixConfig. The mix report beside train.jsonl records the spec it was made from.
    where = "pipeline config: mix"
    spec = {**_mix_params(ctx), "output": str(_p(ctx, "data", "train.jsonl").resolve())}
    rep = mix_pairs(parse_config(spec, _p(ctx, "data"), where), where=where)
    return {"rows": rep.counts["output_rows"]}


def _eval(ctx: Context) -> dict[str, Any]:
    from mens.corpus.evaluate import evaluate

    res = evaluate(_p(ctx, "data", "train.jsonl"), _p(ctx, "data", "eval_results.json"))
    return {"parse_rate": res["parse_rate"], "coverage_pct": res["construct_coverage_pct"]}


# ---------------------------------------------------------------- training

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
    return flags


def _scratch_params(ctx: Context) -> dict[str, Any]:
    return _train_flags(ctx, "scratch", {"backend": "scratch", "preset": "tiny"})


def _scratch_inputs(ctx: Context) -> list[Path]:
    """The base's training data: `scratch.data` (a pairs file) when given, else the mix; plus
    `scratch.raw_text` (a folder of text trained on whole, e.g. the sources) and
    `scratch.curriculum_data` (pairs trained on first, e.g. the copy drills)."""
    p = _scratch_params(ctx)
    return [Path(p["data"]) if p.get("data") else _p(ctx, "data", "train.jsonl")] + \
        [Path(p[key]) for key in ("raw_text", "curriculum_data") if p.get(key)]


def _base_source(ctx: Context) -> str:
    """The model the fine-tune starts from: --model, else the scratch base."""
    return ctx.model if ctx.model else str(_p(ctx, "base"))


def _train_params(ctx: Context) -> dict[str, Any]:
    return {**_train_flags(ctx, "train", {"backend": "qlora", "preset": "tiny"}), "model": _base_source(ctx)}


def _base_inputs(ctx: Context) -> list[Path]:
    p = Path(os.path.expanduser(_base_source(ctx)))
    return [p] if ctx.model is None or p.exists() else []  # a hub id: its name is in the params


def _run_train(ctx: Context, flags: dict[str, Any], out: Path, data_dir: Path) -> dict[str, Any]:
    from mens.train.config import resolve_config
    from mens.train.loop import train

    flags = {**{k: v for k, v in flags.items() if k != "data"}, "data_dir": str(data_dir), "output_dir": str(out)}
    cfg = resolve_config(flags)
    # A stale run must start over (resuming would continue the old trajectory); a run that was
    # interrupted with these very inputs continues from its last checkpoint.
    outcome = train(cfg, force_restart=not ctx.resume)
    if outcome.status not in ("completed", "already-completed"):
        raise MensError(f"training ended with status {outcome.status}", str(out), "re-run the pipeline to resume")
    return {"steps": outcome.steps, "final_loss": outcome.final_loss, "val_loss": outcome.val_loss}


def _scratch(ctx: Context) -> dict[str, Any]:
    # `scratch.data` (any pairs file) is handed to `mens train` as is: base/training_manifest.json
    # records its path and sha256, so the base still says what it learnt from.
    params = _scratch_params(ctx)
    return _run_train(ctx, params, _p(ctx, "base"), Path(params["data"]) if params.get("data") else _p(ctx, "data"))


def _train(ctx: Context) -> dict[str, Any]:
    return _run_train(ctx, _train_params(ctx), _p(ctx, "run"), _p(ctx, "data"))


def _model_files(run: Path) -> list[Path]:
    """What a run's model is made of (not the results later stages add to the run dir)."""
    if not run.is_dir():
        return [run]
    return sorted(f for f in run.iterdir() if f.is_file() and f.name not in RESULT_FILES and not f.name.startswith("."))


# ---------------------------------------------------------------- preference and RL training (optional)

def _after_sft(ctx: Context, stage: str) -> Path:
    """The run a stage starts from: dpo from the fine-tune, rl from dpo when there is one."""
    return _p(ctx, "dpo") if stage == "rl" and "dpo" in ctx.config else _p(ctx, "run")


def final_run(ctx: Context) -> Path:
    """The run bench, gate, card and report judge: the last training stage's."""
    return next((_p(ctx, n) for n in ("rl", "dpo") if n in ctx.config), _p(ctx, "run"))


def _off(name: str) -> Callable[[Context], str | None]:
    return lambda ctx: None if name in ctx.config else f"no `{name}:` section in the config"


def _held_out(ctx: Context) -> Path | None:
    bench = ctx.path(_bench_params(ctx)["path"])
    return bench if bench.exists() else None


def _dpo_params(ctx: Context) -> dict[str, Any]:
    from dataclasses import asdict

    from mens.rl.dpo import DpoOptions

    sec = dict(ctx.section("dpo"))
    data = sec.pop("data", None)
    opts = DpoOptions(**{"seed": int(ctx.config.get("seed", 0)), **sec}).check("pipeline config: dpo")
    return {"data": str(ctx.path(data).resolve()) if data else None, **asdict(opts)}


def _dpo_data(ctx: Context) -> Path:
    data = _dpo_params(ctx)["data"]
    return Path(data) if data else _p(ctx, "corpus", "pairs.valid.jsonl")


def _dpo(ctx: Context) -> dict[str, Any]:
    from mens.rl.cli import _refuse_bench_overlap
    from mens.rl.dpo import DpoOptions, dpo

    params, bench = _dpo_params(ctx), _held_out(ctx)
    data = params.pop("data")
    if data is None:  # pairs from the corpus's error-correction lane, bench tasks dropped
        from mens.corpus.prefs import make_prefs

        data = _p(ctx, "corpus", "prefs.jsonl")
        make_prefs([_p(ctx, "corpus", "pairs.valid.jsonl")], data, bench=bench)
    elif bench is not None:
        _refuse_bench_overlap(bench, Path(data))
    trainer = dpo(str(_after_sft(ctx, "dpo")), data, _p(ctx, "dpo"), DpoOptions(**params),
                  force_restart=not ctx.resume)
    last = next((h for h in reversed(trainer.state.log_history) if "rewards/margins" in h), {})
    return {"steps": trainer.state.global_step, "reward margin": last.get("rewards/margins")}


def _rl_params(ctx: Context) -> dict[str, Any]:
    from dataclasses import asdict

    from mens.rl.grpo import RlOptions

    sec = dict(ctx.section("rl"))
    prompts = sec.pop("prompts", None)
    if not prompts:
        raise MensError("no rl prompts", "pipeline config: rl.prompts",
                        "give a JSONL of {prompt, lang?, expect_contains?, tests?} (docs/rl.md)")
    opts = RlOptions(**{"seed": int(ctx.config.get("seed", 0)), **sec}).check("pipeline config: rl")
    return {"prompts": str(ctx.path(prompts).resolve()), **asdict(opts)}


def _rl(ctx: Context) -> dict[str, Any]:
    from mens.rl.grpo import RlOptions, grpo

    params = _rl_params(ctx)
    prompts = params.pop("prompts")
    trainer = grpo(str(_after_sft(ctx, "rl")), prompts, _p(ctx, "rl"), RlOptions(**params), bench=_held_out(ctx),
                   force_restart=not ctx.resume)
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    return {"steps": trainer.state.global_step, "first reward": rewards[0] if rewards else None,
            "last reward": rewards[-1] if rewards else None}


# ---------------------------------------------------------------- evaluation

def _bench_params(ctx: Context) -> dict[str, Any]:
    sec = ctx.section("bench")
    return {"k": int(sec.get("k", 1)), "samples": sec.get("samples"), "temperature": float(sec.get("temperature", 0.0)),
            "seed": int(sec.get("seed", ctx.config.get("seed", 0))), "limit": sec.get("limit"),
            "max_new_tokens": int(sec.get("max_new_tokens", 256)), "batch_size": int(sec.get("batch_size", 8)),
            "path": str(sec.get("path", "bench")), "grammar": sec.get("grammar") or None,
            "compare_base": bool(sec.get("compare_base", True))}


# The figures of a bench run that the results document repeats for the grammar and base runs.
_RATES = ("n_tasks", "pass_at_1", "pass_at_k", "parse_rate", "semantic_pass_rate", "anti_stub_rate")


def _bench(ctx: Context) -> dict[str, Any]:
    """The held-out bench on the fine-tuned run; with `bench.grammar` also in grammar mode, and
    with `bench.compare_base` (default) also on the model the fine-tune started from, so a gate
    can refuse a fine-tune that made the base worse (`bench.vs_base.*_drop`)."""
    from mens.evaluate.bench import run_bench
    from mens.records import write_json_atomic

    p = _bench_params(ctx)
    opts = dict(k=p["k"], n=p["samples"], temperature=p["temperature"], seed=p["seed"], limit=p["limit"],
                max_new_tokens=p["max_new_tokens"], batch_size=p["batch_size"])
    bench = ctx.path(p["path"])
    res = run_bench(final_run(ctx), bench, **opts,
                    train_data=[t for t in [_p(ctx, "data", "train.jsonl")] if t.is_file()])
    figures = {"tasks": res["n_tasks"], "pass@1": res["pass_at_1"], "parses": res["parse_rate"]}
    if p["grammar"]:
        constrained = run_bench(final_run(ctx), bench, **opts, grammar=p["grammar"])
        res["grammar"] = {"lang": p["grammar"], **{k: constrained[k] for k in _RATES}}
        figures.update({"pass@1 (grammar)": constrained["pass_at_1"], "parses (grammar)": constrained["parse_rate"]})
    if p["compare_base"]:
        base = run_bench(_base_source(ctx), bench, **opts)
        res["base"] = {"model": _base_source(ctx), **{k: base[k] for k in _RATES}}
        res["vs_base"] = {"pass_at_1_drop": base["pass_at_1"] - res["pass_at_1"],
                          "parse_rate_drop": base["parse_rate"] - res["parse_rate"]}
        figures.update({"base pass@1": base["pass_at_1"], "base parses": base["parse_rate"]})
    res["items"] = res.pop("items")  # the summary first in the file, the per-item detail last
    write_json_atomic(final_run(ctx) / "benchmark_results.json", res)
    if res.get("contamination", {}).get("contaminated"):
        figures["contaminated"] = len(res["contamination"]["contaminated"])
    return figures


def _policy(ctx: Context) -> Path:
    return ctx.path(ctx.section("gate").get("policy", "gates.yaml"))


def _gate(ctx: Context) -> dict[str, Any]:
    from mens.evaluate.gates import run_gates
    from mens.records import atomic_path

    run = final_run(ctx)
    # The run dir carries its own eval results, so gate, card and report read one folder.
    with atomic_path(run / "eval_results.json") as tmp:
        shutil.copyfile(_p(ctx, "data", "eval_results.json"), tmp)
    receipt = run_gates(run, _policy(ctx))
    figures = {"passed": receipt["passed"], "warnings": len(receipt["warnings"])}
    if not receipt["passed"]:
        exc = GateFailure(f"blocking gate(s) failed: {', '.join(receipt['blocking_failures'])}")
        exc.figures = figures
        raise exc
    return figures


def _card(ctx: Context) -> dict[str, Any]:
    from mens.evaluate.card import write_card

    return {"card": str(write_card(final_run(ctx)))}


def _report(ctx: Context) -> dict[str, Any]:
    from mens.evaluate.report import write_report

    return {"report": str(write_report(final_run(ctx)))}


def _run_results(ctx: Context, *names: str) -> list[Path]:
    return [final_run(ctx) / n for n in names]


# The mens code each stage's outputs depend on (its fingerprint hashes their sources). The corpus
# stages' reports carry fingerprint blocks, so the fingerprint module is part of their code.
_CORPUS = ("mens.corpus", "mens.records", "mens.pipeline.fingerprint")
_TRAIN = ("mens.train", "mens.records", "mens.hf")
_EVALUATE = ("mens.evaluate",)
_RL = ("mens.rl", "mens.hf", "mens.records")

STAGES: list[Stage] = [
    Stage("extract", inputs=_sources, outputs=lambda c: [_p(c, "corpus", "units.jsonl")], run=_extract,
          params=lambda c: {"langs": _langs(c)}, packs=_all_packs, code=_CORPUS,
          help="split sources and docs into units (language packs)"),
    Stage("pairs", inputs=lambda c: [_p(c, "corpus", "units.jsonl")], outputs=lambda c: [_p(c, "corpus", "pairs.jsonl")],
          run=_pairs, params=lambda c: {"seed": int(c.config.get("seed", 0))}, code=_CORPUS,
          help="units → instruction pairs"),
    Stage("validate", inputs=lambda c: [_p(c, "corpus", "pairs.jsonl")],
          outputs=lambda c: [_p(c, "corpus", "pairs.valid.jsonl")], run=_validate, packs=_all_packs, code=_CORPUS,
          help="parse, dedupe, quarantine"),
    Stage("generate-data", inputs=lambda c: [], outputs=_gen_outputs, run=_generate,
          params=_gen_params, packs=lambda c: ["vox"], code=_CORPUS,
          needed=lambda c: None if _gen_params(c)["count"] > 0 else "generate_data.count is 0",
          help="synthetic Vox pairs that parse"),
    Stage("mix", inputs=lambda c: [Path(s["path"]) for s in _mix_sources(c)],
          outputs=lambda c: [_p(c, "data", "train.jsonl")], run=_mix, params=_mix_params, code=_CORPUS,
          help="weighted mix → train.jsonl"),
    Stage("eval", inputs=lambda c: [_p(c, "data", "train.jsonl")], outputs=lambda c: [_p(c, "data", "eval_results.json")],
          run=_eval, packs=_all_packs, code=_CORPUS, help="corpus parse rate and coverage"),
    Stage("train-scratch-base", inputs=_scratch_inputs,
          outputs=lambda c: [_p(c, "base", "config.json")], run=_scratch, params=_scratch_params,
          needed=lambda c: f"--model {c.model} is fine-tuned instead" if c.model else None, code=_TRAIN,
          help="tiny model from scratch (VoxTokenizer)"),
    Stage("train", inputs=lambda c: [_p(c, "data", "train.jsonl"), *_base_inputs(c)],
          outputs=lambda c: [_p(c, "run", "training_manifest.json")], run=_train, params=_train_params, code=_TRAIN,
          help="QLoRA fine-tune of the base"),
    Stage("dpo", inputs=lambda c: [*_model_files(_after_sft(c, "dpo")), _dpo_data(c)],
          outputs=lambda c: [_p(c, "dpo", "training_manifest.json")], run=_dpo, params=_dpo_params, needed=_off("dpo"),
          packs=_all_packs, code=_RL + ("mens.corpus",), help="preference training (DPO) on the corpus's fix pairs"),
    Stage("rl", inputs=lambda c: [*_model_files(_after_sft(c, "rl")), Path(_rl_params(c)["prompts"])],
          outputs=lambda c: [_p(c, "rl", "training_manifest.json")], run=_rl, params=_rl_params, needed=_off("rl"),
          packs=_all_packs, code=_RL + ("mens.evaluate",), help="GRPO with the language pack's rewards"),
    Stage("bench", inputs=lambda c: [*_model_files(final_run(c)), c.path(_bench_params(c)["path"]), *_base_inputs(c)],
          outputs=lambda c: _run_results(c, "benchmark_results.json"), run=_bench, params=_bench_params,
          packs=_all_packs, code=_EVALUATE + ("mens.inference", "mens.hf"), help="held-out bench pass@k"),
    Stage("gate", inputs=lambda c: [_p(c, "data", "eval_results.json"), _policy(c),
                                    *_run_results(c, "training_manifest.json", "telemetry.jsonl", "benchmark_results.json")],
          outputs=lambda c: _run_results(c, "gate_receipt.json", "eval_results.json"), run=_gate, code=_EVALUATE,
          help="promotion gates"),
    Stage("card", inputs=lambda c: _run_results(c, "training_manifest.json", "eval_results.json",
                                                "benchmark_results.json", "gate_receipt.json"),
          outputs=lambda c: _run_results(c, "MODEL_CARD.md"), run=_card, code=_EVALUATE, help="MODEL_CARD.md"),
    Stage("report", inputs=lambda c: _run_results(c, "training_manifest.json", "telemetry.jsonl", "eval_results.json",
                                                  "benchmark_results.json", "gate_receipt.json"),
          outputs=lambda c: _run_results(c, "report.html"), run=_report, code=_EVALUATE, help="HTML report"),
]
