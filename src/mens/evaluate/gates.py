"""Promotion gates: compare a run's metrics against a policy, write `gate_receipt.json`.

A policy (YAML) is `gates: [{name, metric, op, threshold, blocking}]`. Metric names are
`<source>.<key>[.<key>…]`:

- `eval.*`  — `eval_results.json` (`mens corpus eval`), e.g. `eval.parse_rate`
- `bench.*` — `benchmark_results.json` (`mens bench`), e.g. `bench.pass_at_1`,
  `bench.by_category.function.pass_at_1`; after `mens bench --base` or the pipeline's bench stage also
  `bench.vs_base.parse.p_value` / `bench.vs_base.pass.p_value` (did the fine-tune make its base
  worse: a paired sign test over the tasks, `mens.evaluate.compare`) and `bench.grammar.*`
- `train.*` — the `results` of `training_manifest.json`, e.g. `train.final_loss`, plus figures
  derived from the step losses in `telemetry.jsonl`: `train.initial_loss` (first step),
  `train.early_loss` / `train.late_loss` (mean of the first / last quarter of the steps) and
  `train.loss_ratio` (late ÷ early; below 1 means the loss went down). Means over a quarter of
  the run, because one step's loss swings with its batch by more than a short run improves.

A threshold must be finite and within the metric's range (rates and pass@k 0-1, `_pct` 0-100,
counts 0 and up: `metric_range`), else the policy is a user error (exit 2), as is a key other than
`gates` or a gate's five (a misspelt `blokcing: false` must not leave the gate blocking). The safety gate is
`eval.safety_rejections <= 0`: rows holding secrets or destructive commands (`corpus.safety`).

A gate whose metric is missing or not a number fails with a message that says which file or key
was absent: a gate that cannot be checked must never pass silently. A NaN or infinite loss fails
every comparison, so `train.final_loss <= 1e6` is also the "loss is finite" gate.
"""

from __future__ import annotations

import math
import operator
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mens.errors import GateFailure, MensError, refuse_unknown_keys
from mens.evaluate.card import read_json
from mens.files import write_json_atomic

RECEIPT_NAME = "gate_receipt.json"
OPS = {">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
       "==": operator.eq, "!=": operator.ne}
SOURCES = {"eval": "eval_results.json", "bench": "benchmark_results.json", "train": "training_manifest.json"}


@dataclass
class Gate:
    name: str
    metric: str
    op: str
    threshold: float
    blocking: bool = True


@dataclass
class GateResult:
    name: str
    metric: str
    op: str
    threshold: float
    blocking: bool
    value: float | None
    verdict: str  # "pass" | "fail"
    message: str


def load_policy(path: str | Path) -> list[Gate]:
    """Read and check a gate policy; every mistake names the gate and what to fix."""
    from mens.files import read_yaml

    path = Path(path)
    doc = read_yaml(path, "gate policy", "give a YAML file like examples/gates.yaml")
    if isinstance(doc, dict):
        refuse_unknown_keys(doc, {"gates"}, str(path))
    raw = doc.get("gates") if isinstance(doc, dict) else None
    if not isinstance(raw, list) or not raw:
        raise MensError("gate policy needs a non-empty 'gates' list", str(path),
                        "write gates: [{name, metric, op, threshold, blocking}]")
    gates = []
    for i, g in enumerate(raw):
        where = f"{path}: gates[{i}]"
        if not isinstance(g, dict):
            raise MensError("each gate must be a mapping", where, "write {name, metric, op, threshold}")
        refuse_unknown_keys(g, GATE_KEYS, where)  # a misspelt `blokcing: false` would leave the gate blocking
        metric = g.get("metric")
        if not isinstance(metric, str) or metric.split(".")[0] not in SOURCES or "." not in metric:
            raise MensError(f"metric {metric!r} must start with eval., bench. or train.", where,
                            "e.g. metric: bench.pass_at_1")
        op = g.get("op", ">=")
        if op not in OPS:
            raise MensError(f"unknown op {op!r}", where, f"use one of {' '.join(OPS)}")
        threshold = g.get("threshold")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
            raise MensError("threshold must be a finite number", where, "e.g. threshold: 0.9")
        _check_range(metric, float(threshold), where)
        blocking = g.get("blocking", True)
        if not isinstance(blocking, bool):
            raise MensError("blocking must be true or false", where, "fix the gate")
        gates.append(Gate(name=str(g.get("name") or metric), metric=metric, op=op,
                          threshold=float(threshold), blocking=blocking))
    return gates


GATE_KEYS = {"name", "metric", "op", "threshold", "blocking"}


def metric_range(metric: str) -> tuple[float, float] | None:
    """The values a metric can take, by the shape of its name: rates and pass@k 0-1,
    percentages 0-100, counts 0 and up; None where any number may come (losses, ratios)."""
    leaf = metric.rsplit(".", 1)[-1]
    if leaf.endswith("_rate") or leaf.startswith("pass_at_") or leaf in ("format_validity", "p_value"):
        return 0.0, 1.0
    if leaf.endswith("_pct"):
        return 0.0, 100.0
    if leaf.endswith(("_samples", "_rejections", "_tasks")) or leaf in ("construct_coverage", "construct_total",
                                                                          "lost", "gained", "tasks_compared"):
        return 0.0, math.inf
    return None


