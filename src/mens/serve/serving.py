"""What the generating routes (serve/routes/chat.py, completions.py) share, as plain functions:
the server's state (a FastAPI dependency), the body read under its cap and checked, a parsed
request turned into an engine Request (sampling, prompt and context limits, grammar mode), the
requests queued all-or-none, and their events collected into choices or streamed as
server-sent events.

Events come from the engine thread through each request's `sink` into an asyncio.Queue on the
event loop: ("delta", choice, text), ("done", choice, finish_reason, completion_tokens),
("error", message). Every choice is cancelled when its HTTP request ends, however it ends.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Annotated, Awaitable, Callable

from fastapi import Depends, Request as HTTPRequest
from fastapi.responses import StreamingResponse

from mens.serve.base_engine import ServedEngine
from mens.serve.requests import EngineStopped, QueueFull, Request, Sampling
from mens.serve.schema import APIError, ChatParams, _Params, parse_body

DEFAULT_MAX_TOKENS = 512

Jobs = list[tuple[int, tuple[Request, asyncio.Queue]]]   # [(first choice index, (request, its event queue))]


@dataclass
class ServerState:
    """What every route reads, set once on `app.state.server` by build_app."""

    engine: ServedEngine
    models: dict[str, str | None]      # served name → PEFT adapter name (None: the base as loaded)
    max_body_bytes: int
    prompt_cap: int                    # longest prompt in tokens (--max-prompt-tokens, at most the window)
    vocab_size: int                    # len(tokenizer), taken once: token ids are checked against it
    created: int = field(default_factory=lambda: int(time.time()))

    def check_model(self, name: str) -> None:
        if name not in self.models:
            raise APIError(404, f"The model '{name}' does not exist; served: {', '.join(self.models)}.",
                           param="model", code="model_not_found")


def server_state(request: HTTPRequest) -> ServerState:
    """The FastAPI dependency a route takes the server's state by."""
    return request.app.state.server


State = Annotated[ServerState, Depends(server_state)]


# ---------------------------------------------------------------- the request in

async def read_body(request: HTTPRequest, max_bytes: int) -> bytes:
    """The body, refused (413) as soon as it is known to exceed `max_bytes`."""
    too_big = APIError(413, f"The request body is larger than {max_bytes} bytes (--max-body-bytes).",
                       code="request_too_large")
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > max_bytes:
        raise too_big
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


def check_params(body: bytes, schema: type[_Params], state: ServerState) -> _Params:
    """The body parsed by `schema`, for a served model, its logit_bias keys token ids of it."""
    params = parse_body(body, schema)
    state.check_model(params.model)
    vocab_size = state.vocab_size
    for key in params.logit_bias or {}:   # schema.py checked they are digits
        if int(key) >= vocab_size:
            raise APIError(400, f"Invalid key in 'logit_bias': {key} is not a token id of this model "
                           f"(0 to {vocab_size - 1}).", param="logit_bias")
    return params


async def parse(request: HTTPRequest, schema: type[_Params], state: ServerState) -> _Params:
    return check_params(await read_body(request, state.max_body_bytes), schema, state)


def sampling(p: _Params, prompt_len: int, *, context_window: int, prompt_cap: int) -> Sampling:
    """The request's sampling, once its prompt of `prompt_len` tokens is known to fit with the
    tokens asked for (400 otherwise); max_tokens defaults to what the window leaves, at most 512."""
    asked = p.max_completion_tokens or p.max_tokens
    param = "messages" if isinstance(p, ChatParams) else "prompt"
    if prompt_len == 0:
        raise APIError(400, f"'{param}' must not be empty.", param=param)
    if prompt_len > prompt_cap:
        raise APIError(400, f"The prompt has {prompt_len} tokens; this server takes at most {prompt_cap} "
                       "(--max-prompt-tokens).", param=param, code="context_length_exceeded")
    room = context_window - prompt_len
    if room <= 0 or (asked is not None and asked > room):
        raise APIError(400, f"This model's maximum context length is {context_window} tokens; the "
                       f"prompt has {prompt_len} and {asked or 1} more were asked for.",
                       param=param, code="context_length_exceeded")
    return Sampling(max_tokens=asked or min(DEFAULT_MAX_TOKENS, room), temperature=p.temperature,
                    top_p=p.top_p, stop=p.stops(), seed=p.seed, n=p.n)


def grammar_mode(p: _Params, code_prompt: str | None, grammar) -> tuple[bool, str | None]:
    """(constrained?, whole-mode prefix or None for fence mode) for one request, under the
    server's `grammar` (a mens.grammar.Constraint, or None: never constrained)."""
    if grammar is None or p.grammar == "off":
        return False, None
    if p.grammar == "whole":
        return True, code_prompt or ""
    if p.grammar == "fence" or code_prompt is None:
        return True, None
    return True, grammar.whole_mode_prefix(code_prompt)


