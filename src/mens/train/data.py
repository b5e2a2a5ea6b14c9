"""Training data: pairs → chat-formatted token ids with assistant-only labels → exact packed
micro-batches.

Labels follow the Hugging Face convention (`labels[i]` is the id at position i, -100 where no
loss is taken). Packing shifts them per example into `targets` (position i predicts i + 1), so
the last token of one example never predicts the first token of the next, and gives each
example position ids that restart at 0. With no 2D attention mask, transformers reads those
restarting position ids as packed sequences and builds a block-diagonal causal mask (varlen
attention under flash-attention), so packed examples never attend to each other.
"""

from __future__ import annotations

import hashlib
import random
from bisect import bisect_left
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mens.errors import MensError
from mens.chat_template import ensure_chat_template
from mens.records import Pair

IGNORE = -100
ENCODE_BATCH = 512   # conversations tokenized in one call


@dataclass
class Example:
    input_ids: list[int]
    labels: list[int]          # same length; IGNORE where no loss is taken (unshifted)

    @property
    def n_supervised(self) -> int:
        return sum(1 for t in self.labels[1:] if t != IGNORE)


# More than this share of examples cut to fit --seq-len is worth a warning (DataStats.truncation_warning).
TRUNCATION_WARN_SHARE = 0.10


@dataclass
class DataStats:
    pairs: int = 0
    dropped_min_rating: int = 0
    dropped_no_supervised_tokens: int = 0
    examples: int = 0
    raw_text_chunks: int = 0
    truncated_examples: int = 0
    truncated_prompt_tokens: int = 0
    truncated_response_tokens: int = 0
    tokens: int = 0
    supervised_tokens: int = 0
    chat_format: str = "template"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def merged(cls, parts: list["DataStats"], pairs: int) -> "DataStats":
        """The counts of `pairs` pairs built in parts (`distributed.build_in_shares`; each part's
        `pairs` began at its share's start, so messages number pairs as one build would)."""
        out = cls(chat_format=parts[0].chat_format)
        for name, value in asdict(out).items():
            if isinstance(value, int):
                setattr(out, name, sum(getattr(p, name) for p in parts))
        out.pairs = pairs
        return out

    def truncation_warning(self, seq_len: int) -> str | None:
        """A one-line warning when more than TRUNCATION_WARN_SHARE of the examples were cut to fit
        `seq_len`: a cut prompt can lose what the response answers (the quickstart's synthetic
        pairs at 256 ids: 38 % cut, and 14 % lost a name that their response then writes)."""
        if not self.pairs or self.truncated_examples <= TRUNCATION_WARN_SHARE * self.pairs:
            return None
        return (f"mens: warning: {self.truncated_examples:,} of {self.pairs:,} training examples "
                f"({self.truncated_examples / self.pairs:.0%}) are longer than --seq-len {seq_len} and were cut "
                f"({self.truncated_prompt_tokens:,} prompt and {self.truncated_response_tokens:,} response tokens "
                "dropped); a longer --seq-len keeps them whole")


@dataclass
class Batch:
    """One micro-batch: [B, L] tensors; `targets` are already shifted."""

    input_ids: "object"
    position_ids: "object"
    targets: "object"
    n_supervised: int
    n_tokens: int


# ---------------------------------------------------------------- pairs → examples

def _render(tokenizer, messages, generation_prompt: bool = False, tools=None) -> str:
    if not messages:
        return ""
    # `tools` go to the template as TRL and serving pass them (templates that know none ignore them).
    return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt)


def encode_text(pair: Pair, tokenizer) -> tuple[Example, int, int]:
    """A plain `text` row: every token supervised, the end-of-text token appended (as TRL does
    for language-modelling data) so the model learns where a document stops."""
    ids = list(tokenizer(pair.text, add_special_tokens=False)["input_ids"])
    if tokenizer.eos_token_id is not None and (not ids or ids[-1] != tokenizer.eos_token_id):
        ids.append(tokenizer.eos_token_id)
    return Example(ids, list(ids)), 0, 0


@dataclass
class Rendered:
    """One conversation as the chat template writes it, with the character spans of its
    supervised (assistant) turns and where the last turn's header starts."""

    text: str
    spans: list[tuple[int, int]]
    header_start: int


def render_pair(pair: Pair, tokenizer, system_prompt: str | None = None) -> Rendered:
    msgs = pair.chat(system_prompt)
    tools = pair.tools
    full = _render(tokenizer, msgs, tools=tools)
    spans: list[tuple[int, int]] = []
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        prefix = _render(tokenizer, msgs[:i], generation_prompt=True, tools=tools)
        upto = full if i == len(msgs) - 1 else _render(tokenizer, msgs[: i + 1], tools=tools)
        # Templates that rewrite earlier turns (e.g. strip reasoning) are not prefix-stable;
        # such earlier turns are simply not supervised. The last turn always is.
        if full.startswith(upto) and upto.startswith(prefix):
            spans.append((len(prefix), len(upto.rstrip())))
    if not spans or spans[-1][1] != len(full.rstrip()):
        raise MensError("the chat template does not render the assistant turn as a suffix",
                        pair.source or "pair", "use a tokenizer with a standard chat template")
    return Rendered(full, spans, len(_render(tokenizer, msgs[:-1], tools=tools)))


