"""`MODEL_CARD.md` for a run directory, rendered from whatever the run holds.

The card is a view, never a source of truth: every figure comes from a file in the run dir
(`training_manifest.json`, `eval_results.json`, `benchmark_results.json`, `gate_receipt.json`),
so `mens card RUN` can re-render it at any time and a missing file just drops its section.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mens.errors import MensError
from mens.files import write_text_atomic

CARD_NAME = "MODEL_CARD.md"


def read_json(path: Path) -> dict | None:
    """A JSON object from `path`, or None when the file is absent. A corrupt file is an error:
    a card that silently skips a broken result would look better than the run was."""
    if not path.is_file():
        return None
    try:
        obj = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise MensError(f"not UTF-8 text (byte {exc.start})", str(path), "re-run the stage that writes it") from None
    except RecursionError:
        raise MensError("JSON nested too deeply", str(path), "re-run the stage that writes it") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise MensError(f"cannot read JSON: {exc}", str(path), "re-run the stage that writes it") from None
    if not isinstance(obj, dict):
        raise MensError(f"a JSON {type(obj).__name__}, not an object", str(path), "re-run the stage that writes it")
    return obj


def _fmt(value: Any) -> str:
    """A value for a table cell: short floats, booleans as yes/no, nested things as JSON."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:  # NaN
            return "NaN"
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 80 else text[:77] + "…"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(rows: list[tuple[str, Any]], head: tuple[str, str] = ("field", "value")) -> list[str]:
    rows = [(k, v) for k, v in rows if v is not None and v != {} and v != []]
    if not rows:
        return []
    lines = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in rows]
    return lines + [""]


def _base_model(manifest: dict) -> str:
    base = manifest.get("base_model")
    if isinstance(base, dict):
        return str(base.get("id") or base.get("path") or base.get("name") or "unknown")
    return str(base or manifest.get("model") or "unknown")


def _training_section(manifest: dict) -> list[str]:
    out = ["## Training", ""]
    base = manifest.get("base_model")
    rows: list[tuple[str, Any]] = [("base model", _base_model(manifest))]
    if isinstance(base, dict):
        rows += [(f"base model {k}", v) for k, v in base.items() if k not in ("id", "path", "name")]
    for key in ("backend", "method", "preset", "device", "dtype", "quantization", "seed", "status", "tokenizer"):
        rows.append((key, manifest.get(key)))
    out += _table(rows)
    hp = manifest.get("hyperparameters") or manifest.get("hyper_parameters") or manifest.get("config")
    if isinstance(hp, dict) and hp:
        out += ["### Hyper-parameters", ""] + _table(sorted(hp.items()), ("name", "value"))
    results = manifest.get("results")
    if isinstance(results, dict) and results:
        out += ["### Results", ""] + _table(list(results.items()), ("metric", "value"))
    return out


def _data_section(manifest: dict) -> list[str]:
    data = manifest.get("data")
    if not data:
        return []
    out = ["## Data", ""]
    items = data if isinstance(data, list) else [data]
    for item in items:
        if isinstance(item, dict):
            out += _table(list(item.items()))
        else:
            out += [f"- {_fmt(item)}", ""]
    return out


