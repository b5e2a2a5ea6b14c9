"""What the loop needs to know about a model, whatever backend built it: the transformers model
inside a PEFT wrapper, the decoder body and the LM head it calls separately (with the logit
post-processing some architectures apply), and the weights a run trains. Models are built by
`mens.train.backends` and loaded by `mens.hf`."""

from __future__ import annotations

from torch import nn

from mens.errors import MensError


def name_the_loss(model) -> None:
    """transformers picks a model's loss from its class name; `GPT2LMHeadModel` matches none and
    every `model(labels=…)` (our preflight reference) then warns. It is the causal-LM loss."""
    if getattr(model, "loss_type", "") is None:
        model.loss_type = "ForCausalLM"


def transposed_linears(model) -> bool:
    """Whether the model's linear layers are transformers' `Conv1D` (GPT-2 and its kin), whose
    weight is stored (in, out): a LoRA over them says `fan_in_fan_out=True`, else PEFT warns and
    sets it itself."""
    from transformers.pytorch_utils import Conv1D

    return any(isinstance(m, Conv1D) for m in model.modules())


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


def trainable_state(model) -> dict:
    """The weights this run changes (adapters, or everything for full/scratch)."""
    return {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
