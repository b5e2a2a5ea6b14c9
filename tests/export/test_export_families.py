"""Every family users fine-tune (tests/families.py) exported to GGUF and run in llama.cpp: its
logits over a prompt three windows long agree with transformers' (top-1 on ≥ 90% of positions,
every logit within 0.05) — Qwen3.5 / Qwen3-Next without the MTP weights transformers drops,
Gemma 2/3 and gpt-oss with their window on the layers the config says, and where llama.cpp
attends to every token (Mistral, Starcoder2, Phi-3) a context cut to the window, inside which
the two are the same. docs/export.md's family table is what export does; a family the converter
has no class for is refused in one line naming it, before anything is merged."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from families import FAMILIES, WINDOW, family_config, tiny_family_dir
from paths import REPO


def _table() -> dict[str, list[str]]:
    """docs/export.md's family table, by family."""
    section = (REPO / "docs" / "export.md").read_text().split("### Families", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("|") and not re.match(r"\|\s*-", line)]
    return {row[0]: row[1:] for row in rows[1:]}


def _window_column(arch: str, config) -> str:
    """What export does with a family's sliding window in llama.cpp's `arch` (mens.export.gguf)."""
    from mens.export.gguf import WINDOWED_ARCHS, sliding_layers

    window, _ = sliding_layers(config)
    if window is None:
        return "none"
    return "kept, layers as the config says" if arch in WINDOWED_ARCHS else "context cut to the window"


def test_the_family_table_says_what_export_does():
    table = _table()
    assert set(table) == set(FAMILIES)
    for family, (arch, window, agrees) in table.items():
        assert window == _window_column(arch, family_config(family, vocab_size=384)), family
        assert agrees == "yes", family     # test_gguf_agrees_with_transformers proves it


# Families whose converter reads only the vocabulary they ship: SentencePiece (tokenizer.model
# beside the tokenizer.json transformers converts from it) for Gemma 2 and Phi-3 (Phi-4's GPT-2
# vocabulary, told apart by tokenizer_config's class, is the tiny model's own); GLM-4's added
# tokens, which its converter names.
_SENTENCEPIECE = {"gemma2": "GemmaTokenizer", "phi3": "LlamaTokenizer"}
_ADDED_TOKENS = {"glm4": ["<|system|>", "<|user|>", "<|assistant|>"]}


def _as_shipped(family: str, tmp_path) -> Path:
    """The family's tiny model with its tokenizer as the family ships it."""
    if family in _ADDED_TOKENS:
        return _with_added_tokens(family, tmp_path / family)
    if family in _SENTENCEPIECE:
        return _with_sentencepiece(family, tmp_path / family)
    return tiny_family_dir(family)


def _with_added_tokens(family: str, model_dir: Path) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_family_dir(family))
    tok.add_special_tokens({"additional_special_tokens": _ADDED_TOKENS[family]})
    model = AutoModelForCausalLM.from_pretrained(tiny_family_dir(family), dtype=torch.float32)
    model.resize_token_embeddings(len(tok))
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    return model_dir


def _with_sentencepiece(family: str, model_dir: Path) -> Path:
    import io

    import sentencepiece   # the export extra's
    from transformers import AutoTokenizer

    from tiny import _TEXT

    shutil.copytree(tiny_family_dir(family), model_dir, ignore=shutil.ignore_patterns("tokenizer*", "chat_template*"))
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(_TEXT.splitlines()), model_writer=model, vocab_size=200, model_type="bpe",
        pad_id=0, unk_id=1, bos_id=2, eos_id=3, user_defined_symbols=["<|im_start|>", "<|im_end|>"], minloglevel=2)
    (model_dir / "tokenizer.model").write_bytes(model.getvalue())
    (model_dir / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": _SENTENCEPIECE[family]}))
    AutoTokenizer.from_pretrained(model_dir).save_pretrained(model_dir)   # tokenizer.json beside it, as on the Hub
    return model_dir


@pytest.mark.slow   # converts and runs a GGUF per family
@pytest.mark.parametrize("family", list(FAMILIES))
def test_gguf_agrees_with_transformers(llama_cpp, family, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mens.export.export import export
    from mens.export.gguf import read_info

    model_dir = _as_shipped(family, tmp_path)
    out = tmp_path / "f16.gguf"
    export(model_dir, out, quant="f16", merge_dtype="f32")
    info = read_info(out)
    assert info.arch == _table()[family][0]
    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = tok("type Shape = | Circle(r: int) | Rect(w: int, h: int)\ncomponent Counter(start: int) {\n"
              "    state count: int = start\n    view: Column(gap = 2) { Text(value = \"Count\") }\n}").input_ids
    assert len(ids) >= 3 * WINDOW
    if info.context_length == WINDOW:    # llama.cpp attends to every token: the context was cut to the window
        ids = ids[:WINDOW]
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        want = model(input_ids=torch.tensor([ids])).logits[0].numpy()
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=min(256, info.context_length), logits_all=True, verbose=False)
    llm.eval(ids)
    got = np.array(llm.scores[: len(ids)])
    llm.close()
    top1 = float(np.mean(got.argmax(-1) == want.argmax(-1)))
    assert top1 >= 0.9 and np.abs(got - want).max() < 0.05, (top1, np.abs(got - want).max(axis=-1).round(3))


@pytest.mark.slow   # fetches the converter
def test_a_family_the_converter_cannot_take_is_refused_in_one_line(llama_cpp, tmp_path, run_cli):
    """Phi-3.5-MoE (transformers' phimoe) has no class in llama.cpp's converter: one line naming
    it, exit 2, before the merge (no merged copy is left, nothing is written)."""
    model_dir = tmp_path / "phimoe"
    shutil.copytree(tiny_family_dir("phi3"), model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    config.update(model_type="phimoe", architectures=["PhimoeForCausalLM"])
    (model_dir / "config.json").write_text(json.dumps(config))
    code, out, err = run_cli("export", model_dir, "--gguf", tmp_path / "out.gguf")
    assert code == 2 and err.count("\n") == 1, err
    assert "cannot export phimoe models to GGUF: llama.cpp's converter has no support for PhimoeForCausalLM" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["phimoe"]
