"""The routers of serve/routes/: a new route is one router module plus its line in ROUTERS (a toy
one, registered the same way, answers through the real app with the key, state and error shape
every route gets), and the chat and completions routes' own steps on a real tokenizer."""

import json

import pytest
from fastapi import APIRouter
from fastapi.testclient import TestClient

from mens.serve.app import build_app
from mens.serve.routes import ROUTERS
from mens.serve.routes.chat import chat_answer, chat_chunks, prepare_chat
from mens.serve.routes.completions import completion_chunks, prepare_completions
from mens.serve.schema import APIError, ChatParams, CompletionParams, parse_body
from mens.serve.serving import ServerState, State
from mens.serve.tools import ToolUse
from queue_only import QueueOnly

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}

# ---------------------------------------------------------------- a toy route: what a new module holds

toy = APIRouter()


@toy.get("/v1/queue")
async def queue(state: State):
    """How full the engine's queue is, for one served model (?model=NAME)."""
    return {"waiting": state.engine.snapshot()["waiting"], "queue_size": state.engine.queue_size}


@toy.get("/v1/queue/{model}")
async def queue_of(model: str, state: State):
    state.check_model(model)
    if state.engine.queue_size < 2:
        raise APIError(409, "The queue is too small to report on.", code="tiny_queue")
    return {"model": model, "adapter": state.models[model]}


@pytest.fixture(scope="module")
def tok(tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_tokenizer_dir)


def test_a_toy_router_is_one_module_and_one_line(tok):
    engine = QueueOnly(tok, queue_size=5)
    try:
        app = build_app(engine, {"m": None, "m-a": "alpha"}, api_key="k", routers=(*ROUTERS, toy))
        with TestClient(app) as client:
            key = {"Authorization": "Bearer k"}
            assert client.get("/v1/queue").status_code == 401                # the key guards it, as every route
            assert client.get("/v1/queue", headers=key).json() == {"waiting": 0, "queue_size": 5}
            assert client.get("/v1/queue/m-a", headers=key).json() == {"model": "m-a", "adapter": "alpha"}
            missing = client.get("/v1/queue/nope", headers=key)             # errors in OpenAI's shape
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
            assert client.get("/health").json()["models"] == ["m", "m-a"]   # the built-in routes still there
            assert client.get("/v1/models", headers=key).json()["data"][1]["id"] == "m-a"
        small = build_app(QueueOnly(tok, queue_size=1), {"m": None}, routers=(*ROUTERS, toy))
        refused = TestClient(small).get("/v1/queue/m")
        assert refused.status_code == 409 and refused.json()["error"] == {
            "message": "The queue is too small to report on.", "type": "invalid_request_error", "param": None,
            "code": "tiny_queue"}
        assert TestClient(build_app(engine, {"m": None})).get("/v1/queue").status_code == 404   # not registered
    finally:
        engine.stop()
        small.state.server.engine.stop()


# ---------------------------------------------------------------- chat and completions, step by step

def _state(tok, queue_size=4):
    return ServerState(QueueOnly(tok, queue_size=queue_size), {"m": None, "a": "alpha"}, max_body_bytes=1 << 20,
                       prompt_cap=64, vocab_size=len(tok))


def test_prepare_chat_renders_the_template_for_the_adapter(tok):
    state = _state(tok)
    p = parse_body(json.dumps({"model": "a", "messages": [{"role": "user", "content": "hi"}], "n": 2}).encode(),
                   ChatParams)
    [req], use = prepare_chat(state, p)
    state.engine.stop()
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert req.prompt_ids == tok(text, add_special_tokens=False).input_ids and use is None
    assert req.adapter == "alpha" and req.sampling.n == 2 and req.sink is None


def test_prepare_completions_checks_every_prompt_first(tok):
    state = _state(tok, queue_size=2)
    state.engine.stop()

    def prepare(**body):
        return prepare_completions(state, parse_body(json.dumps({"model": "m", **body}).encode(), CompletionParams))

    reqs, texts = prepare(prompt=["def f", "x = 1"])
    assert texts == ["def f", "x = 1"] and reqs[0].prompt_ids == tok("def f").input_ids
    reqs, texts = prepare(prompt=[tok("x = 1").input_ids], n=2)           # token ids: used as given, decoded
    assert texts == ["x = 1"] and reqs[0].prompt_ids == tok("x = 1").input_ids and reqs[0].sampling.n == 2
    with pytest.raises(APIError, match="3 prompts in one request; this server queues at most 2"):
        prepare(prompt=["a", "b", "c"])
    with pytest.raises(APIError, match=rf"Invalid token id in 'prompt\[1\]': {len(tok)} "):
        prepare(prompt=[[1], [2, len(tok)]])
    with pytest.raises(APIError, match="Invalid token id in 'prompt': "):
        prepare(prompt=[1, len(tok) + 5])


def test_chat_answer_with_and_without_tools():
    assert chat_answer("hi", "length", None) == {"message": {"role": "assistant", "content": "hi"},
                                                 "finish_reason": "length"}
    use = ToolUse([WEATHER])
    answer = chat_answer(CALL, "stop", use)
    assert answer["finish_reason"] == "tool_calls" and answer["message"]["content"] is None
    assert answer["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert chat_answer("no call", "stop", use)["message"] == {"role": "assistant", "content": "no call"}


def test_chat_chunks_hold_a_tool_call_until_it_is_whole():
    p = parse_body(json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True,
                               "tools": [WEATHER]}).encode(), ChatParams)
    chunk = chat_chunks("id-1", 7, p, ToolUse([WEATHER]))
    first = chunk(0, None, None, first=True)
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""} and first["created"] == 7
    assert chunk(0, "Sure.", None)["choices"][0]["delta"] == {"content": "Sure."}
    assert chunk(0, CALL[:20], None) is None                       # a call being written: nothing yet
    whole = chunk(0, CALL[20:], None)["choices"][0]["delta"]["tool_calls"]
    assert whole[0]["function"]["name"] == "get_weather" and whole[0]["index"] == 0
    assert chunk(0, None, "stop")["choices"][0]["finish_reason"] == "tool_calls"
    plain = chat_chunks("id-2", 7, p, None)
    assert plain(0, "text", None)["choices"][0]["delta"] == {"content": "text"}


def test_completion_chunks_echo_the_prompt_first():
    p = parse_body(json.dumps({"model": "m", "prompt": ["a", "b"], "n": 2, "echo": True,
                               "stream": True}).encode(), CompletionParams)
    chunk = completion_chunks("id", 1, p, ["PA", "PB"])
    assert [chunk(i, None, None, first=True)["choices"][0]["text"] for i in range(4)] == ["PA", "PA", "PB", "PB"]
    assert chunk(3, "x", None)["choices"][0]["text"] == "x" and chunk(3, None, "stop")["choices"][0]["text"] == ""
