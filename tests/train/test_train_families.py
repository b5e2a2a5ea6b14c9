"""Every family users fine-tune (tests/families.py), tiny, against plain transformers:

- exact math, every family: mens's training pass — LoRA with the defaults, every speed lever
  and packing where mens keeps them on for the family, the loop's own head and loss — gives the
  logits (max |Δlogit| <= 1e-3 in fp32 at supervised positions), the loss and the adapters'
  gradients of the unpatched model run one example at a time; every adapter gets a gradient (an
  MoE base's experts included) and no router has one;
- `mens train` qlora, lora and full with the defaults, on the families that stand for the rest
  (TRAINED: windows and soft-capping, recurrent layers, MoE with windows and sinks): each trains
  a step whose loss is plain transformers' over the same examples; QLoRA says what it quantised;
- docs/training.md's family table is what these rules give (`PYTHONPATH=src:tests python
  tests/train/test_train_families.py` writes it).
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

import pytest
import torch

from families import FAMILIES, tiny_family_dir
from mens.records import Pair
from train_helpers import config, write_pairs

pytestmark = pytest.mark.slow
DOCS = Path(__file__).resolve().parents[2] / "docs" / "training.md"
PAIRS = [Pair(prompt="add 1 and 2", response="fn add() to int {\n    return 1 + 2\n}"),
         Pair(prompt="Explain match in Vox.", response="match picks the first arm that fits."),
         Pair(prompt="hello", response="def main(): print(1)"),
         Pair(prompt="Write a Vox type.", response="type Shape = | Circle(r: int) | Rect(w: int, h: int)")]
# `mens train` runs every backend on these: Gemma 3 (sliding windows, soft-capping: the family
# whose loss was off), Qwen3.5 (Gated DeltaNet: packing off; the seeds' base) and gpt-oss (fused
# experts, windows, attention sinks, a mask that ignores position ids).
TRAINED = ("gemma3", "qwen3.5", "gpt-oss")


def _examples(batch, row: int):
    """The (start, end) of each example in row `row` of a batch that supervises something (not padding)."""
    from mens.train.data import IGNORE

    starts = (batch.position_ids[row] == 0).nonzero().flatten().tolist() + [batch.input_ids.shape[1]]
    return [(a, b) for a, b in zip(starts, starts[1:]) if (batch.targets[row, a:b] != IGNORE).any()]


@functools.cache
def exactness(name: str) -> dict:
    """Family `name` as `mens train --backend lora` builds it (adapters made non-zero), on the CPU
    in fp32: the unpatched model one example at a time against mens's training pass — levers,
    packing, the loop's head and chunked loss — in logits, loss and gradients; the speed plan."""
    import torch.nn.functional as F

    from mens.train.backends import build
    from mens.train.data import IGNORE, build_examples, epoch_batches
    from mens.train.family import packing_blocker
    from mens.train.loss import supervised_loss
    from mens.train.model import decoder_and_head
    from mens.train.runtime import dropout_off
    from mens.train.speed import optimize_for_training

    # own_weights only gives weights their own memory (no arithmetic); its gc.collect costs ~1 s a family
    cfg = config(tiny_family_dir(name), "unused", "unused", backend="lora", seq_len=128, micro_batch=2,
                 speed_levers="all,-own_weights")
    torch.manual_seed(0)
    built = build(cfg, torch.device("cpu"), False)
    model = built.model.train()
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    with torch.no_grad():  # B = 0 at the start would leave every adapter out of the forward
        for param_name, param in trainable.items():
            if "lora_B" in param_name:
                param.normal_(0, 0.05)
    why_not_packed = packing_blocker(model, "cpu")
    examples, _ = build_examples(PAIRS, built.tokenizer, 128)
    batches = epoch_batches(examples, 128, 2, 0, 0, built.tokenizer.eos_token_id, why_not_packed is None,
                            shuffle=False)

    def gradients():
        grads = {n: (p.grad if p.grad is not None else torch.zeros_like(p)).clone() for n, p in trainable.items()}
        model.zero_grad(set_to_none=True)
        return grads

    plain_logits, plain_loss, most_in_a_row = [], 0.0, 0
    with dropout_off(model):  # plain transformers (PEFT's forward), one example at a time
        for batch in batches:
            for row in range(batch.input_ids.shape[0]):
                spans = _examples(batch, row)
                most_in_a_row = max(most_in_a_row, len(spans))
                for start, end in spans:
                    keep = batch.targets[row, start:end] != IGNORE
                    logits = model(input_ids=batch.input_ids[row:row + 1, start:end], use_cache=False).logits[0][keep]
                    loss = F.cross_entropy(logits, batch.targets[row, start:end][keep], reduction="sum")
                    loss.backward()
                    plain_logits.append(logits.detach())
                    plain_loss += loss.item()
    plain_grads = gradients()

    plan = optimize_for_training(model, cfg)
    decoder, head = decoder_and_head(model)
    our_logits, our_loss, supervised = [], 0.0, 0
    with dropout_off(model):  # the loop's pass: decoder body on packed rows, its head and loss
        for batch in batches:
            keep = batch.targets != IGNORE
            hidden = decoder(input_ids=batch.input_ids, position_ids=batch.position_ids,
                             use_cache=False).last_hidden_state[keep]
            with torch.no_grad():
                our_logits.append(head(hidden))
            loss, count = supervised_loss(hidden, head, batch.targets[keep], cfg.loss_chunk)
            loss.backward()
            our_loss, supervised = our_loss + loss.item(), supervised + count
    our_grads = gradients()
    grad_gap = max(float((our_grads[n] - g).abs().max() / g.abs().max().clamp_min(1e-12))
                   for n, g in plain_grads.items())
    return {"gap": float((torch.cat(our_logits) - torch.cat(plain_logits)).abs().max()),
            "loss": (our_loss / supervised, plain_loss / supervised), "grad_gap": grad_gap,
            "no_gradient": sorted(n for n, g in plain_grads.items() if not g.abs().max()),
            "patched": plan.patched, "off": plan.off, "packing": why_not_packed, "packed_rows": most_in_a_row > 1,
            "adapted": built.adapters, "model_type": built.model.get_base_model().config.model_type}