def _check_range(metric: str, threshold: float, where: str) -> None:
    """A threshold the metric can never reach (parse_rate >= 1.5) or that every value passes
    unnoticed (a rate >= -1) is a typo, not a policy."""
    bounds = metric_range(metric)
    if bounds and not bounds[0] <= threshold <= bounds[1]:
        low, high = bounds
        span = f"{low:g} or more" if math.isinf(high) else f"{low:g}-{high:g}"
        raise MensError(f"threshold {threshold:g} is out of range for {metric} ({span})", where,
                        "a rate is a fraction (0.9), a _pct a percentage (90), a count 0 or more")


def _telemetry_losses(run: Path) -> list[float]:
    from mens.evaluate.report import read_telemetry

    return [float(ev["loss"]) for ev in read_telemetry(run)
            if ev.get("event") == "step" and isinstance(ev.get("loss"), (int, float))
            and not isinstance(ev.get("loss"), bool)]


class MetricSource:
    """The run's result files, read once; `lookup(metric)` -> (value or None, why missing)."""

    def __init__(self, run: Path, overrides: dict[str, Path] | None = None):
        self.run = run
        self.paths = {src: (overrides or {}).get(src) or run / name for src, name in SOURCES.items()}
        self.docs: dict[str, dict | None] = {src: read_json(p) for src, p in self.paths.items()}
        manifest = self.docs["train"]
        results = dict(manifest.get("results") if isinstance(manifest.get("results"), dict) else {}) \
            if manifest else None
        if results is not None:
            losses = _telemetry_losses(run)
            if losses:
                q = max(1, len(losses) // 4)
                early, late = sum(losses[:q]) / q, sum(losses[-q:]) / q
                results.setdefault("initial_loss", losses[0])
                results.setdefault("early_loss", early)
                results.setdefault("late_loss", late)
                if early > 0:
                    results.setdefault("loss_ratio", late / early)
        self.docs["train"] = results

    def lookup(self, metric: str) -> tuple[float | None, str]:
        src, *keys = metric.split(".")
        node: Any = self.docs.get(src)
        if node is None:
            return None, f"{self.paths[src]} not found"
        for i, key in enumerate(keys):
            if not isinstance(node, dict) or key not in node:
                return None, f"no '{'.'.join(keys[:i + 1])}' in {self.paths[src].name}"
            node = node[key]
        if isinstance(node, bool) or not isinstance(node, (int, float)):
            return None, f"{metric} is {node!r}, not a number"
        return float(node), ""


def check_gates(run_dir: str | Path, gates: list[Gate],
                overrides: dict[str, Path] | None = None) -> list[GateResult]:
    """Evaluate every gate against the run's files (no early exit: the receipt lists them all)."""
    run = Path(run_dir)
    if not run.is_dir():
        raise MensError("run directory not found", str(run), "give the directory `mens train` wrote")
    source = MetricSource(run, overrides)
    results = []
    for g in gates:
        value, why = source.lookup(g.metric)
        if value is None:
            verdict, msg = "fail", f"metric missing: {why}"
        elif math.isnan(value) or math.isinf(value):
            verdict, msg = "fail", f"{g.metric} is not finite ({value})"
        elif OPS[g.op](value, g.threshold):
            verdict, msg = "pass", f"{value:.4g} {g.op} {g.threshold:g}"
        else:
            verdict, msg = "fail", f"{value:.4g} is not {g.op} {g.threshold:g}"
        if value is not None and not math.isfinite(value):
            value = None  # JSON has no NaN/inf; the message keeps the value
        results.append(GateResult(name=g.name, metric=g.metric, op=g.op, threshold=g.threshold,
                                  blocking=g.blocking, value=value, verdict=verdict, message=msg))
    return results


def run_gates(run_dir: str | Path, policy: str | Path, out: str | Path | None = None,
              overrides: dict[str, Path] | None = None) -> dict:
    """Check the policy on the run, write the receipt (default `<run>/gate_receipt.json`) and
    return it. Raises GateFailure (exit 1) after writing when a blocking gate failed."""
    gates = load_policy(policy)
    results = check_gates(run_dir, gates, overrides)
    blocking_failures = [r.name for r in results if r.verdict == "fail" and r.blocking]
    receipt = {
        "schema": "mens.gate_receipt.v1",
        "run": str(run_dir),
        "policy": str(policy),
        "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "passed": not blocking_failures,
        "blocking_failures": blocking_failures,
        "warnings": [r.name for r in results if r.verdict == "fail" and not r.blocking],
        "gates": [asdict(r) for r in results],
    }
    write_json_atomic(Path(out) if out else Path(run_dir) / RECEIPT_NAME, receipt)
    return receipt


def format_receipt(receipt: dict) -> str:
    lines = []
    # Columns as wide as the longest name and metric, so the shipped policy's long names line up.
    name_w = max([28] + [len(g["name"]) for g in receipt["gates"]])
    metric_w = max([30] + [len(g["metric"]) for g in receipt["gates"]])
    for g in receipt["gates"]:
        mark = "PASS" if g["verdict"] == "pass" else ("FAIL" if g["blocking"] else "WARN")
        lines.append(f"  {mark:4}  {g['name']:<{name_w}} {g['metric']:<{metric_w}} {g['message']}")
    lines.append("gates passed" if receipt["passed"]
                 else f"blocking gate(s) failed: {', '.join(receipt['blocking_failures'])}")
    return "\n".join(lines)


def enforce(receipt: dict) -> None:
    if not receipt["passed"]:
        raise GateFailure(f"blocking gate(s) failed: {', '.join(receipt['blocking_failures'])}")
