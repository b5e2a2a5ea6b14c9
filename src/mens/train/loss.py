"""Chunked LM-head + cross-entropy over supervised positions only.

The vocabulary is the single biggest tensor in small-model fine-tuning: Qwen2 has 151,936 ids,
so fp32 logits for one 4x512 batch are 1.2 GB and their softmax gradient another 1.2 GB. TRL
computes the head at every position (prompt and padding included) and upcasts the whole
[B, T, V] block. Here the caller passes hidden states only at positions whose next token is
supervised, and the head is applied a chunk of rows at a time, so at most one
[chunk, V] block of logits (plus its fp32 copy) is ever alive.

Two paths:

* a plain ``nn.Linear`` head (the usual case: LoRA/QLoRA never adapt the head and
  bitsandbytes leaves it unquantised) goes through ``_FusedLinearCrossEntropy``, which
  computes the gradient with respect to the hidden states (and the weight/bias when they are
  trainable) *inside the forward pass*, chunk by chunk, and stores only that [N, H] gradient.
  Backward is a scalar multiply. This costs two head matmuls per chunk instead of the three a
  recompute-in-backward scheme needs (measured, 1,536 tokens x 151,936 ids, bf16, 2 cores:
  2.1 s forward+backward vs 4.7 s checkpointed and 2.5 s for full unchunked logits);
* any other module (a PEFT-wrapped Linear, a head with hooks) runs each chunk under
  ``torch.utils.checkpoint``: forward keeps only the chunk's input, backward recomputes that
  chunk's logits. Correct for anything autograd can differentiate.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

IGNORE_INDEX = -100


def supervised_loss(
    hidden: Tensor, lm_head: nn.Module, labels: Tensor, chunk_size: int = 1024
) -> tuple[Tensor, int]:
    """Sum of token cross-entropies (fp32 scalar) and the number of supervised tokens.

    ``hidden`` is [N, H] (final hidden states at supervised positions, already shifted),
    ``labels`` is [N] target ids; rows labelled ``-100`` are ignored and not counted.
    """
    if hidden.dim() != 2 or labels.dim() != 1 or hidden.shape[0] != labels.shape[0]:
        raise ValueError(
            f"supervised_loss wants hidden [N, H] and labels [N]; got {tuple(hidden.shape)} "
            f"and {tuple(labels.shape)}"
        )
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be positive, got {chunk_size}")
    n_tokens = int((labels != IGNORE_INDEX).sum()) if labels.numel() else 0
    if hidden.shape[0] == 0 or n_tokens == 0:
        # Keep the graph connected so a backward() over an empty micro-batch is a no-op
        # rather than an error (DDP needs every rank to call backward).
        zero = hidden.sum() * 0.0
        for p in lm_head.parameters():
            if p.requires_grad:
                zero = zero + p.sum() * 0.0
        return zero.float(), 0
    if hidden.device.type == "cpu":  # the budget is host memory's (see _CHUNK_BYTES)
        chunk_size = min(chunk_size, _rows_within_budget(lm_head))
    if _is_plain_linear(lm_head):
        loss = _FusedLinearCrossEntropy.apply(
            hidden, lm_head.weight, lm_head.bias, labels, chunk_size
        )
    else:
        loss = _checkpointed_chunks(hidden, lm_head, labels, chunk_size)
    return loss, n_tokens


# On a CPU, an fp32 [rows, vocab] block is the loss's largest transient (plus half as much again
# in bf16), alive on top of a whole pass's activations; keep it near 64 MB (151,936 ids -> 110
# rows). A GPU takes `loss_chunk` rows as asked: 110-row chunks would be ~300 small launches.
# Measured on that head, 2 cores, 1,536 rows: 256-row chunks take within a few % of 1,024-row
# ones. At the Qwen2.5-0.5B shape 110-row chunks (vs 220) lower a 4-step epoch's peak by 0.11 GB
# for ~3 % more time (within run-to-run noise): the peak, not the time, was the tighter target.
_CHUNK_BYTES = 1 << 26


def _rows_within_budget(lm_head: nn.Module) -> int:
    vocab = getattr(lm_head, "out_features", None) or getattr(getattr(lm_head, "weight", None), "shape", [0])[0]
    return max(32, _CHUNK_BYTES // (4 * max(int(vocab), 1)))


def _is_plain_linear(module: nn.Module) -> bool:
    # Exact type check: subclasses (bnb Linear4bit, PEFT LoRA layers) change forward().
    # Forward hooks would be skipped by the fused path, so modules with hooks take the
    # generic one.
    return (
        type(module) is nn.Linear
        and not module._forward_hooks
        and not module._forward_pre_hooks
    )


def _chunk_ce_sum(lm_head: nn.Module, h: Tensor, y: Tensor) -> Tensor:
    logits = lm_head(h).float()
    return F.cross_entropy(logits, y, ignore_index=IGNORE_INDEX, reduction="sum")


def _checkpointed_chunks(
    hidden: Tensor, lm_head: nn.Module, labels: Tensor, chunk_size: int
) -> Tensor:
    total = hidden.new_zeros((), dtype=torch.float32)
    needs_grad = torch.is_grad_enabled() and (
        hidden.requires_grad or any(p.requires_grad for p in lm_head.parameters())
    )
    for start in range(0, hidden.shape[0], chunk_size):
        h = hidden[start : start + chunk_size]
        y = labels[start : start + chunk_size]
        if needs_grad:
            part = checkpoint(_chunk_ce_sum, lm_head, h, y, use_reentrant=False)
        else:
            part = _chunk_ce_sum(lm_head, h, y)
        total = total + part
    return total


class _FusedLinearCrossEntropy(torch.autograd.Function):
    """sum CE(h @ W.T + b, y), gradients computed during forward one chunk at a time."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, labels, chunk_size):  # noqa: D401
        want_h = hidden.requires_grad
        want_w = weight.requires_grad
        want_b = bias is not None and bias.requires_grad
        # Under autocast the head's matmuls run in its dtype, as nn.Linear's would: torch.mm with
        # out= is not autocast, and fp32 master weights (full / scratch, `bf16-mixed`) would keep
        # the largest GEMM of the step in fp32 (on a GPU, ~28 % of a 0.5B model's forward FLOPs).
        param_dtypes = (weight.dtype, bias.dtype if bias is not None else None)
        device = weight.device.type
        if torch.is_autocast_enabled(device):
            weight = weight.to(torch.get_autocast_dtype(device))
        grad_h = torch.empty_like(hidden) if want_h else None
        # fp32 accumulators for the (rarely trained) head parameters: summing many bf16
        # chunk products in bf16 would lose most of the mantissa.
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_w else None
        grad_b = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if want_b else None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        rows = min(chunk_size, hidden.shape[0])
        # Two [chunk, V] buffers for the whole call, reused by every chunk: the head's output
        # in the weight's dtype (later the bf16 softmax gradient) and its fp32 copy. Fresh
        # blocks of this size cost page faults on every chunk (measured: a fresh [1968, 4864]
        # bf16 product takes ~2x the time of one written into a reused buffer on this CPU).
        out_buf = torch.empty(rows, weight.shape[0], dtype=weight.dtype, device=weight.device)
        f32_buf = out_buf if weight.dtype == torch.float32 else torch.empty(
            rows, weight.shape[0], dtype=torch.float32, device=weight.device)
        with torch.no_grad():
            for start in range(0, hidden.shape[0], chunk_size):
                h = hidden[start : start + chunk_size]
                y = labels[start : start + chunk_size]
                m = h.shape[0]
                # One fp32 [chunk, V] buffer: the logits, then (in place) their exponentials,
                # then the softmax gradient. logsumexp() would allocate two more of that size.
                raw = torch.mm(h.to(weight.dtype), weight.t(), out=out_buf[:m])
                if bias is not None:
                    raw += bias
                logits = f32_buf[:m]
                if logits.data_ptr() != raw.data_ptr():
                    logits.copy_(raw)
                valid = y != IGNORE_INDEX
                safe_y = torch.where(valid, y, torch.zeros_like(y))
                target = logits.gather(1, safe_y[:, None]).squeeze(1)
                peak = logits.amax(1, keepdim=True)
                exps = logits.sub_(peak).exp_()
                denom = exps.sum(1, keepdim=True)
                lse = peak.squeeze(1) + denom.squeeze(1).log()
                total += ((lse - target) * valid).sum()
                if not (want_h or want_w or want_b):
                    continue
                # d(sum CE)/d logits = softmax - onehot, zero on ignored rows.
                grad_logits = exps.div_(denom)
                grad_logits[torch.arange(m, device=y.device), safe_y] -= 1.0
                grad_logits.mul_(valid[:, None])
                if want_b:
                    grad_b += grad_logits.sum(0)
                g = grad_logits if grad_logits.data_ptr() == out_buf.data_ptr() else out_buf[:m].copy_(grad_logits)
                if want_h:
                    grad_h[start : start + chunk_size] = (g @ weight).to(hidden.dtype)
                if want_w:
                    grad_w += (g.t() @ h.to(g.dtype)).float()
        del out_buf, f32_buf
        ctx.save_for_backward(grad_h, grad_w, grad_b)
        ctx.param_dtypes = param_dtypes
        return total

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w, grad_b = ctx.saved_tensors
        w_dtype, b_dtype = ctx.param_dtypes
        scale = grad_out.float()
        out_h = (grad_h.float() * scale).to(grad_h.dtype) if grad_h is not None else None
        out_w = (grad_w * scale).to(w_dtype) if grad_w is not None else None
        out_b = (grad_b * scale).to(b_dtype) if grad_b is not None else None
        return out_h, out_w, out_b, None, None


