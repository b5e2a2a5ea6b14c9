"""`torchrun --nproc_per_node 2 -m mens train …` trains data-parallel on CPU (gloo): both ranks
end with the same adapter, equal to single-process training on the same global batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from train_helpers import train_args, write_pairs

pytestmark = pytest.mark.slow  # two torchrun ranks


def test_torchrun_two_ranks_match_single_process(run_cli, tiny_model_dir, tmp_path):
    data = write_pairs(tmp_path / "data", n=16)
    common = dict(backend="lora", max_steps=3, micro_batch=1, lora_dropout=0.0, lr=1e-2, seq_len=128,
                  val_split=0.0)
    ddp_run = tmp_path / "ddp"
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "mens",
           *train_args(tiny_model_dir, data, ddp_run, grad_accum=1, **common)]
    env = dict(os.environ, OMP_NUM_THREADS="1", MENS_QUIET="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]

    code, _, err = run_cli(*train_args(tiny_model_dir, data, tmp_path / "single", grad_accum=2, **common))
    assert code == 0, err

    manifest = json.loads((ddp_run / "training_manifest.json").read_text())
    assert manifest["device"]["world_size"] == 2 and manifest["device"]["gradient_sum"] == "shared memory"
    hashes = manifest["results"]["rank_weights_sha256"]
    assert len(hashes) == 2 and hashes[0] == hashes[1]  # the ranks ended identical
    single = json.loads((tmp_path / "single" / "training_manifest.json").read_text())
    assert manifest["results"]["final_loss"] == __import__("pytest").approx(single["results"]["final_loss"], rel=1e-5)
    a = load_file(str(ddp_run / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "single" / "adapter_model.safetensors"))
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-6)


def test_nproc_runs_the_ranks_itself_and_matches_single_process(run_cli, tiny_model_dir, tmp_path, monkeypatch):
    """`mens train --nproc 2` is torchrun without typing it: two local ranks (gloo on CPU) that
    end where one process with twice the accumulation does; bad input is one line before any rank
    starts."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    data = write_pairs(tmp_path / "data", n=16)
    common = dict(backend="lora", max_steps=3, micro_batch=1, lora_dropout=0.0, lr=1e-2, seq_len=128, val_split=0.0)
    code, _, err = run_cli(*train_args(tiny_model_dir, data, tmp_path / "ranks", grad_accum=1, nproc=2, **common))
    assert code == 0, err
    code, _, err = run_cli(*train_args(tiny_model_dir, data, tmp_path / "single", grad_accum=2, **common))
    assert code == 0, err
    ranks = json.loads((tmp_path / "ranks" / "training_manifest.json").read_text())
    assert ranks["device"]["world_size"] == 2 and ranks["hyperparameters"]["nproc"] == 2
    assert ranks["device"]["gradient_sum"] == "shared memory"  # ranks on one host skip gloo's TCP
    a = load_file(str(tmp_path / "ranks" / "adapter_model.safetensors"))
    b = load_file(str(tmp_path / "single" / "adapter_model.safetensors"))
    for key in b:
        torch.testing.assert_close(a[key], b[key], rtol=1e-4, atol=1e-6)

    code, _, err = run_cli(*train_args(tiny_model_dir, tmp_path / "none", tmp_path / "bad", nproc=2))
    assert code == 2 and err.count("\n") == 1 and "data directory not found" in err, err
    assert not (tmp_path / "bad").exists()
