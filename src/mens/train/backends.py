"""The backends: one builder each, registered by name. A builder returns a `Built` — the model
on its device, the tokenizer, the weights' dtype (as `mens.train.precision` decides it), how the
run's final weights are saved and what the manifest records — and the loop, checkpoints and
saving use only that, never the name.

- `full`:    every weight of an HF causal LM trains, in fp32 master weights.
- `lora`:    LoRA/DoRA adapters (PEFT) over a frozen HF base; only the adapter is saved.
- `qlora`:   `lora` over a base quantised to NF4 (bitsandbytes), as torchtune and litgpt define it.
- `scratch`: a fresh GPT-2-shaped model and the VoxTokenizer (mens.train.scratch).

Adding a backend: a function `(cfg, device, bf16) -> Built` under `@register("name")`; the
config's backend choices are this registry. Light at import: torch loads inside the builders.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from mens.errors import MensError
from mens.chat_template import fit_embeddings, set_chat_template
from mens.train.vocab import answer_texts, grow_vocabulary, start_rows
from mens.hf import NF4, BaseModelInfo, is_adapter_run, load_causal_lm, load_tokenizer, max_positions, resolve_base
from mens.positions import check_generation_fits, check_length
from mens.train.bnb_cpu import quiet_hub_kernel_notice
from mens.train.precision import decide_precision

if TYPE_CHECKING:
    import torch

    from mens.train.config import TrainConfig

DEFAULT_LORA_DROPOUT = 0.05  # where every adapted weight is a linear layer

quiet_hub_kernel_notice()  # before peft/transformers/speed.py import bitsandbytes, for every backend


@dataclass
class Built:
    """What a backend hands the loop."""

    model: Any
    tokenizer: Any
    dtype: Any                           # the weights' dtype (mens.train.precision; manifest `dtype`)
    save: Callable[..., None]            # save(run_dir, model, tokenizer, weights=None): the run's final weights
    base: BaseModelInfo | None = None    # the HF base it was loaded from (manifest `base_model`)
    quantization: str | None = None      # how the frozen base is stored (manifest `quantization`)
    tokenizer_source: str = ""           # where the tokenizer came from (manifest `tokenizer.source`)
    defer_grad_sync: bool = False        # FSDP: only small adapters train, so reduce once per step
    scratch_shape: dict | None = None    # a model built here: its shape (manifest `scratch_shape`)
    added_tokens: list[str] = field(default_factory=list)  # what --chat-template added (manifest `tokenizer`)
    adapters: dict | None = None         # what LoRA adapts, at which rank, what stays frozen (manifest `adapters`)

    @property
    def trainable(self) -> list:
        """The parameters the optimizer updates (the current ones: FSDP replaces them when sharding)."""
        return [p for p in self.model.parameters() if p.requires_grad]


Builder = Callable[["TrainConfig", "torch.device", bool], Built]
BUILDERS: dict[str, Builder] = {}


def register(name: str) -> Callable[[Builder], Builder]:
    """`@register("name")` over a builder makes `--backend name` build with it."""
    def add(builder: Builder) -> Builder:
        BUILDERS[name] = builder
        return builder
    return add


def build(cfg: "TrainConfig", device: "torch.device", bf16: bool) -> Built:
    """The model and tokenizer of `cfg.backend` on `device` (`bf16`: the device computes in bf16)."""
    if cfg.backend not in BUILDERS:
        raise MensError(f"unknown backend {cfg.backend!r}", "--backend", f"use one of {', '.join(BUILDERS)}")
    return BUILDERS[cfg.backend](cfg, device, bf16)


# ---------------------------------------------------------------- Hugging Face bases

def hf_base(cfg: "TrainConfig") -> tuple[BaseModelInfo, Any, list[int], dict[str, list[int]]]:
    """Where `--model` is and its tokenizer in the run's chat format, after the preflight checks
    that need no weights; the ids of the tokens `--chat-template` and `--add-words` added to its
    vocabulary; and the words added, each with its pieces' ids (mens.train.vocab)."""
    from transformers import AutoConfig

    from mens.train import preflight

    if is_adapter_run(cfg.model) and not (Path(cfg.model) / "config.json").is_file():
        raise MensError("--model is a LoRA adapter run, not a model", cfg.model,
                        "give its base model as --model, or `mens merge` the run into a model directory first")
    base = resolve_base(cfg.model)
    if base.path:
        preflight.check_model_files(base.path)
    hf_config = AutoConfig.from_pretrained(base.source)
    check_length(cfg.seq_len, max_positions(hf_config), "--seq-len", cfg.model)
    tokenizer = load_tokenizer(base.source)
    preflight.check_vocab(tokenizer, hf_config, cfg.model)
    added = chat_format(cfg, tokenizer)
    words = language_words(cfg, tokenizer)
    added += tokenizer.convert_tokens_to_ids(list(words))
    check_bench_fits(cfg, tokenizer, max_positions(hf_config), cfg.model)
    return base, tokenizer, added, words


