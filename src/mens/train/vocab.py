"""`--add-words N`: grow a base's vocabulary with the words of the language it is taught.

A base's tokenizer was learned on other text: the words of a new language fall apart into
pieces (the quickstart's base splits Vox's `kind` into `k` `ind` and ` mutation` into three),
so every keyword and decorator costs the model several predictions, and a model that has learned
to copy prompt words tends to copy them into the language's closed slots instead (docs/base.md).
This adds the N most frequent words of the training answers that the tokenizer splits, each as a
whole-word token with and without the space before it, and starts each new embedding row (and
output row, when the head is not tied) at the mean of the rows of the pieces it replaces: the
model begins where it was, reading the word as its pieces' average, and trains the rows from
there (under LoRA as PEFT's trainable tokens, as the markers `--chat-template` adds).

Light at import: transformers and tokenizers load inside the functions.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path
from typing import Iterable, Iterator

from mens.errors import MensError

# Answers whose tokenization is checked to read back as written, before and after the words are added.
ROUND_TRIP_SAMPLE = 500

# A word: an identifier, keyword or decorator (`@endpoint`) — what a code language repeats.
WORD = re.compile(r"@?[A-Za-z_][A-Za-z_0-9]*")


def answer_texts(data_dir: str | Path) -> Iterator[str]:
    """The assistant's side of every training pair under `data_dir` (read as training reads it):
    the code the model is taught to write, where the language's words are."""
    from mens.train.preflight import check_data

    _, pairs, _, _ = check_data(str(data_dir), lenient=True, warn_small=False)
    for pair in pairs:
        if pair.messages:
            yield from (m["content"] for m in pair.messages
                        if isinstance(m, dict) and m.get("role") == "assistant" and isinstance(m.get("content"), str))
        else:
            yield pair.text if pair.text is not None else pair.response


def split_words(texts: Iterable[str], tokenizer, n: int) -> dict[str, list[int]]:
    """The N most frequent words of `texts` that `tokenizer` splits into two or more pieces (ties:
    first seen first), as {form: its pieces' ids} for each split form of each — the word with its
    leading space (how it follows a keyword or a comma) and without (after `(` or a line's indent)."""
    counts: collections.Counter[str] = collections.Counter()
    for text in texts:
        counts.update(WORD.findall(text))
    vocab = tokenizer.get_vocab()
    words: dict[str, list[int]] = {}
    taken = 0
    for word, _ in counts.most_common():
        if taken >= n:
            break
        split = {form: ids for form in (" " + word, word)
                 if form not in vocab and len(ids := tokenizer(form, add_special_tokens=False)["input_ids"]) >= 2}
        if split:
            words.update(split)
            taken += 1
    return words


def add_words(tokenizer, words: dict[str, list[int]]) -> None:
    """Add each form of `words` as a token matched only as a whole word (not inside `kinds`), as
    written (no normalisation)."""
    from tokenizers import AddedToken

    tokenizer.add_tokens([AddedToken(form, single_word=True, normalized=False) for form in words])


def start_rows(model, tokenizer, words: dict[str, list[int]]) -> None:
    """Each added word's embedding row, and its output row when the head is not tied to the
    embedding, at the mean of its pieces' rows (the model's embeddings already grown to fit)."""
    import torch

    layers = [model.get_input_embeddings()]
    head = model.get_output_embeddings()
    if head is not None and head.weight is not layers[0].weight:
        layers.append(head)
    rows = tokenizer.convert_tokens_to_ids(list(words))
    with torch.no_grad():
        for layer in layers:
            weight = layer.weight
            for row, pieces in zip(rows, words.values()):
                weight[row] = weight[pieces].float().mean(0).to(weight.dtype)


def grow_vocabulary(tokenizer, texts: list[str], n: int) -> dict[str, list[int]]:
    """split_words + add_words, refused where the grown tokenizer no longer gives the text back
    as written: a SentencePiece-style tokenizer (`▁` for spaces, e.g. Llama 2's) reads added
    words as separate words and decodes `zorblax(` as `zorblax (`, which would teach the model
    code that does not parse. Byte-level BPEs (GPT-2, Qwen2, Llama 3) give it back exactly."""
    words = split_words(texts, tokenizer, n)
    sample = texts[:ROUND_TRIP_SAMPLE]
    before = [_read_back(tokenizer, text) for text in sample]
    add_words(tokenizer, words)
    for text, was in zip(sample, before):
        now = _read_back(tokenizer, text)
        if now != was:
            at = next(i for i, (a, b) in enumerate(zip(was + "\0", now + "\0")) if a != b)
            raise MensError(f"with the added words this tokenizer no longer gives the answers back as written "
                            f"({was[max(0, at - 20):at + 20]!r} reads back as {now[max(0, at - 20):at + 20]!r})",
                            "--add-words",
                            "drop --add-words: it needs a byte-level BPE tokenizer (GPT-2, Qwen2, Llama 3 style)")
    return words


def _read_back(tokenizer, text: str) -> str:
    return tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"])
