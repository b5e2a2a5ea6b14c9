"""TrainConfig precedence: flags > YAML > preset > the probe's recommendation."""

from __future__ import annotations

import re

import pytest

from mens.errors import MensError
from mens.train.config import resolve_config
from mens.train.presets import PRESETS, fits, recommend


def test_precedence(tmp_path):
    base = {"model": "m", "data_dir": "d", "output_dir": "o"}
    cfg = resolve_config(base, None, recommended_preset="cpu")
    assert cfg.preset == "cpu" and cfg.seq_len == PRESETS["cpu"].values["seq_len"]
    yaml = tmp_path / "run.yaml"
    yaml.write_text("preset: tiny\nseq-len: 200\nlr: 0.01\ntarget_modules: q_proj,v_proj\n")
    cfg = resolve_config(base, str(yaml), recommended_preset="cpu")
    assert (cfg.preset, cfg.seq_len, cfg.lr, cfg.lora_r) == ("tiny", 200, 0.01, PRESETS["tiny"].values["lora_r"])
    assert cfg.target_modules == ["q_proj", "v_proj"]
    cfg = resolve_config({**base, "seq_len": 64, "lora_r": 4, "dora": None}, str(yaml), recommended_preset="cpu")
    assert (cfg.seq_len, cfg.lr, cfg.lora_r, cfg.dora) == (64, 0.01, 4, False)


def test_validation_errors_are_user_errors():
    with pytest.raises(MensError, match="unknown preset"):
        resolve_config({"model": "m", "preset": "huge"})
    with pytest.raises(MensError, match="no base model"):
        resolve_config({"data_dir": "d"})
    with pytest.raises(MensError, match="micro_batch"):
        resolve_config({"model": "m", "micro_batch": 0})


def test_presets_and_recommendation():
    assert set(PRESETS) == {"tiny", "cpu", "8g", "16g", "24g", "80g"}
    assert recommend("cpu", 500) == "cpu" and recommend("cuda", 80) == "80g" and recommend("cuda", 24) == "24g"
    assert recommend("cuda", 12) == "8g" and recommend("cuda", 2) == "cpu"
    assert fits(PRESETS["24g"], "cuda", 16) and fits(PRESETS["8g"], "cpu", 64) and not fits(PRESETS["8g"], "cuda", 8)


def test_distributed_mode(tmp_path):
    base = {"model": "m", "data_dir": "d", "output_dir": "o"}
    assert resolve_config(base).distributed == "auto"
    yaml = tmp_path / "run.yaml"
    yaml.write_text("distributed: fsdp\nbackend: qlora\n")
    assert resolve_config(base, str(yaml)).distributed == "fsdp"
    assert resolve_config({**base, "distributed": "ddp"}, str(yaml)).distributed == "ddp"  # flag wins
    with pytest.raises(MensError, match="unknown distributed value 'mpi'"):
        resolve_config({**base, "distributed": "mpi"})
    with pytest.raises(MensError, match="does not support --bench"):
        resolve_config({**base, "distributed": "fsdp", "bench": "examples/bench"})


def test_every_field_is_a_flag_of_its_declared_type(tmp_path):
    """The flags come from TrainConfig's fields: a field is declared once, with its help and group."""
    import argparse
    from dataclasses import fields

    from mens.train.cli import add_config_flags, resolve
    from mens.train.config import TrainConfig

    parser = argparse.ArgumentParser()
    add_config_flags(parser)
    parser.add_argument("--config")
    dests = {a.dest for a in parser._actions}
    assert {f.name for f in fields(TrainConfig)} <= dests
    args = parser.parse_args(["--model", "m", "--data-dir", "d", "-o", "o", "--lr", "3e-4", "--no-packing",
                              "--dora", "--adam-betas", "0.8", "0.95", "--report-to", "tensorboard",
                              "--max-steps", "7", "--preset", "cpu"])
    cfg = resolve(args)
    assert (cfg.lr, cfg.packing, cfg.dora, cfg.adam_betas, cfg.max_steps) == (3e-4, False, True, (0.8, 0.95), 7)
    assert cfg.report_to == ["jsonl", "tensorboard"]
    with pytest.raises(SystemExit):
        parser.parse_args(["--max-steps", "many"])


@pytest.mark.parametrize("line, message", [
    ("lr: fast\n", "lr must be a number, got 'fast'"),
    ("max_steps: 2.5\n", "max_steps must be a whole number"),
    ("packing: maybe\n", "packing must be true or false"),
    ("adam_betas: [0.9]\n", "adam_betas must be two numbers"),
    ("report_to: [1, 2]\n", "report_to must be a list of strings"),
    ("backend: lorax\n", "unknown backend value 'lorax'"),
])
def test_wrong_yaml_types_are_named(tmp_path, line, message):
    yaml = tmp_path / "run.yaml"
    yaml.write_text(line)
    with pytest.raises(MensError, match=re.escape(message)):
        resolve_config({"model": "m", "data_dir": "d", "output_dir": "o"}, str(yaml))


