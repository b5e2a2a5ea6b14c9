"""Speed and memory levers for training, and the plan they leave behind.

The loop (`mens.train.prepare`) calls `optimize_for_training(model, cfg)` once, after the
backend's builder: it patches the model in place and returns a `SpeedPlan` — tokens per pass,
activation checkpointing, what was patched — which is recorded in the manifest (`speed`) and
handed to `split_for_memory` for every micro-batch. The LM head + cross-entropy lever lives in
`mens.train.loss`; what each lever bought, measured on `bench/train_vs_trl.py`, is in
docs/performance.md ("The levers, measured").

1. Lean LoRA (`lean_lora` → `kernels.LoraDelta`): the adapter runs in the input's dtype, its
   dropout mask is drawn cheaply and regenerated in backward, only the [N, r] bottleneck is
   saved, and the sum with the base output is the B matmul's accumulator.
2. Micro-batch splitting (`split_for_memory`): on CPU a packed micro-batch runs in row groups
   of at most `tokens_per_pass` tokens (at most CPU_ACTIVATION_BUDGET of estimated activations,
   never less than one row); the loss is divided by the whole window's supervised tokens, so
   the summed gradient is the micro-batch's. No recomputation, unlike checkpointing.
3. Activation checkpointing only when asked (`gradient_checkpointing: on`), or under `auto`
   every n-th layer when one pass's estimated activations would not fit in half the free
   memory: it recomputes those layers' forward, so it is the last resort.
4. Flat NF4 scales (`flatten_double_quant`): double-quantised block scales dequantised once at
   load into fp32 (the very values double quantisation yields: bit-identical results).
5. Lean SwiGLU (`lean_swiglu` → `kernels.SwiGLU`): silu(gate(x)) recomputed in backward instead
   of saved.
6. CPU memory hygiene (`own_weights`): unquantised weights that transformers leaves as views into
   the mmap'd safetensors file get their own memory, which releases the map; the allocator and
   glibc heap tuning are `mens.train.allocator`'s.
7. No KV cache during training (`use_cache=False`).
8. Fused RMSNorm (`lean_rmsnorm` → `kernels.RMSNorm`, Llama/Qwen2/Mistral-style norms).
9. One-kernel tanh GELU (`lean_gelu`): GPT-2's `gelu_new`, written out by transformers as eight
   elementwise ops (each a fresh [tokens, FFN] tensor, and as many again in backward), runs as
   torch's `gelu(approximate="tanh")`, the same function in one op.
10. CPU attention (`cpu_attention` → `kernels.cpu_sdpa`): with `bf16-mixed` on a CPU, narrow
   heads attend in fp32 (torch's kernel is slower in bf16 at head widths up to 32: the
   quickstart's base spent half its step in attention); and in training passes a packed row
   attends example by example (`kernels.segment_attention`: one causal call per example, which
   skips the blocks a block-diagonal mask would only mask out).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Iterator

import torch
from torch import nn

from mens.train.allocator import trim_heap, tune_heap
from mens.train.kernels import LoraDelta, RMSNorm, SwiGLU, register_cpu_sdpa

DEFAULT_CPU_TOKENS_PER_PASS = 512
# glibc's heap is trimmed before each pass only when a pass holds at least this much estimated
# activation memory: a trim hands the last pass's freed activations back to the kernel and the
# next pass faults them in again. That lowers the peak where passes are big (the 0.5B shape:
# ~1 GB a pass) and only costs time where they are small (the quickstart's scratch model, 31 MB
# a pass: 40 of a 135 ms step).
TRIM_HEAP_MIN_BYTES = 256 << 20
# CPU passes hold at most this much estimated activation memory (lever 2): at the 0.5B shape
# that is one 512-token row per pass; at its 4-layer cut a whole 4x512 micro-batch.
CPU_ACTIVATION_BUDGET = 1 << 30


@dataclass
class SpeedPlan:
    """How the loop runs a micro-batch, decided once per run (recorded in the manifest)."""

    tokens_per_pass: int | None = None    # most tokens in one forward/backward pass; None = whole micro-batch
    checkpoint_every: int | None = None   # activation checkpointing on every n-th decoder layer; None = off
    trim_heap: bool = False               # return freed heap memory before each pass (CPU)
    patched: dict[str, int] = field(default_factory=dict)  # lever → modules/weights it changed

    def to_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------- entry point

def optimize_for_training(model, cfg) -> SpeedPlan:
    """Apply the levers to `model` in place, decide the passes and checkpointing, and return the plan."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(inner, "config", None) is not None:
        inner.config.use_cache = False
    device = _device_of(model)
    cpu = device.type == "cpu"
    patched: dict[str, int] = {}
    if cpu:
        _cpu_threads()
        tune_heap()
        patched["own_weights"] = own_weights(model)
    patched["flat_nf4_scales"] = flatten_double_quant(model)
    patched["lean_lora"] = lean_lora(model)
    patched["lean_swiglu"] = lean_swiglu(model)
    patched["lean_rmsnorm"] = lean_rmsnorm(model)
    patched["lean_gelu"] = lean_gelu(model)
    if cpu:
        patched["cpu_attention"] = cpu_attention(inner)
        trim_heap()  # loading and quantising left freed blocks in the heap
    per_pass = tokens_per_pass(cfg, device, inner)
    trim = cpu and _pass_bytes(inner, cfg, per_pass) >= TRIM_HEAP_MIN_BYTES
    plan = SpeedPlan(tokens_per_pass=per_pass, trim_heap=trim, patched=patched)
    mode = getattr(cfg, "gradient_checkpointing", "auto")
    if mode == "on":
        plan.checkpoint_every = 1
    elif mode == "auto":
        plan.checkpoint_every = _checkpoint_every(inner, cfg, plan.tokens_per_pass, device)
    if plan.checkpoint_every:
        enable_checkpointing(inner, plan.checkpoint_every)
    return plan


