"""`mens serve --engine vllm`: hand the model and its adapters to vLLM's OpenAI server.

vLLM serves LoRA adapters over a base with `--enable-lora --lora-modules name=path`, reading the
standard PEFT files `mens train` writes, so a run dir needs no conversion; a merged dir is a
plain HF model. This module only builds the command line: vLLM does the serving.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from mens.errors import MensError
from mens.inference import adapter_base, is_adapter_run
from mens.progress import say

_VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "f16": "float16", "f32": "float32"}


def vllm_command(model: str, adapters: dict[str, str], *, host: str = "127.0.0.1", port: int = 8000,
                 api_key: str | None = None, name: str | None = None, dtype: str | None = None) -> list[str]:
    """The `python -m vllm.entrypoints.openai.api_server …` line that serves what mens would."""
    served = name or Path(str(model).rstrip("/")).name
    lora = dict(adapters)
    base = model
    if is_adapter_run(model):
        base = adapter_base(model)
        lora = {served: str(model), **lora}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(base),
           "--host", host, "--port", str(port)]
    if not is_adapter_run(model):
        cmd += ["--served-model-name", served]
    elif (Path(model) / "tokenizer_config.json").is_file():
        # The run's tokenizer, not the base's: `mens train` saves the chat template it trained
        # with there (ChatML where the base had none), and a chat request needs that template.
        cmd += ["--tokenizer", str(model)]
    if lora:
        ranks = [int(json.loads((Path(p) / "adapter_config.json").read_text()).get("r", 8)) for p in lora.values()]
        rank = next((r for r in _VLLM_LORA_RANKS if r >= max(ranks)), max(ranks))
        cmd += ["--enable-lora", "--max-lora-rank", str(rank), "--max-loras", str(len(lora)),
                "--lora-modules", *[f"{n}={p}" for n, p in lora.items()]]
    if api_key:
        cmd += ["--api-key", api_key]
    if dtype:
        cmd += ["--dtype", _DTYPES[dtype]]
    return cmd


def launch_vllm(model: str, adapters: dict[str, str], **kwargs) -> int:
    if importlib.util.find_spec("vllm") is None:
        raise MensError("vLLM is not installed", "--engine vllm",
                        "pip install vllm (Linux + CUDA GPU), or drop --engine vllm to use the built-in engine")
    cmd = vllm_command(model, adapters, **kwargs)
    say("serve: " + " ".join(cmd))
    return subprocess.call(cmd)
