"""The judging stages of `mens pipeline` — bench, gate, card, report — and which run they judge:
the last training stage's (`final_run`), against the model its fine-tune started from
(`base_source`)."""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mens.errors import GateFailure, MensError
from mens.stage import Context, Options, flag, number, option, text, whole
from mens.train.checkpoint import VERDICT_FILES

# What later stages add to a run dir; the rest of it is the model (`model_files`).
RESULT_FILES = {*VERDICT_FILES, "MODEL_CARD.md", "telemetry.jsonl"}


def model_files(run: Path) -> list[Path]:
    """What a run's model is made of (not the results later stages add to the run dir)."""
    if not run.is_dir():
        return [run]
    return sorted(f for f in run.iterdir() if f.is_file() and f.name not in RESULT_FILES and not f.name.startswith("."))


def base_source(ctx: Context) -> str:
    """The model the fine-tune starts from: --model, else the scratch base."""
    return ctx.model if ctx.model else str(ctx.work_file("base"))


def fine_tunes(ctx: Context) -> bool:
    """False with `train: false`: the pipeline makes a scratch base and judges it (examples/base/)."""
    return ctx.config.get("train", {}) is not False


def final_run(ctx: Context) -> Path:
    """The run bench, gate, card and report judge: the last training stage's."""
    if not fine_tunes(ctx):
        return ctx.work_file("base")
    return next((ctx.work_file(n) for n in ("rl", "dpo") if n in ctx.config), ctx.work_file("run"))


ONE_OR_MORE = "a whole number, 1 or more"


@dataclass
class BenchOptions(Options):
    """The pipeline config's `bench:` section (seed: the config's seed when left out)."""

    path: str = option("bench", text, "a bench file or folder")
    k: int = option(1, whole(1), ONE_OR_MORE)
    samples: int | None = option(None, whole(1), ONE_OR_MORE)
    temperature: float = option(0.0, number(0, float("inf"), below_high=True), "0 (greedy) or more")
    seed: int | None = option(None, whole(), "a whole number")
    limit: int | None = option(None, whole(1), ONE_OR_MORE)
    max_new_tokens: int = option(256, whole(1), ONE_OR_MORE)
    batch_size: int = option(8, whole(1), ONE_OR_MORE)
    grammar: str | None = option(None, text, "a language name")
    compare_base: bool = option(True, flag, "true or false")


@dataclass
class GateOptions(Options):
    policy: str = option("gates.yaml", text, "a gate policy YAML")


@dataclass
class ShipOptions(Options):
    to: str | None = None
    dtype: str = "bf16"


def check_policy(ctx: Context, where: str) -> None:
    """A policy mistake is named when the config is read, not by the gate stage after training."""
    if policy(ctx).is_file():
        from mens.evaluate.gates import load_policy

        load_policy(policy(ctx))


def bench_params(ctx: Context) -> dict[str, Any]:
    opts = BenchOptions.read(ctx.config.get("bench"), "bench", "pipeline config")
    return {**asdict(opts), "temperature": float(opts.temperature), "seed": ctx.seed if opts.seed is None else opts.seed,
            "grammar": opts.grammar or None, "compare_base": opts.compare_base and fine_tunes(ctx)}


def check_bench_section(ctx: Context, where: str) -> None:
    """When the bench stage is to run: its bench holds tasks and its grammar names a language
    pack — said before the corpus and training stages, not after them."""
    from mens.errors import MensError
    from mens.train.preflight import check_bench

    p = bench_params(ctx)
    try:
        check_bench(str(ctx.path(p["path"])))
    except MensError as exc:
        raise MensError(exc.what, f"{where}: bench.path {exc.where.removeprefix('--bench ')}",
                        "fix bench.path (a bench .jsonl file or a folder holding some)") from None
    if p["grammar"]:
        from mens.grammar import Constraint

        try:
            Constraint.for_language(str(p["grammar"]))
        except MensError as exc:
            raise MensError(exc.what, f"{where}: bench.grammar", exc.todo) from None


def held_out(ctx: Context) -> Path | None:
    bench = ctx.path(bench_params(ctx)["path"])
    return bench if bench.exists() else None


