"""What a client written against OpenAI's API expects of mens serve beyond the happy path, each
case a defect found by driving a real server with the `openai` client: nulls for optional
fields, the model-retrieve route, stop strings that one token completes together, the field a
400 names, and prompts given as token ids."""

import httpx
import openai
import pytest

from live_server import API_KEY

CHAT = [{"role": "user", "content": "Write a Vox function that adds two numbers."}]
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def test_null_optional_fields_mean_their_defaults(live_server):
    """OpenAI's spec makes temperature, top_p, n, stream and echo nullable; clients generated from
    it (and the `openai` client given an explicit None) send `null` for what was left unset."""
    client = live_server.client()
    want = client.chat.completions.create(model="tiny", messages=CHAT, max_tokens=6, temperature=0)
    r = client.chat.completions.create(model="tiny", messages=CHAT, max_tokens=6, temperature=0, top_p=None,
                                       n=None, stream=None, stop=None, seed=None)
    assert [c.message.content for c in r.choices] == [want.choices[0].message.content]
    r = client.completions.create(model="tiny", prompt="fn", max_tokens=3, temperature=None, top_p=None, n=None,
                                  stream=None, echo=None)
    assert len(r.choices) == 1 and r.choices[0].finish_reason in ("stop", "length")
    # a required field stays required, null or not
    r = httpx.post(live_server.url + "/v1/chat/completions", headers=AUTH,
                   json={"model": "tiny", "messages": None})
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"


def test_a_model_can_be_retrieved_by_name(live_server):
    client = live_server.client()
    listed = {m.id: m for m in client.models.list().data}
    for name in ("tiny", "alpha"):
        assert client.models.retrieve(name) == listed[name]
    with pytest.raises(openai.NotFoundError) as exc:
        client.models.retrieve("gpt-4o")
    assert exc.value.body["code"] == "model_not_found" and exc.value.body["param"] == "model"


def _two_char_token(client):
    """(prompt, greedy text, start of a delta whose first two characters are new to the text):
    a token that completes two one-character stop strings at once."""
    for prompt in ("fn add(a: int", "The quick brown fox", "def main():", "component Counter"):
        chunks = client.completions.create(model="tiny", prompt=prompt, max_tokens=24, temperature=0, stream=True)
        deltas = [c.choices[0].text for c in chunks if c.choices[0].text]
        text, at = "".join(deltas), 0
        for d in deltas:
            if len(d) >= 2 and d[0] != d[1] and "\ufffd" not in d[:2] and d[0] not in text[:at] \
                    and d[1] not in text[:at]:
                return prompt, text, at
            at += len(d)
    pytest.skip("no greedy token of two new characters")


def test_the_earliest_stop_string_ends_the_answer(live_server):
    """Whatever their order in `stop`, the answer ends before the first stop string in the text
    (OpenAI never returns a stop string), also when one token completes two of them."""
    client = live_server.client()
    prompt, text, at = _two_char_token(client)
    first, second = text[at], text[at + 1]
    for stop in ([second, first], [first, second]):
        r = client.completions.create(model="tiny", prompt=prompt, max_tokens=24, temperature=0, stop=stop)
        assert (r.choices[0].text, r.choices[0].finish_reason) == (text[:at], "stop"), stop
        chunks = client.completions.create(model="tiny", prompt=prompt, max_tokens=24, temperature=0, stop=stop,
                                           stream=True)
        assert "".join(c.choices[0].text for c in chunks) == text[:at], stop


@pytest.mark.parametrize("field,value,where", [
    ("messages", [{"role": "user", "content": [{"type": "text", "text": 5}]}], "messages[0].content[0].text"),
    ("messages", [{"role": "user", "content": "hi"}, {"role": "user", "content": 5}], "messages[1].content"),
    ("stop", ["ok", 5], "stop[1]"),
    ("tool_choice", "sometimes", "tool_choice"),
])
def test_a_wrong_value_is_named_as_openai_names_it(live_server, field, value, where):
    """The message names the field the way OpenAI writes it (`messages[0].content[0].text`), the
    one that is wrong: not pydantic's union branch (`messages.0.content.str`, as if a list of
    parts were not allowed)."""
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], field: value}
    with pytest.raises(openai.BadRequestError) as exc:
        live_server.client().chat.completions.create(**body)
    assert exc.value.body["param"] == field
    assert exc.value.body["message"].startswith(f"Invalid value for '{where}': "), exc.value.body["message"]


def test_completion_prompts_may_be_token_ids(live_server):
    """OpenAI's completions take a prompt as token ids, one list or a list of lists (what
    lm-evaluation-harness's local-completions sends by default): the same answer as its text,
    echo gives the text back, and an id the model does not have is a 400 naming the prompt."""
    client, tok = live_server.client(), live_server.engine.tokenizer
    texts = ["fn add(a: int", "component Counter"]
    ids = [tok(t).input_ids for t in texts]
    want = [client.completions.create(model="tiny", prompt=t, max_tokens=8, temperature=0).choices[0].text
            for t in texts]
    one = client.completions.create(model="tiny", prompt=ids[0], max_tokens=8, temperature=0)
    assert one.choices[0].text == want[0] and one.usage.prompt_tokens == len(ids[0])
    both = client.completions.create(model="tiny", prompt=ids, max_tokens=8, temperature=0, echo=True)
    assert [c.text for c in both.choices] == [tok.decode(i) + w for i, w in zip(ids, want)]
    streamed = client.completions.create(model="tiny", prompt=ids[1], max_tokens=8, temperature=0, stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == want[1]
    for prompt, where in ((ids[0] + [10**6], "'prompt'"), ([ids[0], [10**6]], "'prompt[1]'")):
        with pytest.raises(openai.BadRequestError) as exc:
            client.completions.create(model="tiny", prompt=prompt, max_tokens=2)
        assert where in exc.value.body["message"] and exc.value.body["param"] == "prompt"
    for bad in ([True, 2], [[1], "fn"], [-1]):  # a bool is not a token id; one form per request
        r = httpx.post(live_server.url + "/v1/completions", headers=AUTH, json={"model": "tiny", "prompt": bad})
        assert r.status_code == 400 and r.json()["error"]["param"] == "prompt", r.text


def test_an_empty_content_list_is_refused_and_health_answers_head(live_server):
    """OpenAI refuses `content: []` (a list of parts holds at least one); probes send HEAD /health."""
    client = live_server.client()
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": []}], max_tokens=2)
    assert "messages[0].content" in exc.value.body["message"] and exc.value.body["param"] == "messages"
    head = httpx.head(live_server.url + "/health")
    assert head.status_code == 200 and head.content == b""