def _device_of(model) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _cpu_threads() -> None:
    # torch defaults to one thread per logical CPU; on SMT machines the second hyper-thread
    # only adds contention to AMX/AVX-512 matmuls. Respect an explicit OMP_NUM_THREADS.
    if os.environ.get("OMP_NUM_THREADS"):
        return
    try:
        physical = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        physical = os.cpu_count() or 1
    torch.set_num_threads(max(1, physical))


def own_weights(model) -> int:
    """Give every unquantised CPU parameter its own memory (see lever 6); returns the count."""
    import gc

    seen: set[int] = set()
    for module in model.modules():
        for param in module.parameters(recurse=False):
            if id(param) in seen or param.device.type != "cpu" or type(param).__name__ == "Params4bit":
                continue
            seen.add(id(param))
            param.data = param.data.clone()
    gc.collect()
    return len(seen)


# ---------------------------------------------------------------- lever 1: lean LoRA

def _lean_forward(self, x, *args, **kwargs):
    """Instance forward for a vanilla PEFT LoRA layer; anything unusual (DoRA, merged,
    disabled or mixed adapters) takes PEFT's own path."""
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


def lean_lora(model) -> int:
    """Route every vanilla LoRA Linear through `kernels.LoraDelta`; returns how many were patched."""
    # A model with LoRA layers was wrapped by PEFT, which this process has then imported; without
    # it (a scratch or full run) there is nothing to patch, and peft's import costs ~1 s a process.
    lora_module = sys.modules.get("peft.tuners.lora")
    if lora_module is None:
        return 0
    LoraLayer = lora_module.LoraLayer
    patched = 0
    for module in model.modules():
        if not isinstance(module, LoraLayer) or not hasattr(module, "lora_A"):
            continue
        if getattr(module, "use_dora", {}) and any(module.use_dora.values()):
            continue
        if not all(isinstance(module.lora_A[k], nn.Linear) for k in module.lora_A):
            continue  # conv / embedding adapters keep PEFT's forward
        module.forward = _lean_forward.__get__(module)
        patched += 1
    return patched


# ---------------------------------------------------------------- lever 4: flat NF4 scales

def flatten_double_quant(model) -> int:
    """Replace each nested (double-quantised) NF4 quant state's 8-bit absmax by its fp32
    dequantisation; returns how many weights were flattened."""
    states = {}  # by identity: a PEFT layer's `weight` is its base layer's, quant state and all
    for module in model.modules():
        state = getattr(getattr(module, "weight", None), "quant_state", None)
        if getattr(state, "nested", False):
            states[id(state)] = state
    if not states:  # no NF4 weights: not even bitsandbytes' import (~1 s) is needed
        return 0
    try:
        import bitsandbytes.functional as bnbf
    except ImportError:
        return 0
    flattened = 0
    for state in states.values():
        absmax = bnbf.dequantize_blockwise(state.absmax, state.state2)
        absmax += state.offset
        state.absmax = absmax.float()
        state.state2, state.offset, state.nested = None, None, False
        flattened += 1
    return flattened


# ---------------------------------------------------------------- lever 5: lean SwiGLU

