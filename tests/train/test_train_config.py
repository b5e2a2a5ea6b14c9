"""TrainConfig precedence: flags > YAML > preset > the probe's recommendation."""

from __future__ import annotations

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
    with pytest.raises(MensError, match="unknown distributed mode 'mpi'"):
        resolve_config({**base, "distributed": "mpi"})
    with pytest.raises(MensError, match="does not support --bench"):
        resolve_config({**base, "distributed": "fsdp", "bench": "examples/bench"})
