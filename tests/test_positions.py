"""Every length that can pass a model's positions is checked before the model loads
(mens.positions): one line naming the flag to change, exit 2, nothing written.

The model is a tiny GPT-2 of 64 learned positions, where a sequence past them is an IndexError in
the position embedding: issue 36's `mens rl` traceback (a scratch base of 256 positions, GRPO's
256 completion tokens after the prompt) in small. The first test shows that failure is real."""

from __future__ import annotations

import json

import pytest

from bad_input import assert_one_line_error
from paths import EXAMPLES

POSITIONS = 64


@pytest.fixture(scope="module")
def short_model(tmp_path_factory, tiny_tokenizer_dir):
    from tiny import build_model

    return build_model(tmp_path_factory.mktemp("gpt2-64"), "gpt2", positions=POSITIONS, tokenizer_dir=tiny_tokenizer_dir)


def test_generating_past_the_positions_is_an_index_error(short_model):
    """What the checks below stand in front of (transformers only prints a "friendly reminder")."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(short_model)
    prompt = torch.ones(1, POSITIONS - 4, dtype=torch.long)
    with pytest.raises(IndexError):
        model.generate(prompt, max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0)


LONG = "Write a Vox function that adds two numbers, explains how match works and prints hello world. " * 2
TRAIN = ["train", "--model", "{model}", "--data-dir", "{t}/pairs.jsonl", "--output-dir", "{t}/run", "--preset",
         "tiny", "--device", "cpu", "--max-steps", "1"]
SCRATCH = ["train", "--backend", "scratch", "--preset", "tiny", "--data-dir", "{t}/pairs.jsonl", "--output-dir",
           "{t}/run", "--device", "cpu", "--max-steps", "1", "--scratch-positions", "64"]
CASES = {
    # the command: GRPO's default 256 completion tokens on a base of fewer positions
    "rl-completion": (["rl", "--model", "{model}", "--prompts", "{t}/prompts.jsonl", "--output-dir", "{t}/run",
                       "--max-steps", "3"],
                      "--max-new-tokens 256 leaves no room for a prompt in the model's 64 positions ({model}) — "
                      "pass --max-new-tokens 32 or less"),
    "rl-prompt": (["rl", "--model", "{model}", "--prompts", "{t}/prompts.jsonl", "--output-dir", "{t}/run",
                   "--max-new-tokens", "40"], "prompt 2 is "),
    "rl-old-spelling": (["rl", "--model", "{model}", "--prompts", "{t}/prompts.jsonl", "--output-dir", "{t}/run",
                         "--max-completion-length", "64"], "--max-new-tokens 64 leaves no room for a prompt"),
    "dpo": (["dpo", "--model", "{model}", "--data-dir", "{t}/prefs.jsonl", "--output-dir", "{t}/run",
             "--seq-len", "128"], "--seq-len 128 is beyond the model's 64 positions ({model}) — pass --seq-len 64 "
            "or less"),
    "bench": (["bench", "--model", "{model}", "--bench", str(EXAMPLES / "bench"), "-o", "{t}/results.json"],
              "--max-new-tokens 256 leaves no room for a prompt in the model's 64 positions"),
    "bench-prompt": (["bench", "--model", "{model}", "--bench", str(EXAMPLES / "bench"), "--max-new-tokens", "30",
                      "-o", "{t}/results.json"], "and --max-new-tokens 30 more make"),
    "prefs": (["corpus", "prefs", "--model", "{model}", "--prompts", "{t}/prompts.jsonl", "-o", "{t}/prefs_out.jsonl",
               "--max-new-tokens", "100"], "--max-new-tokens 100 leaves no room for a prompt"),
    "train": (TRAIN + ["--seq-len", "128"], "--seq-len 128 is beyond the model's 64 positions ({model})"),
    "train-bench": (TRAIN + ["--seq-len", "32", "--bench", str(EXAMPLES / "bench"), "--bench-max-new-tokens", "64"],
                    "--bench-max-new-tokens 64 leaves no room for a prompt in the model's 64 positions"),
    "scratch": (SCRATCH + ["--seq-len", "128"], "--seq-len 128 is beyond the model's 64 positions (the scratch "
                "model's --scratch-positions 64) — pass --seq-len 64 or less"),
    "scratch-bench": (SCRATCH + ["--seq-len", "32", "--bench", str(EXAMPLES / "bench"), "--bench-max-new-tokens",
                                 "64"], "--bench-max-new-tokens 64 leaves no room for a prompt"),
    "serve": (["serve", "{model}", "--max-prompt-tokens", "100", "--port", "0"],
              "--max-prompt-tokens 100 is beyond the model's 64 positions"),
}


def inputs(t) -> None:
    rows = [{"prompt": "Write a Python function.", "lang": "python"}, {"prompt": LONG, "lang": "python"}]
    (t / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pref = {"prompt": "Write a Vox function.", "chosen": "```vox\nfn a() to int {\n    return 1\n}\n```",
            "rejected": "```vox\nfn a( {\n```"}
    (t / "prefs.jsonl").write_text(json.dumps(pref) + "\n")
    pair = {"prompt": "Write a Vox function.", "response": "fn a() to int {\n    return 1\n}"}
    (t / "pairs.jsonl").write_text(json.dumps(pair) + "\n" * 1 + json.dumps({**pair, "prompt": "Another."}) + "\n")


@pytest.mark.parametrize("argv, phrase", CASES.values(), ids=CASES.keys())
def test_a_length_past_the_positions_is_one_line_naming_its_flag(run_cli, tmp_path, short_model, argv, phrase):
    inputs(tmp_path)
    fill = dict(t=tmp_path, model=short_model)
    assert_one_line_error(run_cli, [a.format(**fill) for a in argv], 2, phrase.format(**fill),
                          [tmp_path, short_model])