def label_rendered(r: Rendered, ids: list[int], offsets: list[tuple[int, int]]) -> tuple[Example, int, int]:
    """Labels from the tokens' character offsets: a token is supervised when it starts inside a
    span. Returns the example, the index of the first token of the last assistant turn and the
    index where that turn's header starts (the truncation rule keeps the header with the
    response)."""
    starts = [st for st, _ in offsets]
    # Byte-level BPE offsets never go back; should a tokenizer's do, look at every token instead.
    ordered = all(a <= b for a, b in zip(starts, starts[1:]))

    def tokens_from(char: int) -> int:  # first token with a non-empty extent starting at or after char
        j = bisect_left(starts, char) if ordered else 0
        while j < len(offsets) and not (offsets[j][1] > offsets[j][0] and offsets[j][0] >= char):
            j += 1
        return j

    labels = [IGNORE] * len(ids)
    for a, b in r.spans:
        lo, hi = (bisect_left(starts, a), bisect_left(starts, b)) if ordered else (0, len(ids))
        for j in range(lo, hi):
            st, en = offsets[j]
            if en > st and a <= st < b:
                labels[j] = ids[j]
    resp_at = tokens_from(r.spans[-1][0])
    header_at = min(tokens_from(r.header_start), resp_at)
    return Example(list(ids), labels), resp_at, header_at


def encode_pair(pair: Pair, tokenizer, system_prompt: str | None = None) -> tuple[Example, int, int]:
    """Tokenize one conversation. Returns the example, the index of the first token of the last
    assistant turn, and the index where that turn's header (e.g. `<|im_start|>assistant\\n`)
    starts — the truncation rule keeps the header with the response. A text row is supervised on
    every token (`encode_text`)."""
    if pair.text is not None:
        return encode_text(pair, tokenizer)
    r = render_pair(pair, tokenizer, system_prompt)
    # The rendered template is the whole text: templates that want a BOS write it themselves, and
    # serving renders prompts the same way (apply_chat_template adds no special tokens either).
    enc = tokenizer(r.text, add_special_tokens=False, return_offsets_mapping=True)
    return label_rendered(r, enc["input_ids"], enc["offset_mapping"])