def test_yaml_reads_exponents_without_a_dot_and_refuses_binary(tmp_path):
    yaml = tmp_path / "run.yaml"
    yaml.write_text("lr: 2e-4\nepochs: 3\n")  # YAML 1.1 reads 2e-4 as a string
    cfg = resolve_config({"model": "m", "data_dir": "d", "output_dir": "o"}, str(yaml))
    assert cfg.lr == 2e-4 and cfg.epochs == 3.0
    yaml.write_bytes(b"lr: \xff\xfe\n")
    with pytest.raises(MensError, match="not UTF-8"):
        resolve_config({"model": "m"}, str(yaml))
    yaml.write_text("lr: " + "[" * 100_000 + "\n")
    with pytest.raises(MensError):
        resolve_config({"model": "m"}, str(yaml))


def test_trl_and_hf_names_are_aliases_and_typos_get_a_suggestion(tmp_path):
    yaml = tmp_path / "run.yaml"
    yaml.write_text("learning_rate: 5.0e-5\nnum_train_epochs: 2\nper_device_train_batch_size: 2\n"
                    "gradient_accumulation_steps: 8\nmax_length: 1024\nr: 8\nreport_to: tensorboard\n"
                    "bf16: true\ngradient_checkpointing: true\nadam_beta2: 0.95\nsave_total_limit: 3\n")
    cfg = resolve_config({"model": "m", "data_dir": "d", "output_dir": "o"}, str(yaml))
    assert (cfg.lr, cfg.epochs, cfg.micro_batch, cfg.grad_accum, cfg.seq_len, cfg.lora_r) == (5e-5, 2.0, 2, 8, 1024, 8)
    assert (cfg.report_to, cfg.dtype, cfg.gradient_checkpointing) == (["tensorboard"], "bf16", "on")
    assert (cfg.adam_betas, cfg.keep_checkpoints) == ((0.9, 0.95), 3)
    yaml.write_text("lerning_rate: 1.0e-4\n")
    with pytest.raises(MensError, match="unknown config key 'lerning_rate'") as err:
        resolve_config({"model": "m"}, str(yaml))
    assert "did you mean 'learning_rate'" in err.value.format()
    yaml.write_text("lr: 1.0e-4\nlearning_rate: 2.0e-4\n")
    with pytest.raises(MensError, match="both set lr"):
        resolve_config({"model": "m"}, str(yaml))


def test_probe_names_the_mixed_precision_to_ask_for():
    """`mens probe` says which --dtype gives mixed precision where the default would not: fp16-mixed
    on a GPU without bf16 (T4), bf16-mixed on a CPU with AVX-512 BF16; nothing on a bf16 GPU."""
    from mens.train.probe import Probe, format_probe

    def probe(device, bf16):
        return format_probe(Probe(device, "x", 1, 16.0, 64.0, 8, bf16, "2.13.0", None, "16g"))

    assert "--dtype fp16-mixed" in probe("cuda", False)
    assert "--dtype bf16-mixed" in probe("cpu", True)
    assert "--dtype" not in probe("cuda", True) and "--dtype" not in probe("cpu", False)


def test_cpu_bf16_is_measured_where_the_flags_allow_it(monkeypatch):
    """`dtype: auto` computes in bf16 on a CPU only where bf16 matmuls measure faster than fp32's
    (an Intel Xeon with AVX-512 BF16 but no AMX runs them at ~0.5x: bf16-mixed trained 1.45x
    slower there). On this machine's own CPU: no flags → no bf16 and nothing measured; flags →
    the verdict of the measured ratio; MENS_CPU_BF16 overrides without measuring."""
    import math

    from mens.train import probe as probe_mod

    speedup = probe_mod.bf16_matmul_speedup()
    assert math.isfinite(speedup) and speedup > 0
    monkeypatch.delenv("MENS_CPU_BF16", raising=False)
    flags = probe_mod._cpu_flags()
    native, measured = probe_mod.cpu_bf16()
    if "avx512_bf16" in flags or "amx_bf16" in flags:
        assert measured is not None and native == (measured >= probe_mod.CPU_BF16_MIN_SPEEDUP)
    else:
        assert (native, measured) == (False, None)
    for pinned in ("0", "1"):
        monkeypatch.setenv("MENS_CPU_BF16", pinned)
        assert probe_mod.cpu_bf16() == (pinned == "1", None)
    monkeypatch.setenv("MENS_CPU_BF16", "0")
    info = probe_mod.probe("cpu")
    assert not info.bf16 and "bf16          no" in probe_mod.format_probe(info)
