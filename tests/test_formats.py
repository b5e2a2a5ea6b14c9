"""Row formats users bring (TRL prompt/completion, messages, ShareGPT, Alpaca, text, tool use,
tool_trace), each read from a real file and tokenized by the real Qwen2 tokenizer: the right
text reaches the right turn, and only assistant tokens are supervised."""

from __future__ import annotations

import json

import pytest

from mens.errors import MensError
from mens.records import read_pairs
from mens.train.data import IGNORE, build_examples, encode_pair
from paths import SHARED_ASSETS

# Qwen2.5's own chat template with tool use (the template the Qwen2.5 instruct models ship),
# so tool calls, tool results and the tools list render as the model expects them.
QWEN25_TOOL_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}"
    "{{- messages[0]['content'] }}{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}"
    "{{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}"
    "{%- for tool in tools %}{{- \"\\n\" }}{{- tool | tojson }}{%- endfor %}"
    "{{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n\" }}"
    "{%- else %}{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or "
    "(message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}{%- if tool_call.function is defined %}"
    "{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}"
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}"
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def _tokenizer_dir(tiny_tokenizer_dir):
    """The real Qwen2 tokenizer where the workplace's shared assets are (a user's clone has
    none): then the tests' own tiny byte-level BPE with the same ChatML tokens."""
    real = SHARED_ASSETS / "qwen2-tokenizer"
    return real if real.is_dir() else tiny_tokenizer_dir


@pytest.fixture(scope="module")
def qwen2(tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_tokenizer_dir(tiny_tokenizer_dir))


