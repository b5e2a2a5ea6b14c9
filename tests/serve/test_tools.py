"""Tool use in the server: the parser of `<tool_call>` blocks (whole and streamed), the request
checks, the prompt the chat template renders with tools (the same text `mens train` renders for a
tool row), and the API's answers through the `openai` client over a scripted engine."""

import json

import openai
import pytest

from mens.serve.schema import APIError, ChatParams, parse_body
from mens.serve.tools import ToolCallStream, prompt, split_tool_calls

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
CALL2 = '<tool_call>\n{"name": "get_time", "arguments": {"zone": "CET", "24h": true}}\n</tool_call>'


def _fn(call):
    return call["function"]["name"], json.loads(call["function"]["arguments"])


# ---------------------------------------------------------------- the parser

def test_one_call():
    content, calls = split_tool_calls(CALL)
    assert content == "" and len(calls) == 1
    assert calls[0]["type"] == "function" and calls[0]["id"].startswith("call_")
    assert calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}


def test_several_calls_with_text_around():
    content, calls = split_tool_calls(f"Let me look.\n{CALL}\n{CALL2}\nBack soon.")
    assert [_fn(c) for c in calls] == [("get_weather", {"city": "Paris"}), ("get_time", {"zone": "CET", "24h": True})]
    assert content == "Let me look.\n\n\nBack soon."   # the text outside the blocks
    assert len({c["id"] for c in calls}) == 2
    assert split_tool_calls(f"\n{CALL}\n\n{CALL2}\n")[0] == ""


@pytest.mark.parametrize("block", [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": </tool_call>',       # broken JSON
    '<tool_call>\n{"arguments": {"city": "Paris"}}\n</tool_call>',                    # no name
    '<tool_call>\n{"name": "get_weather", "arguments": [1, 2]}\n</tool_call>',         # arguments not an object
    '<tool_call>\n["get_weather"]\n</tool_call>',
])
def test_malformed_blocks_stay_content(block):
    text = f"Sure. {block} and {CALL}"
    content, calls = split_tool_calls(text)
    assert content == f"Sure. {block} and" and [_fn(c)[0] for c in calls] == ["get_weather"]


def test_text_without_calls_is_kept_exactly():
    for text in ["", "  plain answer \n", "a <tool_call> never closed", "ends on <tool_ca", "x </tool_call> y"]:
        assert split_tool_calls(text) == (text, [])


def test_arguments_as_a_json_string_and_parameters_alias():
    _, calls = split_tool_calls('<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>'
                                '<tool_call>{"name": "g", "parameters": {"b": "é"}}</tool_call>')
    assert [_fn(c) for c in calls] == [("f", {"a": 1}), ("g", {"b": "é"})]
    assert calls[1]["function"]["arguments"] == '{"b": "é"}'


@pytest.mark.parametrize("text", [f"Let me look.\n{CALL}\n{CALL2}\nBack soon.", CALL, "no calls <tool",
                                  f"a {CALL.replace('Paris', 'Paris,,')} b", f"  x  {CALL}  "])
@pytest.mark.parametrize("size", [1, 3, 7, 1000])
def test_streamed_pieces_give_the_whole_texts_answer(text, size):
    stream, content, calls = ToolCallStream(), "", []
    for i in range(0, len(text), size):
        part, new = stream.feed(text[i:i + size])
        content, calls = content + part, calls + new
        assert "<tool_call>" not in part or "<tool_call>" in split_tool_calls(text)[0]   # no call leaks as text
    part, new = stream.close()
    content, calls = content + part, calls + new
    whole_content, whole_calls = split_tool_calls(text)
    assert content == whole_content
    assert [c["index"] for c in calls] == list(range(len(whole_calls)))
    assert [c["function"] for c in calls] == [c["function"] for c in whole_calls]


# ---------------------------------------------------------------- the request

def chat(**fields) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}], **fields}).encode()


