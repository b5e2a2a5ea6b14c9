"""`mens probe`: what this machine can train on — device, memory, bf16 — and the preset to use."""

from __future__ import annotations

import functools
import os
import time
from dataclasses import asdict, dataclass

# `dtype: auto` computes in bf16 on a CPU only where bf16 matmuls run at least this much faster
# than fp32 ones (bf16-mixed trained 1.3-1.9x faster than fp32 on an AMD EPYC with AVX-512 BF16;
# on an Intel Xeon with AVX-512 BF16 but no AMX bf16 matmuls ran at 0.54x fp32's and training
# 1.45x slower; emulated bf16 is ~4x slower); a margin, so a busy core cannot flip the verdict.
CPU_BF16_MIN_SPEEDUP = 1.1


@dataclass
class Probe:
    device: str            # cuda | mps | cpu
    device_name: str
    device_count: int
    memory_gb: float       # GPU memory of one device, or system RAM on CPU
    system_memory_gb: float
    cpu_count: int
    bf16: bool             # bf16 that pays: a GPU's native bf16, or a CPU whose bf16 matmuls beat fp32's
    torch_version: str
    cuda_version: str | None
    recommended_preset: str
    cpu_bf16_speedup: float | None = None  # CPU only: bf16 / fp32 matmul throughput, where measured

    def to_dict(self) -> dict:
        return asdict(self)


def _system_memory_gb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return 0.0


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def cpu_bf16() -> tuple[bool, float | None]:
    """Whether this CPU computes bf16 faster than fp32, and the measured bf16 / fp32 matmul speed.

    The instructions alone do not say it: on an AMD EPYC with AVX-512 BF16 `bf16-mixed` trains
    faster than fp32, on an Intel Xeon with AVX-512 BF16 but no AMX (as cloud VMs often show it)
    bf16 matmuls run at ~0.5x fp32's and `bf16-mixed` ran the quickstart's base 1.45x slower;
    without the instructions bf16 is emulated (~4x slower). So where the flags are present the
    speed is measured (~50 ms).
    MENS_CPU_BF16=1/0 overrides both (the tests pin 0, so `auto` means fp32 on every CI machine;
    `mens train --nproc` passes rank 0's verdict to the ranks this way)."""
    override = os.environ.get("MENS_CPU_BF16", "").strip()
    if override in ("0", "1"):
        return override == "1", None
    flags = _cpu_flags()
    if "avx512_bf16" not in flags and "amx_bf16" not in flags:
        return False, None
    speedup = bf16_matmul_speedup()
    return speedup >= CPU_BF16_MIN_SPEEDUP, round(speedup, 2)


@functools.lru_cache(maxsize=None)
def bf16_matmul_speedup() -> float:
    """bf16 over fp32 matmul throughput on this CPU with torch's current threads, at the widths
    of a small model's layers (1,024 tokens x 128 → 512 and back); the best of several rounds
    of each, interleaved, so a neighbour's load touches both alike."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x, w1, w2 = (torch.randn(*shape, generator=gen) for shape in ((1024, 128), (128, 512), (512, 128)))
    pairs = {torch.float32: (x, w1, w2), torch.bfloat16: tuple(t.bfloat16() for t in (x, w1, w2))}
    best = dict.fromkeys(pairs, float("inf"))
    for _ in range(5):
        for dtype, (a, b, c) in pairs.items():
            start = time.perf_counter()
            for _ in range(4):
                (a @ b) @ c
            best[dtype] = min(best[dtype], time.perf_counter() - start)
    return best[torch.float32] / best[torch.bfloat16]


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
    name, count, mem, bf16, cuda, speedup = "cpu", 1, system_gb, False, None, None
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
        bf16, speedup = cpu_bf16()
    return Probe(device=device, device_name=name, device_count=count, memory_gb=round(mem, 2),
                 system_memory_gb=round(system_gb, 2), cpu_count=os.cpu_count() or 1, bf16=bf16,
                 torch_version=torch.__version__, cuda_version=cuda,
                 recommended_preset=recommend(device, mem), cpu_bf16_speedup=speedup)


def format_probe(p: Probe) -> str:
    lines = [f"device        {p.device} ({p.device_name}) x{p.device_count}",
             f"memory        {p.memory_gb:.1f} GB" + ("" if p.device != "cpu" else " (system RAM)"),
             f"cpus          {p.cpu_count}",
             f"bf16          {'yes' if p.bf16 else 'no'}" + _bf16_measured(p) + _dtype_hint(p),
             f"torch         {p.torch_version}" + (f" (CUDA {p.cuda_version})" if p.cuda_version else ""),
             f"preset        {p.recommended_preset}  (recommended; `mens train` uses it when no preset is given)"]
    return "\n".join(lines)


def _bf16_measured(p: Probe) -> str:
    if p.cpu_bf16_speedup is None:
        return ""
    return f" (bf16 matmuls at {p.cpu_bf16_speedup:.2f}x fp32's speed here)"


def _dtype_hint(p: Probe) -> str:
    """What to pass for mixed precision where the default would not pick it."""
    if p.device == "cuda" and not p.bf16:
        return "  (train lora/full/scratch with --dtype fp16-mixed; fp32 otherwise)"
    if p.device == "cpu" and p.bf16:
        return "  (--dtype bf16-mixed: ~1.5x the tokens/s of fp32 for full/scratch)"
    return ""
