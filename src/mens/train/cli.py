"""`mens train`, `mens probe`, `mens status`: thin typed wrappers over mens.train modules.
Nothing heavy is imported at module top, so `mens --help` stays fast."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from mens.progress import say

# flag → TrainConfig field, for the flags whose names differ only by dashes
_PASS = ("model", "data_dir", "output_dir", "backend", "preset", "device", "dtype", "distributed", "lora_r",
         "lora_alpha", "lora_dropout", "target_modules", "dora", "lr", "warmup_steps", "weight_decay", "max_grad_norm",
         "epochs", "max_steps", "seq_len", "micro_batch", "grad_accum", "seed", "packing", "ce_last_k",
         "min_rating", "system_prompt", "lenient", "val_split", "raw_text", "scratch_shape", "scratch_layers",
         "scratch_heads", "scratch_width", "scratch_ffn", "scratch_positions", "scratch_dropout",
         "log_interval", "eval_interval", "save_interval", "keep_checkpoints", "bench", "bench_every", "bench_limit", "gradient_checkpointing",
         "loss_chunk", "tokens_per_pass", "report_to", "upstream_model_id", "license", "attribution_required")


def register(sub) -> None:
    p = sub.add_parser("train", help="fine-tune a model (QLoRA/LoRA/full) or train one from scratch",
                       description="Fine-tune any Hugging Face causal LM on DIR/train.jsonl, or train a small "
                       "model from scratch. Flags override --config YAML, which overrides --preset, which "
                       "overrides the preset `mens probe` recommends. Rerunning on an existing run dir resumes.",
                       epilog="Environment: MENS_ALLOCATOR=auto|tcmalloc|jemalloc|system picks the malloc a "
                       "training process re-executes itself on (auto: tcmalloc, then jemalloc, when installed; "
                       "about 2x faster CPU training than glibc's). Under torchrun the same command trains "
                       "data-parallel (--distributed). See docs/training.md.")
    g = p.add_argument_group("what to train")
    g.add_argument("--model", help="base model: a local HF model directory or a hub id")
    g.add_argument("--data-dir", help="directory with train.jsonl (and optionally val.jsonl)")
    g.add_argument("--output-dir", "-o", help="run directory (adapter, manifest, telemetry, checkpoints)")
    g.add_argument("--config", help="YAML file of TrainConfig fields")
    g.add_argument("--preset", help="tiny, cpu, 8g, 16g, 24g, 80g (default: what `mens probe` recommends)")
    g.add_argument("--backend", choices=("qlora", "lora", "full", "scratch"), help="default qlora")
    g.add_argument("--device", choices=("auto", "cpu", "cuda", "mps"))
    g.add_argument("--dtype", choices=("auto", "bf16", "fp16", "fp32"))
    g.add_argument("--distributed", choices=("auto", "ddp", "fsdp"),
                   help="under torchrun: ddp (each rank holds the model) or fsdp (weights, gradients and "
                   "optimizer state sharded across ranks); default auto = ddp")
    g = p.add_argument_group("adapters")
    g.add_argument("--lora-r", type=int)
    g.add_argument("--lora-alpha", type=int)
    g.add_argument("--lora-dropout", type=float)
    g.add_argument("--target-modules", help="comma-separated module names (default all-linear)")
    g.add_argument("--dora", action="store_true", default=None, help="DoRA instead of plain LoRA")
    g = p.add_argument_group("optimisation")
    g.add_argument("--lr", type=float)
    g.add_argument("--warmup-steps", type=int)
    g.add_argument("--weight-decay", type=float)
    g.add_argument("--max-grad-norm", type=float)
    g.add_argument("--epochs", type=float)
    g.add_argument("--max-steps", type=int, help="optimizer steps (wins over --epochs)")
    g.add_argument("--seq-len", type=int)
    g.add_argument("--micro-batch", type=int, help="packed rows per micro-batch")
    g.add_argument("--grad-accum", type=int, help="micro-batches per optimizer step (per process)")
    g.add_argument("--seed", type=int)
    g.add_argument("--gradient-checkpointing", choices=("auto", "on", "off"))
    g.add_argument("--loss-chunk", type=int, help="rows per LM-head/cross-entropy chunk")
    g.add_argument("--tokens-per-pass", type=int, help="tokens per forward/backward pass (a micro-batch may "
                   "run in row groups; same gradients, less activation memory)")
    g = p.add_argument_group("data")
    g.add_argument("--no-packing", dest="packing", action="store_false", default=None)
    g.add_argument("--ce-last-k", type=int, help="supervise only the last K assistant tokens")
    g.add_argument("--min-rating", type=int, help="drop pairs rated below this (1-5)")
    g.add_argument("--system-prompt", help="system prompt for pairs that have none")
    g.add_argument("--lenient", action="store_true", default=None, help="skip malformed lines, counting them")
    g.add_argument("--val-split", type=float, help="fraction held out when there is no val.jsonl")
    g.add_argument("--raw-text", help="directory of text files trained on every token")
    g = p.add_argument_group("scratch backend")
    g.add_argument("--scratch-shape", help="scratch model preset (see mens.train.scratch)")
    for name, typ in (("layers", int), ("heads", int), ("width", int), ("ffn", int), ("positions", int),
                      ("dropout", float)):
        g.add_argument(f"--scratch-{name}", type=typ)
    g = p.add_argument_group("run")
    g.add_argument("--log-interval", type=int)
    g.add_argument("--eval-interval", type=int, help="steps between validations (0 = at the end)")
    g.add_argument("--save-interval", type=int, help="steps between checkpoints (0 = on stop only)")
    g.add_argument("--keep-checkpoints", type=int)
    g.add_argument("--bench", help="held-out bench (dir or .jsonl): log greedy pass@1 to telemetry while training")
    g.add_argument("--bench-every", type=int, help="steps between bench runs (0 = only at the end)")
    g.add_argument("--bench-limit", type=int, help="bench tasks per run (default 8)")
    g.add_argument("--report-to", action="append", choices=("jsonl", "tensorboard"),
                   help="extra metric sinks; telemetry.jsonl is always written")
    g.add_argument("--force-restart", action="store_true", help="start over instead of resuming")
    g.add_argument("--background", action="store_true", help="detach; log to RUN/logs/train-<time>.log")
    g = p.add_argument_group("provenance")
    g.add_argument("--upstream-model-id")
    g.add_argument("--license")
    g.add_argument("--attribution-required", action=argparse.BooleanOptionalAction, default=None)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("probe", help="report the device, memory, bf16 support and recommended preset")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda", "mps"))
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("status", help="show a training run's progress: step, loss, tokens/s, ETA")
    p.add_argument("run", help="the run directory")
    p.add_argument("--watch", action="store_true", help="refresh until the run ends")
    p.add_argument("--interval", type=float, default=2.0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)


def resolve(args: argparse.Namespace):
    from mens.train.config import resolve_config

    flags = {name: getattr(args, name, None) for name in _PASS}
    if flags.get("report_to"):
        flags["report_to"] = ["jsonl", *flags["report_to"]]
    recommended = None
    if not flags.get("preset"):
        from mens.train.probe import probe

        recommended = probe(flags.get("device") or "auto").recommended_preset
    return resolve_config(flags, args.config, recommended)


def cmd_train(args: argparse.Namespace) -> int:
    cfg = resolve(args)
    if args.background:
        return _background(cfg, args.force_restart)
    from mens.train.loop import train

    try:
        out = train(cfg, force_restart=args.force_restart)
    finally:
        _leave_process_group()
    if out.status == "interrupted":
        return 130
    if out.status == "completed":
        val = f", val loss {out.val_loss:.4f}" if out.val_loss is not None else ""
        loss = f"{out.final_loss:.4f}" if out.final_loss is not None else "?"
        print(f"trained {out.steps} steps, final loss {loss}{val} → {out.run_dir}")
    return 0


def _leave_process_group() -> None:
    # Under torchrun a gloo group left to the interpreter's exit races its own threads' teardown and
    # now and then aborts a rank ("terminate called without an active exception"): close it here.
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _background(cfg, force_restart: bool) -> int:
    """Re-launch this training, detached, from the fully resolved config."""
    import yaml

    from mens.train.preflight import check_run_dir

    run = check_run_dir(cfg.output_dir)
    logs = run / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    config_path = logs / f"train-{stamp}.yaml"
    config_path.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    log_path = logs / f"train-{stamp}.log"
    cmd = [sys.executable, "-m", "mens", "train", "--config", str(config_path)]
    if force_restart:
        cmd.append("--force-restart")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("MENS_QUIET", None)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env, cwd=os.getcwd())
    print(f"pid {proc.pid}")
    print(f"log {log_path}")
    say(f"mens: training in the background; `mens status {run}` shows progress, `kill {proc.pid}` "
        "stops it after a checkpoint")
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    from mens.train.probe import format_probe, probe

    info = probe(args.device)
    print(json.dumps(info.to_dict(), indent=2) if args.json else format_probe(info))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from mens.train.status import format_status, run_status, watch

    if args.watch:
        watch(Path(args.run), args.interval)
        return 0
    s = run_status(args.run)
    print(json.dumps(s, indent=2) if args.json else format_status(s))
    return 0
