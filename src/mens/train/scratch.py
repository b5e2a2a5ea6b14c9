"""Builders for the from-scratch model: shape presets, a seeded GPT-2 with the VoxTokenizer,
raw-text pre-training chunks, and saving as a standard Hugging Face model directory.

The training loop (`mens.train.loop`) is the same one QLoRA/LoRA use; `--backend scratch` only
swaps in the `scratch` builder of `mens.train.backends`, which uses these. GPT-2's architecture is used because its config has exactly the knobs
DESIGN.md §4 names (layers, heads, width, FFN, dropouts, positions) and every later stage
(bench, merge, serve) loads it with `AutoModelForCausalLM` unchanged.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from mens.errors import MensError
from mens.train.checkpoint import cache_on_for_saving
from mens.train.vox_tokenizer import EOS_ID, IM_END_ID, PAD_ID, VOCAB_SIZE


SCRATCH_ARCHS = ("gpt2", "llama")


@dataclass
class ScratchShape:
    """A decoder-only model shape; the defaults are the DESIGN.md §4 scratch model (~38M params)."""

    n_layer: int = 12
    n_head: int = 8
    n_embd: int = 512
    n_inner: int = 2048
    dropout: float = 0.1
    n_positions: int = 512
    # gpt2: learned absolute positions, GELU MLP, LayerNorm (DESIGN.md §4). llama: rotary
    # positions, SwiGLU, RMSNorm — a small model learns "what did I just write" from relative
    # positions at once instead of learning 512 position vectors (docs/performance.md,
    # "Quickstart quality"). Both load with AutoModelForCausalLM and convert to GGUF.
    arch: str = "gpt2"

    def check(self) -> "ScratchShape":
        if self.arch not in SCRATCH_ARCHS:
            raise MensError(f"scratch shape: unknown architecture {self.arch!r}",
                            todo=f"use one of: {', '.join(SCRATCH_ARCHS)}")
        for name in ("n_layer", "n_head", "n_embd", "n_inner", "n_positions"):
            if int(getattr(self, name)) < 1:
                raise MensError(f"scratch shape: {name} must be at least 1, got {getattr(self, name)}",
                                todo="pick a --preset or pass positive sizes")
        if self.n_embd % self.n_head:
            raise MensError(f"scratch shape: width {self.n_embd} is not divisible by {self.n_head} heads",
                            todo="choose a width that is a multiple of the head count")
        if not 0.0 <= self.dropout < 1.0:
            raise MensError(f"scratch shape: dropout must be in [0, 1), got {self.dropout}")
        return self

    def to_dict(self) -> dict:
        return asdict(self)


SCRATCH_PRESETS: dict[str, ScratchShape] = {
    "default": ScratchShape(),
    # A quarter of the default's compute: quick experiments on one GPU or a patient CPU.
    "small": ScratchShape(n_layer=6, n_head=8, n_embd=256, n_inner=1024, dropout=0.1, n_positions=512),
    # For tests and the CPU quickstart; dropout off because it only slows a run of a few minutes.
    "tiny": ScratchShape(n_layer=2, n_head=4, n_embd=128, n_inner=512, dropout=0.0, n_positions=256),
}


def scratch_shape(preset: str = "default", **overrides) -> ScratchShape:
    """The preset's shape with any non-None overrides applied (CLI flags beat presets)."""
    if preset not in SCRATCH_PRESETS:
        raise MensError(f"unknown scratch preset {preset!r}",
                        todo=f"use one of: {', '.join(SCRATCH_PRESETS)}")
    fields = SCRATCH_PRESETS[preset].to_dict()
    fields.update({k: v for k, v in overrides.items() if v is not None and k in fields})
    return ScratchShape(**fields).check()


def _special_ids(tokenizer=None) -> tuple[int, int, int, int]:
    """(vocabulary size, [PAD], [EOS], <|im_end|>) of `tokenizer` (default: the VoxTokenizer)."""
    if tokenizer is None:
        return VOCAB_SIZE, PAD_ID, EOS_ID, IM_END_ID
    ids = tokenizer.convert_tokens_to_ids(["[PAD]", "[EOS]", "<|im_end|>"])
    return len(tokenizer), ids[0], ids[1], ids[2]


def gpt2_config(shape: ScratchShape, tokenizer=None):
    """The GPT-2 config of `shape` over `tokenizer`'s vocabulary (default: the 133-id VoxTokenizer)."""
    from transformers import GPT2Config

    vocab, pad, eos, im_end = _special_ids(tokenizer)
    return GPT2Config(
        vocab_size=vocab, n_positions=shape.n_positions, n_embd=shape.n_embd,
        n_layer=shape.n_layer, n_head=shape.n_head, n_inner=shape.n_inner,
        resid_pdrop=shape.dropout, embd_pdrop=shape.dropout, attn_pdrop=shape.dropout,
        # [EOS] separates raw-text documents (so it doubles as BOS); <|im_end|> ends a chat turn.
        bos_token_id=eos, eos_token_id=im_end, pad_token_id=pad,
        tie_word_embeddings=True,
    )


