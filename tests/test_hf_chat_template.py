"""mens.hf's chat_template setting: a known name or a file; the markers the template writes that
the vocabulary lacks become special tokens (one id each, so generation can stop on them), and
the model's embeddings grow to match."""

import pytest

from mens.errors import MensError


def _base_tokenizer():
    """A GPT-2-like byte-level BPE whose vocabulary has <|endoftext|> but no ChatML markers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(["fn add(a: int) to int { return a }"] * 4,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")


def test_chatml_adds_missing_markers_and_grows_embeddings():
    from transformers import GPT2Config, GPT2LMHeadModel

    from mens.chat_template import CHATML_TEMPLATE, fit_embeddings, set_chat_template, stop_token_ids

    tok = _base_tokenizer()
    assert len(tok.encode("<|im_end|>")) > 1                 # today: split into pieces
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2,
                                       eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id))
    assert set_chat_template(tok, "chatml") == ["<|im_start|>", "<|im_end|>"]
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.encode("<|im_end|>") == [end] and tok.chat_template == CHATML_TEMPLATE
    assert fit_embeddings(model, tok)
    assert model.get_input_embeddings().weight.shape[0] == len(tok) == model.lm_head.weight.shape[0]
    assert end in stop_token_ids(model, tok)
    assert set_chat_template(tok, "chatml") == [] and not fit_embeddings(model, tok)   # idempotent


def test_template_file_and_unknown_name(tmp_path, tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    from mens.chat_template import set_chat_template

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    path = tmp_path / "t.jinja"
    path.write_text("{% for m in messages %}<|user|>{{ m['content'] }}<|end|>{% endfor %}")
    assert set_chat_template(tok, str(path)) == ["<|user|>", "<|end|>"]
    with pytest.raises(MensError, match="unknown chat template"):
        set_chat_template(tok, "nochat")
