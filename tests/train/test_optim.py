"""Optimizers (torch AdamW, Muon + AdamW, bitsandbytes' 8-bit and paged AdamW) and transformers' schedules, as
`mens train` builds them: each resumes exactly from a checkpoint, and the schedules have the
shapes their names promise."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch
from torch import nn

from mens.errors import MensError
from mens.train.checkpoint import Progress, load_checkpoint, rng_state, save_checkpoint
from mens.train.config import SCHEDULERS, TrainConfig, resolve_config
from mens.train.prepare import build_optimizer
from mens.train.schedule import build_scheduler, lr_factor, warmup_steps

OPTIMS = ("adamw", "muon", "adamw_8bit", "paged_adamw_8bit")


def _cfg(**kw) -> TrainConfig:
    backend = "full" if kw.get("optim") == "muon" else "qlora"  # Muon trains whole matrices
    return TrainConfig(**{"model": "m", "lr": 1e-2, "warmup_steps": 2, "weight_decay": 0.1, "backend": backend,
                          **kw}).validate()


def _setup(cfg: TrainConfig, seed: int, total: int = 8):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 96), nn.ReLU(), nn.Linear(96, 3))  # 6144 weights: 8-bit state
    optimizer = build_optimizer(cfg, [p for p in model.parameters()], "cpu")
    return model, optimizer, build_scheduler(cfg, optimizer, total)


def _step(model, optimizer, scheduler) -> tuple[float, float]:
    loss = model(torch.randn(5, 64)).square().mean()
    loss.backward()
    lr = scheduler.get_last_lr()[0]
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    return loss.item(), lr


@pytest.mark.filterwarnings("ignore:Paged optimizers are not supported on CPU")
@pytest.mark.parametrize("optim", OPTIMS)
@pytest.mark.parametrize("schedule", SCHEDULERS)
def test_every_optimizer_and_schedule_resumes_exactly(tmp_path, optim, schedule):
    cfg = _cfg(optim=optim, lr_scheduler_type=schedule)
    model, optimizer, scheduler = _setup(cfg, 0)
    before = [p.detach().clone() for p in model.parameters()]
    head = [_step(model, optimizer, scheduler) for _ in range(3)]
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # it trains
    if optim == "muon":  # the matrices on Muon (a momentum buffer), the biases on AdamW (two moments)
        assert set(optimizer.state[model[0].weight]) == {"momentum_buffer"}
        assert {"exp_avg", "exp_avg_sq"} <= set(optimizer.state[model[0].bias])
    elif optim != "adamw":
        assert optimizer.state[model[0].weight]["state1"].dtype == torch.uint8  # 8-bit moments
    path = save_checkpoint(tmp_path, model, optimizer, scheduler, Progress(step=3), [rng_state()])
    expected = [_step(model, optimizer, scheduler) for _ in range(4)]
    fresh, fresh_opt, fresh_sched = _setup(cfg, 1)
    load_checkpoint(path, fresh, fresh_opt, fresh_sched)
    assert [_step(fresh, fresh_opt, fresh_sched) for _ in range(4)] == expected
    lrs = [lr for _, lr in head + expected]
    assert lrs[:2] == ([1e-2, 1e-2] if schedule == "constant" else [0.0, 5e-3])  # warmup from 0 (not constant)


def test_schedule_shapes_and_warmup_ratio():
    def lrs(**kw):
        cfg = _cfg(**kw)
        _, optimizer, scheduler = _setup(cfg, 0, total=10)
        out = []
        for _ in range(10):
            out.append(scheduler.get_last_lr()[0])
            optimizer.step()
            scheduler.step()
        return out

    linear = lrs(lr_scheduler_type="linear")
    assert linear[2] == pytest.approx(1e-2) and linear[6] == pytest.approx(0.5e-2)  # 8 decay steps after 2
    assert set(lrs(lr_scheduler_type="constant_with_warmup")[2:]) == {1e-2}
    cosine = lrs(lr_scheduler_type="cosine")
    assert cosine[6] == pytest.approx(0.5e-2) and cosine[9] < cosine[7] < 1e-2
    assert lrs(lr_scheduler_type="linear", warmup_ratio=0.25)[:4] == pytest.approx([0, 1 / 3 * 1e-2, 2 / 3 * 1e-2, 1e-2])
    assert warmup_steps(_cfg(warmup_ratio=0.05), 30) == 2 and warmup_steps(_cfg(warmup_steps=50), 30) == 30


@pytest.mark.parametrize("schedule", SCHEDULERS)
@pytest.mark.parametrize("warmup, total", [(0, 1), (0, 50), (30, 3200), (5, 50), (7, 7), (10, 3)])
def test_schedules_are_transformers_own_to_the_bit(schedule, warmup, total):
    """Our lr factors are transformers' get_scheduler's, the same float at every step (written out
    so that training does not import transformers.optimization, which imports all of peft)."""
    from transformers import get_scheduler

    theirs = get_scheduler(schedule, torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0),
                           num_warmup_steps=warmup, num_training_steps=total).lr_lambdas[0]
    ours = lr_factor(schedule, warmup, total)
    assert [ours(step) for step in range(total + 3)] == [theirs(step) for step in range(total + 3)]


def test_batched_muon_is_torchs_muon():
    """The same arithmetic as torch.optim.Muon (bit for bit), the Newton-Schulz steps batched."""
    from mens.train.muon import BatchedMuon

    torch.manual_seed(0)
    shapes = [(32, 32)] * 3 + [(96, 32)] * 2 + [(32, 96)]
    ours = [nn.Parameter(torch.randn(*s) * 0.1) for s in shapes]
    theirs = [nn.Parameter(p.detach().clone()) for p in ours]
    opts = [BatchedMuon(ours, lr=1e-2, weight_decay=0.1, adjust_lr_fn="match_rms_adamw"),
            torch.optim.Muon(theirs, lr=1e-2, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")]
    for _ in range(4):
        for a, b in zip(ours, theirs):
            a.grad = torch.randn_like(a)
            b.grad = a.grad.clone()
        for o in opts:
            o.step()
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


def test_muon_leaves_embeddings_head_and_norms_to_adamw(tiny_llama_dir):
    from transformers import AutoModelForCausalLM

    from mens.train.muon import MuonWithAdamW

    model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
    params = list(model.parameters())
    optimizer = build_optimizer(_cfg(optim="muon"), params, "cpu", model=model)
    assert isinstance(optimizer, MuonWithAdamW)
    on_muon = {id(p) for p in optimizer.muon.param_groups[0]["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in on_muon}
    assert names and all(".layers." in n and n.endswith(("proj.weight",)) for n in names)
    assert not any("embed" in n or "lm_head" in n or "norm" in n for n in names)
    assert len(on_muon) + sum(len(g["params"]) for g in optimizer.adamw.param_groups) == len(params)


@pytest.mark.parametrize("values, message", [
    ({"optim": "sgd"}, "unknown optim value 'sgd'"),
    ({"optim": "muon", "backend": "lora"}, "--optim muon trains whole weight matrices, not --backend lora's"),
    ({"optim": "muon", "backend": "full", "distributed": "fsdp"}, "--optim muon needs each weight matrix whole"),
    ({"lr_scheduler_type": "polynomial"}, "unknown lr_scheduler_type value 'polynomial'"),
    ({"warmup_ratio": 1.5}, "warmup_ratio must be in [0, 1]"),
])
def test_bad_values_are_one_line(values, message):
    with pytest.raises(MensError) as err:
        TrainConfig(model="m", **values).validate()
    assert message in err.value.what


def test_hf_names_and_flags(tmp_path, capsys):
    from mens.cli import main

    yaml = tmp_path / "run.yaml"
    yaml.write_text("model: m\noptim: adamw_bnb_8bit\nlr_scheduler_type: linear\nwarmup_ratio: 0.1\n")
    cfg = resolve_config({}, str(yaml))
    assert (cfg.optim, cfg.lr_scheduler_type, cfg.warmup_ratio) == ("adamw_bnb_8bit", "linear", 0.1)
    model, optimizer, _ = _setup(cfg, 0)
    assert type(optimizer).__name__ == "AdamW8bit"
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert "--optim" in out and "--lr-scheduler-type" in out and "--warmup-ratio" in out
    with pytest.raises(MensError, match="FSDP"):
        build_optimizer(cfg, list(model.parameters()), "cuda", "fsdp")


def _interrupted_then_resumed(model_dir, tmp_path, **common) -> dict:
    """Train 5 steps whole, and again with Ctrl+C at step 2 and a rerun: the two must have the
    same losses. Returns the cut run's manifest hyperparameters."""
    from train_helpers import config, write_pairs

    from mens.train.loop import train

    data = write_pairs(tmp_path / "data")
    common = dict(max_steps=5, seq_len=128, **common)
    whole = train(config(model_dir, data, tmp_path / "whole", **common))
    assert whole.losses[-1] < whole.losses[0]

    def ctrl_c_at_2(step: int, loss: float) -> None:
        if step == 2:
            os.kill(os.getpid(), signal.SIGINT)

    run = tmp_path / "cut"
    first = train(config(model_dir, data, run, **common), on_step=ctrl_c_at_2)
    assert first.status == "interrupted" and first.steps == 2
    second = train(config(model_dir, data, run, **common))
    assert first.losses + second.losses == pytest.approx(whole.losses, rel=1e-6, abs=0)
    return json.loads((run / "training_manifest.json").read_text())["hyperparameters"]


@pytest.mark.filterwarnings("ignore:Paged optimizers are not supported on CPU")
def test_a_run_with_8bit_adamw_and_a_linear_schedule_resumes_exactly(tiny_model_dir, tmp_path):
    hp = _interrupted_then_resumed(tiny_model_dir, tmp_path, backend="lora", lr=5e-3, optim="paged_adamw_8bit",
                                   lr_scheduler_type="linear", warmup_ratio=0.4, lora_r=64)
    assert (hp["optim"], hp["lr_scheduler_type"], hp["warmup_ratio"]) == ("paged_adamw_8bit", "linear", 0.4)


def test_a_scratch_run_with_muon_resumes_exactly_and_says_so(tmp_path):
    """--optim muon end to end: a scratch Llama trains, Ctrl+C at step 2 checkpoints, and the
    rerun continues to the losses of the run that was never stopped; the manifest names it."""
    hp = _interrupted_then_resumed(None, tmp_path, backend="scratch", model=None, lr=3e-3, optim="muon",
                                   scratch_arch="llama", adam_betas=(0.9, 0.95))
    assert hp["optim"] == "muon"