def truncate(ex: Example, resp_at: int, header_at: int, seq_len: int) -> tuple[Example, int, int]:
    """Fit an example in `seq_len` tokens, keeping the start of the prompt and the whole response
    when it can; otherwise keep a quarter of the window of prompt and cut the response's end.
    Returns the example and the prompt / response tokens cut."""
    n = len(ex.input_ids)
    if n <= seq_len:
        return ex, 0, 0
    body = list(range(0, header_at))
    header = list(range(header_at, resp_at))[: seq_len // 2]
    resp = list(range(resp_at, n))
    if len(resp) + len(header) + min(len(body), 1) <= seq_len:
        keep_body = body[: seq_len - len(resp) - len(header)]
        keep_resp = resp
    else:
        keep_body = body[: min(len(body), seq_len // 4)]
        keep_resp = resp[: max(0, seq_len - len(keep_body) - len(header))]
    keep = keep_body + header + keep_resp
    cut_prompt = resp_at - len(keep_body) - len(header)
    cut_resp = len(resp) - len(keep_resp)
    return Example([ex.input_ids[i] for i in keep], [ex.labels[i] for i in keep]), cut_prompt, cut_resp


def only_last_k(ex: Example, k: int) -> Example:
    """`--ce-last-k`: supervise only the last k supervised tokens."""
    keep = [i for i, t in enumerate(ex.labels) if t != IGNORE][-k:]
    labels = [IGNORE] * len(ex.labels)
    for i in keep:
        labels[i] = ex.labels[i]
    return Example(ex.input_ids, labels)


def build_examples(pairs: list[Pair], tokenizer, seq_len: int, *, system_prompt: str | None = None,
                   ce_last_k: int | None = None, min_rating: int | None = None,
                   stats: DataStats | None = None) -> tuple[list[Example], DataStats]:
    from jinja2 import TemplateError

    stats = stats or DataStats()
    stats.chat_format = ensure_chat_template(tokenizer)
    out: list[Example] = []
    # Render every conversation first, then tokenize them in batches: one call per pair cost
    # more than half of the 16 s that 20,000 pairs took to prepare.
    kept: list[Pair | Rendered] = []
    for pair in pairs:
        stats.pairs += 1
        if min_rating is not None and pair.rating is not None and pair.rating < min_rating:
            stats.dropped_min_rating += 1
            continue
        if pair.text is not None:
            kept.append(pair)
            continue
        try:
            kept.append(render_pair(pair, tokenizer, system_prompt))
        except TemplateError as err:  # a template that does not compile, or raises on this row
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise MensError(f"the chat template fails on pair {stats.pairs}: {first}", pair.source,
                            "fix the template (--chat-template, or the model's own) or the pair") from None
    for at in range(0, len(kept), ENCODE_BATCH):
        chunk = kept[at:at + ENCODE_BATCH]
        texts = [r.text for r in chunk if isinstance(r, Rendered)]
        enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True) if texts else None
        n = 0
        for item in chunk:
            if isinstance(item, Rendered):
                ex, resp_at, header_at = label_rendered(item, enc["input_ids"][n], enc["offset_mapping"][n])
                n += 1
            else:
                ex, resp_at, header_at = encode_text(item, tokenizer)
            if (fitted := _fit(ex, resp_at, header_at, seq_len, ce_last_k, stats)) is not None:
                out.append(fitted)
    _count(out, stats)
    return out, stats


def _fit(ex: Example, resp_at: int, header_at: int, seq_len: int, ce_last_k: int | None,
         stats: DataStats) -> Example | None:
    """An encoded example cut to seq_len (counted), or None when no supervised token is left."""
    ex, cut_prompt, cut_resp = truncate(ex, resp_at, header_at, seq_len)
    if cut_prompt or cut_resp:
        stats.truncated_examples += 1
        stats.truncated_prompt_tokens += cut_prompt
        stats.truncated_response_tokens += cut_resp
    if ce_last_k:
        ex = only_last_k(ex, ce_last_k)
    if ex.n_supervised == 0:
        stats.dropped_no_supervised_tokens += 1
        return None
    return ex


def raw_examples(chunks: list[list[int]], stats: DataStats) -> list[Example]:
    """Raw-text chunks are supervised on every token."""
    out = [Example(list(c), list(c)) for c in chunks if len(c) > 1]
    stats.raw_text_chunks += len(out)
    _count(out, stats)
    return out


def _count(examples: list[Example], stats: DataStats) -> None:
    stats.examples += len(examples)
    stats.tokens += sum(len(e.input_ids) for e in examples)
    stats.supervised_tokens += sum(e.n_supervised for e in examples)


def split_validation(pairs: list[Pair], fraction: float, seed: int) -> tuple[list[Pair], list[Pair]]:
    """A seeded random hold-out; none when the fraction would give less than one pair."""
    n_val = int(len(pairs) * fraction)
    if n_val < 1 or len(pairs) - n_val < 1:
        return pairs, []
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    val_idx = set(order[:n_val])
    return [p for i, p in enumerate(pairs) if i not in val_idx], [pairs[i] for i in sorted(val_idx)]


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---------------------------------------------------------------- examples → packed batches

@dataclass
class _Row:
    input_ids: list[int] = field(default_factory=list)
    position_ids: list[int] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)

    def add(self, ex: Example) -> None:
        self.input_ids += ex.input_ids
        self.position_ids += range(len(ex.input_ids))
        self.targets += ex.labels[1:] + [IGNORE]


def pack_rows(examples: list[Example], seq_len: int, packing: bool = True) -> list[_Row]:
    """Next-fit packing over a small window of open rows (deterministic for a given order);
    without packing, one example per row."""
    rows: list[_Row] = []
    open_rows: list[_Row] = []
    for ex in examples:
        n = len(ex.input_ids)
        target = None
        if packing:
            target = next((r for r in open_rows if len(r.input_ids) + n <= seq_len), None)
        if target is None:
            target = _Row()
            rows.append(target)
            if packing:
                open_rows = (open_rows + [target])[-8:]
        target.add(ex)
    return rows


def collate(rows: list[_Row], pad_id: int) -> Batch:
    import numpy as np
    import torch

    width = max(len(r.input_ids) for r in rows)
    ids, pos, tgt = [], [], []
    for r in rows:
        pad = width - len(r.input_ids)
        ids.append(r.input_ids + [pad_id] * pad)
        # Padding is its own segment (positions restart), so no real token attends to it.
        pos.append(r.position_ids + list(range(pad)))
        tgt.append(r.targets + [IGNORE] * pad)
    # Through numpy: torch.tensor on nested lists costs ~3x more, and an epoch of the quickstart
    # is ~10,000 micro-batches collated before the first step.
    ids_t, pos_t, targets = (torch.from_numpy(np.array(x, dtype=np.int64)) for x in (ids, pos, tgt))
    return Batch(ids_t, pos_t, targets, int((targets != IGNORE).sum()), sum(len(r.input_ids) for r in rows))


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The order epoch `epoch` visits `n` examples in (bench/train_vs_trl.py gives TRL the same)."""
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


def epoch_batches(examples: list[Example], seq_len: int, micro_batch: int, seed: int, epoch: int,
                  pad_id: int, packing: bool = True, shuffle: bool = True) -> list[Batch]:
    """The micro-batches of one epoch: a seeded shuffle (seed, epoch), packed, grouped. The same
    arguments always give the same batches, which is what makes resume exact."""
    order = epoch_order(len(examples), seed, epoch) if shuffle else range(len(examples))
    rows = pack_rows([examples[i] for i in order], seq_len, packing)
    return [collate(rows[i:i + micro_batch], pad_id) for i in range(0, len(rows), micro_batch)]
