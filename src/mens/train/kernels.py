"""Fused autograd functions behind the speed levers (`mens.train.speed` patches them in).

Each computes exactly what the module it replaces computes (tests compare them with PEFT,
transformers and gradcheck) while saving less for backward and making fewer passes over
memory: on a CPU the elementwise passes over [tokens, intermediate] tensors, not the matmuls,
were half of a QLoRA step (docs/performance.md).
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn

_DROP_SCALE = 32768  # keep-mask from 15 random bits per element: p is exact to 1/32768


def keep_mask(shape, p: float, device, seed: int) -> torch.Tensor:
    """Bool mask, each element kept with probability 1 - p (to 1/32768), the same for the same
    seed. CPU's generator pays per draw, not per bit: one 64-bit draw fills four 15-bit lanes
    (`random_` on int16 spends a whole draw per element), measured ~2x faster on [1968, 4864]."""
    n = math.prod(shape)
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    bits = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(generator=gen)
    lanes = bits.view(torch.int16)[:n].bitwise_and_(_DROP_SCALE - 1)
    return (lanes >= int(round(p * _DROP_SCALE))).view(shape)


class LoraDelta(torch.autograd.Function):
    """result + scale * B(A(dropout(x))) computed in x's dtype, saving only the [N, r]
    bottleneck beside x itself (which the base layer keeps anyway): no fp32 copies of x, and no
    dropout mask either: its seed (one draw from the global generator, so runs and resumes stay
    reproducible) regenerates it in backward. That trades a second mask draw (~5 % of a CPU
    step) for 1 byte per input element per adapted layer, 10 KB per token and decoder layer at
    the Qwen2.5-0.5B shape (~0.13 GB of a 512-token pass). The scale rides on the r-wide
    bottleneck and the sum with the base layer's output is the B matmul's accumulator
    (`addmm`), so no pass over the wide [N, out] output is spent on either."""

    @staticmethod
    def forward(ctx, result, x, weight_a, weight_b, scale, p):
        flat = x.reshape(-1, x.shape[-1])
        a = weight_a.to(flat.dtype)
        b = weight_b.to(flat.dtype)
        ctx.seed = None
        if p > 0:
            ctx.seed = int(torch.randint(0, 1 << 62, ()))
            scale = scale / (1.0 - p)
            dropped = flat * keep_mask(flat.shape, p, flat.device, ctx.seed)
        else:
            dropped = flat
        low = (dropped @ a.t()).mul_(scale)
        del dropped
        out = torch.addmm(result.reshape(-1, result.shape[-1]).to(flat.dtype), low, b.t())
        ctx.save_for_backward(flat, low, weight_a, weight_b)
        ctx.scale, ctx.p = scale, p
        ctx.in_shape = x.shape
        ctx.result_dtype = result.dtype
        return out.view(*result.shape[:-1], out.shape[-1]).to(result.dtype)

    @staticmethod
    def backward(ctx, grad_out):
        flat, low, weight_a, weight_b = ctx.saved_tensors
        keep = keep_mask(flat.shape, ctx.p, flat.device, ctx.seed) if ctx.seed is not None else None
        g = grad_out.reshape(-1, grad_out.shape[-1]).to(flat.dtype)
        grad_b = (g.t() @ low).to(weight_b.dtype)  # low already carries the scale
        g_low = (g @ weight_b.to(flat.dtype)).mul_(ctx.scale)
        del g
        dropped = flat * keep if keep is not None else flat
        grad_a = (g_low.t() @ dropped).to(weight_a.dtype)
        del dropped
        grad_x = None
        if ctx.needs_input_grad[1]:
            grad_x = g_low @ weight_a.to(flat.dtype)
            if keep is not None:
                grad_x.mul_(keep)
            grad_x = grad_x.view(ctx.in_shape)
        grad_result = grad_out.to(ctx.result_dtype) if ctx.needs_input_grad[0] else None
        return grad_result, grad_x, grad_a, grad_b, None, None


class SwiGLU(torch.autograd.Function):
    """silu(gate) * up, saving only its two inputs. Backward stays in the inputs' dtype and uses
    aten's fused silu_backward (fp32 inside each element, like autograd's own bf16 path): four
    passes over [tokens, intermediate] instead of the dozen an fp32 upcast costs."""

    @staticmethod
    def forward(ctx, gate, up):
        ctx.save_for_backward(gate, up)
        return nn.functional.silu(gate).mul_(up)

    @staticmethod
    def backward(ctx, grad):
        gate, up = ctx.saved_tensors
        grad_up = nn.functional.silu(gate).mul_(grad)
        grad_gate = grad * up
        torch.ops.aten.silu_backward.grad_input(grad_gate, gate, grad_input=grad_gate)
        return grad_gate, grad_up


class RMSNorm(torch.autograd.Function):
    """weight * rms_norm(x).to(x.dtype), the Llama/Qwen2/Mistral formula, on aten's fused kernel.
    The composite version upcasts x to fp32 and keeps that copy for backward (2 bytes more per
    element than x itself) over six passes each way; here one pass each way, saving x and the
    [tokens, 1] fp32 reciprocal RMS. Results are bit-identical (the kernel rounds to x's dtype
    before the weight multiply, exactly as the module does)."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        normed, rstd = torch.ops.aten._fused_rms_norm(x, [x.shape[-1]], None, eps)
        # [..., 1] on the CPU (the decomposition); a view to that shape whatever a device kernel
        # returns, so backward broadcasts it over the hidden size either way.
        rstd = rstd.reshape(*x.shape[:-1], 1)
        ctx.save_for_backward(x, rstd, weight)
        return weight * normed

    @staticmethod
    def backward(ctx, grad):
        x, rstd, weight = ctx.saved_tensors
        # aten has no CPU kernel for the fused backward; d/dx of x * rstd, in fp32 on [tokens, H]:
        # rstd * (g - n * mean(g * n)) with n the normalised input.
        g = (grad * weight).to(x.dtype).float()
        normed = x.float().mul_(rstd)
        grad_w = None
        if ctx.needs_input_grad[1]:
            grad_w = (grad * normed.to(x.dtype)).reshape(-1, x.shape[-1]).sum(0).to(weight.dtype)
        dot = (g * normed).mean(-1, keepdim=True)
        grad_x = g.sub_(normed.mul_(dot)).mul_(rstd).to(x.dtype)
        return grad_x, grad_w, None


