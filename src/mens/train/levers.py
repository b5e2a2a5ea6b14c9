"""The speed levers that patch a model: a registry, each lever with the rule that says where it
computes exactly what it replaces, and an off switch (`--speed-levers`).

A lever's `apply(model, inner, cpu)` patches what its rule allows and returns `(count, why)`:
how many modules or weights it changed and, where its rule kept it off (wholly or for some
modules), why. `apply_levers` runs them in order and records both in the speed plan (the
manifest's `speed.patched` and `speed.off`). A lever that would change a model's numbers is
never applied there: the rules below decide per module (a norm or MLP is probed against the
module's own forward), per attention call (`kernels.plain_causal`) or per device, and the
family tests (tests/train/test_train_families.py) check every family of tests/families.py against
plain transformers. Adding a lever: a function and one `Lever` row; the kernels are in
`mens.train.kernels`, what each bought in docs/performance.md ("The levers, measured").
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

SWITCH = "--speed-levers"


@dataclass(frozen=True)
class Lever:
    name: str
    what: str                                        # one line for docs and errors
    apply: Callable[..., tuple[int, str | None]]     # (model, inner, cpu) -> (count, why off)


# ---------------------------------------------------------------- the levers

def own_weights(model, inner, cpu: bool) -> tuple[int, str | None]:
    """Unquantised CPU weights that transformers leaves as views into the mmap'd safetensors file
    get their own memory, which releases the map (no arithmetic changes)."""
    import gc

    if not cpu:
        return 0, "not on a CPU"
    seen: set[int] = set()
    for module in model.modules():
        for param in module.parameters(recurse=False):
            if id(param) in seen or param.device.type != "cpu" or type(param).__name__ == "Params4bit":
                continue
            seen.add(id(param))
            param.data = param.data.clone()
    gc.collect()
    return len(seen), None


def flat_nf4_scales(model, inner, cpu: bool) -> tuple[int, str | None]:
    """Double-quantised NF4 block scales dequantised once at load into fp32: the very values
    double quantisation yields, so results are bit-identical."""
    states = {}  # by identity: a PEFT layer's `weight` is its base layer's, quant state and all
    for module in model.modules():
        state = getattr(getattr(module, "weight", None), "quant_state", None)
        if getattr(state, "nested", False):
            states[id(state)] = state
    if not states:  # no NF4 weights: not even bitsandbytes' import (~1 s) is needed
        return 0, None
    import bitsandbytes.functional as bnbf

    for state in states.values():
        absmax = bnbf.dequantize_blockwise(state.absmax, state.state2)
        absmax += state.offset
        state.absmax = absmax.float()
        state.state2, state.offset, state.nested = None, None, False
    return len(states), None


def _lean_forward(self, x, *args, **kwargs):
    """Instance forward for a vanilla PEFT LoRA Linear; anything unusual (DoRA, merged,
    disabled or mixed adapters) takes PEFT's own path."""
    from torch import nn

    from mens.train.kernels import LoraDelta

    active = self.active_adapters
    if (kwargs.get("adapter_names") is not None or self.disable_adapters or self.merged
            or len(active) != 1 or active[0] in getattr(self, "lora_variant", {})
            or active[0] not in self.lora_A or getattr(self, "lora_bias", {}).get(active[0], False)):
        return type(self).forward(self, x, *args, **kwargs)
    name = active[0]
    result = self.base_layer(x, *args, **kwargs)
    drop = self.lora_dropout[name]
    p = float(drop.p) if isinstance(drop, nn.Dropout) and drop.training else 0.0
    return LoraDelta.apply(result, x.to(result.dtype), self.lora_A[name].weight, self.lora_B[name].weight,
                           float(self.scaling[name]), p)


def lean_lora(model, inner, cpu: bool) -> tuple[int, str | None]:
    """Every vanilla PEFT LoRA Linear runs through `kernels.LoraDelta` (the adapter in the input's
    dtype, its dropout mask regenerated in backward). PEFT's other layers — DoRA, embeddings, the
    fused-expert and router `ParamWrapper`s (a router returns a tuple) — keep PEFT's forward."""
    # A model with LoRA layers was wrapped by PEFT, which this process has then imported; without
    # it (a scratch or full run) there is nothing to patch, and peft's import costs ~1 s a process.
    lora_module = sys.modules.get("peft.tuners.lora")
    if lora_module is None:
        return 0, None
    from torch import nn

    patched, others = 0, 0
    for module in model.modules():
        if not isinstance(module, lora_module.LoraLayer) or not hasattr(module, "lora_A") or not len(module.lora_A):
            continue
        # a LoRA Linear over a linear layer (bnb's 4-bit ones are nn.Linear too): not a
        # ParamWrapper, whose base is an experts module or a router
        plain = (isinstance(module.get_base_layer(), nn.Linear) and not any(getattr(module, "use_dora", {}).values())
                 and all(isinstance(module.lora_A[k], nn.Linear) for k in module.lora_A))
        if plain:
            module.forward = _lean_forward.__get__(module)
            patched += 1
        elif type(module).__name__ != "ParamWrapper" or not isinstance(module.base_layer, lora_module.LoraLayer):
            others += 1  # stacked ParamWrappers (one per expert weight) count once: the innermost
    return patched, (f"{others} adapted module(s) that are not plain LoRA Linears keep PEFT's forward"
                     if others else None)


