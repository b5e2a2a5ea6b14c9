"""`mens.inference.load_model`: run dirs, plain model dirs, several adapters, hub ids offline."""

import pytest
import torch

from mens.errors import MensError
from mens.inference import load_model


def _next_logits(model, tok, text="fn main() {"):
    with torch.no_grad():
        return model(input_ids=tok(text, return_tensors="pt").input_ids).logits[0, -1]


def test_plain_model_dir(tiny_model_dir):
    model, tok, info = load_model(tiny_model_dir, device="cpu")
    assert info["models"] == {info["default"]: None}
    assert info["context_window"] == 512 and info["dtype"] == "float32"
    assert tok.chat_template


def test_run_dir_with_adapter_falls_back_to_base_tokenizer(make_adapter_run, tiny_model_dir):
    run = make_adapter_run("inf-run", copy_tokenizer=False)
    model, tok, info = load_model(run, device="cpu", name="mine")
    assert info["base"] == str(tiny_model_dir) and info["models"] == {"mine": "mine"}
    base_model, _, _ = load_model(tiny_model_dir, device="cpu")
    assert not torch.allclose(_next_logits(model, tok), _next_logits(base_model, tok))


def test_several_adapters_over_one_base(make_adapter_run, tiny_model_dir):
    a, b = make_adapter_run("inf-a", seed=1), make_adapter_run("inf-b", seed=2)
    model, tok, info = load_model(tiny_model_dir, adapters={"a": str(a), "b": str(b)}, device="cpu")
    assert info["models"] == {info["default"]: None, "a": "a", "b": "b"}
    model.set_adapter("a")
    la = _next_logits(model, tok)
    model.set_adapter("b")
    lb = _next_logits(model, tok)
    with model.disable_adapter():
        l0 = _next_logits(model, tok)
    assert not torch.allclose(la, lb) and not torch.allclose(la, l0)


def test_missing_path_and_offline_hub_id_are_clear_errors(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MensError, match="HF_HUB_OFFLINE"):
        load_model("nobody-has/this-model-xyz", device="cpu")
    with pytest.raises(MensError, match="not found"):
        load_model(str(tmp_path / "missing"), device="cpu")
    with pytest.raises(MensError, match="not a model directory"):
        load_model(str(tmp_path), device="cpu")
