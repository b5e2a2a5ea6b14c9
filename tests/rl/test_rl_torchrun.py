"""`torchrun --nproc_per_node 2 -m mens dpo|rl` on CPU (gloo): TRL's trainers run data parallel
through accelerate, which reads torchrun's environment; rank 0 alone writes the run dir (one
telemetry line per event, the manifest with world_size 2), both ranks leave with exit code 0, and
a run stopped after its step-2 checkpoint and rerun under torchrun ends with the same weights,
bit for bit, as an uninterrupted one (`mens rl`; `mens dpo` resumes through the same Trainer code,
and its own hazard is tested in-process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


GOOD = "```vox\nfn add(a: int, b: int) to int {\n    return a + b\n}\n```"
BROKEN = "```vox\nfn add(a: int, b: int) to int {\n    return a +\n```"
TOY = "rewards: {expects: 1.0}\nlearning_rate: 0.03\nprompts_per_step: 2\nnum_generations: 4\n" \
      "max_completion_length: 6\nlora_r: 8\nlora_alpha: 16\ntrain_lm_head: true\nsave_steps: 2\n"

# `mens rl` in one rank's Python, stopped right after its step-2 checkpoint (a killed run).
STOPPED = """
import sys
import torch.distributed as dist
from transformers import TrainerCallback
from mens.train.cli import _end_rank

class StopAt(TrainerCallback):
    def on_save(self, args, state, control, **kw):
        if state.global_step == 2:
            control.should_training_stop = True

model, data, out, toy = sys.argv[1:5]
from mens.rl.grpo import grpo, read_config
grpo(model, data, out, read_config(toy, {"steps": 4}), callbacks=[StopAt()])
dist.barrier()
_end_rank(0)
"""


def _torchrun(*argv) -> subprocess.CompletedProcess:
    torchrun = Path(sys.executable).with_name("torchrun")
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    proc = subprocess.run([str(torchrun), "--standalone", "--nproc_per_node", "2", *map(str, argv)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _inputs(tmp_path: Path, method: str) -> tuple[Path, list[str]]:
    if method == "dpo":
        rows = [{"prompt": f"Write a Vox function number {i} that adds two ints.", "chosen": GOOD, "rejected": BROKEN}
                for i in range(8)]
        data = tmp_path / "prefs.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return data, ["--data-dir", str(data), "--steps", "4", "--batch-size", "2", "--save-steps", "2"]
    rows = [{"prompt": f"Write the ten digits, {i}.", "lang": "python", "expect_contains": list("0123456789")}
            for i in range(4)]
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "toy.yaml").write_text(TOY)
    return data, ["--prompts", str(data), "--config", str(tmp_path / "toy.yaml"), "--steps", "4"]


@pytest.mark.slow  # two torchrun ranks: one run (dpo), three (rl)
@pytest.mark.parametrize("method", ["dpo", "rl"])
def test_two_ranks_write_one_run_dir_and_resume_exactly(tiny_model_dir, tmp_path, method):
    from safetensors.torch import load_file

    from mens.train.telemetry import read_events

    data, flags = _inputs(tmp_path, method)
    a, b = tmp_path / "a", tmp_path / "b"
    proc = _torchrun("-m", "mens", method, "--model", tiny_model_dir, "--output-dir", a, *flags)
    assert proc.stdout.count(f"{method}: 4 steps") == 1, proc.stdout  # rank 0 reports
    manifest = json.loads((a / "training_manifest.json").read_text())
    assert (manifest["status"], manifest["results"]["steps"]) == ("completed", 4)
    assert manifest["device"] == {"type": "cpu", "world_size": 2}
    assert manifest["method"] == ("dpo" if method == "dpo" else "grpo")
    for name in ("adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "MODEL_CARD.md"):
        assert (a / name).is_file(), name
    events = [(e["event"], e["step"]) for e in read_events(a / "telemetry.jsonl")]
    assert events == [("train_start", 0), ("step", 1), ("step", 2), ("checkpoint", 2), ("step", 3), ("step", 4),
                      ("checkpoint", 4), ("train_end", 4)]  # one writer
    for step in (2, 4):
        ckpt = a / "trl-checkpoints" / f"checkpoint-{step}"
        assert (ckpt / "rng_state_0.pth").is_file() and (ckpt / "rng_state_1.pth").is_file()

    if method == "dpo":
        return  # resume under torchrun is the rl case's (the same TRL Trainer resume, with generation
        # RNG on top); dpo's own resume hazard, the indexed CPU device, is the in-process test below
    script = tmp_path / "stopped.py"
    script.write_text(STOPPED)
    _torchrun(script, tiny_model_dir, data, b, tmp_path / "toy.yaml")
    assert (b / "trl-checkpoints" / "checkpoint-2").is_dir() and not (b / "adapter_model.safetensors").exists()
    _torchrun("-m", "mens", method, "--model", tiny_model_dir, "--output-dir", b, *flags)
    events = [(e["event"], e["step"]) for e in read_events(b / "telemetry.jsonl")]
    assert ("train_start", 2) in events  # resumed from checkpoint-2, not started over
    assert [s for e, s in events if e == "step"] == [1, 2, 3, 4]
    wa, wb = load_file(a / "adapter_model.safetensors"), load_file(b / "adapter_model.safetensors")
    assert wa.keys() == wb.keys()
    for k in wa:
        assert (wa[k] == wb[k]).all(), k
    assert json.loads((b / "training_manifest.json").read_text())["results"]["steps"] == 4


def test_a_checkpoint_loads_onto_an_indexed_cpu_device(tmp_path):
    """What a CPU rank's resume needs under transformers before ~5.20 (the GPU image's 5.17): it
    loads the optimizer with map_location=args.device, which accelerate names `cpu:N` (the dpo
    case above failed so there). Cheap and in-process; the torchrun test covers the resume."""
    import torch

    from mens.rl.run import load_indexed_cpu

    torch.save({"exp_avg": torch.arange(3.0)}, tmp_path / "optimizer.pt")
    load_indexed_cpu()
    loaded = torch.load(tmp_path / "optimizer.pt", map_location=torch.device("cpu", 1), weights_only=True)
    assert loaded["exp_avg"].tolist() == [0.0, 1.0, 2.0] and loaded["exp_avg"].device.type == "cpu"
