"""`mens report RUN -o report.html`: one self-contained HTML page of a run — curves, not JSONL.

Everything is drawn here as inline SVG (no scripts, no network, no plotting library), so the page
opens anywhere, including a CI artifact viewer. Charts: training and validation loss, tokens/s,
learning rate, bench pass@1 over training, and the corpus composition (mix sources and eval
categories); for `mens rl` / `mens dpo` runs also the reward curves (GRPO's weighted `reward` and
each `rewards_<name>`; DPO's chosen, rejected and margin rewards) and the KL to the start model. Sources: `telemetry.jsonl`, `training_manifest.json`, `eval_results.json`,
`benchmark_results.json`, `gate_receipt.json`, and the mix report next to the training data.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

from mens.errors import MensError
from mens.evaluate.card import read_json
from mens.files import write_text_atomic

W, H = 460, 240          # chart size in px
PAD_L, PAD_R, PAD_T, PAD_B = 58, 14, 28, 36
COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"]


def read_telemetry(run: Path) -> list[dict]:
    """The events of the run's telemetry.jsonl (a torn line of a crashed run is skipped); a file
    that is not UTF-8 text is an error naming the line."""
    path = run / "telemetry.jsonl"
    events = []
    if path.is_file():
        for lineno, raw in enumerate(path.read_bytes().splitlines(), 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise MensError(f"telemetry is not UTF-8 text (byte {exc.start})", f"{path}:{lineno}",
                                "restore the file, or move it away to go on without the curves") from None
            try:
                ev = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                continue  # a torn last line after a crash
            if isinstance(ev, dict):
                events.append(ev)
    return events


def _series(events: list[dict], key: str, kinds: tuple[str, ...]) -> list[tuple[float, float]]:
    """(step, value) points of `key` over events of the given kinds, in order."""
    pts = []
    for i, ev in enumerate(events):
        if ev.get("event") in kinds and isinstance(ev.get(key), (int, float)) and not isinstance(ev.get(key), bool):
            v = float(ev[key])
            if math.isfinite(v):
                pts.append((float(ev.get("step", i)), v))
    return pts


def _moving_average(pts: list[tuple[float, float]], window: int = 0) -> list[tuple[float, float]]:
    """The trend under a noisy per-step loss: a trailing mean over ~1/10 of the run (>= 3 steps)."""
    window = window or max(3, len(pts) // 10)
    if len(pts) < 2 * window:
        return []
    return [(pts[i][0], sum(y for _, y in pts[i + 1 - window:i + 1]) / window) for i in range(window - 1, len(pts))]


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About n round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    return [start + i * step for i in range(int(math.ceil((hi - start) / step)) + 1)]


def _num(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        return f"{v:.1e}"
    return f"{v:.4g}"


def line_chart(title: str, series: dict[str, list[tuple[float, float]]], x_label: str = "step",
               y_range: tuple[float, float] | None = None) -> str:
    """An SVG line chart of named series; an empty chart says there was nothing to draw."""
    series = {k: v for k, v in series.items() if v}
    head = f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img">' \
           f'<title>{html.escape(title)}</title><rect width="{W}" height="{H}" fill="#fff"/>' \
           f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14" font-weight="600">{html.escape(title)}</text>'
    if not series:
        return head + f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" fill="#888" font-size="13">' \
                      'no data recorded</text></svg>'
    xs = [x for pts in series.values() for x, _ in pts]
    ys = [y for pts in series.values() for _, y in pts]
    x0, x1 = min(xs), max(xs)
    y0, y1 = y_range or (min(ys), max(ys))
    if y1 - y0 < 1e-12:
        y0, y1 = y0 - 0.5, y1 + 0.5
    yt, xt = _ticks(y0, y1), _ticks(x0, x1 if x1 > x0 else x0 + 1)
    y0, y1 = min(y0, yt[0]), max(y1, yt[-1])
    x0, x1 = min(x0, xt[0]), max(x1, xt[-1])
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def sx(x: float) -> float:
        return PAD_L + (x - x0) / (x1 - x0 or 1) * pw

    def sy(y: float) -> float:
        return PAD_T + ph - (y - y0) / (y1 - y0 or 1) * ph

    parts = [head]
    for t in yt:
        parts.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#e5e7eb"/>'
                     f'<text x="{PAD_L - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" font-size="11" fill="#444">{_num(t)}</text>')
    for t in xt:
        parts.append(f'<text x="{sx(t):.1f}" y="{H - PAD_B + 16}" text-anchor="middle" font-size="11" fill="#444">{_num(t)}</text>')
    parts.append(f'<line x1="{PAD_L}" x2="{PAD_L}" y1="{PAD_T}" y2="{PAD_T + ph}" stroke="#444"/>'
                 f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{PAD_T + ph}" y2="{PAD_T + ph}" stroke="#444"/>'
                 f'<text x="{PAD_L + pw / 2}" y="{H - 6}" text-anchor="middle" font-size="11" fill="#444">{html.escape(x_label)}</text>')
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>')
        if len(pts) <= 30:  # markers only where they stay readable
            parts += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{colour}"/>' for x, y in pts]
        lx = PAD_L + 8 + i * 120
        parts.append(f'<rect x="{lx}" y="{PAD_T + 4}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{lx + 14}" y="{PAD_T + 13}" font-size="11">{html.escape(name)}</text>')
    return "".join(parts) + "</svg>"


def bar_chart(title: str, bars: list[tuple[str, float]], unit: str = "") -> str:
    """Horizontal bars, largest first; empty input draws a 'no data' chart."""
    bars = sorted(bars, key=lambda b: -b[1])[:16]
    height = max(H, PAD_T + 20 * len(bars) + 20)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img">'
             f'<title>{html.escape(title)}</title><rect width="{W}" height="{height}" fill="#fff"/>'
             f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14" font-weight="600">{html.escape(title)}</text>']
    if not bars:
        parts.append(f'<text x="{W / 2}" y="{height / 2}" text-anchor="middle" fill="#888" font-size="13">no data recorded</text>')
        return "".join(parts) + "</svg>"
    top = max(v for _, v in bars) or 1.0
    label_w, bar_w = 150, W - 150 - 70
    for i, (name, v) in enumerate(bars):
        y = PAD_T + 6 + 20 * i
        parts.append(f'<text x="{label_w - 6}" y="{y + 12}" text-anchor="end" font-size="11">{html.escape(name[:24])}</text>'
                     f'<rect x="{label_w}" y="{y}" width="{max(1.0, v / top * bar_w):.1f}" height="14" '
                     f'fill="{COLOURS[i % len(COLOURS)]}"/>'
                     f'<text x="{label_w + v / top * bar_w + 4:.1f}" y="{y + 12}" font-size="11">{_num(v)}{unit}</text>')
    return "".join(parts) + "</svg>"


def paired_bar_chart(title: str, rows: list[tuple[str, float, float]], names: tuple[str, str]) -> str:
    """Two bars a row on a 0-1 scale, side by side: `names[0]` (before) then `names[1]` (after)."""
    height = max(H, PAD_T + 40 * len(rows) + 30)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{height}" viewBox="0 0 {W} {height}" role="img">'
             f'<title>{html.escape(title)}</title><rect width="{W}" height="{height}" fill="#fff"/>'
             f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="14" font-weight="600">{html.escape(title)}</text>']
    label_w, bar_w = 150, W - 150 - 70
    for j, name in enumerate(names):
        parts.append(f'<rect x="{label_w + 110 * j}" y="{PAD_T - 6}" width="10" height="10" fill="{COLOURS[j]}"/>'
                     f'<text x="{label_w + 14 + 110 * j}" y="{PAD_T + 3}" font-size="11">{html.escape(name)}</text>')
    for i, (label, *values) in enumerate(rows):
        y = PAD_T + 14 + 40 * i
        parts.append(f'<text x="{label_w - 6}" y="{y + 20}" text-anchor="end" font-size="11">{html.escape(label[:24])}</text>')
        for j, v in enumerate(values):
            parts.append(f'<rect x="{label_w}" y="{y + 17 * j}" width="{max(1.0, v * bar_w):.1f}" height="14" '
                         f'fill="{COLOURS[j]}"/><text x="{label_w + v * bar_w + 4:.1f}" y="{y + 17 * j + 12}" '
                         f'font-size="11">{_num(v)}</text>')
    return "".join(parts) + "</svg>"


def _before_after(bench: dict) -> str | None:
    """The bench's figures for the base and the fine-tuned model side by side (greedy, and in
    grammar mode when both were benched so), or None without a benched base."""
    base, grammar = _obj(bench.get("base")), _obj(bench.get("grammar"))
    if "parse_rate" not in base:
        return None
    rows = [("parse rate", _number(base.get("parse_rate")), _number(bench.get("parse_rate"))),
            ("pass@1", _number(base.get("pass_at_1")), _number(bench.get("pass_at_1")))]
    was = _obj(base.get("grammar"))
    if "parse_rate" in was and "parse_rate" in grammar:
        rows += [("parse rate (grammar)", _number(was.get("parse_rate")), _number(grammar.get("parse_rate"))),
                 ("pass@1 (grammar)", _number(was.get("pass_at_1")), _number(grammar.get("pass_at_1")))]
    return paired_bar_chart("held-out bench: the base and the fine-tune", rows, ("base", "fine-tuned"))


def _mix_report(run: Path, manifest: dict) -> dict | None:
    """The mix report of the training data: `<data stem>.mix_report.json` beside the data file."""
    data = manifest.get("data")
    paths = [d.get("train_file") or d.get("path") or d.get("file")
             for d in (data if isinstance(data, list) else [data]) if isinstance(d, dict)]
    paths = [p for p in paths if isinstance(p, str)]
    for p in [*paths, *(run.glob("*.mix_report.json"))]:
        if not p:
            continue
        p = Path(p)
        cand = p if p.name.endswith(".mix_report.json") else p.with_name(f"{p.stem}.mix_report.json")
        rep = read_json(cand) if cand.is_file() else None
        if rep:
            return rep
    return None


def _reward_charts(events: list[dict]) -> list[str]:
    """Reward and KL over steps for rl/dpo runs (none for a run that logged neither): the
    weighted `reward` and every `rewards_<name>` (not their `_std`, nor DPO's accuracy, a share
    on another scale), then `kl`."""
    keys = sorted({k for ev in events if ev.get("event") == "step" for k in ev
                   if k == "reward" or (k.startswith("rewards_") and not k.endswith(("_std", "_accuracies")))})
    charts = []
    if keys:
        keys.sort(key=lambda k: k != "reward")  # the weighted total first
        charts.append(line_chart("reward", {k.removeprefix("rewards_"): _series(events, k, ("step",)) for k in keys}))
    if any(ev.get("event") == "step" and "kl" in ev for ev in events):
        charts.append(line_chart("KL to the start model", {"kl": _series(events, "kl", ("step",))}))
    return charts


def _base_run_events(manifest: dict) -> list[dict]:
    base = manifest.get("base_model")
    path = base.get("path") if isinstance(base, dict) else base
    if not isinstance(path, str) or not path or not (Path(path) / "telemetry.jsonl").is_file():
        return []
    return read_telemetry(Path(path))


def _obj(v: object) -> dict:
    return v if isinstance(v, dict) else {}


def _number(v: object) -> float:
    """A bar's value: a number in the file, else 0."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else 0.0


