"""`mens serve --engine llamacpp`: the same OpenAI-compatible API (serve/app.py) over llama.cpp,
through llama-cpp-python, for CPU users.

MODEL_OR_RUN is a .gguf file, or a run or model dir exported to GGUF first and cached
(serve/gguf_model.py, with the wrapped llama.cpp model and tokenizer).

The engine is a BaseEngine (serve/base_engine.py), as the mens engine is: the queue,
cancellation, stats and per-token handling are shared, so `max_tokens`, stop strings, the end
tokens (llama.cpp's end-of-generation set), streaming and usage mean what they mean there. One
background thread owns the llama.cpp context and batches continuously through llama.cpp's C API
(llama-cpp-python's ctypes bindings): up to `--max-batch` choices decode together, each its own
sequence in one KV cache, newcomers prefilled in the same steps. Sampling: temperature then
top_p (OpenAI's order), seeded per choice (seed + i) as the mens engine does; llama.cpp's own
top-k, min-p and penalties are not used.
"""

from __future__ import annotations

import importlib.util
import random
import time
from dataclasses import dataclass
from pathlib import Path

from mens.errors import MensError
from mens.progress import say
from mens.serve.base_engine import BaseEngine
from mens.serve.gguf_model import GGUFModel, GGUFTokenizer, cpu_threads, resolve_gguf, trained_context
from mens.serve.requests import Seq

MAX_CONTEXT = 8192      # a request's window at most (llama.cpp allocates its KV cache up front)
MAX_KV_TOKENS = 32768   # the KV cache all running choices share, unless one window is larger
INSTALL = "pip install 'mens[export]'"


def check_available() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise MensError("--engine llamacpp needs llama-cpp-python", "--engine", INSTALL)


@dataclass
class _Row:
    """One choice in the llama.cpp batch: its KV-cache sequence id, its sampler, and where it is."""

    seq: Seq
    slot: int
    sampler: object
    reserved: int              # KV cells held for it: prompt + max_tokens
    fed: int = 0               # tokens of the prompt (then of the answer) already in the KV cache


# ---------------------------------------------------------------- the engine

