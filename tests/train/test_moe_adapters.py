"""LoRA with mens's defaults on every MoE family of tests/families.py (Qwen3-MoE, Qwen3.5-MoE,
Qwen3-Next, gpt-oss, DeepSeek-V3), tiny, and what mens says about it:

- attention (or Gated DeltaNet) and every routed expert's fused weight train; the routers do not;
- what the manifest's `adapters` says is adapted is exactly what has LoRA weights, at the rank
  and alpha it records (PEFT's, read back), and what it lists as frozen is exactly what has none.
  PEFT 0.21 on transformers 5 rewrites the targets gate_proj/up_proj/down_proj of Qwen2-MoE-like
  families onto the fused experts (its v4->v5 rewrite): on Qwen3-Next and DeepSeek-V3 the shared
  experts (and DeepSeek-V3's dense MLP) stay frozen and the experts' gate_up_proj gets twice the
  rank and alpha — mens keeps PEFT's behaviour, so the adapters load with plain PEFT, and says so
  (status line, manifest, one warning); the warning's advice (--backend full) trains them;
- QLoRA quantises the linear layers, frozen ones included, and leaves the fused experts unquantised,
  as its `quantization` says;
- the saved adapter, loaded by plain `peft.PeftModel.from_pretrained` onto a fresh base, gives
  mens's trained model's logits, and so does the merged model.
"""

from __future__ import annotations

import functools
import logging
import re

import pytest
import torch
from torch import nn

from families import FAMILIES, tiny_family_dir
from train_helpers import config, write_pairs

pytestmark = pytest.mark.slow
MOE = [name for name, family in FAMILIES.items() if family.moe]
SHARED = {"qwen3-next": "mlp.shared_expert", "deepseek-v3": "mlp.shared_experts"}  # where PEFT's rewrite applies
MLP = ("down_proj", "gate_proj", "up_proj")
# The linear layers each family's default LoRA leaves frozen (paths inside a decoder layer):
# PEFT's rewrite moves their names onto the fused experts. DeepSeek-V3's first layer is dense.
FROZEN = {"qwen3-next": {f"mlp.shared_expert.{p}" for p in MLP},
          "deepseek-v3": {f"mlp.shared_experts.{p}" for p in MLP} | {f"mlp.{p}" for p in MLP}}


@functools.cache
def built(name: str, backend: str = "lora"):
    """Family `name` as `mens train --backend BACKEND` builds it, and what mens said meanwhile."""
    from mens.train.backends import build

    said: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: said.append(record.getMessage())
    log = logging.getLogger("mens")
    level, log.level = log.level, logging.INFO
    log.addHandler(handler)
    try:
        cfg = config(tiny_family_dir(name), "unused", "unused", backend=backend, seq_len=64)
        torch.manual_seed(0)
        return cfg, build(cfg, torch.device("cpu"), False), said
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


def _lora_layers(model) -> dict[str, nn.Module]:
    from peft.tuners.lora import LoraLayer

    return {n: m for n, m in model.named_modules() if isinstance(m, LoraLayer) and len(m.lora_A)}


def _in_layer(name: str) -> str:
    return re.sub(r"^(.*\.)?layers\.\d+\.", "", name)


def _experts_and_routers(decoder):
    """{experts module: its 3-D weights}, and the routers: a module beside the experts with one
    weight row per expert (transformers 5's routers are not linear layers; found by shape, not
    by the rule mens uses)."""
    def base(module):  # under PEFT's wrapper
        return module.get_base_layer() if hasattr(module, "get_base_layer") else module

    experts, routers = {}, set()
    for parent in decoder.modules():
        children = [base(c) for c in parent.children()]
        for child in children:
            fused = {n: p for n, p in child.named_parameters(recurse=False) if p.ndim == 3}
            if fused and not isinstance(child, nn.modules.conv._ConvNd):
                experts[child] = fused
                count = next(iter(fused.values())).shape[0]
                routers |= {id(c) for c in children if c is not child
                            and getattr(c, "weight", None) is not None and c.weight.ndim == 2
                            and c.weight.shape[0] == count}
    return experts, routers


def _frozen_linear(model, layers) -> set[str]:
    """The decoder's linear layers (routers aside) that no LoRA layer wraps, by path inside a layer."""
    decoder = model.get_base_model().get_decoder()
    wrapped = {id(m.get_base_layer()) for m in layers.values()}
    lora_parts = {id(p) for m in layers.values() for d in (m.lora_A, m.lora_B) for p in d.modules()}
    _, routers = _experts_and_routers(decoder)
    return {_in_layer(n) for n, m in decoder.named_modules() if isinstance(m, nn.Linear) and id(m) not in wrapped
            and id(m) not in lora_parts and id(m) not in routers and not n.endswith("base_layer")}


