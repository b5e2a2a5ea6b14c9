"""Bad values to `mens dpo` and `mens rl` (flags, rl.yaml, the pipeline's dpo:/rl: sections): each
case is one line `mens: error: … (where) — what to do`, exit code 2, no traceback, nothing written
— every value is checked before a model loads (mens.rl.checks).

A case is (argv, a phrase the error line must contain). `{t}` is the case's folder (prefs.jsonl,
prompts.jsonl and the `CONFIGS` as cfg_<name>.yaml); `{model}` is a tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bad_input import assert_one_line_error
from paths import EXAMPLES

CONFIGS = {
    "reward-unknown": "rewards: {parses: 1.0, speed: 2}\n",
    "reward-typo": "rewards: {parse: 1.0}\n",
    "reward-negative": "rewards: {parses: 1.0, not_stub: -0.5}\n",
    "reward-text": "rewards: {parses: high}\n",
    "reward-bool": "rewards: {parses: true}\n",
    "reward-inf": "rewards: {parses: .inf}\n",
    "rewards-zero": "rewards: {parses: 0, tests: 0.0}\n",
    "rewards-empty": "rewards: {}\n",
    "rewards-list": "rewards: [parses]\n",
    "num-generations-one": "num_generations: 1\n",
    "lr-negative": "learning_rate: -1\n",
    "lr-zero": "learning_rate: 0\n",
    "lr-text": "learning_rate: fast\n",
    "beta-negative": "beta: -0.1\n",
    "beta-nan": "beta: .nan\n",
    "epsilon-negative": "epsilon: -1\n",
    "max-completion-zero": "max_completion_length: 0\n",
    "steps-float": "steps: 2.5\n",
    "steps-bool": "steps: true\n",
    "prompts-per-step-zero": "prompts_per_step: 0\n",
    "temperature-zero": "temperature: 0\n",
    "lora-r-zero": "lora_r: 0\n",
    "timeout-zero": "sandbox_timeout_s: 0\n",
    "memory-zero": "sandbox_memory_mb: 0\n",
    "lm-head-int": "train_lm_head: 1\n",
    "seed-negative": "seed: -1\n",
    "device-tpu": "device: tpu\n",
    "key-unknown": "stepz: 3\n",
    "key-far": "zzz: 3\n",
    "not-mapping": "- steps\n",
    "prompts-per-step-one": "prompts_per_step: 1\n",
}

D = ["dpo", "--model", "{model}", "--data-dir", "{t}/prefs.jsonl", "--output-dir", "{t}/run"]
R = ["rl", "--model", "{model}", "--prompts", "{t}/prompts.jsonl", "--output-dir", "{t}/run"]


def cfg(name: str) -> list[str]:
    return R + ["--config", "{t}/cfg_" + name + ".yaml"]


CASES = {
    # mens dpo: the flags name themselves
    "dpo-beta-zero": (D + ["--beta", "0"], "beta must be a positive number, got 0.0 (--beta) — give --beta above 0"),
    "dpo-beta-negative": (D + ["--beta", "-0.1"], "beta must be a positive number, got -0.1 (--beta)"),
    "dpo-beta-nan": (D + ["--beta", "nan"], "beta must be a positive number, got nan (--beta)"),
    "dpo-lr-zero": (D + ["--lr", "0"], "learning_rate must be a positive number, got 0.0 (--lr)"),
    "dpo-lr-negative": (D + ["--learning-rate=-1e-4"], "learning_rate must be a positive number, got -0.0001"),
    "dpo-lr-inf": (D + ["--learning-rate", "inf"], "learning_rate must be a positive number, got inf"),
    "dpo-steps-zero": (D + ["--max-steps", "0"], "steps must be a whole number, 1 or more, got 0 (--max-steps)"),
    # TRL's spellings are aliases (mens.flags); the error names the flag as mens spells it
    "dpo-steps-zero-trl": (D + ["--steps", "0"], "steps must be a whole number, 1 or more, got 0 (--max-steps)"),
    "dpo-max-length-zero": (D + ["--max-length", "0"], "max_length must be a whole number, 1 or more, got 0 "
                            "(--seq-len) — give --seq-len 1 or more"),
    "dpo-batch-negative": (D + ["--batch-size", "-2"], "batch_size must be a whole number, 1 or more (--micro-batch)"
                           .replace(" (", ", got -2 (")),
    "dpo-lora-r-zero": (D + ["--lora-r", "0"], "lora_r must be a whole number, 1 or more, got 0 (--lora-r)"),
    "dpo-save-steps-zero": (D + ["--save-steps", "0"], "save_steps must be a whole number, 1 or more, got 0"),
    "dpo-seed-negative": (D + ["--seed", "-1"], "seed must be 0 to 2**32-1, got -1 (--seed)"),
    "dpo-beta-text": (D + ["--beta", "hot"], "argument --beta: invalid float value: 'hot'"),
    "dpo-model-missing": (["dpo", "--model", "./nowhere/model"] + D[3:], "model path not found"),
    "dpo-data-missing": (D[:3] + ["--data-dir", "{t}/nowhere"] + D[5:], "preference file not found"),
    # a bad preference row names its field and line
    "dpo-row-no-rejected": (D[:3] + ["--data-dir", "{t}/prefs_no_rejected.jsonl"] + D[5:],
                            "field 'rejected' is missing (a preference row needs prompt, chosen and rejected) "
                            "({t}/prefs_no_rejected.jsonl:2)"),
    "dpo-row-chosen-int": (D[:3] + ["--data-dir", "{t}/prefs_chosen_int.jsonl"] + D[5:],
                           "field 'chosen' must be a non-empty string, got int ({t}/prefs_chosen_int.jsonl:2)"),
    "dpo-row-list": (D[:3] + ["--data-dir", "{t}/prefs_list.jsonl"] + D[5:],
                     "a preference row must be a JSON object, got list ({t}/prefs_list.jsonl:2)"),
    # mens rl: flags
    "rl-num-generations-one": (R + ["--num-generations", "1"],
                               "num_generations must be 2 or more, got 1 (--samples)"),
    "rl-lr-negative": (R + ["--learning-rate", "-1"], "learning_rate must be a positive number, got -1.0 (--lr)"),
    "rl-steps-zero": (R + ["--max-steps", "0"], "steps must be a whole number, 1 or more, got 0 (--max-steps)"),
    "rl-max-completion-zero": (R + ["--max-new-tokens", "0"],
                               "max_completion_length must be a whole number, 1 or more, got 0 (--max-new-tokens)"),
    "rl-seed-huge": (R + ["--seed", str(2**40)], "seed must be 0 to 2**32-1"),
    "rl-flag-over-config": (cfg("lr-text") + ["--lr", "-2"], "(--lr)"),
    # mens rl: rl.yaml, named by the file
    "rl-reward-unknown": (cfg("reward-unknown"), "unknown reward 'speed' ({t}/cfg_reward-unknown.yaml) — use parses, "
                          "not_stub, expects, tests"),
    "rl-reward-typo": (cfg("reward-typo"), "unknown reward 'parse' ({t}/cfg_reward-typo.yaml) — did you mean 'parses'?"),
    "rl-reward-negative": (cfg("reward-negative"), "reward weight of not_stub must be a number, 0 or more, got -0.5"),
    "rl-reward-text": (cfg("reward-text"), "reward weight of parses must be a number, 0 or more, got 'high'"),
    "rl-reward-bool": (cfg("reward-bool"), "reward weight of parses must be a number, 0 or more, got True"),
    "rl-reward-inf": (cfg("reward-inf"), "reward weight of parses must be a number, 0 or more, got inf"),
    "rl-rewards-zero": (cfg("rewards-zero"), "every reward weight is 0"),
    "rl-rewards-empty": (cfg("rewards-empty"), "rewards must map reward names to weights, got {{}}"),
    "rl-rewards-list": (cfg("rewards-list"), "rewards must map reward names to weights, got ['parses']"),
    "rl-num-generations-one-yaml": (cfg("num-generations-one"), "num_generations must be 2 or more, got 1 "
                                    "({t}/cfg_num-generations-one.yaml)"),
    "rl-lr-negative-yaml": (cfg("lr-negative"), "learning_rate must be a positive number, got -1"),
    "rl-lr-zero-yaml": (cfg("lr-zero"), "learning_rate must be a positive number, got 0"),
    "rl-lr-text-yaml": (cfg("lr-text"), "learning_rate must be a positive number, got 'fast'"),
    "rl-beta-negative": (cfg("beta-negative"), "beta must be 0 or more, got -0.1"),
    "rl-beta-nan": (cfg("beta-nan"), "beta must be 0 or more, got nan"),
    "rl-epsilon-negative": (cfg("epsilon-negative"), "epsilon must be 0 or more, got -1"),
    "rl-max-completion-zero-yaml": (cfg("max-completion-zero"), "max_completion_length must be a whole number, 1 or "
                                    "more, got 0"),
    "rl-steps-float": (cfg("steps-float"), "steps must be a whole number, 1 or more, got 2.5"),
    "rl-steps-bool": (cfg("steps-bool"), "steps must be a whole number, 1 or more, got True"),
    "rl-prompts-per-step-zero": (cfg("prompts-per-step-zero"), "prompts_per_step must be a whole number"),
    "rl-temperature-zero": (cfg("temperature-zero"), "temperature must be a positive number, got 0"),
    "rl-lora-r-zero": (cfg("lora-r-zero"), "lora_r must be a whole number, 1 or more, got 0"),
    "rl-timeout-zero": (cfg("timeout-zero"), "sandbox_timeout_s must be a positive number, got 0"),
    "rl-memory-zero": (cfg("memory-zero"), "sandbox_memory_mb must be a whole number, 1 or more, got 0"),
    "rl-lm-head-int": (cfg("lm-head-int"), "train_lm_head must be true or false, got 1"),
    "rl-seed-negative": (cfg("seed-negative"), "seed must be 0 to 2**32-1, got -1"),
    "rl-device-tpu": (cfg("device-tpu"), "device must be one of auto, cpu, cuda, got 'tpu'"),
    "rl-key-unknown": (cfg("key-unknown"), "unknown config key 'stepz' ({t}/cfg_key-unknown.yaml) — did you mean "
                       "'steps'?"),
    "rl-key-far": (cfg("key-far"), "unknown config key 'zzz' ({t}/cfg_key-far.yaml) — use beta, device"),
    "rl-not-mapping": (cfg("not-mapping"), "the rl config must be a mapping"),
    # the run dir: new, empty or a run, and never the start model
    "dpo-output-not-a-run": (D[:-1] + ["{t}/notrun"], "output directory is not empty and is not a mens run "
                             "(holds notes.txt…) ({t}/notrun)"),
    "dpo-output-is-the-model": (D[:-1] + ["{model}"], "--output-dir is the start model's own directory ({model})"),
    "rl-output-not-a-run": (R[:-1] + ["{t}/notrun"] + ["--config", "{t}/cfg_prompts-per-step-one.yaml"],
                            "output directory is not empty and is not a mens run"),
    # mens rl: the prompts, checked before the model loads
    "rl-fewer-prompts-than-a-step": (R, "1 prompt(s), fewer than prompts_per_step (2): no step would train "
                                     "({t}/prompts.jsonl)"),
    "rl-prompt-tests-int": (R[:3] + ["--prompts", "{t}/prompts_tests_int.jsonl"] + R[5:],
                            "'tests' of prompt row 1 must be a string or a list of statements, got 5"),
    "rl-prompt-lang-int": (R[:3] + ["--prompts", "{t}/prompts_lang_int.jsonl"] + R[5:],
                           "'lang' of prompt row 1 must be a language name, got 5"),
    "rl-prompt-lang-unknown": (R[:3] + ["--prompts", "{t}/prompts_lang_unknown.jsonl"] + R[5:],
                               "prompt row 1: no tree-sitter grammar 'klingon'"),
    # a bad prompt row is named by its file and line (blank lines count), as a malformed one is
    "rl-prompt-needles-str": (R[:3] + ["--prompts", "{t}/prompts_needles_str.jsonl"] + R[5:],
                              "'expect_contains' of prompt row 2 must be a list of strings, got 'add' "
                              "({t}/prompts_needles_str.jsonl:3)"),
    "rl-prompt-tests-dict": (R[:3] + ["--prompts", "{t}/prompts_tests_dict.jsonl"] + R[5:],
                             "'tests' of prompt row 2 must be a string or a list of statements, got {{}} "
                             "({t}/prompts_tests_dict.jsonl:3)"),
    "rl-config-missing": (R + ["--config", "{t}/none.yaml"], "({t}/none.yaml)"),
}


def inputs(t: Path) -> None:
    row = {"prompt": "Write a Vox function that adds.", "chosen": "```vox\nfn a() to int {\n    return 1\n}\n```",
           "rejected": "```vox\nfn a( {\n```"}
    (t / "prefs.jsonl").write_text(json.dumps(row) + "\n")
    for name, bad in {"no_rejected": {"prompt": "p", "chosen": "c"}, "chosen_int": {**row, "chosen": 5},
                      "list": [1, 2]}.items():
        (t / f"prefs_{name}.jsonl").write_text(json.dumps(row) + "\n" + json.dumps(bad) + "\n")
    (t / "prompts.jsonl").write_text(json.dumps({"prompt": "Write a Python function.", "lang": "python"}) + "\n")
    (t / "notrun").mkdir()
    (t / "notrun" / "notes.txt").write_text("mine")
    for name, row in {"tests_int": {"tests": 5}, "lang_int": {"lang": 5}, "lang_unknown": {"lang": "klingon"}}.items():
        (t / f"prompts_{name}.jsonl").write_text("".join(json.dumps({"prompt": f"Write function {i}.", **row}) + "\n"
                                                         for i in range(2)))
    for name, row in {"needles_str": {"expect_contains": "add"}, "tests_dict": {"tests": {}}}.items():
        (t / f"prompts_{name}.jsonl").write_text(json.dumps({"prompt": "Write function 0."}) + "\n\n"
                                                 + json.dumps({"prompt": "Write function 1.", **row}) + "\n")
    for name, text in CONFIGS.items():
        (t / f"cfg_{name}.yaml").write_text(text)


@pytest.mark.parametrize("argv, phrase", CASES.values(), ids=CASES.keys())
def test_bad_values_are_one_line_and_write_nothing(run_cli, tmp_path, tiny_model_dir, argv, phrase):
    inputs(tmp_path)
    fill = dict(t=tmp_path, model=tiny_model_dir)
    assert_one_line_error(run_cli, [a.format(**fill) for a in argv], 2, phrase.format(**fill),
                          [tmp_path, tiny_model_dir])


PIPELINE = {
    "dpo-beta-zero": ({"dpo": {"beta": 0}}, "beta must be a positive number, got 0 ({t}/p.yaml: dpo)"),
    "dpo-max-length-zero": ({"dpo": {"max_length": 0}}, "max_length must be a whole number, 1 or more, got 0"),
    "dpo-lr-text": ({"dpo": {"learning_rate": "fast"}}, "learning_rate must be a positive number, got 'fast'"),
    "rl-reward-typo": ({"rl": {"prompts": "p.jsonl", "rewards": {"not-stub": 1}}},
                       "unknown reward 'not-stub' ({t}/p.yaml: rl) — did you mean 'not_stub'?"),
    "rl-num-generations-one": ({"rl": {"prompts": "p.jsonl", "num_generations": 1}},
                               "num_generations must be 2 or more, got 1 ({t}/p.yaml: rl)"),
    "rl-seed-negative": ({"seed": -3, "rl": {"prompts": "p.jsonl"}}, "seed must be 0 to 2**32-1, got -3"),
}


@pytest.mark.parametrize("edit, phrase", PIPELINE.values(), ids=PIPELINE.keys())
def test_bad_values_in_the_pipeline_config(run_cli, tmp_path, edit, phrase):
    """Checked as the config is read: no stage runs (nor is planned) first."""
    config = {**yaml.safe_load((EXAMPLES / "pipeline.yaml").read_text()), **edit}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(config))
    assert_one_line_error(run_cli, ["pipeline", "--config", tmp_path / "p.yaml"], 2, phrase.format(t=tmp_path),
                          [tmp_path])
