"""mens's scratch training path against Hugging Face `Trainer` on the same GPT-2 config, data,
tokenizer and sequence length: supervised tokens/s and held-out loss after (about) equal tokens.

    .venv/bin/python bench/scratch_vs_hf.py [--pairs 2000] [--steps 300] [--rows 4] [--threads 1]

Both sides: the quickstart's base shape (4 layers x 128, 4 heads, FFN 512), the BPE of 1,024 ids
mens learns from the data (the HF side loads the very tokenizer the mens run saved), the same
chat-formatted examples with loss on the assistant tokens only (`mens.train.data.build_examples`,
256 ids), AdamW at lr 3e-3 with 30 warm-up steps and a cosine schedule, seed 0, fp32, CPU.
What differs is what each does with them: mens packs examples into rows (restarting position
ids, no attention between them) and runs the head only at supervised positions; `Trainer` pads
each batch to its longest example (its usual collator) and computes logits everywhere. The HF
run takes as many steps as it needs to see the mens run's supervised-token count. tokens/s is
over the training loop (mens: its own clock, after set-up; HF: `trainer.train()`). The loss
figure is one function for both: mean cross-entropy per supervised token on held-out pairs.
Writes bench/results/scratch_vs_hf.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

SHAPE = dict(scratch_shape="tiny", scratch_layers=4, scratch_positions=512, scratch_vocab=1024)
LR, WARMUP, SEQ = 3e-3, 30, 256
EXTRA = json.loads(os.environ.get("SVH_EXTRA", "{}"))  # experiment: extra mens train fields


def heldout_loss(model, examples) -> float:
    """Mean cross-entropy per supervised token of `examples`, one at a time (no padding)."""
    import torch

    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for ex in examples:
            ids = torch.tensor([ex.input_ids])
            labels = torch.tensor([ex.labels])
            logits = model(input_ids=ids).logits[0, :-1]
            target = labels[0, 1:]
            keep = target != -100
            total += float(torch.nn.functional.cross_entropy(logits[keep], target[keep], reduction="sum"))
            n += int(keep.sum())
    return total / max(n, 1)


def run_mens(data_dir: Path, out: Path, steps: int, rows: int) -> dict:
    from mens.train.config import resolve_config
    from mens.train.loop import train

    cfg = resolve_config({"backend": "scratch", "preset": "tiny", **SHAPE, "data_dir": str(data_dir),
                          "output_dir": str(out), "max_steps": steps, "micro_batch": rows, "seq_len": SEQ,
                          "lr": LR, "warmup_steps": WARMUP, "eval_interval": 0, "save_interval": 0,
                          "log_interval": 50, "seed": 0, "val_split": 0.0, **EXTRA})
    start = time.perf_counter()
    outcome = train(cfg, force_restart=True)
    wall = time.perf_counter() - start
    manifest = json.loads((out / "training_manifest.json").read_text())
    res = manifest["results"]
    return {"steps": outcome.steps, "supervised_tokens": res["supervised_tokens"], "wall_s": round(wall, 1),
            "loop_s": res["wall_time_s"], "model": outcome.model}


def run_hf(tokenizer, train_examples, supervised_target: int, rows: int, out: Path) -> dict:
    import torch
    from transformers import GPT2LMHeadModel, Trainer, TrainingArguments

    from mens.train.scratch import gpt2_config, scratch_shape

    shape = scratch_shape("tiny", n_layer=4, n_positions=512)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(gpt2_config(shape, tokenizer))
    per_example = sum(ex.n_supervised for ex in train_examples) / len(train_examples)
    steps = max(1, round(supervised_target / (rows * per_example)))
    data = [{"input_ids": ex.input_ids, "labels": ex.labels} for ex in train_examples]
    pad = tokenizer.pad_token_id

    def collate(batch):
        width = max(len(b["input_ids"]) for b in batch)
        ids = torch.full((len(batch), width), pad)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, b in enumerate(batch):
            n = len(b["input_ids"])
            ids[i, :n], labels[i, :n], mask[i, :n] = torch.tensor(b["input_ids"]), torch.tensor(b["labels"]), 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    args = TrainingArguments(output_dir=str(out), per_device_train_batch_size=rows, max_steps=steps,
                             learning_rate=LR, warmup_steps=WARMUP, lr_scheduler_type="cosine", weight_decay=0.0,
                             logging_steps=50, save_strategy="no", report_to=[], use_cpu=True, seed=0,
                             dataloader_num_workers=0, disable_tqdm=True, remove_unused_columns=False)
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collate)
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    return {"steps": steps, "supervised_tokens": round(steps * rows * per_example), "wall_s": round(wall, 1),
            "model": model}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2000, help="synthetic pairs to train on (2000)")
    ap.add_argument("--heldout", type=int, default=100, help="held-out synthetic pairs for the loss (100)")
    ap.add_argument("--steps", type=int, default=300, help="mens optimizer steps (300)")
    ap.add_argument("--rows", type=int, default=4, help="rows per step, both sides (4)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1)")
    ap.add_argument("--json-out", type=Path, default=REPO / "bench" / "results" / "scratch_vs_hf.json")
    args = ap.parse_args(argv)

    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch
    from transformers import AutoTokenizer

    from mens.corpus.synth.generate import generate
    from mens.train.data import build_examples

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="scratch-vs-hf."))
    pairs = list(generate(args.pairs, seed=0))
    heldout = list(generate(args.heldout, seed=1))
    (tmp / "data").mkdir()
    with (tmp / "data" / "train.jsonl").open("w") as fh:
        for p in pairs:
            fh.write(json.dumps(p.to_dict()) + "\n")

    mens = run_mens(tmp / "data", tmp / "mens", args.steps, args.rows)
    tokenizer = AutoTokenizer.from_pretrained(tmp / "mens")
    train_examples, _ = build_examples(pairs, tokenizer, SEQ)
    test_examples, _ = build_examples(heldout, tokenizer, SEQ)
    hf = run_hf(tokenizer, train_examples, mens["supervised_tokens"], args.rows, tmp / "hf")

    result = {"config": {"shape": SHAPE, "seq_len": SEQ, "lr": LR, "warmup": WARMUP, "rows": args.rows,
                         "pairs": args.pairs, "threads": args.threads, "device": "cpu"}}
    for name, r in (("mens", mens), ("hf_trainer", hf)):
        model = r.pop("model")
        # mens: the loop's own clock (after set-up: BPE, data, first-forward check); HF: trainer.train().
        r["tokens_per_s"] = round(r["supervised_tokens"] / r.get("loop_s", r["wall_s"]), 1)
        r["heldout_loss"] = round(heldout_loss(model, test_examples), 4)
        result[name] = r
    result["speedup_tokens_per_s"] = round(result["mens"]["tokens_per_s"] / result["hf_trainer"]["tokens_per_s"], 2)
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    for name in ("mens", "hf_trainer"):
        r = result[name]
        print(f"{name:11s} steps {r['steps']:5d}  supervised tokens {r['supervised_tokens']:8d}  "
              f"wall {r['wall_s']:7.1f}s  {r['tokens_per_s']:8.1f} tok/s  held-out loss {r['heldout_loss']:.4f}")
    print(f"speed-up {result['speedup_tokens_per_s']}x  (load average {result['load_average']})")
    return 0 if math.isfinite(result["mens"]["heldout_loss"]) else 1


if __name__ == "__main__":
    sys.exit(main())
