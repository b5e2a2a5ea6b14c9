"""Every preflight check of `mens train` fails fast with one line and exit code 2."""

from __future__ import annotations

import json
import shutil

import pytest

from train_helpers import train_args, write_pairs


def _one_line_error(code: int, err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip() and "warning" not in line]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("mens: error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_pairs(tmp_path_factory.mktemp("pf") / "data", n=8)


def _copy_model(src, dst, drop=()):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*drop))
    return dst


def test_data_dir_missing(run_cli, tiny_model_dir, tmp_path):
    _one_line_error(*run_cli(*train_args(tiny_model_dir, tmp_path / "nope", tmp_path / "run"))[::2],
                    "data directory not found")


def test_train_jsonl_missing(run_cli, tiny_model_dir, tmp_path):
    (tmp_path / "data").mkdir()
    _one_line_error(*run_cli(*train_args(tiny_model_dir, tmp_path / "data", tmp_path / "run"))[::2],
                    "no train.jsonl")


def test_train_jsonl_empty(run_cli, tiny_model_dir, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("\n\n")
    _one_line_error(*run_cli(*train_args(tiny_model_dir, tmp_path / "data", tmp_path / "run"))[::2],
                    "no training pairs")


def test_train_jsonl_malformed_names_file_and_line(run_cli, tiny_model_dir, tmp_path):
    data = write_pairs(tmp_path / "data", n=3)
    with (data / "train.jsonl").open("a") as fh:
        fh.write('{"prompt": "x", "response": \n')
    _one_line_error(*run_cli(*train_args(tiny_model_dir, data, tmp_path / "run"))[::2],
                    "malformed JSON", "train.jsonl:4")
    # --lenient skips the line and counts it in the manifest instead
    code, _, err = run_cli(*train_args(tiny_model_dir, data, tmp_path / "run", lenient=True, max_steps=1,
                                       backend="lora"))
    assert code == 0, err
    manifest = json.loads((tmp_path / "run" / "training_manifest.json").read_text())
    assert manifest["data"]["skipped_lines"] == 1 and "train.jsonl:4" in manifest["data"]["skipped_first"][0]


def test_model_dir_without_config(run_cli, tiny_model_dir, data_dir, tmp_path):
    model = _copy_model(tiny_model_dir, tmp_path / "m", drop=("config.json",))
    _one_line_error(*run_cli(*train_args(model, data_dir, tmp_path / "run"))[::2], "no config.json")


def test_model_dir_without_tokenizer(run_cli, tiny_model_dir, data_dir, tmp_path):
    model = _copy_model(tiny_model_dir, tmp_path / "m", drop=("tokenizer*", "special_tokens_map.json",
                                                              "chat_template.jinja", "vocab.json", "merges.txt"))
    _one_line_error(*run_cli(*train_args(model, data_dir, tmp_path / "run"))[::2], "no tokenizer")


def test_tokenizer_model_vocab_mismatch(run_cli, tiny_model_dir, data_dir, tmp_path):
    model = _copy_model(tiny_model_dir, tmp_path / "m")
    cfg = json.loads((model / "config.json").read_text())
    cfg["vocab_size"] = 100
    (model / "config.json").write_text(json.dumps(cfg))
    _one_line_error(*run_cli(*train_args(model, data_dir, tmp_path / "run"))[::2],
                    "tokenizer has", "vocabulary is 100")


def test_first_forward_not_finite(run_cli, tiny_model_dir, data_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    model = _copy_model(tiny_model_dir, tmp_path / "m")
    weights = load_file(str(model / "model.safetensors"))
    name = next(k for k in weights if "layers.0.mlp.down_proj" in k)
    weights[name].fill_(float("nan"))
    save_file(weights, str(model / "model.safetensors"), metadata={"format": "pt"})
    _one_line_error(*run_cli(*train_args(model, data_dir, tmp_path / "run", backend="lora"))[::2],
                    "non-finite loss")


def test_loss_that_differs_from_the_models_own(run_cli, tiny_model_dir, data_dir, tmp_path):
    # A config that announces Cohere-style logit scaling the Qwen2 class never applies: the loop
    # would train on different logits than the model produces, and the preflight catches it.
    model = _copy_model(tiny_model_dir, tmp_path / "m")
    cfg = json.loads((model / "config.json").read_text())
    cfg["logit_scale"] = 50.0
    (model / "config.json").write_text(json.dumps(cfg))
    _one_line_error(*run_cli(*train_args(model, data_dir, tmp_path / "run", backend="lora"))[::2],
                    "differs from the model's own loss")


def test_seq_len_beyond_model_positions(run_cli, tiny_model_dir, data_dir, tmp_path):
    _one_line_error(*run_cli(*train_args(tiny_model_dir, data_dir, tmp_path / "run", seq_len=4096))[::2],
                    "beyond the model's 512 positions")


def test_impossible_preset_for_device(run_cli, tiny_model_dir, data_dir, tmp_path):
    _one_line_error(*run_cli(*train_args(tiny_model_dir, data_dir, tmp_path / "run", preset="80g"))[::2],
                    "preset 80g needs")


def test_output_dir_that_is_not_a_run(run_cli, tiny_model_dir, data_dir, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "precious.txt").write_text("mine")
    _one_line_error(*run_cli(*train_args(tiny_model_dir, data_dir, tmp_path / "run"))[::2],
                    "not a mens run")


def test_hub_id_offline(run_cli, data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _one_line_error(*run_cli(*train_args("no-such-org/no-such-model", data_dir, tmp_path / "run"))[::2],
                    "hub is offline")


def test_bad_flags_and_config(run_cli, tiny_model_dir, data_dir, tmp_path):
    _one_line_error(*run_cli(*train_args(tiny_model_dir, data_dir, tmp_path / "r1", lora_dropout=1.5))[::2],
                    "lora_dropout")
    (tmp_path / "c.yaml").write_text("lora_rank: 8\n")
    _one_line_error(*run_cli(*train_args(tiny_model_dir, data_dir, tmp_path / "r2", config=tmp_path / "c.yaml"))[::2],
                    "unknown config key 'lora_rank'")


def test_data_dir_may_name_the_training_file_itself(run_cli, tiny_model_dir, data_dir, tmp_path):
    """`--data-dir FILE.jsonl` trains on that file exactly as a folder holding it as train.jsonl."""
    from mens.records import read_pairs

    single = tmp_path / "rows.jsonl"
    shutil.copyfile(data_dir / "train.jsonl", single)
    runs = {}
    for name, data in (("dir", data_dir), ("file", single)):
        code, _, err = run_cli(*train_args(tiny_model_dir, data, tmp_path / name, max_steps=2, val_split=0.25))
        assert code == 0, err
        runs[name] = json.loads((tmp_path / name / "training_manifest.json").read_text())
    assert runs["file"]["results"]["final_loss"] == runs["dir"]["results"]["final_loss"]
    assert len(read_pairs(single)[0]) == 8
    (tmp_path / "empty.jsonl").write_text("")
    _one_line_error(*run_cli(*train_args(tiny_model_dir, tmp_path / "empty.jsonl", tmp_path / "e"))[::2],
                    "holds no training pairs")


def test_a_val_split_that_holds_out_most_of_the_data_says_so(run_cli, tiny_model_dir, data_dir, tmp_path,
                                                             monkeypatch):
    """--val-split 0.9 is in range but leaves the model a sliver to learn from: one warning line
    with the counts, and the run goes on; the default split says nothing."""
    monkeypatch.setenv("MENS_QUIET", "0")
    code, _, err = run_cli(*train_args(tiny_model_dir, data_dir, tmp_path / "most", max_steps=1, val_split=0.9))
    assert code == 0, err
    assert "warning: --val-split 0.9 holds out 7 pairs and trains on 1;" in err
    code, _, err = run_cli(*train_args(tiny_model_dir, data_dir, tmp_path / "few", max_steps=1, val_split=0.25))
    assert code == 0 and "--val-split" not in err, err
    # --quiet silences progress, not warnings
    code, _, err = run_cli("--quiet", *train_args(tiny_model_dir, data_dir, tmp_path / "quiet", max_steps=1,
                                                  val_split=0.9))
    assert code == 0 and "warning: --val-split 0.9" in err and "step" not in err, err


def test_a_small_data_set_is_warned_about_once(run_cli, data_dir, tmp_path):
    """A scratch run reads its data twice (to learn its tokenizer, then to train): the 'only N
    training pairs' warning comes from the read that trains, once."""
    code, _, err = run_cli("train", "--backend", "scratch", "--preset", "tiny", "--scratch-shape", "tiny",
                           "--scratch-layers", "1", "--scratch-vocab", "300", "--seq-len", "64", "--max-steps", "1",
                           "--device", "cpu", "--data-dir", data_dir, "-o", tmp_path / "run")
    assert code == 0, err
    assert err.count("training pairs in") == 1, err


def test_dropout_off_silences_attention_dropout_too(tmp_path, tiny_tokenizer_dir, run_cli, data_dir):
    """GPT-2's attention passes `attn_dropout.p` to its kernel while the module trains, so putting
    Dropout layers in eval mode alone left it on: validation losses were noisy, and the preflight
    (the loop's loss against the model's own) refused every GPT-2 run. dropout_off gives eval's
    logits in train mode, and the LoRA run on GPT-2 passes its preflight."""
    import torch
    from tiny import build_model
    from transformers import AutoModelForCausalLM

    from mens.train.runtime import dropout_off

    model_dir = build_model(tmp_path / "gpt2", "gpt2", tokenizer_dir=tiny_tokenizer_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_pdrop=0.5, resid_pdrop=0.5, embd_pdrop=0.5)
    ids = torch.arange(5, 37)[None]
    with torch.no_grad():
        want = model.eval()(input_ids=ids).logits
        model.train()
        with dropout_off(model):
            got = model(input_ids=ids).logits
        assert model.transformer.h[0].attn.attn_dropout.p == 0.5 and model.training  # restored
    torch.testing.assert_close(got, want)
    code, _, err = run_cli(*train_args(model_dir, data_dir, tmp_path / "run", backend="lora", max_steps=1))
    assert code == 0, err
