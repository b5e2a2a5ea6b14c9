"""The OpenAI-compatible HTTP API over the batching engine.

Routes: GET /health, GET /v1/models, POST /v1/chat/completions, POST /v1/completions (both with
`stream: true` as server-sent events in OpenAI's chunk format, ending with `data: [DONE]`), and
GET /stats (the engine's counters: batch sizes, queue rejections, grammar corrections).
Every error is OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, with the
status OpenAI uses, and never takes the server down.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Literal

from fastapi import FastAPI, Request as HTTPRequest
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from mens.serve.engine import Engine, QueueFull, Request, Sampling, next_id

DEFAULT_MAX_TOKENS = 512


class APIError(Exception):
    def __init__(self, status: int, message: str, type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.body = status, {"error": {"message": message, "type": type, "param": param, "code": code}}


class _Params(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    n: int = Field(default=1, ge=1, le=16)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    # mens extension (send with the openai client's `extra_body`), used only under --grammar:
    # auto = fence mode for chat, whole mode for a completion whose prompt is viable code
    grammar: Literal["auto", "fence", "whole", "off"] = "auto"


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[dict[str, Any]] | None = ""


class ChatParams(_Params):
    messages: list[_Message] = Field(min_length=1)


class CompletionParams(_Params):
    prompt: str | list[str]
    echo: bool = False


def build_app(engine: Engine, models: dict[str, str | None], *, api_key: str | None = None) -> FastAPI:
    """`models` maps each served name to its PEFT adapter name (None: the base as loaded)."""
    app = FastAPI(title="mens", docs_url=None, redoc_url=None)
    created = int(time.time())
    tok = engine.tokenizer

    @app.exception_handler(APIError)
    async def _api_error(_, exc: APIError):
        return JSONResponse(exc.body, status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_, exc: StarletteHTTPException):
        return JSONResponse(APIError(exc.status_code, str(exc.detail)).body, status_code=exc.status_code)

    def check_key(request: HTTPRequest) -> None:
        if api_key and request.headers.get("authorization", "") != f"Bearer {api_key}":
            raise APIError(401, "Incorrect or missing API key; send `Authorization: Bearer <key>`.",
                           code="invalid_api_key")

    async def parse(request: HTTPRequest, schema: type[_Params]) -> _Params:
        check_key(request)
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise APIError(400, f"The request body is not valid JSON: {exc}") from None
        try:
            params = schema.model_validate(body)
        except ValidationError as exc:
            err = exc.errors()[0]
            param = ".".join(str(p) for p in err["loc"]) or None
            raise APIError(400, f"Invalid value for '{param}': {err['msg']}", param=param) from None
        if params.model not in models:
            raise APIError(404, f"The model '{params.model}' does not exist; served: {', '.join(models)}.",
                           param="model", code="model_not_found")
        return params

    def sampling(p: _Params, prompt_len: int) -> Sampling:
        asked = p.max_completion_tokens or p.max_tokens
        room = engine.context_window - prompt_len
        if room <= 0 or (asked is not None and asked > room):
            raise APIError(400, f"This model's maximum context length is {engine.context_window} tokens; the "
                           f"prompt has {prompt_len} and {asked or 1} more were asked for.",
                           param="messages" if isinstance(p, ChatParams) else "prompt",
                           code="context_length_exceeded")
        stop = (p.stop,) if isinstance(p.stop, str) else tuple(s for s in (p.stop or ()) if s)
        return Sampling(max_tokens=asked or min(DEFAULT_MAX_TOKENS, room), temperature=p.temperature,
                        top_p=p.top_p, stop=stop, seed=p.seed, n=p.n)

    def grammar_mode(p: _Params, code_prompt: str | None) -> tuple[bool, str | None]:
        """(constrained?, whole-mode prefix or None for fence mode) for one request."""
        if engine.grammar is None or p.grammar == "off":
            return False, None
        if p.grammar == "whole":
            return True, code_prompt or ""
        if p.grammar == "fence" or code_prompt is None:
            return True, None
        return True, engine.grammar.whole_mode_prefix(code_prompt)

    def submit(prompt_ids: list[int], p: _Params, code_prompt: str | None = None) -> tuple[Request, asyncio.Queue]:
        loop, events = asyncio.get_running_loop(), asyncio.Queue()
        constrained, prefix = grammar_mode(p, code_prompt)
        req = Request(prompt_ids, sampling(p, len(prompt_ids)),
                      sink=lambda ev: loop.call_soon_threadsafe(events.put_nowait, ev),
                      adapter=models[p.model], grammar=constrained, grammar_prefix=prefix)
        try:
            engine.submit(req)
        except QueueFull as exc:
            raise APIError(429, f"The server is busy: {exc}. Retry shortly.", type="rate_limit_error",
                           code="queue_full") from None
        return req, events

    async def collect(jobs, request: HTTPRequest) -> tuple[list[dict], int]:
        """Wait for every choice of every job; → (choices, completion tokens). A client that hangs
        up (say, its timeout ran out) has its rows cancelled rather than decoded for nobody."""
        choices, used = [], 0
        for offset, (req, events) in jobs:
            texts, finish = [""] * req.sampling.n, [None] * req.sampling.n
            while any(f is None for f in finish):
                try:
                    ev = await asyncio.wait_for(events.get(), timeout=0.25)
                except asyncio.TimeoutError:
                    if await request.is_disconnected():
                        for _, (r, _) in jobs:
                            r.cancelled = True
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
        return choices, used

    def usage(prompt_tokens: int, completion_tokens: int) -> dict:
        return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens}

    def stream(jobs, p: _Params, make_chunk, prompt_tokens: int) -> StreamingResponse:
        async def events_out():
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
                        yield _sse(make_chunk(off + i, None, None, first=True))
                while left:
                    off, ev = await merged.get()
                    if ev[0] == "error":
                        yield _sse(APIError(500, ev[1], type="server_error").body)
                        break
                    if ev[0] == "delta":
                        yield _sse(make_chunk(off + ev[1], ev[2], None))
                    else:
                        left, used = left - 1, used + ev[3]
                        yield _sse(make_chunk(off + ev[1], None, ev[2]))
                if (p.stream_options or {}).get("include_usage"):
                    chunk = make_chunk(0, None, None)
                    chunk["choices"], chunk["usage"] = [], usage(prompt_tokens, used)
                    yield _sse(chunk)
                yield "data: [DONE]\n\n"
            finally:  # a client that hangs up frees its batch rows
                for _, (req, _) in jobs:
                    req.cancelled = True
                for t in pumps:
                    t.cancel()

        return StreamingResponse(events_out(), media_type="text/event-stream")

    @app.get("/health")
    async def health():
        return {"status": "ok", "models": list(models), "device": str(engine.device)}

    @app.get("/stats")
    async def stats():
        return engine.snapshot()

    @app.get("/v1/models")
    async def list_models(request: HTTPRequest):
        check_key(request)
        return {"object": "list", "data": [{"id": m, "object": "model", "created": created, "owned_by": "mens"}
                                           for m in models]}

    @app.post("/v1/chat/completions")
    async def chat(request: HTTPRequest):
        p = await parse(request, ChatParams)
        messages = [{"role": "system" if m.role == "developer" else m.role, "content": _content(m.content)}
                    for m in p.messages]
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt_ids = tok(text, add_special_tokens=False).input_ids
        jobs = [(0, submit(prompt_ids, p))]
        rid, now = next_id("chatcmpl"), int(time.time())
        if p.stream:
            def chunk(index, content, finish, first=False):
                delta = {"role": "assistant", "content": ""} if first else ({"content": content} if content else {})
                return {"id": rid, "object": "chat.completion.chunk", "created": now, "model": p.model,
                        "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            return stream(jobs, p, chunk, len(prompt_ids))
        choices, used = await collect(jobs, request)
        return {"id": rid, "object": "chat.completion", "created": now, "model": p.model,
                "choices": [{"index": c["index"], "message": {"role": "assistant", "content": c["text"]},
                             "logprobs": None, "finish_reason": c["finish_reason"]} for c in choices],
                "usage": usage(len(prompt_ids), used)}

    @app.post("/v1/completions")
    async def completions(request: HTTPRequest):
        p = await parse(request, CompletionParams)
        prompts = [p.prompt] if isinstance(p.prompt, str) else p.prompt
        if not prompts:
            raise APIError(400, "'prompt' must not be empty", param="prompt")
        encoded = [tok(x).input_ids for x in prompts]
        for ids in encoded:  # validate every prompt before any is queued
            sampling(p, len(ids))
        jobs = [(i * p.n, submit(ids, p, prompts[i])) for i, ids in enumerate(encoded)]
        prompt_tokens = sum(map(len, encoded))
        rid, now = next_id("cmpl"), int(time.time())
        if p.stream:
            def chunk(index, text, finish, first=False):
                return {"id": rid, "object": "text_completion", "created": now, "model": p.model,
                        "choices": [{"index": index, "text": (prompts[index // p.n] if first and p.echo else text or ""),
                                     "logprobs": None, "finish_reason": finish}]}
            return stream(jobs, p, chunk, prompt_tokens)
        choices, used = await collect(jobs, request)
        for c in choices:
            if p.echo:
                c["text"] = prompts[c["index"] // p.n] + c["text"]
            c["logprobs"] = None
        return {"id": rid, "object": "text_completion", "created": now, "model": p.model, "choices": choices,
                "usage": usage(prompt_tokens, used)}

    return app


def _content(content) -> str:
    """Message content as text: a string, or OpenAI's list of parts (text parts are joined)."""
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


def build_server(model_or_run: str, *, adapters: dict[str, str] | None = None, name: str | None = None,
                 api_key: str | None = None, max_batch: int = 8, queue_size: int = 64,
                 grammar: str | None = None, device: str = "auto", dtype: str | None = None):
    """Load the model (and adapters), start the engine, build the app → (app, engine)."""
    from mens.inference import load_model
    from mens.merge import CHATML_TEMPLATE

    model, tokenizer, info = load_model(model_or_run, adapters=adapters, device=device, dtype=dtype, name=name)
    if tokenizer.chat_template is None:  # `mens train` formats chats as ChatML when the base has no template
        tokenizer.chat_template = CHATML_TEMPLATE
    constraint = None
    if grammar:
        from mens.serve.grammar import Constraint

        constraint = Constraint.for_language(grammar)
    models = info["models"]
    engine = Engine(model, tokenizer, context_window=info["context_window"], max_batch=max_batch,
                    queue_size=queue_size, grammar=constraint,
                    mixed_adapters=any(v is not None for v in models.values()))
    engine.models = list(models)
    return build_app(engine, models, api_key=api_key), engine