@pytest.mark.parametrize("name", FAMILIES)
def test_training_pass_equals_plain_transformers(name):
    got = exactness(name)
    assert got["gap"] <= 1e-3, f"{name}: mens's training forward is off by {got['gap']:.3g}"
    assert got["loss"][0] == pytest.approx(got["loss"][1], rel=1e-5), name
    assert got["grad_gap"] <= 1e-3, f"{name}: the adapters' gradients are off by {got['grad_gap']:.3g} (relative)"
    assert not got["no_gradient"], f"{name}: adapters without a gradient: {got['no_gradient'][:4]}"
    family = FAMILIES[name]
    assert (got["packing"] is None) == family.packs_exactly, got["packing"]
    assert got["packed_rows"] == (got["packing"] is None)  # the rows the gap was measured on were packed
    if family.window:  # the windowed layers kept the mask, and the gap says that was exact
        assert "sliding-window" in got["off"].get("segment_attention", "") or "segment_attention" in got["off"]
    if family.moe:  # the experts train; the routers do not
        assert got["adapted"]["experts"], got["adapted"]
        assert not {"gate", "router"} & set(got["adapted"]["linear"]), got["adapted"]


# ---------------------------------------------------------------- mens train, every backend

@pytest.fixture(scope="module")
def family_data(tmp_path_factory):
    return write_pairs(tmp_path_factory.mktemp("family-data"), n=8)


