"""`mens probe --model DIR`: how much device memory a run of a base needs, per backend, before
any weight is loaded — from the model's config alone (its weights' shapes, built on the meta
device), the preset's geometry and the loop's own activation estimate (`mens.train.speed`).

What it counts, for one GPU: the frozen base (NF4 for qlora: 4.13 bits a weight with
double-quantised scales, linear layers only — bitsandbytes leaves embeddings, norms and fused
MoE experts in bf16; bf16 for lora; fp32 master weights, gradients and AdamW's two moments for
full), the adapters (fp32 weights, gradients and AdamW state; counted on PEFT's own adapters over the
meta weights, with `mens train`'s targets), one pass's saved activations, the
LM head's chunked logits (`mens.train.loss`), and the CUDA context. It is an estimate to choose a
backend and preset by, not a promise: the allocator's fragmentation comes on top.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

NF4_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)   # 4-bit codes + an 8-bit scale per 64 + fp32 per 256 scales
CUDA_CONTEXT_GB = 0.6
GB = 1 << 30
# Families whose maintainers advise bf16 LoRA over QLoRA (its 4-bit quantisation error is large):
# the Qwen3.5 model cards and Unsloth's Qwen3.5 guide advise against QLoRA and train bf16 LoRA on
# 16 GB+ cards.
QLORA_ADVICE = {
    "qwen3_5": "Qwen3.5", "qwen3_5_text": "Qwen3.5", "qwen3_5_moe": "Qwen3.5", "qwen3_5_moe_text": "Qwen3.5",
}


@dataclass
class Estimate:
    backend: str
    weights_gb: float
    adapters_gb: float
    activations_gb: float
    logits_gb: float
    total_gb: float
    checkpointing: bool   # what `gradient_checkpointing: auto` turns on to fit (mens.train.speed's rule)

    def to_dict(self) -> dict:
        return asdict(self)


def shapes(config):
    """The causal LM of `config` on the meta device: every weight's shape, no memory."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def adapter_parameters(config, lora_r: int) -> int:
    """How many LoRA weights `mens train`'s default adapters (`all-linear`, rank `lora_r`) put on
    the model of `config`: PEFT attaches them to the meta weights with mens train's targets
    (mens.train.family.adapter_targets), so the count is PEFT's — routers and the linear layers
    its v4->v5 rewrite leaves frozen get none, a fused gate_up_proj it rewrites gets twice the
    rank, and GPT-2's Conv1D layers count like linear ones."""
    import warnings

    from peft import get_peft_model

    from mens.train.family import default_lora_config

    model = shapes(config)  # its own meta copy: PEFT wraps the layers in place
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PEFT's notes on its own rewrite and transformers' attributes
        adapted = get_peft_model(model, default_lora_config(model, lora_r, lora_r))
    return sum(p.numel() for name, p in adapted.named_parameters() if ".lora_" in name)


def estimate(model, backend: str, *, adapter_params: int, seq_len: int, micro_batch: int, memory_gb: float,
             loss_chunk: int = 1024) -> Estimate:
    """The memory a `backend` run of `model` (meta weights: `shapes`) with `adapter_params` LoRA
    weights (`adapter_parameters`) needs on one GPU of `memory_gb`, in GB; activations as
    `gradient_checkpointing: auto` keeps them: all of a pass's when they fit in half the memory
    left, else only each layer's input (checkpointing every layer; mens checkpoints every n-th
    layer when that fits, so this is the upper bound of it)."""
    from torch import nn

    from mens.train.family import text_config
    from mens.train.speed import _activation_bytes_per_token

    head = model.get_output_embeddings()
    linear = [m for m in model.modules() if isinstance(m, nn.Linear) and m is not head]
    n_linear = sum(m.weight.numel() for m in linear)
    n_all = sum(p.numel() for p in model.parameters())
    adapters = adapter_params * 16  # fp32 weights, gradients and AdamW's two moments
    if backend == "qlora":
        weights = n_linear * NF4_BYTES + (n_all - n_linear) * 2
    elif backend == "lora":
        weights = n_all * 2
    else:  # full: fp32 master weights, fp32 gradients, AdamW's two fp32 moments; no adapters
        weights, adapters = n_all * 16, 0
    per_token = _activation_bytes_per_token(model) or 0
    tokens = seq_len * micro_batch
    layers = int(getattr(text_config(model.config), "num_hidden_layers", 1) or 1)
    hidden = int(getattr(text_config(model.config), "hidden_size", 0) or 0)
    vocab = head.out_features if head is not None else 0
    logits = min(loss_chunk, tokens) * vocab * (2 + 4)  # the head's output and its fp32 copy (loss.py)
    static = weights + adapters + logits + CUDA_CONTEXT_GB * GB
    activations = tokens * per_token
    checkpointing = activations > 0.5 * max(memory_gb * GB - static, 0)
    if checkpointing:
        activations = tokens * (2 * hidden * layers + per_token / layers)
    total = static + activations
    return Estimate(backend, *(round(x / GB, 2) for x in (weights, adapters, activations, logits, total)),
                    checkpointing=checkpointing)


