"""`torchrun --nproc_per_node 2 -m mens train --distributed fsdp …` shards the model with FSDP2 on
CPU (gloo) and trains exactly like one process on the same global batch: same losses, same saved
adapter or model, same checkpoint files; and a run resumes under FSDP from a checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from train_helpers import config, train_args, write_pairs

pytestmark = pytest.mark.slow  # two torchrun ranks per test

# 14 training pairs = 7 micro-batches an epoch, so each epoch's last step has 3 for 2 ranks; 5
# validation pairs = 3 batches; rows of up to 64 tokens run one per pass (--tokens-per-pass 64):
# ranks run unequal numbers of passes, which FSDP must pad.
COMMON = dict(epochs=2, max_steps=None, micro_batch=2, seq_len=64, tokens_per_pass=64, lora_dropout=0.0,
              lr=1e-2, val_split=0.3, eval_interval=2, save_interval=2)
FLAGS = {**COMMON, "no_packing": True}      # for `mens train …`
FIELDS = {**COMMON, "packing": False}       # for a TrainConfig


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_pairs(tmp_path_factory.mktemp("fsdp") / "data", n=19)


def _torchrun(*args) -> None:
    torchrun = Path(sys.executable).with_name("torchrun")
    env = dict(os.environ, OMP_NUM_THREADS="1", MENS_QUIET="1")
    proc = subprocess.run([str(torchrun), "--standalone", "--nproc_per_node", "2", "-m", "mens", *args],
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _manifest(run: Path) -> dict:
    return json.loads((run / "training_manifest.json").read_text())


def _assert_same_tensors(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key].float(), b[key].float(), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("backend", ["lora", "full", "qlora"])
def test_fsdp_two_ranks_match_single_process(backend, run_cli, tiny_model_dir, data, tmp_path):
    fsdp, single = tmp_path / "fsdp", tmp_path / "single"
    # QLoRA as on the GPUs FSDP is for: bf16 compute (the tests' CPU verdict would give fp32, where
    # gloo's reduce-scatter sums the 2 ranks' gradients in another order, and Adam at lr 1e-2 turns
    # that last-bit difference into 3e-5 on an element whose gradient is near zero)
    flags = dict(FLAGS, dtype="bf16") if backend == "qlora" else FLAGS
    _torchrun(*train_args(tiny_model_dir, data, fsdp, backend=backend, grad_accum=2, distributed="fsdp", **flags))
    code, _, err = run_cli(*train_args(tiny_model_dir, data, single, backend=backend, grad_accum=4, **flags))
    assert code == 0, err

    m, s = _manifest(fsdp), _manifest(single)
    assert m["device"]["world_size"] == 2 and m["device"]["distributed"] == "fsdp"
    assert s["device"]["distributed"] is None and m["hyperparameters"]["distributed"] == "fsdp"
    hashes = m["results"]["rank_weights_sha256"]
    assert len(hashes) == 2 and hashes[0] == hashes[1]  # both ranks gathered the same full weights
    assert m["results"]["steps"] == s["results"]["steps"] == 4
    assert m["results"]["final_loss"] == pytest.approx(s["results"]["final_loss"], rel=1e-5)
    assert m["results"]["val_loss"] == pytest.approx(s["results"]["val_loss"], rel=1e-5)

    weights = "model.safetensors" if backend == "full" else "adapter_model.safetensors"
    _assert_same_tensors(load_file(str(fsdp / weights)), load_file(str(single / weights)))
    if backend != "full":  # a standard PEFT adapter, loadable as today
        assert json.loads((fsdp / "adapter_config.json").read_text())["base_model_name_or_path"] == str(
            Path(tiny_model_dir).resolve())
    # The checkpoint holds the full weights and optimizer state, in the unsharded layout.
    ckpt_f, ckpt_s = fsdp / "checkpoints" / "step-2", single / "checkpoints" / "step-2"
    _assert_same_tensors(load_file(str(ckpt_f / "trainable.safetensors")),
                         load_file(str(ckpt_s / "trainable.safetensors")))
    opt_f, opt_s = (torch.load(c / "optimizer.pt", weights_only=False) for c in (ckpt_f, ckpt_s))
    assert opt_f["param_groups"] == opt_s["param_groups"]
    assert opt_f["state"].keys() == opt_s["state"].keys()
    for i in opt_s["state"]:
        _assert_same_tensors(opt_f["state"][i], opt_s["state"][i])


def test_fsdp_resumes_a_checkpoint(tiny_model_dir, data, tmp_path):
    """Stopped after step 2 (one process), resumed under FSDP: steps 3-4 are the uninterrupted run's."""
    from mens.train.loop import train

    whole = train(config(tiny_model_dir, data, tmp_path / "whole", backend="full", grad_accum=4, **FIELDS))

    def ctrl_c_at_2(step: int, loss: float) -> None:
        if step == 2:
            os.kill(os.getpid(), signal.SIGINT)

    run = tmp_path / "cut"
    first = train(config(tiny_model_dir, data, run, backend="full", grad_accum=4, **FIELDS), on_step=ctrl_c_at_2)
    assert first.status == "interrupted" and (run / "checkpoints" / "step-2").is_dir()
    _torchrun(*train_args(tiny_model_dir, data, run, backend="full", grad_accum=2, distributed="fsdp", **FLAGS))
    steps = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
    resumed = [e["loss"] for e in steps if e["event"] == "step" and e["step"] > 2]
    assert resumed == pytest.approx([round(x, 6) for x in whole.losses[2:]], rel=1e-5)
    assert _manifest(run)["results"]["final_loss"] == pytest.approx(whole.final_loss, rel=1e-5)


def test_fsdp_refuses_a_mid_run_bench(run_cli, tiny_model_dir, data, tmp_path):
    code, _, err = run_cli(*train_args(tiny_model_dir, data, tmp_path / "run", distributed="fsdp",
                                       bench=tmp_path / "bench.jsonl"))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("mens: error: --distributed fsdp does not support --bench"), err
    assert "--distributed ddp" in lines[0]
