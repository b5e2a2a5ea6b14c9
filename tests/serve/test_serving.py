"""The routes' shared steps (serve/serving.py) one at a time, on real inputs: bodies read under
their cap through Starlette's own Request, parameters parsed and checked, sampling and grammar
mode decided, requests queued all-or-none on a real (model-less) engine, and engine events
collected into choices or streamed as server-sent events."""

import asyncio
import json

import pytest
from starlette.requests import Request as HTTPRequest

from mens.grammar import Constraint
from mens.serve.requests import Request, Sampling
from mens.serve.schema import APIError, ChatParams, CompletionParams, parse_body
from mens.serve.serving import (ServerState, check_params, collect, grammar_mode, read_body, sampling,
                                stream_events, submit)
from queue_only import QueueOnly


@pytest.fixture(scope="module")
def tok(tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_tokenizer_dir)


def _params(schema=CompletionParams, **body):
    return parse_body(json.dumps({"model": "m", "prompt": "x", **body}).encode(), schema)


def _status(exc_info):
    return exc_info.value.status, exc_info.value.body["error"]["code"]


# ---------------------------------------------------------------- the request in

def _http_request(chunks, headers=()):
    """A Starlette request whose body arrives in `chunks`, as uvicorn delivers it."""
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]

    async def receive():
        return messages.pop(0)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [(k.encode(), v.encode()) for k, v in headers]}
    return HTTPRequest(scope, receive)


def test_read_body_refuses_more_than_the_cap():
    assert asyncio.run(read_body(_http_request([b"ab", b"cd"]), 4)) == b"abcd"
    with pytest.raises(APIError) as exc:                 # streamed past the cap, no content-length
        asyncio.run(read_body(_http_request([b"abc", b"de"]), 4))
    assert _status(exc) == (413, "request_too_large")
    with pytest.raises(APIError) as exc:                 # refused by its content-length, unread
        asyncio.run(read_body(_http_request([b""], [("content-length", "5")]), 4))
    assert _status(exc) == (413, "request_too_large")


def test_check_params_knows_the_served_models_and_vocabulary(tok):
    state = ServerState(None, {"m": None}, max_body_bytes=1024, prompt_cap=64, vocab_size=len(tok))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert check_params(json.dumps(body).encode(), ChatParams, state).model == "m"
    with pytest.raises(APIError) as exc:
        check_params(json.dumps({**body, "model": "other"}).encode(), ChatParams, state)
    assert _status(exc) == (404, "model_not_found") and "served: m" in str(exc.value.body)
    with pytest.raises(APIError) as exc:
        check_params(json.dumps({**body, "logit_bias": {str(len(tok)): 1}}).encode(), ChatParams, state)
    assert exc.value.status == 400 and exc.value.body["error"]["param"] == "logit_bias"


def test_sampling_checks_the_prompt_against_the_window():
    s = sampling(_params(max_tokens=5, stop="END", seed=3, n=2), 10, context_window=100, prompt_cap=50)
    assert (s.max_tokens, s.stop, s.seed, s.n) == (5, ("END",), 3, 2)
    assert sampling(_params(), 10, context_window=100, prompt_cap=50).max_tokens == 90     # what is left
    assert sampling(_params(), 10, context_window=4096, prompt_cap=50).max_tokens == 512   # at most 512
    for prompt_len, body, code in [(0, {}, None), (51, {}, "context_length_exceeded"),
                                   (50, {"max_tokens": 51}, "context_length_exceeded")]:
        with pytest.raises(APIError) as exc:
            sampling(_params(**body), prompt_len, context_window=100, prompt_cap=50)
        assert _status(exc) == (400, code)
    with pytest.raises(APIError, match="'messages' must not be empty"):
        sampling(_params(ChatParams, messages=[{"role": "user", "content": "x"}]), 0, context_window=9, prompt_cap=9)