def _swiglu_mlp_forward(self, x):
    return self.down_proj(SwiGLU.apply(self.gate_proj(x), self.up_proj(x)))


def lean_swiglu(model) -> int:
    """Route gate/up/down MLPs with a SiLU activation (Llama, Qwen2, Mistral, ...) through
    `kernels.SwiGLU`; returns how many were patched."""
    patched = 0
    for module in model.modules():
        if not all(hasattr(module, n) for n in ("gate_proj", "up_proj", "down_proj", "act_fn")):
            continue
        if not isinstance(module.act_fn, nn.SiLU) and type(module.act_fn).__name__ != "SiLUActivation":
            continue
        module.forward = _swiglu_mlp_forward.__get__(module)
        patched += 1
    return patched


# ---------------------------------------------------------------- lever 8: fused RMSNorm

# RMSNorm classes whose forward is exactly `weight * (x * rsqrt(mean(x^2) + eps)).to(dtype)`
# (Gemma's `1 + weight` and others differ and keep their own forward).
_PLAIN_RMSNORMS = {"LlamaRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm", "MistralRMSNorm", "Phi3RMSNorm",
                   "Qwen2MoeRMSNorm", "Qwen3MoeRMSNorm"}


def _rmsnorm_forward(self, hidden_states):
    if hidden_states.dtype == torch.float64:  # the module computes in fp32 even then
        return type(self).forward(self, hidden_states)
    return RMSNorm.apply(hidden_states, self.weight, float(self.variance_epsilon))


def lean_rmsnorm(model) -> int:
    """Route the known plain RMSNorm modules through `kernels.RMSNorm`; returns how many were patched."""
    if not hasattr(torch.ops.aten, "_fused_rms_norm"):
        return 0
    patched = 0
    for module in model.modules():
        if type(module).__name__ in _PLAIN_RMSNORMS and hasattr(module, "variance_epsilon"):
            module.forward = _rmsnorm_forward.__get__(module)
            patched += 1
    return patched


# ---------------------------------------------------------------- lever 9: one-kernel tanh GELU

def _gelu_tanh_forward(self, x):
    return nn.functional.gelu(x, approximate="tanh")


def lean_gelu(model) -> int:
    """Route transformers' `NewGELUActivation` (`gelu_new`: GPT-2, GPT-J, Phi) through torch's
    tanh GELU; returns how many modules were patched."""
    patched = 0
    for module in model.modules():
        if type(module).__name__ == "NewGELUActivation":
            module.forward = _gelu_tanh_forward.__get__(module)
            patched += 1
    return patched


# ---------------------------------------------------------------- lever 10: fp32 attention for narrow heads

def cpu_attention(inner) -> int:
    """Set a CPU model that uses SDPA attention to `kernels.cpu_sdpa` (the same attention, in
    fp32 under autocast where that is faster); returns 1 when it was set. The setting is not
    saved with the model (transformers keeps it out of config.json)."""
    config = getattr(inner, "config", None)
    if getattr(config, "_attn_implementation", None) != "sdpa" or not hasattr(inner, "set_attn_implementation"):
        return 0
    inner.set_attn_implementation(register_cpu_sdpa())
    return 1


# ---------------------------------------------------------------- lever 2: micro-batch splitting