def stage_bench(ctx: Context) -> dict[str, Any]:
    """The held-out bench on the fine-tuned run; with `bench.grammar` also in grammar mode, and
    with `bench.compare_base` (default) also on the model the fine-tune started from, so a gate
    can refuse a fine-tune that made the base worse (`bench.vs_base`: the rate drops, and per
    figure the tasks lost and gained with a sign test's p-value, mens.evaluate.compare)."""
    from mens.evaluate.bench import run_bench
    from mens.evaluate.compare import RATES, attach_base
    from mens.files import write_json_atomic

    p = bench_params(ctx)
    opts = dict(k=p["k"], n=p["samples"], temperature=p["temperature"], seed=p["seed"], limit=p["limit"],
                max_new_tokens=p["max_new_tokens"], batch_size=p["batch_size"])
    bench = ctx.path(p["path"])
    res = run_bench(final_run(ctx), bench, **opts,
                    train_data=[t for t in [ctx.work_file("data", "train.jsonl")] if t.is_file()])
    figures = {"tasks": res["n_tasks"], "pass@1": res["pass_at_1"], "parses": res["parse_rate"]}
    if p["grammar"]:
        constrained = run_bench(final_run(ctx), bench, **opts, grammar=p["grammar"])
        res["grammar"] = {"lang": p["grammar"], **{k: constrained[k] for k in RATES}}
        figures.update({"pass@1 (grammar)": constrained["pass_at_1"], "parses (grammar)": constrained["parse_rate"]})
    if p["compare_base"]:
        base = run_bench(base_source(ctx), bench, **opts)
        base_grammar = {"lang": p["grammar"], **run_bench(base_source(ctx), bench, **opts, grammar=p["grammar"])} \
            if p["grammar"] else None
        attach_base(res, base, base_source(ctx), base_grammar)
        figures.update({"base pass@1": base["pass_at_1"], "base parses": base["parse_rate"]})
    res["items"] = res.pop("items")  # the summary first in the file, the per-item detail last
    write_json_atomic(final_run(ctx) / "benchmark_results.json", res)
    if res.get("contamination", {}).get("contaminated"):
        figures["contaminated"] = len(res["contamination"]["contaminated"])
    return figures


def policy(ctx: Context) -> Path:
    return ctx.path(ctx.section("gate").get("policy", "gates.yaml"))


def stage_gate(ctx: Context) -> dict[str, Any]:
    from mens.evaluate.gates import run_gates
    from mens.files import atomic_path

    run = final_run(ctx)
    # The run dir carries its own eval results, so gate, card and report read one folder.
    with atomic_path(run / "eval_results.json") as tmp:
        shutil.copyfile(ctx.work_file("data", "eval_results.json"), tmp)
    receipt = run_gates(run, policy(ctx))
    figures = {"passed": receipt["passed"], "warnings": len(receipt["warnings"])}
    if not receipt["passed"]:
        exc = GateFailure(f"blocking gate(s) failed: {', '.join(receipt['blocking_failures'])}")
        exc.figures = figures
        raise exc
    return figures


def stage_card(ctx: Context) -> dict[str, Any]:
    from mens.evaluate.card import write_card

    return {"card": str(write_card(final_run(ctx)))}


def stage_report(ctx: Context) -> dict[str, Any]:
    from mens.evaluate.report import write_report

    return {"report": str(write_report(final_run(ctx)))}


def ship_params(ctx: Context) -> dict[str, Any]:
    sec = ctx.section("ship")
    if not isinstance(sec.get("to"), str):
        raise MensError("ship.to must be a folder", "pipeline config: ship", "e.g. ship: {to: ../models/mine}")
    return {"to": str(ctx.path(sec["to"]).resolve()), "dtype": str(sec.get("dtype", "bf16"))}


def stage_ship(ctx: Context) -> dict[str, Any]:
    """The judged model as a folder to hand out (`ship.to`): `mens merge`'s whole model in
    `ship.dtype` with its card, manifest and SHA256SUMS, plus the gathered sources' SOURCES.json
    when the pipeline gathered them. Built beside the folder and swapped in whole."""
    import tempfile

    from mens.corpus.installed import SOURCES_FILE
    from mens.export.merge import merge_run
    from mens.files import replace_folder
    from mens.hf import write_checksums

    p = ship_params(ctx)
    to = Path(p["to"])
    to.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{to.name}.ship-", dir=to.parent))
    try:
        report = merge_run(final_run(ctx), staging / "model", dtype=p["dtype"])
        sources = ctx.work_file("sources", SOURCES_FILE)
        if "gather" in ctx.config and sources.is_file():
            shutil.copyfile(sources, staging / "model" / SOURCES_FILE)
            write_checksums(staging / "model")
        replace_folder(staging / "model", to)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    size = sum(f.stat().st_size for f in to.iterdir() if f.is_file())
    return {"folder": str(to), "MB": round(size / 1e6, 2), "dtype": report.dtype}


def run_results(ctx: Context, *names: str) -> list[Path]:
    return [final_run(ctx) / n for n in names]
