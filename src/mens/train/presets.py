"""Training presets: one line per device class (DESIGN §4). A preset sets the adapter size, the
sequence length and the batch geometry; flags and YAML override any of its fields."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    # What the preset needs: "any" runs anywhere, "gpu" needs CUDA/MPS with `min_memory_gb`.
    needs: str
    min_memory_gb: float
    values: dict  # TrainConfig fields


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("tiny", "smoke tests and tiny models: seq 256, r 8", "any", 0,
           dict(lora_r=8, lora_alpha=16, seq_len=256, micro_batch=2, grad_accum=1, lr=1e-3, warmup_steps=2,
                scratch_shape="tiny")),
    Preset("cpu", "CPU-only machines: seq 512, r 16, batch 4", "any", 0,
           dict(lora_r=16, lora_alpha=32, seq_len=512, micro_batch=4, grad_accum=2, lr=2e-4, warmup_steps=10)),
    Preset("8g", "8 GB GPUs: seq 1024, r 16, batch 2 x 8", "gpu", 7,
           dict(lora_r=16, lora_alpha=32, seq_len=1024, micro_batch=2, grad_accum=8, lr=2e-4, warmup_steps=20)),
    Preset("16g", "16 GB GPUs: seq 2048, r 32, batch 2 x 8", "gpu", 14,
           dict(lora_r=32, lora_alpha=64, seq_len=2048, micro_batch=2, grad_accum=8, lr=2e-4, warmup_steps=20)),
    Preset("24g", "24 GB GPUs: seq 2048, r 64, batch 4 x 4", "gpu", 22,
           dict(lora_r=64, lora_alpha=128, seq_len=2048, micro_batch=4, grad_accum=4, lr=1e-4, warmup_steps=30)),
    Preset("80g", "80 GB GPUs: seq 4096, r 64, batch 8 x 2", "gpu", 70,
           dict(lora_r=64, lora_alpha=128, seq_len=4096, micro_batch=8, grad_accum=2, lr=1e-4, warmup_steps=50)),
)}


def recommend(device_type: str, memory_gb: float) -> str:
    """The preset for a device: the largest GPU preset that fits, `cpu` without a GPU."""
    if device_type in ("cuda", "mps"):
        for name in ("80g", "24g", "16g", "8g"):
            if memory_gb >= PRESETS[name].min_memory_gb:
                return name
    return "cpu"


def fits(preset: Preset, device_type: str, memory_gb: float) -> str | None:
    """None when the preset can run on this device, else why it cannot."""
    if preset.needs == "any":
        return None
    if device_type not in ("cuda", "mps"):
        return f"preset {preset.name} needs a GPU with >= {preset.min_memory_gb:g} GB; this device is {device_type}"
    if memory_gb < preset.min_memory_gb:
        return (f"preset {preset.name} needs >= {preset.min_memory_gb:g} GB of GPU memory; "
                f"this {device_type} device has {memory_gb:.1f} GB")
    return None
