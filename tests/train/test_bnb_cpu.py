"""The bitsandbytes CPU repacking workaround (mens.train.bnb_cpu): needed, and sufficient."""

import pytest
import torch

pytest.importorskip("bitsandbytes")


def _qlora(model_dir):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                           bnb_4bit_compute_dtype=torch.bfloat16)
    model = AutoModelForCausalLM.from_pretrained(model_dir, quantization_config=q, device_map="cpu")
    torch.manual_seed(0)
    return get_peft_model(model, LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False))


def _grads(model, ids):
    model.zero_grad()
    model(ids, labels=ids).loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


def _eval_pass(model, ids):
    model.eval()
    with torch.no_grad():
        model(ids)
    model.train()


def _nf4_layers(model):
    from bitsandbytes.nn import Linear4bit

    return [m for m in model.modules() if isinstance(m, Linear4bit)]


def test_nf4_layers_stay_trainable_after_an_eval_pass(tiny_model_dir):
    from mens.train.bnb_cpu import keep_nf4_trainable

    ids = torch.randint(0, 100, (2, 12))
    model = _qlora(tiny_model_dir)
    layers = _nf4_layers(model)
    # The switch we turn off must still exist: if bitsandbytes renames it, this fails.
    assert layers and all(hasattr(m, "support_avx512bf16_for_cpu") for m in layers)
    assert keep_nf4_trainable(model) == len(layers)
    before = _grads(model, ids)
    _eval_pass(model, ids)
    after = _grads(model, ids)
    assert before.keys() == after.keys() and len(before) > 0
    for name, grad in before.items():
        assert torch.equal(after[name], grad), name
    assert not any(getattr(m.weight.quant_state, "packing_format_for_cpu", False) for m in layers)


def test_without_the_workaround_an_eval_pass_repacks_for_inference(tiny_model_dir):
    model = _qlora(tiny_model_dir)
    layers = _nf4_layers(model)
    if not any(m.support_avx512bf16_for_cpu for m in layers):
        pytest.skip("this CPU has no AVX512-BF16: bitsandbytes never repacks here")
    _eval_pass(model, torch.randint(0, 100, (2, 12)))
    # bitsandbytes still repacks one-way on eval: the workaround is still needed.
    assert all(getattr(m.weight.quant_state, "packing_format_for_cpu", False) for m in layers)
