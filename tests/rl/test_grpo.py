"""`mens rl` (GRPO): the run dir, per-reward telemetry, KL, config and bench-overlap refusals.

Not yet here: a toy task whose reward rises clearly on the tiny fixture (a 24-step run on a
digit-share reward did not move it; see docs/rl.md)."""

from __future__ import annotations

import json

import pytest

from bad_input import assert_one_line_error
from paths import EXAMPLES


@pytest.fixture
def prompts(tmp_path):
    rows = [{"prompt": f"Write a Python function number {i}.", "lang": "python",
             "tests": ["assert 1 + 1 == 2"], "expect_contains": ["def "]} for i in range(4)]
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_grpo_writes_a_run_dir_with_each_reward_and_kl(run_cli, tiny_model_dir, prompts, tmp_path):
    from mens.train.telemetry import read_events

    cfg = tmp_path / "rl.yaml"
    cfg.write_text("rewards: {parses: 1.0, not_stub: 0.5, expects: 0.5, tests: 1.0}\nprompts_per_step: 1\n"
                   "beta: 0.04\nsave_steps: 2\nsandbox_timeout_s: 2.0\n")
    run = tmp_path / "run"
    code, out, err = run_cli("rl", "--model", tiny_model_dir, "--prompts", prompts, "--output-dir", run,
                             "--config", cfg, "--steps", "2", "--num-generations", "2",
                             "--max-completion-length", "8", "--bench", EXAMPLES / "bench")
    assert code == 0, err
    steps = [e for e in read_events(run / "telemetry.jsonl") if e["event"] == "step"]
    assert len(steps) == 2
    for key in ("reward", "kl", "rewards_parses", "rewards_not_stub", "rewards_expects", "rewards_tests"):
        assert key in steps[-1], (key, steps[-1])
    manifest = json.loads((run / "training_manifest.json").read_text())
    assert (manifest["method"], manifest["status"], manifest["results"]["steps"]) == ("grpo", "completed", 2)
    assert manifest["hyperparameters"]["rewards"]["tests"] == 1.0
    assert (run / "adapter_config.json").is_file() and (run / "trl-checkpoints" / "checkpoint-2").is_dir()


def test_bench_tasks_among_prompts_are_refused(run_cli, tiny_model_dir, tmp_path):
    task = json.loads((EXAMPLES / "bench" / "vox_heldout.jsonl").read_text().splitlines()[0])
    leaked = tmp_path / "prompts.jsonl"
    leaked.write_text(json.dumps({"prompt": "Write a Vox function."}) + "\n" + json.dumps({"prompt": task["prompt"]}) + "\n")
    err = assert_one_line_error(run_cli, ["rl", "--model", tiny_model_dir, "--prompts", leaked, "--output-dir",
                                          tmp_path / "run", "--bench", EXAMPLES / "bench"], 2,
                                "held-out bench task", [tmp_path])
    assert task["id"] in err


@pytest.mark.parametrize("yaml, phrase", [
    ("rewards: {parses: 1.0, speed: 2}\n", "unknown reward 'speed'"),
    ("rewards: {parses: 0}\n", "every reward weight is 0"),
    ("num_generations: 1\n", "num_generations must be 2 or more"),
    ("learning_rate: -1\n", "learning_rate must be a positive number"),
    ("stepz: 3\n", "unknown key 'stepz'"),
    ("beta: .nan\n", "beta must be 0 or more"),
])
def test_bad_config(run_cli, tiny_model_dir, prompts, tmp_path, yaml, phrase):
    cfg = tmp_path / "rl.yaml"
    cfg.write_text(yaml)
    assert_one_line_error(run_cli, ["rl", "--model", tiny_model_dir, "--prompts", prompts, "--output-dir",
                                    tmp_path / "run", "--config", cfg], 2, phrase, [tmp_path])