# Head widths up to this run torch's CPU attention faster in fp32 than in bf16 (fwd + bwd, one
# thread: 16 wide 7.3 vs 12.6 ms, 32 wide 5.8 vs 7.2 ms; at 64 and 128 bf16 is the faster).
CPU_FP32_ATTENTION_MAX_HEAD = 32
CPU_SDPA = "mens_cpu_sdpa"                  # narrow heads in fp32, packed rows example by example
CPU_SDPA_MASKED = "mens_cpu_sdpa_masked"    # narrow heads in fp32, packed rows through the mask
# Keyword arguments an attention call may carry with a value and still be one causal block per
# example; any other one with a value (a sliding window, soft-capping, attention sinks, dropout)
# changes the attention, so that call keeps transformers' masked SDPA.
_SEGMENT_SAFE_KWARGS = {"position_ids", "scaling", "is_causal"}


def cpu_sdpa(module, query, key, value, attention_mask, **kwargs):
    """transformers' SDPA attention for CPU training: packed rows attend segment by segment
    (`segment_attention`), and under CPU autocast narrow heads compute in fp32 (autocast would
    run them in bf16, where torch's CPU kernel is slower at these widths). Elsewhere (a GPU,
    eval and generation, rows of one sequence, a layer with a window or another modifier) it is
    transformers' SDPA as is."""
    return _cpu_sdpa(module, query, key, value, attention_mask, True, **kwargs)


def cpu_sdpa_masked(module, query, key, value, attention_mask, **kwargs):
    """`cpu_sdpa` without the example-by-example path (`--speed-levers` without segment_attention)."""
    return _cpu_sdpa(module, query, key, value, attention_mask, False, **kwargs)


