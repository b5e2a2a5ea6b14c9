"""QLoRA fine-tuning speed and memory: `mens train` against TRL's SFTTrainer, side by side.

    .venv/bin/python bench/train_vs_trl.py --layers 4 --pairs 128            # quick cut
    .venv/bin/python bench/train_vs_trl.py --pairs 32                        # Qwen2.5-0.5B shape
    .venv/bin/python bench/train_vs_trl.py --device cuda --seq 2048 --runs trl,trl-liger,mens
    .venv/bin/python bench/train_vs_trl.py --model DIR --pairs 32 --runs trl,mens-nopack  # same steps?
    .venv/bin/python bench/train_vs_trl.py --pairs 32 --dtype fp32 --runs trl,mens  # a CPU without fast bf16

Every run trains the same random-weight Qwen2-shaped model (config from
`../shared/assets/model-configs/qwen2.5-0.5b.json`, optionally cut to `--layers`, real Qwen2
tokenizer) for one epoch on the same code pairs (Python standard-library functions with a
docstring: prompt "Write a Python function: <docstring first line>", completion = the source),
with the same hyper-parameters: QLoRA NF4 + double quantisation, bf16 compute (`--dtype fp32`:
fp32 compute and weights on both sides, for a CPU without fast bf16), LoRA r=16,
alpha=32, dropout 0.05 on all linear layers, seq 512, batch 4, lr 2e-4 cosine, loss on the
completion only. Runs:

* `trl`        SFTTrainer + PEFT + bitsandbytes as a user runs it (its defaults: gradient
               checkpointing on, no packing, conversational prompt/completion data);
* `trl-nogc`   the same, tuned for speed: gradient checkpointing off;
* `trl-liger`  the same plus Liger kernels (`use_liger_kernel=True`; GPU only);
* `mens`       `mens train` (the CLI, a YAML config with the same values);
* `mens-nopack` the same with `--no-packing`: one pair a row, so the same optimizer steps as
               TRL and losses that compare step for step (packing fills rows of `--seq` tokens,
               fewer and bigger steps: the tokens/s win of packing, not an equal-loss figure).

Each run is its own subprocess, so peak memory is per run: max RSS from `os.wait4`'s rusage of
that child (and `torch.cuda.max_memory_reserved` on CUDA). Pairs are kept only when the whole
chat-formatted conversation fits in `--seq`, so every run supervises exactly the same tokens
and tokens/s compare like for like. TRL visits the pairs in mens's order (its sampler
sequential over the rows in `mens.train.data.epoch_order`'s order), so `trl` and `mens-nopack`
train on the same batches step for step: a final loss is one batch's loss, and with each side
shuffling its own way they were different batches. Prints a table, the step losses, and writes
`--json`.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import platform
import random
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ASSETS = REPO.parent / "shared" / "assets"
if not ASSETS.is_dir() and (REPO / ".assets").is_dir():  # on the GPU machine: scripts/gpu_prepare's copy
    ASSETS = REPO / ".assets"
CONFIG = ASSETS / "model-configs" / "qwen2.5-0.5b.json"
TOKENIZER = ASSETS / "qwen2-tokenizer"
PYTHON = sys.executable

HYPER = {"lora_r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "lr": 2e-4, "warmup_steps": 2,
         "weight_decay": 0.0, "max_grad_norm": 1.0, "epochs": 1, "grad_accum": 1}
RUNS = ("trl", "trl-nogc", "trl-liger", "trl-tcmalloc", "mens", "mens-glibc", "mens-whole", "mens-nopack")
# trl-tcmalloc: TRL defaults with tcmalloc preloaded, as mens runs (how much is the allocator alone?)
# mens-glibc:   mens on the system malloc (MENS_ALLOCATOR=system)
# mens-whole:   mens with --tokens-per-pass seq x batch (each micro-batch in one pass: more memory)
# mens-nopack:  mens with --no-packing (TRL's step count: losses compare at equal steps and tokens)


# ---------------------------------------------------------------- shared inputs

def stdlib_pairs(tokenizer, seq: int, n: int, seed: int) -> list[dict]:
    """Functions with a docstring from the standard library, as prompt/completion pairs whose
    chat-formatted conversation fits in `seq` tokens; a seeded sample of `n`."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found: list[dict] = []
    for path in sorted(root.glob("*.py")):
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            doc = ast.get_docstring(node)
            code = ast.get_source_segment(source, node)
            if not doc or not code or len(code) < 200:
                continue
            first = doc.strip().splitlines()[0].strip()
            if len(first) < 12:
                continue
            found.append({"prompt": f"Write a Python function: {first}",
                          "response": textwrap.dedent(" " * node.col_offset + code),
                          "source": f"{path.name}:{node.lineno}"})
    random.Random(seed).shuffle(found)
    pairs = []
    for pair in found:
        prompt_ids, full_ids = _chat_ids(tokenizer, pair)
        if len(full_ids) <= seq:
            pair["supervised_tokens"] = len(full_ids) - len(prompt_ids)
            pair["tokens"] = len(full_ids)
            pairs.append(pair)
        if len(pairs) == n:
            break
    return pairs


