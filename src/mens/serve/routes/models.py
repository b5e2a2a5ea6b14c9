"""GET /v1/models and GET /v1/models/NAME (the `openai` client's models.list and
models.retrieve): each served name, and how the engine batches it."""

from __future__ import annotations

from fastapi import APIRouter

from mens.serve.serving import ServerState, State

router = APIRouter()


def model_card(state: ServerState, name: str) -> dict:
    return {"id": name, "object": "model", "created": state.created, "owned_by": "mens",
            "batching": getattr(state.engine, "batching", "continuous")}


@router.get("/v1/models")
async def list_models(state: State):
    return {"object": "list", "data": [model_card(state, m) for m in state.models]}


@router.get("/v1/models/{name:path}")   # :path for names with a slash
async def retrieve_model(name: str, state: State):
    state.check_model(name)
    return model_card(state, name)