HISTORY = [{"role": "user", "content": "Weather in Paris?"},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
           {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]


@pytest.mark.parametrize("fields, param", [
    ({"tools": [{"type": "retrieval"}]}, "tools"),
    ({"tools": [{"type": "function", "function": {"name": "get weather"}}]}, "tools"),
    ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools"),
    ({"tools": {"type": "function"}}, "tools"),
    ({"tools": [1]}, "tools"),                         # an item that is not an object: named, not "the body"
    ({"messages": ["Weather in Paris?"]}, "messages"),
    ({"tools": [WEATHER], "tool_choice": "always"}, "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"messages": [{"role": "tool", "content": "x"}]}, "messages"),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": HISTORY[1]["tool_calls"]}]}, "messages"),
    ({"messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]}, "messages"),
])
def test_malformed_tool_fields_are_400s(fields, param):
    with pytest.raises(APIError) as err:
        parse_body(chat(**fields), ChatParams)
    assert err.value.status == 400 and err.value.body["error"]["param"] == param


def test_well_formed_tool_fields_pass():
    p = parse_body(chat(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "get_weather"}},
                        parallel_tool_calls=False, messages=HISTORY), ChatParams)
    assert p.tools[0].function.name == "get_weather" and p.messages[2].tool_call_id == "call_1"


# ---------------------------------------------------------------- the prompt

@pytest.fixture(scope="module")
def tok(tiny_tokenizer_dir):
    """The tiny tokenizer with mens's ChatML template (the one `mens train` gives a base without one)."""
    from transformers import AutoTokenizer

    from mens.chat_template import CHATML_TEMPLATE

    t = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    t.chat_template = CHATML_TEMPLATE
    return t


def test_tools_and_tool_messages_reach_the_prompt(tok):
    text, use = prompt(tok, parse_body(chat(tools=[WEATHER], messages=HISTORY), ChatParams))
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\n# Tools") and '"name": "get_weather"' in system
    assert use is not None and use.prefix == "" and use.tools == [WEATHER]
    assert CALL + "<|im_end|>" in text                       # the earlier call, arguments decoded
    assert "<|im_start|>user\n<tool_response>\nsunny, 21 C\n</tool_response><|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\n")
    plain, none_use = prompt(tok, parse_body(chat(tools=[WEATHER], tool_choice="none"), ChatParams))
    assert none_use is None and "get_weather" not in plain   # "none": the tools are not passed
    assert plain == "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"


def test_forced_tool_choice_starts_the_call(tok):
    named, use = prompt(tok, parse_body(chat(tools=[WEATHER], tool_choice={"type": "function",
                                                                          "function": {"name": "get_weather"}}), ChatParams))
    assert named.endswith('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments":')
    assert split_tool_calls(use.prefix + ' {"city": "Rome"}}\n</tool_call>')[1][0]["function"]["arguments"] == \
        '{"city": "Rome"}'
    required, _ = prompt(tok, parse_body(chat(tools=[WEATHER], tool_choice="required"), ChatParams))
    assert required.endswith("<|im_start|>assistant\n<tool_call>\n")


PLAIN_CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
                "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def plain_tokenizer(tiny_tokenizer_dir):
    """The tiny tokenizer with ChatML as mens wrote it before tool use: a template that ignores tools."""
    from transformers import AutoTokenizer

    t = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    t.chat_template = PLAIN_CHATML
    return t


def test_a_template_without_tools_refuses_them(tiny_tokenizer_dir):
    old = plain_tokenizer(tiny_tokenizer_dir)
    with pytest.raises(APIError) as err:
        prompt(old, parse_body(chat(tools=[WEATHER]), ChatParams))
    assert err.value.status == 400 and err.value.body["error"]["param"] == "tools"
    assert prompt(old, parse_body(chat(tools=[WEATHER], tool_choice="none"), ChatParams))[1] is None


def test_serving_renders_the_prompt_training_renders(tok):
    """A tool row as `mens train` encodes it = the served prompt + the supervised call."""
    from mens.records import Pair
    from mens.train.data import IGNORE, encode_pair

    row = {"tools": [WEATHER], "messages": [{"role": "user", "content": "Weather in Paris?"},
                                            {"role": "assistant", "content": None, "tool_calls": [
                                                {"type": "function", "function": {"name": "get_weather",
                                                                                  "arguments": {"city": "Paris"}}}]}]}
    ex, _, _ = encode_pair(Pair.from_dict(row, "row"), tok)
    served, _ = prompt(tok, parse_body(chat(tools=[WEATHER]), ChatParams))
    trained = tok.decode(ex.input_ids)
    assert trained == served + CALL + "<|im_end|>\n"
    assert tok.decode([t for t in ex.labels if t != IGNORE]) == CALL + "<|im_end|>"


