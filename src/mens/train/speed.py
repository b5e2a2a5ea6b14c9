"""Speed and memory levers applied to a model after its adapters are attached.

`optimize_for_training(model, cfg)` is called once by the model builder; `split_for_memory`
by the loop for each micro-batch. The LM head + cross-entropy lever lives in
`mens.train.loss`. Each lever says what it bought, measured on this project's benchmark
(`bench/train_vs_trl.py`, Qwen2.5-0.5B shape, QLoRA, 2-core CPU; see docs/performance.md).

1. Lean LoRA (`kernels.LoraDelta`): PEFT's LoRA forward upcasts the layer input to fp32 for every
   adapted module (7 per decoder layer), draws its dropout mask with `nn.Dropout` and lets
   autograd keep the fp32 input, the dropped fp32 copy and the mask: ~9 bytes per input
   element per module. Here the adapter runs in the input's dtype (bf16 under QLoRA, the
   same arithmetic TRL's bf16 autocast uses), the mask comes from 15-bit lanes of 64-bit random
   draws (~10x cheaper than `bernoulli_`/`F.dropout` on CPU), regenerated in backward from a
   per-call seed, and only the [N, r] bottleneck is saved: the input itself is shared with the
   base layer. The scale rides on the
   bottleneck and the sum with the base output is the B matmul's accumulator (`addmm`).
   Measured per step, 4-layer cut: the dropout/cast/copy share of the profile fell from ~30 %
   to a few %.
2. Micro-batch splitting (`split_for_memory`): on CPU the matmuls already saturate the cores
   at a few hundred rows, so a packed micro-batch is run row by row (forward + backward per
   row, gradients accumulate; the loss is divided by the whole window's supervised tokens, so
   the result is the same gradient). A pass holds at most CPU_ACTIVATION_BUDGET (1 GiB) of
   estimated activations, never less than one row: one row per pass at the 0.5B shape, the
   whole micro-batch on its 4-layer cut. Each pass re-dequantises every NF4 weight, so more
   passes may cost CPU (x1.8 per micro-batch in a 4-pass A/B on the 4-layer cut under heavy
   load; 17.2 s vs 16.8 s per epoch there, row passes vs whole, at low load), but at
   0.5B one 2,048-token pass holds ~3.5 GB and ran slower (118 s vs 44 s epoch, 8 GB RSS) than
   row passes (4.5 GB); no recomputation of matmuls, unlike activation checkpointing.
3. Activation checkpointing only when asked (`gradient_checkpointing: on`), or under `auto`
   every n-th layer when the estimated activations of one pass would not fit in half the free
   memory: it recomputes the forward of those layers (TRL's default, all layers: ~+40 % CPU in
   our runs), so it is the last resort.
4. Flat NF4 scales (`flatten_double_quant`): with double quantisation every dequantisation
   (forward and backward of every layer, every pass) first dequantises the 8-bit block scales
   through bitsandbytes' generic path; measured on a 4864x896 weight, 2 cores: 56 ms nested vs
   14 ms flat per dequantisation, against 66 ms for the 2,048-row matmul it feeds. The scales
   are dequantised once at load into fp32 (the very values double quantisation yields, so the
   weights and every result are bit-identical); costs 4 bytes per 64 weights (22 MB at 0.5B).
5. Lean SwiGLU (`lean_swiglu`): `down(silu(gate(x)) * up(x))` lets autograd keep gate(x),
   silu(gate(x)) and up(x); `kernels.SwiGLU` keeps gate(x) and up(x) and recomputes the (cheap,
   elementwise) silu in backward: one [tokens, intermediate] tensor less per layer, 9.7 of the
   72 KB saved per token and layer on the Qwen2.5-0.5B shape (measured with
   saved_tensors_hooks).
6. CPU memory hygiene (`own_weights`, `_lean_allocator`): transformers leaves unquantised
   weights (the 136 M-parameter tied embedding / LM head) as views into the mmap'd
   safetensors file, which keeps the whole file (988 MB at 0.5B) mapped and, once the head has
   read it, resident; cloning them releases the map. The allocator matters as much as any
   kernel: `mens train` runs on tcmalloc when it is installed (`mens.train.allocator`;
   Qwen2.5-0.5B, one 4x512 step: ~9 s at a 2.4 GB peak). On glibc, a 1 MiB mmap threshold
   (this lever's first form) kept the peak at 2.6-2.8 GB but paid ~2.6 M page faults per step
   (~20 s); the default growing threshold reuses the heap (~10 s) but keeps load-time garbage
   and fragments (3.3-3.7 GB). So on glibc: a fixed 32 MiB threshold (only the LM head's
   [chunk, vocab] buffers are mapped fresh), a `malloc_trim` once the model is built and one
   before every pass: ~11.5 s at 2.7 GB (trimming per micro-batch instead: ~10.5 s at 3.3 GB).
7. No KV cache during training (`use_cache=False`): the cache is never read in training but
   transformers would still build it.
8. Fused RMSNorm (`lean_rmsnorm`, Llama/Qwen2/Mistral-style norms): aten's fused kernel forward
   (bit-identical output), saving x and a [tokens, 1] reciprocal RMS instead of an fp32 copy.
"""

