"""`mens dpo` on a tiny real model: the chosen-over-rejected margin rises; the run dir is a
`mens train` run dir; resume reproduces an uninterrupted run."""

from __future__ import annotations

import json

import pytest

from bad_input import assert_one_line_error

GOOD = "```vox\nfn add(a: int, b: int) to int {\n    return a + b\n}\n```"
BROKEN = "```vox\nfn add(a: int, b: int) to int {\n    return a +\n```"


@pytest.fixture
def prefs_dir(tmp_path):
    rows = [{"prompt": f"Write a Vox function number {i} that adds two ints.", "chosen": GOOD, "rejected": BROKEN}
            for i in range(8)]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prefs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return tmp_path / "data"


def _logits_margin(model, tokenizer):
    """log p(chosen) − log p(rejected) under `model`, summed over the answer tokens."""
    import torch

    from mens.chat_template import chat_prompt

    prompt = chat_prompt(tokenizer, "Write a Vox function number 0 that adds two ints.")
    out = []
    for answer in (GOOD, BROKEN):
        p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        ids = torch.tensor([p + tokenizer(answer + "<|im_end|>", add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits[0, :-1].float(), -1)
        out.append(logp[torch.arange(len(p) - 1, ids.shape[1] - 1), ids[0, len(p):]].sum().item())
    return out[0] - out[1]


def test_dpo_raises_the_margin_and_writes_a_run_dir(tiny_model_dir, prefs_dir, tmp_path):
    from mens.inference import load_model
    from mens.rl.dpo import DpoOptions, dpo
    from mens.train.telemetry import read_events

    run = tmp_path / "run"
    trainer = dpo(str(tiny_model_dir), prefs_dir, run, DpoOptions(steps=6, batch_size=2, save_steps=3))
    margins = [e["rewards_margins"] for e in read_events(run / "telemetry.jsonl") if e["event"] == "step"]
    assert len(margins) == 6
    assert margins[-1] > margins[0] + 0.03 and margins[-1] > 0.03, margins
    manifest = json.loads((run / "training_manifest.json").read_text())
    assert (manifest["method"], manifest["backend"], manifest["status"]) == ("dpo", "lora", "completed")
    assert manifest["results"]["steps"] == 6 and (run / "adapter_config.json").is_file()
    assert (run / "MODEL_CARD.md").is_file() and trainer.state.global_step == 6
    start, tok, _ = load_model(str(tiny_model_dir), device="cpu")
    tuned, _, _ = load_model(str(run), device="cpu")  # what bench and serve load
    assert _logits_margin(tuned, tok) > _logits_margin(start, tok) + 0.1


@pytest.mark.slow
def test_dpo_resume_reproduces_an_uninterrupted_run(tiny_model_dir, prefs_dir, tmp_path):
    from safetensors.torch import load_file
    from transformers import TrainerCallback

    from mens.rl.dpo import DpoOptions, dpo

    class StopAt(TrainerCallback):  # a run killed right after its step-2 checkpoint
        def on_save(self, args, state, control, **kw):
            if state.global_step == 2:
                control.should_training_stop = True

    opts = DpoOptions(steps=4, batch_size=2, save_steps=2)
    dpo(str(tiny_model_dir), prefs_dir, tmp_path / "a", opts)
    dpo(str(tiny_model_dir), prefs_dir, tmp_path / "b", opts, callbacks=[StopAt()])
    assert not (tmp_path / "b" / "adapter_model.safetensors").exists()
    dpo(str(tiny_model_dir), prefs_dir, tmp_path / "b", opts)
    a = load_file(tmp_path / "a" / "adapter_model.safetensors")
    b = load_file(tmp_path / "b" / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        assert (a[k] == b[k]).all(), k


@pytest.mark.parametrize("rows, phrase", [
    ([], "no preference rows"),
    ([{"prompt": "p", "chosen": "a"}], "field 'rejected' is missing"),
    ([{"prompt": "p", "chosen": "a", "rejected": "a"}], "are the same text"),
])
def test_bad_prefs(run_cli, tiny_model_dir, tmp_path, rows, phrase):
    (tmp_path / "prefs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert_one_line_error(run_cli, ["dpo", "--model", tiny_model_dir, "--data-dir", tmp_path,
                                    "--output-dir", tmp_path / "run"], 2, phrase, [tmp_path])


def test_force_restart_keeps_the_earlier_run_when_the_model_does_not_load(prefs_dir, tmp_path):
    """--force-restart clears the earlier run's checkpoints only once the start model has loaded:
    a --model that is not a model costs nothing."""
    from mens.errors import MensError
    from mens.rl.dpo import dpo

    run = tmp_path / "run"
    (run / "trl-checkpoints" / "checkpoint-2").mkdir(parents=True)
    (run / "telemetry.jsonl").write_text('{"event": "step", "step": 2}\n')
    with pytest.raises(MensError):
        dpo(str(tmp_path / "no-such-model"), prefs_dir, run, force_restart=True)
    assert (run / "trl-checkpoints" / "checkpoint-2").is_dir() and (run / "telemetry.jsonl").is_file()
    assert not (run / ".mens.lock").exists()


def test_rerunning_a_finished_run_trains_no_step_more(tiny_model_dir, prefs_dir, tmp_path):
    """The same command again on a finished run: it resumes from the last checkpoint, which is
    already at --steps, so nothing trains (HF's Trainer would run one step past max_steps and
    overwrite the finished weights and manifest with step 3 of 2)."""
    from mens.rl.dpo import DpoOptions, dpo
    from mens.train.telemetry import read_events

    run, opts = tmp_path / "run", DpoOptions(steps=2, batch_size=2, save_steps=1)
    dpo(str(tiny_model_dir), prefs_dir, run, opts)
    weights = (run / "adapter_model.safetensors").read_bytes()
    manifest = (run / "training_manifest.json").read_text()
    trainer = dpo(str(tiny_model_dir), prefs_dir, run, opts)
    assert trainer.state.global_step == 2
    assert [e["step"] for e in read_events(run / "telemetry.jsonl") if e["event"] == "step"] == [1, 2]
    assert not (run / "trl-checkpoints" / "checkpoint-3").exists()
    assert (run / "adapter_model.safetensors").read_bytes() == weights
    assert (run / "training_manifest.json").read_text() == manifest
    (run / "training_manifest.json").unlink()  # stopped after its last checkpoint, before the final save
    dpo(str(tiny_model_dir), prefs_dir, run, opts)
    assert json.loads((run / "training_manifest.json").read_text())["results"]["steps"] == 2
    assert (run / "adapter_model.safetensors").read_bytes() == weights
