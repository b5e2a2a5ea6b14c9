"""mens.rl.run: what `mens dpo` and `mens rl` share."""

from __future__ import annotations

import torch

from mens.rl import run as rl_run


def test_trainer_computes_in_bf16_only_on_a_gpu_with_native_bf16(tmp_path, monkeypatch):
    """TRL's Trainer gets bf16 autocast over the fp32 start model on a GPU with native bf16 (an
    H100), fp32 on a T4-like GPU (bf16 only emulated) and on a CPU."""
    def args(device):
        return rl_run.trainer_args(tmp_path, steps=2, lr=1e-5, batch_size=2, seed=0, save_steps=1, device=device)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)  # an H100
    assert args("cuda")["bf16"] is True and args("cpu")["bf16"] is False
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)  # a T4: emulated only
    assert args("cuda")["bf16"] is False
    assert args("cuda")["fp16"] is False and args("cuda")["use_cpu"] is False


def test_a_run_dir_another_process_writes_is_refused(tmp_path, held_elsewhere):
    """`mens dpo` / `mens rl` hold their run dir as `mens train` does: while another process
    holds it, open_run stops with one line; once that process is gone, it opens, and release_lock
    leaves no lock file."""
    import pytest

    from mens.errors import MensError
    from mens.files import release_lock

    run = tmp_path / "rl-run"
    with held_elsewhere(run, "run directory"):
        with pytest.raises(MensError, match="another mens process is writing this run directory"):
            rl_run.open_run(run, force_restart=True)
    opened, resume = rl_run.open_run(run, force_restart=True)
    assert opened == run and resume is None and (run / ".mens.lock").is_file()
    release_lock(run)
    assert not (run / ".mens.lock").exists()


def test_start_fresh_clears_the_earlier_run_and_nothing_else(tmp_path):
    """--force-restart of dpo / rl: the earlier run's TRL checkpoints, telemetry, final model and
    the verdicts on it go (a restart that then fails leaves no old weights beside a gate receipt
    that passed them); a file of the user's stays."""
    run = tmp_path / "run"
    (run / rl_run.CHECKPOINTS / "checkpoint-4").mkdir(parents=True)
    earlier = ["telemetry.jsonl", "training_manifest.json", "MODEL_CARD.md", "adapter_config.json",
               "adapter_model.safetensors", "model.safetensors", "model-00001-of-00002.safetensors",
               "config.json", "tokenizer.json", "gate_receipt.json", "benchmark_results.json"]
    for name in earlier + ["notes.txt"]:
        (run / name).write_text("{}")
    rl_run.start_fresh(run)
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]
