"""`mens pipeline`: the whole job in one command, with a summary table at the end."""

from __future__ import annotations

import sys
from pathlib import Path

from mens.flags import add_flag


def register(sub) -> None:
    from mens.pipeline.stages import all_stages

    p = sub.add_parser("pipeline", help="run corpus → train → bench → gate → card → report, skipping unchanged stages",
                       description=f"Run the stages in order ({', '.join(s.name for s in all_stages())}; gather, dpo, rl "
                       "and ship only with their own section: `gather:`, `dpo:`, `rl:`, `ship:`). A stage whose "
                       "inputs, config and "
                       "language-pack fingerprints are unchanged since its last run is skipped; the state is "
                       "in WORK_DIR/pipeline_state.json.")
    add_flag(p, "--config", type=Path, default=Path("pipeline.yaml"),
             help="pipeline YAML (default ./pipeline.yaml; see examples/pipeline.yaml)")
    p.add_argument("--stages", help="comma-separated subset of stages to run, e.g. bench,gate,card")
    p.add_argument("--dry-run", action="store_true", help="show what would run and why, run nothing")
    add_flag(p, "--model", help="fine-tune this model (path or hub id) instead of training a scratch base")
    p.set_defaults(func=_pipeline)


def _pipeline(args) -> int:
    from mens.errors import GateFailure, MensError
    from mens.pipeline.runner import load_config, run_pipeline, select
    from mens.pipeline.stages import all_stages

    if not args.config.is_file() and args.config == Path("pipeline.yaml"):
        raise MensError("no pipeline.yaml here", str(Path.cwd()), "pass --config examples/pipeline.yaml")
    every = all_stages()
    ctx = load_config(args.config, model=args.model, stages=every)
    stages = select(every, args.stages)
    if ctx.model and any(s.name in ("train", "bench") for s in stages):
        from mens.hf import check_source

        # A missing path, or a hub id that is not cached while offline, is said now, not after
        # the corpus stages have run.
        check_source(ctx.model)
    if any(s.name == "bench" for s in stages):
        from mens.pipeline.judging import check_bench_section

        check_bench_section(ctx, str(args.config))
    outcomes = []

    def show(o) -> None:
        outcomes.append(o)
        line = {"ran": f"done in {o.seconds:.1f}s", "skipped": "skipped (unchanged)", "planned": f"would run: {o.reason}",
                "not needed": f"not needed: {o.reason}", "failed": f"FAILED: {o.error}"}[o.status]
        if o.status == "ran":
            line += f" ({o.reason})"
        print(f"[{o.name}] {line}", file=sys.stderr, flush=True)

    try:
        run_pipeline(ctx, stages, dry_run=args.dry_run, on_stage=show)
    except (GateFailure, MensError):
        _summary(ctx, outcomes, args.dry_run)
        raise
    _summary(ctx, outcomes, args.dry_run)
    return 0


def _summary(ctx, outcomes, dry_run: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from mens.errors import MensError
    from mens.pipeline.runner import format_figures

    console = Console(soft_wrap=False, width=max(110, Console().width))
    table = Table(title="mens pipeline" + (" (dry run)" if dry_run else ""), title_justify="left")
    for col in ("stage", "status", "time", "key figures / reason"):
        table.add_column(col, no_wrap=col != "key figures / reason")
    styles = {"ran": "green", "skipped": "dim", "planned": "yellow", "not needed": "dim", "failed": "bold red"}
    for o in outcomes:
        detail = o.error if o.status == "failed" and o.error else (
            format_figures(o.figures) if o.figures and o.status in ("ran", "skipped") else o.reason)
        if o.status == "failed" and o.figures:
            detail = f"{format_figures(o.figures)} — {o.error}"
        table.add_row(o.name, f"[{styles[o.status]}]{o.status}[/]", f"{o.seconds:.1f}s" if o.seconds else "—", detail)
    console.print(table)
    from mens.pipeline.judging import final_run

    run = final_run(ctx)  # rl/ or dpo/ when those stages are on
    quality = None if dry_run else quality_line(run / "benchmark_results.json")
    if quality:
        # Stages left out with --stages may have outdated the model the results judge.
        from mens.pipeline.runner import first_stale
        from mens.pipeline.stages import all_stages

        every = all_stages()
        upto = [s.name for s in every].index("bench") + 1
        try:
            stale = first_stale(ctx, every[:upto])
        except (OSError, MensError):  # an input the failed stage was about to report: its error stands alone
            stale = None
        console.print(quality if stale is None else
                      f"{quality} [yellow](of an earlier run, out of date: {stale})[/]")
    if not dry_run and (run / "training_manifest.json").is_file():
        console.print(f"Results: {run}/  (MODEL_CARD.md, report.html, benchmark_results.json, gate_receipt.json)")
        console.print(f"Serve the model:  mens serve {run}")


def quality_line(results_path: Path) -> str | None:
    """How good the model is, in one line, from its bench results (None when there are none):
    before → after the fine-tune when its base was benched too."""
    import json

    try:
        res = json.loads(results_path.read_text(encoding="utf-8"))
        n, after, grammar = res["n_tasks"], res, res.get("grammar")
        before = res.get("base") if isinstance(res.get("base"), dict) and "parse_rate" in res["base"] else None
        if before is None:
            line = (f"Model quality: {after['parse_rate']:.0%} of answers parse, pass@1 {after['pass_at_1']:.2f} "
                    f"on {n} held-out bench tasks (greedy)")
            if isinstance(grammar, dict) and "parse_rate" in grammar:
                line += (f"; with --grammar {grammar.get('lang', '')}: {grammar['parse_rate']:.0%} parse, "
                         f"pass@1 {grammar['pass_at_1']:.2f}")
            return line
        line = (f"Before → after the fine-tune, {n} held-out bench tasks (greedy): parse {before['parse_rate']:.0%} → "
                f"{after['parse_rate']:.0%}, pass@1 {before['pass_at_1']:.2f} → {after['pass_at_1']:.2f}")
        if isinstance(grammar, dict) and "parse_rate" in grammar:
            was = before.get("grammar") if isinstance(before.get("grammar"), dict) else None
            arrow = (lambda key, fmt: f"{format(was[key], fmt)} → {format(grammar[key], fmt)}") if was else \
                (lambda key, fmt: format(grammar[key], fmt))
            line += f"; with --grammar {grammar.get('lang', '')}: parse {arrow('parse_rate', '.0%')}, " \
                    f"pass@1 {arrow('pass_at_1', '.2f')}"
    except (OSError, ValueError, KeyError, TypeError):
        return None
    parse = (res.get("vs_base") or {}).get("parse")
    if isinstance(parse, dict) and {"lost", "gained"} <= parse.keys():
        line += f" (the fine-tune gained {parse['gained']} parsing answers and lost {parse['lost']})"
    return line
