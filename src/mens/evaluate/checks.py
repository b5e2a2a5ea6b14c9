"""Checks the evaluate commands make before any heavy work (loading a model, generating): every
flag in range, every input there and readable, every output writable. Each failure is one line
(`MensError`, exit 2) naming the flag or file and the fix."""

from __future__ import annotations

import math
from pathlib import Path

from mens.errors import MensError
from mens.files import check_output


def at_least(value: int | None, low: int, flag: str) -> None:
    if value is not None and value < low:
        raise MensError(f"{flag} must be {low} or more, got {value}", flag, f"give {flag} {max(low, 1)} or more")


def check_bench_args(model: str | Path, bench: str | Path, *, k: int, n: int | None, temperature: float,
                     limit: int | None, max_new_tokens: int, batch_size: int, device: str,
                     out: str | Path | None, train_data: list[str | Path] | None) -> None:
    """`mens bench` (and the pipeline's bench stage): numbers, device, files, output."""
    from mens.hf import check_source
    from mens.hf import check_device, check_files

    at_least(k, 1, "-k")
    at_least(n, 1, "--samples")
    at_least(limit, 1, "--limit")
    at_least(max_new_tokens, 1, "--max-new-tokens")
    at_least(batch_size, 1, "--batch-size")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
        raise MensError(f"--temperature must be 0 or more, got {temperature}", "--temperature",
                        "give 0 for greedy decoding or a positive number (e.g. 0.8) to sample")
    check_device(device)
    if not Path(bench).exists():
        raise MensError("bench not found", str(bench), "give a bench .jsonl file or a folder holding some")
    for path in train_data or []:
        check_input_file(path, "--train-data")
    if out is not None:
        check_output(out, "-o")
        check_run_output(out, model, "benchmark_results.json", *([bench] if Path(bench).is_file() else []),
                         *(train_data or []))
    check_source(str(model))
    check_files(model)
    from mens.hf import adapter_base, is_adapter_run

    if is_adapter_run(model):
        check_files(adapter_base(model))


def check_run_output(out: str | Path, run: str | Path, own: str, *inputs: str | Path) -> None:
    """`-o` replaces none of what the command reads: not one of `inputs` (the policy, the bench,
    the training data), and no file of the run directory but its own (`own`, e.g.
    gate_receipt.json): `mens report RUN -o RUN/telemetry.jsonl` would put a page over the curves."""
    from mens.files import check_not_input

    out, run = Path(out), Path(run)
    check_not_input(out, *inputs)
    if run.is_dir() and out.is_file() and out.resolve().parent == run.resolve() and out.name != own:
        raise MensError(f"the output would overwrite {out.name}, a file of the run", f"-o {out}",
                        f"write it elsewhere, or leave -o out ({run / own})")


def check_input_file(path: str | Path, flag: str) -> Path:
    path = Path(path)
    if path.is_dir():
        raise MensError("is a folder, not a file", f"{flag} {path}", "give a JSONL file")
    if not path.is_file():
        raise MensError("file not found", f"{flag} {path}", "check the path")
    return path


def check_run(run: str | Path) -> Path:
    """A run directory that exists (is a folder)."""
    run = Path(run)
    if run.is_file():
        raise MensError("is a file, not a run directory", str(run), "give the directory `mens train` wrote")
    if not run.is_dir():
        raise MensError("run directory not found", str(run), "give the directory `mens train` wrote")
    return run
