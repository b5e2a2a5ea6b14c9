"""Tiny real models for tests: a byte-level BPE tokenizer trained in a blink on a small text,
with ChatML special tokens and chat template, and random-weight causal LMs of any family."""

from __future__ import annotations

import json
from pathlib import Path

CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

_TEXT = """fn add(a: int, b: int) to int {
    return a + b
}
type Shape =
    | Circle(r: int)
    | Rect(w: int, h: int)
component Counter(start: int) {
    state count: int = start
    view: Column(gap = 2) { Text(value = "Count") }
}
Write a Vox function that adds two numbers. Explain how match works in Vox.
def main():\n    print("hello world")\n
The quick brown fox jumps over the lazy dog. 0123456789 {}[]()<>:;.,!?'"+-*/%=|&@#_
"""


def build_tokenizer(out_dir: str | Path, vocab_size: int = 384, chatml: bool = True) -> Path:
    """Train a byte-level BPE on a small text and save it as a HF fast tokenizer directory.
    `chatml=False`: a base tokenizer as GPT-2's, only `<|endoftext|>` and no chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    out_dir = Path(out_dir)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL if chatml else SPECIAL[:1],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([_TEXT] * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>" if chatml else "<|endoftext|>",
                                   pad_token="<|endoftext|>", bos_token=None, unk_token=None)
    if chatml:
        fast.chat_template = CHATML_TEMPLATE
    fast.save_pretrained(out_dir)
    return out_dir


def build_model(out_dir: str | Path, arch: str = "qwen2", hidden: int = 64, layers: int = 2,
                seed: int = 0, tokenizer_dir: str | Path | None = None, positions: int = 512) -> Path:
    """A random-weight causal LM of family `arch` (qwen2, llama, mistral, gpt2, …) with its tokenizer
    and `positions` positions (GPT-2's learned table: an index past it is an IndexError)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    out_dir = Path(out_dir)
    if tokenizer_dir is None:
        build_tokenizer(out_dir)
    else:
        AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out_dir)
    tok = AutoTokenizer.from_pretrained(out_dir)
    vocab = len(tok)
    if arch == "gpt2":
        cfg = AutoConfig.for_model("gpt2", vocab_size=vocab, n_embd=hidden, n_layer=layers, n_head=4,
                                   n_positions=positions, bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id)
    else:
        cfg = AutoConfig.for_model(arch, vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 2,
                                   num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                   max_position_embeddings=positions, tie_word_embeddings=False,
                                   eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    model.save_pretrained(out_dir)
    (out_dir / "mens_fixture.json").write_text(json.dumps({"arch": arch, "seed": seed}))
    return out_dir
