"""`mens probe`: what this machine can train on — device, memory, bf16 — and the preset to use."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass


@dataclass
class Probe:
    device: str            # cuda | mps | cpu
    device_name: str
    device_count: int
    memory_gb: float       # GPU memory of one device, or system RAM on CPU
    system_memory_gb: float
    cpu_count: int
    bf16: bool             # native bf16 matmuls (GPU bf16, or CPU AVX512-BF16 / AMX)
    torch_version: str
    cuda_version: str | None
    recommended_preset: str

    def to_dict(self) -> dict:
        return asdict(self)


def _system_memory_gb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 0.0


def _cpu_bf16() -> bool:
    """Whether the CPU computes bf16 natively (AVX-512 BF16 or AMX). Without it torch emulates
    bf16 matmuls, and `bf16-mixed` runs ~4x slower than fp32 (measured on an AVX-512 Xeon with
    no BF16). MENS_CPU_BF16=1/0 overrides the detection (a VM that hides the CPU's flags; tests,
    which pin it so that `dtype: auto` means the same on every machine)."""
    override = os.environ.get("MENS_CPU_BF16", "").strip()
    if override in ("0", "1"):
        return override == "1"
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_device(requested: str = "auto") -> str:
    """`auto` → cuda, then mps, then cpu. An explicit device that is absent is the caller's error."""
    import torch

    if requested != "auto":
        return requested
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def probe(requested: str = "auto") -> Probe:
    import torch

    from mens.train.presets import recommend

    device = resolve_device(requested)
    system_gb = _system_memory_gb()
    name, count, mem, bf16, cuda = "cpu", 1, system_gb, _cpu_bf16(), None
    if device == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        name, count, mem = props.name, torch.cuda.device_count(), props.total_memory / 2**30
        # native bf16 only: with emulation allowed a V100 or T4 says yes and runs bf16 slowly
        bf16, cuda = torch.cuda.is_bf16_supported(including_emulation=False), torch.version.cuda
    elif device == "mps":
        # MPS shares system memory; treat it as the GPU budget.
        name, bf16 = "Apple MPS", True
    else:
        import platform

        name = platform.processor() or platform.machine() or "cpu"
    return Probe(device=device, device_name=name, device_count=count, memory_gb=round(mem, 2),
                 system_memory_gb=round(system_gb, 2), cpu_count=os.cpu_count() or 1, bf16=bf16,
                 torch_version=torch.__version__, cuda_version=cuda,
                 recommended_preset=recommend(device, mem))


def format_probe(p: Probe) -> str:
    lines = [f"device        {p.device} ({p.device_name}) x{p.device_count}",
             f"memory        {p.memory_gb:.1f} GB" + ("" if p.device != "cpu" else " (system RAM)"),
             f"cpus          {p.cpu_count}",
             f"bf16          {'yes' if p.bf16 else 'no'}" + _dtype_hint(p),
             f"torch         {p.torch_version}" + (f" (CUDA {p.cuda_version})" if p.cuda_version else ""),
             f"preset        {p.recommended_preset}  (recommended; `mens train` uses it when no preset is given)"]
    return "\n".join(lines)


def _dtype_hint(p: Probe) -> str:
    """What to pass for mixed precision where the default would not pick it."""
    if p.device == "cuda" and not p.bf16:
        return "  (train lora/full/scratch with --dtype fp16-mixed; fp32 otherwise)"
    if p.device == "cpu" and p.bf16:
        return "  (--dtype bf16-mixed: ~1.5x the tokens/s of fp32 for full/scratch)"
    return ""
