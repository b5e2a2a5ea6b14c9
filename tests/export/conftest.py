"""Runs to export: a LoRA run over a tiny Qwen2, Llama and GPT-2 (shapes llama.cpp accepts:
head size 16, vocab 384), and the skip for tests that need the `export` extra."""

import pytest


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory, tiny_tokenizer_dir):
    from tiny import build_model

    return build_model(tmp_path_factory.mktemp("tiny-gpt2"), "gpt2", tokenizer_dir=tiny_tokenizer_dir)


@pytest.fixture
def llama_cpp():
    """llama-cpp-python (the `export` extra) and llama.cpp's converter, or skip."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="needs the export extra: pip install -e '.[export]'")
    from mens.export.gguf import converter_dir

    converter_dir()   # fetched once into ~/.cache/mens (MENS_CACHE) from the llama-cpp-python sdist
    return llama_cpp
