"""training_manifest.json: what a run writes is what later stages read back (mens.hf.read_manifest)."""

from __future__ import annotations

import json

import pytest

from mens.errors import MensError
from mens.hf import is_nf4, read_manifest
from mens.train.manifest import MANIFEST, SCHEMA, Manifest


def _manifest(**overrides) -> Manifest:
    fields = dict(base_model={"path": "/m", "id": "/m", "config_sha256": "ab"}, backend="qlora",
                  quantization="bnb-nf4-double-quant", dtype="bfloat16",
                  tokenizer={"source": "/m", "vocab_size": 300, "chat_format": "chatml"},
                  data={"train_pairs": 10}, hyperparameters={"lr": 0.1}, preset="tiny",
                  device={"type": "cpu"}, seed=3, provenance={"license": None},
                  speed={"tokens_per_pass": 512, "checkpoint_every": None})
    fields.update(overrides)
    return Manifest(**fields)


def test_written_manifest_reads_back(tmp_path):
    m = _manifest()
    m.results.steps, m.results.final_loss = 4, 1.25
    m.write(tmp_path)
    got = read_manifest(tmp_path)
    assert got["schema_version"] == SCHEMA and got["status"] == "running"
    assert got["backend"] == "qlora" and is_nf4(got)
    assert got["results"]["steps"] == 4 and got["results"]["final_loss"] == 1.25
    assert got["speed"] == {"tokens_per_pass": 512, "checkpoint_every": None}
    assert got["hyperparameters"] == {"lr": 0.1} and got["seed"] == 3
    assert got["versions"]["torch"] and got["process"]["pid"] > 0
    assert got["created"] <= got["updated"]
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically


def test_rewrite_updates_status_and_keeps_created(tmp_path):
    m = _manifest(backend="lora", quantization=None)
    m.created = "2020-01-01T00:00:00Z"
    m.write(tmp_path)
    m.status, m.error = "failed", "RuntimeError: x"
    m.write(tmp_path)
    got = read_manifest(tmp_path)
    assert got["status"] == "failed" and got["error"] == "RuntimeError: x"
    assert got["created"] == "2020-01-01T00:00:00Z" and not is_nf4(got)


def test_missing_and_malformed_manifests(tmp_path):
    assert read_manifest(tmp_path) == {}
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(MensError, match="malformed training manifest"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"quantization": "NF4"}))
    assert is_nf4(read_manifest(tmp_path))
