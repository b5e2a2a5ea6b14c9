"""`training_manifest.json` (`mens.training_manifest.v1`): everything a later stage needs to
know about a run — base model, tokenizer, data fingerprints, every hyper-parameter, device,
library versions, provenance, results and status — so merge, bench, gate and serve read instead
of asking. `mens.hf.read_manifest` reads it back."""

from __future__ import annotations

import os
import platform
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mens.files import write_json_atomic

SCHEMA = "mens.training_manifest.v1"
MANIFEST = "training_manifest.json"
STATUSES = ("running", "completed", "interrupted", "failed")


def library_versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("mens", "torch", "transformers", "peft", "bitsandbytes", "accelerate", "safetensors",
                 "tokenizers"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


@dataclass
class Results:
    steps: int = 0
    total_steps: int = 0
    epochs_done: float = 0.0
    final_loss: float | None = None
    val_loss: float | None = None
    supervised_tokens: int = 0
    input_tokens: int = 0
    tokens_per_s: float | None = None        # supervised tokens per second of training
    peak_memory_gb: float | None = None
    wall_time_s: float = 0.0
    # data-parallel runs: a hash of each rank's trainable weights (all equal = ranks in sync)
    rank_weights_sha256: list[str] | None = None


@dataclass
class Manifest:
    base_model: dict[str, Any] | None
    backend: str
    quantization: str | None
    dtype: str
    tokenizer: dict[str, Any]
    data: dict[str, Any]
    hyperparameters: dict[str, Any]
    preset: str | None
    device: dict[str, Any]
    seed: int
    provenance: dict[str, Any]
    scratch_shape: dict[str, Any] | None = None
    speed: dict[str, Any] | None = None      # mens.train.speed.SpeedPlan: passes, checkpointing, levers
    adapters: dict[str, Any] | None = None   # mens.train.family.adapted: what LoRA adapts, at which rank, what not
    results: Results = field(default_factory=Results)
    status: str = "running"
    error: str | None = None
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    # who is writing this run, so `mens status` can tell a live run from one that died
    process: dict[str, Any] = field(default_factory=lambda: {"pid": os.getpid(), "host": socket.gethostname()})

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA,
            "status": self.status,
            "created": self.created,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "base_model": self.base_model,
            "backend": self.backend,
            "quantization": self.quantization,
            "dtype": self.dtype,
            "tokenizer": self.tokenizer,
            "data": self.data,
            "preset": self.preset,
            "hyperparameters": self.hyperparameters,
            "scratch_shape": self.scratch_shape,
            "speed": self.speed,
            "adapters": self.adapters,
            "device": self.device,
            "seed": self.seed,
            "versions": library_versions(),
            "provenance": self.provenance,
            "results": vars(self.results),
            "error": self.error,
            "process": self.process,
        }

    def write(self, run_dir: str | Path) -> None:
        write_json_atomic(Path(run_dir) / MANIFEST, self.to_dict())
