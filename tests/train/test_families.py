"""Every family users fine-tune (tests/families.py), tiny, against plain transformers:

- exact math: mens's training forward — every speed lever and packing, where mens keeps them
  on for the family — gives the logits of the unpatched model run one example at a time
  (max |Δlogit| <= 1e-3 in fp32 at supervised positions);
- `mens train` qlora, lora and full run with the defaults, and the first step's loss is the
  plain model's own loss over the same examples; an MoE base's experts train (LoRA through PEFT's
  parameter targeting) and its routers do not; QLoRA says what it quantised;
- the LoRA run merges (merged logits within 1e-5 of the adapter's) and `mens bench` runs on it;
- docs/training.md's family table is what these rules give (`python tests/train/test_families.py`
  prints it).
"""

from __future__ import annotations

import functools
import json
import sys
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


@functools.cache
def exactness(name: str) -> dict:
    """Family `name` as `mens train --backend lora` builds it (adapters made non-zero), on the CPU
    in fp32: the largest |Δlogit| between mens's training forward (levers, packing) and the
    unpatched model one example at a time, and the speed plan."""
    from mens.train.backends import build
    from mens.train.data import IGNORE, build_examples, epoch_batches
    from mens.train.family import adapted, packing_blocker
    from mens.train.model import decoder_and_head
    from mens.train.runtime import dropout_off
    from mens.train.speed import optimize_for_training

    cfg = config(tiny_family_dir(name), "unused", "unused", backend="lora", seq_len=128, micro_batch=2)
    torch.manual_seed(0)
    built = build(cfg, torch.device("cpu"), False)
    model = built.model.train()
    with torch.no_grad():
        for param_name, param in model.named_parameters():
            if "lora_B" in param_name:
                param.normal_(0, 0.05)
    why_not_packed = packing_blocker(model, "cpu")
    examples, _ = build_examples(PAIRS, built.tokenizer, 128)
    batches = epoch_batches(examples, 128, 2, 0, 0, built.tokenizer.eos_token_id, why_not_packed is None,
                            shuffle=False)
    reference, most_in_a_row = [], 0
    with torch.no_grad(), dropout_off(model):
        for batch in batches:
            keep = batch.targets != IGNORE
            for row in range(batch.input_ids.shape[0]):
                starts = (batch.position_ids[row] == 0).nonzero().flatten().tolist() + [batch.input_ids.shape[1]]
                spans = [(a, b) for a, b in zip(starts, starts[1:]) if keep[row, a:b].any()]  # not padding
                most_in_a_row = max(most_in_a_row, len(spans))
                for start, end in spans:
                    logits = model(input_ids=batch.input_ids[row:row + 1, start:end], use_cache=False).logits
                    reference.append(logits[0][keep[row, start:end]])
    plan = optimize_for_training(model, cfg)
    decoder, head = decoder_and_head(model)
    with torch.no_grad(), dropout_off(model):
        ours = [head(decoder(input_ids=b.input_ids, position_ids=b.position_ids, use_cache=False)
                     .last_hidden_state[b.targets != IGNORE]) for b in batches]
    gap = float((torch.cat(ours) - torch.cat(reference)).abs().max())
    return {"gap": gap, "patched": plan.patched, "off": plan.off, "packing": why_not_packed,
            "packed_rows": most_in_a_row > 1,
            "adapted": adapted(model), "model_type": built.model.get_base_model().config.model_type}


@pytest.mark.parametrize("name", FAMILIES)
def test_training_forward_equals_plain_transformers(name):
    got = exactness(name)
    assert got["gap"] <= 1e-3, f"{name}: mens's training forward is off by {got['gap']:.3g}"
    family = FAMILIES[name]
    assert (got["packing"] is not None) == (family.recurrent or name == "gpt-oss")
    assert got["packed_rows"] == (got["packing"] is None)  # the rows the gap was measured on were packed
    if family.window:  # the windowed layers kept the mask, and the gap says that was exact
        assert "sliding-window" in got["off"].get("segment_attention", "") or "segment_attention" in got["off"]
    if family.moe:  # the experts train; the routers do not
        assert got["adapted"]["experts"], got["adapted"]
        assert not {"gate", "router"} & set(got["adapted"]["linear"]), got["adapted"]


