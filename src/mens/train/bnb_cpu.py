"""Workaround: keep bitsandbytes' NF4 weights trainable on CPUs with AVX512-BF16.

bitsandbytes (0.50) repacks a `Linear4bit` weight into an inference-only CPU layout the first
time the layer runs in eval mode without grad (`Linear4bit.forward`, guarded by
`support_avx512bf16_for_cpu`). The repacking is one-way: afterwards every forward takes a gemv
path that autograd does not see, so training after a `model.eval()` — e.g. benching mid-run —
fails or silently loses gradients. Training models turn the repacking off; inference (serve,
bench on a finished run) keeps it, since it is faster there.

`tests/train/test_bnb_cpu.py` fails when bitsandbytes changes this behaviour.
"""

from __future__ import annotations

# Said by mens.library_noise (the base layer: mens.hf calls it too); named here for the backends.
from mens.library_noise import quiet_hub_kernel_notice  # noqa: F401


def keep_nf4_trainable(model) -> int:
    """Disable the inference-only CPU repacking on every 4-bit layer; returns how many."""
    try:
        from bitsandbytes.nn import Linear4bit
    except ImportError:  # no bitsandbytes, no 4-bit layers
        return 0
    count = 0
    for module in model.modules():
        if isinstance(module, Linear4bit):
            module.support_avx512bf16_for_cpu = False
            count += 1
    return count
