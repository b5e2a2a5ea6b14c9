"""Hostile requests against a real server (uvicorn on 127.0.0.1, the tiny model, httpx and the
`openai` client): every client mistake is a 4xx in OpenAI's error shape before anything is
queued, a rejected or abandoned request leaves nothing queued, the key guards every route but
/health, and after every case the engine still answers a normal request."""

import json
import threading
import time

import httpx
import openai
import pytest

from live_server import API_KEY, LiveServer

AUTH = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}


def assert_openai_error(r: httpx.Response, status: int, param=None, code=None):
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"], err
    assert err["param"] == param and err["code"] == code, err


def assert_still_serving(server, model="tiny"):
    r = server.client().completions.create(model=model, prompt="fn", max_tokens=2, temperature=0)
    assert r.choices[0].finish_reason in ("stop", "length")
    assert httpx.get(server.url + "/health").status_code == 200


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


P = {"model": "tiny", "prompt": "fn"}
BAD_COMPLETIONS = [
    ("deep nesting", b'{"model": "tiny", "prompt": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", None),
    ("lone surrogate", _raw('{"model": "tiny", "prompt": "a\\ud800b"}'), None),
    ("invalid UTF-8", b'{"model": "tiny", "prompt": "a\xff\xfe"}', None),
    ("not an object", b"[1, 2]", None),
    ("empty body", b"", None),
    ("NaN temperature", b'{"model": "tiny", "prompt": "fn", "temperature": NaN}', "temperature"),
    ("empty prompt", {**P, "prompt": ""}, "prompt"),
    ("empty prompt in a list", {**P, "prompt": ["fn", ""]}, "prompt"),
    ("no prompts", {**P, "prompt": []}, "prompt"),
    ("prompt of the wrong type", {**P, "prompt": 5}, "prompt"),
    ("seed 2**64", {**P, "seed": 2**64}, "seed"),
    ("seed -2**64", {**P, "seed": -(2**64)}, "seed"),
    ("infinite temperature", {**P, "temperature": 1e999}, "temperature"),
    ("top_p 0", {**P, "top_p": 0}, "top_p"),
    ("n 0", {**P, "n": 0}, "n"),
    ("n 17", {**P, "n": 17}, "n"),
    ("max_tokens 0", {**P, "max_tokens": 0}, "max_tokens"),
    ("max_completion_tokens -1", {**P, "max_completion_tokens": -1}, "max_completion_tokens"),
    ("logprobs 6", {**P, "logprobs": 6}, "logprobs"),
    ("logprobs asked for", {**P, "logprobs": 2}, "logprobs"),
    ("best_of 3", {**P, "best_of": 3}, "best_of"),
    ("presence_penalty 3", {**P, "presence_penalty": 3}, "presence_penalty"),
    ("logit_bias 101", {**P, "logit_bias": {"5": 101}}, "logit_bias"),
    ("17 stop strings", {**P, "stop": [f"s{i}" for i in range(17)]}, "stop"),
    ("a 1000-character stop string", {**P, "stop": "x" * 1000}, "stop"),
    ("100 prompts × n=2", {**P, "prompt": ["fn"] * 100, "n": 2}, "prompt"),
    ("more prompts than the queue holds", {**P, "prompt": ["fn"] * 40}, "prompt"),
    # as OpenAI: a wrong JSON type is a 400, not coerced
    ("max_tokens as a string", {**P, "max_tokens": "5"}, "max_tokens"),
    ("n as a string", {**P, "n": "2"}, "n"),
    ("n 2.0", {**P, "n": 2.0}, "n"),
    ("stream as a string", {**P, "stream": "true"}, "stream"),
    ("logit_bias key not a token id", {**P, "logit_bias": {"abc": 1}}, "logit_bias"),
    ("logit_bias key past the vocabulary", {**P, "logit_bias": {"999999999": 1}}, "logit_bias"),
    ("logprobs 0", {**P, "logprobs": 0}, "logprobs"),
    ("stream_options without stream", {**P, "stream_options": {"include_usage": True}}, "stream_options"),
]
M = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
BAD_CHATS = [
    ("lone surrogate", _raw('{"model": "tiny", "messages": [{"role": "user", "content": "\\udc00"}]}'), None),
    ("no messages", {**M, "messages": []}, "messages"),
    ("a message that is not an object", {**M, "messages": ["hi"]}, "messages"),
    ("unknown role", {**M, "messages": [{"role": "wizard", "content": "hi"}]}, "messages"),
    ("a text part that is not text", {**M, "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
     "messages"),
    ("logprobs asked for", {**M, "logprobs": True}, "logprobs"),
    ("top_logprobs 21", {**M, "top_logprobs": 21}, "top_logprobs"),
    ("seed 2**64", {**M, "seed": 2**64}, "seed"),
    ("an image_url part", {**M, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]},
     "messages"),
    ("a text part without text", {**M, "messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages"),
    ("a user message without content", {**M, "messages": [{"role": "user"}]}, "messages"),
    ("max_completion_tokens as a string", {**M, "max_completion_tokens": "5"}, "max_completion_tokens"),
    ("include_usage not a boolean", {**M, "stream": True, "stream_options": {"include_usage": "yes"}},
     "stream_options"),
    ("response_format json_object", {**M, "response_format": {"type": "json_object"}}, "response_format"),
    ("modalities with audio", {**M, "modalities": ["text", "audio"]}, "modalities"),
    ("legacy functions", {**M, "functions": [{"name": "f", "parameters": {}}]}, "functions"),
]


@pytest.mark.parametrize("path,case,body,param", [("/v1/completions", *c) for c in BAD_COMPLETIONS]
                         + [("/v1/chat/completions", *c) for c in BAD_CHATS], ids=lambda v: v if isinstance(v, str) else None)
def test_client_mistakes_are_400s_in_openai_shape(live_server, path, case, body, param):
    kw = {"content": body} if isinstance(body, bytes) else {"content": json.dumps(body)}
    before = live_server.engine.snapshot()
    r = httpx.post(live_server.url + path, headers=AUTH, **kw)
    assert_openai_error(r, 400, param=param)
    after = live_server.engine.snapshot()
    assert after["requests"] == before["requests"] and after["waiting"] == 0   # nothing was queued
    assert_still_serving(live_server)


def test_openai_fields_without_effect_are_accepted(live_server):
    """What the real API takes and mens need not act on is answered, not refused; so are other
    servers' sampling extensions (`top_k`), which clients written for local servers send."""
    client = live_server.client()
    parts = [{"type": "text", "text": "hi"}]
    r = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": parts}], max_completion_tokens=2,
                                       store=False, metadata={"k": "v"}, user="u",
                                       response_format={"type": "text"}, modalities=["text"], logit_bias={"5": -100},
                                       presence_penalty=0.5, safety_identifier="s", prompt_cache_key="c")
    assert r.choices[0].finish_reason in ("stop", "length")
    chunks = list(client.completions.create(model="tiny", prompt="fn", max_tokens=2, stream=True,
                                            stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens >= 1
    r = client.completions.create(model="tiny", prompt="fn", max_tokens=2, extra_body={"top_k": -5, "min_p": 0.1})
    assert r.choices[0].finish_reason in ("stop", "length")


def test_any_seed_in_range_samples(live_server):
    client = live_server.client()
    for seed in (2**63 - 1, -(2**63), 0):
        r = client.completions.create(model="tiny", prompt="fn", max_tokens=3, temperature=1, seed=seed, n=3)
        assert len(r.choices) == 3


def test_the_key_guards_every_route_but_health(live_server):
    url = live_server.url
    for method, path in [("GET", "/stats"), ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/v1/models"),
                         ("GET", "/no/such/route"), ("POST", "/v1/completions"), ("POST", "/v1/chat/completions")]:
        for header in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {API_KEY}"},
                       {"Authorization": "Bearer"}, {"Authorization": f"Bearer {API_KEY}x"}):
            r = httpx.request(method, url + path, headers=header, json=P)
            assert_openai_error(r, 401, code="invalid_api_key")
    assert httpx.get(url + "/health").status_code == 200
    for scheme in ("bearer", "BEARER", "Bearer"):
        assert httpx.get(url + "/stats", headers={"Authorization": f"{scheme} {API_KEY}"}).status_code == 200
    assert httpx.get(url + "/openapi.json", headers=AUTH).json()["info"]["title"] == "mens"
    assert_still_serving(live_server)


def test_tokenising_a_huge_prompt_does_not_stall_the_server(live_server):
    """1.3 MB of prompt (under the 2 MiB body cap) takes the tiny tokenizer about a second; /health
    must keep answering meanwhile, and the prompt is refused as too long for the window."""
    words = ["fn", "add", "Circle", "xyzzy", "quux", "hello", "0123", "{", "}", "Vox", "lazy"]
    prompt = " ".join(words[(i * 7919) % len(words)] for i in range(230_000))
    done, result = threading.Event(), {}

    def big():
        result["r"] = httpx.post(live_server.url + "/v1/completions", headers=AUTH, timeout=60,
                                 json={**P, "prompt": prompt})
        done.set()

    t0 = time.perf_counter()
    threading.Thread(target=big).start()
    latencies = []
    while not done.is_set():
        start = time.perf_counter()
        httpx.get(live_server.url + "/health", timeout=30)
        if not done.is_set():
            latencies.append(time.perf_counter() - start)
        time.sleep(0.02)
    took = time.perf_counter() - t0
    assert_openai_error(result["r"], 400, param="prompt", code="context_length_exceeded")
    assert took > 0.5 and len(latencies) >= 3, (took, latencies)
    assert max(latencies) < took / 2, (took, latencies)       # /health did not wait for the tokenizer
    assert_still_serving(live_server)


@pytest.fixture(scope="module")
def small_server(long_model_dir):
    """One batch row, a queue of 4, an 8 KiB body cap, prompts of at most 64 tokens, no key."""
    from mens.serve.app import build_server

    app, engine = build_server(str(long_model_dir), name="tiny", max_batch=1, queue_size=4, device="cpu",
                               max_body_bytes=8192, max_prompt_tokens=64)
    server = LiveServer(app, engine)
    yield server
    server.close()


def _wait_for(cond, what, timeout=15):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, what
        time.sleep(0.01)


def test_rejected_and_abandoned_requests_leave_nothing_queued(small_server):
    eng, url = small_server.engine, small_server.url
    client = small_server.client()
    holder = client.completions.create(model="tiny", prompt="fn", max_tokens=8000, temperature=0, stream=True)
    chunks = iter(holder)                       # kept: a dropped iterator closes the stream
    next(chunks)
    _wait_for(lambda: eng.snapshot()["waiting"] == 0 and eng.snapshot()["tokens"] > 0, "the holder did not start")
    with httpx.stream("POST", url + "/v1/completions", json={**P, "prompt": ["a", "b", "c"], "max_tokens": 4,
                                                               "stream": True}) as queued:
        lines = queued.iter_lines()                 # kept: a dropped iterator closes the connection
        next(lines)                                                     # its prompts are queued
        assert eng.snapshot()["waiting"] == 3
        rejected = eng.snapshot()["rejected_queue_full"]
        r = httpx.post(url + "/v1/completions", json={**P, "prompt": ["d", "e"], "max_tokens": 4})
        assert_openai_error(r, 429, code="queue_full")                  # 3 + 2 > 4: none of the 2 queued
        assert eng.snapshot()["waiting"] == 3 and eng.snapshot()["rejected_queue_full"] == rejected + 1
    _wait_for(lambda: eng.snapshot()["waiting"] == 0, "a hung-up stream left its prompts queued")
    with pytest.raises(httpx.ReadTimeout):                               # a non-streaming client gives up
        httpx.post(url + "/v1/completions", json={**P, "prompt": ["f", "g"], "max_tokens": 4}, timeout=1.0)
    _wait_for(lambda: eng.snapshot()["waiting"] == 0, "a hung-up request left its prompts queued")
    tokens = eng.snapshot()["tokens"]
    holder.close()                                                       # the running stream hangs up too
    _wait_for(lambda: eng.snapshot()["cancelled"] >= 3, "the running stream was not cancelled")
    time.sleep(0.3)
    assert eng.snapshot()["tokens"] - tokens < 1000                      # its row stopped decoding
    assert_still_serving(small_server)


def test_body_and_prompt_caps(small_server):
    url = small_server.url
    big = json.dumps({**P, "prompt": "fn " * 5000}).encode()
    assert_openai_error(httpx.post(url + "/v1/completions", content=big), 413, code="request_too_large")

    def chunks():                                                       # no Content-Length: counted as read
        for i in range(0, len(big), 1000):
            yield big[i:i + 1000]

    assert_openai_error(httpx.post(url + "/v1/completions", content=chunks()), 413, code="request_too_large")
    r = httpx.post(url + "/v1/completions", json={**P, "prompt": "fn add " * 60})
    assert_openai_error(r, 400, param="prompt", code="context_length_exceeded")
    assert "--max-prompt-tokens" in r.json()["error"]["message"]
    assert_still_serving(small_server)


@pytest.mark.slow  # a live server
def test_health_reports_an_engine_that_is_not_running(tiny_model_dir):
    from mens.serve.app import build_server

    app, engine = build_server(str(tiny_model_dir), name="tiny", device="cpu")
    server = LiveServer(app, engine)
    try:
        assert httpx.get(server.url + "/health").json()["status"] == "ok"
        engine.stop()
        r = httpx.get(server.url + "/health")
        assert_openai_error(r, 503, code="engine_not_running")
        assert r.json()["status"] == "error"
        with pytest.raises(openai.InternalServerError) as exc:
            server.client().completions.create(model="tiny", prompt="fn", max_tokens=2)
        assert exc.value.status_code == 503 and exc.value.body["code"] == "engine_not_running"
    finally:
        server.close()
