"""Batched generation with a KV cache, for the server.

One background thread owns the model. Each iteration it (1) runs one decode step for every
running sequence at once, then (2) admits waiting requests: their prompts are left-padded,
prefilled together, and their KV caches are joined to the running batch (continuous batching:
newcomers start between decode steps, nobody waits for a batch to drain). Finished sequences
leave the batch by index selection, and leading columns that have become all padding are
trimmed. Positions come from the attention mask, so padding never shifts a sequence.

Several adapters over one base share a batch: PEFT's mixed-batch LoRA takes one adapter name
per row (`__base__` for none). Tokens are streamed per sequence through the request's `sink`.

The cache is built from the model's config (serve/batch_cache.py: full, sliding-window and
linear-attention layers). A model whose cache the engine cannot join and cut exactly is served
one request at a time (`batching` says so, as do the startup line and /v1/models): its choices
decode together from one unpadded prompt, and a finished choice rides along until the last one
ends, so no row is ever inserted or removed.
"""

from __future__ import annotations

import torch

from mens.chat_template import stop_token_ids
from mens.serve.base_engine import BaseEngine
from mens.serve.batch_cache import join, keep_rows, new_cache, row_batching
from mens.serve.requests import Seq


class Engine(BaseEngine):
    """The PyTorch engine: BaseEngine's queue, stats and per-token handling, with _schedule
    batching over a transformers model's KV cache."""

    def __init__(self, model, tokenizer, *, context_window: int, max_batch: int = 8, queue_size: int = 64,
                 grammar=None, mixed_adapters: bool = False, top_candidates: int = 32,
                 max_grammar_candidates: int = 1024):
        super().__init__(tokenizer, context_window=context_window, max_batch=max_batch, queue_size=queue_size,
                         device=next(model.parameters()).device, eos_ids=stop_token_ids(model, tokenizer) or [0])
        self.model = model
        self.cache_kwarg = _cache_kwarg(model)
        self.one_at_a_time = row_batching(model.config)   # None, or why rows cannot be joined and cut
        if self.one_at_a_time is not None:
            self.batching = f"one request at a time: {self.one_at_a_time}"
        self.grammar = grammar                    # a mens.grammar.Constraint or None
        self.mixed_adapters = mixed_adapters      # pass adapter_names per row (PeftModel with adapters)
        self.active_adapter = getattr(model, "active_adapter", None) if mixed_adapters else None
        if grammar is not None:                   # built now, before the first request waits on it
            from mens.grammar import TokenChooser

            self._chooser = TokenChooser(grammar, tokenizer, self.eos_ids, top_candidates=top_candidates,
                                         max_candidates=max_grammar_candidates)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]
        self._start("mens-engine")

    # ------------------------------------------------------------------ scheduler loop

    def _schedule(self) -> None:
        running: list[Seq] = []
        cache, mask = None, None
        while True:
            with self._cond:
                while not self._stop and not running and not self._waiting:
                    self._cond.wait()
                if self._stop:
                    break
                admitted = self._admit(len(running))
            # A failed step must not kill the server: it fails the requests it was serving. A failed
            # prefill (say, out of memory on long prompts) fails only the newcomers; a row whose
            # sampling fails (see _sample) fails alone.
            try:
                if running:
                    cache, mask = self._decode_step(running, cache, mask)
            except Exception as exc:
                self._fail(running + admitted, exc)
                running, cache, mask = [], None, None
                continue
            if admitted:
                try:
                    fresh_cache, fresh_mask = self._prefill(admitted)
                    cache, mask = join(cache, mask, fresh_cache, fresh_mask)
                    running += admitted
                except Exception as exc:
                    self._fail(admitted, exc)
            try:
                running, cache, mask = self._retire(running, cache, mask)
            except Exception as exc:
                self._fail(running, exc)
                running, cache, mask = [], None, None
        for s in running:
            s.req.emit(("error", "the server is shutting down"))

    def _admit(self, n_running: int) -> list[Seq]:
        """Waiting requests that fit in the batch (a request with n choices takes n rows)."""
        out: list[Seq] = []
        while self._waiting:
            req = self._waiting[0]
            if req.cancelled:
                self._waiting.popleft()
                continue
            n = req.sampling.n
            if (n_running or out) and (self.one_at_a_time or n_running + len(out) + n > self.max_batch):
                break
            self._waiting.popleft()
            try:
                seqs = [Seq(req, i, generator=_generator(req.sampling.seed, i)) for i in range(n)]
            except Exception as exc:  # fails this request only
                self._fail([Seq(req, 0)], exc)
                continue
            out += seqs
            self.stats["sequences"] += n
        return out

    def _forward(self, seqs: list[Seq], **kwargs):
        names = [s.req.adapter or "__base__" for s in seqs]
        if self.mixed_adapters and set(names) != {self.active_adapter}:
            kwargs["adapter_names"] = names
        with torch.inference_mode():
            return self.model(use_cache=True, logits_to_keep=1, **kwargs)

    def _prefill(self, seqs: list[Seq]):
        width = max(len(s.req.prompt_ids) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for row, s in enumerate(seqs):
            p = s.req.prompt_ids
            ids[row, width - len(p):] = torch.tensor(p)
            mask[row, width - len(p):] = 1
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = new_cache(self.model.config)
        out = self._forward(seqs, input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                            position_ids=positions.to(self.device), **{self.cache_kwarg: cache},
                            cache_position=torch.arange(width, device=self.device))
        self.stats["prefills"] += 1
        self._sample(seqs, out.logits[:, -1, :])
        return _cache_of(out), mask.to(self.device)

    def _decode_step(self, seqs: list[Seq], cache, mask):
        ids = torch.tensor([[self.pad_id if s.pending is None else s.pending] for s in seqs], device=self.device)
        positions = mask.sum(-1, keepdim=True)
        mask = torch.cat([mask, torch.ones((len(seqs), 1), dtype=mask.dtype, device=mask.device)], dim=1)
        out = self._forward(seqs, input_ids=ids, attention_mask=mask, position_ids=positions,
                            **{self.cache_kwarg: cache},
                            cache_position=torch.tensor([mask.shape[1] - 1], device=self.device))
        self._count_step(len(seqs))
        self._sample(seqs, out.logits[:, -1, :])
        return _cache_of(out), mask

    def _retire(self, seqs: list[Seq], cache, mask):
        """Drop finished or cancelled rows from the batch and trim all-padding columns. One request
        at a time: its finished rows ride along (never sampled again) until the last one ends."""
        keep = [i for i, s in enumerate(seqs) if s.finish is None and not s.req.cancelled]
        if len(keep) == len(seqs) or (keep and self.one_at_a_time):
            return seqs, cache, mask
        self.stats["cancelled"] += sum(1 for s in seqs if s.finish is None and s.req.cancelled)
        if not keep:
            return [], None, None
        cache, mask = keep_rows(cache, mask, keep)
        return [seqs[i] for i in keep], cache, mask

    # ------------------------------------------------------------------ sampling and streaming

    def _sample(self, seqs: list[Seq], logits: torch.Tensor) -> None:
        logits = logits.float().cpu()
        greedy = logits.argmax(-1).tolist()
        for row, s in enumerate(seqs):
            if s.req.cancelled or s.finish is not None:   # a finished row riding along (one request at a time)
                continue
            try:
                sp = s.req.sampling
                probs = None
                if sp.temperature > 0:
                    probs = _top_p(torch.softmax(logits[row] / sp.temperature, -1), sp.top_p)
                    token = int(torch.multinomial(probs, 1, generator=s.generator))
                else:
                    token = greedy[row]
                if s.req.grammar and self._chooser is not None:
                    remaining = min(sp.max_tokens, self.context_window - len(s.req.prompt_ids)) - len(s.generated)
                    token = self._chooser.choose(s.text, s.generated, token, s.req.grammar_prefix,
                                                 probs if probs is not None else torch.softmax(logits[row], -1),
                                                 remaining)
                self._accept(s, token)
            except Exception as exc:  # this row's request fails (and leaves the batch); the others go on
                self._fail([s], exc)


def _generator(seed: int | None, choice: int) -> torch.Generator | None:
    """Choice i's generator, seeded seed + i (any int: taken modulo 2**64, torch's seed range)."""
    if seed is None:
        return None
    return torch.Generator(device="cpu").manual_seed((seed + choice) % 2**64)


# Nucleus sampling looks at the likeliest NUCLEUS_CANDIDATES ids first: sorting all of a 151,936-id
# vocabulary took 12 ms a row on one CPU thread (top-k of 1,024 and its sum: well under 1 ms).
NUCLEUS_CANDIDATES = 1024


def _top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """`probs` with everything outside the smallest prefix (likeliest first) reaching `top_p` zeroed.
    Exact: the candidates are only taken as the prefix when their mass reaches top_p (then the
    prefix lies among them); otherwise the whole vocabulary is sorted."""
    if top_p >= 1.0:
        return probs
    top, order = probs.topk(min(NUCLEUS_CANDIDATES, probs.numel()))  # likeliest first
    if top.numel() < probs.numel() and float(top.sum()) < top_p:
        top, order = probs.sort(descending=True)
    drop = top.cumsum(-1) - top > top_p  # keep the smallest prefix reaching top_p
    top = top.masked_fill(drop, 0.0)
    return torch.zeros_like(probs).scatter(-1, order, top)


def _cache_kwarg(model) -> str:
    """The name forward() takes the KV cache by: transformers 5.2x renamed `past_key_values` to
    `cache` (the old name warns on every call, and goes in 5.40); earlier 5.x know only the old."""
    import inspect

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT wrapper takes **kwargs
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


def _cache_of(out):
    """The KV cache a forward returned, under either name (see _cache_kwarg)."""
    return out["cache"] if "cache" in out else out.past_key_values
