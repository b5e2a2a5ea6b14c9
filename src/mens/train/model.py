"""Model builders: load any HF causal LM (local dir or hub id), quantize it for QLoRA, attach
LoRA/DoRA adapters, or build a scratch model. The loop never branches on the backend; the
differences live here. (Imports torch: only the training path imports this module.)"""

from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from torch import nn

from mens.errors import MensError
from mens.train.bnb_cpu import quiet_hub_kernel_notice
from mens.train.config import TrainConfig

quiet_hub_kernel_notice()  # before peft/transformers/speed.py import bitsandbytes, for every backend


@dataclass
class BaseModelInfo:
    """Where the full-precision base lives, so merge/serve can find it again."""

    path: str | None           # absolute local directory, or None for a hub id
    id: str                    # hub id, or the directory for local models
    config_sha256: str | None

    def to_dict(self) -> dict:
        return {"path": self.path, "id": self.id, "config_sha256": self.config_sha256}


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes") or \
        os.environ.get("TRANSFORMERS_OFFLINE", "0").lower() in ("1", "true", "yes")


def resolve_base(model: str) -> BaseModelInfo:
    """A local directory → its absolute path; otherwise a hub id, fetched (or found in the
    cache) by transformers. Offline and not cached → a clear one-line error."""
    local = Path(model).expanduser()
    if local.exists():
        if not local.is_dir():
            raise MensError("model path is not a directory", str(local), "give a Hugging Face model directory")
        if not (local / "config.json").is_file():
            raise MensError("model directory has no config.json", str(local),
                            "point --model at a Hugging Face model directory (config + weights + tokenizer)")
        path = str(local.resolve())
        return BaseModelInfo(path, path, hashlib.sha256((local / "config.json").read_bytes()).hexdigest())
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise MensError("model directory not found", model, "check the --model path")
    try:
        from huggingface_hub import hf_hub_download

        cfg = hf_hub_download(model, "config.json")
    except Exception as err:  # noqa: BLE001 - any hub failure is the same user-facing problem
        if _offline():
            raise MensError(f"model {model!r} is not a local directory and the hub is offline "
                            "(HF_HUB_OFFLINE=1) and it is not in the cache", model,
                            "download it once online, or pass a local model directory") from None
        raise MensError(f"cannot fetch model {model!r} from the Hugging Face hub: {type(err).__name__}",
                        model, "check the id and your network, or pass a local directory") from None
    return BaseModelInfo(None, model, hashlib.sha256(Path(cfg).read_bytes()).hexdigest())


def load_tokenizer(model: str):
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(model)
    except (OSError, ValueError, TypeError) as err:
        raise MensError(f"cannot load a tokenizer: {str(err).splitlines()[0][:160]}", model,
                        "the model directory needs tokenizer files (tokenizer.json or equivalent)") from None
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def compute_dtype(cfg: TrainConfig, device: str, bf16_ok: bool):
    """QLoRA computes in bf16 (its definition); lora/full use bf16 where the device does it
    natively, else fp32. An explicit --dtype wins."""
    import torch

    table = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    if cfg.dtype != "auto":
        return table[cfg.dtype]
    if cfg.backend == "qlora":
        return torch.bfloat16
    if cfg.backend in ("full", "scratch"):
        # Full fine-tuning keeps fp32 master weights: AdamW updates on bf16 weights lose
        # most small steps.
        return torch.float32
    return torch.bfloat16 if (bf16_ok and device != "cpu") else torch.float32


