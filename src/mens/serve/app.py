"""The OpenAI-compatible HTTP API over a serve engine: build_app assembles the routers of
serve/routes/ (one module a route group: health.py, models.py, chat.py, completions.py) over one
ServerState (serve/serving.py: the engine, the served models, the limits) that each route takes
as a FastAPI dependency.

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

import hmac
from typing import Sequence

from fastapi import APIRouter, FastAPI
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException

from mens.serve.base_engine import ServedEngine
from mens.serve.routes import ROUTERS
from mens.serve.schema import APIError
from mens.serve.serving import ServerState

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


def build_app(engine: ServedEngine, models: dict[str, str | None], *, api_key: str | None = None,
              max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_prompt_tokens: int | None = None,
              routers: Sequence[APIRouter] = ROUTERS) -> FastAPI:
    """The app: `routers` (serve/routes/) over one ServerState on `app.state.server`, OpenAI's
    error shape for every error, and the API key on every route but /health. `models` maps each
    served name to its PEFT adapter name (None: the base as loaded). `max_prompt_tokens`
    defaults to the context window."""
    app = FastAPI(title="mens", docs_url=None, redoc_url=None)
    if api_key:
        app.add_middleware(RequireKey, api_key=api_key)
    app.state.server = ServerState(
        engine, models, max_body_bytes=max_body_bytes, vocab_size=len(engine.tokenizer),
        prompt_cap=min(max_prompt_tokens or engine.context_window, engine.context_window))
    app.add_exception_handler(APIError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _server_error)
    for router in routers:
        app.include_router(router)
    return app


async def _api_error(_, exc: APIError):
    return JSONResponse(exc.body, status_code=exc.status)


async def _http_error(_, exc: StarletteHTTPException):   # unknown paths (404), wrong methods (405)
    return JSONResponse(APIError(exc.status_code, str(exc.detail)).body, status_code=exc.status_code)


async def _server_error(_, exc: Exception):  # a bug of ours: logged with its traceback, answered in shape
    return JSONResponse(APIError(500, f"internal error: {type(exc).__name__}", type="server_error").body,
                        status_code=500)


def build_server(model_or_run: str, *, adapters: dict[str, str] | None = None, name: str | None = None,
                 api_key: str | None = None, max_batch: int = 8, queue_size: int = 64,
                 grammar: str | None = None, device: str = "auto", dtype: str | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_prompt_tokens: int | None = None):
    """Load the model (and adapters), start the engine, build the app → (app, engine)."""
    from mens.chat_template import ensure_chat_template
    from mens.serve.engine import Engine
    from mens.serve.preflight import load_checked

    constraint = None
    if grammar:  # an unknown pack is reported before the model loads
        from mens.grammar import Constraint

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