def language_words(cfg: "TrainConfig", tokenizer) -> dict[str, list[int]]:
    """The words `--add-words` added to `tokenizer`: the training answers' most frequent words that
    the base splits, each form with its pieces' ids."""
    if not cfg.add_words:
        return {}
    from mens.progress import say

    words = grow_vocabulary(tokenizer, list(answer_texts(cfg.data_dir)), cfg.add_words)
    names = list(dict.fromkeys(form.strip() for form in words))
    say(f"mens: --add-words: {len(names)} words the base's tokenizer splits become {len(words)} tokens "
        f"({', '.join(names[:12])}{', …' if len(names) > 12 else ''})")
    return words


def check_bench_fits(cfg: "TrainConfig", tokenizer, positions: int | None, where: str) -> None:
    """The mid-run bench's prompts (in the run's chat format) plus --bench-max-new-tokens fit the
    model's positions, before any weight loads or step trains."""
    if cfg.bench:
        from mens.evaluate.tasks import load_tasks

        prompts = [task.full_prompt(folder) for task, folder in load_tasks(cfg.bench, cfg.bench_limit)]
        check_generation_fits(tokenizer, prompts, positions=positions, new_tokens=cfg.bench_max_new_tokens,
                              flag="--bench-max-new-tokens", where=where, system=cfg.system_prompt)


def chat_format(cfg: "TrainConfig", tokenizer) -> list[int]:
    """`--chat-template` on the tokenizer, before any data is tokenized: the ids of the markers it
    added (one id each). Without the setting the data keep the tokenizer's own template (ChatML
    when it has none: mens.train.data), and a base whose vocabulary lacks ChatML's markers is
    warned about, since they would be split into pieces that never end a generation."""
    from mens.chat_template import CHATML_TEMPLATE, template_special_tokens
    from mens.progress import warn

    if cfg.chat_template:
        return tokenizer.convert_tokens_to_ids(set_chat_template(tokenizer, cfg.chat_template, "--chat-template"))
    vocab = tokenizer.get_vocab()
    if not getattr(tokenizer, "chat_template", None) and \
            any(t not in vocab for t in template_special_tokens(CHATML_TEMPLATE)):
        warn("mens: warning: the tokenizer has no chat template and no ChatML tokens: <|im_start|>/<|im_end|> "
            "are split into pieces and generation will not stop on them; --chat-template chatml adds them")
    return []


def load_for_training(base: BaseModelInfo, device: "torch.device", dtype, nf4: bool = False, tokenizer=None,
                      words: dict[str, list[int]] | None = None):
    """The base model on `device`, in `dtype` or NF4 (computing in `dtype`), ready to train; its
    embeddings (and output layer) grown to `tokenizer`'s size when tokens were added, the rows of
    added `words` at their pieces' mean."""
    from mens.train.bnb_cpu import keep_nf4_trainable
    from mens.train.model import name_the_loss

    model = load_causal_lm(base.source, device=device, dtype=dtype, nf4=nf4)
    if tokenizer is not None:
        fit_embeddings(model, tokenizer)
        start_rows(model, tokenizer, words or {})
    if nf4:
        keep_nf4_trainable(model)  # a mid-run bench (model.eval()) must not freeze the NF4 layers
    model.config.use_cache = False
    name_the_loss(model)
    return model