@pytest.fixture(scope="module")
def qwen25_tools(qwen2, tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(_tokenizer_dir(tiny_tokenizer_dir))
    tok.chat_template = QWEN25_TOOL_TEMPLATE
    return tok


def write(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def supervised(example, tok) -> str:
    return tok.decode([t for t in example.labels if t != IGNORE])


def unsupervised(example, tok) -> str:
    return tok.decode([t for t, lab in zip(example.input_ids, example.labels) if lab == IGNORE])


def only(tmp_path, tok, name, row):
    pairs, _ = read_pairs(write(tmp_path, name, [row]))
    (example, _, _), = [encode_pair(p, tok) for p in pairs]
    return pairs[0], example


# ---------------------------------------------------------------- each format, tokenized

def test_alpaca_input_reaches_the_user_turn_and_labels_stay_assistant_only(tmp_path, qwen2):
    row = {"instruction": "Translate to Vox.", "input": "def add(a, b): return a + b",
           "output": "fn add(a: int, b: int) to int {\n    return a + b\n}", "rating": 5}
    pair, ex = only(tmp_path, qwen2, "alpaca.jsonl", row)
    prompt_side = unsupervised(ex, qwen2)
    assert "<|im_start|>user\nTranslate to Vox.\ndef add(a, b): return a + b<|im_end|>" in prompt_side
    assert supervised(ex, qwen2) == row["output"] + "<|im_end|>"
    assert pair.rating == 5 and "input" not in pair.to_dict()
    # An empty input adds nothing; `history` turns come first, each answer supervised.
    row = {"instruction": "Again.", "input": "", "output": "ok", "history": [["Hi", "Hello"]]}
    _, ex = only(tmp_path, qwen2, "alpaca2.jsonl", row)
    assert "<|im_start|>user\nAgain.<|im_end|>" in unsupervised(ex, qwen2)
    assert supervised(ex, qwen2) == "Hello<|im_end|>ok<|im_end|>"


def test_trl_prompt_completion_strings_and_message_lists(tmp_path, qwen2):
    _, ex = only(tmp_path, qwen2, "pc.jsonl", {"prompt": "Say hi.", "completion": "hi"})
    assert supervised(ex, qwen2) == "hi<|im_end|>" and "Say hi." in unsupervised(ex, qwen2)
    row = {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
           "completion": [{"role": "assistant", "content": "4"}]}
    pair, ex = only(tmp_path, qwen2, "pc2.jsonl", row)
    text = qwen2.decode(ex.input_ids)
    assert text.startswith("<|im_start|>system\nBe brief.<|im_end|>") and supervised(ex, qwen2) == "4<|im_end|>"
    assert pair.messages[-1] == {"role": "assistant", "content": "4"}


def test_sharegpt_conversations_map_human_gpt_and_system(tmp_path, qwen2):
    row = {"conversations": [{"from": "system", "value": "You write Vox."},
                             {"from": "human", "value": "A counter?"}, {"from": "gpt", "value": "component C"},
                             {"from": "human", "value": "Smaller?"}, {"from": "gpt", "value": "fn c()"}]}
    pair, ex = only(tmp_path, qwen2, "sharegpt.jsonl", row)
    assert [m["role"] for m in pair.messages] == ["system", "user", "assistant", "user", "assistant"]
    assert qwen2.decode(ex.input_ids).startswith("<|im_start|>system\nYou write Vox.<|im_end|>")
    assert supervised(ex, qwen2) == "component C<|im_end|>fn c()<|im_end|>"


def test_messages_with_roles_and_a_text_row_trained_on_every_token(tmp_path, qwen2):
    row = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    _, ex = only(tmp_path, qwen2, "messages.jsonl", row)
    assert supervised(ex, qwen2) == "a<|im_end|>"
    pair, ex = only(tmp_path, qwen2, "text.jsonl", {"text": "fn add(a: int) to int { return a }"})
    assert pair.text and ex.labels == ex.input_ids
    assert qwen2.decode(ex.input_ids) == "fn add(a: int) to int { return a }" + qwen2.eos_token
    assert pair.to_dict()["text"] == pair.text  # mix writes it back as a text row


def test_text_rows_are_truncated_and_counted_in_build_examples(tmp_path, qwen2):
    pairs, _ = read_pairs(write(tmp_path, "t.jsonl", [{"text": "word " * 50}, {"text": "short"}]))
    examples, stats = build_examples(pairs, qwen2, seq_len=16)
    short = len(qwen2("short", add_special_tokens=False).input_ids) + 1  # + the end-of-text token
    assert [len(e.input_ids) for e in examples] == [16, short] and stats.truncated_examples == 1
    assert stats.supervised_tokens == 15 + (short - 1)  # every token but each row's first is a target


# ---------------------------------------------------------------- tool use

TOOLS = [{"type": "function", "function": {"name": "vox_check", "description": "Parse a Vox file",
                                           "parameters": {"type": "object",
                                                          "properties": {"path": {"type": "string"}}}}}]


def test_tool_calls_results_and_tools_column_pass_through_the_template(tmp_path, qwen25_tools):
    tok = qwen25_tools
    row = {"tools": TOOLS, "messages": [
        {"role": "user", "content": "Does main.vox parse?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "vox_check", "arguments": '{"path": "main.vox"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "vox_check", "content": "ok: 3 functions"},
        {"role": "assistant", "content": "Yes, it parses."}]}
    pair, ex = only(tmp_path, tok, "tools.jsonl", row)
    assert pair.tools == TOOLS and pair.to_dict()["tools"] == TOOLS
    text = tok.decode(ex.input_ids)
    assert '"name": "vox_check"' in text.split("\n</tools>")[0]  # the tools column reached the system turn
    call = '<tool_call>\n{"name": "vox_check", "arguments": {"path": "main.vox"}}\n</tool_call>'
    assert supervised(ex, tok) == call + "<|im_end|>" + "Yes, it parses.<|im_end|>"
    assert "<tool_response>\nok: 3 functions\n</tool_response>" in unsupervised(ex, tok)


def test_tool_trace_rows_become_tool_calls_and_results(tmp_path, qwen25_tools):
    tok = qwen25_tools
    row = {"prompt": "Build and report.", "rating": 4,
           "trace": [{"command": "vox build", "output": "built 2 targets"},
                     {"tool": "vox_check", "arguments": {"path": "a.vox"}, "output": {"ok": True}}],
           "response": "Built; a.vox parses."}
    path = write(tmp_path, "trace.jsonl", [row])
    with pytest.raises(MensError, match="record_format"):
        read_pairs(path, record_format="messages")
    (pair,), _ = read_pairs(path, record_format="tool_trace")
    assert pair.lane == "tooling" and pair.rating == 4
    assert [m["role"] for m in pair.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert {t["function"]["name"] for t in pair.tools} == {"shell", "vox_check"}
    ex, _, _ = encode_pair(pair, tok)
    sup = supervised(ex, tok)
    assert '{"name": "shell", "arguments": {"command": "vox build"}}' in sup
    assert '{"name": "vox_check", "arguments": {"path": "a.vox"}}' in sup and sup.endswith("Built; a.vox parses.<|im_end|>")
    assert "built 2 targets" in unsupervised(ex, tok) and '{"ok": true}' in unsupervised(ex, tok)


# ---------------------------------------------------------------- one format a file, clear errors

def test_a_mixed_file_names_the_line_and_both_formats(tmp_path):
    path = write(tmp_path, "mixed.jsonl", [{"instruction": "a", "input": "", "output": "b"},
                                           {"conversations": [{"from": "human", "value": "q"}]}])
    with pytest.raises(MensError) as err:
        read_pairs(path)
    assert err.value.where == f"{path}:2"
    assert "sharegpt" in err.value.what and "alpaca" in err.value.what and "ShareGPT" in err.value.todo
    pairs, skipped = read_pairs(path, lenient=True)
    assert len(pairs) == 1 and skipped[0].startswith(f"{path}:2")


def test_an_unknown_row_lists_the_formats_known(tmp_path):
    path = write(tmp_path, "u.jsonl", [{"question": "q", "answer": "a"}])
    with pytest.raises(MensError) as err:
        read_pairs(path)
    assert err.value.where == f"{path}:1" and "answer, question" in err.value.what
    assert "Alpaca" in err.value.todo and "prompt/completion" in err.value.todo


def test_pairs_and_messages_rows_may_share_a_file(tmp_path):
    """mens's own pairs files hold both shapes (follow-up pairs are messages)."""
    pairs, _ = read_pairs(write(tmp_path, "p.jsonl", [
        {"prompt": "a", "response": "b"},
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}]}]))
    assert len(pairs) == 2


@pytest.mark.parametrize("row, message", [
    ({"prompt": "x", "completion": ["y"]}, "both be strings or both message lists"),
    ({"conversations": [{"from": "alien", "value": "x"}]}, "unknown 'from'"),
    ({"instruction": "x", "input": 3, "output": "y"}, "'input' must be a string"),
    ({"prompt": "x", "trace": "ls", "response": "y"}, "'trace' must be a list"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [{"x": 1}]}]},
     "tool call needs a 'name'"),
    ({"text": ""}, "'text' must be a non-empty string"),
])
def test_bad_rows_of_each_format_are_one_line(tmp_path, row, message):
    path = write(tmp_path, "bad.jsonl", [row])
    with pytest.raises(MensError, match=message) as err:
        read_pairs(path)
    assert err.value.where == f"{path}:1"