def new_request(state: ServerState, prompt_ids: list[int], p: _Params, code_prompt: str | None = None) -> Request:
    """An engine Request for one prompt (not yet queued; its sink is set by `submit`)."""
    engine = state.engine
    s = sampling(p, len(prompt_ids), context_window=engine.context_window, prompt_cap=state.prompt_cap)
    constrained, prefix = grammar_mode(p, code_prompt, engine.grammar)
    return Request(prompt_ids, s, sink=None, adapter=state.models[p.model], grammar=constrained,
                   grammar_prefix=prefix)


# ---------------------------------------------------------------- the engine, and the answer out

def submit(engine: ServedEngine, reqs: list[Request]) -> Jobs:
    """Queue all of `reqs` or none (429 when the queue is full, 503 when the engine is not
    running) → jobs [(first choice index, (request, its event queue))]."""
    loop, jobs = asyncio.get_running_loop(), []
    for i, req in enumerate(reqs):
        events: asyncio.Queue = asyncio.Queue()
        req.sink = lambda ev, events=events: loop.call_soon_threadsafe(events.put_nowait, ev)
        jobs.append((i * req.sampling.n, (req, events)))
    try:
        engine.submit_all(reqs)
    except QueueFull as exc:
        raise APIError(429, f"The server is busy: {exc}. Retry shortly.", type="rate_limit_error",
                       code="queue_full") from None
    except EngineStopped as exc:
        raise APIError(503, f"The engine is not running: {exc}.", type="server_error",
                       code="engine_not_running") from None
    return jobs


async def collect(engine: ServedEngine, jobs: Jobs,
                  is_disconnected: Callable[[], Awaitable[bool]]) -> tuple[list[dict], int]:
    """Wait for every choice of every job; → (choices, completion tokens). Whatever ends this
    early — a client that hangs up (say, its timeout ran out), a failed choice — cancels the
    request's other rows rather than decoding them for nobody."""
    choices, used = [], 0
    try:
        for offset, (req, events) in jobs:
            texts, finish = [""] * req.sampling.n, [None] * req.sampling.n
            while any(f is None for f in finish):
                try:
                    ev = await asyncio.wait_for(events.get(), timeout=0.25)
                except asyncio.TimeoutError:
                    if await is_disconnected():
                        raise APIError(499, "client closed the request") from None
                    continue
                if ev[0] == "error":
                    raise APIError(500, ev[1], type="server_error")
                if ev[0] == "delta":
                    texts[ev[1]] += ev[2]
                else:
                    finish[ev[1]] = ev[2]
                    used += ev[3]
            choices += [{"index": offset + i, "text": texts[i], "finish_reason": finish[i]}
                        for i in range(req.sampling.n)]
    finally:
        engine.cancel([req for _, (req, _) in jobs])   # no-op for finished ones
    return choices, used


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def stream_events(engine: ServedEngine, jobs: Jobs, p: _Params, make_chunk, prompt_tokens: int):
    """The answer as server-sent events: a first chunk per choice, one per delta and finish
    (`make_chunk(index, text, finish, first=False)` → a chunk, or None for nothing to send
    yet), the usage chunk if asked for, then `data: [DONE]`."""
    merged: asyncio.Queue = asyncio.Queue()
    left, used = sum(req.sampling.n for _, (req, _) in jobs), 0

    async def pump(offset, events):
        while True:
            ev = await events.get()
            await merged.put((offset, ev))
            if ev[0] == "error":
                return

    pumps = [asyncio.create_task(pump(off, ev)) for off, (_, ev) in jobs]
    try:
        for off, (req, _) in jobs:
            for i in range(req.sampling.n):
                yield sse(make_chunk(off + i, None, None, first=True))
        while left:
            off, ev = await merged.get()
            if ev[0] == "error":
                yield sse(APIError(500, ev[1], type="server_error").body)
                break
            if ev[0] == "delta":
                chunk = make_chunk(off + ev[1], ev[2], None)
            else:
                left, used = left - 1, used + ev[3]
                chunk = make_chunk(off + ev[1], None, ev[2])
            if chunk is not None:  # None: nothing to send yet (a tool call still being written)
                yield sse(chunk)
        if not left and p.stream_options and p.stream_options.include_usage:
            chunk = make_chunk(0, None, None)
            chunk["choices"], chunk["usage"] = [], usage(prompt_tokens, used)
            yield sse(chunk)
        yield "data: [DONE]\n\n"
    finally:  # a client that hangs up (or a failed choice) frees the request's rows, queued or running
        engine.cancel([req for _, (req, _) in jobs])
        for t in pumps:
            t.cancel()


def stream(engine: ServedEngine, jobs: Jobs, p: _Params, make_chunk, prompt_tokens: int) -> StreamingResponse:
    return StreamingResponse(stream_events(engine, jobs, p, make_chunk, prompt_tokens),
                             media_type="text/event-stream")