def test_grammar_mode_per_request():
    python = Constraint.for_language("python")
    code, prose = "def add(a, b):\n    return", "Write me a poem"
    assert grammar_mode(_params(grammar="whole"), None, None) == (False, None)    # no --grammar: never
    assert grammar_mode(_params(grammar="off"), code, python) == (False, None)
    assert grammar_mode(_params(grammar="whole"), None, python) == (True, "")
    assert grammar_mode(_params(grammar="fence"), code, python) == (True, None)
    assert grammar_mode(_params(), code, python) == (True, code)        # auto: code continues as code
    assert grammar_mode(_params(), None, python) == (True, None)        # auto, a chat: fenced blocks


# ---------------------------------------------------------------- the engine, and the answer out

def _jobs_with_events(engine, n, events_per_choice):
    """Queued jobs whose event queues already hold what the engine would send."""
    reqs = [Request([1, 2], Sampling(max_tokens=4, n=n), sink=None)]
    jobs = submit(engine, reqs)
    for event in events_per_choice:
        jobs[0][1][1].put_nowait(event)
    return reqs, jobs


async def _never():
    return False


def test_submit_is_429_when_full_and_503_when_stopped(tok):
    engine = QueueOnly(tok, queue_size=1)

    async def go():
        submit(engine, [Request([1], Sampling(max_tokens=1), sink=None)])
        with pytest.raises(APIError) as exc:
            submit(engine, [Request([1], Sampling(max_tokens=1), sink=None)])
        assert _status(exc) == (429, "queue_full")
        engine.stop()
        with pytest.raises(APIError) as exc:
            submit(engine, [Request([1], Sampling(max_tokens=1), sink=None)])
        assert _status(exc) == (503, "engine_not_running")

    asyncio.run(go())


def test_collect_joins_the_choices_and_cancels_after(tok):
    engine = QueueOnly(tok)

    async def go():
        events = [("delta", 1, "wor"), ("delta", 0, "hel"), ("delta", 1, "ld"), ("done", 1, "length", 3),
                  ("delta", 0, "lo"), ("done", 0, "stop", 2)]
        reqs, jobs = _jobs_with_events(engine, 2, events)
        choices, used = await collect(engine, jobs, _never)
        assert choices == [{"index": 0, "text": "hello", "finish_reason": "stop"},
                           {"index": 1, "text": "world", "finish_reason": "length"}] and used == 5
        assert reqs[0].cancelled and engine.snapshot()["waiting"] == 0   # left the queue with its answer
        reqs, jobs = _jobs_with_events(engine, 1, [("delta", 0, "x"), ("error", "generation failed: boom")])
        with pytest.raises(APIError, match="boom"):
            await collect(engine, jobs, _never)
        assert reqs[0].cancelled

        async def gone():
            return True
        reqs, jobs = _jobs_with_events(engine, 1, [])
        with pytest.raises(APIError) as exc:                 # the client hung up: nobody waits for it
            await collect(engine, jobs, gone)
        assert exc.value.status == 499 and reqs[0].cancelled

    try:
        asyncio.run(go())
    finally:
        engine.stop()


def test_stream_events_sends_chunks_usage_and_done(tok):
    engine = QueueOnly(tok)

    def chunk(index, text, finish, first=False):
        if text == "skip":
            return None
        return {"choices": [{"index": index, "text": text, "finish": finish, "first": first}]}

    async def go():
        reqs, jobs = _jobs_with_events(engine, 1, [("delta", 0, "hi"), ("delta", 0, "skip"),
                                                   ("done", 0, "stop", 2)])
        p = _params(stream=True, stream_options={"include_usage": True})
        return reqs, [line async for line in stream_events(engine, jobs, p, chunk, prompt_tokens=7)]

    try:
        reqs, lines = asyncio.run(go())
    finally:
        engine.stop()
    assert lines[-1] == "data: [DONE]\n\n" and all(line.endswith("\n\n") for line in lines)
    sent = [json.loads(line[6:]) for line in lines[:-1]]
    assert [c["choices"][0]["text"] for c in sent[:3]] == [None, "hi", None]   # first, delta, finish
    assert sent[0]["choices"][0]["first"] and sent[2]["choices"][0]["finish"] == "stop"
    assert sent[3] == {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}}
    assert reqs[0].cancelled
