"""The lever registry: `--speed-levers` turns levers off and the plan says why; a lever whose rule
keeps it off leaves PEFT's router and expert adapters alone; the preflight compares the loop with
the *unpatched* model, so a lever that changes the math stops the run; the memory estimate of
`mens probe --model` on the Qwen3.5-4B shape."""

from __future__ import annotations

import json

import pytest
import torch

from families import tiny_family_dir
from train_helpers import config, train_args, write_pairs


def test_speed_levers_setting():
    from mens.train.levers import LEVERS, chosen, unknown

    assert chosen("all") == set(LEVERS) and chosen("none") == set()
    assert chosen("all,-segment_attention") == set(LEVERS) - {"segment_attention"}
    assert chosen(["lean_lora", "lean_gelu"]) == {"lean_lora", "lean_gelu"}
    assert unknown("all,-lean_lroa,fast") == ["-lean_lroa", "fast"]


def test_unknown_lever_is_one_line(run_cli, tiny_model_dir, tmp_path):
    data = write_pairs(tmp_path / "data", n=8)
    code, _, err = run_cli(*train_args(tiny_model_dir, data, tmp_path / "run", speed_levers="all,-lean_lroa"))
    assert code == 2 and "unknown speed lever '-lean_lroa'" in err and "did you mean 'lean_lora'" in err
    assert len(err.strip().splitlines()) == 1


def test_levers_turned_off_are_recorded_and_the_loss_is_the_same(tmp_path):
    from mens.train.loop import train

    data = write_pairs(tmp_path / "data", n=8)
    mistral = tiny_family_dir("mistral")
    runs = {}
    for setting in ("all", "none"):
        out = train(config(mistral, data, tmp_path / setting, backend="lora", max_steps=1, seq_len=128,
                           val_split=0.0, speed_levers=setting))
        runs[setting] = (out.losses[0], json.loads((tmp_path / setting / "training_manifest.json").read_text()))
    (all_loss, all_run), (none_loss, none_run) = runs["all"], runs["none"]
    assert none_run["speed"]["off"]["lean_lora"] == "turned off (--speed-levers)"
    assert not any(none_run["speed"]["patched"].values())
    assert all_run["speed"]["patched"]["lean_lora"] > 0 and all_run["speed"]["patched"]["cpu_attention"] == 1
    # Mistral attends within a window in every layer: the packed rows keep the mask there
    assert "sliding-window" in all_run["speed"]["off"]["segment_attention"]
    assert all_loss == pytest.approx(none_loss, rel=1e-5)


def test_preflight_stops_a_lever_that_changes_the_math(run_cli, tmp_path, monkeypatch):
    """The defect issue 35 found: example-by-example attention ignored Mistral's sliding window
    (logits off by ~0.6), and the preflight compared the patched model with itself. Put that
    lever back: the preflight, now against the unpatched model, refuses the run."""
    import mens.train.kernels as kernels

    monkeypatch.setattr(kernels, "plain_causal", lambda module, kwargs: True)  # windows ignored, as before
    data = write_pairs(tmp_path / "data", n=8)
    code, _, err = run_cli(*train_args(tiny_family_dir("mistral"), data, tmp_path / "run", backend="lora",
                                       seq_len=128, max_steps=1))
    assert code == 2 and "differs from the model's own loss, one example at a time" in err
    assert "--speed-levers none --no-packing" in err


def test_routers_keep_pefts_forward_and_train_with_lean_lora(tmp_path):
    """A router adapted on request (`--target-modules q_proj,gate`: PEFT maps `gate` onto the
    router's weight) returns a tuple, which lean LoRA once tried to treat as a tensor."""
    from mens.train.loop import train

    data = write_pairs(tmp_path / "data", n=8)
    out = train(config(tiny_family_dir("qwen3-moe"), data, tmp_path / "run", backend="lora", max_steps=1,
                       seq_len=128, val_split=0.0, target_modules="q_proj,gate", lora_dropout=0.0))
    manifest = json.loads((tmp_path / "run" / "training_manifest.json").read_text())
    assert out.status == "completed" and torch.isfinite(torch.tensor(out.losses[0]))
    assert "not plain LoRA Linears keep PEFT's forward" in manifest["speed"]["off"]["lean_lora"]


def test_moe_dropout_default_and_refusal(run_cli, tmp_path):
    data = write_pairs(tmp_path / "data", n=8)
    code, _, err = run_cli(*train_args(tiny_family_dir("qwen3-moe"), data, tmp_path / "run", backend="lora",
                                       lora_dropout=0.1, seq_len=128))
    last = err.strip().splitlines()[-1]  # after the few-pairs warning
    assert code == 2 and last.startswith("mens: error:") and "take no dropout" in last


# ---------------------------------------------------------------- mens probe --model

# Qwen3.5-4B's language model as its config.json publishes it (the vision tower aside): 32 layers,
# every fourth full attention, the rest Gated DeltaNet; hidden 2560, vocabulary 248,320.
QWEN35_4B = {
    "model_type": "qwen3_5", "tie_word_embeddings": True,
    "text_config": {"model_type": "qwen3_5_text", "vocab_size": 248320, "hidden_size": 2560,
                    "intermediate_size": 9216, "num_hidden_layers": 32, "num_attention_heads": 16,
                    "num_key_value_heads": 4, "head_dim": 256, "linear_num_key_heads": 16,
                    "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
                    "linear_conv_kernel_dim": 4, "max_position_embeddings": 262144, "tie_word_embeddings": True,
                    "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 8}}


def test_probe_estimates_qwen35_4b_on_a_16_gb_card(run_cli, tmp_path):
    model = tmp_path / "qwen3.5-4b"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(QWEN35_4B))
    code, out, _ = run_cli("probe", "--device", "cpu", "--model", model, "--preset", "16g", "--json")
    assert code == 0
    est = json.loads(out)["estimate"]
    assert est["model_type"] == "qwen3_5_text" and est["memory_gb"] == 16
    qlora, lora, full = (est["backends"][b] for b in ("qlora", "lora", "full"))
    assert 1.5 < qlora["weights_gb"] < 3.5 < 6.5 < lora["weights_gb"] < 9    # ~4B weights: NF4 vs bf16
    assert full["total_gb"] > 16 >= lora["total_gb"]                           # full does not fit, bf16 LoRA does
    code, out, _ = run_cli("probe", "--device", "cpu", "--model", model, "--preset", "16g")
    assert "advise bf16 LoRA over QLoRA" in out and "--backend lora" in out
