"""mens's scratch training path against Hugging Face `Trainer` on the same GPT-2 config, data,
tokenizer and sequence length: supervised tokens/s and held-out loss after (about) equal tokens.

    .venv/bin/python bench/scratch_vs_hf.py [--pairs 2000] [--steps 400] [--rows 4] [--repeats 2] [--whole-machine]

Four runs, each in a fresh process, one thread (OMP_NUM_THREADS=1), alternated `--repeats` times
(mens, Trainer, mens bf16, Trainer bf16, then again) so that machine load falls on all alike:

* `mens`: `mens.train.loop.train` with its defaults (fp32 on a CPU, packed rows, log every step);
* `mens-bf16`: the same with `dtype: bf16-mixed` (fp32 weights and optimizer, bf16 autocast);
* `hf`: `Trainer` as a user would run it: defaults (fp32, fused AdamW), batches padded to their
  longest example (its usual collator), the same schedule;
* `hf-bf16`: the same with `bf16=True` (its CPU autocast, fp32 weights).

All: the quickstart's base shape (GPT-2, 4 layers x 128, 4 heads, FFN 512, 512 positions), the
BPE of 1,024 ids mens learns from the data (the HF runs load the very tokenizer the first mens run
saved), the same chat-formatted examples with loss on the assistant tokens only
(`mens.train.data.build_examples`, 256 ids), AdamW at lr 3e-3, 30 warm-up steps, cosine, seed 0.
mens packs examples into rows (restarting position ids, no attention between them) and runs the
head only at supervised positions; `Trainer` computes logits everywhere. The HF runs take as
many steps as they need to see the mens run's supervised-token count.

`--whole-machine` instead runs each side on every core, as a user would by default: `Trainer`
(fp32 and bf16) with torch's default threads, mens `bf16-mixed` with one rank per core (`--nproc`,
rows / cores a rank, so the same rows a step), compared on wall time (the mens clock: its
telemetry's `train_start` to the last step).

Clocks cover the training loop only (mens: from the end of its set-up to the last step; HF: from
`on_train_begin` to `on_train_end`), as process CPU time (what the comparison uses: robust to
other jobs on a shared machine) and wall time. tokens/s counts supervised tokens. The held-out
loss is one function for all: mean cross-entropy per supervised token on held-out pairs. Writes
bench/results/scratch_vs_hf.json; the table is its `median` per run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

SHAPE = dict(scratch_shape="tiny", scratch_layers=4, scratch_positions=512, scratch_vocab=1024)
LR, WARMUP, SEQ = 3e-3, 30, 256
RUNS = ("mens", "hf", "mens-bf16", "hf-bf16")
# --whole-machine: each side as a user runs it on all the machine's cores: Trainer (and its bf16)
# with torch's default threads, mens bf16-mixed with one rank per core (--nproc), the same rows a
# step (rows / cores per rank); compared on wall time, since both use every core.
WHOLE = ("mens-bf16-nproc", "hf-threads", "hf-bf16-threads")
CORES = os.cpu_count() or 1
EXTRA = json.loads(os.environ.get("SVH_EXTRA", "{}"))  # experiment: extra mens train fields


def heldout_loss(model, examples) -> float:
    """Mean cross-entropy per supervised token of `examples`, one at a time (no padding), fp32."""
    import torch

    model.eval()
    total, n = 0.0, 0
    with torch.no_grad():
        for ex in examples:
            ids = torch.tensor([ex.input_ids])
            labels = torch.tensor([ex.labels])
            logits = model(input_ids=ids).logits[0, :-1].float()
            target = labels[0, 1:]
            keep = target != -100
            total += float(torch.nn.functional.cross_entropy(logits[keep], target[keep], reduction="sum"))
            n += int(keep.sum())
    return total / max(n, 1)


class Clock:
    """Process CPU time and wall time between `start()` and `stop()`."""

    def start(self) -> None:
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()

    def stop(self) -> None:
        self.cpu, self.wall = time.process_time() - self.cpu0, time.perf_counter() - self.wall0


def run_mens(data_dir: Path, out: Path, steps: int, rows: int, bf16: bool) -> dict:
    import mens.train.loop as loop
    from mens.train.config import resolve_config

    cfg = resolve_config({"backend": "scratch", "preset": "tiny", **SHAPE, "data_dir": str(data_dir),
                          "output_dir": str(out), "max_steps": steps, "micro_batch": rows, "seq_len": SEQ,
                          "lr": LR, "warmup_steps": WARMUP, "eval_interval": 0, "save_interval": 0,
                          "seed": 0, "val_split": 0.0, **({"dtype": "bf16-mixed"} if bf16 else {}), **EXTRA})
    clock, prepare = Clock(), loop.prepare

    def timed_prepare(*args, **kwargs):  # the loop starts when prepare() returns
        session = prepare(*args, **kwargs)
        clock.start()
        return session

    def on_step(step: int, loss: float) -> None:
        if step == steps:
            clock.stop()

    loop.prepare = timed_prepare
    outcome = loop.train(cfg, force_restart=True, on_step=on_step)
    res = json.loads((out / "training_manifest.json").read_text())["results"]
    return {"steps": outcome.steps, "supervised_tokens": res["supervised_tokens"], "cpu_s": clock.cpu,
            "wall_s": clock.wall, "model": outcome.model}


def run_mens_ranks(data_dir: Path, out: Path, steps: int, rows: int) -> dict:
    """mens bf16-mixed in one rank per core (mens.train.launch, as `mens train --nproc`); the loop's
    clock from the telemetry rank 0 writes: `train_start` (the end of set-up) to the last step."""
    from transformers import AutoModelForCausalLM

    from mens.train.config import resolve_config
    from mens.train.launch import launch

    if rows % CORES:
        raise SystemExit(f"--whole-machine needs --rows divisible by the {CORES} cores")
    cfg = resolve_config({"backend": "scratch", "preset": "tiny", **SHAPE, "data_dir": str(data_dir),
                          "output_dir": str(out), "max_steps": steps, "micro_batch": rows // CORES, "seq_len": SEQ,
                          "lr": LR, "warmup_steps": WARMUP, "eval_interval": 0, "save_interval": 0, "log_interval": 1,
                          "seed": 0, "val_split": 0.0, "dtype": "bf16-mixed", "nproc": CORES, **EXTRA})
    if launch(cfg, force_restart=True):
        raise SystemExit("the mens ranks failed")
    events = [json.loads(line) for line in (out / "telemetry.jsonl").read_text().splitlines()]
    start = next(e["ts"] for e in events if e["event"] == "train_start")
    end = next(e["ts"] for e in events if e["event"] == "step" and e["step"] == steps)
    res = json.loads((out / "training_manifest.json").read_text())["results"]
    return {"steps": steps, "supervised_tokens": res["supervised_tokens"], "cpu_s": float("nan"), "wall_s": end - start,
            "model": AutoModelForCausalLM.from_pretrained(out)}


def run_hf(tokenizer, train_examples, supervised_target: int, rows: int, out: Path, bf16: bool) -> dict:
    import torch
    from transformers import GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments

    from mens.train.scratch import gpt2_config, scratch_shape

    shape = scratch_shape("tiny", n_layer=4, n_positions=512)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = GPT2LMHeadModel(gpt2_config(shape, tokenizer))
    per_example = sum(ex.n_supervised for ex in train_examples) / len(train_examples)
    steps = max(1, round(supervised_target / (rows * per_example)))
    data = [{"input_ids": ex.input_ids, "labels": ex.labels} for ex in train_examples]
    pad, collated = tokenizer.pad_token_id, []

    def collate(batch):
        width = max(len(b["input_ids"]) for b in batch)
        ids = torch.full((len(batch), width), pad)
        labels = torch.full((len(batch), width), -100)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, b in enumerate(batch):
            n = len(b["input_ids"])
            ids[i, :n], labels[i, :n], mask[i, :n] = torch.tensor(b["input_ids"]), torch.tensor(b["labels"]), 1
        collated.append(int((labels[:, 1:] != -100).sum()))  # the batch's supervised tokens
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    clock = Clock()

    class Timer(TrainerCallback):
        def on_train_begin(self, *args, **kwargs):
            clock.start()

        def on_train_end(self, *args, **kwargs):
            clock.stop()

    args = TrainingArguments(output_dir=str(out), per_device_train_batch_size=rows, max_steps=steps,
                             learning_rate=LR, warmup_steps=WARMUP, lr_scheduler_type="cosine", weight_decay=0.0,
                             logging_steps=50, save_strategy="no", report_to=[], use_cpu=True, seed=0, bf16=bf16,
                             dataloader_num_workers=0, disable_tqdm=True, remove_unused_columns=False)
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collate, callbacks=[Timer()])
    trainer.train()
    # The data loader reads one batch ahead: the first `steps` batches are the trained ones.
    return {"steps": steps, "supervised_tokens": sum(collated[:steps]), "cpu_s": clock.cpu, "wall_s": clock.wall,
            "model": model}


def one(name: str, work: Path, steps: int, rows: int) -> dict:
    """One run in this process; the mens tokenizer and the examples come from `work`."""
    import torch
    from transformers import AutoTokenizer

    from mens.records import Pair
    from mens.train.data import build_examples

    if not name.endswith(("-threads", "-nproc")):
        torch.set_num_threads(1)

    def pairs(file: str) -> list:
        return [Pair.from_dict(json.loads(line)) for line in (work / file).read_text().splitlines()]

    if name == "mens-bf16-nproc":
        r = run_mens_ranks(work / "data", work / name, steps, rows)
        tokenizer = AutoTokenizer.from_pretrained(work / name)
    elif name.startswith("mens"):
        r = run_mens(work / "data", work / name, steps, rows, bf16=name.endswith("bf16"))
        tokenizer = AutoTokenizer.from_pretrained(work / name)
    else:
        tokenizer = AutoTokenizer.from_pretrained(work / "mens")
        train_examples, _ = build_examples(pairs("data/train.jsonl"), tokenizer, SEQ)
        target = json.loads((work / "mens.target").read_text())
        r = run_hf(tokenizer, train_examples, target, rows, work / name, bf16="bf16" in name)
    test_examples, _ = build_examples(pairs("heldout.jsonl"), tokenizer, SEQ)
    r["heldout_loss"] = round(heldout_loss(r.pop("model"), test_examples), 4)
    r["tokens_per_cpu_s"] = round(r["supervised_tokens"] / r["cpu_s"], 1) if r["cpu_s"] == r["cpu_s"] else None
    r["tokens_per_wall_s"] = round(r["supervised_tokens"] / r["wall_s"], 1)
    r["cpu_s"], r["wall_s"] = round(r["cpu_s"], 2), round(r["wall_s"], 2)
    r["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return r


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2000, help="synthetic pairs to train on (2000)")
    ap.add_argument("--heldout", type=int, default=100, help="held-out synthetic pairs for the loss (100)")
    ap.add_argument("--steps", type=int, default=400, help="mens optimizer steps (400)")
    ap.add_argument("--rows", type=int, default=4, help="rows per step, all runs (4)")
    ap.add_argument("--repeats", type=int, default=2, help="times each run is repeated, alternated (2)")
    ap.add_argument("--runs", default=",".join(RUNS), help=f"which runs ({','.join(RUNS)})")
    ap.add_argument("--whole-machine", action="store_true",
                    help=f"instead: every core, as each side runs by default ({','.join(WHOLE)}; wall time)")
    ap.add_argument("--json-out", type=Path, help="(default bench/results/scratch_vs_hf.json, "
                    "or scratch_vs_hf_whole_machine.json)")
    ap.add_argument("--one", help=argparse.SUPPRESS)   # internal: NAME:WORKDIR, one run in this process
    args = ap.parse_args(argv)

    args.json_out = args.json_out or REPO / "bench" / "results" / \
        ("scratch_vs_hf_whole_machine.json" if args.whole_machine else "scratch_vs_hf.json")
    if args.one:
        name, work = args.one.split(":", 1)
        print("RESULT " + json.dumps(one(name, Path(work), args.steps, args.rows)), flush=True)
        return 0

    from mens.corpus.synth.generate import generate

    work = Path(tempfile.mkdtemp(prefix="scratch-vs-hf."))
    (work / "data").mkdir()
    for file, n, seed in (("data/train.jsonl", args.pairs, 0), ("heldout.jsonl", args.heldout, 1)):
        with (work / file).open("w") as fh:
            for p in generate(n, seed=seed):
                fh.write(json.dumps(p.to_dict()) + "\n")
    one_thread = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    every_core = {k: v for k, v in one_thread.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    wanted = list(WHOLE) if args.whole_machine else [r for r in RUNS if r in args.runs.split(",")]
    if any(r.startswith("hf") for r in wanted) and "mens" not in wanted:
        wanted.insert(0, "mens")  # the HF runs use its tokenizer and token count
    results: dict[str, list[dict]] = {name: [] for name in wanted}
    for repeat in range(args.repeats):
        for name in wanted:
            cmd = [sys.executable, __file__, "--one", f"{name}:{work}", "--steps", str(args.steps),
                   "--rows", str(args.rows)]
            env = every_core if name.endswith(("-threads", "-nproc")) else one_thread
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode or not lines:
                sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
                return 1
            r = json.loads(lines[-1][len("RESULT "):])
            if name == "mens" and repeat == 0:
                (work / "mens.target").write_text(json.dumps(r["supervised_tokens"]))
            results[name].append(r)
            print(f"[{repeat + 1}/{args.repeats}] {name:15s} steps {r['steps']:4d}  tokens {r['supervised_tokens']:7d}  "
                  f"wall {r['wall_s']:6.1f}s  {r['tokens_per_cpu_s'] or float('nan'):7.0f} tok/cpu-s  "
                  f"{r['tokens_per_wall_s']:7.0f} tok/wall-s  held-out loss {r['heldout_loss']:.4f}  "
                  f"load {r['load_average'][0]}", flush=True)

    median = {name: {key: statistics.median(r[key] for r in runs) if runs[0][key] is not None else None
                     for key in ("supervised_tokens", "cpu_s", "wall_s", "tokens_per_cpu_s", "tokens_per_wall_s",
                                 "heldout_loss")} | {"steps": runs[0]["steps"]}
              for name, runs in results.items()}
    clock = "tokens_per_wall_s" if args.whole_machine else "tokens_per_cpu_s"
    ours = ("mens-bf16-nproc",) if args.whole_machine else ("mens", "mens-bf16")
    peers = ("hf-threads", "hf-bf16-threads") if args.whole_machine else ("hf", "hf-bf16")
    ratios = {f"{a}/{b}": round(median[a][clock] / median[b][clock], 2)
              for a in ours for b in peers if a in median and b in median}
    result = {"config": {"shape": SHAPE, "seq_len": SEQ, "lr": LR, "warmup": WARMUP, "rows": args.rows,
                         "pairs": args.pairs, "heldout": args.heldout, "steps": args.steps,
                         "threads": CORES if args.whole_machine else 1, "whole_machine": args.whole_machine,
                         "repeats": args.repeats, "device": "cpu", "extra": EXTRA},
              "median": median, f"{clock}_ratios": ratios, "runs": results}
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"ratios ({clock}):", ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
