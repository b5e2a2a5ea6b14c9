"""The serving engine's KV cache: built from the model's config, so every layer gets the kind of
cache its attention needs (full, sliding-window, linear-attention state), and the two row tricks
continuous batching plays on it — joining a prefilled batch to the running one, and dropping
finished rows — done for each kind of layer.

The engine lays a batch out by columns: each row is left-padded, so every row's real tokens end
at the last column and two columns are as far apart as the tokens in them. That is what makes
the tricks exact:
- full attention: keys/values are (batch, heads, columns, dim); rows are left-padded to a common
  width when joined, and leading columns that are padding in every row are cut;
- sliding-window attention keeps every column (a full-attention layer marked sliding, so the
  model's mask applies the window to column distances): transformers' own sliding layer keeps
  only the last window of one shared length, which a left-padded join cannot line up. Exact, at
  the memory of full attention;
- linear attention (Gated DeltaNet: Qwen3.5, Qwen3-Next) keeps a fixed-size state per row (conv
  window, recurrent state): rows are joined and dropped, nothing to pad — exact only where the
  model zeroes padded positions before they reach the state, which EXACT_PADDED_LINEAR lists.

A model with any other kind of layer (Mamba states whose padding leaks, indexed or compressed
attention, chunked attention, whose chunks count from the row's first token) is served one
request at a time (`row_batching(config)` says why): never joined, never cut, so exact whatever
the cache holds.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer, DummyLayer, LinearAttentionLayer

# Linear-attention families whose left-padded prefill equals one row on its own (the model zeroes
# padded positions before its convolution and recurrence: transformers' create_recurrent_attention_mask),
# proven family by family in tests/serve/test_serve_families.py. The next family: one entry and one test row.
EXACT_PADDED_LINEAR = frozenset({"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"})


class SlidingLayerKeptWhole(DynamicLayer):
    """A sliding-window layer that keeps every column: the model's sliding mask does the windowing."""

    is_sliding = True


def new_cache(config) -> DynamicCache:
    """An empty cache with one layer of the right kind per model layer (transformers' own choice
    from the config, sliding layers kept whole). A config with no layer structure to read gets
    transformers' default, full-attention layers made as they are used."""
    cache = DynamicCache(config=config)
    cache.layers = [SlidingLayerKeptWhole() if type(layer) is DynamicSlidingWindowLayer else layer
                    for layer in cache.layers]
    return cache


def row_batching(config) -> str | None:
    """None when the engine may join and drop rows of this model's cache exactly (continuous
    batching); otherwise why not (the engine then serves one request at a time)."""
    text = config.get_text_config(decoder=True)
    family = getattr(text, "model_type", "?")
    for index, layer in enumerate(new_cache(config).layers):
        kind = type(layer)
        if kind in (DynamicLayer, SlidingLayerKeptWhole, DummyLayer):
            continue
        if kind is LinearAttentionLayer and family in EXACT_PADDED_LINEAR:
            continue
        what = (text.layer_types[index] if getattr(text, "layer_types", None) else kind.__name__)
        return f"{family} layer {index} ({what}) keeps a cache the engine does not join row by row"
    if getattr(text, "attention_chunk_size", None):
        return f"{family} attends in chunks counted from each row's first token, which left padding shifts"
    return None


def _linear_states(layer):
    """A linear-attention layer's per-row state tensors, as (dict, key) slots."""
    if not isinstance(layer, LinearAttentionLayer):
        return []
    return [(states, i) for states in (layer.conv_states, layer.recurrent_states)
            for i, t in states.items() if t is not None]


def join(cache, mask, new_cache_, new_mask):
    """Concatenate two batches' caches along the batch, left-padding the narrower one's columns.

    All or nothing: every joined tensor is built before the running cache is touched, so a
    failure part-way (out of memory on a GPU) leaves the running batch as it was and fails only
    the newcomers (the serving loop's promise)."""
    if cache is None:
        return new_cache_, new_mask
    a, b = mask.shape[1], new_mask.shape[1]
    width = max(a, b)

    def pad(t: torch.Tensor, n: int) -> torch.Tensor:  # left-pad dim -2 (columns) with zeros
        return t if n == 0 else torch.cat([t.new_zeros(*t.shape[:-2], n, t.shape[-1]), t], dim=-2)

    joined = []
    for old, new in zip(cache.layers, new_cache_.layers):
        kv = None
        if isinstance(old, DynamicLayer) and old.is_initialized:
            kv = (torch.cat([pad(old.keys, width - a), pad(new.keys, width - b)], dim=0),
                  torch.cat([pad(old.values, width - a), pad(new.values, width - b)], dim=0))
        states = [torch.cat([slot[key], new_slot[key]], dim=0)
                  for (slot, key), (new_slot, _) in zip(_linear_states(old), _linear_states(new))]
        joined.append((kv, states))
    mask = torch.cat([torch.nn.functional.pad(mask, (width - a, 0)),
                      torch.nn.functional.pad(new_mask, (width - b, 0))], dim=0)
    for layer, (kv, states) in zip(cache.layers, joined):
        if kv is not None:
            layer.keys, layer.values = kv
        for (slot, key), t in zip(_linear_states(layer), states):
            slot[key] = t
    return cache, mask


def keep_rows(cache, mask, keep: list[int]):
    """Keep only rows `keep` (in that order), then cut leading columns that are padding in all of them."""
    idx = torch.tensor(keep, device=mask.device)
    mask = mask[idx]
    first = int((mask.sum(0) > 0).nonzero()[0])
    mask = mask[:, first:]
    for layer in cache.layers:
        if isinstance(layer, DynamicLayer) and layer.is_initialized:
            layer.keys = layer.keys[idx, :, first:]
            layer.values = layer.values[idx, :, first:]
        for slot, key in _linear_states(layer):
            slot[key] = slot[key][idx]
    return cache, mask
