"""POST /v1/chat/completions: the chat template (with the request's tools) rendered and
tokenised in a worker thread, one engine request with `n` choices, the answer whole or streamed
as `chat.completion.chunk` events. With `tools`, the calls the model writes come back as
`tool_calls` (serve/tools.py), finish_reason "tool_calls"."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request as HTTPRequest
from starlette.concurrency import run_in_threadpool

from mens.serve.requests import Request, next_id
from mens.serve.schema import ChatParams
from mens.serve.serving import ServerState, State, collect, new_request, parse, stream, submit, usage
from mens.serve.tools import ToolCallStream, ToolUse, split_tool_calls
from mens.serve.tools import prompt as chat_prompt

router = APIRouter()


@router.post("/v1/chat/completions")
async def chat(request: HTTPRequest, state: State):
    p = await parse(request, ChatParams, state)
    reqs, use = await run_in_threadpool(prepare_chat, state, p)
    prompt_tokens = len(reqs[0].prompt_ids)
    jobs = submit(state.engine, reqs)
    rid, now = next_id("chatcmpl"), int(time.time())
    if p.stream:
        return stream(state.engine, jobs, p, chat_chunks(rid, now, p, use), prompt_tokens)
    choices, used = await collect(state.engine, jobs, request.is_disconnected)
    return {"id": rid, "object": "chat.completion", "created": now, "model": p.model,
            "choices": [{"index": c["index"], **chat_answer(c["text"], c["finish_reason"], use),
                         "logprobs": None} for c in choices],
            "usage": usage(prompt_tokens, used)}


def prepare_chat(state: ServerState, p: ChatParams) -> tuple[list[Request], ToolUse | None]:
    """Template (with the request's tools) and tokenise, in a worker thread → the request, not
    yet queued, and its tool use (None: the answer is not parsed for tool calls)."""
    tok = state.engine.tokenizer
    text, use = chat_prompt(tok, p)
    return [new_request(state, tok(text, add_special_tokens=False).input_ids, p)], use


def chat_answer(text: str, finish: str, use: ToolUse | None) -> dict:
    """A chat choice's message and finish_reason; with tools, the calls its text makes."""
    if use is None:
        return {"message": {"role": "assistant", "content": text}, "finish_reason": finish}
    content, calls = split_tool_calls(use.prefix + text)
    if not calls:
        return {"message": {"role": "assistant", "content": content}, "finish_reason": finish}
    return {"message": {"role": "assistant", "content": content or None, "tool_calls": calls},
            "finish_reason": "tool_calls" if finish == "stop" else finish}


def chat_chunks(rid: str, created: int, p: ChatParams, use: ToolUse | None):
    """The streamed answer's `make_chunk(index, content, finish, first=False)` → a
    chat.completion.chunk, or None while nothing can be sent. With tools, each choice's text
    goes through a ToolCallStream: content as it is certain, each call whole in one delta once
    its </tool_call> arrives."""
    calls = {} if use is None else {i: ToolCallStream() for i in range(p.n)}
    for split in calls.values():
        split.feed(use.prefix)   # the forced start of a call: held, never content

    def chunk(index, content, finish, first=False):
        delta: dict = {"role": "assistant", "content": ""} if first else {}
        split = calls.get(index) if not first and (content or finish) else None
        if split is None:
            if content:
                delta["content"] = content
        else:
            text, new = split.feed(content) if content else split.close()
            if text:
                delta["content"] = text
            if new:
                delta["tool_calls"] = new
            if finish == "stop" and split.count:
                finish = "tool_calls"
            if not delta and finish is None:
                return None
        return {"id": rid, "object": "chat.completion.chunk", "created": created, "model": p.model,
                "choices": [{"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    return chunk
