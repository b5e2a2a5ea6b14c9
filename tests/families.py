"""The model families users fine-tune, each as a tiny random-weight model built from transformers'
own config class: 2 decoder layers, hidden 64, the tiny tokenizer of `tiny.py`, and a sliding
window of 16 wherever the family has one (so that window effects show at seq 128).

`FAMILIES` is the table (name → `Family`); `tiny_family_dir(name)` builds a family once per
process into a local model directory as a user has it (config.json, safetensors, tokenizer) and
returns its path. Adding a family is one row here; the family tests (tests/train/test_train_families.py)
and docs/training.md's family table pick it up.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HIDDEN = 64
LAYERS = 2
WINDOW = 16  # the sliding window of every family that has one


@dataclass(frozen=True)
class Family:
    """One row: what users call it, transformers' model_type, and the config values that make
    the tiny model show the family's features (windows, experts, recurrent layers …)."""

    name: str
    model_type: str
    config: dict = field(default_factory=dict)
    moe: bool = False          # has routed experts (LoRA/QLoRA on the experts is checked)
    window: bool = False       # some layers attend within a sliding window
    recurrent: bool = False    # some layers carry a recurrent state (Gated DeltaNet)
    mask_ignores_positions: bool = False  # builds its attention mask without position ids (packing leaks)

    @property
    def packs_exactly(self) -> bool:
        return not (self.recurrent or self.mask_ignores_positions)


# Values shared by most families; a row overrides what its config class names differently.
_COMMON = dict(hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_hidden_layers=LAYERS,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
               tie_word_embeddings=False)
_MOE = dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)
# Qwen3.5 / Qwen3-Next: one Gated DeltaNet (linear attention) layer, then one full-attention layer.
_DELTANET = dict(head_dim=16, layer_types=["linear_attention", "full_attention"], linear_num_key_heads=2,
                 linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
                 linear_conv_kernel_dim=4)
# Qwen3.5's rotary embedding is multimodal (interleaved MRoPE) even for text: its sections count
# rotary pairs, so they must fit the tiny head's 16 × 0.25 = 4 rotary dims (the default
# [11, 11, 10] fits the real 256-wide head; llama.cpp's rope asserts on it, transformers lets it be).
_QWEN35_ROPE = dict(rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                                     "mrope_interleaved": True, "mrope_section": [1, 1, 0]})

FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("llama3", "llama", dict(rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 256})),
    Family("mistral", "mistral", dict(sliding_window=WINDOW, head_dim=16), window=True),
    Family("qwen2.5", "qwen2"),  # Qwen2.5 ships use_sliding_window: false
    Family("qwen3", "qwen3", dict(head_dim=16)),
    Family("qwen3-moe", "qwen3_moe", dict(head_dim=16, decoder_sparse_step=1, **_MOE), moe=True),
    Family("qwen3.5", "qwen3_5_text", dict(_DELTANET, **_QWEN35_ROPE), recurrent=True),
    Family("qwen3.5-moe", "qwen3_5_moe_text", dict(_DELTANET, shared_expert_intermediate_size=32, **_MOE,
                                                        **_QWEN35_ROPE),
           moe=True, recurrent=True),
    Family("qwen3-next", "qwen3_next", dict(_DELTANET, shared_expert_intermediate_size=32,
                                            decoder_sparse_step=1, **_MOE), moe=True, recurrent=True),
    # Gemma 2 ships its output matrix tied to the embeddings (llama.cpp's gemma2 has no other)
    Family("gemma2", "gemma2", dict(head_dim=16, query_pre_attn_scalar=16, sliding_window=WINDOW,
                                    layer_types=["sliding_attention", "full_attention"], tie_word_embeddings=True),
           window=True),
    Family("gemma3", "gemma3_text", dict(head_dim=16, query_pre_attn_scalar=16, sliding_window=WINDOW,
                                         layer_types=["sliding_attention", "full_attention"]), window=True),
    Family("phi3", "phi3", dict(sliding_window=WINDOW), window=True),  # Phi-3 and Phi-4 are both phi3
    Family("starcoder2", "starcoder2", dict(sliding_window=WINDOW), window=True),
    Family("granite", "granite", dict(embedding_multiplier=12.0, logits_scaling=8.0, residual_multiplier=0.22,
                                      attention_multiplier=0.0625)),
    Family("olmo2", "olmo2"),
    Family("gpt-oss", "gpt_oss", dict(head_dim=16, num_local_experts=4, num_experts_per_tok=2,
                                      sliding_window=WINDOW, layer_types=["sliding_attention", "full_attention"],
                                      rope_parameters={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                                                       "beta_slow": 1.0, "truncate": False, "rope_theta": 150000.0,
                                                       "original_max_position_embeddings": 16}),
           moe=True, window=True, mask_ignores_positions=True),
    Family("deepseek-v3", "deepseek_v3", dict(  # values narrower than keys, as in DeepSeek-V3
        num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4, num_experts_per_tok=2, n_group=1,
        topk_group=1, n_shared_experts=1, moe_intermediate_size=32, first_k_dense_replace=1, q_lora_rank=32,
        kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8), moe=True),
    Family("glm4", "glm4", dict(head_dim=16)),
]}


def family_config(name: str, vocab_size: int, eos_token_id: int | None = None, pad_token_id: int | None = None):
    """The tiny config of family `name`, from transformers' own config class."""
    from transformers import AutoConfig

    family = FAMILIES[name]
    values = {**_COMMON, **family.config, "vocab_size": vocab_size,
              "eos_token_id": eos_token_id, "pad_token_id": pad_token_id, "bos_token_id": None}
    return AutoConfig.for_model(family.model_type, **values)


def build_family(name: str, out_dir: str | Path, tokenizer_dir: str | Path | None = None, seed: int = 0) -> Path:
    """Save family `name`'s tiny random-weight model and tokenizer into `out_dir`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tiny import build_tokenizer

    out_dir = Path(out_dir)
    if tokenizer_dir is None:
        build_tokenizer(out_dir)
    else:
        AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out_dir)
    tok = AutoTokenizer.from_pretrained(out_dir)
    cfg = family_config(name, len(tok), tok.eos_token_id, tok.pad_token_id)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.save_pretrained(out_dir)
    (out_dir / "mens_fixture.json").write_text(json.dumps({"family": name, "seed": seed}))
    return out_dir


@functools.cache
def _root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="mens-families-"))
    atexit.register(shutil.rmtree, root, True)
    from tiny import build_tokenizer

    build_tokenizer(root / "tokenizer")
    return root


@functools.cache
def tiny_family_dir(name: str) -> Path:
    """Family `name`'s tiny model directory, built once per process (removed at exit)."""
    if name not in FAMILIES:
        raise KeyError(f"no family {name!r}; the families are {', '.join(FAMILIES)}")
    root = _root()
    return build_family(name, root / name, tokenizer_dir=root / "tokenizer")
