"""`mens report` on `mens rl` and `mens dpo` runs: reward and KL curves over steps, drawn from
the telemetry of real (tiny) runs; a supervised run gets neither chart."""

from __future__ import annotations

import json
import re

from evaluate_run_fixture import make_run


def _points(page: str, title: str) -> list[int]:
    """The number of points of each line in the chart titled `title`."""
    svg = re.search(rf"<svg[^>]*><title>{re.escape(title)}</title>.*?</svg>", page, re.S)
    assert svg, title
    return [len(p.split()) for p in re.findall(r'<polyline[^>]*points="([^"]*)"', svg.group(0))]


def test_report_of_a_grpo_run_plots_reward_and_kl(run_cli, tiny_model_dir, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"Write the ten digits, {i}.", "lang": "python",
                                           "expect_contains": list("0123456789")}) + "\n" for i in range(2)))
    (tmp_path / "rl.yaml").write_text("rewards: {parses: 1.0, expects: 1.0}\nprompts_per_step: 1\nsave_steps: 3\n")
    run = tmp_path / "run"
    code, _, err = run_cli("rl", "--model", tiny_model_dir, "--prompts", prompts, "--output-dir", run,
                           "--config", tmp_path / "rl.yaml", "--steps", "3", "--num-generations", "2",
                           "--max-completion-length", "4")
    assert code == 0, err
    code, _, err = run_cli("report", run, "-o", tmp_path / "r.html")
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert _points(page, "reward") == [3, 3, 3]            # reward, expects, parses: one point a step
    assert "<text" in page and ">expects</text>" in page and ">parses</text>" in page
    assert _points(page, "KL to the start model") == [3]
    assert "<th>method</th><td>grpo</td>" in page


def test_report_of_a_dpo_run_plots_the_rewards(tiny_model_dir, tmp_path):
    from mens.evaluate.report import render_report
    from mens.rl.dpo import DpoOptions, dpo

    good, broken = "```vox\nfn one() to int {\n    return 1\n}\n```", "```vox\nfn one() to int {\n```"
    (tmp_path / "prefs.jsonl").write_text("".join(json.dumps({"prompt": f"Write one {i}.", "chosen": good,
                                                              "rejected": broken}) + "\n" for i in range(4)))
    dpo(str(tiny_model_dir), tmp_path / "prefs.jsonl", tmp_path / "run", DpoOptions(steps=2, batch_size=2, save_steps=2))
    page = render_report(tmp_path / "run")
    assert _points(page, "reward") == [2, 2, 2]            # chosen, margins, rejected
    assert ">margins</text>" in page and "KL to the start model" not in page


def test_a_supervised_run_has_no_reward_charts(tmp_path):
    from mens.evaluate.report import render_report

    page = render_report(make_run(tmp_path))
    assert "<title>reward</title>" not in page and "KL to the start model" not in page
