"""GET /health (and HEAD: load balancers and uptime probes use it), open without the API key: 200
with the served models and device while the engine runs, 503 in OpenAI's error shape when it
does not. GET /stats: the engine's counters (batch sizes, queue rejections, grammar corrections)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from mens.serve.schema import APIError
from mens.serve.serving import State

router = APIRouter()


@router.api_route("/health", methods=["GET", "HEAD"])
async def health(state: State):
    engine = state.engine
    if not engine.alive:
        error = APIError(503, f"The engine is not running: {engine.error or 'stopped'}.", type="server_error",
                         code="engine_not_running")
        return JSONResponse({"status": "error", **error.body}, status_code=503)
    return {"status": "ok", "models": list(state.models), "device": str(engine.device)}


@router.get("/stats")
async def stats(state: State):
    return state.engine.snapshot()