class LlamaCppEngine(BaseEngine):
    """A BaseEngine (serve/base_engine.py) with llama.cpp decoding: the queue (submit_all, cancel,
    the 429 bound), liveness, stop, stats and the per-token handling (_accept: end tokens, stop
    strings, max_tokens, the context window, streaming with held-back stop prefixes) are the
    base's; _schedule is llama.cpp's continuous batching.

    Each step is one llama_decode over one llama_batch: the next token of every running choice,
    then as many prompt tokens of newcomers as fit in `n_batch` (chunked prefill; a prompt whose
    last token is in the batch gets its first token sampled from it). Every choice has its own
    sequence in one unified KV cache of `kv_tokens` cells, admitted only while the cells it may
    need (prompt + max_tokens) are free, so a decode never runs out of room; a choice that ends
    frees its sequence at once."""

    def __init__(self, gguf: str | Path, *, max_batch: int = 8, queue_size: int = 64, n_ctx: int | None = None,
                 n_threads: int | None = None, n_batch: int = 512):
        self.model = GGUFModel(gguf)
        lib = self.lib = self.model.lib
        self.gguf, self.threads = Path(gguf), n_threads or cpu_threads()
        window = n_ctx or min(trained_context(gguf) or MAX_CONTEXT, MAX_CONTEXT)
        # `token in eos_ids` asks the model: llama.cpp's end-of-generation set
        super().__init__(GGUFTokenizer(self.model), context_window=window, queue_size=queue_size, device="cpu",
                         max_batch=min(max_batch, lib.llama_max_parallel_sequences()), eos_ids=self.model)
        self.kv_tokens = min(window * self.max_batch, max(window, MAX_KV_TOKENS))
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = self.kv_tokens, n_batch, n_batch
        params.n_seq_max, params.kv_unified = self.max_batch, True
        params.n_threads = params.n_threads_batch = self.threads
        self.ctx = lib.llama_init_from_model(self.model.model, params)
        if not self.ctx:
            raise MensError(f"llama.cpp cannot make a context of {self.kv_tokens} tokens", str(gguf),
                            "lower --max-batch (memory)")
        self.memory = lib.llama_get_memory(self.ctx)
        self.n_batch = n_batch
        self.batch = lib.llama_batch_init(n_batch, 0, 1)
        self._partial = None                      # (the head request, its next choice) when some run already
        self._start("mens-llamacpp")

    def stop(self) -> None:
        super().stop()
        if not self._thread.is_alive() and self.ctx:   # the loop has let go of them
            self.lib.llama_batch_free(self.batch)
            self.lib.llama_free(self.ctx)
            self.lib.llama_model_free(self.model.model)
            self.ctx = None

    # ------------------------------------------------------------------ scheduler loop

    def _schedule(self) -> None:
        rows: list[_Row] = []
        while True:
            with self._cond:
                while not self._stop and not rows and not self._waiting:
                    self._cond.wait()
                if self._stop:
                    break
                rows += self._admit_rows(rows)
            rows = self._retire_rows(rows)
            if not rows:
                continue
            try:
                sampling = self._fill_batch(rows)
                if self.lib.llama_decode(self.ctx, self.batch) != 0:
                    raise RuntimeError("llama_decode failed")
            except Exception as exc:          # fails the requests in this step; the engine goes on
                self._fail([r.seq for r in rows], exc)
                rows = self._retire_rows(rows)
                continue
            for i, r in sampling:
                try:
                    self._accept(r.seq, int(self.lib.llama_sampler_sample(r.sampler, self.ctx, i)))
                except Exception as exc:       # this choice's request fails; the others go on
                    self._fail([r.seq], exc)
            rows = self._retire_rows(rows)
        for r in rows:
            r.seq.req.emit(("error", "the server is shutting down"))
        self._retire_rows(rows, everything=True)

    def _admit_rows(self, rows: list[_Row]) -> list[_Row]:
        """Choices of waiting requests, in order, while a sequence and the KV cells each may need
        (prompt + max_tokens) are free. A request with more choices than fit starts the rest later."""
        out: list[_Row] = []
        busy = {r.slot for r in rows}
        free = [i for i in range(self.max_batch) if i not in busy]
        used = sum(r.reserved for r in rows)
        while self._waiting and len(out) < len(free):
            req = self._waiting[0]
            if req.cancelled:
                self._waiting.popleft()
                continue
            start = self._partial[1] if self._partial and self._partial[0] is req else 0
            need = len(req.prompt_ids) + req.sampling.max_tokens
            index = start
            while index < req.sampling.n and len(out) < len(free) and used + need <= self.kv_tokens:
                out.append(_Row(Seq(req, index), free[len(out)], self._sampler(req.sampling, index), need))
                used, index = used + need, index + 1
            self.stats["sequences"] += index - start
            if index < req.sampling.n:
                self._partial = (req, index)
                break
            self._waiting.popleft()
            self._partial = None
        return out

    def _sampler(self, sp, index: int):
        """temperature then top_p (OpenAI's order) then a draw seeded seed + index; greedy at 0."""
        lib = self.lib
        chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
        if sp.temperature <= 0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_greedy())
            return chain
        seed = (sp.seed + index if sp.seed is not None else random.getrandbits(32)) % (2**32 - 1)
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_temp(sp.temperature))
        if sp.top_p < 1.0:
            lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_top_p(sp.top_p, 1))
        lib.llama_sampler_chain_add(chain, lib.llama_sampler_init_dist(seed))   # 2**32 - 1: "random"
        return chain

    def _fill_batch(self, rows: list[_Row]) -> list[tuple[int, _Row]]:
        """The next step's tokens into self.batch → [(batch index, row)] whose logits are sampled."""
        b, n, sampling = self.batch, 0, []
        decoding = [r for r in rows if r.seq.pending is not None]
        for r in decoding:                                   # one token each: the last one sampled
            n = self._put(n, r.seq.pending, r.fed, r.slot, True)
            r.fed += 1
            sampling.append((n - 1, r))
        prefilling = False
        for r in rows:                                       # then prompts, as far as they fit
            prompt = r.seq.req.prompt_ids
            if r.seq.pending is not None or r.fed >= len(prompt) or n >= self.n_batch:
                continue
            take = min(len(prompt) - r.fed, self.n_batch - n)
            for k in range(take):
                last = r.fed + k == len(prompt) - 1
                n = self._put(n, prompt[r.fed + k], r.fed + k, r.slot, last)
                if last:
                    sampling.append((n - 1, r))
            r.fed += take
            prefilling = True
        b.n_tokens = n
        if decoding:
            self._count_step(len(decoding))
        self.stats["prefills"] += prefilling
        return sampling

    def _put(self, n: int, token: int, pos: int, slot: int, logits: bool) -> int:
        b = self.batch
        b.token[n], b.pos[n], b.n_seq_id[n], b.logits[n] = token, pos, 1, logits
        b.seq_id[n][0] = slot
        return n + 1

    def _retire_rows(self, rows: list[_Row], everything: bool = False) -> list[_Row]:
        """Free the sequence and sampler of every row that ended (finished, failed, cancelled)."""
        keep = []
        for r in rows:
            if not everything and r.seq.finish is None and not r.seq.req.cancelled:
                keep.append(r)
                continue
            if r.seq.finish is None and r.seq.req.cancelled:
                self.stats["cancelled"] += 1
            self.lib.llama_memory_seq_rm(self.memory, r.slot, -1, -1)
            self.lib.llama_sampler_free(r.sampler)
        return keep

    def _text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)


def build_llamacpp_server(model_or_gguf: str, *, quant: str = "f16", name: str | None = None,
                          api_key: str | None = None, max_batch: int = 8, queue_size: int = 64,
                          max_body_bytes: int | None = None,
                          max_prompt_tokens: int | None = None):
    """Resolve (export if needed) the GGUF, start the engine, build the app → (app, engine)."""
    from mens.serve.app import DEFAULT_MAX_BODY_BYTES, build_app

    check_available()
    gguf = resolve_gguf(model_or_gguf, quant)
    start = time.perf_counter()
    engine = LlamaCppEngine(gguf, max_batch=max_batch, queue_size=queue_size)
    say(f"serve: llama.cpp loaded {gguf} in {time.perf_counter() - start:.1f}s "
        f"(context {engine.context_window} tokens, KV cache {engine.kv_tokens} tokens, {engine.threads} threads)")
    src = Path(model_or_gguf)
    served = name or (src.stem if src.is_file() else src.resolve().name)
    engine.models = [served]
    return build_app(engine, {served: None}, api_key=api_key, max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES,
                     max_prompt_tokens=max_prompt_tokens), engine
