"""`mens dpo` and `mens rl`: thin typed wrappers over mens.rl.dpo and mens.rl.grpo. Every flag and
input is checked before a model loads; nothing heavy is imported at module top."""

from __future__ import annotations

import argparse
from pathlib import Path

from mens.errors import MensError
from mens.flags import add_flag


def register(sub) -> None:
    p = sub.add_parser("dpo", help="preference training (DPO) on prefs.jsonl from `mens corpus prefs`",
                       description="DPO with TRL's DPOTrainer: a LoRA over the start model, the start model as "
                       "the reference. Writes the run directory `mens train` writes (adapter or full weights, "
                       "manifest, telemetry with reward margins, checkpoints, card); rerunning resumes. docs/rl.md.")
    _common(p)
    add_flag(p, "--data-dir", required=True, type=Path, help="folder holding prefs.jsonl (or the file itself)")
    add_flag(p, "--max-steps", type=int, default=40, metavar="N", help="optimizer steps (default 40)")
    add_flag(p, "--lr", type=float, default=5e-4, metavar="X", help="learning rate (default 5e-4)")
    p.add_argument("--beta", type=float, default=0.1, help="DPO temperature β (default 0.1)")
    add_flag(p, "--micro-batch", type=int, default=4, metavar="N", help="preference pairs per step (default 4)")
    add_flag(p, "--seq-len", type=int, default=512, metavar="N", help="prompt + answer tokens kept (default 512)")
    add_flag(p, "--lora-r", type=int, default=8, metavar="N", help="LoRA rank; alpha is twice it (default 8)")
    add_flag(p, "--save-interval", type=int, default=20, metavar="N",
             help="optimizer steps between checkpoints (default 20)")
    p.set_defaults(func=cmd_dpo)

    p = sub.add_parser("rl", help="GRPO with rewards from the language pack (parses, not_stub, expects, tests)",
                       description="GRPO with TRL's GRPOTrainer: group sampling, group-relative advantages, "
                       "clipping, KL to the start model; rewards weighted in --config and logged one by one. "
                       "Writes the run directory `mens train` writes; rerunning resumes. Flags win over "
                       "--config; unset, RlOptions' defaults hold. docs/rl.md.")
    _common(p)
    add_flag(p, "--prompts", required=True, type=Path,
             help="JSONL of {prompt, lang?, expect_contains?, tests?} (task files or pair files)")
    add_flag(p, "--config", type=Path, help="rl.yaml: RlOptions fields, `rewards: {parses: 1.0, …}` (docs/rl.md)")
    add_flag(p, "--max-steps", type=int, metavar="N", help="optimizer steps (default 50)")
    add_flag(p, "--lr", type=float, metavar="X", help="learning rate (default 5e-5)")
    add_flag(p, "-n", "--samples", type=int, help="samples per prompt: the group GRPO compares (default 4)")
    add_flag(p, "--max-new-tokens", type=int, metavar="N",
             help="tokens per sample; the prompt and they must fit the model's positions (default 256)")
    add_flag(p, "--save-interval", type=int, metavar="N", help="optimizer steps between checkpoints (default 25)")
    p.set_defaults(func=cmd_rl, seed=None, device=None)  # unset: rl.yaml's (RlOptions' defaults: 0, cpu)


def _common(p: argparse.ArgumentParser) -> None:
    add_flag(p, "--model", required=True, help="the start: a run dir (`mens train`) or a model dir")
    add_flag(p, "--output-dir", "-o", required=True, type=Path, help="the run directory to write")
    add_flag(p, "--bench", type=Path, help="held-out bench: refuse prompts that overlap its tasks")
    add_flag(p, "--seed", type=int, default=0)
    add_flag(p, "--device", default="cpu", choices=("auto", "cpu", "cuda"),
             help="auto: cuda where there is a GPU (TRL trains on cpu or cuda; default cpu)")
    add_flag(p, "--force-restart", action="store_true", help="start over instead of resuming")


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

    opts = DpoOptions(steps=args.max_steps, learning_rate=args.lr, beta=args.beta, batch_size=args.micro_batch,
                      lora_r=args.lora_r, lora_alpha=2 * args.lora_r, max_length=args.seq_len, seed=args.seed,
                      save_steps=args.save_interval, device=args.device).check("flags", FLAGS)
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

    opts = read_config(args.config, {"steps": args.max_steps, "learning_rate": args.lr, "num_generations": args.samples,
                                     "seed": args.seed, "max_completion_length": args.max_new_tokens,
                                     "save_steps": args.save_interval, "device": args.device})
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
