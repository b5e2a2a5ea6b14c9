"""`mens train --add-words N`: the training answers' most frequent words that the base's tokenizer
splits become whole-word tokens, their rows start at the mean of their pieces' rows and train
(under LoRA as PEFT's trainable tokens), and the run loads — through mens.inference and plain
PEFT — and merges to the adapter's logits, with the grown vocabulary."""

from __future__ import annotations

import json

import pytest
import torch

from train_helpers import config, train_args

# Answers in a made-up language: `zorblax` thrice, `@quuxify` twice an answer; the tiny BPE
# (tests/tiny.py) has seen neither and splits both.
ANSWER = "@quuxify\nfn zorblax(zorblax: int) to int {\n    return @quuxify(zorblax)\n}"
PHRASE = "x = zorblax(@quuxify) @quuxify zorblax"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from tiny import build_model

    return build_model(tmp_path_factory.mktemp("base") / "model", "qwen2")  # untied output layer


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("words-data")
    row = json.dumps({"prompt": "Write zorblax.", "response": ANSWER}) + "\n"
    (out / "train.jsonl").write_text(row * 32)
    return out


@pytest.fixture(scope="module")
def lora_run(base, data, tmp_path_factory):
    from mens.cli import main

    out = tmp_path_factory.mktemp("words-lora")
    args = train_args(base, data, out, backend="lora", add_words=2, max_steps=12, lr=1e-2, warmup_steps=0,
                      val_split=0)
    assert main([str(a) for a in args]) == 0
    return out


def test_split_words_takes_the_most_frequent_split_words_in_both_forms(base):
    from transformers import AutoTokenizer

    from mens.train.vocab import split_words

    tok = AutoTokenizer.from_pretrained(base)
    words = split_words([ANSWER] * 3 + ["int int int int int int int int"], tok, 2)
    assert {form.strip() for form in words} == {"zorblax", "@quuxify"}   # `int` is one token already
    for form, pieces in words.items():
        assert len(pieces) >= 2 and tok.decode(pieces) == form
    assert "zorblax" in words and " zorblax" in words
    assert list(split_words([ANSWER], tok, 1)) in (["zorblax", " zorblax"], [" zorblax", "zorblax"])
    assert split_words([ANSWER], tok, 0) == {}


