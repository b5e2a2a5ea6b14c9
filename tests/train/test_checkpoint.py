"""mens.train.checkpoint on a tiny real model: a checkpoint restores everything that decides the
next step, is pruned to the newest `keep`, refuses a model it does not fit, and the final save
lands beside what the run dir already holds."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn

from mens.errors import MensError
from mens.train.checkpoint import (Progress, latest_checkpoint, list_checkpoints, load_checkpoint, rng_state,
                                   save_checkpoint, save_pretrained, weights_sha256)


def _setup(seed: int):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    model[0].bias.requires_grad_(False)  # frozen: not part of a checkpoint
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))
    return model, optimizer, scheduler


def _step(model, optimizer, scheduler):
    x = torch.randn(5, 6)  # drawn from the global RNG: a restored RNG gives the same batch
    loss = model(x).square().mean()
    loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return loss.item()


def test_resume_continues_the_same_trajectory(tmp_path):
    model, optimizer, scheduler = _setup(0)
    for _ in range(3):
        _step(model, optimizer, scheduler)
    prog = Progress(step=3, epoch=1, batch_in_epoch=2, supervised_tokens=30, input_tokens=40, last_loss=0.5)
    path = save_checkpoint(tmp_path, model, optimizer, scheduler, prog, [rng_state()])
    assert path.name == "step-3" and latest_checkpoint(tmp_path) == path
    expected = [_step(model, optimizer, scheduler) for _ in range(3)]
    random_after = (random.random(), float(np.random.rand()))

    from safetensors.torch import load_file

    assert set(load_file(str(path / "trainable.safetensors"))) == {"0.weight", "2.weight", "2.bias"}
    fresh, fresh_opt, fresh_sched = _setup(1)  # other trainable weights, empty optimizer state
    with torch.no_grad():
        fresh[0].bias.copy_(_setup(0)[0][0].bias)  # the frozen base is the same (rebuilt, not saved)
    torch.manual_seed(123)
    restored = load_checkpoint(path, fresh, fresh_opt, fresh_sched)
    assert restored == prog
    assert fresh_sched.last_epoch == 3
    resumed = [_step(fresh, fresh_opt, fresh_sched) for _ in range(3)]
    assert resumed == expected
    assert (random.random(), float(np.random.rand())) == random_after
    assert weights_sha256(fresh) == weights_sha256(model)


def test_keep_prunes_old_checkpoints_and_ignores_half_written_ones(tmp_path):
    model, optimizer, scheduler = _setup(0)
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, model, optimizer, scheduler, Progress(step=step), [rng_state()], keep=2)
    (tmp_path / "checkpoints" / "step-9").mkdir()  # a crashed write: no progress.json
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-2", "step-3"]
    assert latest_checkpoint(tmp_path).name == "step-3"


def test_a_checkpoint_of_another_model_is_refused(tmp_path):
    model, optimizer, scheduler = _setup(0)
    path = save_checkpoint(tmp_path, model, optimizer, scheduler, Progress(step=1), [rng_state()])
    other = nn.Sequential(nn.Linear(6, 3))
    other_opt = torch.optim.AdamW(other.parameters())
    with pytest.raises(MensError, match="does not match the model"):
        load_checkpoint(path, other, other_opt, torch.optim.lr_scheduler.LambdaLR(other_opt, lambda s: 1.0))


def test_weights_hash_covers_trainable_weights_only(tmp_path):
    model, _, _ = _setup(0)
    before = weights_sha256(model)
    with torch.no_grad():
        model[0].bias.add_(1.0)  # frozen
    assert weights_sha256(model) == before
    with torch.no_grad():
        model[2].weight[0, 0] += 1e-3
    assert weights_sha256(model) != before


def test_save_pretrained_lands_beside_the_run_files(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = tmp_path / "run"
    run.mkdir()
    (run / "training_manifest.json").write_text("{}")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        model.get_input_embeddings().weight[0, 0] = 7.0
    save_pretrained(run, model, tok)
    assert (run / "training_manifest.json").read_text() == "{}"
    assert not any(p.name.startswith(".save.") for p in run.iterdir())  # the temp dir is gone
    loaded = AutoModelForCausalLM.from_pretrained(run, dtype=torch.float32)
    assert loaded.get_input_embeddings().weight[0, 0].item() == 7.0
    assert AutoTokenizer.from_pretrained(run).get_vocab() == tok.get_vocab()