@pytest.mark.parametrize("name", MOE)
def test_default_lora_is_what_mens_says_it_is(name):
    from mens.train.speed import optimize_for_training

    cfg, b, said = built(name)
    model, adapters = b.model, b.adapters
    layers = _lora_layers(model)
    decoder = model.get_base_model().get_decoder()
    experts, routers = _experts_and_routers(decoder)
    assert experts and routers, f"{name}: the test found no experts or routers"

    # every routed expert's fused weight has its own adapter; the routers have none and stay frozen
    param_adapters = {(id(m.get_base_layer()), m.parameter_name) for m in layers.values()
                      if getattr(m, "parameter_name", None)}
    for module, fused in experts.items():
        assert {(id(module), p) for p in fused} <= param_adapters, f"{name}: an experts module is not adapted"
    for module in decoder.modules():
        if id(module) in routers:
            assert not any(p.requires_grad for p in module.parameters())
            assert id(module) not in {id(m.get_base_layer()) for m in layers.values()}

    # what the manifest says is adapted is what has LoRA weights; what it calls frozen has none
    plain = {n.rsplit(".", 1)[-1] for n, m in layers.items() if not getattr(m, "parameter_name", None)}
    fused = {m.parameter_name for m in layers.values() if getattr(m, "parameter_name", None)}
    assert set(adapters["linear"]) == plain and set(adapters["experts"]) == fused == {"down_proj", "gate_up_proj"}
    assert set(adapters["frozen"]) == _frozen_linear(model, layers) == FROZEN.get(name, set()), adapters
    assert not {"q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkvz", "kv_b_proj"} & {
        p.rsplit(".", 1)[-1] for p in adapters["frozen"]}, f"{name}: attention frozen"

    # at the rank and alpha recorded: the run's, and for gate_up_proj PEFT's doubled ones where it rewrote
    doubled = {"gate_up_proj": [2 * cfg.lora_r, 2 * cfg.lora_alpha]} if name in SHARED else {}
    assert (adapters["rank"], adapters["alpha"], adapters["ranks"]) == (cfg.lora_r, cfg.lora_alpha, doubled)
    assert adapters["rewritten"] == (list(MLP) if name in SHARED else [])
    for n, m in layers.items():
        leaf = getattr(m, "parameter_name", None) or n.rsplit(".", 1)[-1]
        r, alpha = adapters["ranks"].get(leaf, [cfg.lora_r, cfg.lora_alpha])
        assert m.r["default"] == r, n
        assert m.scaling["default"] == pytest.approx(alpha / r), n

    # the status line says it, and a rewrite that froze layers is warned about once
    line = [s for s in said if s.startswith("mens: LoRA")]
    assert len(line) == 1 and line[0].startswith(f"mens: LoRA (rank {cfg.lora_r}, alpha {cfg.lora_alpha}) on ")
    warnings = [s for s in said if "v4->v5 rewrite" in s and s.startswith("mens: warning")]
    if name in SHARED:
        assert "gate_up_proj at 2x rank and alpha" in line[0]
        assert "frozen by PEFT's v4->v5 rewrite: " in line[0]
        assert f"{SHARED[name]}.{{down_proj, gate_proj, up_proj}}" in line[0], line[0]
        assert len(warnings) == 1 and "--backend full" in warnings[0], said
    else:
        assert "frozen" not in line[0] and not warnings, said

    # the speed plan's lean LoRA count is the adapted linear layers; the expert adapters keep PEFT's forward
    plan = optimize_for_training(model, cfg)
    assert plan.patched.get("lean_lora") == sum(1 for m in layers.values() if not getattr(m, "parameter_name", None))
    assert f"{len(experts)} adapted module(s)" in plan.off.get("lean_lora", ""), plan.off


@pytest.mark.parametrize("name", list(SHARED))
def test_qlora_quantises_what_it_says(name):
    """QLoRA: every linear layer is 4-bit, adapted or frozen (the shared experts too); the fused
    experts stay unquantised (in the run's dtype), which the manifest's `quantization` says; it adapts
    what LoRA does."""
    import bitsandbytes as bnb

    _, b, _ = built(name, "qlora")
    layers = _lora_layers(b.model)
    linear = [m.get_base_layer() for m in layers.values() if not getattr(m, "parameter_name", None)]
    decoder = b.model.get_base_model().get_decoder()
    frozen = [m for n, m in decoder.named_modules() if _in_layer(n) in FROZEN[name]]
    assert linear and frozen and all(isinstance(m, bnb.nn.Linear4bit) for m in linear + frozen)
    assert b.quantization == "bnb-nf4-double-quant (linear layers; fused experts unquantised)"
    experts, _ = _experts_and_routers(decoder)
    assert {p.dtype for fused in experts.values() for p in fused.values()} == {b.dtype}
    assert b.adapters == built(name)[1].adapters