# ---------------------------------------------------------------- the loss of a micro-batch

def batch_loss(decoder, head, batch, device, chunk_size: int):
    """Sum of token losses and supervised-token count of one micro-batch. The decoder body
    gives the last hidden states; the head and cross-entropy run only where a target exists."""
    from mens.train.data import IGNORE

    ids = batch.input_ids.to(device, non_blocking=True)
    pos = batch.position_ids.to(device, non_blocking=True)
    targets = batch.targets.to(device, non_blocking=True)
    # No attention_mask: restarting position ids make transformers build the block-diagonal
    # (packed) causal mask, or varlen attention under flash-attention.
    hidden = decoder(input_ids=ids, position_ids=pos, use_cache=False).last_hidden_state
    keep = targets != IGNORE
    return supervised_loss(hidden[keep], head, targets[keep], chunk_size)


def one_row(batch, row: int = 0):
    """Row `row` of a micro-batch as a batch of its own."""
    from mens.train.data import IGNORE, Batch

    targets = batch.targets[row:row + 1]
    return Batch(batch.input_ids[row:row + 1], batch.position_ids[row:row + 1], targets,
                 int((targets != IGNORE).sum()), int(batch.input_ids.shape[1]))


def reference_loss(model, batch, device) -> float | None:
    """The model's own mean loss (transformers' forward with labels) over the examples of row 0
    of `batch`, one example at a time — what the loop's packed, patched loss must equal. Call it
    before the speed levers patch the model. None when the row supervises nothing."""
    from mens.train.data import IGNORE

    ids, pos, targets = batch.input_ids[0], batch.position_ids[0], batch.targets[0]
    starts = (pos == 0).nonzero().flatten().tolist() + [len(pos)]
    total, count = 0.0, 0
    for start, end in zip(starts, starts[1:]):
        n = int((targets[start:end] != IGNORE).sum())
        if n == 0:  # padding, or an example cut to nothing supervised
            continue
        # The model's own forward and logits; the loss against mens's targets directly (handing
        # transformers labels would drop the example's last target, which it shifts out).
        logits = model(input_ids=ids[None, start:end].to(device), use_cache=False).logits[0].float()
        total += float(torch.nn.functional.cross_entropy(logits, targets[start:end].to(device), ignore_index=IGNORE,
                                                         reduction="sum"))
        count += n
    return total / count if count else None