@pytest.mark.parametrize("backend,arch", [("lora", "qwen2"), ("full", "gpt2")])
def test_new_rows_start_at_their_pieces_mean(backend, arch, data, tmp_path):
    """Untied Qwen2 under LoRA (input and output rows, as trainable tokens), tied GPT-2 in full."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tiny import build_model
    from mens.train.backends import build

    base_dir = build_model(tmp_path / "base", arch)
    base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    base_tok = AutoTokenizer.from_pretrained(base_dir)
    built = build(config(base_dir, data, tmp_path / "run", backend=backend, add_words=2), torch.device("cpu"), False)
    tok = built.tokenizer
    assert len(tok) == len(base_tok) + 4 and sorted(built.added_tokens) == sorted(
        ["zorblax", " zorblax", "@quuxify", " @quuxify"])
    model = built.model.get_base_model() if backend == "lora" else built.model
    pairs = [(model.get_input_embeddings(), base.get_input_embeddings())]
    if arch == "qwen2":
        pairs.append((model.get_output_embeddings(), base.get_output_embeddings()))
    else:
        assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    for grown, old in pairs:
        for form in built.added_tokens:
            pieces = base_tok(form, add_special_tokens=False)["input_ids"]
            torch.testing.assert_close(grown.weight[tok.convert_tokens_to_ids(form)], old.weight[pieces].mean(0))
        torch.testing.assert_close(grown.weight[:len(base_tok)], old.weight)  # the base's rows untouched
    if backend == "lora":  # only the added rows train beside the adapters
        rows = [n for n, p in built.model.named_parameters() if p.requires_grad and "lora_" not in n]
        assert len(rows) == 2 and all("trainable_tokens_delta" in n for n in rows)


def test_lora_run_carries_the_words_and_loads_and_merges(base, lora_run, tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mens.export.merge import merge_run
    from mens.inference import load_model

    base_tok = AutoTokenizer.from_pretrained(base)
    tok = AutoTokenizer.from_pretrained(lora_run)                      # the run carries the grown tokenizer
    ids = tok(PHRASE, add_special_tokens=False)["input_ids"]
    assert len(ids) < len(base_tok(PHRASE, add_special_tokens=False)["input_ids"])
    assert tok.decode(ids) == PHRASE and tok.convert_tokens_to_ids(" zorblax") in ids
    assert tok("zorblaxes", add_special_tokens=False)["input_ids"] == base_tok("zorblaxes",
                                                                             add_special_tokens=False)["input_ids"]
    manifest = json.loads((lora_run / "training_manifest.json").read_text())
    assert manifest["hyperparameters"]["add_words"] == 2 and manifest["tokenizer"]["vocab_size"] == len(tok)
    assert sorted(manifest["tokenizer"]["added_tokens"]) == sorted(["zorblax", " zorblax", "@quuxify", " @quuxify"])

    saved = load_file(str(lora_run / "adapter_model.safetensors"))   # only the added rows, and they trained
    rows = {k: v for k, v in saved.items() if "trainable_tokens_delta" in k}
    assert len(rows) == 2 and all(v.shape[0] == 4 for v in rows.values())
    plain = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    for key, trained in rows.items():
        weight = (plain.lm_head if "lm_head" in key else plain.get_input_embeddings()).weight
        start = torch.stack([weight[base_tok(f, add_special_tokens=False)["input_ids"]].mean(0)
                             for f in manifest["tokenizer"]["added_tokens"]])
        assert (trained - start).abs().max() > 1e-3, key

    model, loaded_tok, _ = load_model(lora_run, device="cpu")
    assert model.get_input_embeddings().weight.shape[0] == len(loaded_tok) == len(tok)
    x = torch.tensor([ids])
    with torch.no_grad():
        ours = model(input_ids=x).logits
    plain.resize_token_embeddings(len(tok))                           # plain PEFT: grow the base, then the adapter
    with torch.no_grad():
        torch.testing.assert_close(PeftModel.from_pretrained(plain, str(lora_run)).eval()(input_ids=x).logits, ours)

    report = merge_run(lora_run, tmp_path / "merged", dtype="f32")
    assert report.max_logit_diff < 1e-4
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32).eval()
    assert AutoTokenizer.from_pretrained(tmp_path / "merged")(PHRASE, add_special_tokens=False)["input_ids"] == ids
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=x).logits, ours, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("flags,message", [
    ({"add_words": -1}, "add_words must be >= 0"),
    ({"add_words": 3, "backend": "scratch", "model": None}, "--backend scratch learns its tokenizer"),
    ({"add_words": 3, "data_dir": None, "raw_text": "DATA"}, "--add-words counts the words of the training answers"),
])
def test_bad_add_words_is_a_one_line_error(flags, message, run_cli, base, data, tmp_path):
    flags = {k: (data if v == "DATA" else v) for k, v in flags.items()}  # raw text only: no answers
    code, _, err = run_cli(*train_args(base, flags.pop("data_dir", data), tmp_path / "run", **flags))
    assert code == 2 and message in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


def test_a_tokenizer_that_does_not_read_the_words_back_is_refused():
    """A SentencePiece-style BPE (`▁` for spaces, as Llama 2's) decodes an added word as a word
    of its own (`zorblax(` → `zorblax (`): training on that would teach code that does not parse."""
    from tokenizers import SentencePieceBPETokenizer
    from transformers import PreTrainedTokenizerFast

    from mens.errors import MensError
    from mens.train.vocab import grow_vocabulary

    sp = SentencePieceBPETokenizer()
    sp.train_from_iterator([ANSWER + "\n" + PHRASE] * 8, vocab_size=40, show_progress=False)  # ~its letters
    tok = PreTrainedTokenizerFast(tokenizer_object=sp)
    with pytest.raises(MensError, match="no longer gives the answers back as written") as err:
        grow_vocabulary(tok, [ANSWER] * 3, 2)
    assert "byte-level BPE" in err.value.todo and len(err.value.format().splitlines()) == 1


def test_a_byte_level_bpe_reads_the_answers_back(base):
    from transformers import AutoTokenizer

    from mens.train.vocab import grow_vocabulary

    tok = AutoTokenizer.from_pretrained(base)
    words = grow_vocabulary(tok, [ANSWER, PHRASE] * 3, 2)
    assert len(words) == 4 and tok.decode(tok(ANSWER, add_special_tokens=False)["input_ids"]) == ANSWER
