"""`mens serve`. Light at import time: everything heavy loads in the handlers."""

from __future__ import annotations

import argparse

from pydantic import BaseModel, Field, ValidationError

from mens.errors import MensError


class ServeLimits(BaseModel):
    """The numeric flags of `mens serve`, range-checked before anything loads."""

    port: int = Field(ge=0, le=65535)
    max_batch: int = Field(ge=1, le=4096)
    queue_size: int = Field(ge=1, le=1_000_000)
    max_body_bytes: int = Field(ge=1024)
    max_prompt_tokens: int | None = Field(default=None, ge=1)


_LIMIT_FIX = {"port": "give a port number 0-65535 (0: any free port)",
              "max_batch": "give a whole number ≥ 1", "queue_size": "give a whole number ≥ 1",
              "max_body_bytes": "give a number of bytes ≥ 1024", "max_prompt_tokens": "give a whole number ≥ 1"}


def serve_limits(args: argparse.Namespace) -> ServeLimits:
    try:
        return ServeLimits(**{k: getattr(args, k) for k in ServeLimits.model_fields})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0])
        flag = "--" + field.replace("_", "-")
        raise MensError(f"bad {flag} {getattr(args, field)!r}: {err['msg'].lower()}", flag, _LIMIT_FIX[field]) \
            from None


def register(sub) -> None:
    from mens.flags import add_flag, dtype_value

    s = sub.add_parser("serve", help="serve a model or run over an OpenAI-compatible HTTP API",
                       description="Serve MODEL_OR_RUN (a run dir, a merged/HF model dir or a hub id) over "
                       "/v1/chat/completions, /v1/completions and /v1/models, batching concurrent requests.")
    s.add_argument("model", metavar="MODEL_OR_RUN")
    s.add_argument("--adapter", action="append", default=[], metavar="NAME=RUN",
                   help="another adapter over the same base, chosen by the request's `model` (repeatable)")
    s.add_argument("--name", help="served name of MODEL_OR_RUN (default: its directory name)")
    s.add_argument("--host", default="127.0.0.1", help="bind address (127.0.0.1: this machine only)")
    s.add_argument("--port", default="8000", help="TCP port (8000; 0: any free port)")
    s.add_argument("--api-key", help="require `Authorization: Bearer KEY` on every route but /health "
                   "(default: env MENS_API_KEY, else none)")
    s.add_argument("--max-batch", default="8", help="sequences decoded together (8)")
    s.add_argument("--queue-size", default="64", help="waiting requests before 429 (64)")
    s.add_argument("--max-body-bytes", default=str(2 * 1024 * 1024),
                   help="largest request body; larger ones get 413 (2097152 = 2 MiB)")
    s.add_argument("--max-prompt-tokens", default=None,
                   help="longest prompt in tokens; longer ones get 400 (default: the context window)")
    add_flag(s, "--grammar",
             help="constrain generated code (vox, or another language pack) to parse as far as it goes")
    s.add_argument("--engine", choices=["hf", "vllm", "llamacpp"], default="hf",
                   help="hf: the built-in batching engine; vllm: launch vLLM's OpenAI server; llamacpp: "
                   "llama.cpp on the CPU (MODEL_OR_RUN may be a .gguf; a run or model dir is exported first)")
    s.add_argument("--quant", choices=["f16", "q8_0", "q4_k_m"],
                   help="--engine llamacpp: the GGUF to export a run or model dir to (f16)")
    add_flag(s, "--device", default="auto", help="auto, cpu, cuda, cuda:1 …")
    add_flag(s, "--dtype", type=dtype_value, metavar="{bf16,fp16,fp32}",
             help="default: fp32 on CPU, bf16 on CUDA (f16 and f32 read as fp16 and fp32)")
    s.set_defaults(func=_serve_until_stopped)


def parse_adapters(items: list[str]) -> dict[str, str]:
    adapters: dict[str, str] = {}
    for item in items:
        name, sep, run = item.partition("=")
        if not sep or not name or not run:
            raise MensError(f"bad --adapter {item!r}", "--adapter", "write NAME=RUN_DIR")
        adapters[name] = run
    return adapters