def _by_probe(model, name_test, replacement, probe) -> tuple[int, list[str]]:
    """Patch every module that `name_test` picks whose class computes on a probe input what
    `replacement` computes (checked once per class, on its first module); returns the count and
    the classes that differ."""
    verdict: dict[type, bool] = {}
    patched = 0
    for module in model.modules():
        if not name_test(module):
            continue
        cls = type(module)
        if cls not in verdict:
            verdict[cls] = probe(module, replacement.__get__(module))
        if verdict[cls]:
            module.forward = replacement.__get__(module)
            patched += 1
    return patched, sorted(c.__name__ for c, same in verdict.items() if not same)


def _same_output(module, patched_forward, width: int) -> bool:
    """The module and its patched forward give the same output on a random [2, 3, width] input in
    the module's dtype (bit for bit in 16-bit dtypes, where the kernels round as the modules do)."""
    import torch

    weight = next(module.parameters(), None)
    dtype = weight.dtype if weight is not None and weight.is_floating_point() else torch.float32
    device = weight.device if weight is not None else "cpu"
    x = torch.randn(2, 3, width, generator=torch.Generator().manual_seed(0)).to(device=device, dtype=dtype)
    try:
        with torch.no_grad():
            want, got = type(module).forward(module, x), patched_forward(x)
    except (TypeError, RuntimeError, ValueError):  # another signature (a gated norm …): not this kernel's
        return False
    if not isinstance(want, torch.Tensor) or want.shape != got.shape or want.dtype != got.dtype:
        return False
    if dtype in (torch.float16, torch.bfloat16):
        return bool(torch.equal(want, got))
    return bool(torch.allclose(want, got, rtol=1e-5, atol=1e-6))


def _swiglu_mlp_forward(self, x):
    from mens.train.kernels import SwiGLU

    return self.down_proj(SwiGLU.apply(self.gate_proj(x), self.up_proj(x)))


def lean_swiglu(model, inner, cpu: bool) -> tuple[int, str | None]:
    """MLPs computing down(silu(gate(x)) * up(x)) run through `kernels.SwiGLU`, which recomputes
    silu(gate) in backward instead of saving it. Applies to each MLP class whose forward gives
    the same output on a probe input."""
    def is_mlp(m):
        return all(hasattr(m, n) for n in ("gate_proj", "up_proj", "down_proj")) and \
            hasattr(getattr(m, "gate_proj"), "in_features")

    count, differ = _by_probe(model, is_mlp, _swiglu_mlp_forward,
                              lambda m, f: _same_output(m, f, m.gate_proj.in_features))
    return count, (f"{', '.join(differ)} compute(s) another MLP (checked on a probe input)" if differ else None)


def _rmsnorm_forward(self, hidden_states):
    import torch

    from mens.train.kernels import RMSNorm

    if hidden_states.dtype == torch.float64:  # the module computes in fp32 even then
        return type(self).forward(self, hidden_states)
    return RMSNorm.apply(hidden_states, self.weight, float(self.variance_epsilon))


def lean_rmsnorm(model, inner, cpu: bool) -> tuple[int, str | None]:
    """RMSNorms computing weight * (x * rsqrt(mean(x²) + eps)).to(dtype) (Llama's) run through
    aten's fused kernel (`kernels.RMSNorm`). Norm classes that compute otherwise — Gemma's and
    Qwen3.5's `1 + weight`, gpt-oss's rounding order in bf16, gated norms — are found on a
    probe input and keep their own forward."""
    import torch

    if not hasattr(torch.ops.aten, "_fused_rms_norm"):
        return 0, "this torch has no fused RMSNorm kernel"

    def is_norm(m):
        weight = getattr(m, "weight", None)
        return (type(m).__name__.endswith("RMSNorm") and hasattr(m, "variance_epsilon")
                and isinstance(weight, torch.nn.Parameter) and weight.ndim == 1)

    count, differ = _by_probe(model, is_norm, _rmsnorm_forward, lambda m, f: _same_output(m, f, m.weight.shape[0]))
    return count, (f"{', '.join(differ)} compute(s) another norm (checked on a probe input)" if differ else None)


def _gelu_tanh_forward(self, x):
    from torch import nn

    return nn.functional.gelu(x, approximate="tanh")


