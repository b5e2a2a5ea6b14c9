"""Preflight: every check that can fail cheaply runs before the heavy work, and each failure is
one line (`MensError`, exit 2) that says what is wrong, where, and what to do."""

from __future__ import annotations

import math
from pathlib import Path

from mens.errors import MensError
from mens.files import LOCK_FILE
from mens.progress import warn
from mens.records import Pair, read_pairs

MIN_PAIRS_WARN = 100
# What a run dir may hold before its first run (`--background` creates logs/ first).
_FRESH_OK = {"logs", LOCK_FILE}


def check_run_dir(output_dir: str | Path | None, markers: tuple[str, ...] = ("training_manifest.json",),
                  model: str | Path | None = None) -> Path:
    """The output dir is new, empty, or an earlier mens run (which is then resumed): one holding
    any of `markers` (mens dpo / rl add their telemetry and TRL checkpoints); and not the folder of
    the `model` the run starts from, which it would overwrite."""
    if not output_dir:
        raise MensError("no output directory given", "--output-dir", "pass --output-dir RUN")
    run = Path(output_dir)
    if model and run.exists() and Path(model).is_dir() and Path(model).resolve() == run.resolve():
        raise MensError("--output-dir is the start model's own directory", str(run),
                        "give a new --output-dir: the run would overwrite the model it starts from")
    if run.exists() and not run.is_dir():
        raise MensError("output path exists and is not a directory", str(run), "choose another --output-dir")
    check_writable_dir(run, "--output-dir")
    if run.is_dir() and not any((run / name).exists() for name in markers):
        others = sorted(p.name for p in run.iterdir() if p.name not in _FRESH_OK)
        if others:
            raise MensError(f"output directory is not empty and is not a mens run (holds {others[0]}…)",
                            str(run), "choose a new --output-dir")
    return run


def check_writable_dir(folder: Path, flag: str) -> None:
    """`folder` can hold files: no part of its path is a file, and the nearest folder that exists
    takes a new file (a real probe: as root, os.access says yes to read-only file systems)."""
    import os
    import tempfile

    parent = folder
    while not parent.exists() and not parent.is_symlink() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise MensError(f"{parent} is a file, not a folder", f"{flag} {folder}", "give a path under a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".mens-probe.", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise MensError(f"cannot write in {parent}: {exc.strerror or exc}", f"{flag} {folder}",
                        "choose a folder you can write to") from None


def check_bench(bench: str | None) -> None:
    """`--bench` is checked now, not when training ends: it exists and holds readable tasks."""
    if not bench:
        return
    from mens.evaluate.tasks import load_tasks

    if not Path(bench).exists():
        raise MensError("bench not found", f"--bench {bench}", "give a bench .jsonl file or a folder holding some")
    if not load_tasks(bench):
        raise MensError("the bench holds no tasks", f"--bench {bench}", "give a .jsonl file with one task a line")


def _all_skipped(skipped: list[str]) -> str:
    """Why a --lenient read left nothing: every line was bad (the first one named)."""
    return f": --lenient skipped all {len(skipped)} line(s), the first {skipped[0]}" if skipped else ""