def _chat_ids(tokenizer, pair: dict) -> tuple[list[int], list[int]]:
    user = [{"role": "user", "content": pair["prompt"]}]
    prompt = tokenizer.apply_chat_template(user, add_generation_prompt=True, tokenize=False)
    full = tokenizer.apply_chat_template(user + [{"role": "assistant", "content": pair["response"]}],
                                         tokenize=False)
    return (tokenizer(prompt, add_special_tokens=False)["input_ids"],
            tokenizer(full, add_special_tokens=False)["input_ids"])


def build_model(out: Path, layers: int | None, seed: int) -> Path:
    """Random bf16 weights in the Qwen2.5-0.5B shape (cut to `layers`), saved with the tokenizer."""
    if (out / "config.json").is_file():
        return out
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    raw = json.loads(CONFIG.read_text())
    if layers:
        raw["num_hidden_layers"] = layers
    cfg = AutoConfig.for_model(raw.pop("model_type"), **{k: v for k, v in raw.items() if k != "architectures"})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    tmp = out.with_name(out.name + ".tmp")
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(TOKENIZER).save_pretrained(tmp)
    tmp.rename(out)
    return out


def prepare(args) -> dict:
    from transformers import AutoTokenizer

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    model_dir = Path(args.model) if args.model else build_model(
        work / f"qwen2.5-0.5b-{args.layers or 24}l-seed{args.seed}", args.layers, args.seed)
    tok = AutoTokenizer.from_pretrained(model_dir)
    pairs = stdlib_pairs(tok, args.seq, args.pairs, args.seed)
    if len(pairs) < args.pairs:
        sys.exit(f"only {len(pairs)} stdlib functions fit in --seq {args.seq}; lower --pairs")
    data_dir = work / (f"data-{args.pairs}-seq{args.seq}-seed{args.seed}" + (f"-{model_dir.name}" if args.model else ""))
    data_dir.mkdir(exist_ok=True)
    with open(data_dir / "train.jsonl", "w", encoding="utf-8") as fh:
        for p in pairs:
            fh.write(json.dumps({"prompt": p["prompt"], "response": p["response"], "source": p["source"]}) + "\n")
    return {"model_dir": str(model_dir), "data_dir": str(data_dir), "pairs": len(pairs),
            "supervised_tokens": sum(p["supervised_tokens"] for p in pairs),
            "tokens": sum(p["tokens"] for p in pairs), "seq": args.seq, "batch": args.batch,
            "device": args.device, "seed": args.seed, "hyper": HYPER, "dtype": args.dtype,
            "layers": json.loads((model_dir / "config.json").read_text()).get("num_hidden_layers")}


# ---------------------------------------------------------------- workers (one per subprocess)