def attach_adapters(model, cfg: "TrainConfig", base: BaseModelInfo, new_tokens: list[int] = ()) -> tuple[Any, dict]:
    """Freeze `model` and wrap it in PEFT LoRA (or DoRA) adapters of cfg's rank and targets;
    with what PEFT made of them (`family.adapted`: names, ranks, frozen layers), said in one line.

    With the default targets (`all-linear`) an MoE base's fused experts train as well, through
    PEFT's parameter targeting, and its routers stay frozen (`family.adapter_targets`); PEFT's
    expert adapters take no dropout, so the default dropout is 0 there.

    `new_tokens` (ids `--chat-template` and `--add-words` added) train too, in the input
    embeddings and the output layer: their rows are untrained, and the end-of-turn token must be
    predicted for generation to stop. PEFT's `trainable_token_indices` trains exactly those rows
    (peft >= 0.15; pinned 0.21), where `modules_to_save` would train and save whole copies of both
    matrices (Qwen2: 2 x 136M weights) for a few rows. A tied output layer follows its embedding (PEFT ties them)."""
    from peft import LoraConfig, get_peft_model

    from mens.train.family import adapted, adapter_targets, say_adapted, text_config
    from mens.train.model import transposed_linears

    for p in model.parameters():
        p.requires_grad_(False)
    rows = None
    if new_tokens:
        names = {id(m): n for n, m in model.named_modules()}
        rows = {names[id(layer)]: list(new_tokens)
                for layer in (model.get_input_embeddings(), model.get_output_embeddings()) if layer is not None}
    modules, experts = adapter_targets(model, cfg.target_modules)
    if cfg.lora_dropout is None:
        cfg.lora_dropout = 0.0 if experts else DEFAULT_LORA_DROPOUT  # the manifest records what was used
    elif experts and cfg.lora_dropout:  # checked before loading too (check_expert_dropout)
        raise _expert_dropout_error(cfg.lora_dropout)
    lcfg = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=modules, target_parameters=experts or None, use_dora=cfg.dora, bias="none",
                      task_type="CAUSAL_LM", trainable_token_indices=rows,
                      fan_in_fan_out=transposed_linears(model))
    try:
        with warnings.catch_warnings():
            # PEFT asks transformers for a deprecated attribute; the warning is theirs, not the user's.
            warnings.simplefilter("ignore", FutureWarning)
            model = get_peft_model(model, lcfg)
    except ValueError as err:
        raise MensError(f"cannot attach adapters: {str(err).splitlines()[0][:200]}", "--target-modules",
                        "name linear layers the model has, or use all-linear") from None
    # Absolute base path (or hub id), so PeftModel.from_pretrained works from anywhere.
    model.peft_config["default"].base_model_name_or_path = base.source
    summary = adapted(model, modules)
    say_adapted(summary, text_config(model.config).model_type)
    return model, summary


def _expert_dropout_error(dropout: float) -> MensError:
    return MensError(f"the experts of this MoE base train through PEFT's parameter adapters, which take no "
                     f"dropout (--lora-dropout {dropout})", "--lora-dropout",
                     "drop --lora-dropout (0 is the default here), or name --target-modules without the experts")


def check_expert_dropout(cfg: "TrainConfig", base: BaseModelInfo) -> None:
    """An explicit non-zero `--lora-dropout` on a base whose experts the default targets adapt is
    refused before the weights load (the weights' shapes come from the config, on the meta device)."""
    if not cfg.lora_dropout or cfg.target_modules != "all-linear":
        return
    from transformers import AutoConfig

    from mens.train.family import expert_parameters
    from mens.train.memory import shapes

    if expert_parameters(shapes(AutoConfig.from_pretrained(base.source))):
        raise _expert_dropout_error(cfg.lora_dropout)


# ---------------------------------------------------------------- the builders

@register("qlora")
def qlora(cfg: "TrainConfig", device: "torch.device", bf16: bool) -> Built:
    return lora(cfg, device, bf16, nf4=True)


@register("lora")
def lora(cfg: "TrainConfig", device: "torch.device", bf16: bool, nf4: bool = False) -> Built:
    from mens.train.checkpoint import save_pretrained

    base, tokenizer, new_tokens, words = hf_base(cfg)
    check_expert_dropout(cfg, base)
    dtype = decide_precision(cfg, device.type, bf16).weights  # qlora: bf16 but on a slow-bf16 CPU; lora: on a GPU
    model = load_for_training(base, device, dtype, nf4=nf4, tokenizer=tokenizer, words=words)
    quantization = nf4_coverage(model) if nf4 else None
    model, adapters = attach_adapters(model, cfg, base, new_tokens)
    return Built(model, tokenizer, dtype, save_pretrained, base=base, quantization=quantization,
                 tokenizer_source=base.id, defer_grad_sync=True,
                 added_tokens=tokenizer.convert_ids_to_tokens(new_tokens), adapters=adapters)