def model_config(shape: ScratchShape, tokenizer=None):
    """The transformers config of `shape` (its `arch`) over `tokenizer`'s vocabulary."""
    if shape.arch == "gpt2":
        return gpt2_config(shape, tokenizer)
    from transformers import LlamaConfig

    vocab, pad, eos, im_end = _special_ids(tokenizer)
    return LlamaConfig(
        vocab_size=vocab, hidden_size=shape.n_embd, intermediate_size=shape.n_inner,
        num_hidden_layers=shape.n_layer, num_attention_heads=shape.n_head, num_key_value_heads=shape.n_head,
        max_position_embeddings=shape.n_positions, attention_dropout=shape.dropout, rms_norm_eps=1e-5,
        bos_token_id=eos, eos_token_id=im_end, pad_token_id=pad, tie_word_embeddings=True,
    )


def generation_config(tokenizer=None):
    """Stop on either end marker: <|im_end|> after a chat answer, [EOS] after a raw file."""
    from transformers import GenerationConfig

    _, pad, eos, im_end = _special_ids(tokenizer)
    return GenerationConfig(bos_token_id=eos, eos_token_id=[im_end, eos], pad_token_id=pad)


def build_model_and_tokenizer(shape: ScratchShape, seed: int, tokenizer=None):
    """A randomly initialised model of `shape` (same `seed`, same weights) over `tokenizer`
    (default: the HF VoxTokenizer; or one from `train_bpe_tokenizer`)."""
    import torch
    from transformers import AutoModelForCausalLM

    from mens.train.vox_tokenizer import build_hf_tokenizer

    shape.check()
    tokenizer = tokenizer if tokenizer is not None else build_hf_tokenizer()
    # Seed a forked RNG so building a model does not reset the caller's random stream.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(model_config(shape, tokenizer))
    model.generation_config = generation_config(tokenizer)
    return model, tokenizer


# ---------------------------------------------------------------- a learned tokenizer

BPE_SPECIALS = ("[PAD]", "[UNK]", "[EOS]", "<|im_start|>", "<|im_end|>")  # ids 0-4
BPE_MIN_VOCAB = 256 + len(BPE_SPECIALS)  # the byte alphabet and the specials


# How text is cut into pre-tokens before BPE merges within them. `apart`: words never absorb the
# space before them (GPT-2's ` ?\w+` would make `price` in `(price` and in ` price` different
# tokens), so a name is the same pieces wherever it stands and a model can copy a name from the
# prompt into code; `_` is a piece of its own, so `bucket_weight` shares `weight` with the prose; a
# whitespace run (newline + indent) is one. `joined`: a word or a punctuation run takes the one
# space before it, as code models' tokenizers do: ~20% fewer tokens on Python and Vox at 8,192 ids
# (docs/base.md), at the price of two spellings of a name's first piece.
BPE_PRETOKENS = {"apart": r"[A-Za-z0-9]+|_|[^\w\s]+|\s+",
                 "joined": r" ?[A-Za-z]+|[0-9]{1,3}|_| ?[^\w\s]+|\s+(?!\S)|\s+"}
# A BPE learns its merges from at most this much text, taken evenly from the whole (a base's
# 100+ MB of code would take minutes and gigabytes for the same merges).
BPE_TRAIN_MAX_CHARS = 40_000_000