def tokens_per_pass(cfg, device: torch.device | str, inner=None) -> int | None:
    """How many tokens one forward/backward pass may hold; None = the whole micro-batch.
    `--tokens-per-pass` wins (0 = whole); on CPU at least one row and DEFAULT_CPU_TOKENS_PER_PASS,
    and as many as CPU_ACTIVATION_BUDGET of `inner`'s estimated activations hold."""
    explicit = getattr(cfg, "tokens_per_pass", None)
    if explicit:
        return int(explicit)
    if torch.device(device).type == "cpu":
        floor = max(DEFAULT_CPU_TOKENS_PER_PASS, int(getattr(cfg, "seq_len", 0) or 0))
        per_token = _activation_bytes_per_token(inner) if inner is not None else None
        return max(floor, int(CPU_ACTIVATION_BUDGET // per_token) if per_token else 0)
    return None


def _pass_bytes(inner, cfg, per_pass: int | None) -> float:
    """Estimated activation bytes of one pass (the whole micro-batch when it is smaller than
    `per_pass`); infinite when the model's shape is unknown, so the heap is trimmed."""
    per_token = _activation_bytes_per_token(inner)
    if not per_token:
        return math.inf
    micro_batch = int(getattr(cfg, "seq_len", 512) or 512) * int(getattr(cfg, "micro_batch", 1) or 1)
    return float(per_token * min(per_pass or micro_batch, micro_batch))


def split_for_memory(batch, plan: SpeedPlan) -> Iterator:
    """The micro-batch's passes (`row_groups`), lazily: with `plan.trim_heap` the heap is
    trimmed before each pass, when the previous pass's activations are free (a no-op under
    tcmalloc)."""
    for part in row_groups(batch, plan.tokens_per_pass):
        if plan.trim_heap:
            trim_heap()
        yield part


def row_groups(batch, tokens_per_pass: int | None) -> list:
    """The micro-batch as consecutive row groups of at most `tokens_per_pass` tokens (None or 0:
    the whole micro-batch), each with its padding trimmed. Summing the group losses gives the
    micro-batch loss exactly."""
    budget = tokens_per_pass
    rows, width = batch.input_ids.shape
    if not budget or rows * width <= budget or rows == 1:
        return [batch]
    from mens.train.data import Batch, IGNORE

    per = max(1, budget // width)
    parts = []
    for start in range(0, rows, per):
        ids = batch.input_ids[start:start + per]
        pos = batch.position_ids[start:start + per]
        tgt = batch.targets[start:start + per]
        # Trailing columns that are padding in every row of the group carry no loss and are
        # attended by nothing real (padding is its own segment): drop them.
        live = (tgt != IGNORE).any(0).nonzero()
        end = int(live.max()) + 2 if len(live) else 1
        end = min(end, width)
        parts.append(Batch(ids[:, :end], pos[:, :end], tgt[:, :end],
                           int((tgt != IGNORE).sum()), int(ids.shape[0] * end)))
    return parts


# ---------------------------------------------------------------- lever 3: checkpointing

# Saved activations per token per decoder layer with lean LoRA, in units of hidden-size
# elements of the compute dtype (measured with torch.autograd.graph.saved_tensors_hooks on the
# Qwen2 shape: ~10 hidden-widths for attention + norms, 4 intermediate-widths for the MLP).
def _activation_bytes_per_token(inner) -> int | None:
    """Saved activations per token through the whole decoder with the levers on: ~10 hidden
    widths for attention, norms and inputs plus 5 intermediate widths for the MLP, 2 bytes each
    (measured with saved_tensors_hooks on the Qwen2 shape: 72 KB per token and layer)."""
    conf = getattr(inner, "config", None)
    hidden = getattr(conf, "hidden_size", None)
    layers = getattr(conf, "num_hidden_layers", None)
    if not hidden or not layers:
        return None
    inter = getattr(conf, "intermediate_size", 4 * hidden) or 4 * hidden
    return int(layers * (10 * hidden + 5 * inter) * 2)


def _checkpoint_every(inner, cfg, tokens_per_pass: int | None, device: torch.device) -> int | None:
    """None when one pass's activations fit in half the free memory; else checkpoint every
    n-th layer with the largest n that fits (a checkpointed layer keeps only its input)."""
    per_token = _activation_bytes_per_token(inner)
    if not per_token:
        return None
    tokens = tokens_per_pass or (
        int(getattr(cfg, "seq_len", 512)) * int(getattr(cfg, "micro_batch", 1)))
    need = tokens * per_token
    budget = 0.5 * _free_bytes(device)
    if need <= budget:
        return None
    # checkpointing every n-th layer keeps ~(1 - 1/n) of the activations
    return max(1, int(1.0 / max(1e-9, 1.0 - budget / need)))


def _free_bytes(device: torch.device) -> float:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return float(free)
    try:
        with open("/proc/meminfo") as fh:
            info = {line.split(":")[0]: line.split()[1] for line in fh}
        return float(info["MemAvailable"]) * 1024
    except (OSError, KeyError):  # pragma: no cover - non-Linux
        return math.inf


def enable_checkpointing(inner, every_n_layers: int = 1) -> None:
    """Checkpoint every n-th decoder layer (non-reentrant: works with frozen inputs and kwargs);
    n = 2 halves both the saved activations' reduction and the recomputation."""
    # transformers 5 renamed the switch (the old name warns) and added every_n_layers.
    if hasattr(inner, "activation_checkpointing_enable"):
        inner.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False},
                                              every_n_layers=every_n_layers)
    elif hasattr(inner, "gradient_checkpointing_enable"):
        inner.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        return
    if hasattr(inner, "enable_input_require_grads"):
        inner.enable_input_require_grads()