def nf4_coverage(model) -> str:
    """The manifest's `quantization` of a QLoRA base: NF4, and what bitsandbytes left unquantised
    when that is more than embeddings and norms — the fused MoE experts (3-D weights, not linear
    layers) stay unquantised (in the run's bf16, or fp32), which for gpt-oss is most of the model;
    said once as a warning too, as is the advice of families whose maintainers advise bf16 LoRA
    instead (mens.train.memory)."""
    from mens.progress import warn
    from mens.train.family import expert_parameters, text_config
    from mens.train.memory import QLORA_ADVICE

    family = QLORA_ADVICE.get(text_config(model.config).model_type)
    if family:
        warn(f"mens: warning: {family}'s maintainers advise bf16 LoRA over QLoRA (its 4-bit quantisation error is "
             "large); `mens probe --model MODEL --preset P` says whether --backend lora fits this device")
    experts = expert_parameters(model)
    if not experts:
        return NF4
    total = sum(p.numel() for p in model.parameters())
    kept = sum(p.numel() for n, p in model.named_parameters() if n.rsplit(".", 1)[-1] in experts)
    warn(f"mens: warning: QLoRA quantises this MoE base's linear layers to NF4; bitsandbytes leaves its fused "
         f"experts ({', '.join(experts)}: {kept / max(total, 1):.0%} of the weights) unquantised, so the base takes "
         "about as much memory as for --backend lora")
    return f"{NF4} (linear layers; fused experts unquantised)"


@register("full")
def full(cfg: "TrainConfig", device: "torch.device", bf16: bool) -> Built:
    from mens.train.checkpoint import save_pretrained

    base, tokenizer, new_tokens, words = hf_base(cfg)  # every weight trains, the added rows too
    dtype = decide_precision(cfg, device.type, bf16).weights  # fp32 master weights unless --dtype names one
    model = load_for_training(base, device, dtype, tokenizer=tokenizer, words=words)
    return Built(model, tokenizer, dtype, save_pretrained, base=base, tokenizer_source=base.id,
                 added_tokens=tokenizer.convert_ids_to_tokens(new_tokens))


@register("scratch")
def scratch(cfg: "TrainConfig", device: "torch.device", bf16: bool) -> Built:
    from mens.train.model import name_the_loss
    from mens.train.scratch import build_model_and_tokenizer, train_bpe_tokenizer, training_texts

    shape = cfg.scratch_model_shape()
    tokenizer = train_bpe_tokenizer(training_texts(cfg.data_dir, cfg.raw_text, cfg.curriculum_data), cfg.scratch_vocab,
                                    spaces=cfg.scratch_bpe_spaces) if cfg.scratch_vocab else None
    model, tokenizer = build_model_and_tokenizer(shape, cfg.seed, tokenizer)
    added = set_chat_template(tokenizer, cfg.chat_template, "--chat-template") if cfg.chat_template else []
    fit_embeddings(model, tokenizer)  # its tokenizers speak ChatML already; a template file may add markers
    dtype = decide_precision(cfg, device.type, bf16).weights  # `--dtype bf16` means bf16 weights, as for `full`
    model.to(device=device, dtype=dtype)
    model.config.use_cache = False
    name_the_loss(model)
    check_bench_fits(cfg, tokenizer, max_positions(model.config), "--scratch-positions")  # (--seq-len: config.py)
    return Built(model, tokenizer, dtype, save_scratch,
                 tokenizer_source=f"byte-level BPE, {cfg.scratch_vocab} ids, learned from the training data"
                 if cfg.scratch_vocab else "mens.train.vox_tokenizer", scratch_shape=shape.to_dict(),
                 added_tokens=added)


def save_scratch(run_dir: Path, model, tokenizer, weights: dict | None = None) -> None:
    """A scratch model is saved as a standard HF directory with its generation config."""
    from mens.train.scratch import save_scratch_model

    save_scratch_model(model, tokenizer, run_dir, state_dict=weights)