def train_bpe_tokenizer(texts, vocab_size: int, spaces: str = "apart"):
    """A byte-level BPE tokenizer of `vocab_size` ids learned from `texts` (deterministic for the
    same texts), with the VoxTokenizer's special tokens and ChatML template; `spaces`: how words
    and the spaces before them are cut (BPE_PRETOKENS).

    Why: the VoxTokenizer spends one id per character (bar keywords), so a CPU-sized model sees
    a few hundred programs a minute; a BPE learned on the run's own code merges indentation,
    keywords, types and common names, and the same steps see about 3x more code (measured in
    docs/scratch.md). Byte-level, so no text is ever [UNK]."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from mens.chat_template import CHATML_TEMPLATE

    if vocab_size < BPE_MIN_VOCAB:
        raise MensError(f"a byte-level BPE needs at least {BPE_MIN_VOCAB} ids, got {vocab_size}",
                        "scratch_vocab", f"use 0 (the VoxTokenizer) or at least {BPE_MIN_VOCAB}")
    texts = list(texts)
    total = sum(map(len, texts))
    if total > BPE_TRAIN_MAX_CHARS:
        step = -(-total // BPE_TRAIN_MAX_CHARS)
        texts = texts[::step]
    tok = Tokenizer(models.BPE())
    words = pre_tokenizers.Split(Regex(BPE_PRETOKENS[spaces]), behavior="isolated")
    tok.pre_tokenizer = pre_tokenizers.Sequence([words, pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                   use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(BPE_SPECIALS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)

    def special(text: str) -> AddedToken:
        return AddedToken(text, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False)

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=special("[PAD]"), unk_token=special("[UNK]"), bos_token=special("[EOS]"),
        eos_token=special("<|im_end|>"), additional_special_tokens=[special("<|im_start|>"), special("<|im_end|>")],
        clean_up_tokenization_spaces=False, padding_side="right")
    fast.chat_template = CHATML_TEMPLATE
    return fast


def training_texts(data_dir: str | Path | None, raw_text: str | Path | None = None,
                   curriculum_data: str | Path | None = None):
    """The text a run trains on, for learning its tokenizer: every message of the training and
    validation pairs that `--data-dir` names (a folder's train.jsonl/val.jsonl or the training
    file itself, in any row format `mens.formats` reads: read as training reads them), then those
    of `--curriculum-data`, then the files under `raw_text`."""
    from mens.train.preflight import check_data

    for where, flag in ((data_dir, "--data-dir"), (curriculum_data, "--curriculum-data")):
        if where is None:
            continue
        _, pairs, val_pairs, _ = check_data(str(where), lenient=True, flag=flag, warn_small=False)
        for pair in [*pairs, *(val_pairs or [])]:
            texts = [m.get("content") for m in pair.messages if isinstance(m, dict)] if pair.messages \
                else [pair.system, pair.prompt, pair.response, pair.text]
            yield from (text for text in texts if isinstance(text, str) and text)
    if raw_text is not None:
        for path in raw_text_files(raw_text):
            text = _read_text(path)
            if text:
                yield text


# ---------------------------------------------------------------- raw-text pre-training

RAW_TEXT_MAX_BYTES = 4 * 1024 * 1024  # larger files are data dumps, not source


def raw_text_files(directory: str | Path) -> list[Path]:
    """Regular text files under `directory`, sorted, skipping hidden paths."""
    root = Path(directory)
    if not root.is_dir():
        what = "is a file, not a folder" if root.exists() else "does not exist"
        raise MensError(f"raw-text directory {str(root)!r} {what}", where="--raw-text",
                        todo="point --raw-text at a folder of source files")
    files = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        if path.stat().st_size <= RAW_TEXT_MAX_BYTES:
            files.append(path)
    return files


def _read_text(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None  # binary
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def raw_text_chunks(directory, tokenizer, seq_len: int) -> list[list[int]]:
    """Whole source files as next-token training chunks of at most `seq_len` ids.

    The files are tokenised in sorted order into one stream with the tokenizer's document
    separator (`[EOS]` for the VoxTokenizer, else its eos token) after each file, then cut into
    consecutive `seq_len` windows; every id is supervised. The last short window is kept if it
    has at least two ids (one prediction). Binary and non-UTF-8 files are skipped.
    """
    if seq_len < 2:
        raise MensError(f"raw-text sequence length must be at least 2, got {seq_len}")
    vocab = tokenizer.get_vocab()
    sep = vocab.get("[EOS]", tokenizer.eos_token_id)
    texts = [t for t in (_read_text(p) for p in raw_text_files(directory)) if t]
    if not texts:
        raise MensError(f"no text files found under {str(directory)!r}", where="--raw-text",
                        todo="point --raw-text at a folder of UTF-8 source files")
    stream: list[int] = []
    for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        stream.extend(ids)
        if sep is not None:
            stream.append(sep)
    chunks = [stream[i:i + seq_len] for i in range(0, len(stream), seq_len)]
    return [c for c in chunks if len(c) >= 2]


# ---------------------------------------------------------------- saving

def save_scratch_model(model, tokenizer, out_dir, state_dict: dict | None = None) -> None:
    """Save as a standard HF directory: config.json, model.safetensors, generation_config.json,
    tokenizer.json, tokenizer_config.json and the ChatML chat template.

    Everything is written into a temporary folder first and each file is then renamed into
    `out_dir`, so a reader never sees a half-written weight file and other files the training
    run keeps there (manifest, checkpoints) are left alone. `state_dict`: the gathered weights
    of a sharded (FSDP) model.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if getattr(model, "generation_config", None) is None or model.generation_config.eos_token_id is None:
        model.generation_config = generation_config()
    tmp = Path(tempfile.mkdtemp(prefix=".scratch-save.", dir=out))
    try:
        with cache_on_for_saving(model):
            model.save_pretrained(tmp, safe_serialization=True,
                                  **({"state_dict": state_dict} if state_dict is not None else {}))
        tokenizer.save_pretrained(tmp)
        for item in sorted(tmp.iterdir()):
            os.replace(item, out / item.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