def load_model(cfg: TrainConfig, base: BaseModelInfo, device: str, dtype, local_rank: int = 0):
    """The base model on `device`, quantized for qlora, with adapters for qlora/lora."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    source = base.path or base.id
    kwargs: dict = {"dtype": dtype}
    if cfg.backend == "qlora":
        from transformers import BitsAndBytesConfig

        kwargs["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_quant_storage=torch.bfloat16)
        kwargs["dtype"] = torch.bfloat16
        kwargs["device_map"] = {"": local_rank if device == "cuda" else device}
    try:
        model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as err:
        raise MensError(f"cannot load the model: {str(err).splitlines()[0][:200]}", source,
                        "check that the directory holds a causal LM transformers can load") from None
    if cfg.backend != "qlora":
        model.to(device if device != "cuda" else f"cuda:{local_rank}")
    else:
        from mens.train.bnb_cpu import keep_nf4_trainable

        keep_nf4_trainable(model)  # a mid-run bench (model.eval()) must not freeze the NF4 layers
    model.config.use_cache = False
    _name_the_loss(model)
    if cfg.backend in ("qlora", "lora"):
        model = attach_adapters(model, cfg, base)
    return model


def attach_adapters(model, cfg: TrainConfig, base: BaseModelInfo):
    from peft import LoraConfig, get_peft_model

    for p in model.parameters():
        p.requires_grad_(False)
    lcfg = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=cfg.target_modules, use_dora=cfg.dora, bias="none",
                      task_type="CAUSAL_LM")
    try:
        with warnings.catch_warnings():
            # PEFT asks transformers for a deprecated attribute; the warning is theirs, not the user's.
            warnings.simplefilter("ignore", FutureWarning)
            model = get_peft_model(model, lcfg)
    except ValueError as err:
        raise MensError(f"cannot attach adapters: {str(err).splitlines()[0][:200]}", "--target-modules",
                        "name linear layers the model has, or use all-linear") from None
    # Absolute base path (or hub id), so PeftModel.from_pretrained works from anywhere.
    model.peft_config["default"].base_model_name_or_path = base.path or base.id
    return model


def build_scratch(cfg: TrainConfig, device: str):
    """A fresh GPT-2-shaped model and the Vox tokenizer (mens.train.scratch)."""
    from mens.train.scratch import build_model_and_tokenizer, scratch_shape

    shape = scratch_shape(cfg.scratch_shape, n_layer=cfg.scratch_layers, n_head=cfg.scratch_heads,
                          n_embd=cfg.scratch_width, n_inner=cfg.scratch_ffn, n_positions=cfg.scratch_positions,
                          dropout=cfg.scratch_dropout)
    model, tokenizer = build_model_and_tokenizer(shape, cfg.seed)
    model.to(device)
    model.config.use_cache = False
    _name_the_loss(model)
    return model, tokenizer, shape


def _name_the_loss(model) -> None:
    """transformers picks a model's loss from its class name; `GPT2LMHeadModel` matches none and
    every `model(labels=…)` (our preflight reference) then warns. It is the causal-LM loss."""
    if getattr(model, "loss_type", "") is None:
        model.loss_type = "ForCausalLM"


def unwrap(model):
    """The transformers model inside a PEFT wrapper (LoRA layers injected in place)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


class ScaledHead(nn.Module):
    """The LM head plus what some *ForCausalLM classes do to its logits before the loss
    (Gemma 2/3: tanh soft-capping; Cohere: × logit_scale; Granite: ÷ logits_scaling). The
    loop calls the head itself, so it must reproduce these; the preflight compares the result
    with the model's own loss."""

    def __init__(self, head, multiply: float = 1.0, softcap: float | None = None):
        super().__init__()
        self.head, self.multiply, self.softcap = head, multiply, softcap

    def forward(self, hidden):
        import torch

        logits = self.head(hidden)
        if self.multiply != 1.0:
            logits = logits * self.multiply
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits


def decoder_and_head(model):
    """The decoder body (embeddings → final norm) and the LM head, through PEFT wrappers."""
    inner = unwrap(model)
    head = inner.get_output_embeddings()
    decoder = inner.get_decoder()
    if head is None or decoder is inner:
        raise MensError(f"cannot find the decoder body and LM head of {type(inner).__name__}", "--model",
                        "use a standard *ForCausalLM architecture")
    config = getattr(inner, "config", None)
    multiply = float(getattr(config, "logit_scale", None) or 1.0)
    if getattr(config, "logits_scaling", None):
        multiply /= float(config.logits_scaling)
    softcap = getattr(config, "final_logit_softcapping", None)
    if multiply != 1.0 or softcap:
        head = ScaledHead(head, multiply, softcap)
    return decoder, head


def max_positions(config) -> int | None:
    for name in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def trainable_state(model) -> dict:
    """The weights this run changes (adapters, or everything for full/scratch)."""
    return {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