def check_data(data_dir: str | None, lenient: bool = False, flag: str = "--data-dir",
               warn_small: bool = True) -> tuple[Path, list[Pair], list[Pair] | None, list[str]]:
    """train.jsonl (and an optional val.jsonl) in the data dir, well-formed and non-empty.
    Returns the train file, its pairs, the validation pairs if a file gives them, and the
    skipped-line reasons under --lenient. `flag`: the option that named the data, for the messages;
    `warn_small`: say when there are few pairs (the read that trains on them does; others do not,
    so the warning comes once)."""
    if not data_dir:
        raise MensError("no data directory given", flag, f"pass {flag} DIR holding train.jsonl")
    root = Path(data_dir)
    if root.is_file() and root.suffix not in (".jsonl", ".parquet"):
        raise MensError(f"{flag} is a file but not a .jsonl or .parquet one", str(root),
                        f"pass {flag} DIR holding train.jsonl, or the training file itself")
    if root.is_file():  # the training file itself (a pipeline stage's input, a user's own file): no val file
        pairs, skipped = read_pairs(root, lenient=lenient)
        if not pairs:
            raise MensError("the training file holds no training pairs" + _all_skipped(skipped), str(root),
                            "add rows, one JSON object a line")
        return root, pairs, None, skipped
    if not root.is_dir():
        raise MensError("data directory not found", str(root), f"pass {flag} DIR holding train.jsonl")
    train = root / "train.jsonl"
    if not train.exists() and (root / "train.parquet").is_file():
        train = root / "train.parquet"  # any row format mens.formats knows, in Parquet
    if train.is_dir():
        raise MensError("train.jsonl is a folder, not a file", str(train), "put the training pairs in a file")
    if not train.is_file():
        raise MensError("no train.jsonl in the data directory (nor a train.parquet)", str(root),
                        "run `mens corpus mix`, or put a train.jsonl (one row per line) there")
    pairs, skipped = read_pairs(train, lenient=lenient)
    if not pairs:
        raise MensError("train.jsonl holds no training pairs" + _all_skipped(skipped), str(train),
                        "add prompt/response pairs, one JSON object a line")
    if len(pairs) < MIN_PAIRS_WARN and warn_small:
        warn(f"mens: warning: only {len(pairs)} training pairs in {train} (fewer than {MIN_PAIRS_WARN}); "
            "expect a weak model")
    val = None
    for name in ("val.jsonl", "valid.jsonl", "validation.jsonl", "val.parquet", "validation.parquet"):
        if (root / name).is_file():
            val, more = read_pairs(root / name, lenient=lenient)
            skipped += more
            break
    return train, pairs, val, skipped


def check_model_files(model_dir: str) -> None:
    """A local base model needs a config and a tokenizer; every JSON file of it parses and every
    safetensors header is whole (the weights themselves are checked by loading)."""
    from mens.hf import check_files

    root = Path(model_dir)
    if not (root / "config.json").is_file():
        raise MensError("model directory has no config.json", str(root),
                        "point --model at a Hugging Face model directory")
    tokenizer_files = ("tokenizer.json", "tokenizer.model", "vocab.json", "tokenizer_config.json")
    if not any((root / f).is_file() for f in tokenizer_files):
        raise MensError("model directory has no tokenizer (tokenizer.json / tokenizer.model / vocab.json)",
                        str(root), "save the tokenizer beside the model (tokenizer.save_pretrained(dir))")
    check_files(root)


def check_vocab(tokenizer, config, where: str) -> None:
    """Every token id the tokenizer can emit must have an embedding row."""
    vocab = getattr(config, "vocab_size", None)
    if vocab is not None and len(tokenizer) > vocab:
        raise MensError(f"tokenizer has {len(tokenizer)} tokens but the model's vocabulary is {vocab}", where,
                        "use the tokenizer that belongs to this model")


def check_preset(preset_name: str | None, device: str, memory_gb: float) -> None:
    from mens.train.presets import PRESETS, fits

    if not preset_name:
        return
    why = fits(PRESETS[preset_name], device, memory_gb)
    if why:
        raise MensError(why, "--preset", "run `mens probe` for the preset that fits, or pass --preset cpu")


def check_device(device: str) -> None:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise MensError("--device cuda but no CUDA device is available", "--device", "use --device auto or cpu")
    if device == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise MensError("--device mps but MPS is not available", "--device", "use --device auto or cpu")


def check_finite(loss_value: float, where: str) -> None:
    if not math.isfinite(loss_value):
        raise MensError(f"the first forward pass gives a non-finite loss ({loss_value})", where,
                        "check the model weights and dtype (try --dtype fp32)")


def check_matches_reference(mine: float | None, theirs: float | None, where: str, exact: bool = False) -> None:
    """The loop's loss on the first row — decoder body, chunked head, every speed lever, packing —
    must be the unpatched model's own loss over the same examples one at a time: to 1e-4 where
    the model computes in fp32 (`exact`), to 16-bit rounding (1e-2) otherwise."""
    if mine is None or theirs is None or not math.isfinite(theirs):
        return
    tolerance = 1e-4 if exact else 1e-2
    if abs(mine - theirs) > tolerance * max(1.0, abs(theirs)):
        raise MensError(f"the training loss ({mine:.5f}) differs from the model's own loss, one example at a time "
                        f"({theirs:.5f}): mens does not reproduce this architecture's forward", where,
                        "retry with --speed-levers none --no-packing, and please report the model type")
