"""Tool use in `mens serve`: a chat request's `tools` and tool messages in the layout chat templates
read (as transformers and TRL pass them, and as `mens train` renders tool rows), and the tool calls
a model writes taken back out of its text — a function of the text alone, so every engine can use it.

The calls parsed are those Qwen2.5 (Hermes style) and mens's ChatML template write, one block each:

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

A block whose JSON does not parse (or has no name, or arguments that are no object) stays in the
content as written. The content is the text outside the blocks, without the whitespace that opens
or closes the answer next to a call; null when there is none. Only closed blocks are calls.

    prompt(tokenizer, params) -> (text, ToolUse | None)   the chat prompt; ToolUse when tools are live
    split_tool_calls(text) -> (content, calls)             OpenAI `tool_calls` out of a finished text
    ToolCallStream().feed(delta) / .close()               the same, piece by piece, for streaming
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from mens.serve.schema import APIError, ChatParams

OPEN, CLOSE = "<tool_call>", "</tool_call>"


@dataclass
class ToolUse:
    """A request whose tools reach the template: its output is parsed for calls. `prefix` is the
    start of a call written after the generation prompt when tool_choice forces one (the model
    continues it); it belongs to the answer's text."""

    tools: list[dict]
    prefix: str = ""


# ---------------------------------------------------------------- request → template inputs

def template_messages(p: ChatParams) -> list[dict]:
    """The messages as chat templates take them: `developer` as `system`, an assistant's
    `tool_calls` with their arguments decoded (the templates write them with `tojson`), a tool
    result with its `tool_call_id` and the name of the call it answers."""
    names: dict[str, str] = {}
    out = []
    for m in p.messages:
        msg: dict[str, Any] = {"role": "system" if m.role == "developer" else m.role, "content": m.text()}
        if m.tool_calls:
            msg["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.function.name, "arguments": decode_arguments(c.function.arguments)}}
                                 for c in m.tool_calls]
            names.update((c.id, c.function.name) for c in m.tool_calls)
        if m.role == "tool":
            msg["tool_call_id"] = m.tool_call_id
            if m.name or m.tool_call_id in names:
                msg["name"] = m.name or names[m.tool_call_id]
        out.append(msg)
    return out


def decode_arguments(arguments: str | dict) -> Any:
    """OpenAI sends arguments as a JSON string; templates want the object (schema.py checked it parses)."""
    return json.loads(arguments) if isinstance(arguments, str) else arguments


def tool_use(p: ChatParams, template: str) -> ToolUse | None:
    """The tools a request passes to the template (none under tool_choice "none"), and the call
    start that tool_choice "required" or a named function forces; 400 when the template cannot."""
    if not p.tools or p.tool_choice == "none":
        return None
    if "tools" not in template:
        raise APIError(400, "This model's chat template does not render tools; send the request without "
                       "'tools' or serve the model with a template that has them (mens's ChatML does).",
                       param="tools")
    forced = p.tool_choice not in (None, "auto")
    if forced and OPEN not in template:
        raise APIError(400, f"tool_choice {p.tool_choice!r} needs a chat template whose calls are written as "
                       f"{OPEN}…{CLOSE} (mens's ChatML, Qwen2.5); use tool_choice 'auto'.", param="tool_choice")
    # The forced start ends where a tokenizer splits anyway (after a newline, after `":`), so the
    # prompt's last token is one the model saw there in training.
    prefix = ""
    if p.tool_choice == "required":
        prefix = OPEN + "\n"
    elif forced:
        prefix = OPEN + "\n" + json.dumps({"name": p.tool_choice.function.name}, ensure_ascii=False)[:-1] + ', "arguments":'
    return ToolUse([t.model_dump(exclude_none=True) for t in p.tools], prefix)


def prompt(tokenizer, p: ChatParams) -> tuple[str, ToolUse | None]:
    """The prompt text for a chat request, rendered by the tokenizer's chat template with the
    request's tools, as `mens train` renders rows (mens.train.data)."""
    from jinja2 import TemplateError

    use = tool_use(p, str(getattr(tokenizer, "chat_template", None) or ""))
    try:
        text = tokenizer.apply_chat_template(template_messages(p), tools=use.tools if use else None,
                                             tokenize=False, add_generation_prompt=True)
    except TemplateError as exc:
        raise APIError(400, f"The model's chat template refused the messages: {exc}", param="messages") from None
    return text + (use.prefix if use else ""), use


# ---------------------------------------------------------------- generated text → tool calls

def parse_call(body: str) -> dict | None:
    """One block's JSON → an OpenAI tool call (arguments as a JSON string), or None if malformed."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models write the arguments as a JSON string, as OpenAI sends them
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": obj["name"], "arguments": json.dumps(args, ensure_ascii=False)}}


class ToolCallStream:
    """Splits a text, fed piece by piece, into content and tool calls. `feed` returns what is
    certain so far — (content, calls) — holding back a possible `<tool_call>` start, an open block
    and trailing whitespace (dropped if a call follows it and nothing else does); `close` returns
    the rest. Calls carry their `index` (the order in this answer), as OpenAI's stream deltas do.
    With no call in the text, the content is the text itself."""

    def __init__(self):
        self.buf = ""            # text not yet decided
        self.space = ""          # whitespace after the content sent so far
        self.sent = False        # some content was returned
        self.after_call = False  # a call came after the last content
        self.count = 0           # calls so far

    def feed(self, text: str) -> tuple[str, list[dict]]:
        self.buf += text
        content, calls = [], []
        while True:
            at = self.buf.find(OPEN)
            if at < 0:
                keep = _partial_open(self.buf)
                content.append(self._content(self.buf[:len(self.buf) - keep]))
                self.buf = self.buf[len(self.buf) - keep:]
                break
            content.append(self._content(self.buf[:at]))
            self.buf = self.buf[at:]
            end = self.buf.find(CLOSE, len(OPEN))
            if end < 0:
                break
            call = parse_call(self.buf[len(OPEN):end].strip())
            if call is None:  # malformed: content as written
                content.append(self._content(self.buf[:end + len(CLOSE)]))
            else:
                if not self.sent:
                    self.space = ""
                self.after_call = True
                calls.append({"index": self.count, **call})
                self.count += 1
            self.buf = self.buf[end + len(CLOSE):]
        return "".join(content), calls

    def close(self) -> tuple[str, list[dict]]:
        """The end of the text: an unclosed block or a partial `<tool_call>` is content."""
        content = self._content(self.buf)
        if not self.after_call:
            content += self.space
        self.buf = self.space = ""
        return content, []

    def _content(self, text: str) -> str:
        text = self.space + text
        body = text.rstrip()
        self.space = text[len(body):]
        if not body:
            return ""
        if not self.sent and self.count:  # the answer opened with calls: no leading whitespace
            body = body.lstrip()
        self.sent, self.after_call = True, False
        return body


def _partial_open(text: str) -> int:
    """Length of the longest tail of `text` that could still grow into `<tool_call>`."""
    for k in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if text.endswith(OPEN[:k]):
            return k
    return 0


def split_tool_calls(text: str) -> tuple[str, list[dict]]:
    """A finished answer → (content, tool calls): the content is the text outside valid blocks."""
    stream = ToolCallStream()
    content, calls = stream.feed(text)
    rest, _ = stream.close()
    return content + rest, [{k: v for k, v in c.items() if k != "index"} for c in calls]
