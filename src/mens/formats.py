"""Row formats users bring, detected per row and held to one per file, each turned into the pair
contract (DESIGN.md §3) that the rest of mens reads.

    row_format(obj) -> str | None            which format a JSON object is in (None: none known)
    to_pair_dict(obj, fmt, where) -> dict     the row in the pair contract (prompt/response, messages, text)
    FileFormat(path, record_format)           .check(obj, where) -> fmt: one format per file, or one line

| format | a row | becomes |
|---|---|---|
| `pair` | mens's own: `prompt`/`response` (or any row stamped `schema_version`) | itself |
| `messages` | `messages: [{role, content, tool_calls?}]`, optional `tools` | itself |
| `prompt_completion` | TRL: `prompt` + `completion`, both strings or both message lists | user/assistant turns |
| `sharegpt` | `conversations: [{from, value}]` (`human`/`gpt`/`system`/`function_call`/`observation`) | messages |
| `alpaca` | `instruction`, `input`, `output` (+ `system`, `history`) | the user turn is instruction + input |
| `text` | `text` | trained on every token |
| `tool_trace` | `prompt`, `trace: [{tool, arguments, output} or {command, output}]`, `response` | tool calls + results |

Rows in the pair contract may mix `prompt`/`response` and `messages` in a file (mens writes
both); any other mix is an error naming file:line, the two formats and the formats known.
"""

from __future__ import annotations

import json
from typing import Any

from mens.errors import MensError

FORMATS = ("pair", "messages", "prompt_completion", "sharegpt", "alpaca", "text", "tool_trace")
_NATIVE = ("pair", "messages")  # one contract: a pairs file may hold both shapes
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "chatgpt": "assistant", "bard": "assistant", "model": "assistant", "system": "system",
                   "observation": "tool", "tool": "tool", "function_call": "assistant"}
_KNOWN_HELP = ("known: prompt/response, messages, prompt/completion (TRL), conversations (ShareGPT), "
               "instruction/input/output (Alpaca), text, trace (tool_trace)")


def row_format(obj: Any) -> str | None:
    """The format of one row, from its keys; None when it is in none mens knows."""
    if not isinstance(obj, dict):
        return None
    if "schema_version" in obj:
        return "pair"  # written by mens: already the contract, whatever its shape
    if "messages" in obj:
        return "messages"
    if "conversations" in obj:
        return "sharegpt"
    if "trace" in obj:
        return "tool_trace"
    if "prompt" in obj and "completion" in obj:
        return "prompt_completion"
    if "instruction" in obj and "output" in obj:
        return "alpaca"
    if ("prompt" in obj or "instruction" in obj) and ("response" in obj or "output" in obj):
        return "pair"
    if "text" in obj:
        return "text"
    if {"prompt", "instruction", "response", "output"} & set(obj):
        return "pair"  # a pair missing a half: the contract says which
    return None


def compatible(file_fmt: str, row_fmt: str | None) -> bool:
    return row_fmt == file_fmt or (file_fmt in _NATIVE and row_fmt in _NATIVE)


_JSON_TYPES = {list: "list", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}


class FileFormat:
    """Holds a file to one format: `record_format` when given, else the first row's."""

    def __init__(self, path: str, record_format: str = "auto"):
        if record_format != "auto" and record_format not in FORMATS:
            raise MensError(f"unknown record format {record_format!r}", path,
                            f"use auto or one of {', '.join(FORMATS)}")
        self.path = path
        self.declared = record_format
        self.format: str | None = None if record_format == "auto" else record_format

    def check(self, obj: Any, where: str) -> str:
        fmt = row_format(obj)
        if fmt is None:
            what = (f"keys: {', '.join(sorted(obj)) or 'none'}" if isinstance(obj, dict)
                    else f"a JSON {_JSON_TYPES.get(type(obj), type(obj).__name__)}, not an object")
            raise MensError(f"row is in no known format ({what})", where, _KNOWN_HELP)
        if self.format is None:
            self.format = fmt
        elif not compatible(self.format, fmt):
            why = f"not the record_format {self.format}" if self.declared != "auto" \
                else f"but the file's first row is {self.format} (one format a file)"
            raise MensError(f"row is in format {fmt}, {why}", where,
                            f"convert or move the row, or fix record_format ({_KNOWN_HELP})")
        return fmt


# ---------------------------------------------------------------- rows → the pair contract

def to_pair_dict(obj: dict, fmt: str, where: str) -> dict:
    """`obj` in the pair contract; keys the format does not use (rating, lane, …) are kept."""
    if fmt in _NATIVE or fmt == "text":
        return obj
    convert = {"prompt_completion": _prompt_completion, "sharegpt": _sharegpt, "alpaca": _alpaca,
               "tool_trace": _tool_trace}[fmt]
    return convert(dict(obj), where)


def _text(value: Any, key: str, where: str, fix: str) -> str:
    if not isinstance(value, str):
        raise MensError(f"field {key!r} must be a string, got {type(value).__name__}", where, fix)
    return value


def _prompt_completion(obj: dict, where: str) -> dict:
    prompt, completion = obj.pop("prompt"), obj.pop("completion")
    fix = "give prompt and completion as two strings or two message lists (TRL's layout)"
    if isinstance(prompt, str) and isinstance(completion, str):
        obj["prompt"], obj["response"] = prompt, completion
    elif isinstance(prompt, list) and isinstance(completion, list) and completion:
        obj["messages"] = list(prompt) + list(completion)
    else:
        raise MensError("prompt and completion must both be strings or both message lists", where, fix)
    return obj


