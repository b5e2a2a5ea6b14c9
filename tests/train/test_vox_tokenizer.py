"""VoxTokenizer: the id layout is a contract, and the pure and HF forms agree on every string."""

from __future__ import annotations

import functools
import random

import pytest
from paths import EXAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from mens.train import vox_tokenizer as vt

# The full vocabulary spelled out by hand (not derived from the module): ids are a contract.
GOLDEN = (
    ["[PAD]", "[UNK]", "[EOS]"]
    + [" ", "!", '"', "#", "$", "%", "&", "'", "(", ")", "*", "+", ",", "-", ".", "/",
       "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", ":", ";", "<", "=", ">", "?",
       "@", "A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L", "M", "N", "O",
       "P", "Q", "R", "S", "T", "U", "V", "W", "X", "Y", "Z", "[", "\\", "]", "^", "_",
       "`", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o",
       "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z", "{", "|", "}", "~"]
    + ["<|im_start|>", "<|im_end|>", "```", "\n", "\t", "fn", "let", "mut", "if", "else",
       "match", "return", "type", "import", "actor", "workflow", "activity", "component",
       "state", "derived", "effect", "view", "while", "for", "in", "true", "false", "and",
       "or", "not", "is", "isnt", "to", "@table", "@endpoint"]
)

PRINTABLE_WS = [chr(b) for b in range(0x20, 0x7F)] + ["\n", "\t"]


@functools.cache
def hf():
    return vt.build_hf_tokenizer()


def hf_ids(text: str) -> list[int]:
    return hf()(text, add_special_tokens=False)["input_ids"]


def test_golden_vocabulary():
    assert len(GOLDEN) == 133
    assert list(vt.VOCAB) == GOLDEN
    assert [vt.TOKEN_TO_ID[t] for t in GOLDEN] == list(range(133))
    assert all(vt.TOKEN_TO_ID[chr(b)] == b - 29 for b in range(0x20, 0x7F))
    assert hf().get_vocab() == {t: i for i, t in enumerate(GOLDEN)}
    assert len(hf()) == 133


def test_greedy_longest_match_without_word_boundaries():
    assert vt.tokens("find") == ["f", "in", "d"]
    assert vt.tokens("isnt island") == ["isnt", " ", "is", "l", "and"]
    assert vt.tokens("fn main() to int") == ["fn", " ", "m", "a", "in", "(", ")", " ", "to", " ", "in", "t"]
    assert vt.tokens("@table @tab @endpoint") == ["@table", " ", "@", "t", "a", "b", " ", "@endpoint"]
    assert vt.tokens("````\n\t") == ["```", "`", "\n", "\t"]
    assert vt.encode("<|im_start|>user\n<|im_end|>") == [98, 88, 86, 72, 85, 101, 99]
    assert vt.tokens("<|im_sta") == list("<|im_sta")


def test_unknown_characters_are_one_unk_each():
    assert vt.encode("é\r\x00😀") == [vt.UNK_ID] * 4
    assert vt.encode("aéb") == [vt.TOKEN_TO_ID["a"], vt.UNK_ID, vt.TOKEN_TO_ID["b"]]
    assert hf_ids("aé😀\rb") == vt.encode("aé😀\rb")


def test_special_names_in_text_are_plain_characters():
    # The literal text "[EOS]" is five characters in both forms, never the special id 2.
    for text in ("[EOS]", "[PAD] [UNK]", "x[EOS]y"):
        assert vt.UNK_ID not in vt.encode(text) and vt.EOS_ID not in vt.encode(text)
        assert hf_ids(text) == vt.encode(text)


def test_round_trip_printable_ascii_with_newlines_and_tabs():
    rng = random.Random(0)
    for _ in range(200):
        text = "".join(rng.choice(PRINTABLE_WS) for _ in range(rng.randint(0, 300)))
        ids = vt.encode(text)
        assert vt.decode(ids) == text
        assert hf().decode(ids) == text
        assert hf_ids(text) == ids


def test_decode_skips_specials_on_request():
    ids = [vt.PAD_ID, vt.EOS_ID] + vt.encode("let x") + [vt.UNK_ID]
    assert vt.decode(ids) == "[PAD][EOS]let x[UNK]"
    assert vt.decode(ids, skip_special=True) == "let x"
    assert hf().decode(ids) == vt.decode(ids)
    with pytest.raises(ValueError, match="outside"):
        vt.decode([5, -100])


def test_forms_agree_on_example_vox_files():
    files = sorted((EXAMPLES / "vox").rglob("*.vox"))
    if not files:
        pytest.skip("examples/vox/**/*.vox not present")
    texts = [f.read_text(encoding="utf-8") for f in files]
    batch = hf()(texts, add_special_tokens=False)["input_ids"]
    for f, text, ids in zip(files, texts, batch):
        assert ids == vt.encode(text), f.name
        if all(c in PRINTABLE_WS for c in text):
            assert vt.decode(ids) == text, f.name


# Strings built from vocabulary pieces, their fragments and out-of-vocabulary characters hit
# the overlaps (`is`/`isnt`, `@`/`@table`, `<|im_sta`) far more often than random text does.
_PIECES = list(vt.VOCAB[3:]) + ["<|im_", "|>", "isn", "@tab", "@end", "``", "[EOS]", "é", "😀", "\r", "\x00"]
_vox_like = st.lists(st.sampled_from(_PIECES), max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_vox_like, st.text(max_size=80)))
def test_forms_agree_hypothesis(text):
    ids = vt.encode(text)
    assert hf_ids(text) == ids
    assert hf().decode(ids) == vt.decode(ids)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(PRINTABLE_WS), max_size=200))
def test_round_trip_hypothesis(text):
    assert vt.decode(vt.encode(text)) == text


def test_saved_tokenizer_loads_with_chatml_template(tmp_path):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    vt.save_hf_tokenizer(tmp_path)
    assert (tmp_path / "tokenizer.json").is_file() and (tmp_path / "tokenizer_config.json").is_file()
    for tok in (AutoTokenizer.from_pretrained(tmp_path), PreTrainedTokenizerFast.from_pretrained(tmp_path)):
        text = "fn find(x) isnt [EOS] é\n\t```"
        assert tok(text)["input_ids"] == vt.encode(text)  # no BOS/EOS added around plain text
        assert (tok.pad_token_id, tok.unk_token_id, tok.eos_token_id, tok.bos_token_id) == (0, 1, 99, 2)
        messages = [{"role": "system", "content": "You write Vox."},
                    {"role": "user", "content": "add two ints"},
                    {"role": "assistant", "content": "fn add(a: int, b: int) to int {\n\treturn a + b\n}"}]
        rendered = tok.apply_chat_template(messages, tokenize=False)
        assert rendered == (
            "<|im_start|>system\nYou write Vox.<|im_end|>\n<|im_start|>user\nadd two ints<|im_end|>\n"
            "<|im_start|>assistant\nfn add(a: int, b: int) to int {\n\treturn a + b\n}<|im_end|>\n")
        ids = tok.apply_chat_template(messages, tokenize=True)
        ids = ids["input_ids"] if hasattr(ids, "keys") else ids
        assert list(ids) == vt.encode(rendered)
        prompt = tok.apply_chat_template(messages[:2], tokenize=False, add_generation_prompt=True)
        assert prompt.endswith("<|im_start|>assistant\n")
        assert tok.decode(vt.encode(rendered), skip_special_tokens=True).startswith("system\nYou write Vox.")
