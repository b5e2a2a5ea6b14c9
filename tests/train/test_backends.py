"""Each backend's builder keeps the contract the loop relies on, and a new backend is one builder:
registered here, it trains and saves through the unchanged loop."""

from __future__ import annotations

import json

import pytest
import torch

from train_helpers import config, write_pairs

from mens.hf import NF4
from mens.train.backends import BUILDERS, Built, build, hf_base, load_for_training, register


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_pairs(tmp_path_factory.mktemp("pairs") / "data", n=24)


@pytest.mark.parametrize("backend", ["qlora", "lora", "full", "scratch"])
def test_builder_contract(backend, tiny_model_dir, data_dir, tmp_path):
    cfg = config(tiny_model_dir, data_dir, tmp_path / "run", backend=backend)
    built = build(cfg, torch.device("cpu"), False)
    assert isinstance(built, Built) and built.trainable
    names = {n for n, p in built.model.named_parameters() if p.requires_grad}
    adapters = backend in ("qlora", "lora")
    assert all("lora_" in n for n in names) == adapters  # adapters train alone; else every weight
    assert built.defer_grad_sync == adapters
    assert built.quantization == (NF4 if backend == "qlora" else None)
    assert built.dtype == torch.float32  # a CPU without fast bf16 (bf16=False): QLoRA computes in fp32 too
    assert (built.base is None) == (backend == "scratch") and (built.scratch_shape is None) != (backend == "scratch")
    assert built.tokenizer.pad_token_id is not None and built.tokenizer_source
    run = tmp_path / "saved"
    run.mkdir()
    built.save(run, built.model, built.tokenizer)
    files = {p.name for p in run.iterdir()}
    assert ("adapter_model.safetensors" in files) == adapters
    assert ("model.safetensors" in files) != adapters
    assert "tokenizer.json" in files and "README.md" not in files


@pytest.mark.parametrize("bf16", [True, False])
def test_qlora_computes_in_bf16_where_the_cpu_has_fast_bf16_else_fp32(bf16, tiny_model_dir, data_dir, tmp_path):
    """QLoRA's NF4 layers dequantise to bf16 where bf16 matmuls pay, else to fp32: on an AVX2 CPU
    a bf16 matmul took 6x an fp32 one, and a QLoRA step of the 0.5B shape did not end in 15 min."""
    from bitsandbytes.nn import Linear4bit

    built = build(config(tiny_model_dir, data_dir, tmp_path / "run", backend="qlora"), torch.device("cpu"), bf16)
    want = torch.bfloat16 if bf16 else torch.float32
    nf4 = [m for m in built.model.modules() if isinstance(m, Linear4bit)]
    assert built.dtype == want and nf4 and {m.compute_dtype for m in nf4} == {want}
    assert {p.dtype for p in built.model.parameters() if p.requires_grad} == {torch.float32}  # the adapters


@pytest.mark.parametrize("backend", ["full", "scratch"])
def test_an_explicit_dtype_is_the_weights_dtype(backend, tiny_model_dir, data_dir, tmp_path):
    """`--dtype bf16` gives bf16 weights; the scratch builder used to record bf16 and keep fp32
    (which also kept the loop from autocasting: it trained in plain fp32)."""
    cfg = config(tiny_model_dir, data_dir, tmp_path / "run", backend=backend, dtype="bf16")
    built = build(cfg, torch.device("cpu"), False)
    assert built.dtype == torch.bfloat16
    assert {p.dtype for p in built.model.parameters()} == {torch.bfloat16}


def test_unknown_backend_is_a_clear_error(tiny_model_dir, data_dir, tmp_path):
    from mens.errors import MensError

    with pytest.raises(MensError, match="unknown backend"):
        config(tiny_model_dir, data_dir, tmp_path / "run", backend="nope")


@pytest.fixture
def norms_backend():
    """A backend that trains only the normalisation weights of an HF model (BitFit-like)."""

    @register("norms")
    def norms(cfg, device, bf16):
        from mens.train.checkpoint import save_pretrained

        base, tokenizer, _, _ = hf_base(cfg)
        model = load_for_training(base, device, torch.float32)
        for name, p in model.named_parameters():
            p.requires_grad_("norm" in name)
        return Built(model, tokenizer, torch.float32, save_pretrained, base=base, tokenizer_source=base.id)

    yield "norms"
    BUILDERS.pop("norms")


def test_a_new_backend_is_one_builder(norms_backend, tiny_model_dir, data_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from mens.train.loop import train

    out = train(config(tiny_model_dir, data_dir, tmp_path / "run", backend=norms_backend, max_steps=2, lr=1e-2))
    assert out.status == "completed" and out.steps == 2 and all(torch.isfinite(torch.tensor(out.losses)))
    manifest = json.loads((tmp_path / "run" / "training_manifest.json").read_text())
    assert manifest["backend"] == "norms" and manifest["quantization"] is None
    assert manifest["speed"]["tokens_per_pass"] >= 512
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).state_dict()
    trained = AutoModelForCausalLM.from_pretrained(tmp_path / "run", dtype=torch.float32).state_dict()
    changed = {k for k in base if not torch.equal(base[k], trained[k])}
    assert changed and all("norm" in k for k in changed)
