"""`mens dpo` and `mens rl`: thin typed wrappers over mens.rl.dpo and mens.rl.grpo. Every flag and
input is checked before a model loads; nothing heavy is imported at module top."""

from __future__ import annotations

import argparse
from pathlib import Path

from mens.errors import MensError


def register(sub) -> None:
    p = sub.add_parser("dpo", help="preference training (DPO) on prefs.jsonl from `mens corpus prefs`",
                       description="DPO with TRL's DPOTrainer: a LoRA over the start model, the start model as "
                       "the reference. Writes the run directory `mens train` writes (adapter or full weights, "
                       "manifest, telemetry with reward margins, checkpoints, card); rerunning resumes. docs/rl.md.")
    _common(p)
    p.add_argument("--data-dir", required=True, type=Path, help="folder holding prefs.jsonl (or the file itself)")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--learning-rate", type=float, default=5e-4)
    p.add_argument("--beta", type=float, default=0.1, help="DPO temperature β (default 0.1)")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--max-length", type=int, default=512, help="prompt + answer tokens kept")
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--save-steps", type=int, default=20)
    p.set_defaults(func=cmd_dpo)

    p = sub.add_parser("rl", help="GRPO with rewards from the language pack (parses, not_stub, expects, tests)",
                       description="GRPO with TRL's GRPOTrainer: group sampling, group-relative advantages, "
                       "clipping, KL to the start model; rewards weighted in --config and logged one by one. "
                       "Writes the run directory `mens train` writes; rerunning resumes. docs/rl.md.")
    _common(p)
    p.add_argument("--prompts", required=True, type=Path,
                   help="JSONL of {prompt, lang?, expect_contains?, tests?} (task files or pair files)")
    p.add_argument("--config", type=Path, help="rl.yaml: RlOptions fields, `rewards: {parses: 1.0, …}` (docs/rl.md)")
    p.add_argument("--steps", type=int)
    p.add_argument("--learning-rate", type=float)
    p.add_argument("--num-generations", type=int, help="samples per prompt (the group)")
    p.add_argument("--max-completion-length", type=int)
    p.set_defaults(func=cmd_rl, seed=None, device=None)  # unset: rl.yaml's (RlOptions' defaults: 0, cpu)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="the start: a run dir (`mens train`) or a model dir")
    p.add_argument("--output-dir", "-o", required=True, type=Path, help="the run directory to write")
    p.add_argument("--bench", type=Path, help="held-out bench: refuse prompts that overlap its tasks")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--force-restart", action="store_true", help="start over instead of resuming")


def _check_start(args, device: str) -> None:
    from mens.hf import check_device, check_files, check_source

    check_source(str(args.model))
    check_files(args.model)
    check_device(device)
    if args.bench is not None and not args.bench.exists():
        raise MensError("bench not found", str(args.bench), "give a bench .jsonl file or a folder holding some")
    if args.output_dir.is_file():
        raise MensError("is a file, not a run directory", str(args.output_dir), "give a directory for --output-dir")


def cmd_dpo(args) -> int:
    from mens.rl.dpo import FLAGS, DpoOptions, prefs_path, read_prefs

    opts = DpoOptions(steps=args.steps, learning_rate=args.learning_rate, beta=args.beta, batch_size=args.batch_size,
                      lora_r=args.lora_r, lora_alpha=2 * args.lora_r, max_length=args.max_length, seed=args.seed,
                      save_steps=args.save_steps, device=args.device).check("flags", FLAGS)
    _check_start(args, opts.device)
    path = prefs_path(args.data_dir)
    rows = read_prefs(path)
    if args.bench is not None:
        _refuse_bench_overlap(args.bench, path)
    from mens.rl.dpo import dpo

    trainer = dpo(str(args.model), path, args.output_dir, opts, force_restart=args.force_restart)
    last = next((h for h in reversed(trainer.state.log_history) if "rewards/margins" in h), {})
    _say(f"dpo: {trainer.state.global_step} steps on {len(rows)} pairs, reward margin "
         f"{last.get('rewards/margins', float('nan')):.4f} → {args.output_dir}")
    return _end()


def cmd_rl(args) -> int:
    from mens.rl.grpo import read_config, read_prompt_rows

    opts = read_config(args.config, {"steps": args.steps, "learning_rate": args.learning_rate,
                                     "num_generations": args.num_generations, "seed": args.seed,
                                     "max_completion_length": args.max_completion_length, "device": args.device})
    from mens.evaluate.checks import check_input_file

    check_input_file(args.prompts, "--prompts")
    _check_start(args, opts.device)
    rows = read_prompt_rows(args.prompts, args.bench)
    from mens.rl.grpo import grpo

    trainer = grpo(str(args.model), args.prompts, args.output_dir, opts, bench=None, force_restart=args.force_restart)
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    first, last = (rewards[0], rewards[-1]) if rewards else (float("nan"),) * 2
    _say(f"rl: {trainer.state.global_step} steps on {len(rows)} prompts, reward {first:.3f} → {last:.3f} "
         f"→ {args.output_dir}")
    return _end()


def _say(line: str) -> None:
    from mens.rl.run import main_rank

    if main_rank():
        print(line)


def _end() -> int:
    """Under torchrun every rank waits for the run dir to be written, then leaves at once (as `mens
    train`'s ranks do: gloo's threads racing interpreter teardown abort a rank now and then)."""
    from mens.rl.run import world_size

    if world_size() > 1:
        import torch.distributed as dist

        from mens.train.cli import _end_rank

        if dist.is_initialized():
            dist.barrier()
        _end_rank(0)
    return 0


def _refuse_bench_overlap(bench: Path, path: Path) -> None:
    from mens.evaluate.contamination import find_contamination

    hits = find_contamination(bench, [path])["hits"]
    if hits:
        raise MensError(f"the preference data holds held-out bench task {hits[0]['id']!r} ({len(hits)} overlap(s))",
                        hits[0]["where"], "rebuild it with `mens corpus prefs --bench …`, which drops them")
