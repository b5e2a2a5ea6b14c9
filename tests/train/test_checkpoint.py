"""mens.train.checkpoint on a tiny real model: a checkpoint restores everything that decides the
next step, is pruned to the newest `keep`, refuses a model it does not fit, and the final save
lands beside what the run dir already holds."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from mens.errors import MensError
from mens.train.checkpoint import (Progress, latest_checkpoint, list_checkpoints, load_checkpoint, resume, rng_state,
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


def test_a_cpu_run_leaves_cuda_alone_where_a_gpu_is(tmp_path, monkeypatch):
    """On a GPU machine a --device cpu run's checkpoints and resume do not touch CUDA (reading
    its RNG starts a CUDA context in every checkpointing process); the machine's GPU is stood in
    for, as this one has none: any CUDA RNG call fails the test."""
    def touched(*args, **kwargs):
        raise AssertionError("a CPU run touched CUDA's RNG")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for name in ("get_rng_state_all", "get_rng_state", "set_rng_state", "set_rng_state_all"):
        monkeypatch.setattr(torch.cuda, name, touched)
    model, optimizer, scheduler = _setup(0)
    state = rng_state()
    assert "cuda" not in state
    path = save_checkpoint(tmp_path, model, optimizer, scheduler, Progress(step=1), [{**state, "cuda": [[0]]}])
    load_checkpoint(path, model, optimizer, scheduler)  # a checkpoint with CUDA's state (older mens) too


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


# ---------------------------------------------------------------- resume never unpickles; intact or skipped

class _Payload:
    """A pickle that runs code when loaded: it would create `marker`."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _saved(tmp_path, steps=(1, 2)):
    model, optimizer, scheduler = _setup(0)
    for step in steps:
        _step(model, optimizer, scheduler)
        save_checkpoint(tmp_path, model, optimizer, scheduler, Progress(step=step), [rng_state()], keep=0)
    return model, optimizer, scheduler


def _rerecord(path):
    """What a tamperer who also rewrites files.json does: the record matches the new files."""
    import json

    from mens.train.checkpoint import FILES, _file_record

    (path / FILES).write_text(json.dumps({f.name: _file_record(f) for f in path.iterdir() if f.name != FILES}))


@pytest.mark.parametrize("name", ["optimizer.pt", "scheduler.pt"])
def test_a_pickle_payload_in_a_checkpoint_is_refused_and_never_runs(tmp_path, name):
    from mens.train.checkpoint import CorruptCheckpoint, read_checkpoint

    _saved(tmp_path, steps=(1,))
    path = tmp_path / "checkpoints" / "step-1"
    marker = tmp_path / "pwned"
    torch.save({"state": {}, "param_groups": [], "x": _Payload(marker)}, path / name)
    _rerecord(path)
    with pytest.raises(CorruptCheckpoint, match=f"{name} cannot be loaded"):
        read_checkpoint(path)
    assert not marker.exists()
    model, optimizer, scheduler = _setup(1)
    with pytest.raises(MensError, match="no intact checkpoint to resume from"):
        resume(tmp_path, model, optimizer, scheduler)
    assert not marker.exists()


def _corrupt(path, how):
    f = path / "trainable.safetensors"
    if how == "truncated":
        f.write_bytes(f.read_bytes()[:40])
    elif how == "flipped":  # same size, other bytes: only the recorded hash can tell
        data = bytearray(f.read_bytes())
        data[-1] ^= 0xFF
        f.write_bytes(bytes(data))
    elif how == "missing":
        (path / "optimizer.pt").unlink()
    elif how == "garbage-progress":
        (path / "progress.json").write_text("{not json")
        _rerecord(path)
    elif how == "garbage-rng":
        (path / "rng.json").write_bytes(b"\xff\xfe\x00")
        _rerecord(path)
    elif how == "truncated-unrecorded":  # no files.json (an older checkpoint): loading tells
        (path / "files.json").unlink()
        (path / "optimizer.pt").write_bytes((path / "optimizer.pt").read_bytes()[:100])


CORRUPTIONS = ["truncated", "flipped", "missing", "garbage-progress", "garbage-rng", "truncated-unrecorded"]


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_corrupt_newest_checkpoint_falls_back_to_the_newest_intact_one(tmp_path, how, caplog):
    import logging

    from mens.train.checkpoint import newest_intact

    _saved(tmp_path, steps=(1, 2))
    reference, ref_opt, ref_sched = _setup(5)
    load_checkpoint(tmp_path / "checkpoints" / "step-1", reference, ref_opt, ref_sched)
    _corrupt(tmp_path / "checkpoints" / "step-2", how)
    model, optimizer, scheduler = _setup(1)
    with caplog.at_level(logging.INFO, logger="mens"):
        newest = newest_intact(tmp_path)
        path, prog = resume(tmp_path, model, optimizer, scheduler, newest=newest)
    assert path.name == "step-1" and prog.step == 1
    assert weights_sha256(model) == weights_sha256(reference)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "step-2 is not intact" in said and "--force-restart" in said


@pytest.mark.parametrize("how", CORRUPTIONS)
def test_no_intact_checkpoint_is_a_one_line_error(tmp_path, how):
    _saved(tmp_path, steps=(1,))
    _corrupt(tmp_path / "checkpoints" / "step-1", how)
    model, optimizer, scheduler = _setup(1)
    with pytest.raises(MensError) as err:
        resume(tmp_path, model, optimizer, scheduler)
    line = err.value.format()
    assert "\n" not in line and "no intact checkpoint to resume from (step-1: " in line
    assert line.endswith("— rerun with --force-restart to start over")


def test_a_checkpoint_written_before_rng_json_still_resumes(tmp_path):
    """Older checkpoints hold rng.pt (numpy's state as an array): read with weights_only, numpy's
    array type allowed and nothing else."""
    import random as pyrandom

    _saved(tmp_path, steps=(1,))
    path = tmp_path / "checkpoints" / "step-1"
    (path / "rng.json").unlink()
    (path / "files.json").unlink()
    torch.save([{"python": pyrandom.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}],
               path / "rng.pt")
    expected = (pyrandom.random(), float(np.random.rand()), float(torch.rand(1)))
    pyrandom.seed(9), np.random.seed(9), torch.manual_seed(9)
    model, optimizer, scheduler = _setup(1)
    assert resume(tmp_path, model, optimizer, scheduler)[0] == path
    assert (pyrandom.random(), float(np.random.rand()), float(torch.rand(1))) == expected


def test_a_new_run_removes_what_a_killed_one_left(tmp_path):
    import tempfile

    from mens.train.checkpoint import remove_run_leftovers

    _saved(tmp_path, steps=(1,))
    ckpts = tmp_path / "checkpoints"
    left = [Path(tempfile.mkdtemp(prefix=".step-2.", suffix=".tmp", dir=ckpts)), ckpts / ".step-1.old",
            Path(tempfile.mkdtemp(prefix=".save.", dir=tmp_path)),
            Path(tempfile.mkstemp(prefix=".training_manifest.json.", suffix=".tmp", dir=tmp_path)[1]),
            Path(tempfile.mkstemp(prefix=".MODEL_CARD.md.", suffix=".tmp", dir=tmp_path)[1])]
    left[1].mkdir()
    (left[0] / "optimizer.pt").write_bytes(b"half")
    keep = [tmp_path / "notes.txt", tmp_path / ".hidden-by-user"]
    for k in keep:
        k.write_text("mine")
    assert sorted(remove_run_leftovers(tmp_path)) == sorted(left)
    assert not any(p.exists() for p in left) and all(k.exists() for k in keep)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-1"]
