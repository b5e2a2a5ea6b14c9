"""`mens train --chat-template chatml` on a base whose tokenizer has no ChatML markers (as GPT-2's
and many base models'): the markers become one id each, the embeddings grow, the new rows train
(under LoRA as PEFT's trainable tokens), and the run loads — through mens.inference and through
plain PEFT — stops generating at the new <|im_end|> (bench's generate and serve's engine), and
merges to the adapter's logits."""

from __future__ import annotations

import json
import threading

import pytest
import torch

from train_helpers import config, train_args

END = "<|im_end|>"


@pytest.fixture(scope="module")
def plain_base(tmp_path_factory):
    """A tiny Qwen2 whose tokenizer knows only <|endoftext|> and has no chat template."""
    from tiny import build_model, build_tokenizer

    root = tmp_path_factory.mktemp("plain-base")
    return build_model(root / "model", "qwen2", tokenizer_dir=build_tokenizer(root / "tok", chatml=False))


@pytest.fixture(scope="module")
def ok_data(tmp_path_factory):
    """One short exchange: a few steps teach a tiny model to end its turn at once."""
    data = tmp_path_factory.mktemp("ok-data")
    row = json.dumps({"prompt": "Say ok.", "response": "ok"}) + "\n"
    (data / "train.jsonl").write_text(row * 32)
    return data


def _train(base, data, out, backend: str):
    from mens.cli import main

    args = train_args(base, data, out, backend=backend, chat_template="chatml", max_steps=20, lr=1e-2,
                      warmup_steps=0, val_split=0)
    assert main([str(a) for a in args]) == 0
    return out


@pytest.fixture(scope="module")
def lora_run(plain_base, ok_data, tmp_path_factory):
    return _train(plain_base, ok_data, tmp_path_factory.mktemp("lora-run"), "lora")


@pytest.fixture(scope="module")
def full_run(plain_base, ok_data, tmp_path_factory):
    return _train(plain_base, ok_data, tmp_path_factory.mktemp("full-run"), "full")


def _logits(model, tokenizer, text="<|im_start|>user\nSay ok.<|im_end|>\n"):
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_lora_run_adds_the_end_token_and_trains_its_rows(plain_base, lora_run):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mens.chat_template import stop_token_ids
    from mens.inference import load_model

    base_tok = AutoTokenizer.from_pretrained(plain_base)
    assert len(base_tok.encode(END)) > 1                              # the base splits it into pieces
    tok = AutoTokenizer.from_pretrained(lora_run)                     # the run carries the grown tokenizer
    end = tok.convert_tokens_to_ids(END)
    assert tok.encode(END) == [end] and len(tok) == len(base_tok) + 2 and "<|im_start|>" in tok.chat_template
    manifest = json.loads((lora_run / "training_manifest.json").read_text())
    assert manifest["tokenizer"]["chat_template"] == "chatml" and manifest["hyperparameters"]["chat_template"] == "chatml"
    assert manifest["tokenizer"]["added_tokens"] == ["<|im_start|>", END]
    assert manifest["tokenizer"]["vocab_size"] == len(tok)

    # Only the added rows are saved (PEFT trainable tokens), not the grown matrices whole; and they trained.
    saved = load_file(str(lora_run / "adapter_model.safetensors"))
    rows = {k: v for k, v in saved.items() if "trainable_tokens_delta" in k}
    assert len(rows) == 2 and not any(k.endswith("base_layer.weight") for k in saved)
    base = AutoModelForCausalLM.from_pretrained(plain_base, dtype=torch.float32)
    for key, delta in rows.items():  # they started at the mean of the base's rows (mean resizing)
        weight = (base.lm_head if "lm_head" in key else base.get_input_embeddings()).weight
        assert delta.shape == (2, weight.shape[1])
        assert (delta - weight.mean(0)).abs().max() > 1e-2, key

    model, loaded_tok, _ = load_model(lora_run, device="cpu")
    assert model.get_input_embeddings().weight.shape[0] == len(tok) == len(loaded_tok)
    assert end in stop_token_ids(model, loaded_tok)
    # Plain PEFT loads it the standard way: grow the base to the tokenizer, then the adapter.
    base.resize_token_embeddings(len(tok))
    peft_model = PeftModel.from_pretrained(base, str(lora_run)).eval()
    torch.testing.assert_close(_logits(peft_model, tok), _logits(model, tok))


