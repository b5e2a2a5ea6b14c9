"""Tool use end to end: the tiny model, trained for a few seconds on one tool-use conversation as
`mens train` encodes it (mens's ChatML template), served on 127.0.0.1 and driven by the `openai`
client — it calls the tool, gets the result back as a `tool` message, and answers."""

import json
import shutil

import pytest

from live_server import API_KEY, LiveServer
from test_tools import CALL, WEATHER

pytestmark = pytest.mark.slow

QUESTION = [{"role": "user", "content": "Weather in Paris?"}]
ROW = {"tools": [WEATHER], "messages": [
    *QUESTION,
    {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call_0", "content": "sunny, 21 C"},
    {"role": "assistant", "content": "It is sunny in Paris."}]}


@pytest.fixture(scope="module")
def tool_server(tiny_model_dir, tmp_path_factory):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mens.chat_template import CHATML_TEMPLATE
    from mens.records import Pair
    from mens.serve.app import build_server
    from mens.train.data import encode_pair

    model_dir = tmp_path_factory.mktemp("tool-model") / "model"
    shutil.copytree(tiny_model_dir, model_dir)
    cfg = json.loads((model_dir / "config.json").read_text())   # the tools block makes a ~600-token chat
    (model_dir / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 2048}))
    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.chat_template = CHATML_TEMPLATE
    ex, _, _ = encode_pair(Pair.from_dict(ROW, "row"), tok)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    ids, labels = torch.tensor([ex.input_ids]), torch.tensor([ex.labels])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(400):  # memorise the conversation (about 120 steps, 2 s on one core)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        if loss.item() < 0.003:
            break
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    app, engine = build_server(str(model_dir), name="tiny", api_key=API_KEY, device="cpu")
    server = LiveServer(app, engine)
    yield server
    server.close()


def test_the_model_calls_the_tool_and_answers_its_result(tool_server):
    client = tool_server.client()
    r = client.chat.completions.create(model="tiny", messages=QUESTION, tools=[WEATHER], temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}

    tok = tool_server.engine.tokenizer   # the tools reached the prompt the model saw
    prompt = tok.apply_chat_template(QUESTION, tools=[WEATHER], tokenize=False, add_generation_prompt=True)
    assert '"name": "get_weather"' in prompt and r.usage.prompt_tokens == len(tok(prompt).input_ids)

    history = [*QUESTION, choice.message.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}]
    again = client.chat.completions.create(model="tiny", messages=history, tools=[WEATHER], temperature=0)
    assert again.choices[0].finish_reason == "stop" and not again.choices[0].message.tool_calls
    assert again.choices[0].message.content == "It is sunny in Paris."
    rendered = tok.apply_chat_template(
        [*QUESTION, {"role": "assistant", "content": "", "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
         {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}],
        tools=[WEATHER], tokenize=False, add_generation_prompt=True)
    assert CALL in rendered and "<tool_response>\nsunny, 21 C\n</tool_response>" in rendered
    assert again.usage.prompt_tokens == len(tok(rendered).input_ids)


def test_streamed_call_and_forced_and_refused_tools(tool_server):
    client = tool_server.client()
    with client.chat.completions.stream(model="tiny", messages=QUESTION, tools=[WEATHER], temperature=0) as s:
        chunks = [e.chunk for e in s if e.type == "chunk"]
        final = s.get_final_completion()
    assert not "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    (call,) = final.choices[0].message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}

    named = client.chat.completions.create(model="tiny", messages=QUESTION, tools=[WEATHER], temperature=0,
                                           tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert named.choices[0].message.tool_calls[0].function.name == "get_weather"
    assert json.loads(named.choices[0].message.tool_calls[0].function.arguments) == {"city": "Paris"}

    off = client.chat.completions.create(model="tiny", messages=QUESTION, tools=[WEATHER], temperature=0,
                                         tool_choice="none", max_tokens=8)
    assert not off.choices[0].message.tool_calls and off.choices[0].finish_reason in ("stop", "length")
