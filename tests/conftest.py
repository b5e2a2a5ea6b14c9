"""Shared fixtures. Tests never touch the network: the hub is offline for the whole session."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MENS_QUIET", "1")
# `dtype: auto` picks bf16-mixed on CPUs with native bf16: pin "none" so that tests compute the
# same (fp32) on every CI machine; tests of the bf16 choice set it themselves.
os.environ.setdefault("MENS_CPU_BF16", "0")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from paths import EXAMPLES, REPO, SHARED_ASSETS  # noqa: E402,F401  (re-exported for fixtures)


@pytest.fixture
def run_cli(capsys):
    """Run `mens ARGS…` in-process; returns (exit code, stdout, stderr) of that command alone."""
    from mens.cli import main

    def _run(*args: str):
        # What the test printed before (a fixture's model load shows transformers' progress bar
        # until some mens command in this process has turned it off) is not the command's.
        capsys.readouterr()
        code = main([str(a) for a in args])
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory):
    """A real (tiny, freshly trained) byte-level BPE tokenizer with ChatML tokens and template."""
    from tiny import build_tokenizer

    return build_tokenizer(tmp_path_factory.mktemp("tiny-tokenizer"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer_dir):
    """A tiny random-weight Qwen2 model directory (config, safetensors, tokenizer)."""
    from tiny import build_model

    return build_model(tmp_path_factory.mktemp("tiny-qwen2"), "qwen2", tokenizer_dir=tiny_tokenizer_dir)


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory, tiny_tokenizer_dir):
    """A tiny random-weight Llama model directory."""
    from tiny import build_model

    return build_model(tmp_path_factory.mktemp("tiny-llama"), "llama", tokenizer_dir=tiny_tokenizer_dir)


@pytest.fixture
def held_elsewhere():
    """`with held_elsewhere(folder, what):` another Python process holds mens.files.hold_lock on
    `folder` for the block (as a running `mens train` or pipeline would), and is killed after."""
    import contextlib
    import subprocess
    import sys

    @contextlib.contextmanager
    def hold(folder, what: str):
        code = (f"import time\nfrom mens.files import hold_lock\nhold_lock({str(folder)!r}, {what!r})\n"
                "print('held', flush=True)\ntime.sleep(120)")
        holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            yield
        finally:
            holder.kill()
            holder.wait()

    return hold


@pytest.fixture(scope="session")
def make_adapter_run(tmp_path_factory, tiny_model_dir):
    """Build a run dir as `mens train` writes it — a standard PEFT LoRA adapter (non-zero, so it
    changes the outputs) plus training_manifest.json — over `base` (default: tiny_model_dir).
    `make_adapter_run("name", seed=1, backend="qlora", copy_tokenizer=False)` → Path."""
    import hashlib
    import json
    from pathlib import Path

    def _make(name: str, *, base=None, seed: int = 0, backend: str = "lora", copy_tokenizer: bool = True):
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, AutoTokenizer

        base = Path(base or tiny_model_dir)
        run = tmp_path_factory.mktemp(name)
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        cfg = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", init_lora_weights=False,
                         task_type="CAUSAL_LM")
        peft_model = get_peft_model(model, cfg)
        peft_model.save_pretrained(run)
        if copy_tokenizer:
            AutoTokenizer.from_pretrained(base).save_pretrained(run)
        manifest = {
            "schema_version": "mens.training_manifest.v1",
            "base_model": {"path": str(base), "id": str(base),
                           "config_sha256": hashlib.sha256((base / "config.json").read_bytes()).hexdigest()},
            "backend": backend, "quantization": "nf4" if backend == "qlora" else None,
            "dtype": "float32", "status": "completed",
        }
        (run / "training_manifest.json").write_text(json.dumps(manifest, indent=2))
        return run

    return _make


# Tests on a live HTTP server (these fixtures start one) are `slow`, like the subprocess, torchrun,
# pipeline and browser tests marked in their modules: `bash scripts/test -m "not slow"` is the
# quick loop; the default run and CI run everything.
_LIVE_SERVER_FIXTURES = {"live_server", "small_server"}


def pytest_collection_modifyitems(items):
    for item in items:
        if _LIVE_SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


# MENS_TEST_FAILURE_LOG=PATH: each failure's id and traceback is appended to PATH the moment it is
# reported, so a run cut by a time budget (scripts/gpu_check tests) still says why its tests
# failed; pytest prints tracebacks only at the end. Under xdist the workers' reports reach the
# controller's hook too: only the controller (or a run without workers) writes.
_FAILURE_LOG = os.environ.get("MENS_TEST_FAILURE_LOG")
_IS_XDIST_WORKER = False


def pytest_configure(config):
    global _IS_XDIST_WORKER
    _IS_XDIST_WORKER = hasattr(config, "workerinput")


def pytest_runtest_logreport(report):
    if not _FAILURE_LOG or _IS_XDIST_WORKER or not report.failed:
        return
    where = "" if report.when == "call" else f" (at {report.when})"
    stderr = report.capstderr.strip()[-2000:]  # a subprocess's warnings, a library's notice
    with open(_FAILURE_LOG, "a", encoding="utf-8") as log:
        log.write(f"=== FAILED {report.nodeid}{where} after {report.duration:.1f} s\n"
                  f"{report.longreprtext.rstrip()}\n"
                  + (f"--- captured stderr (its end)\n{stderr}\n" if stderr else "") + "\n")
