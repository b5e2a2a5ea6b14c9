"""The speed levers change speed and memory, never the numbers: lean LoRA equals PEFT's LoRA,
flat NF4 scales equal double-quantised ones bit for bit, a split micro-batch gives the whole
micro-batch's loss and gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from mens.train.kernels import LoraDelta
from mens.train.levers import flat_nf4_scales, lean_gelu, lean_lora, lean_rmsnorm
from mens.train.speed import SpeedPlan, optimize_for_training, row_groups, split_for_memory


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(24, 40)
        self.down = nn.Linear(40, 24)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def _peft_block(dropout: float, seed: int = 0):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    model = get_peft_model(_Block(), LoraConfig(r=4, lora_alpha=8, lora_dropout=dropout,
                                                target_modules=["up", "down"], init_lora_weights=False))
    return model


def _run(model, x):
    x = x.clone().requires_grad_(True)
    model.zero_grad(set_to_none=True)
    out = model(x)
    (out.square().sum()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.detach(), x.grad.clone(), grads


def test_lean_lora_matches_peft_without_dropout():
    x = torch.randn(3, 5, 24)
    ref = _run(_peft_block(0.0), x)
    model = _peft_block(0.0)
    assert lean_lora(model, model, True)[0] == 2
    got = _run(model, x)
    torch.testing.assert_close(got[0], ref[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], ref[1], rtol=1e-5, atol=1e-5)
    assert ref[2].keys() == got[2].keys() and any("lora_A" in k for k in got[2])
    for name in ref[2]:
        torch.testing.assert_close(got[2][name], ref[2][name], rtol=1e-4, atol=1e-5)


def test_lean_lora_dropout_gradients_are_exact():
    torch.manual_seed(0)
    x = torch.randn(6, 7, dtype=torch.float64, requires_grad=True)
    a = torch.randn(3, 7, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)

    base = torch.randn(6, 5, dtype=torch.float64, requires_grad=True)

    def fixed_mask(base, x, a, b):  # same RNG state on every call, so the same dropout mask
        with torch.random.fork_rng():
            torch.manual_seed(123)
            return LoraDelta.apply(base, x, a, b, 2.0, 0.3)

    assert torch.autograd.gradcheck(fixed_mask, (base, x, a, b))


def test_lean_lora_dropout_rate_and_eval_mode():
    model = _peft_block(0.25)
    lean_lora(model, model, True)[0]
    up = model.base_model.model.up
    x = torch.ones(4000, 24)
    a = up.lora_A["default"].weight
    # With A = e_0 and B = e_0 the delta's first column is scale * keep / (1 - p) on input 0.
    with torch.no_grad():
        a.zero_(); a[0, 0] = 1.0
        up.lora_B["default"].weight.zero_(); up.lora_B["default"].weight[0, 0] = 1.0
    delta = up(x)[:, 0] - up.base_layer(x)[:, 0]
    kept = (delta.abs() > 1e-6).float().mean().item()
    assert abs(kept - 0.75) < 0.03
    model.eval()
    delta_eval = up(x)[:, 0] - up.base_layer(x)[:, 0]
    torch.testing.assert_close(delta_eval, torch.full_like(delta_eval, float(up.scaling["default"])))


def test_dora_layers_keep_peft_forward():
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(_Block(), LoraConfig(r=4, lora_alpha=8, use_dora=True, target_modules=["up"]))
    assert lean_lora(model, model, True)[0] == 0


def test_flat_nf4_scales_are_bit_identical():
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    dense = nn.Linear(128, 96, bias=False).to(torch.bfloat16)
    layer = bnb.nn.Linear4bit(128, 96, bias=False, compute_dtype=torch.bfloat16, compress_statistics=True,
                              quant_type="nf4", quant_storage=torch.bfloat16)
    layer.weight = bnb.nn.Params4bit(dense.weight.data, requires_grad=False, compress_statistics=True,
                                     quant_type="nf4", quant_storage=torch.bfloat16)._quantize("cpu")
    assert layer.weight.quant_state.nested
    x = torch.randn(5, 128, dtype=torch.bfloat16)
    before = layer(x)
    assert flat_nf4_scales(layer, layer, True)[0] == 1
    assert not layer.weight.quant_state.nested
    assert torch.equal(layer(x), before)


def test_split_micro_batch_gives_the_same_loss_and_gradients(tiny_model_dir):
    from mens.records import Pair
    from mens.train.config import TrainConfig
    from mens.train.data import build_examples, epoch_batches
    from mens.train.loop import batch_loss
    from mens.hf import load_tokenizer
    from mens.train.backends import build
    from mens.train.model import decoder_and_head

    tok = load_tokenizer(str(tiny_model_dir))
    pairs = [Pair.from_dict({"prompt": f"Write a Vox function that adds {i} and {i + 1}.",
                             "response": "fn add(a: int, b: int) to int {\n    return a + b\n}" * (1 + i % 3)})
             for i in range(12)]
    examples, _ = build_examples(pairs, tok, 96)
    batch = epoch_batches(examples, 96, 4, 0, 0, tok.pad_token_id)[0]
    cfg = TrainConfig(model=str(tiny_model_dir), backend="lora", lora_dropout=0.0, seq_len=96,
                      micro_batch=4).validate()

    def grads(parts):
        torch.manual_seed(0)
        model = build(cfg, torch.device("cpu"), False).model
        optimize_for_training(model, cfg)
        decoder, head = decoder_and_head(model)
        total = 0.0
        for part in parts:
            s, _ = batch_loss(decoder, head, part, "cpu", 64)
            (s / batch.n_supervised).backward()
            total += float(s.detach())
        return total, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    parts = row_groups(batch, 96)  # one row per pass
    lazily = list(split_for_memory(batch, SpeedPlan(96, trim_heap=True)))  # the same passes, one heap trim before each
    assert [p.input_ids.tolist() for p in lazily] == [p.input_ids.tolist() for p in parts]
    assert len(parts) == batch.input_ids.shape[0] > 1
    assert sum(p.n_supervised for p in parts) == batch.n_supervised
    whole_loss, whole = grads([batch])
    split_loss, split = grads(parts)
    assert split_loss == pytest.approx(whole_loss, rel=1e-5)
    for name in whole:
        torch.testing.assert_close(split[name], whole[name], rtol=1e-4, atol=1e-6)
    assert row_groups(batch, 0) == [batch]  # 0 = whole micro-batch


def test_optimize_for_training_switches(tiny_model_dir):
    from mens.train.config import TrainConfig
    from mens.train.backends import build
    from mens.train.model import unwrap

    cfg = TrainConfig(model=str(tiny_model_dir), backend="lora", gradient_checkpointing="on").validate()
    model = build(cfg, torch.device("cpu"), False).model
    assert optimize_for_training(model, cfg).checkpoint_every == 1
    inner = unwrap(model)
    assert inner.config.use_cache is False
    # transformers 5.x renamed the flag (is_gradient_checkpointing before ~5.20, both after)
    assert getattr(inner, "is_activation_checkpointing", None) or inner.is_gradient_checkpointing


def test_optimized_model_matches_plain_peft(tiny_model_dir):
    """All levers on (dropout 0 so both draw nothing): same loss and adapter gradients."""
    from mens.train.config import TrainConfig
    from mens.train.backends import build
    from mens.train.kernels import SwiGLU

    cfg = TrainConfig(model=str(tiny_model_dir), backend="lora", lora_dropout=0.0,
                      gradient_checkpointing="off").validate()
    ids = torch.randint(3, 300, (2, 17))

    def run(optimize: bool):
        torch.manual_seed(0)
        model = build(cfg, torch.device("cpu"), False).model
        if optimize:
            optimize_for_training(model, cfg)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}

    ref_loss, ref = run(False)
    got_loss, got = run(True)
    torch.testing.assert_close(got_loss, ref_loss, rtol=1e-5, atol=1e-6)
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], rtol=1e-4, atol=1e-6)
    g = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    u = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(SwiGLU.apply, (g, u))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("weight_grad", [False, True])
def test_fused_rmsnorm_matches_the_module(dtype, weight_grad):
    from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm

    torch.manual_seed(0)
    ref = Qwen2RMSNorm(64).to(dtype)
    ref.weight.data = torch.rand(64, dtype=dtype) + 0.5
    new = Qwen2RMSNorm(64).to(dtype)
    new.weight.data = ref.weight.data.clone()
    for m in (ref, new):
        m.weight.requires_grad_(weight_grad)
    assert lean_rmsnorm(new, new, True)[0] == 1
    x, g = torch.randn(3, 7, 64, dtype=dtype) * 2, torch.randn(3, 7, 64, dtype=dtype)
    got = []
    for m in (ref, new):
        xi = x.clone().requires_grad_(True)
        out = m(xi)
        out.backward(g)
        got.append((out.detach(), xi.grad, m.weight.grad))
    assert torch.equal(got[1][0], got[0][0])  # the forward is bit-identical
    tol = dict(rtol=0, atol=0) if dtype == torch.bfloat16 else dict(rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got[1][1], got[0][1], **tol)
    if weight_grad:
        torch.testing.assert_close(got[1][2], got[0][2], **tol)
    x64 = x.double()  # the module computes in fp32 even for fp64 input: the patch steps aside
    torch.testing.assert_close(new.double()(x64), ref.double()(x64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_lean_gelu_is_gpt2s_gelu_new(dtype):
    from transformers.activations import NewGELUActivation

    ref, new = NewGELUActivation(), NewGELUActivation()
    holder = nn.Sequential(new)
    assert lean_gelu(holder, holder, True)[0] == 1
    torch.manual_seed(0)
    x, g = torch.randn(5, 64, dtype=dtype) * 3, torch.randn(5, 64, dtype=dtype)
    got = []
    for m in (ref, new):
        xi = x.clone().requires_grad_(True)
        out = m(xi)
        out.backward(g)
        got.append((out.detach(), xi.grad))
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1][0], got[0][0], **tol)
    torch.testing.assert_close(got[1][1], got[0][1], **tol)


def _scratch_step(cfg, ids, optimize: bool):
    """One forward and backward of a fresh scratch model (seed 0), with the speed plan or
    without: (plan, model, loss, gradients)."""
    from mens.train.backends import build

    torch.manual_seed(0)
    model = build(cfg, torch.device("cpu"), False).model
    plan = optimize_for_training(model, cfg) if optimize else None
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return plan, model, loss.detach(), {n: p.grad for n, p in model.named_parameters()}


def test_scratch_plan_patches_gelu_and_trims_only_big_passes(tmp_path):
    """The quickstart-sized scratch model: GELU patched, one pass per micro-batch, no heap trim
    (its passes are small); the same loss as the unpatched model."""
    from mens.train.config import TrainConfig
    from mens.train.speed import TRIM_HEAP_MIN_BYTES, _pass_bytes

    cfg = TrainConfig(backend="scratch", scratch_shape="tiny", seq_len=256, micro_batch=4,
                      output_dir=str(tmp_path)).validate()
    ids = torch.randint(5, 120, (2, 33))

    _, _, ref_loss, ref = _scratch_step(cfg, ids, optimize=False)
    plan, model, loss, got = _scratch_step(cfg, ids, optimize=True)
    assert plan.patched["lean_gelu"] == model.config.n_layer
    assert plan.trim_heap is False
    assert _pass_bytes(model, cfg, plan.tokens_per_pass) < TRIM_HEAP_MIN_BYTES
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], rtol=1e-4, atol=1e-6)
    big = TrainConfig(backend="scratch", seq_len=4096, scratch_positions=4096, micro_batch=64,
                      output_dir=str(tmp_path)).validate()
    assert _pass_bytes(model, big, None) >= TRIM_HEAP_MIN_BYTES  # passes that big are trimmed


def test_cpu_attention_runs_narrow_heads_in_fp32_under_autocast(tmp_path):
    """Lever 10: a CPU model on SDPA is set to `kernels.cpu_sdpa`. Without autocast it is SDPA
    (the optimized model's loss and gradients are the plain one's); under bf16 autocast its
    narrow heads attend in fp32 (the very output of SDPA on fp32 inputs, not autocast's bf16
    one); the setting is not saved."""
    from transformers import AutoModelForCausalLM
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from mens.train.config import TrainConfig
    from mens.train.kernels import CPU_SDPA, cpu_sdpa

    cfg = TrainConfig(backend="scratch", scratch_shape="tiny", scratch_arch="llama", seq_len=64, micro_batch=2,
                      output_dir=str(tmp_path / "run")).validate()
    ids = torch.randint(5, 120, (2, 33))

    _, plain, ref_loss, ref = _scratch_step(cfg, ids, optimize=False)
    plan, model, loss, got = _scratch_step(cfg, ids, optimize=True)
    assert plan.patched["cpu_attention"] == 1 and model.config._attn_implementation == CPU_SDPA
    assert plain.config._attn_implementation == "sdpa"
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)  # the other levers round differently
    for name in ref:
        torch.testing.assert_close(got[name], ref[name], rtol=1e-4, atol=1e-6)

    attn = model.model.layers[0].self_attn
    q, k, v = (torch.randn(2, 4, 33, 16) for _ in range(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours, _ = cpu_sdpa(attn, q, k, v, None, is_causal=True)
        autocast_bf16, _ = sdpa_attention_forward(attn, q, k, v, None, is_causal=True)
    fp32, _ = sdpa_attention_forward(attn, q, k, v, None, is_causal=True)
    assert ours.dtype == torch.float32 and autocast_bf16.dtype == torch.bfloat16
    torch.testing.assert_close(ours, fp32, rtol=0, atol=0)
    assert not torch.equal(autocast_bf16.float(), fp32)
    wide = torch.randn(2, 4, 33, 64)                   # wide heads: left to autocast (bf16 is faster there)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert cpu_sdpa(attn, wide, wide, wide, None, is_causal=True)[0].dtype == torch.bfloat16

    model.save_pretrained(tmp_path / "saved")
    assert CPU_SDPA not in (tmp_path / "saved" / "config.json").read_text()
    assert AutoModelForCausalLM.from_pretrained(tmp_path / "saved").config._attn_implementation == "sdpa"


def test_packed_rows_attend_example_by_example_as_the_masked_row_does(tmp_path, monkeypatch):
    """cpu_sdpa runs a training pass over packed rows as one causal SDPA call per example
    (kernels.segment_attention): the same attention as the block-diagonal mask, so the packed
    model's loss and gradients are the plain SDPA model's; eval passes keep the mask."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from mens.train.config import TrainConfig
    from mens.train.kernels import packed_segments, segment_attention

    # the segments of rows packed with examples of 5 + 3 tokens, one of 8, and 6 + padding 2
    pos = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2], [0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3, 4, 5, 0, 1]])
    q, k, v = (torch.randn(3, 4, 8, 16, requires_grad=True) for _ in range(3))
    mask = torch.ones(3, 1, 8, 8, dtype=torch.bool)

    class Attn(torch.nn.Module):
        num_key_value_groups = 2

    attn = Attn().train()
    segments = packed_segments(pos, q, k, mask, attn)
    assert segments == [[(0, 5), (5, 8)], [(0, 8)], [(0, 6), (6, 8)]]
    seg = (pos == 0).cumsum(1)
    block_causal = ((seg[:, :, None] == seg[:, None, :]) & torch.ones(8, 8, dtype=torch.bool).tril())[:, None]
    kv = (torch.randn(3, 2, 8, 16) for _ in range(2))   # grouped-query: 4 query heads on 2 key/value heads
    k2, v2 = kv
    ours = segment_attention(attn, q, k2, v2, segments)
    ref, _ = sdpa_attention_forward(attn, q, k2, v2, block_causal)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
    assert packed_segments(pos, q, k, mask, attn.eval()) is None             # eval: the mask
    assert packed_segments(pos, q, k[:, :, :3], mask, attn.train()) is None  # a KV cache: the mask
    assert packed_segments(torch.arange(8).expand(3, 8), q, k, mask, attn) is None  # one example a row

    cfg = TrainConfig(backend="scratch", scratch_shape="tiny", scratch_arch="llama", seq_len=64, micro_batch=3,
                      output_dir=str(tmp_path / "run")).validate()
    ids = torch.randint(5, 120, (3, 8))
    import mens.train.kernels as kernels

    calls = []
    real = kernels.segment_attention
    monkeypatch.setattr(kernels, "segment_attention", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    results = []
    for optimize in (False, True):
        from mens.train.backends import build

        torch.manual_seed(0)
        model = build(cfg, torch.device("cpu"), False).model.train()
        if optimize:
            optimize_for_training(model, cfg)
        loss = model(input_ids=ids, position_ids=pos, labels=ids).loss
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters()}))
    assert len(calls) == model.config.num_hidden_layers  # the optimized model's layers went example by example
    (ref_loss, ref_grads), (got_loss, got_grads) = results
    torch.testing.assert_close(got_loss, ref_loss, rtol=1e-5, atol=1e-6)
    for name in ref_grads:
        torch.testing.assert_close(got_grads[name], ref_grads[name], rtol=1e-4, atol=1e-6)