def worker_trl(spec: dict, variant: str, out: Path) -> dict:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig
    from trl import SFTConfig, SFTTrainer

    t_start = time.perf_counter()
    on_cpu = spec["device"] == "cpu"
    tok = AutoTokenizer.from_pretrained(spec["model_dir"])
    rows = [json.loads(line) for line in open(Path(spec["data_dir"]) / "train.jsonl", encoding="utf-8")]
    rows = [rows[i] for i in mens_order(len(rows), spec["seed"])]  # mens's batches, see SAME_BATCHES
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": r["prompt"]}],
                             "completion": [{"role": "assistant", "content": r["response"]}]} for r in rows])
    bf16 = spec["dtype"] == "bf16"
    compute = torch.bfloat16 if bf16 else torch.float32
    bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                             bnb_4bit_compute_dtype=compute)
    model = AutoModelForCausalLM.from_pretrained(spec["model_dir"], quantization_config=bnb, dtype=compute,
                                                 device_map={"": "cpu" if on_cpu else 0})
    h = spec["hyper"]
    lora = LoraConfig(r=h["lora_r"], lora_alpha=h["lora_alpha"], lora_dropout=h["lora_dropout"],
                      target_modules="all-linear", task_type="CAUSAL_LM")
    args = SFTConfig(
        output_dir=str(out / "trl-out"), use_cpu=on_cpu, bf16=bf16, max_length=spec["seq"],
        per_device_train_batch_size=spec["batch"], gradient_accumulation_steps=h["grad_accum"],
        num_train_epochs=h["epochs"], learning_rate=h["lr"], lr_scheduler_type="cosine",
        warmup_steps=h["warmup_steps"], weight_decay=h["weight_decay"], max_grad_norm=h["max_grad_norm"],
        gradient_checkpointing=variant != "trl-nogc", use_liger_kernel=variant == "trl-liger",
        logging_steps=1, save_strategy="no", report_to="none", seed=spec["seed"], disable_tqdm=True,
        train_sampling_strategy="sequential")
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok, peft_config=lora)
    t0 = time.perf_counter()
    result = trainer.train()
    epoch_s = time.perf_counter() - t0
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    return {"epoch_s": epoch_s, "setup_s": t0 - t_start, "steps": trainer.state.global_step,
            "first_loss": losses[0] if losses else None, "final_loss": losses[-1] if losses else None,
            "train_loss": result.training_loss, "step_losses": losses, **_cuda_peak()}


def mens_order(n: int, seed: int) -> list[int]:
    """The order `mens train` visits n pairs in its first epoch (mens.train.data.epoch_order)."""
    sys.path.insert(0, str(REPO / "src"))
    from mens.train.data import epoch_order

    return epoch_order(n, seed, 0)


def _cuda_peak() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {}
    return {"cuda_peak_gb": torch.cuda.max_memory_reserved() / 1e9,
            "cuda_allocated_gb": torch.cuda.max_memory_allocated() / 1e9}


def mens_command(spec: dict, out: Path) -> list[str]:
    import yaml

    h = spec["hyper"]
    cfg = {"backend": "qlora", "device": spec["device"], "dtype": spec["dtype"],
           "seq_len": spec["seq"], "micro_batch": spec["batch"],
           "grad_accum": h["grad_accum"], "epochs": h["epochs"], "lr": h["lr"], "warmup_steps": h["warmup_steps"],
           "weight_decay": h["weight_decay"], "max_grad_norm": h["max_grad_norm"], "lora_r": h["lora_r"],
           "lora_alpha": h["lora_alpha"], "lora_dropout": h["lora_dropout"], "target_modules": "all-linear",
           "seed": spec["seed"], "val_split": 0.0, "eval_interval": 0, "save_interval": 0}
    cfg_path = out / "mens-run.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    return [PYTHON, "-m", "mens", "train", "--model", spec["model_dir"], "--data-dir", spec["data_dir"],
            "--output-dir", str(out / "mens-run"), "--config", str(cfg_path), "--force-restart"]


def read_mens_result(out: Path) -> dict:
    manifest = json.loads((out / "mens-run" / "training_manifest.json").read_text())
    res = manifest.get("results", {})
    events = [json.loads(line) for line in (out / "mens-run" / "telemetry.jsonl").read_text().splitlines()]
    return {"epoch_s": res.get("train_wall_s") or res.get("wall_time_s") or res.get("wall_s"),
            "steps": res.get("steps"), "final_loss": res.get("final_loss"),
            "step_losses": [e["loss"] for e in events if e.get("event") == "step"],
            "reported_supervised_tokens": manifest.get("data", {}).get("supervised_tokens"),
            "allocator": manifest.get("device", {}).get("allocator"),
            # the manifest's CUDA peak is max_memory_allocated in GiB; the peers' figures are in GB
            **({"cuda_allocated_gb": res["peak_memory_gb"] * 2**30 / 1e9}
               if manifest.get("device", {}).get("type") == "cuda" and res.get("peak_memory_gb") else {}),
            "mens_results": res}


