"""What mens reads of a base model's architecture, whatever its family: the kind of each decoder
layer (full or sliding-window attention, or a recurrent one such as Qwen3.5's Gated DeltaNet),
its fused MoE experts, whether packing is exact for it, which weights LoRA adapts by default,
and what PEFT made of those targets (read back: ranks, and layers its v4->v5 rewrite leaves
frozen). The speed levers (`mens.train.levers`) and the backends ask here instead of keeping
lists of class names; docs/training.md's family table is what these rules give on the families
of tests/families.py.
"""

from __future__ import annotations

from mens.progress import say

ATTENTION_KINDS = ("full_attention", "sliding_attention", "chunked_attention")
# A probe row of two examples: the second one's hidden states, computed packed behind the first
# and alone, differ by more than this (relative to their size) when packed examples see each
# other; rounding alone stays far below it (bf16: ~4e-3), a leak far above (tiny models: 0.1-1).
PACKING_PROBE_TOLERANCE = 2e-2


def text_config(config):
    """The language model's config (a multimodal base's `text_config`, else the config itself)."""
    getter = getattr(config, "get_text_config", None)
    return getter() if callable(getter) else config


def layer_kinds(config) -> list[str]:
    """Each decoder layer's kind, as transformers names them (`layer_types`); a config without
    them attends fully, or within its sliding window in every layer (Mistral, Phi-3, Starcoder2)."""
    text = text_config(config)
    kinds = getattr(text, "layer_types", None)
    if kinds:
        return list(kinds)
    windowed = getattr(text, "sliding_window", None) and getattr(text, "use_sliding_window", True) is not False
    return ["sliding_attention" if windowed else "full_attention"] * int(getattr(text, "num_hidden_layers", 0) or 0)


def recurrent_kinds(config) -> list[str]:
    """The layer kinds that are not attention (linear_attention, mamba …): they carry a state
    from token to token, across example boundaries too."""
    return sorted({k for k in layer_kinds(config) if k not in ATTENTION_KINDS})


def expert_parameters(model) -> list[str]:
    """Leaf names of the fused MoE expert weights ([experts, out, in] parameters: transformers 5
    stores every routed expert of a layer in one 3-D tensor), e.g. gate_up_proj, down_proj.
    Convolutions (Gated DeltaNet's short conv) have 3-D weights too and are not experts."""
    from torch import nn

    return sorted({name for module in model.modules() if not isinstance(module, nn.modules.conv._ConvNd)
                   for name, p in module.named_parameters(recurse=False) if p.ndim == 3})


# ---------------------------------------------------------------- packing

def packing_blocker(model, device) -> str | None:
    """Why packing several examples into a row would not be exact for `model` (None: it is).
    Recurrent layers carry their state from one example into the next; and a model that builds
    its attention mask without the restarting position ids lets packed examples attend to each
    other (gpt-oss in transformers 5.24), which a probe row shows."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    recurrent = recurrent_kinds(inner.config)
    if recurrent:
        return (f"its {', '.join(recurrent)} layers carry a state from one example into the next, so each "
                "example trains in a row of its own")
    if packed_examples_leak(inner, device):
        return ("its attention mask ignores the restarting position ids, so packed examples would attend to "
                "each other (found on a probe row); each example trains in a row of its own")
    return None


def packed_examples_leak(inner, device) -> bool:
    """Run a probe row — two short examples packed, positions restarting — and the second one
    alone through the decoder body: True when its hidden states differ."""
    import torch

    from mens.train.runtime import dropout_off

    decoder = inner.get_decoder() if hasattr(inner, "get_decoder") else None
    vocab = int(getattr(text_config(inner.config), "vocab_size", 0) or 0)
    if decoder is None or decoder is inner or vocab < 8:
        return False
    gen = torch.Generator().manual_seed(0)
    first, second = (torch.randint(1, vocab, (1, n), generator=gen) for n in (7, 5))
    ids = torch.cat([first, second], 1).to(device)
    pos = torch.cat([torch.arange(7), torch.arange(5)])[None].to(device)
    with torch.no_grad(), dropout_off(inner):
        packed = decoder(input_ids=ids, position_ids=pos, use_cache=False).last_hidden_state[0, 7:].float()
        alone = decoder(input_ids=second.to(device), use_cache=False).last_hidden_state[0].float()
    scale = alone.abs().max().clamp_min(1e-6)
    return bool(((packed - alone).abs().max() / scale) > PACKING_PROBE_TOLERANCE)


# ---------------------------------------------------------------- adapters

def adapter_targets(model, target_modules) -> tuple[object, list[str]]:
    """The LoRA targets for `target_modules` (the config's value) on `model`: (PEFT's
    target_modules, target_parameters). With the default `all-linear`, an MoE base's fused
    experts train too, through PEFT's parameter targeting (`target_parameters`), and its routers
    stay frozen: every linear layer but the LM head and the routers is named explicitly, since
    PEFT's own `all-linear` adapts the routers of some MoE families and none of others."""
    experts = expert_parameters(model)
    if target_modules != "all-linear" or not experts:
        return target_modules, []
    from torch import nn

    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    routers = _routers(model)
    linear = {name.rsplit(".", 1)[-1] for name, module in model.named_modules()
              if isinstance(module, nn.Linear) and module is not head and id(module) not in routers}
    return sorted(linear), experts


