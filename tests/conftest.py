"""Shared fixtures. Tests never touch the network: the hub is offline for the whole session."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MENS_QUIET", "1")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SHARED_ASSETS = REPO.parent / "shared" / "assets"


@pytest.fixture
def run_cli(capsys):
    """Run `mens ARGS…` in-process; returns (exit code, stdout, stderr)."""
    from mens.cli import main

    def _run(*args: str):
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