def check_llamacpp_args(args: argparse.Namespace, adapters: dict[str, str]) -> None:
    """The flags --engine llamacpp has no use for, refused rather than ignored."""
    refused = [("--grammar", args.grammar, "language-pack constraints run in the mens engine only"),
               ("--adapter", adapters, "serve each run's GGUF on its own, or use the mens engine"),
               ("--dtype", args.dtype, "the GGUF's own types are used; choose them with --quant"),
               ("--device", args.device not in ("auto", "cpu"), "llama.cpp serves on the CPU here")]
    for flag, given, fix in refused:
        if given:
            raise MensError(f"{flag} is not available with --engine llamacpp", flag,
                            f"{fix} (leave {flag} out, or serve with --engine hf)")


def _serve_until_stopped(args: argparse.Namespace) -> int:
    """SIGTERM (`kill`, systemd, docker stop) leaves as Ctrl+C does, exit 130: while the model
    loads, and while serving — uvicorn shuts down gracefully, puts our handler back and raises
    the signal again, which then raises here."""
    from mens.corpus.parallel import sigterm_as_interrupt

    with sigterm_as_interrupt():
        return _serve(args)


def _serve(args: argparse.Namespace) -> int:
    import os
    from functools import partial

    limits = serve_limits(args)
    adapters = parse_adapters(args.adapter)
    if args.api_key is not None and not args.api_key.strip():
        raise MensError("empty --api-key", "--api-key", "give a key, or leave the flag out to serve without one")
    api_key = args.api_key or os.environ.get("MENS_API_KEY") or None   # the only place the env var is read
    if args.engine == "vllm":
        from mens.serve.vllm import launch_vllm

        return launch_vllm(args.model, adapters, host=args.host, port=limits.port, api_key=api_key,
                           name=args.name, dtype=args.dtype)
    import uvicorn

    from mens.progress import say, warn
    from mens.serve.preflight import bind, check_device, check_sources

    if args.engine == "llamacpp":
        from mens.serve.gguf_model import check_source
        from mens.serve.llamacpp_engine import build_llamacpp_server, check_available

        check_llamacpp_args(args, adapters)
        check_available()
        check_source(args.model)
        build = partial(build_llamacpp_server, args.model, quant=args.quant or "f16", name=args.name,
                        api_key=api_key, max_batch=limits.max_batch, queue_size=limits.queue_size,
                        max_body_bytes=limits.max_body_bytes, max_prompt_tokens=limits.max_prompt_tokens)
        how = f"llama.cpp, batch ≤ {limits.max_batch}"
    else:
        from mens.serve.app import build_server

        if args.quant:
            raise MensError("--quant is for --engine llamacpp", "--quant",
                            "add --engine llamacpp, or leave --quant out")
        check_device(args.device)               # everything that can be checked before the model loads
        check_sources(args.model, adapters)
        if limits.max_prompt_tokens is not None:  # a request's prompt + max_tokens: app.py, before it is queued
            from mens.positions import check_length, source_positions

            check_length(limits.max_prompt_tokens, source_positions(args.model), "--max-prompt-tokens", args.model)
        if args.grammar:
            from mens.grammar import Constraint

            Constraint.for_language(args.grammar)
        build = partial(build_server, args.model, adapters=adapters, name=args.name, api_key=api_key,
                        max_batch=limits.max_batch, queue_size=limits.queue_size, grammar=args.grammar,
                        device=args.device, dtype=args.dtype, max_body_bytes=limits.max_body_bytes,
                        max_prompt_tokens=limits.max_prompt_tokens)
        how = f"batch ≤ {limits.max_batch}{', grammar ' + args.grammar if args.grammar else ''}"
    sock = bind(args.host, limits.port)     # held from here, so nothing takes the port while the model loads
    try:
        app, engine = build()
    except BaseException:
        sock.close()
        raise
    if args.host not in ("127.0.0.1", "localhost", "::1") and not api_key:
        warn(f"serve: warning: listening on {args.host} without --api-key — anyone who can reach it can use it")
    host, port = sock.getsockname()[:2]
    if getattr(engine, "one_at_a_time", None):   # never a silent difference: say the exact fallback is in use
        how += f"; {engine.batching}"
    say(f"serving {', '.join(engine.models)} on http://{host}:{port}/v1 ({engine.device}, {how})")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        engine.stop()
        sock.close()
    if not server.started:
        raise MensError(f"the server did not start on {args.host}:{port}", "--host", "see the message above")
    return 0
