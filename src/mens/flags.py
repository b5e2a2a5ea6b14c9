"""One vocabulary for every command's flags: a concept is spelled one way wherever it appears
(`--max-steps`, `--lr`, `--output-dir`/`-o`, `--micro-batch`, `--max-new-tokens` …), and the
spellings a user brings from TRL and transformers' TrainingArguments (`--learning-rate`,
`--num-train-epochs`, `--per-device-train-batch-size` …) or from mens's older commands are
accepted for it.

`add_flag` declares a flag with the aliases of its spelling: they parse into the same value,
stay out of the usage line, and the help names the TRL/HF ones ("also --learning-rate"); mens's
own older spellings (LEGACY) are accepted silently, so scripts written for them keep working; a
shared flag's value is shown as METAVARS says in every command's help (`--model MODEL`, `--seed N`).
tests/test_cli_vocabulary.py walks every command's parser and fails on a concept spelled two
ways, a spelling meaning two things or shown two ways, or an alias a command forgot.
"""

from __future__ import annotations

import argparse

# canonical spelling → the TRL / transformers spellings accepted for it (shown in the help)
ALIASES: dict[str, tuple[str, ...]] = {
    "--max-steps": ("--steps",),
    "--lr": ("--learning-rate",),
    "--epochs": ("--num-train-epochs",),
    "--micro-batch": ("--per-device-train-batch-size",),
    "--grad-accum": ("--gradient-accumulation-steps",),
    "--seq-len": ("--max-length", "--max-seq-length"),
    "--max-new-tokens": ("--max-completion-length",),
    "--samples": ("--num-generations",),
    "--save-interval": ("--save-steps",),
    "--log-interval": ("--logging-steps",),
    "--eval-interval": ("--eval-steps",),
}

# (command, older mens spelling) → the canonical spelling it now reads as: accepted, not shown
LEGACY: dict[tuple[str, str], str] = {
    ("mens dpo", "--batch-size"): "--micro-batch",
    ("mens merge", "--out"): "--output-dir",
    ("mens corpus gather", "--output"): "--output-dir",
    ("mens gate", "--bench"): "--bench-results",
    ("mens decontaminate", "--data"): "--train-data",
    ("mens export", "--system"): "--system-prompt",
}

# What each spelling shared by several commands means: a new shared flag is described here, so
# that it means one thing everywhere (the vocabulary test asks for it).
SHARED = {
    "--model": "the model to start from or judge: a run dir, a model dir or a hub id",
    "--output-dir": "the run or model directory a command writes (-o)",
    "--output": "the file a command writes (-o)",
    "-o": "where a command writes: --output (a file) or --output-dir (a directory)",
    "--config": "the command's own YAML file (train: TrainConfig, rl: RlOptions, corpus mix: mix.yaml, pipeline)",
    "--seed": "the seed of every random choice",
    "--device": "where to compute: auto, cpu, cuda (cuda:N where a command can pick one), mps",
    "--dtype": "the weights' dtype: bf16, fp16, fp32 (f16/f32 accepted), and train's mixed modes",
    "--max-steps": "optimizer steps to train",
    "--lr": "the learning rate",
    "--seq-len": "tokens per training sequence (longer ones are cut)",
    "--micro-batch": "sequences per forward/backward pass (per process)",
    "--save-interval": "optimizer steps between checkpoints",
    "--max-new-tokens": "tokens generated per answer",
    "--samples": "answers generated per prompt (-n)",
    "-n": "answers generated per prompt (--samples)",
    "--temperature": "sampling temperature (0 = greedy where allowed)",
    "--bench": "a held-out bench: a task .jsonl file or a folder of them",
    "--prompts": "prompt rows to sample from (bench-style tasks or pairs)",
    "--data-dir": "the training rows: a folder holding them or the file itself",
    "--train-data": "training rows to check a bench against (contamination)",
    "--grammar": "a language pack whose parser constrains the generated code",
    "--lang": "a language pack name",
    "--lora-r": "the LoRA rank",
    "--preset": "a named set of training defaults sized to a device (cpu, tiny, 16g …; mens probe recommends one)",
    "--force-restart": "start the run over instead of resuming it",
    "--upstream-model-id": "the hub id of the original base model (provenance)",
    "--quant": "the GGUF quantization: f16, q8_0, q4_k_m",
    "--json": "print machine-readable JSON",
    "--lenient": "skip malformed rows (counted) instead of failing",
    "--strict": "exit 1 when any row is rejected or a threshold fails",
    "--workers": "worker processes",
    "--limit": "at most this many items (tasks, pairs)",
    "--system-prompt": "the system prompt",
    "--script": "Vox script mode: top-level statements allowed",
    "--dry-run": "do nothing for real: pipeline shows what would run; push writes the files to DIR",
}

# What a shared value flag's help shows for its value, in every command (a flag with choices shows them).
METAVARS = {"--model": "MODEL", "--output-dir": "DIR", "--output": "FILE", "--config": "FILE", "--seed": "N",
            "--bench": "PATH", "--data-dir": "PATH", "--train-data": "FILE", "--prompts": "FILE",
            "--system-prompt": "TEXT", "--upstream-model-id": "ORG/NAME", "--device": "DEVICE", "--limit": "N",
            "--workers": "N", "--lang": "LANG", "--grammar": "LANG", "--temperature": "X", "--lora-r": "N"}

DTYPES = ("bf16", "fp16", "fp32")
DTYPE_SPELLINGS = {"f16": "fp16", "f32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}


def dtype_value(text: str) -> str:
    """`--dtype` of merge, serve and export: bf16, fp16 or fp32 (llama.cpp's f16 and f32 too)."""
    if text not in DTYPE_SPELLINGS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(DTYPES)})")
    return DTYPE_SPELLINGS[text]


def add_flag(parser, *names: str, **kwargs) -> argparse.Action:
    """`parser.add_argument(*names, **kwargs)` (a parser or an argument group) plus the aliases of
    its long name: ALIASES (named in the help) and the command's LEGACY spellings (silent). A
    required flag with an alias is checked by a required group, so that either spelling satisfies it."""
    long = next(n for n in names if n.startswith("--"))
    if long in METAVARS and not kwargs.get("choices") and kwargs.get("action") in (None, "store", "append", "extend"):
        kwargs["metavar"] = METAVARS[long]
    command = getattr(parser, "prog", None)  # `mens dpo`; an argument group has none (train's have no legacy)
    legacy = [old for (cmd, old), new in LEGACY.items() if new == long and cmd == command]
    aliases = list(ALIASES.get(long, ()))
    if aliases and kwargs.get("help") not in (None, argparse.SUPPRESS):
        kwargs["help"] = f"{kwargs['help']} (also {', '.join(aliases)})"
    elif aliases and kwargs.get("help") is None:
        kwargs["help"] = f"also {', '.join(aliases)}"
    target = parser
    if kwargs.get("required") and (aliases or legacy):
        kwargs.pop("required")
        target = parser.add_mutually_exclusive_group(required=True)
    action = target.add_argument(*names, **kwargs)
    hidden = {k: v for k, v in kwargs.items() if k not in ("help", "metavar", "default", "dest", "required")}
    for alias in aliases + legacy:
        target.add_argument(alias, dest=action.dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **hidden)
    return action


def add_group(sub, name: str, help: str) -> argparse._SubParsersAction:
    """A command group such as `mens corpus …`; `mens corpus` alone prints its help."""
    group = sub.add_parser(name, help=help, description=help)
    group.set_defaults(func=None, _parser=group)
    return group.add_subparsers(dest=f"{name}_command", metavar="COMMAND")