# ---------------------------------------------------------------- Parquet and the Hub

def test_parquet_rows_read_like_jsonl(tmp_path, qwen2):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"instruction": f"task {i}", "input": f"ctx {i}", "output": f"answer {i}"} for i in range(3)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    from_parquet, _ = read_pairs(tmp_path / "train.parquet")
    from_jsonl, _ = read_pairs(write(tmp_path, "train.jsonl", rows))
    assert [p.to_dict() for p in from_parquet] == [p.to_dict() for p in from_jsonl]
    assert from_parquet[1].prompt == "task 1\nctx 1"
    (tmp_path / "broken.parquet").write_text("not parquet")
    with pytest.raises(MensError, match="not a readable Parquet file"):
        read_pairs(tmp_path / "broken.parquet")


def test_a_hub_dataset_id_offline_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MensError) as err:
        read_pairs("hf:tatsu-lab/alpaca")
    assert "offline" in err.value.what and "tatsu-lab/alpaca" in err.value.what and ".parquet" in err.value.todo


def test_mens_train_reads_a_train_parquet_of_sharegpt_rows(tiny_model_dir, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from mens.train.config import resolve_config
    from mens.train.loop import train

    rows = [{"conversations": [{"from": "human", "value": f"Add {i} and 1."},
                               {"from": "gpt", "value": f"fn add() to int {{ return {i} + 1 }}"}]} for i in range(12)]
    data = tmp_path / "data"
    data.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), data / "train.parquet")
    out = train(resolve_config({"model": str(tiny_model_dir), "data_dir": str(data), "output_dir": str(tmp_path / "run"),
                                "preset": "tiny", "device": "cpu", "backend": "lora", "max_steps": 2, "seq_len": 128,
                                "eval_interval": 0, "save_interval": 0}))
    assert out.status == "completed"
    manifest = json.loads((tmp_path / "run" / "training_manifest.json").read_text())
    assert manifest["data"]["train_file"].endswith("train.parquet") and manifest["data"]["train_pairs"] == 12
