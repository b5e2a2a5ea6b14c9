"""A hand-made run directory with every result file, for the gate/card/report tests."""

from __future__ import annotations

import json
import math
from pathlib import Path


def make_run(root: Path, final_loss: float = 1.5, pass_at_1: float = 0.25, parse_rate: float = 0.98,
             steps: int = 20, with_bench: bool = True, bench_parse_rate: float = 0.72,
             grammar_parse_rate: float = 0.963) -> Path:
    run = root / "run"
    run.mkdir(parents=True, exist_ok=True)
    manifest = {
        "schema": "mens.training_manifest.v1",
        "base_model": {"path": "out/base", "config_hash": "abc123"},
        "method": "qlora", "preset": "tiny", "device": "cpu", "dtype": "float32", "seed": 0,
        "hyperparameters": {"lr": 1e-3, "lora_r": 8, "batch_size": 4, "max_steps": steps},
        "data": {"path": "out/train.jsonl", "file_hash": "deadbeef", "pairs": 120},
        "provenance": {"upstream_model_id": None, "license": "apache-2.0", "attribution_required": False},
        "results": {"steps": steps, "final_loss": final_loss, "tokens_per_s": 900.0, "wall_time_s": 12.0},
        "status": "completed",
    }
    (run / "training_manifest.json").write_text(json.dumps(manifest))
    with (run / "telemetry.jsonl").open("w") as fh:
        fh.write(json.dumps({"ts": 0, "event": "train_start"}) + "\n")
        for s in range(1, steps + 1):
            loss = 4.0 * math.exp(-s / 8) + final_loss * (1 - math.exp(-s / 8))
            fh.write(json.dumps({"ts": s, "event": "step", "step": s, "loss": loss, "lr": 1e-3 * min(1, s / 4),
                                 "grad_norm": 1.0, "tokens": 512 * s, "tokens_per_s": 800 + 10 * s}) + "\n")
            if s % 5 == 0:
                fh.write(json.dumps({"ts": s, "event": "eval", "step": s, "val_loss": loss + 0.2}) + "\n")
                fh.write(json.dumps({"ts": s, "event": "bench", "step": s, "pass_at_1": s / (4 * steps),
                                     "parse_rate": s / (2 * steps)}) + "\n")
        fh.write(json.dumps({"ts": steps + 1, "event": "train_end"}) + "\n")
    (run / "eval_results.json").write_text(json.dumps({
        "total_samples": 100, "code_samples": 80, "format_validity": 1.0, "parse_rate": parse_rate,
        "construct_coverage": 12, "construct_total": 20, "construct_coverage_pct": 60.0,
        "safety_rejections": 0, "safety_rejection_rate": 0.0,
        "by_category": {"function": {"n": 40}, "type": {"n": 20}, "docs": {"n": 40}}}))
    if with_bench:
        (run / "benchmark_results.json").write_text(json.dumps({
            "k": 1, "n_tasks": 4, "n_samples": 1, "pass_at_1": pass_at_1, "pass_at_k": pass_at_1,
            "parse_rate": bench_parse_rate, "semantic_pass_rate": 0.25, "anti_stub_rate": 0.75,
            "by_category": {"function": {"n_tasks": 2, "pass_at_1": 0.5, "parse_rate": 1.0}},
            # benched beside its base (as the pipeline's bench stage does): no worse than it
            "vs_base": {"pass_at_1_drop": 0.0, "parse_rate_drop": 0.0, "tasks_compared": 4,
                        "parse": {"lost": 0, "gained": 0, "p_value": 1.0, "lost_tasks": [], "gained_tasks": []},
                        "pass": {"lost": 0, "gained": 0, "p_value": 1.0, "lost_tasks": [], "gained_tasks": []}},
            # and in grammar mode (the pipeline's bench.grammar)
            "grammar": {"lang": "vox", "pass_at_1": pass_at_1, "parse_rate": grammar_parse_rate}}))
    return run
