"""POST /v1/completions: one or more prompts (text, or token ids used as given), each an engine
request with `n` choices, all queued or none; `echo` puts the prompt before the answer. The
answer whole or streamed as `text_completion` events."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request as HTTPRequest
from starlette.concurrency import run_in_threadpool

from mens.serve.requests import Request, next_id
from mens.serve.schema import APIError, CompletionParams
from mens.serve.serving import ServerState, State, collect, new_request, parse, stream, submit, usage

router = APIRouter()


@router.post("/v1/completions")
async def completions(request: HTTPRequest, state: State):
    p = await parse(request, CompletionParams, state)
    reqs, prompts = await run_in_threadpool(prepare_completions, state, p)
    prompt_tokens = sum(len(r.prompt_ids) for r in reqs)
    jobs = submit(state.engine, reqs)
    rid, now = next_id("cmpl"), int(time.time())
    if p.stream:
        return stream(state.engine, jobs, p, completion_chunks(rid, now, p, prompts), prompt_tokens)
    choices, used = await collect(state.engine, jobs, request.is_disconnected)
    for c in choices:
        if p.echo:
            c["text"] = prompts[c["index"] // p.n] + c["text"]
        c["logprobs"] = None
    return {"id": rid, "object": "text_completion", "created": now, "model": p.model, "choices": choices,
            "usage": usage(prompt_tokens, used)}


def prepare_completions(state: ServerState, p: CompletionParams) -> tuple[list[Request], list[str]]:
    """The requests, not yet queued (every prompt checked before any waits), and each prompt's
    text (for `echo` and grammar mode: token-id prompts decoded)."""
    engine, tok, vocab_size = state.engine, state.engine.tokenizer, state.vocab_size
    prompts = p.prompts()
    if len(prompts) > engine.queue_size:
        raise APIError(400, f"{len(prompts)} prompts in one request; this server queues at most "
                       f"{engine.queue_size} (--queue-size).", param="prompt")
    reqs, texts = [], []
    for i, x in enumerate(prompts):
        if isinstance(x, str):
            ids, text = tok(x).input_ids, x
        else:  # token ids, used as given (no BOS added), as OpenAI does
            bad = next((t for t in x if t >= vocab_size), None)
            if bad is not None:
                where = "prompt" if isinstance(p.prompt[0], int) else f"prompt[{i}]"
                raise APIError(400, f"Invalid token id in '{where}': {bad} is not a token of this model "
                               f"(0 to {vocab_size - 1}).", param="prompt")
            ids, text = list(x), tok.decode(x)
        reqs.append(new_request(state, ids, p, text))
        texts.append(text)
    return reqs, texts


def completion_chunks(rid: str, created: int, p: CompletionParams, prompts: list[str]):
    """The streamed answer's `make_chunk(index, text, finish, first=False)` → a text_completion
    event; with `echo`, a choice's first chunk carries its prompt."""
    def chunk(index, text, finish, first=False):
        return {"id": rid, "object": "text_completion", "created": created, "model": p.model,
                "choices": [{"index": index, "text": (prompts[index // p.n] if first and p.echo else text or ""),
                             "logprobs": None, "finish_reason": finish}]}

    return chunk