# ---------------------------------------------------------------- the API, over a scripted engine

class ScriptedEngine:
    """Stands in for the engine: every request's choice `i` streams `texts[i]` in 4-character deltas."""

    def __init__(self, tokenizer, texts):
        self.tokenizer, self.texts = tokenizer, texts
        self.context_window, self.queue_size, self.grammar, self.alive, self.device = 4096, 8, None, True, "cpu"

    def submit_all(self, reqs):
        for req in reqs:
            for i in range(req.sampling.n):
                text = self.texts[i % len(self.texts)]
                for k in range(0, len(text), 4):
                    req.emit(("delta", i, text[k:k + 4]))
                req.emit(("done", i, "stop", len(text)))

    def cancel(self, reqs):
        pass


def client(tok, *texts):
    from fastapi.testclient import TestClient

    from mens.serve.app import build_app

    app = build_app(ScriptedEngine(tok, list(texts)), {"m": None})
    return openai.OpenAI(base_url="http://testserver/v1", api_key="x", max_retries=0, http_client=TestClient(app))


def test_the_answer_carries_tool_calls(tok):
    c = client(tok, f"Checking.\n{CALL}\n{CALL2}", "No tool needed.")
    r = c.chat.completions.create(model="m", messages=HISTORY[:1], tools=[WEATHER], n=2)
    first, second = r.choices
    assert first.finish_reason == "tool_calls" and first.message.content == "Checking."
    assert [(t.function.name, json.loads(t.function.arguments)) for t in first.message.tool_calls] == \
        [("get_weather", {"city": "Paris"}), ("get_time", {"zone": "CET", "24h": True})]
    assert second.finish_reason == "stop" and second.message.content == "No tool needed."
    assert not second.message.tool_calls
    only_call = c.chat.completions.create(model="m", messages=HISTORY[:1], tools=[WEATHER], n=1).choices[0]
    assert only_call.message.content == "Checking."
    plain = c.chat.completions.create(model="m", messages=HISTORY[:1]).choices[0]   # no tools: text as written
    assert plain.finish_reason == "stop" and plain.message.content == f"Checking.\n{CALL}\n{CALL2}"
    assert not plain.message.tool_calls


def test_content_is_null_when_the_answer_is_only_calls(tok):
    r = client(tok, CALL).chat.completions.create(model="m", messages=HISTORY, tools=[WEATHER])
    assert r.choices[0].message.content is None and r.choices[0].finish_reason == "tool_calls"
    assert r.choices[0].message.tool_calls[0].function.name == "get_weather"


def test_streamed_tool_calls_arrive_in_openai_deltas(tok):
    c = client(tok, f"Checking.\n{CALL}\n{CALL2}")
    with c.chat.completions.stream(model="m", messages=HISTORY[:1], tools=[WEATHER]) as s:
        chunks = []
        for event in s:
            if event.type == "chunk":
                chunks.append(event.chunk)
        final = s.get_final_completion()
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == "Checking." and "<tool_call>" not in text
    deltas = [t for ch in chunks if ch.choices for t in ch.choices[0].delta.tool_calls or ()]
    assert [d.index for d in deltas] == [0, 1] and all(d.id and d.type == "function" for d in deltas)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    msg = final.choices[0].message
    assert [(t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls] == \
        [("get_weather", {"city": "Paris"}), ("get_time", {"zone": "CET", "24h": True})]


def test_bad_tool_requests_are_400s_in_openai_shape(tok, tiny_tokenizer_dir):
    c = client(tok, "x")
    with pytest.raises(openai.BadRequestError) as err:
        c.chat.completions.create(model="m", messages=HISTORY[:1], tools=[{"type": "function", "function": {}}])
    assert err.value.body["param"] == "tools"
    plain = client(plain_tokenizer(tiny_tokenizer_dir), "x")
    with pytest.raises(openai.BadRequestError, match="does not render tools"):
        plain.chat.completions.create(model="m", messages=HISTORY[:1], tools=[WEATHER])