from __future__ import annotations

import functools
import math
import os
from typing import Iterator

import torch
from torch import nn

from mens.train.kernels import LoraDelta, RMSNorm, SwiGLU

DEFAULT_CPU_TOKENS_PER_PASS = 512
# CPU passes hold at most this much estimated activation memory (lever 2): at the 0.5B shape
# that is one 512-token row per pass; at its 4-layer cut a whole 4x512 micro-batch.
CPU_ACTIVATION_BUDGET = 1 << 30
_auto_tokens_per_pass: int | None = None  # set by optimize_for_training from the model shape


# ---------------------------------------------------------------- entry point

def optimize_for_training(model, cfg):
    """Apply the levers in place; returns the model (same object)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(inner, "config", None) is not None:
        inner.config.use_cache = False
    device = _device_of(model)
    if device.type == "cpu":
        _cpu_threads()
        _lean_allocator()
        own_weights(model)
    flatten_double_quant(model)
    lean_lora(model)
    lean_swiglu(model)
    lean_rmsnorm(model)
    if device.type == "cpu":
        trim_heap()  # loading and quantising left freed blocks in the heap
    global _auto_tokens_per_pass
    per_token = _activation_bytes_per_token(inner)
    _auto_tokens_per_pass = int(CPU_ACTIVATION_BUDGET // per_token) if per_token else None
    mode = getattr(cfg, "gradient_checkpointing", "auto")
    if mode == "on":
        enable_checkpointing(inner)
    elif mode == "auto":
        every = _checkpoint_every(inner, cfg, device)
        if every:
            enable_checkpointing(inner, every)
    return model


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


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
@functools.lru_cache(maxsize=1)
def _libc():
    """glibc's handle when malloc is glibc's; None under tcmalloc/jemalloc or elsewhere. Looked
    up once: `find_library` runs ldconfig, and trim_heap() calls this before every pass."""
    from mens.train.allocator import in_use

    if in_use() != "system":
        return None
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:  # pragma: no cover - not glibc
        return None


def _lean_allocator() -> None:
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 128 << 20)


def trim_heap() -> None:
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


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
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:  # pragma: no cover - peft is a runtime dependency
        return 0
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
    try:
        import bitsandbytes.functional as bnbf
    except ImportError:
        return 0
    flattened = 0
    for module in model.modules():
        state = getattr(getattr(module, "weight", None), "quant_state", None)
        if state is None or not getattr(state, "nested", False):
            continue
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


# ---------------------------------------------------------------- lever 2: micro-batch splitting

def tokens_per_pass(cfg, device: torch.device | str) -> int | None:
    """How many tokens one forward/backward pass may hold; None = the whole micro-batch."""
    explicit = getattr(cfg, "tokens_per_pass", None) or os.environ.get("MENS_TOKENS_PER_PASS")
    if explicit is not None and str(explicit).strip() != "":
        return int(explicit) or None  # 0 = the whole micro-batch in one pass
    if torch.device(device).type == "cpu":
        floor = max(DEFAULT_CPU_TOKENS_PER_PASS, int(getattr(cfg, "seq_len", 0) or 0))
        return max(floor, _auto_tokens_per_pass or 0)
    return None


def split_for_memory(batch, cfg, device) -> Iterator:
    """The micro-batch's passes (`row_groups`), lazily: on CPU the heap is trimmed before each
    pass, when the previous pass's activations are free (lever 6; a no-op under tcmalloc)."""
    cpu = torch.device(device).type == "cpu"
    for part in row_groups(batch, cfg, device):
        if cpu:
            trim_heap()
        yield part


def row_groups(batch, cfg, device) -> list:
    """The micro-batch as consecutive row groups of at most `tokens_per_pass` tokens, each with
    its padding trimmed. Summing the group losses gives the micro-batch loss exactly."""
    budget = tokens_per_pass(cfg, device)
    rows, width = batch.input_ids.shape
    if budget is None or rows * width <= budget or rows == 1:
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


def _checkpoint_every(inner, cfg, device: torch.device) -> int | None:
    """None when one pass's activations fit in half the free memory; else checkpoint every
    n-th layer with the largest n that fits (a checkpointed layer keeps only its input)."""
    per_token = _activation_bytes_per_token(inner)
    if not per_token:
        return None
    tokens = tokens_per_pass(cfg, device) or (
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