def _table(rows: list[tuple[str, object]]) -> str:
    cells = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(v))}</td></tr>"
                    for k, v in rows if v is not None)
    return f"<table>{cells}</table>" if cells else ""


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return _num(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v)[:120]
    return str(v)


def render_report(run_dir: str | Path) -> str:
    run = Path(run_dir)
    if not run.is_dir():
        raise MensError("run directory not found", str(run), "give the directory `mens train` wrote")
    events = read_telemetry(run)
    manifest = read_json(run / "training_manifest.json") or {}
    ev = read_json(run / "eval_results.json") or {}
    bench = read_json(run / "benchmark_results.json") or {}
    receipt = read_json(run / "gate_receipt.json") or {}
    # A hand-edited file of another shape draws what it can: wrong-typed parts are left out.
    results = _obj(manifest.get("results"))

    step_kinds = ("step",)
    bench_pts = _series(events, "pass_at_1", ("bench",)) + _series(events, "bench_pass_at_1", ("step", "eval", "bench"))
    losses = _series(events, "loss", step_kinds)
    charts = [
        line_chart("loss", {"train loss": losses, "smoothed": _moving_average(losses),
                            "val loss": _series(events, "val_loss", ("eval", "step", "epoch_end"))}),
        line_chart("tokens / s", {"tokens/s": _series(events, "tokens_per_s", step_kinds)}),
        line_chart("learning rate", {"lr": _series(events, "lr", step_kinds)}),
        line_chart("bench during training", {"pass@1": sorted(bench_pts),
                                             "parse rate": _series(events, "parse_rate", ("bench",))},
                   y_range=(0.0, 1.0)),
    ]
    charts += _reward_charts(events)
    base_events = _base_run_events(manifest)
    if base_events:  # the base is itself a mens run (the pipeline's scratch base): show how it learnt
        charts.append(line_chart("base model loss (its own training run)",
                                 {"train loss": _series(base_events, "loss", step_kinds),
                                  "val loss": _series(base_events, "val_loss", ("eval", "step", "epoch_end"))}))
        if any(e.get("event") == "bench" for e in base_events):
            charts.append(line_chart("base model bench (its own training run)",
                                     {"pass@1": _series(base_events, "pass_at_1", ("bench",)),
                                      "parse rate": _series(base_events, "parse_rate", ("bench",))},
                                     y_range=(0.0, 1.0)))
    before_after = _before_after(bench)
    if before_after:
        charts.insert(0, before_after)
    mix = _mix_report(run, manifest)
    sources = (mix or {}).get("sources") or []
    charts.append(bar_chart("corpus: rows per mix source",
                            [(Path(str(s.get("path", "?"))).name, _number(s.get("emitted_rows", s.get("emitted", 0))))
                             for s in sources if isinstance(s, dict)]))
    cats = _obj(ev.get("by_category"))
    charts.append(bar_chart("corpus: samples per category",
                            [(k, _number(v.get("n", v.get("count", v.get("samples", 0))) if isinstance(v, dict) else v))
                             for k, v in cats.items()]))
    if _obj(bench.get("by_category")):
        charts.append(bar_chart("bench pass@1 by category",
                                [(k, _number(_obj(v).get("pass_at_1"))) for k, v in bench["by_category"].items()]))

    summary = _table([("base model", (manifest.get("base_model") or {}).get("path") if isinstance(manifest.get("base_model"), dict) else manifest.get("base_model")),
                      ("method", manifest.get("method")),
                      ("status", manifest.get("status")), ("steps", results.get("steps")),
                      ("final loss", results.get("final_loss")), ("val loss", results.get("val_loss")),
                      ("tokens/s", results.get("tokens_per_s")), ("wall time (s)", results.get("wall_time_s")),
                      ("corpus parse rate", ev.get("parse_rate")), ("bench pass@1", bench.get("pass_at_1")),
                      ("bench parse rate", bench.get("parse_rate")),
                      ("gates", None if not receipt else ("passed" if receipt.get("passed") else "FAILED"))])
    gate_rows = "".join(
        f'<tr class="{html.escape(str(g.get("verdict")))}"><td>{html.escape(str(g.get("name")))}</td><td><code>{html.escape(str(g.get("metric")))}</code></td>'
        f'<td>{html.escape(str(g.get("message", "")))}</td><td>{"blocking" if g.get("blocking") else "advisory"}</td>'
        f'<td>{html.escape(str(g.get("verdict")).upper())}</td></tr>' for g in receipt.get("gates") or [] if isinstance(g, dict)) \
        if isinstance(receipt.get("gates"), list) else ""
    gates = f"<h2>Gates</h2><table>{gate_rows}</table>" if gate_rows else ""
    title = html.escape(str(manifest.get("name") or run.name))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>mens run report: {title}</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #111; background: #f8fafc; }}
h1 {{ font-size: 22px; margin: 0 0 12px; }} h2 {{ font-size: 17px; margin: 24px 0 8px; }}
.charts {{ display: flex; flex-wrap: wrap; gap: 14px; }}
.charts svg {{ border: 1px solid #e2e8f0; border-radius: 6px; font-family: system-ui, sans-serif; }}
table {{ border-collapse: collapse; background: #fff; }}
th, td {{ border: 1px solid #e2e8f0; padding: 4px 10px; text-align: left; }}
tr.pass td:last-child {{ color: #15803d; font-weight: 600; }} tr.fail td:last-child {{ color: #b91c1c; font-weight: 600; }}
</style></head><body>
<h1>mens run report: {title}</h1>
{summary}
<h2>Training and evaluation</h2>
<div class="charts">{''.join(charts)}</div>
{gates}
<p style="color:#666">Generated by <code>mens report</code> from the files in <code>{html.escape(str(run))}</code>.</p>
</body></html>
"""


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the report (default `<run>/report.html`) atomically and return its path."""
    path = Path(out) if out else Path(run_dir) / "report.html"
    write_text_atomic(path, render_report(run_dir))
    return path
