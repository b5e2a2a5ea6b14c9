"""The run's precision is decided in one function (mens.train.precision.decide_precision): the
weights' dtype each backend builds in, autocast for fp32 master weights, loss scaling for fp16,
the manifest's name, and the pairs the config refuses."""

from __future__ import annotations

import pytest
import torch

from mens.errors import MensError
from mens.train.config import resolve_config
from mens.train.precision import SLOW_CPU_BF16, decide_precision


def cfg(backend: str, dtype: str = "auto"):
    return resolve_config({"model": "m", "data_dir": "d", "preset": "tiny", "backend": backend, "dtype": dtype})


@pytest.mark.parametrize("backend,dtype,device,bf16,weights,autocast", [
    ("qlora", "auto", "cuda", True, torch.bfloat16, None),         # QLoRA computes in bf16, by definition
    ("qlora", "auto", "cpu", True, torch.bfloat16, None),
    ("qlora", "auto", "cpu", False, torch.float32, None),          # a CPU without fast bf16: the NF4 base in fp32
    ("qlora", "bf16", "cpu", False, torch.bfloat16, None),         # unless asked
    ("lora", "auto", "cuda", True, torch.bfloat16, None),          # a bf16 GPU: the frozen base in bf16
    ("lora", "auto", "cpu", True, torch.float32, torch.bfloat16),  # a CPU keeps fp32 weights, computes in bf16
    ("lora", "auto", "cuda", False, torch.float32, None),          # a T4: fp32 unless asked for fp16-mixed
    ("lora", "fp16-mixed", "cuda", False, torch.float32, torch.float16),
    ("full", "auto", "cuda", True, torch.float32, torch.bfloat16),  # fp32 master weights, bf16 matmuls
    ("full", "auto", "cpu", False, torch.float32, None),
    ("full", "auto", "mps", True, torch.float32, None),             # autocast only where it pays: cuda, cpu
    ("full", "bf16", "cuda", True, torch.bfloat16, None),           # --dtype names the weights' dtype
    ("scratch", "bf16-mixed", "cpu", False, torch.float32, torch.bfloat16),
    ("scratch", "fp32", "cuda", True, torch.float32, None),
])
def test_one_decision_for_every_backend_and_device(backend, dtype, device, bf16, weights, autocast):
    precision = decide_precision(cfg(backend, dtype), device, bf16)
    assert (precision.weights, precision.autocast_dtype) == (weights, autocast)
    assert precision.scales_loss == (autocast == torch.float16)
    assert precision.exact == (weights == torch.float32 and autocast is None)
    assert precision.warning == (SLOW_CPU_BF16 if (dtype, device, bf16) == ("bf16-mixed", "cpu", False) else None)


def test_built_weights_decide_autocast_and_the_manifest_name():
    """A backend registered elsewhere builds its own weights: autocast follows their dtype."""
    assert decide_precision(cfg("full"), "cpu", True, weights=torch.float32).name == "float32+bf16-autocast"
    assert decide_precision(cfg("full", "fp16-mixed"), "cpu", False).name == "float32+fp16-autocast"
    assert decide_precision(cfg("full"), "cpu", True, weights=torch.bfloat16).name == "bfloat16"


def test_qlora_refuses_fp16_mixed_before_any_model_loads():
    with pytest.raises(MensError, match="--dtype fp16-mixed does not apply to qlora"):
        cfg("qlora", "fp16-mixed")
