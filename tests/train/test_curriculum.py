"""A curriculum (`--curriculum-data`, `--curriculum-steps`, `--curriculum-lr`): its pairs fill the
first steps, at their own constant rate, then the data follows under the named schedule; a scratch
tokenizer learns from both; generate-data writes the copy drills it is meant for."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch
from train_helpers import config, write_pairs

from mens.corpus.synth.drills import copy_drills
from mens.records import read_pairs
from mens.train.loop import train
from mens.train.prepare import open_run, prepare
from mens.train.schedule import build_scheduler
from mens.train.scratch import training_texts


def write_drills(path, n=16):
    path.write_text("".join(json.dumps(p.to_dict()) + "\n" for p in copy_drills(n, seed=3)))
    return path


def test_the_first_steps_train_on_the_curriculum_then_the_data(tiny_model_dir, tmp_path):
    data = write_pairs(tmp_path / "data", n=12)
    drills = write_drills(tmp_path / "drills.jsonl")
    cfg = config(tiny_model_dir, data, tmp_path / "run", backend="full", max_steps=6, seq_len=128,
                 micro_batch=1, grad_accum=2, curriculum_data=str(drills), curriculum_steps=3)
    session = prepare(cfg, open_run(cfg, force_restart=True))
    tokenizer = session.built.tokenizer
    batches = session.batches_of(0)

    def said(batch) -> str:
        return tokenizer.decode([t for t in batch.input_ids[0].tolist()])

    answers = [p.response for p in read_pairs(drills)[0]]
    lead = [said(b) for b in batches[:3 * session.window]]
    assert all(any(a in s for a in answers) and "adds" not in s for s in lead)
    assert all("Vox function that adds" in said(b) for b in batches[3 * session.window:])
    assert all("adds" in said(b) for b in session.batches_of(1))  # later epochs: the data alone
    assert session.total_steps == 6


def test_epochs_that_end_inside_the_curriculum_are_refused(tiny_model_dir, tmp_path):
    """With --epochs (no --max-steps) the step count is known only once the data is read; a
    fraction of an epoch that leaves no step for the data is a one-line error, not a schedule
    with a negative length."""
    from mens.errors import MensError

    data = write_pairs(tmp_path / "data", n=12)
    drills = write_drills(tmp_path / "drills.jsonl")
    cfg = config(tiny_model_dir, data, tmp_path / "run", backend="full", max_steps=None, epochs=0.25, seq_len=128,
                 micro_batch=1, curriculum_data=str(drills), curriculum_steps=8)
    with pytest.raises(MensError, match=r"--epochs 0.25 makes \d+ steps, none of them after the 8 curriculum steps"):
        prepare(cfg, open_run(cfg, force_restart=True))
    cfg = config(tiny_model_dir, data, tmp_path / "run2", backend="full", max_steps=None, epochs=1, seq_len=128,
                 micro_batch=1, curriculum_data=str(drills), curriculum_steps=8)
    assert prepare(cfg, open_run(cfg, force_restart=True)).total_steps > 8  # a whole epoch: the lead and the data


def test_curriculum_rate_then_the_schedule_from_its_warmup():
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=3e-3)
    from mens.train.config import resolve_config

    cfg = resolve_config({"model": "m", "data_dir": "d", "preset": "tiny", "lr": 3e-3, "max_steps": 10,
                          "warmup_steps": 2, "curriculum_data": "c", "curriculum_steps": 4, "curriculum_lr": 1e-3})
    scheduler = build_scheduler(cfg, optimizer, 10)
    lrs = []
    for _ in range(10):
        lrs.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert lrs[:4] == pytest.approx([0, 5e-4, 1e-3, 1e-3])          # warmup to the curriculum's rate
    assert lrs[4:7] == pytest.approx([0, 1.5e-3, 3e-3])             # the data's warmup, afresh
    assert lrs[6] > lrs[7] > lrs[8] > lrs[9] > 0                      # then its cosine over 6 steps


def test_scratch_tokenizer_learns_from_the_curriculum_too(tmp_path):
    data = write_pairs(tmp_path / "data", n=4)
    drills = write_drills(tmp_path / "drills.jsonl", n=3)
    texts = list(training_texts(data, None, drills))
    assert all(p.response in texts for p in read_pairs(drills)[0])
    assert texts[:2] == list(training_texts(data))[:2]


def test_run_with_a_curriculum_resumes_exactly(tiny_model_dir, tmp_path):
    data = write_pairs(tmp_path / "data", n=12)
    drills = write_drills(tmp_path / "drills.jsonl")
    common = dict(backend="full", max_steps=6, seq_len=128, lr=3e-3, curriculum_data=str(drills),
                  curriculum_steps=3, curriculum_lr=1e-3, warmup_steps=1)
    whole = train(config(tiny_model_dir, data, tmp_path / "whole", **common))

    def ctrl_c_at_2(step: int, loss: float) -> None:  # inside the curriculum
        if step == 2:
            os.kill(os.getpid(), signal.SIGINT)

    stopped = train(config(tiny_model_dir, data, tmp_path / "part", **common), on_step=ctrl_c_at_2)
    assert stopped.status == "interrupted" and stopped.steps == 2
    rest = train(config(tiny_model_dir, data, tmp_path / "part", **common))
    assert rest.status == "completed" and rest.steps == 6
    assert stopped.losses + rest.losses == pytest.approx(whole.losses, rel=1e-6, abs=0)


def test_generate_data_writes_copy_drills(run_cli, tmp_path):
    out = tmp_path / "drills.jsonl"
    code, _, err = run_cli("generate-data", "--kind", "copy-drills", "--limit", "40", "--seed", "2", "-o", out)
    assert code == 0, err
    pairs, skipped = read_pairs(out)
    assert len(pairs) == 40 and not skipped
    assert [p.to_dict() for p in pairs] == [p.to_dict() for p in copy_drills(40, 2)]
    for p in pairs:  # the answer is exactly the text the request quotes
        assert p.response and p.response in p.prompt and p.source == "synthetic:copy"
    assert any("(" in p.response and " to " in p.response for p in pairs)   # signatures
    assert any("(" not in p.response for p in pairs)                        # runs of names