def _sharegpt(obj: dict, where: str) -> dict:
    turns = obj.pop("conversations")
    fix = "give conversations as [{from: human|gpt|system, value: …}, …]"
    if not isinstance(turns, list) or not turns:
        raise MensError("field 'conversations' must be a non-empty list", where, fix)
    messages = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise MensError(f"conversations[{i}] needs a string 'value'", where, fix)
        role = _SHAREGPT_ROLES.get(turn.get("from"))
        if role is None:
            raise MensError(f"conversations[{i}] has unknown 'from' {turn.get('from')!r}", where,
                            f"use one of {', '.join(_SHAREGPT_ROLES)}")
        if turn["from"] == "function_call":  # LLaMA-Factory: the value is the call as JSON
            messages.append({"role": "assistant", "content": "",
                             "tool_calls": [_call(_json(turn["value"], f"conversations[{i}]", where), where)]})
        else:
            messages.append({"role": role, "content": turn["value"]})
    if isinstance(obj.get("system"), str) and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": obj.pop("system")})
    obj["messages"] = messages
    return obj


def _alpaca(obj: dict, where: str) -> dict:
    """Alpaca / LLaMA-Factory: the user turn is the instruction, a newline, then the input."""
    fix = "give instruction, input (may be empty) and output as strings"
    instruction = _text(obj.pop("instruction"), "instruction", where, fix)
    extra_input = _text(obj.pop("input", "") or "", "input", where, fix)
    output = _text(obj.pop("output"), "output", where, fix)
    messages = []
    for i, turn in enumerate(obj.pop("history", None) or []):  # earlier [question, answer] turns
        if not (isinstance(turn, list) and len(turn) == 2 and all(isinstance(t, str) for t in turn)):
            raise MensError(f"history[{i}] must be a [question, answer] pair of strings", where, fix)
        messages += [{"role": "user", "content": turn[0]}, {"role": "assistant", "content": turn[1]}]
    user = f"{instruction}\n{extra_input}" if extra_input.strip() else instruction
    if messages:
        obj["messages"] = messages + [{"role": "user", "content": user}, {"role": "assistant", "content": output}]
    else:
        obj["prompt"], obj["response"] = user, output
    return obj


def _json(value: Any, key: str, where: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as err:
        raise MensError(f"{key} is not valid JSON ({err.msg})", where, "write the call as a JSON object") from None


def _call(call: Any, where: str) -> dict:
    """A tool call in the layout chat templates read: {type: function, function: {name, arguments: {…}}}."""
    if isinstance(call, dict) and isinstance(call.get("function"), dict):
        call = call["function"]
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        raise MensError("a tool call needs a 'name'", where, "write {name: …, arguments: {…}}")
    args = _json(call.get("arguments", {}), "tool call arguments", where)
    return {"type": "function", "function": {"name": call["name"], "arguments": args}}


def _tool_trace(obj: dict, where: str) -> dict:
    """The Vox design's command/tool supervision row: a task, the tool calls made (each with the
    output it gave), and the final answer. A step `{command, output}` is a call of the `shell` tool."""
    fix = "give prompt, trace: [{tool, arguments, output} or {command, output}, …] and response"
    prompt = _text(obj.pop("prompt", obj.pop("task", None)), "prompt", where, fix)
    response = _text(obj.pop("response", obj.pop("final", None)), "response", where, fix)
    trace = obj.pop("trace")
    if not isinstance(trace, list):
        raise MensError("field 'trace' must be a list of steps", where, fix)
    messages: list[dict] = [{"role": "user", "content": prompt}]
    seen: dict[str, set[str]] = {}
    for i, step in enumerate(trace):
        if not isinstance(step, dict):
            raise MensError(f"trace[{i}] must be an object", where, fix)
        if "command" in step:
            name, args = "shell", {"command": _text(step["command"], f"trace[{i}].command", where, fix)}
        else:
            name = _text(step.get("tool"), f"trace[{i}].tool", where, fix)
            args = _json(step.get("arguments", step.get("args", {})), f"trace[{i}].arguments", where)
        if not isinstance(args, dict):
            raise MensError(f"trace[{i}].arguments must be an object", where, fix)
        output = step.get("output", step.get("result", ""))
        output = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        call_id = f"call_{i}"
        messages.append({"role": "assistant", "content": _text(step.get("thought", ""), "thought", where, fix),
                         "tool_calls": [{"id": call_id, "type": "function",
                                         "function": {"name": name, "arguments": args}}]})
        messages.append({"role": "tool", "name": name, "tool_call_id": call_id, "content": output})
        seen.setdefault(name, set()).update(args)
    messages.append({"role": "assistant", "content": response})
    obj["messages"] = messages
    obj.setdefault("lane", "tooling")
    if "tools" not in obj and seen:  # the schemas the calls imply, so the template can list them
        obj["tools"] = [{"type": "function", "function": {
            "name": name, "description": f"the {name} tool",
            "parameters": {"type": "object", "properties": {k: {"type": "string"} for k in sorted(keys)}}}}
            for name, keys in seen.items()]
    return obj


def check_tool_calls(message: dict, i: int, where: str, fix: str) -> None:
    """An assistant message's `tool_calls`: a list of calls in the chat-template layout."""
    calls = message.get("tool_calls")
    if calls is None:
        return
    if message["role"] != "assistant" or not isinstance(calls, list) or not calls:
        raise MensError(f"messages[{i}].tool_calls must be a non-empty list on an assistant turn", where, fix)
    message["tool_calls"] = [_call(c, where) | ({"id": c["id"]} if isinstance(c, dict) and "id" in c else {})
                             for c in calls]