def model_estimates(model: str, preset_name: str | None, info) -> tuple[str, float, str, dict[str, Estimate]]:
    """(preset, the memory it is judged against, model_type, backend → Estimate) for `mens probe
    --model`: the preset's geometry; this device's memory, or a GPU preset's card size (`16g`: 16
    GB) where this machine lacks that GPU."""
    from transformers import AutoConfig

    from mens.errors import MensError
    from mens.hf import resolve_base
    from mens.train.family import text_config
    from mens.train.presets import PRESETS

    preset_name = preset_name or info.recommended_preset
    if preset_name not in PRESETS:
        raise MensError(f"unknown preset {preset_name!r}", "--preset", f"use one of {', '.join(PRESETS)}")
    preset = PRESETS[preset_name]
    memory_gb = info.memory_gb
    if preset.needs == "gpu" and (info.device == "cpu" or memory_gb < preset.min_memory_gb):
        memory_gb = float(preset_name.rstrip("g"))
    try:
        config = AutoConfig.from_pretrained(resolve_base(model).source)
    except (OSError, ValueError) as err:
        raise MensError(f"cannot read the model's config: {str(err).splitlines()[0][:200]}", model,
                        "give a model directory with a config.json, or a hub id") from None
    meta = shapes(config)
    values = preset.values
    adapters = adapter_parameters(config, values.get("lora_r", 16))
    estimates = {b: estimate(meta, b, adapter_params=adapters, seq_len=values.get("seq_len", 512),
                             micro_batch=values.get("micro_batch", 4), memory_gb=memory_gb)
                 for b in ("qlora", "lora", "full")}
    return preset_name, memory_gb, text_config(config).model_type, estimates


def advise(model_type: str, estimates: dict[str, Estimate], memory_gb: float) -> str | None:
    """A line for families whose maintainers advise bf16 LoRA over QLoRA, when bf16 fits."""
    family = QLORA_ADVICE.get(model_type)
    if family is None:
        return None
    lora = estimates.get("lora")
    if lora is None:
        return None
    if lora.total_gb <= memory_gb:
        return (f"{family}: its maintainers advise bf16 LoRA over QLoRA (the 4-bit error is large for this family); "
                f"bf16 LoRA needs ~{lora.total_gb:.1f} GB here and fits {memory_gb:.0f} GB: --backend lora")
    return (f"{family}: its maintainers advise bf16 LoRA over QLoRA, but it needs ~{lora.total_gb:.1f} GB, more than "
            f"{memory_gb:.0f} GB: QLoRA it is, or a shorter --seq-len / smaller --micro-batch")


def format_estimates(model_type: str, preset: str, estimates: dict[str, Estimate], memory_gb: float) -> str:
    lines = [f"memory needed for a {model_type} base with preset {preset} (estimate, GB; this device: "
             f"{memory_gb:.1f} GB)",
             "backend  weights  adapters  activations  logits  total  fits"]
    for e in estimates.values():
        lines.append(f"{e.backend:<8} {e.weights_gb:>7.2f}  {e.adapters_gb:>8.2f}  {e.activations_gb:>11.2f}  "
                     f"{e.logits_gb:>6.2f}  {e.total_gb:>5.1f}  {'yes' if e.total_gb <= memory_gb else 'no'}"
                     + ("  (activation checkpointing on)" if e.checkpointing else ""))
    advice = advise(model_type, estimates, memory_gb)
    if advice:
        lines.append(advice)
    return "\n".join(lines)