# ---------------------------------------------------------------- driver

def run_one(name: str, spec_path: Path, out: Path, timeout: float) -> dict:
    """Run one peer in a fresh subprocess; its own max RSS comes from wait4's rusage."""
    run_dir = out / name
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = json.loads(spec_path.read_text())
    extra_env = {}
    if name.startswith("mens"):
        cmd = mens_command(spec, run_dir)
        if name == "mens-whole":  # a pass as big as the micro-batch: the whole micro-batch in one pass
            cmd += ["--tokens-per-pass", str(spec["seq"] * spec["batch"])]
        if name == "mens-nopack":
            cmd += ["--no-packing"]
        if name == "mens-glibc":
            extra_env["MENS_ALLOCATOR"] = "system"
    else:
        cmd = [PYTHON, __file__, "--worker", name, "--spec", str(spec_path), "--out", str(run_dir)]
        if name == "trl-tcmalloc":
            sys.path.insert(0, str(REPO / "src"))
            from mens.train.allocator import find_library

            lib = find_library("tcmalloc")
            if lib is None:
                return {"run": name, "rc": 2, "error": "tcmalloc is not installed (apt install libtcmalloc-minimal4)"}
            extra_env["LD_PRELOAD"] = lib
    env = {**os.environ, **extra_env, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    log = open(run_dir / "log.txt", "w")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
    deadline = t0 + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            _, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.2)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    log.close()
    # CPU seconds (user + system) are reported too: on a shared machine they are steadier than
    # wall time, which other load stretches.
    row = {"run": name, "rc": proc.returncode, "process_s": wall, "peak_rss_gb": usage.ru_maxrss * 1024 / 1e9,
           "cpu_s": usage.ru_utime + usage.ru_stime}
    if proc.returncode != 0:
        row["error"] = (run_dir / "log.txt").read_text()[-2000:]
        return row
    row.update(read_mens_result(run_dir) if name.startswith("mens") else json.loads((run_dir / "result.json").read_text()))
    if not row.get("epoch_s"):
        row["epoch_s"] = wall
    # Each run is credited with the tokens it supervised: mens does not train on the newline after
    # <|im_end|> that TRL's completion mask includes (one token per pair).
    row["tokens_per_s"] = (row.get("reported_supervised_tokens") or spec["supervised_tokens"]) / row["epoch_s"]
    return row


