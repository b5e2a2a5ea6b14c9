"""Small builders shared by the mens.train tests: tiny corpora and configs."""

from __future__ import annotations

import json
import random
from pathlib import Path


def write_pairs(data_dir: Path, n: int = 120, seed: int = 0, extra: list[dict] | None = None) -> Path:
    """A tiny, learnable corpus: a handful of prompt templates with formulaic Vox answers."""
    rng = random.Random(seed)
    data_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for _ in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        rows.append({"prompt": f"Write a Vox function that adds {a} and {b}.",
                     "response": f"fn add() to int {{\n    return {a} + {b}\n}}", "rating": 5})
    rows += extra or []
    (data_dir / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data_dir


def train_args(model_dir, data_dir, out_dir, **flags) -> list[str]:
    """`mens train …` arguments for a fast deterministic CPU run; flags override."""
    base = {"model": model_dir, "data-dir": data_dir, "output-dir": out_dir, "preset": "tiny",
            "device": "cpu", "max-steps": 4, "log-interval": 1, "eval-interval": 0, "save-interval": 0}
    base.update({k.replace("_", "-"): v for k, v in flags.items()})
    args = ["train"]
    for key, value in base.items():
        if value is True:
            args.append(f"--{key}")
        elif value is not None and value is not False:
            args += [f"--{key}", str(value)]
    return args


def config(model_dir, data_dir, out_dir, **overrides):
    """A resolved TrainConfig like the CLI builds (tiny preset, CPU)."""
    from mens.train.config import resolve_config

    flags = {"model": str(model_dir), "data_dir": str(data_dir), "output_dir": str(out_dir), "preset": "tiny",
             "device": "cpu", "max_steps": 4, "eval_interval": 0, "save_interval": 0}
    flags.update(overrides)
    return resolve_config(flags)