def _plain_first_step_loss(model_dir: Path, run_dir: Path, data_dir: Path, nf4: bool) -> float:
    """The loss of the run's first step as plain transformers gives it: the unpatched model's own
    loss over the first window's examples, each alone (the window rebuilt from the manifest)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mens.hf import bnb_4bit_config
    from mens.records import read_pairs
    from mens.train.data import IGNORE, build_examples, epoch_batches
    from mens.train.loss import one_row, reference_loss

    manifest = json.loads((run_dir / "training_manifest.json").read_text())
    hp = manifest["hyperparameters"]
    tok = AutoTokenizer.from_pretrained(model_dir)
    examples, _ = build_examples(read_pairs(data_dir / "train.jsonl")[0], tok, hp["seq_len"])
    packing = hp["packing"] and "packing" not in manifest["speed"]["off"]
    window = epoch_batches(examples, hp["seq_len"], hp["micro_batch"], hp["seed"], 0, tok.eos_token_id,
                           packing)[:hp["grad_accum"]]
    dtype = getattr(torch, manifest["dtype"].split("+")[0])  # QLoRA computes in bf16, or fp32 on a slow-bf16 CPU
    kwargs = {"quantization_config": bnb_4bit_config(dtype), "dtype": dtype} if nf4 else {"dtype": torch.float32}
    model = AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in window:
            for row in range(batch.input_ids.shape[0]):
                n = int((batch.targets[row] != IGNORE).sum())
                if n:
                    total, count = total + reference_loss(model, one_row(batch, row), "cpu") * n, count + n
    return total / count


@pytest.mark.parametrize("name", TRAINED)
def test_mens_train_qlora_lora_full(name, family_data, tmp_path, caplog):
    """The defaults train every backend one step, and the first step's loss is plain transformers'."""
    from mens.train.loop import train

    model_dir = tiny_family_dir(name)
    losses, manifests = {}, {}
    for backend in ("lora", "full", "qlora"):
        with caplog.at_level(logging.WARNING, logger="mens"):
            out = train(config(model_dir, family_data, tmp_path / backend, backend=backend, max_steps=1, seq_len=128,
                               val_split=0.0))
        assert out.status == "completed" and len(out.losses) == 1
        losses[backend] = out.losses[0]
        manifests[backend] = json.loads((tmp_path / backend / "training_manifest.json").read_text())
    reference = _plain_first_step_loss(model_dir, tmp_path / "lora", family_data, nf4=False)
    assert losses["lora"] == pytest.approx(reference, rel=1e-4)   # B = 0 at the start: the base's loss
    assert losses["full"] == pytest.approx(reference, rel=1e-4)
    nf4_reference = _plain_first_step_loss(model_dir, tmp_path / "qlora", family_data, nf4=True)
    assert losses["qlora"] == pytest.approx(nf4_reference, rel=1e-2)  # NF4 is not bit-reproducible between loads

    qlora, lora = manifests["qlora"], manifests["lora"]
    if FAMILIES[name].moe:  # PEFT's expert adapters take no dropout; QLoRA says the experts stay bf16
        assert lora["hyperparameters"]["lora_dropout"] == qlora["hyperparameters"]["lora_dropout"] == 0.0
        assert qlora["quantization"] == "bnb-nf4-double-quant (linear layers; fused experts unquantised)"
        assert "leaves its fused experts" in caplog.text
    else:
        assert lora["hyperparameters"]["lora_dropout"] == 0.05 and qlora["quantization"] == "bnb-nf4-double-quant"
    assert ("packing" not in lora["speed"]["off"]) == FAMILIES[name].packs_exactly
    if name == "qwen3.5":  # its 4-bit error is large: the maintainers' advice, said on qlora
        assert "advise bf16 LoRA over QLoRA" in caplog.text


# ---------------------------------------------------------------- docs/training.md's family table

TABLE_START = "<!-- family table: tests/train/test_train_families.py -->"
TABLE_END = "<!-- end of family table -->"


def _why(text: str) -> str:
    return text.replace("|", "/")


def family_row(name: str) -> str:
    from mens.train.family import adapted_text

    got = exactness(name)
    off = {k: v for k, v in got["off"].items() if k not in ("packing", "own_weights")}
    levers = "; ".join(f"`{k}`: {_why(v)}" for k, v in sorted(off.items())) or "all on"
    packing = "exact" if got["packing"] is None else f"off: {_why(got['packing'])}"
    lora = adapted_text(got["adapted"])
    tested = "exact pass; qlora · lora · full trained" if name in TRAINED else "exact pass"
    return f"| {name} | `{got['model_type']}` | {tested} | {lora} | {levers} | {packing} |"


def family_table() -> str:
    head = ("| family | model_type | in the tests | LoRA adapts (default) | speed levers off, and why | packing |\n"
            "|---|---|---|---|---|---|")
    return "\n".join([TABLE_START, head, *(family_row(n) for n in FAMILIES), TABLE_END])


def test_docs_family_table_is_what_the_rules_give():
    text = DOCS.read_text()
    assert TABLE_START in text and TABLE_END in text, "docs/training.md lost its family table"
    written = text[text.index(TABLE_START):text.index(TABLE_END) + len(TABLE_END)]
    assert written == family_table(), "docs/training.md's family table is stale: `python tests/train/test_train_families.py`"


if __name__ == "__main__":  # PYTHONPATH=src:tests python tests/train/test_train_families.py
    text = DOCS.read_text()
    start, end = text.index(TABLE_START), text.index(TABLE_END) + len(TABLE_END)
    DOCS.write_text(text[:start] + family_table() + text[end:])
    print(f"wrote the family table of {len(FAMILIES)} families into {DOCS}")