def lean_gelu(model, inner, cpu: bool) -> tuple[int, str | None]:
    """transformers' `NewGELUActivation` (`gelu_new`: GPT-2, GPT-J, Phi), written out as eight
    elementwise ops, runs as torch's `gelu(approximate="tanh")`: the same function in one op."""
    patched = 0
    for module in model.modules():
        if type(module).__name__ == "NewGELUActivation":
            module.forward = _gelu_tanh_forward.__get__(module)
            patched += 1
    return patched, None


def _attention_kind(inner, cpu: bool) -> str | None:
    """Why mens's CPU attention cannot be set on `inner` (None: it can)."""
    from mens.train.kernels import CPU_SDPA

    if not cpu:
        return "not on a CPU"
    config = getattr(inner, "config", None)
    impl = getattr(config, "_attn_implementation", None)
    if impl not in ("sdpa", CPU_SDPA) or not hasattr(inner, "set_attn_implementation"):
        return f"the model attends with {impl or 'its own'} attention, not SDPA"
    return None


def cpu_attention(model, inner, cpu: bool, segments: bool = False) -> tuple[int, str | None]:
    """A CPU model on SDPA attends through `kernels.cpu_sdpa`: narrow heads in fp32 under
    autocast (faster than bf16 there, and more exact). The setting is not saved with the model."""
    from mens.train.kernels import register_cpu_sdpa

    why = _attention_kind(inner, cpu)
    if why:
        return 0, why
    inner.set_attn_implementation(register_cpu_sdpa(segments))
    return 1, None


def segment_attention(model, inner, cpu: bool) -> tuple[int, str | None]:
    """In training passes, rows of packed examples attend one example at a time
    (`kernels.segment_attention`: one causal call per example, skipping the blocks the packed
    mask would only mask out). Per attention call: a layer with a sliding window, soft-capping
    or attention sinks keeps the masked attention (`kernels.plain_causal`)."""
    from mens.train.family import layer_kinds

    why = _attention_kind(inner, cpu)
    if why:
        return 0, why
    kinds = layer_kinds(inner.config)
    full = sum(k == "full_attention" for k in kinds)
    windowed = sum(k in ("sliding_attention", "chunked_attention") for k in kinds)
    return full, (f"its {windowed} sliding-window layer(s) keep the masked attention (a window is not an "
                  "example's causal block)" if windowed else None)


LEVERS: dict[str, Lever] = {lever.name: lever for lever in (
    Lever("own_weights", "CPU weights in their own memory, not views of the mmap'd file", own_weights),
    Lever("flat_nf4_scales", "double-quantised NF4 scales dequantised once at load", flat_nf4_scales),
    Lever("lean_lora", "LoRA Linears through one fused autograd function", lean_lora),
    Lever("lean_swiglu", "SwiGLU MLPs recompute silu(gate) in backward", lean_swiglu),
    Lever("lean_rmsnorm", "plain RMSNorms on aten's fused kernel", lean_rmsnorm),
    Lever("lean_gelu", "gelu_new as torch's one-op tanh GELU", lean_gelu),
    Lever("cpu_attention", "CPU SDPA with narrow heads in fp32 under autocast", cpu_attention),
    Lever("segment_attention", "packed rows attend example by example (CPU)", segment_attention),
)}


def chosen(setting) -> set[str]:
    """The levers `--speed-levers` turns on: `all` (the default), `none`, or a comma list of names
    (`all,-name` turns one off)."""
    names = [n.strip() for n in (setting.split(",") if isinstance(setting, str) else setting or []) if n.strip()]
    on: set[str] = set()
    for name in names:
        if name == "all":
            on |= set(LEVERS)
        elif name == "none":
            on.clear()
        elif name.startswith("-"):
            on.discard(name[1:])
        else:
            on.add(name)
    return on


def unknown(setting) -> list[str]:
    """Names in `--speed-levers` that are no lever."""
    names = setting.split(",") if isinstance(setting, str) else list(setting or [])
    return [n.strip() for n in names if n.strip() and n.strip().lstrip("-") not in {*LEVERS, "all", "none"}]


def apply_levers(model, inner, cpu: bool, setting="all") -> tuple[dict[str, int], dict[str, str]]:
    """Apply the levers `setting` turns on, each where its rule allows; returns (lever → modules
    or weights patched, lever → why it is off or partly off)."""
    on = chosen(setting)
    patched: dict[str, int] = {}
    off: dict[str, str] = {}
    for name, lever in LEVERS.items():
        if name not in on:
            off[name] = f"turned off ({SWITCH})"
            continue
        if name == "cpu_attention":
            count, why = cpu_attention(model, inner, cpu, segments="segment_attention" in on)
        elif name == "segment_attention" and "cpu_attention" not in on:
            count, why = 0, "needs cpu_attention"
        else:
            count, why = lever.apply(model, inner, cpu)
        patched[name] = count
        if why:
            off[name] = why
    return patched, off