# ---------------------------------------------------------------- mens train, merge, bench

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

    manifest = json.loads((run_dir / "training_manifest.json").read_text())
    hp = manifest["hyperparameters"]
    tok = AutoTokenizer.from_pretrained(model_dir)
    pairs, _ = read_pairs(data_dir / "train.jsonl")
    examples, _ = build_examples(pairs, tok, hp["seq_len"])
    packing = hp["packing"] and "packing" not in manifest["speed"]["off"]
    window = epoch_batches(examples, hp["seq_len"], hp["micro_batch"], hp["seed"], 0, tok.eos_token_id,
                           packing)[:hp["grad_accum"]]
    kwargs = {"quantization_config": bnb_4bit_config(), "dtype": torch.bfloat16} if nf4 else {"dtype": torch.float32}
    model = AutoModelForCausalLM.from_pretrained(model_dir, **kwargs)
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in window:
            for row in range(batch.input_ids.shape[0]):
                pos, targets = batch.position_ids[row], batch.targets[row]
                starts = (pos == 0).nonzero().flatten().tolist() + [len(pos)]
                for start, end in zip(starts, starts[1:]):
                    n = int((targets[start:end] != IGNORE).sum())
                    if n:
                        labels = torch.full((1, end - start), IGNORE)
                        labels[0, 1:] = targets[start:end - 1]
                        out = model(input_ids=batch.input_ids[row:row + 1, start:end], labels=labels, use_cache=False)
                        total, count = total + float(out.loss) * n, count + n
    return total / count


@pytest.mark.parametrize("name", FAMILIES)
def test_mens_train_qlora_lora_full_merge_and_bench(name, family_data, tmp_path):
    """The defaults train every backend one step; the first step's loss is plain transformers';
    the LoRA run merges exactly and benches."""
    from mens.evaluate.bench import run_bench
    from mens.export.merge import merge_run
    from mens.train.loop import train

    model_dir = tiny_family_dir(name)
    losses = {}
    for backend in ("lora", "full", "qlora"):
        run = tmp_path / backend
        out = train(config(model_dir, family_data, run, backend=backend, max_steps=1, seq_len=128, val_split=0.0))
        assert out.status == "completed" and len(out.losses) == 1
        losses[backend] = out.losses[0]
        manifest = json.loads((run / "training_manifest.json").read_text())
        if backend == "qlora":
            assert manifest["quantization"].startswith("bnb-nf4")
        if FAMILIES[name].moe and backend != "full":
            assert manifest["hyperparameters"]["lora_dropout"] == 0.0  # PEFT's expert adapters take none
    reference = _plain_first_step_loss(model_dir, tmp_path / "lora", family_data, nf4=False)
    assert losses["lora"] == pytest.approx(reference, rel=1e-4)   # B = 0 at the start: the base's loss
    assert losses["full"] == pytest.approx(reference, rel=1e-4)
    nf4_reference = _plain_first_step_loss(model_dir, tmp_path / "qlora", family_data, nf4=True)
    assert losses["qlora"] == pytest.approx(nf4_reference, rel=1e-2)  # bf16 compute

    report = merge_run(tmp_path / "lora", tmp_path / "merged", dtype="fp32")
    assert report.max_logit_diff <= 1e-5
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"id": "t1", "category": "function", "prompt": "Write a Vox function that adds "
                                 "1 and 2.", "expect_contains": ["fn"], "context_files": []}) + "\n")
    result = run_bench(tmp_path / "lora", bench, max_new_tokens=8, device="cpu")
    assert len(result["items"]) == 1 and len(result["items"][0]["samples"][0]["response"]) > 0


# ---------------------------------------------------------------- docs/training.md's family table

TABLE_START = "<!-- family table: tests/train/test_families.py -->"
TABLE_END = "<!-- end of family table -->"


def _why(text: str) -> str:
    return text.replace("|", "/")


def family_row(name: str) -> str:
    got = exactness(name)
    off = {k: v for k, v in got["off"].items() if k not in ("packing", "own_weights")}
    levers = "; ".join(f"`{k}`: {_why(v)}" for k, v in sorted(off.items())) or "all on"
    packing = "exact" if got["packing"] is None else f"off: {_why(got['packing'])}"
    lora = ", ".join(got["adapted"]["linear"])
    if got["adapted"]["experts"]:
        lora += "; experts: " + ", ".join(got["adapted"]["experts"])
    if got["adapted"]["frozen"]:
        lora += "; frozen: " + ", ".join(got["adapted"]["frozen"])
    return f"| {name} | `{got['model_type']}` | yes · yes · yes | {lora} | {levers} | {packing} |"


def family_table() -> str:
    head = ("| family | model_type | qlora · lora · full | LoRA adapts (default) | speed levers off, and why | "
            "packing |\n|---|---|---|---|---|---|")
    return "\n".join([TABLE_START, head, *(family_row(n) for n in FAMILIES), TABLE_END])


def test_docs_family_table_is_what_the_rules_give():
    text = DOCS.read_text()
    assert TABLE_START in text and TABLE_END in text, "docs/training.md lost its family table"
    written = text[text.index(TABLE_START):text.index(TABLE_END) + len(TABLE_END)]
    assert written == family_table(), "docs/training.md's family table is stale: `python tests/train/test_families.py`"


if __name__ == "__main__":  # write the table into docs/training.md
    sys.path.insert(0, str(Path(__file__).parent))
    text = DOCS.read_text()
    start, end = text.index(TABLE_START), text.index(TABLE_END) + len(TABLE_END)
    DOCS.write_text(text[:start] + family_table() + text[end:])
    print(f"wrote the family table of {len(FAMILIES)} families into {DOCS}")