def _provenance_section(manifest: dict) -> list[str]:
    prov = manifest.get("provenance") or {}
    if not isinstance(prov, dict):
        prov = {}
    licence = prov.get("license") or manifest.get("license")
    out = ["## Provenance and licence", ""]
    out += _table([("upstream model", prov.get("upstream_model_id") or _base_model(manifest)),
                   ("licence", licence or "unknown — check the base model's licence before sharing"),
                   ("attribution required", prov.get("attribution_required"))]
                  + [(k, v) for k, v in prov.items()
                     if k not in ("upstream_model_id", "license", "attribution_required")])
    versions = manifest.get("versions") or manifest.get("library_versions")
    if isinstance(versions, dict) and versions:
        out += ["Library versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())), ""]
    return out


def _eval_section(ev: dict) -> list[str]:
    out = ["## Corpus evaluation (`eval_results.json`)", ""]
    out += _table([(k, ev.get(k)) for k in ("total_samples", "code_samples", "format_validity", "parse_rate",
                                            "construct_coverage", "construct_total",
                                            "construct_coverage_pct", "safety_rejection_rate")],
                  ("metric", "value"))
    return out


def _bench_section(bench: dict) -> list[str]:
    out = ["## Held-out bench (`benchmark_results.json`)", ""]
    k = bench.get("k")
    out += _table([("bench", bench.get("bench")), ("tasks", bench.get("n_tasks")),
                   ("samples per task", bench.get("n_samples")), ("temperature", bench.get("temperature")),
                   ("pass@1", bench.get("pass_at_1")),
                   *([] if k == 1 else [(f"pass@{k}" if k else "pass@k", bench.get("pass_at_k"))]),  # k=1: pass@1
                   ("parse rate", bench.get("parse_rate")),
                   ("semantic pass rate", bench.get("semantic_pass_rate")),
                   ("anti-stub rate", bench.get("anti_stub_rate"))], ("metric", "value"))
    cats = bench.get("by_category")
    if isinstance(cats, dict) and cats:
        out += ["| category | tasks | pass@1 | parse rate |", "|---|---|---|---|"]
        for name, c in sorted(cats.items()):
            if isinstance(c, dict):
                out.append(f"| {name} | {_fmt(c.get('n_tasks'))} | {_fmt(c.get('pass_at_1'))} "
                           f"| {_fmt(c.get('parse_rate'))} |")
        out.append("")
    return out


def _gate_section(receipt: dict) -> list[str]:
    verdict = "PASSED" if receipt.get("passed") else "FAILED"
    out = ["## Gates (`gate_receipt.json`)", "", f"Overall: **{verdict}** (policy `{receipt.get('policy', '?')}`)", ""]
    gates = [g for g in receipt.get("gates") or [] if isinstance(g, dict)] if isinstance(receipt.get("gates"), list) else []
    if gates:
        out += ["| gate | metric | value | rule | blocking | verdict |", "|---|---|---|---|---|---|"]
        for g in gates:
            out.append(f"| {_fmt(g.get('name'))} | `{g.get('metric')}` | {_fmt(g.get('value'))} "
                       f"| {g.get('op')} {_fmt(g.get('threshold'))} | {_fmt(g.get('blocking'))} "
                       f"| {_fmt(g.get('verdict'))} |")
        out.append("")
    return out


def render_card(run_dir: str | Path, files: list[str] | None = None) -> str:
    """The Markdown text of the card for `run_dir` (see `write_card`); `files`: the files the
    card lists, when they are not the run dir's (a Hub upload carries only what a loader needs)."""
    run = Path(run_dir)
    if not run.is_dir():
        raise MensError("run directory not found", str(run), "give the directory `mens train` wrote")
    manifest = read_json(run / "training_manifest.json") or {}
    ev = read_json(run / "eval_results.json")
    bench = read_json(run / "benchmark_results.json")
    receipt = read_json(run / "gate_receipt.json")

    name = manifest.get("name") or run.name
    lines = [f"# Model card: {name}", ""]
    origin = ("trained from scratch by `mens`" if manifest.get("backend") == "scratch"
              else f"fine-tuned by `mens` from **{_base_model(manifest)}**")
    lines += [f"A code assistant {origin} on a parser-verified instruction corpus. Every figure "
              "below is read from the files in this run directory; re-render with `mens card RUN`.", ""]
    if not manifest:
        lines += ["_No `training_manifest.json` in this directory: training details are unknown._", ""]
    lines += ["## Intended use", "",
              manifest.get("intended_use") or (
                  "Writing and explaining code in the languages of the training corpus, behind "
                  "`mens serve` or any runtime that loads a PEFT adapter or HF model directory. "
                  "Generated code must be reviewed: the gates check that it parses and contains "
                  "the expected constructs, not that it is correct or safe to run."), ""]
    lines += _training_section(manifest) if manifest else []
    lines += _data_section(manifest)
    if ev:
        lines += _eval_section(ev)
    if bench:
        lines += _bench_section(bench)
    if receipt:
        lines += _gate_section(receipt)
    lines += _provenance_section(manifest)
    if files is None:
        files = sorted({p.name for p in run.iterdir() if p.is_file() and not p.name.startswith(".")} | {CARD_NAME})
    lines += ["## Files", "", ", ".join(f"`{f}`" for f in files) if files else "—", ""]
    return "\n".join(lines)


def hub_metadata(run_dir: str | Path, *, adapter: bool, base_model: str | None) -> str:
    """The Hub's YAML metadata header (between `---` lines) for the card of `run_dir`:
    `base_model`, `library_name` (peft for an adapter), licence, tags, and the bench and gate
    results as `model-index` entries — written by huggingface_hub's ModelCardData."""
    from huggingface_hub import EvalResult, ModelCardData

    run = Path(run_dir)
    manifest = read_json(run / "training_manifest.json") or {}
    bench = read_json(run / "benchmark_results.json") or {}
    receipt = read_json(run / "gate_receipt.json")
    prov = manifest.get("provenance") if isinstance(manifest.get("provenance"), dict) else {}
    name = str(manifest.get("name") or run.name)
    tags = ["mens", str(manifest.get("backend") or ("lora" if adapter else "merged")), "code"]
    if receipt:
        tags.append("mens-gates-passed" if receipt.get("passed") else "mens-gates-failed")
    results = []
    bench_name = str(bench.get("bench") or "mens bench")
    k = bench.get("k")
    at_k = [] if k == 1 else [(f"pass@{k}" if k else "pass@k", "pass_at_k")]  # at k=1 it is pass@1 again
    for metric, key in (("pass@1", "pass_at_1"), *at_k,
                        ("parse_rate", "parse_rate"), ("semantic_pass_rate", "semantic_pass_rate")):
        if isinstance(bench.get(key), (int, float)):
            results.append(EvalResult(task_type="text-generation", dataset_type="mens-bench", dataset_name=bench_name,
                                      metric_type=metric, metric_value=float(bench[key])))
    gates = (receipt or {}).get("gates")
    for gate in gates if isinstance(gates, list) else []:
        if isinstance(gate, dict) and isinstance(gate.get("value"), (int, float)) and not isinstance(gate.get("value"), bool):
            results.append(EvalResult(task_type="text-generation", dataset_type="mens-gates",
                                      dataset_name=f"gate {gate.get('name')}", metric_type=str(gate.get("metric")),
                                      metric_value=float(gate["value"]), verified=False))
    licence = prov.get("license") or manifest.get("license")
    data = ModelCardData(base_model=base_model, library_name="peft" if adapter else "transformers",
                         license=str(licence).lower() if licence else None, tags=tags,
                         pipeline_tag="text-generation", model_name=name, eval_results=results or None)
    return f"---\n{data.to_yaml()}\n---\n"


def write_card(run_dir: str | Path) -> Path:
    """Render `MODEL_CARD.md` into `run_dir` (atomically) and return its path."""
    run = Path(run_dir)
    text = render_card(run)
    path = run / CARD_NAME
    write_text_atomic(path, text)
    return path
