"""The OpenAI-compatible HTTP API over the batching engine.

Routes: GET /health, GET /v1/models (and /v1/models/NAME), POST /v1/chat/completions, POST
/v1/completions (both with `stream: true` as server-sent events in OpenAI's chunk format, ending
with `data: [DONE]`), and GET /stats (the engine's counters: batch sizes, queue rejections,
grammar corrections). Chat requests with `tools` get the calls the model writes back as
`tool_calls` (serve/tools.py). Every error is OpenAI's shape, `{"error": {"message", "type",
"param", "code"}}`, with the status OpenAI uses, and never takes the server down: bad input is
a 4xx before anything is queued, a fault while generating fails that request alone (5xx), and
/health answers 503 when the engine is not running. With an API key, every route but /health
needs it.

Bodies are capped (`max_body_bytes`, 413) and prompts too (`max_prompt_tokens`, 400); the chat
template and tokenisation run in worker threads, so a large prompt never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time

from fastapi import FastAPI, Request as HTTPRequest
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException

from mens.serve.engine import Engine
from mens.serve.requests import EngineStopped, QueueFull, Request, Sampling, next_id
from mens.serve.schema import APIError, ChatParams, CompletionParams, _Params, parse_body
from mens.serve.tools import ToolCallStream, ToolUse, split_tool_calls
from mens.serve.tools import prompt as chat_prompt

DEFAULT_MAX_TOKENS = 512
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024


class RequireKey:
    """ASGI middleware: every route but /health needs `Authorization: Bearer KEY` (the scheme in
    any case), the key compared in constant time — /stats, /openapi.json and unknown paths too."""

    def __init__(self, app, api_key: str):
        self.app, self.key = app, api_key.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["path"] != "/health":
            scheme, _, token = Headers(scope=scope).get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.key):
                error = APIError(401, "Incorrect or missing API key; send `Authorization: Bearer <key>`.",
                                 code="invalid_api_key")
                response = JSONResponse(error.body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
                return await response(scope, receive, send)
        await self.app(scope, receive, send)


def build_app(engine: Engine, models: dict[str, str | None], *, api_key: str | None = None,
              max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_prompt_tokens: int | None = None) -> FastAPI:
    """`models` maps each served name to its PEFT adapter name (None: the base as loaded).
    `max_prompt_tokens` defaults to the context window."""
    app = FastAPI(title="mens", docs_url=None, redoc_url=None)
    if api_key:
        app.add_middleware(RequireKey, api_key=api_key)
    created = int(time.time())
    tok = engine.tokenizer
    prompt_cap = min(max_prompt_tokens or engine.context_window, engine.context_window)
    vocab_size = len(tok)

    @app.exception_handler(APIError)
    async def _api_error(_, exc: APIError):
        return JSONResponse(exc.body, status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_, exc: StarletteHTTPException):
        return JSONResponse(APIError(exc.status_code, str(exc.detail)).body, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _server_error(_, exc: Exception):  # a bug of ours: logged with its traceback, answered in shape
        return JSONResponse(APIError(500, f"internal error: {type(exc).__name__}", type="server_error").body,
                            status_code=500)

    def model_card(name: str) -> dict:
        return {"id": name, "object": "model", "created": created, "owned_by": "mens",
                "batching": getattr(engine, "batching", "continuous")}

    def unknown_model(name: str) -> APIError:
        return APIError(404, f"The model '{name}' does not exist; served: {', '.join(models)}.",
                        param="model", code="model_not_found")

    async def read_body(request: HTTPRequest) -> bytes:
        """The body, refused (413) as soon as it is known to exceed `max_body_bytes`."""
        too_big = APIError(413, f"The request body is larger than {max_body_bytes} bytes (--max-body-bytes).",
                           code="request_too_large")
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > max_body_bytes:
            raise too_big
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_body_bytes:
                raise too_big
            chunks.append(chunk)
        return b"".join(chunks)

    async def parse(request: HTTPRequest, schema: type[_Params]) -> _Params:
        params = parse_body(await read_body(request), schema)
        if params.model not in models:
            raise unknown_model(params.model)
        for key in params.logit_bias or {}:   # schema.py checked they are digits
            if int(key) >= vocab_size:
                raise APIError(400, f"Invalid key in 'logit_bias': {key} is not a token id of this model "
                               f"(0 to {vocab_size - 1}).", param="logit_bias")
        return params

    def sampling(p: _Params, prompt_len: int) -> Sampling:
        asked = p.max_completion_tokens or p.max_tokens
        param = "messages" if isinstance(p, ChatParams) else "prompt"
        if prompt_len == 0:
            raise APIError(400, f"'{param}' must not be empty.", param=param)
        if prompt_len > prompt_cap:
            raise APIError(400, f"The prompt has {prompt_len} tokens; this server takes at most {prompt_cap} "
                           "(--max-prompt-tokens).", param=param, code="context_length_exceeded")
        room = engine.context_window - prompt_len
        if room <= 0 or (asked is not None and asked > room):
            raise APIError(400, f"This model's maximum context length is {engine.context_window} tokens; the "
                           f"prompt has {prompt_len} and {asked or 1} more were asked for.",
                           param=param, code="context_length_exceeded")
        return Sampling(max_tokens=asked or min(DEFAULT_MAX_TOKENS, room), temperature=p.temperature,
                        top_p=p.top_p, stop=p.stops(), seed=p.seed, n=p.n)

    def grammar_mode(p: _Params, code_prompt: str | None) -> tuple[bool, str | None]:
        """(constrained?, whole-mode prefix or None for fence mode) for one request."""
        if engine.grammar is None or p.grammar == "off":
            return False, None
        if p.grammar == "whole":
            return True, code_prompt or ""
        if p.grammar == "fence" or code_prompt is None:
            return True, None
        return True, engine.grammar.whole_mode_prefix(code_prompt)

    def prepare_chat(p: ChatParams) -> tuple[list[Request], ToolUse | None]:
        """Template (with the request's tools) and tokenise, in a worker thread → the request, not
        yet queued, and its tool use (None: the answer is not parsed for tool calls)."""
        text, use = chat_prompt(tok, p)
        return [new_request(tok(text, add_special_tokens=False).input_ids, p)], use

    def prepare_completions(p: CompletionParams) -> tuple[list[Request], list[str]]:
        """The requests, not yet queued (every prompt checked before any waits), and each prompt's
        text (for `echo` and grammar mode: token-id prompts decoded)."""
        prompts = p.prompts()
        if len(prompts) > engine.queue_size:
            raise APIError(400, f"{len(prompts)} prompts in one request; this server queues at most "
                           f"{engine.queue_size} (--queue-size).", param="prompt")
        reqs, texts = [], []
        for i, x in enumerate(prompts):
            if isinstance(x, str):
                ids, text = tok(x).input_ids, x
            else:  # token ids, used as given (no BOS added), as OpenAI does
                bad = next((t for t in x if t >= vocab_size), None)
                if bad is not None:
                    where = "prompt" if isinstance(p.prompt[0], int) else f"prompt[{i}]"
                    raise APIError(400, f"Invalid token id in '{where}': {bad} is not a token of this model "
                                   f"(0 to {vocab_size - 1}).", param="prompt")
                ids, text = list(x), tok.decode(x)
            reqs.append(new_request(ids, p, text))
            texts.append(text)
        return reqs, texts

    def new_request(prompt_ids: list[int], p: _Params, code_prompt: str | None = None) -> Request:
        s = sampling(p, len(prompt_ids))
        constrained, prefix = grammar_mode(p, code_prompt)
        return Request(prompt_ids, s, sink=None, adapter=models[p.model], grammar=constrained, grammar_prefix=prefix)

    def submit(reqs: list[Request]) -> list[tuple[int, tuple[Request, asyncio.Queue]]]:
        """Queue all of `reqs` or none → jobs [(first choice index, (request, its event queue))]."""
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

    async def collect(jobs, request: HTTPRequest) -> tuple[list[dict], int]:
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
                        if await request.is_disconnected():
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
                        chunk = make_chunk(off + ev[1], ev[2], None)
                    else:
                        left, used = left - 1, used + ev[3]
                        chunk = make_chunk(off + ev[1], None, ev[2])
                    if chunk is not None:  # None: nothing to send yet (a tool call still being written)
                        yield _sse(chunk)
                if not left and p.stream_options and p.stream_options.include_usage:
                    chunk = make_chunk(0, None, None)
                    chunk["choices"], chunk["usage"] = [], usage(prompt_tokens, used)
                    yield _sse(chunk)
                yield "data: [DONE]\n\n"
            finally:  # a client that hangs up (or a failed choice) frees the request's rows, queued or running
                engine.cancel([req for _, (req, _) in jobs])
                for t in pumps:
                    t.cancel()

        return StreamingResponse(events_out(), media_type="text/event-stream")

    @app.api_route("/health", methods=["GET", "HEAD"])   # HEAD too: load balancers and uptime probes use it
    async def health():
        if not engine.alive:
            error = APIError(503, f"The engine is not running: {engine.error or 'stopped'}.", type="server_error",
                             code="engine_not_running")
            return JSONResponse({"status": "error", **error.body}, status_code=503)
        return {"status": "ok", "models": list(models), "device": str(engine.device)}

    @app.get("/stats")
    async def stats():
        return engine.snapshot()

    @app.get("/v1/models")
    async def list_models():
        return {"object": "list", "data": [model_card(m) for m in models]}

    @app.get("/v1/models/{name:path}")   # the client's models.retrieve; :path for names with a slash
    async def retrieve_model(name: str):
        if name not in models:
            raise unknown_model(name)
        return model_card(name)

    @app.post("/v1/chat/completions")
    async def chat(request: HTTPRequest):
        p = await parse(request, ChatParams)
        reqs, use = await run_in_threadpool(prepare_chat, p)
        prompt_tokens = len(reqs[0].prompt_ids)
        jobs = submit(reqs)
        rid, now = next_id("chatcmpl"), int(time.time())
        if p.stream:
            # With tools, each choice's text goes through a ToolCallStream: content as it is certain,
            # each call whole in one delta once its </tool_call> arrives.
            calls = {} if use is None else {i: ToolCallStream() for i in range(p.n)}
            for split in calls.values():
                split.feed(use.prefix)   # the forced start of a call: held, never content

            def chunk(index, content, finish, first=False):
                delta: dict = {"role": "assistant", "content": ""} if first else {}
                split = calls.get(index) if not first and (content or finish) else None
                if split is None:
                    if content:
                        delta["content"] = content
                else:
                    text, new = split.feed(content) if content else split.close()
                    if text:
                        delta["content"] = text
                    if new:
                        delta["tool_calls"] = new
                    if finish == "stop" and split.count:
                        finish = "tool_calls"
                    if not delta and finish is None:
                        return None
                return {"id": rid, "object": "chat.completion.chunk", "created": now, "model": p.model,
                        "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]}
            return stream(jobs, p, chunk, prompt_tokens)
        choices, used = await collect(jobs, request)
        return {"id": rid, "object": "chat.completion", "created": now, "model": p.model,
                "choices": [{"index": c["index"], **_chat_answer(c["text"], c["finish_reason"], use),
                             "logprobs": None} for c in choices],
                "usage": usage(prompt_tokens, used)}

    @app.post("/v1/completions")
    async def completions(request: HTTPRequest):
        p = await parse(request, CompletionParams)
        reqs, prompts = await run_in_threadpool(prepare_completions, p)
        prompt_tokens = sum(len(r.prompt_ids) for r in reqs)
        jobs = submit(reqs)
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


def _chat_answer(text: str, finish: str, use: ToolUse | None) -> dict:
    """A chat choice's message and finish_reason; with tools, the calls its text makes."""
    if use is None:
        return {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
    content, calls = split_tool_calls(use.prefix + text)
    if not calls:
        return {"message": {"role": "assistant", "content": content}, "finish_reason": finish}
    return {"message": {"role": "assistant", "content": content or None, "tool_calls": calls},
            "finish_reason": "tool_calls" if finish == "stop" else finish}


def _sse(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


def build_server(model_or_run: str, *, adapters: dict[str, str] | None = None, name: str | None = None,
                 api_key: str | None = None, max_batch: int = 8, queue_size: int = 64,
                 grammar: str | None = None, device: str = "auto", dtype: str | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_prompt_tokens: int | None = None):
    """Load the model (and adapters), start the engine, build the app → (app, engine)."""
    from mens.chat_template import ensure_chat_template
    from mens.serve.preflight import load_checked

    constraint = None
    if grammar:  # an unknown pack is reported before the model loads
        from mens.serve.grammar import Constraint

        constraint = Constraint.for_language(grammar)
    model, tokenizer, info = load_checked(model_or_run, adapters=adapters, device=device, dtype=dtype, name=name)
    ensure_chat_template(tokenizer)  # ChatML when the base has none, as `mens train` formats chats
    models = info["models"]
    engine = Engine(model, tokenizer, context_window=info["context_window"], max_batch=max_batch,
                    queue_size=queue_size, grammar=constraint,
                    mixed_adapters=any(v is not None for v in models.values()))
    engine.models = list(models)
    return build_app(engine, models, api_key=api_key, max_body_bytes=max_body_bytes,
                     max_prompt_tokens=max_prompt_tokens), engine