def _cpu_sdpa(module, query, key, value, attention_mask, segments_allowed: bool, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.device.type != "cpu":
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    upcast = query.shape[-1] <= CPU_FP32_ATTENTION_MAX_HEAD and torch.is_autocast_enabled("cpu")
    with torch.autocast("cpu", enabled=False) if upcast else contextlib.nullcontext():
        if upcast:
            query, key, value = query.float(), key.float(), value.float()
        segments = packed_segments(kwargs.get("position_ids"), query, key, attention_mask, module) \
            if segments_allowed and plain_causal(module, kwargs) else None
        if segments is not None:
            return segment_attention(module, query, key, value, segments, kwargs.get("scaling")), None
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


def plain_causal(module, kwargs: dict) -> bool:
    """Whether this attention call is plain causal attention — what `segment_attention` computes
    per example: a causal module, and no argument beyond positions and scale that carries a value
    (a `sliding_window` attends to the last n tokens only, not to the whole example)."""
    if not getattr(module, "is_causal", True) or getattr(module, "sliding_window", None):
        return False
    return all(not value for name, value in kwargs.items() if name not in _SEGMENT_SAFE_KWARGS)


def packed_segments(position_ids, query, key, attention_mask, module) -> list[list[tuple[int, int]]] | None:
    """Per row, the (start, end) of each packed example — a run of positions restarting at 0
    (padding is a run of its own) — when a training pass's rows hold more than one; else None.

    Only for a training pass over whole packed rows: no KV cache (query as long as key), the
    packed mask given, positions that restart at 0 in every row; eval and generation keep the
    mask (their padding is on the left and their positions do not restart)."""
    if (position_ids is None or attention_mask is None or not module.training or query.shape[2] != key.shape[2]
            or position_ids.dim() != 2 or position_ids.shape != (query.shape[0], query.shape[2])):
        return None
    starts = position_ids == 0
    if not bool(starts[:, 0].all()):
        return None
    rows = []
    length = position_ids.shape[1]
    for row in starts.tolist():
        begin = [i for i, s in enumerate(row) if s]
        rows.append(list(zip(begin, begin[1:] + [length])))
    return rows if any(len(r) > 1 for r in rows) else None


def segment_attention(module, query, key, value, segments, scaling=None) -> torch.Tensor:
    """Causal attention within each packed example: the block-diagonal causal mask's result,
    computed as one `is_causal` SDPA call per example instead of one masked call per row.
    Torch's CPU kernel works through every block of a masked row (n² per row of n) but skips
    the blocks above the diagonal with is_causal, and examples of n1 + n2 = n tokens cost n1² +
    n2²; so a row twice as long costs no more per token (one thread, [rows, 8, n, 16], forward
    and backward: 512-token rows 7.3 ms against 14.4 masked; 256-token rows 6.9 against 7.5).
    The examples are cut out of the rows laid end to end with one `split` (its backward is one
    concatenation; slicing each would add a row-sized zero gradient per example). Returns
    [B, L, H, D], as SDPA attention functions do."""
    rows, heads, length, _ = query.shape
    out_width = value.shape[-1]  # multi-head latent attention (DeepSeek): values narrower than keys
    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1:  # grouped-query attention: every query head its key/value head
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
    sizes = [e - s for row in segments for s, e in row]

    def examples(t):  # [B, H, L, D] → the examples' [1, H, n, D] pieces, rows end to end
        return t.permute(1, 0, 2, 3).reshape(heads, rows * length, t.shape[-1]).unsqueeze(0).split(sizes, dim=2)

    out = torch.cat([torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scaling)
                     for q, k, v in zip(examples(query), examples(key), examples(value))], dim=2)
    return out.view(heads, rows, length, out_width).permute(1, 2, 0, 3).contiguous()


def register_cpu_sdpa(segments: bool = True) -> str:
    """Make `cpu_sdpa` (`segments`) or `cpu_sdpa_masked` an attention implementation transformers
    models can be set to (masks as for SDPA); returns its name."""
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import sdpa_mask

    name, function = (CPU_SDPA, cpu_sdpa) if segments else (CPU_SDPA_MASKED, cpu_sdpa_masked)
    AttentionInterface.register(name, function)
    AttentionMaskInterface.register(name, sdpa_mask)
    return name
