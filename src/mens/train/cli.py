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

from mens.errors import MensError
from mens.flags import add_flag
from mens.progress import say

def register(sub) -> None:
    p = sub.add_parser("train", help="fine-tune a model (QLoRA/LoRA/full) or train one from scratch",
                       description="Fine-tune any Hugging Face causal LM on DIR/train.jsonl, or train a small "
                       "model from scratch. Flags override --config YAML, which overrides --preset, which "
                       "overrides the preset `mens probe` recommends. Rerunning on an existing run dir resumes.",
                       epilog="Environment: MENS_ALLOCATOR=auto|tcmalloc|jemalloc|system picks the malloc a "
                       "training process re-executes itself on (auto: tcmalloc, then jemalloc, when installed; "
                       "about 2x faster CPU training than glibc's). Under torchrun the same command trains "
                       "data-parallel (--distributed). See docs/training.md.")
    add_config_flags(p)
    g = p.add_argument_group("run")
    add_flag(g, "--config", help="YAML file of TrainConfig fields (keys = the flags' names)")
    g.add_argument("--force-restart", action="store_true", help="start over instead of resuming")
    g.add_argument("--background", action="store_true", help="detach; log to RUN/logs/train-<time>.log")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("probe", help="report the device, memory, bf16 support and recommended preset")
    add_flag(p, "--device", default="auto", choices=("auto", "cpu", "cuda", "mps"))
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--model", metavar="PATH", help="a base model (directory or hub id): estimate the memory each "
                   "backend needs from its config, for --preset")
    p.add_argument("--preset", help="the preset to estimate for (default: the recommended one); a GPU preset on a "
                   "machine without that GPU is estimated for its card size (16g: 16 GB)")
    p.set_defaults(func=cmd_probe)

    p = sub.add_parser("status", help="show a training run's progress: step, loss, tokens/s, ETA")
    p.add_argument("run", help="the run directory")
    p.add_argument("--watch", action="store_true", help="refresh until the run ends")
    p.add_argument("--interval", type=float, default=2.0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per TrainConfig field, declared there (type, help, group, choices): a new field is
    a new flag without touching this file. Every default is None = "not given", so YAML and
    presets underneath still apply."""
    from dataclasses import fields

    from mens.train.config import TrainConfig, field_type

    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in fields(TrainConfig):
        meta = f.metadata
        group = groups.get(meta["group"]) or groups.setdefault(meta["group"], parser.add_argument_group(meta["group"]))
        flag, kind = meta.get("flag") or "--" + f.name.replace("_", "-"), field_type(f.name)
        kw = dict(dest=f.name, default=None, help=meta.get("help"))
        if kind is bool and f.default is True:
            kw.update(action="store_false")            # --no-packing
        elif kind is bool and f.default is False:
            kw.update(action="store_true")             # --dora, --lenient
        elif kind is bool:
            kw.update(action=argparse.BooleanOptionalAction)
        elif kind is list:
            kw.update(action="append", choices=tuple(c for c in meta["choices"] if c != "none"))
        elif kind is tuple:
            kw.update(type=float, nargs=2, metavar=("B1", "B2"))
        else:
            metavar = meta.get("metavar") or (None if meta.get("choices") else {int: "N", float: "X"}.get(kind, "TEXT"))
            kw.update(type=kind, choices=meta.get("choices"), metavar=metavar)
        names = [flag, "-o"] if f.name == "output_dir" else [flag]
        add_flag(group, *names, **kw)  # with the TRL/HF spellings of its name (mens.flags)


def resolve(args: argparse.Namespace):
    from dataclasses import fields

    from mens.train.config import TrainConfig, resolve_config

    flags = {f.name: getattr(args, f.name, None) for f in fields(TrainConfig)}
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
    from mens.train.launch import launch, launches_ranks

    if launches_ranks(cfg):  # the ranks run this command again, as ranks
        return launch(cfg, args.force_restart)
    from mens.train.loop import train

    try:
        out = train(cfg, force_restart=args.force_restart)
    except BaseException:
        _leave_process_group()
        raise
    code = 130 if out.status == "interrupted" else 0
    if out.status == "completed":
        val = f", val loss {out.val_loss:.4f}" if out.val_loss is not None else ""
        loss = f"{out.final_loss:.4f}" if out.final_loss is not None else "?"
        print(f"trained {out.steps} steps, final loss {loss}{val} → {out.run_dir}")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        _end_rank(code)
    return code


def _leave_process_group() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _end_rank(code: int) -> None:
    """A torchrun rank whose training ended (every rank passed train()'s last barrier, every file
    is written and closed) leaves at once. Left to the interpreter's teardown, gloo's threads
    race the C++ destructors and now and then abort a rank ("terminate called without an active
    exception"), with or without destroy_process_group: seen in CI on DDP and FSDP runs."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


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
    from mens.train.preflight import check_device
    from mens.train.probe import format_probe, probe

    check_device(args.device)  # an absent GPU is an error, not a report of one
    info = probe(args.device)
    if not args.model:
        print(json.dumps(info.to_dict(), indent=2) if args.json else format_probe(info))
        return 0
    from mens.train.memory import format_estimates, model_estimates

    preset, memory_gb, model_type, estimates = model_estimates(args.model, args.preset, info)
    if args.json:
        print(json.dumps({**info.to_dict(), "estimate": {"model": args.model, "model_type": model_type,
                          "preset": preset, "memory_gb": memory_gb,
                          "backends": {k: e.to_dict() for k, e in estimates.items()}}}, indent=2))
    else:
        print(format_probe(info) + "\n\n" + format_estimates(model_type, preset, estimates, memory_gb))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from mens.evaluate.card import read_json
    from mens.evaluate.checks import check_run
    from mens.evaluate.report import read_telemetry
    from mens.train.status import format_status, run_status, watch

    run = check_run(args.run)
    read_json(run / "training_manifest.json"), read_telemetry(run)  # unreadable files: one line naming them
    if not (args.interval > 0 and args.interval < float("inf")):
        raise MensError(f"--interval must be a positive number of seconds, got {args.interval}", "--interval",
                        "e.g. --interval 2")
    if args.watch:
        watch(Path(args.run), args.interval)
        return 0
    s = run_status(args.run)
    print(json.dumps(s, indent=2) if args.json else format_status(s))
    return 0
