"""supervised_loss equals full-logit cross-entropy, in value and in gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mens.train.loss import supervised_loss

H, V = 32, 301


def _reference(hidden, head, labels):
    return F.cross_entropy(head(hidden).float(), labels, ignore_index=-100, reduction="sum")


def _grads(hidden, head, labels, fn):
    hidden = hidden.detach().clone().requires_grad_(True)
    head.zero_grad(set_to_none=True)
    out = fn(hidden, head, labels)
    loss = out[0] if isinstance(out, tuple) else out
    (loss * 0.5).backward()  # a non-unit upstream gradient exercises the scaling
    params = {n: p.grad.detach().clone() for n, p in head.named_parameters() if p.grad is not None}
    return loss.detach(), hidden.grad.detach().clone(), params


def _compare(hidden, head, labels, chunk, rtol=1e-4, atol=1e-5):
    ref_loss, ref_h, ref_p = _grads(hidden, head, labels, _reference)
    got_loss, got_h, got_p = _grads(
        hidden, head, labels, lambda h, m, y: supervised_loss(h, m, y, chunk_size=chunk)
    )
    assert got_loss.dtype == torch.float32
    torch.testing.assert_close(got_loss, ref_loss, rtol=rtol, atol=atol)
    torch.testing.assert_close(got_h, ref_h, rtol=rtol, atol=atol)
    assert ref_p.keys() == got_p.keys() and ref_p
    for name in ref_p:
        torch.testing.assert_close(got_p[name], ref_p[name], rtol=rtol, atol=atol)


@pytest.mark.parametrize("n,chunk", [(37, 8), (16, 16), (5, 1024)])
@pytest.mark.parametrize("bias", [False, True])
def test_plain_linear_matches_full_cross_entropy(n, chunk, bias):
    torch.manual_seed(0)
    head = nn.Linear(H, V, bias=bias)
    hidden = torch.randn(n, H)
    labels = torch.randint(0, V, (n,))
    _compare(hidden, head, labels, chunk)


def test_frozen_head_gives_hidden_gradient_only():
    torch.manual_seed(1)
    head = nn.Linear(H, V, bias=False).requires_grad_(False)
    hidden = torch.randn(23, H, requires_grad=True)
    labels = torch.randint(0, V, (23,))
    loss, n = supervised_loss(hidden, head, labels, chunk_size=7)
    loss.backward()
    ref_hidden = hidden.detach().clone().requires_grad_(True)
    _reference(ref_hidden, head, labels).backward()
    assert n == 23 and head.weight.grad is None
    torch.testing.assert_close(hidden.grad, ref_hidden.grad, rtol=1e-4, atol=1e-5)


def test_tied_embedding_head():
    torch.manual_seed(2)
    embed = nn.Embedding(V, H)
    head = nn.Linear(H, V, bias=False)
    head.weight = embed.weight  # how transformers ties input and output embeddings
    hidden = torch.randn(19, H)
    labels = torch.randint(0, V, (19,))
    _compare(hidden, head, labels, chunk=6)
    assert embed.weight.grad is not None


def test_peft_wrapped_head_takes_checkpointed_path():
    peft = pytest.importorskip("peft")
    torch.manual_seed(3)

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.lm_head = nn.Linear(H, V, bias=True)

        def forward(self, x):
            return self.lm_head(x)

    model = peft.get_peft_model(
        Tiny(), peft.LoraConfig(r=4, lora_alpha=8, target_modules=["lm_head"], init_lora_weights=False)
    )
    head = model.base_model.model.lm_head
    assert type(head) is not nn.Linear
    hidden = torch.randn(29, H)
    labels = torch.randint(0, V, (29,))
    _compare(hidden, head, labels, chunk=8)


def test_ignored_labels_are_not_counted():
    torch.manual_seed(4)
    head = nn.Linear(H, V)
    hidden = torch.randn(12, H)
    labels = torch.randint(0, V, (12,))
    labels[[0, 5, 11]] = -100
    _compare(hidden, head, labels, chunk=5)
    assert supervised_loss(hidden, head, labels)[1] == 9


def test_bf16_hidden_and_head_close_to_fp32():
    torch.manual_seed(5)
    head = nn.Linear(H, V, bias=False)
    hidden = torch.randn(40, H)
    labels = torch.randint(0, V, (40,))
    ref = _reference(hidden, head, labels)
    loss, _ = supervised_loss(hidden.bfloat16(), head.to(torch.bfloat16), labels, chunk_size=16)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ref, rtol=2e-2, atol=0.0)


def test_empty_batch_is_zero_and_backpropagates():
    head = nn.Linear(H, V)
    hidden = torch.randn(0, H, requires_grad=True)
    loss, n = supervised_loss(hidden, head, torch.zeros(0, dtype=torch.long))
    loss.backward()
    assert n == 0 and loss.item() == 0.0 and loss.dtype == torch.float32
    assert hidden.grad is not None and head.weight.grad is not None
    assert float(head.weight.grad.abs().sum()) == 0.0


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="hidden"):
        supervised_loss(torch.randn(3, H), nn.Linear(H, V), torch.zeros(4, dtype=torch.long))


def test_under_autocast_the_head_computes_like_nn_linear():
    """fp32 master weights under bf16 autocast (full / scratch with `bf16-mixed`): the fused head
    multiplies in bf16 as nn.Linear does under autocast — it used to stay in fp32 (torch.mm with
    out= is not autocast), 100x further from the reference."""
    torch.manual_seed(3)
    head = nn.Linear(64, 3001, bias=False)
    hidden, labels = torch.randn(200, 64) * 2, torch.randint(0, 3001, (200,))

    def run(fn):
        h = hidden.clone().requires_grad_(True)
        head.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = fn(h)
        loss.backward()
        return loss.detach(), h.grad, head.weight.grad

    ref = run(lambda h: F.cross_entropy(head(h).float(), labels, reduction="sum"))
    got = run(lambda h: supervised_loss(h, head, labels, chunk_size=64)[0])
    assert got[2].dtype == torch.float32  # the fp32 weight's gradient stays fp32
    torch.testing.assert_close(got[0], ref[0], rtol=0, atol=2e-3)  # was 2.5e-2 off
    torch.testing.assert_close(got[1], ref[1], rtol=0, atol=2e-4)  # was 1e-3 off
    torch.testing.assert_close(got[2], ref[2], rtol=0, atol=0.1)