@pytest.mark.parametrize("name", list(SHARED))  # where PEFT's rewrite applies
def test_the_saved_adapter_loads_with_plain_peft_and_merges_within_1e_5(name, tmp_path):
    """Save the adapters (made non-zero) as `mens train` does: plain PEFT loads them onto a fresh
    base, at the ranks the manifest records, and gives the trained model's logits; `mens merge`
    folds them exactly."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from mens.export.merge import merge_run
    from mens.train.backends import build

    cfg = config(tiny_family_dir(name), "unused", "unused", backend="lora", seq_len=64)
    torch.manual_seed(0)
    b = build(cfg, torch.device("cpu"), False)  # its own copy: the weights change here
    model = b.model.eval()
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    run = tmp_path / "run"
    run.mkdir()
    b.save(run, model, b.tokenizer)
    ids = torch.randint(1, model.config.vocab_size, (1, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        trained = model(input_ids=ids).logits

    fresh = AutoModelForCausalLM.from_pretrained(tiny_family_dir(name), dtype=torch.float32)
    loaded = PeftModel.from_pretrained(fresh, run).eval()
    assert {(m.parameter_name if getattr(m, "parameter_name", None) else n.rsplit(".", 1)[-1], m.r["default"])
            for n, m in _lora_layers(loaded).items()} == {
        (n, b.adapters["ranks"].get(n, [cfg.lora_r])[0]) for n in b.adapters["linear"] + b.adapters["experts"]}
    with torch.no_grad():
        gap = (loaded(input_ids=ids).logits - trained).abs().max().item()
    assert gap <= 1e-5, f"{name}: plain PEFT's model is not the trained one ({gap:.3g})"

    report = merge_run(run, tmp_path / "merged", dtype="f32")
    assert report.max_logit_diff <= 1e-5 and report.max_logit_diff_saved <= 1e-5, report
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32).eval()
    with torch.no_grad():
        gap = (merged(input_ids=ids).logits - trained).abs().max().item()
    assert gap <= 1e-5, f"{name}: the merged model is not the trained one ({gap:.3g})"


def test_the_warnings_advice_trains_what_lora_leaves_frozen(tmp_path):
    """`--backend full` (the warning's advice) trains DeepSeek-V3's shared experts and dense MLP:
    one step changes them."""
    from safetensors.torch import load_file

    from mens.train.loop import train

    base = tiny_family_dir("deepseek-v3")
    out = train(config(base, write_pairs(tmp_path / "data", n=8), tmp_path / "run", backend="full", max_steps=1,
                       seq_len=64, val_split=0.0, warmup_steps=0))
    assert out.status == "completed"
    before, after = load_file(base / "model.safetensors"), load_file(tmp_path / "run" / "model.safetensors")
    frozen_by_lora = [k for k in before if _in_layer(k.removesuffix(".weight")) in FROZEN["deepseek-v3"]]
    assert {_in_layer(k.removesuffix(".weight")) for k in frozen_by_lora} == FROZEN["deepseek-v3"]
    unchanged = [k for k in frozen_by_lora if torch.equal(before[k], after[k].to(before[k].dtype))]
    assert not unchanged, unchanged


@pytest.mark.parametrize("name", MOE)
def test_mens_rl_and_dpo_adapt_what_mens_train_does(name):
    """`mens rl` / `mens dpo` build their LoRA with mens train's targeting rule: PEFT's own
    "all-linear" adapted the router (`mlp.gate`) of Qwen3-MoE, Qwen3-Next and DeepSeek-V3."""
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from mens.rl.run import lora_config

    model = AutoModelForCausalLM.from_pretrained(tiny_family_dir(name), dtype=torch.float32)
    rl = get_peft_model(model, lora_config(model, 8, 16))
    train = built(name)[1].model
    assert {_in_layer(n) for n in _lora_layers(rl)} == {_in_layer(n) for n in _lora_layers(train)}
    decoder = rl.get_base_model().get_decoder()
    _, routers = _experts_and_routers(decoder)
    assert routers, f"{name}: the test found no routers"
    for module in decoder.modules():
        if id(module) in routers:
            assert not any(p.requires_grad for p in module.parameters()), f"{name}: mens rl trains the router"


@pytest.mark.parametrize("name", MOE)
def test_the_probes_adapter_count_is_what_mens_train_attaches(name):
    """`mens probe --model` counts the adapters' memory on the LoRA mens train attaches: it counted
    an adapter on every linear layer (routers and the shared experts PEFT leaves frozen included)
    and one rank on a fused gate_up_proj that PEFT's rewrite gives two."""
    from transformers import AutoConfig

    from mens.train.memory import adapter_parameters

    cfg, built_model, _ = built(name)
    trained = sum(p.numel() for n, p in built_model.model.named_parameters() if ".lora_" in n)
    assert adapter_parameters(AutoConfig.from_pretrained(tiny_family_dir(name)), cfg.lora_r) == trained