def table(rows: list[dict], spec: dict) -> str:
    # On CUDA both sides report the caching allocator's peak of allocated memory (mens's manifest
    # records torch.cuda.max_memory_allocated, in GiB); reserved memory has no mens counterpart.
    mem_key = "cuda_allocated_gb" if spec["device"] == "cuda" else "peak_rss_gb"
    peers = [r for r in rows if not r["run"].startswith("mens") and r.get("rc") == 0]
    head = (f"{'run':<10} {'epoch s':>9} {'process s':>9} {'cpu s':>8} {'sup tok/s':>10} {'peak GB':>8} "
            f"{'final loss':>10} {'mean loss':>9}")
    for p in peers:
        head += f" {'vs ' + p['run']:>20}"
    lines = [head]
    for r in rows:
        if r.get("rc") != 0:
            lines.append(f"{r['run']:<10} FAILED rc={r['rc']} (see its log.txt)")
            continue
        loss, steps = r.get("final_loss"), r.get("step_losses") or []
        mean = round(sum(steps) / len(steps), 3) if steps else None
        line = (f"{r['run']:<10} {r['epoch_s']:>9.1f} {r['process_s']:>9.1f} {r['cpu_s']:>8.1f} {r['tokens_per_s']:>10.1f} "
                f"{r.get(mem_key, 0):>8.2f} {loss if loss is None else round(loss, 3)!s:>10} {mean!s:>9}")
        for p in peers:
            line += (f" {r['tokens_per_s'] / p['tokens_per_s']:>6.2f}x {p['cpu_s'] / r['cpu_s']:>5.2f}c"
                     f" {r.get(mem_key, 0) / p[mem_key]:>5.2f}m")
        lines.append(line)
    lines.append("(vs PEER: x = tokens/s ratio, c = CPU-seconds ratio (peer / this), m = peak-memory ratio; "
                 "peak = max RSS"
                 + (", CUDA max allocated)" if spec["device"] == "cuda" else ")")
                 + "; mean loss = the mean of the step losses")
    for r in rows:  # the trajectories, which is where like-for-like runs agree or part
        if r.get("rc") == 0 and r.get("step_losses"):
            lines.append(f"  {r['run']} step losses: {' '.join(f'{x:.3f}' for x in r['step_losses'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=None, help="cut the 24-layer shape to N layers (default: full)")
    ap.add_argument("--model", default=None, help="train this model directory instead (a tiny one checks on a CPU, "
                    "in minutes, that TRL and mens-nopack train the same steps)")
    ap.add_argument("--pairs", type=int, default=32)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--runs", default=None, help=f"comma list from {','.join(RUNS)} "
                    "(default: trl,trl-nogc,trl-tcmalloc,mens on CPU; trl,trl-nogc,trl-liger,mens,mens-nopack on CUDA)")
    ap.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16",
                    help="compute dtype on both sides (default bf16; fp32 where the CPU has no fast bf16: "
                    "`mens probe` says, and mens's own default picks fp32 there)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=str(REPO / "runs" / "bench-train-vs-trl"))
    ap.add_argument("--json", default=None, help="where to write the results (default WORKDIR/results-*.json)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        out = Path(args.out)
        result = worker_trl(json.loads(Path(args.spec).read_text()), args.worker, out)
        (out / "result.json").write_text(json.dumps(result, indent=2))
        return 0

    runs = (args.runs or ("trl,trl-nogc,trl-liger,mens,mens-nopack" if args.device == "cuda" else "trl,trl-nogc,trl-tcmalloc,mens")).split(",")
    unknown = [r for r in runs if r not in RUNS]
    if unknown:
        ap.error(f"unknown run(s) {unknown}; choose from {RUNS}")
    if "trl-liger" in runs and importlib.util.find_spec("liger_kernel") is None:
        print("train_vs_trl: trl-liger skipped: liger-kernel is not installed (pip install -e '.[bench]' "
              "on the GPU machine; its kernels are Triton, CUDA only)", file=sys.stderr)
        runs = [r for r in runs if r != "trl-liger"]
    spec = prepare(args)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.workdir) / f"run-{stamp}-{spec['layers']}l-{args.pairs}p"
    out.mkdir(parents=True)
    spec_path = out / "spec.json"
    spec_path.write_text(json.dumps(spec, indent=2))
    print(f"model {spec['layers']} layers, {spec['pairs']} pairs, {spec['supervised_tokens']} supervised "
          f"tokens of {spec['tokens']}, seq {args.seq}, batch {args.batch}, device {args.device}, {args.dtype}", flush=True)
    rows = []
    for name in runs:
        row = run_one(name, spec_path, out, args.timeout)
        rows.append(row)
        state = "ok" if row["rc"] == 0 else f"FAILED rc={row['rc']}"
        print(f"  {name}: {state}, {row.get('epoch_s', 0):.1f} s, {row['peak_rss_gb']:.2f} GB RSS", flush=True)
    print(table(rows, spec))
    report = {"spec": spec, "runs": rows, "host": {"platform": platform.platform(), "cpus": os.cpu_count(),
                                                     "python": platform.python_version()},
              "command": " ".join([Path(PYTHON).name, "bench/train_vs_trl.py", *(argv or sys.argv[1:])])}
    json_path = Path(args.json) if args.json else out / "results.json"
    json_path.write_text(json.dumps(report, indent=2, default=str))
    print(f"results: {json_path}")
    return 0 if all(r["rc"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