def default_lora_config(model, r: int, alpha: int, dropout: float = 0.0, **extra):
    """PEFT's LoraConfig of rank `r` on `model` with mens train's default targets (`all-linear` by
    adapter_targets: routers frozen, an MoE base's fused experts adapted), for the LoRAs built
    without a `--target-modules` (mens rl / dpo, the probe's count); `extra` goes to LoraConfig."""
    from peft import LoraConfig

    from mens.train.model import transposed_linears

    modules, experts = adapter_targets(model, "all-linear")
    return LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=modules,
                      target_parameters=experts or None, task_type="CAUSAL_LM",
                      fan_in_fan_out=transposed_linears(model), **extra)


def _routers(model) -> set[int]:
    """The linear routers of an MoE base (ids): a linear layer beside an experts module with one
    output per expert. transformers 5's own routers are not linear layers at all."""
    from torch import nn

    found = set()
    for parent in model.modules():
        counts = {p.shape[0] for child in parent.children() for p in child.parameters(recurse=False) if p.ndim == 3
                  and not isinstance(child, nn.modules.conv._ConvNd)}
        found |= {id(child) for child in parent.children()
                  if isinstance(child, nn.Linear) and child.out_features in counts}
    return found


def adapted(model, requested=()) -> dict:
    """What the adapters of a PEFT `model` train and leave, read back from PEFT (its config and
    its LoRA layers' `r` and `lora_alpha`), not from what mens asked for:

    - `linear`, `experts`: the adapted linear layers and fused expert weights, by leaf name;
    - `rank`, `alpha`: PEFT's rank and alpha; `ranks`: {name: [r, alpha]} for each adapted weight
      PEFT gave another one (its v4->v5 rewrite fuses gate_proj and up_proj into the experts'
      gate_up_proj at twice the rank and alpha, so the scale alpha/r is the same);
    - `frozen`: linear layers left without an adapter (LM head and routers aside), by their path
      inside a decoder layer (`mlp.shared_expert.gate_proj`);
    - `rewritten`: the names of `requested` (the target modules mens gave PEFT) that PEFT's
      transformers v4->v5 rewrite moved onto the fused experts (Qwen2-MoE-like families:
      Qwen3-MoE, Qwen3-Next, DeepSeek-V3): linear layers of those names stay frozen."""
    from torch import nn

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = inner.get_output_embeddings() if hasattr(inner, "get_output_embeddings") else None
    config = model.peft_config["default"]
    routers = _routers(inner)
    linear, experts, frozen, wrapped, ranks = set(), set(), set(), set(), {}
    for name, module in inner.named_modules():
        if hasattr(module, "lora_A") and hasattr(module, "base_layer") and len(module.lora_A):
            wrapped.add(id(module.get_base_layer()))
            param = getattr(module, "parameter_name", None)  # a fused expert weight (PEFT's parameter targeting)
            leaf = param or name.rsplit(".", 1)[-1]
            (experts if param else linear).add(leaf)
            rank = [module.r["default"], module.lora_alpha["default"]]
            if rank != [config.r, config.lora_alpha]:
                ranks[leaf] = rank
    for name, module in inner.named_modules():
        if (isinstance(module, nn.Linear) and module is not head and id(module) not in routers
                and id(module) not in wrapped and "lora_" not in name and not name.endswith("base_layer")):
            frozen.add(_in_layer(name))
    kept = set(config.target_modules or ()) if not isinstance(config.target_modules, str) else None
    rewritten = [] if kept is None or isinstance(requested, str) else \
        sorted({t.rsplit(".", 1)[-1] for t in requested if t not in kept})
    return {"linear": sorted(linear), "experts": sorted(experts), "rank": config.r, "alpha": config.lora_alpha,
            "ranks": dict(sorted(ranks.items())), "frozen": sorted(frozen), "rewritten": rewritten}