@pytest.mark.parametrize("which", ["lora", "full"])
def test_generation_stops_at_the_new_end_token(which, lora_run, full_run):
    from mens.evaluate.bench import generate
    from mens.chat_template import chat_prompt, stop_token_ids
    from mens.inference import load_model
    from mens.serve.engine import Engine
    from mens.serve.requests import Request, Sampling

    run = lora_run if which == "lora" else full_run
    model, tok, _ = load_model(run, device="cpu")
    end = tok.convert_tokens_to_ids(END)
    assert model.get_input_embeddings().weight.shape[0] == len(tok)
    ids = tok(chat_prompt(tok, "Say ok."), return_tensors="pt", add_special_tokens=False).input_ids
    out = model.generate(ids, max_new_tokens=16, do_sample=False, eos_token_id=stop_token_ids(model, tok),
                         pad_token_id=tok.pad_token_id)[0, ids.shape[1]:].tolist()
    assert out[-1] == end and len(out) <= 3, tok.convert_ids_to_tokens(out)  # ends its turn, and stops there
    text = tok.decode(out[:-1])
    if which == "full":  # every weight trained: it has learned the whole answer
        assert text == "ok"
    assert generate(model, tok, ["Say ok."], max_new_tokens=16) == [[text]]  # bench

    engine = Engine(model, tok, context_window=512, max_batch=2)      # serve
    try:
        assert end in engine.eos_ids
        events, done = [], threading.Event()
        engine.submit(Request(ids[0].tolist(), Sampling(max_tokens=16, temperature=0),
                              lambda ev: (events.append(ev), ev[0] in ("done", "error") and done.set())))
        assert done.wait(60) and events[-1][:3] == ("done", 0, "stop"), events[-1]
    finally:
        engine.stop()


def test_merge_of_a_grown_run_matches_the_adapter(lora_run, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from mens.export.merge import merge_run
    from mens.inference import load_model

    report = merge_run(lora_run, tmp_path / "merged", dtype="f32")
    assert report.max_logit_diff < 1e-4 and report.max_logit_diff_saved < 1e-4
    tok = AutoTokenizer.from_pretrained(tmp_path / "merged")
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32).eval()
    assert merged.config.vocab_size == len(tok) == merged.get_input_embeddings().weight.shape[0]
    adapter, _, _ = load_model(lora_run, device="cpu")
    torch.testing.assert_close(_logits(merged, tok), _logits(adapter, tok), atol=1e-4, rtol=1e-4)
    stops = GenerationConfig.from_pretrained(tmp_path / "merged").eos_token_id
    assert tok.convert_tokens_to_ids(END) in stops


def test_full_run_saves_the_grown_model(plain_base, full_run):
    from transformers import AutoConfig, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(full_run)
    assert AutoConfig.from_pretrained(full_run).vocab_size == len(tok) == len(AutoTokenizer.from_pretrained(plain_base)) + 2


@pytest.mark.parametrize("backend,arch", [("qlora", "qwen2"), ("lora", "gpt2")])
def test_builders_train_the_added_rows(backend, arch, tmp_path, ok_data):
    """QLoRA (NF4 base) and a tied-embedding GPT-2: the rows grow and only the added rows train
    beside the adapters (the tied output layer follows its embedding)."""
    from tiny import build_model, build_tokenizer

    from mens.train.backends import build

    base = build_model(tmp_path / "base", arch, tokenizer_dir=build_tokenizer(tmp_path / "tok", chatml=False))
    built = build(config(base, ok_data, tmp_path / "run", backend=backend, chat_template="chatml"),
                  torch.device("cpu"), False)
    assert built.added_tokens == ["<|im_start|>", END] and built.tokenizer.encode(END) == [len(built.tokenizer) - 1]
    inner = built.model.get_base_model()
    assert inner.get_input_embeddings().weight.shape[0] == len(built.tokenizer)
    token_rows = [n for n, p in built.model.named_parameters() if p.requires_grad and "lora_" not in n]
    assert token_rows and all("trainable_tokens_delta" in n for n in token_rows)
    assert len(token_rows) == (1 if arch == "gpt2" else 2)


@pytest.mark.parametrize("value,message", [("nochat", "unknown chat template 'nochat'"),
                                           ("missing/template.jinja", "unknown chat template")])
def test_bad_chat_template_is_a_one_line_error(value, message, run_cli, plain_base, ok_data, tmp_path):
    code, _, err = run_cli(*train_args(plain_base, ok_data, tmp_path / "run", chat_template=value))
    assert code == 2 and message in err and "--chat-template" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_yaml_key_and_template_file(tmp_path, plain_base, ok_data):
    from mens.errors import MensError
    from mens.train.config import resolve_config

    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}<|user|>{{ m['content'] }}<|end|>{% endfor %}")
    (tmp_path / "run.yaml").write_text(f"chat_template: {template}\n")
    cfg = resolve_config({"model": str(plain_base), "data_dir": str(ok_data)}, str(tmp_path / "run.yaml"), "tiny")
    assert cfg.chat_template == str(template)
    (tmp_path / "bad.yaml").write_text("chat_template: 3\n")
    with pytest.raises(MensError, match="chat_template must be a string"):
        resolve_config({"model": str(plain_base)}, str(tmp_path / "bad.yaml"), "tiny")


def test_without_the_setting_a_base_without_chatml_is_warned_about(plain_base, ok_data, tmp_path, caplog):
    import logging

    from mens.train.backends import build

    with caplog.at_level(logging.INFO, logger="mens"):
        built = build(config(plain_base, ok_data, tmp_path / "run", backend="full"), torch.device("cpu"), False)
    assert "--chat-template chatml adds them" in caplog.text and built.added_tokens == []
    assert built.model.get_input_embeddings().weight.shape[0] == len(built.tokenizer)  # nothing grew
