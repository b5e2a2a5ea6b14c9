"""`mens rl` (GRPO): a tiny model learns a toy verifiable task (its reward rises clearly); the run
dir, per-reward telemetry, KL; resume reproduces an uninterrupted run; bench-overlap refusal
(bad values: test_rl_bad_input.py)."""

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


# The toy task: write the ten digits (mens's own `expects` reward: the share of the task's
# `expect_contains` strings in the answer). A random 64-wide model starts near 0.04; with the
# output head trained beside the LoRA (`train_lm_head`) it learns to emit digits within a few
# steps. Measured (docs/rl.md), mean of the first 4 steps -> of the last 4: seed 0 0.039 -> 0.409
# (this test), seed 1 0.069 -> 0.289, seed 2 0.031 -> 0.267; the same run at learning_rate 1e-9
# stays at 0.01-0.04 (0.030 -> 0.024) and fails this test.
TOY = "rewards: {expects: 1.0}\nlearning_rate: 0.03\nprompts_per_step: 2\nnum_generations: 8\n" \
      "max_completion_length: 6\nbeta: 0.04\nlora_r: 8\nlora_alpha: 16\ntrain_lm_head: true\n"


@pytest.fixture
def toy(tmp_path):
    rows = [{"prompt": f"Write the ten digits, {i}.", "lang": "python", "expect_contains": list("0123456789")}
            for i in range(4)]
    (tmp_path / "toy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "toy.yaml").write_text(TOY)
    return tmp_path / "toy.jsonl", tmp_path / "toy.yaml"


def test_grpo_learns_a_toy_verifiable_task(run_cli, tiny_model_dir, toy, tmp_path):
    from mens.train.telemetry import read_events

    prompts, cfg = toy
    run = tmp_path / "run"
    code, out, err = run_cli("rl", "--model", tiny_model_dir, "--prompts", prompts, "--output-dir", run,
                             "--config", cfg, "--steps", "16")
    assert code == 0, err
    rewards = [e["rewards_expects"] for e in read_events(run / "telemetry.jsonl") if e["event"] == "step"]
    assert len(rewards) == 16
    first, last = sum(rewards[:4]) / 4, sum(rewards[-4:]) / 4
    assert last >= first + 0.15, rewards  # noise (the lr 1e-9 run): first and last 4 within 0.02
    assert json.loads((run / "training_manifest.json").read_text())["hyperparameters"]["train_lm_head"] is True
    from peft import PeftConfig

    assert PeftConfig.from_pretrained(run).modules_to_save == ["lm_head"]


@pytest.mark.slow
def test_grpo_resume_reproduces_an_uninterrupted_run(tiny_model_dir, toy, tmp_path):
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    from mens.rl.grpo import grpo, read_config

    class StopAt(TrainerCallback):  # a run killed right after its step-2 checkpoint
        def on_save(self, args, state, control, **kw):
            if state.global_step == 2:
                control.should_training_stop = True

    prompts, cfg = toy
    opts = read_config(cfg, {"steps": 4, "save_steps": 2})
    grpo(str(tiny_model_dir), prompts, tmp_path / "a", opts)
    grpo(str(tiny_model_dir), prompts, tmp_path / "b", opts, callbacks=[StopAt()])
    assert not (tmp_path / "b" / "adapter_model.safetensors").exists()
    grpo(str(tiny_model_dir), prompts, tmp_path / "b", opts)
    a = load_file(tmp_path / "a" / "adapter_model.safetensors")
    b = load_file(tmp_path / "b" / "adapter_model.safetensors")
    assert a.keys() == b.keys() and any("lm_head" in k for k in a)
    for k in a:
        assert (a[k] == b[k]).all(), k


def test_bench_tasks_among_prompts_are_refused(run_cli, tiny_model_dir, tmp_path):
    task = json.loads((EXAMPLES / "bench" / "vox_heldout.jsonl").read_text().splitlines()[0])
    leaked = tmp_path / "prompts.jsonl"
    leaked.write_text(json.dumps({"prompt": "Write a Vox function."}) + "\n" + json.dumps({"prompt": task["prompt"]}) + "\n")
    err = assert_one_line_error(run_cli, ["rl", "--model", tiny_model_dir, "--prompts", leaked, "--output-dir",
                                          tmp_path / "run", "--bench", EXAMPLES / "bench"], 2,
                                "held-out bench task", [tmp_path])
    assert task["id"] in err


def test_the_prompt_order_of_an_epoch_depends_on_the_epoch_alone():
    """mens.rl.sampler's workaround: TRL's RepeatSampler has no set_epoch of its own (when it
    gains one, drop the workaround); ours reseeds per epoch, so a fresh sampler told `epoch 2`
    walks the prompts as one that has already walked epochs 0 and 1."""
    from trl.trainer.utils import RepeatSampler

    from mens.rl.sampler import grpo_trainer_class

    assert not hasattr(RepeatSampler, "set_epoch")

    class Probe(grpo_trainer_class()):
        def __init__(self):  # only what _get_train_sampler reads
            from types import SimpleNamespace

            self.train_dataset, self.num_generations, self.num_iterations, self.shuffle_dataset = range(12), 2, 1, True
            self.args = SimpleNamespace(generation_batch_size=8, steps_per_generation=1, seed=0)

    walked, fresh = Probe()._get_train_sampler(), Probe()._get_train_sampler()
    orders = []
    for epoch in range(3):
        walked.set_epoch(epoch)
        orders.append(list(walked))
    fresh.set_epoch(2)
    assert list(fresh) == orders[2] and orders[1] != orders[2]