def _in_layer(name: str) -> str:
    """A module's path inside its decoder layer: model.layers.3.mlp.gate_proj -> mlp.gate_proj."""
    import re

    return re.sub(r"^(.*\.)?\d+\.", "", name)


def _grouped(paths: list[str]) -> str:
    """mlp.gate_proj, mlp.up_proj -> mlp.{gate_proj, up_proj}."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        parent, _, leaf = path.rpartition(".")
        groups.setdefault(parent, []).append(leaf)
    named = {parent: leaves[0] if len(leaves) == 1 else "{" + ", ".join(leaves) + "}"
             for parent, leaves in groups.items()}
    return ", ".join(f"{parent}.{leaves}" if parent else leaves for parent, leaves in named.items())


def frozen_by_rewrite(summary: dict) -> list[str]:
    """The frozen linear layers that PEFT's v4->v5 rewrite left without their adapter."""
    return [p for p in summary["frozen"] if p.rsplit(".", 1)[-1] in summary["rewritten"]]


def adapted_text(summary: dict) -> str:
    """What LoRA adapts, at which rank relative to the run's, and what it leaves frozen (and why),
    in one line: the status line's and docs/training.md's family table's wording."""
    parts = [", ".join(summary["linear"])]
    if summary["experts"]:
        parts.append("experts: " + ", ".join(summary["experts"]))
    for name, (r, alpha) in summary["ranks"].items():
        times = r // summary["rank"]
        same = r == times * summary["rank"] and alpha == times * summary["alpha"]
        parts.append(f"{name} at {times}x rank and alpha" if same else f"{name} at rank {r}, alpha {alpha}")
        if summary["rewritten"]:
            parts[-1] += " (PEFT's v4->v5 rewrite)"
    rewrite = frozen_by_rewrite(summary)
    others = [p for p in summary["frozen"] if p not in rewrite]
    if others:
        parts.append("frozen: " + _grouped(others))
    if rewrite:
        parts.append(f"frozen by PEFT's v4->v5 rewrite: {_grouped(rewrite)}")
    return "; ".join(p for p in parts if p)


def say_adapted(summary: dict, model_type: str) -> None:
    """The status line naming what LoRA trains, at which rank, and what it leaves frozen; and, once,
    a warning when PEFT's rewrite left linear layers frozen that the targets named."""
    from mens.progress import warn

    say(f"mens: LoRA (rank {summary['rank']}, alpha {summary['alpha']}) on " + adapted_text(summary))
    rewrite = frozen_by_rewrite(summary)
    if rewrite:
        import peft

        warn(f"mens: warning: PEFT {peft.__version__} moves the LoRA targets {', '.join(summary['rewritten'])} of "
             f"this {model_type} base onto its fused experts (its transformers v4->v5 rewrite), so {_grouped(rewrite)} "
             "stay frozen; PEFT puts no LoRA on them under any name — to train them, fine-tune with --backend full "
             "(the base, or a `mens merge`d run)")
