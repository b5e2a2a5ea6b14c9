"""VoxTokenizer: the fixed 133-id vocabulary of the from-scratch model (DESIGN.md §4, Scratch).

Layout (ids are a contract — a golden test pins every one):

    0 [PAD]   1 [UNK]   2 [EOS]
    3..97     the 95 printable ASCII characters, space..`~`, id = byte - 29
    98..132   35 compound tokens, in DESIGN order: <|im_start|> <|im_end|> ``` newline tab
              fn let mut if else match return type import actor workflow activity component
              state derived effect view while for in true false and or not is isnt to
              @table @endpoint

Encoding is greedy longest match at each position: a compound token wins over single
characters, a longer compound over a shorter one (`isnt` over `is`), with no notion of word
boundaries (`find` is `f` `in` `d`). Any other character (non-ASCII, control characters other
than newline and tab) becomes one `[UNK]` per code point. `decode(encode(s)) == s` for any
printable-ASCII text with newlines and tabs.

Two forms with identical ids:
- `encode` / `decode`: pure functions over one compiled regex, for data loaders and benchmarks;
- `build_hf_tokenizer()`: a `transformers.PreTrainedTokenizerFast` backed by a `tokenizers`
  pipeline (a `Split` pre-tokenizer with the same regex, a WordLevel model over the 133 strings,
  a `Fuse` decoder), with a ChatML chat template, so a scratch model directory is a normal HF
  model directory.

Chat EOS: the HF tokenizer's `eos_token` is `<|im_end|>` (id 99), because chat generation must
stop at the end of the assistant turn and the ChatML template ends every turn with it. `[EOS]`
(id 2) stays the document separator of raw-text pre-training (and the model's `bos_token`);
generation stops on either.
"""

from __future__ import annotations

import re
from pathlib import Path

from mens.chat_template import CHATML_TEMPLATE

PAD, UNK, EOS = "[PAD]", "[UNK]", "[EOS]"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"
PAD_ID, UNK_ID, EOS_ID = 0, 1, 2
IM_START_ID, IM_END_ID = 98, 99

SPECIALS = (PAD, UNK, EOS)
PRINTABLE = tuple(chr(b) for b in range(0x20, 0x7F))  # space .. '~', 95 characters
COMPOUND = (
    IM_START, IM_END, "```", "\n", "\t",
    "fn", "let", "mut", "if", "else", "match", "return", "type", "import",
    "actor", "workflow", "activity", "component", "state", "derived", "effect", "view",
    "while", "for", "in", "true", "false", "and", "or", "not", "is", "isnt", "to",
    "@table", "@endpoint",
)
VOCAB: tuple[str, ...] = SPECIALS + PRINTABLE + COMPOUND
VOCAB_SIZE = len(VOCAB)
TOKEN_TO_ID: dict[str, int] = {tok: i for i, tok in enumerate(VOCAB)}

assert VOCAB_SIZE == 133 and TOKEN_TO_ID["~"] == ord("~") - 29 and TOKEN_TO_ID[IM_END] == IM_END_ID

# Multi-character compounds, longest first: a regex alternation takes the first alternative
# that matches, so this order makes it a greedy longest match. Single characters (including
# newline and tab, which are compounds but one character long) fall through to the final
# any-character class, which also catches every character outside the vocabulary (→ [UNK]).
# `[\s\S]` means "any character" in both Python's `re` and Oniguruma (the engine `tokenizers`
# uses) without needing a dot-all flag, whose syntax differs between the two.
_MULTI = sorted((t for t in COMPOUND if len(t) > 1), key=lambda t: (-len(t), t))
TOKEN_PATTERN = "|".join(re.escape(t) for t in _MULTI) + r"|[\s\S]"
_TOKEN_RE = re.compile(TOKEN_PATTERN)



def encode(text: str) -> list[int]:
    """Token ids of `text`: greedy longest match, one [UNK] per out-of-vocabulary character."""
    get = TOKEN_TO_ID.get
    return [get(piece, UNK_ID) for piece in _TOKEN_RE.findall(text)]


def decode(ids, skip_special: bool = False) -> str:
    """Text of `ids`; [PAD]/[UNK]/[EOS] appear literally unless `skip_special`."""
    ids = [int(i) for i in ids]
    bad = [i for i in ids if not 0 <= i < VOCAB_SIZE]
    if bad:  # a negative id (e.g. the -100 label mask) would otherwise index from the end
        raise ValueError(f"ids outside the {VOCAB_SIZE}-token vocabulary: {bad[:5]}")
    return "".join(VOCAB[i] for i in ids if not (skip_special and i <= EOS_ID))


def tokens(text: str) -> list[str]:
    """The vocabulary strings `text` splits into (for inspection and docs)."""
    return [VOCAB[i] for i in encode(text)]


def _backend_tokenizer():
    """The `tokenizers.Tokenizer` pipeline that reproduces `encode` exactly."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab=dict(TOKEN_TO_ID), unk_token=UNK))
    # No normaliser: newline, tab and case must reach the pre-tokenizer untouched. The Split
    # with the same pattern isolates every match, and since the pattern ends in an
    # any-character class every character belongs to some match; WordLevel then maps each
    # piece to its id, unknown ones to [UNK].
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(TOKEN_PATTERN), behavior="isolated")
    tok.decoder = decoders.Fuse()  # concatenate pieces: no spaces between tokens
    return tok


def build_hf_tokenizer():
    """The VoxTokenizer as a `PreTrainedTokenizerFast` with ChatML template and special tokens.

    `split_special_tokens=True` makes the text "[EOS]" encode as five characters, exactly as the
    pure `encode` does; `<|im_start|>`/`<|im_end|>` still get ids 98/99 from the pre-tokenizer,
    so the ids of every string agree between the two forms.
    """
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    def special(text: str) -> AddedToken:
        return AddedToken(text, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False)

    fast = PreTrainedTokenizerFast(
        tokenizer_object=_backend_tokenizer(),
        pad_token=special(PAD), unk_token=special(UNK), bos_token=special(EOS), eos_token=special(IM_END),
        additional_special_tokens=[special(IM_START), special(IM_END)],
        clean_up_tokenization_spaces=False, split_special_tokens=True,
        padding_side="right",
    )
    fast.chat_template = CHATML_TEMPLATE
    return fast


def save_hf_tokenizer(out_dir: str | Path):
    """Write tokenizer.json + tokenizer_config.json (with the chat template) into `out_dir`."""
    tok = build_hf_tokenizer()
    tok.save_pretrained(str(out_dir))
    return tok
