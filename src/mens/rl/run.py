"""What `mens dpo` and `mens rl` share: the start model, the run directory and its telemetry.

The start model (`--model`) is a run dir or a model dir:
- a model dir (or a full-weight / scratch run): a fresh LoRA trains over it, and the reference
  (DPO's and GRPO's KL anchor) is the same model with the adapter switched off — TRL's own way;
  the output is a PEFT adapter over that model, as `mens train --backend lora` writes;
- an adapter run (`mens train`'s LoRA/QLoRA): its adapter is merged into its base in memory, so
  the reference is exactly the start model, and a fresh LoRA trains over that; the output is
  full weights (the new adapter merged too), since the merged start exists nowhere on disk.

Either way the run directory is the one `mens train` writes — weights or adapter, tokenizer,
`training_manifest.json` (with `method: dpo|grpo`), `telemetry.jsonl`, `MODEL_CARD.md` — so
bench, gate, merge, serve and report read it unchanged. TRL's checkpoints live in
`RUN/trl-checkpoints/checkpoint-N` (model, optimizer, scheduler, RNG and data position): a rerun
resumes from the newest, which TRL's Trainer restores exactly.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mens.files import hold_lock
from mens.chat_template import ensure_chat_template, generation_config
from mens.hf import adapter_base, is_adapter_run, load_tokenizer, resolve_base

CHECKPOINTS = "trl-checkpoints"


@dataclass
class Start:
    model: Any              # the plain (merged) start model, float32, train mode
    tokenizer: Any
    base: Any               # BaseModelInfo the output adapter sits on (None: output full weights)
    source: str             # what --model named
    chat: str               # "template" or "chatml"


def load_start(source: str, device: str = "cpu") -> Start:
    """The start model and tokenizer (see the module doc)."""
    import torch
    from transformers import AutoModelForCausalLM

    if is_adapter_run(source):
        from mens.inference import load_peft  # grows the base's embeddings to a run that added tokens

        base_dir = adapter_base(source)
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
        model = load_peft(model, source).merge_and_unload()
        tokenizer, base = load_tokenizer(source, base_dir), None
    else:
        base = resolve_base(source)
        model = AutoModelForCausalLM.from_pretrained(base.source, dtype=torch.float32)
        tokenizer = load_tokenizer(base.source)
    chat = ensure_chat_template(tokenizer)
    model.generation_config = generation_config(model, tokenizer)
    if device == "cuda":  # under torchrun each rank's copy goes to its own GPU, not all to cuda:0
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return Start(model.to(device), tokenizer, base, source, chat)


def lora_config(model, r: int, alpha: int, dropout: float = 0.0, train_lm_head: bool = False):
    """A LoRA on every linear layer but the output head (and an MoE base's routers; its fused
    experts through PEFT's parameter targeting), as `mens train` targets; with `train_lm_head` the
    output head `lm_head` trains in full beside it (PEFT's `modules_to_save`; saved in the
    adapter). TRL's GRPO computes log-probabilities from `lm_head.weight` itself, so a LoRA *on*
    the head would never train; a trained copy of the head does, and it lets a small model move
    its token distribution directly (RlOptions.train_lm_head)."""
    from mens.train.family import default_lora_config

    # mens train's rule, not PEFT's own "all-linear": on an MoE base PEFT's would adapt the router
    return default_lora_config(model, r, alpha, dropout, modules_to_save=["lm_head"] if train_lm_head else None)


def open_run(output_dir: str | Path, force_restart: bool, start: str | Path | None = None) -> tuple[Path, str | None]:
    """The run dir, and the newest TRL checkpoint to resume from (None: start fresh). It is new,
    empty, or a run (mens's manifest, or this command's telemetry or checkpoints), and not the
    start model (`start`) itself."""
    from mens.train.preflight import check_run_dir

    run = check_run_dir(output_dir, markers=("training_manifest.json", "telemetry.jsonl", CHECKPOINTS), model=start)
    if main_rank():  # one process writes a run dir (files.hold_lock); dpo()/grpo() release it
        hold_lock(run, "run directory")
    ckpts = run / CHECKPOINTS
    run.mkdir(parents=True, exist_ok=True)
    if force_restart:  # the earlier run is cleared by start_fresh, once the start model has loaded
        return run, None
    found = sorted(ckpts.glob("checkpoint-*"), key=lambda p: int(p.name.rsplit("-", 1)[1])) if ckpts.is_dir() else []
    return run, (str(found[-1]) if found else None)


def start_fresh(run: Path) -> None:
    """--force-restart: the earlier run's artifacts go (its TRL checkpoints, telemetry, final model
    and the verdicts on it: mens.train.checkpoint.clear_earlier_run) — called once the start
    model has loaded (and before the telemetry file is opened), so a mistake found while loading
    (a bad --model) does not cost them. Under torchrun rank 0 clears; no rank reads the
    checkpoints before the first save."""
    from mens.train.checkpoint import clear_earlier_run

    if main_rank():
        clear_earlier_run(run, checkpoints=CHECKPOINTS)


def world_size() -> int:
    """The number of torchrun ranks (1 without torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def main_rank() -> bool:
    """Whether this process writes the run dir: rank 0 under torchrun (TRL's trainers run data
    parallel there through accelerate, which reads torchrun's environment), else always."""
    return int(os.environ.get("RANK", "0")) == 0


def telemetry_callback(run: Path, method: str):
    """A TrainerCallback writing TRL's logs to `RUN/telemetry.jsonl` as mens events: `step` with
    the loss and every reward / margin / KL figure (`rewards/margins` → `rewards_margins`,
    `rewards/parses/mean` → `rewards_parses`), `checkpoint`, `train_start`, `train_end`. Under
    torchrun only rank 0 writes (TRL's logged figures are already gathered over the ranks)."""
    from transformers import TrainerCallback

    from mens.train.telemetry import Telemetry

    class Nothing:  # another rank's telemetry
        def event(self, *args, **fields):
            pass

        def close(self):
            pass

    class ToTelemetry(TrainerCallback):
        def __init__(self):
            self.telemetry = Telemetry.for_run(run, []) if main_rank() else Nothing()
            self.last: dict[str, float] = {}

        def on_train_begin(self, args, state, control, **kw):
            self.telemetry.event("train_start", state.global_step, method=method, max_steps=state.max_steps)

        def on_log(self, args, state, control, logs=None, **kw):
            fields = {_key(k): v for k, v in (logs or {}).items() if isinstance(v, (int, float))}
            if "train_runtime" in fields:
                return
            self.last = fields
            self.telemetry.event("step", state.global_step, total_steps=state.max_steps, **fields)

        def on_save(self, args, state, control, **kw):
            self.telemetry.event("checkpoint", state.global_step, path=f"{CHECKPOINTS}/checkpoint-{state.global_step}")

        def on_train_end(self, args, state, control, **kw):
            self.telemetry.event("train_end", state.global_step, **self.last)
            self.telemetry.close()

    return ToTelemetry()


def _key(name: str) -> str:
    return name.removesuffix("/mean").replace("/", "_")


def trainer_args(run: Path, *, steps: int, lr: float, batch_size: int, seed: int, save_steps: int,
                 device: str) -> dict[str, Any]:
    """The TrainingArguments fields both trainers take. The start model keeps fp32 weights; on a
    GPU with native bf16 the Trainer computes under bf16 autocast (as `mens train` does there)."""
    return dict(output_dir=str(run / CHECKPOINTS), max_steps=steps, learning_rate=lr, per_device_train_batch_size=batch_size,
                gradient_accumulation_steps=1, lr_scheduler_type="constant", warmup_steps=0, logging_steps=1,
                save_steps=save_steps, save_strategy="steps", seed=seed, data_seed=seed, report_to=[],
                use_cpu=device == "cpu", bf16=gpu_bf16(device), fp16=False, disable_tqdm=True, dataloader_num_workers=0,
                save_only_model=False, remove_unused_columns=False, **{checkpointing_field(): False})


def checkpointing_field() -> str:
    """TrainingArguments' name for activation checkpointing: `activation_checkpointing` since
    transformers renamed it (its old name `gradient_checkpointing` then warns, and TRL's configs
    default it to True, so it must be set), `gradient_checkpointing` before (the GPU image's 5.17)."""
    from dataclasses import fields

    from transformers import TrainingArguments

    names = {f.name for f in fields(TrainingArguments)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def train(trainer, resume: str | None, steps: int) -> bool:
    """`trainer.train` from `resume`; whether it trained. A checkpoint already at `steps` (the same
    command rerun on a finished run) is only loaded — weights and state — since HF's Trainer would
    run one step past max_steps on it and overwrite the finished run."""
    if resume is not None:
        from transformers import TrainerState

        state = TrainerState.load_from_json(str(Path(resume) / "trainer_state.json"))
        if state.global_step >= steps:
            trainer._load_from_checkpoint(resume)
            trainer.state = state
            return False
        load_indexed_cpu()
    trainer.train(resume_from_checkpoint=resume)
    return True


def load_indexed_cpu() -> None:
    """Let `torch.load` map to an indexed CPU device ("cpu:0"). Under torchrun on CPU, accelerate
    names each rank's device `cpu:N`, and transformers before ~5.20 (5.17 on the GPU machine's
    image) resumes the optimizer with `map_location=args.device`, which torch refuses ("don't
    know how to restore data location … (tagged with cpu:0)"); later versions pass plain "cpu".
    Through torch's own registry of storage locations, so no library code is patched."""
    import re

    import torch

    global _INDEXED_CPU
    if not _INDEXED_CPU:
        torch.serialization.register_package(
            11, lambda obj: None,  # tags nothing on save: torch's own tagger says "cpu"
            lambda obj, location: obj if re.fullmatch(r"cpu:\d+", location) else None)
        _INDEXED_CPU = True


_INDEXED_CPU = False


def saved(run: Path) -> bool:
    """Whether the run dir holds a completed run's manifest (its final weights were written)."""
    import json

    from mens.train.manifest import MANIFEST

    try:
        return json.loads((run / MANIFEST).read_text()).get("status") == "completed"
    except (OSError, ValueError, AttributeError):
        return False


def pick_device(device: str) -> str:
    """`auto` (as `mens train --device auto`): cuda where torch sees a GPU, else cpu; cpu and cuda as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def gpu_bf16(device: str) -> bool:
    """Whether training on `device` computes in bf16: a CUDA GPU with native bf16 (not a T4 or a
    V100, where torch would emulate it slowly). A CPU stays in fp32, as `mens train` does unless
    asked."""
    import torch

    return device == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)


def quiet(trainer):
    """No TRL/Trainer log dicts printed on stdout: the figures go to telemetry.jsonl."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    return trainer


def save_run(run: Path, trainer, start: Start, *, method: str, data: Path, hyper: dict[str, Any], seed: int,
             device: str, wall: float, status: str = "completed") -> None:
    """Weights (adapter, or full when the start was an adapter run), tokenizer, manifest, card;
    written by rank 0 alone under torchrun (the ranks' weights are the same: DDP)."""
    if not main_rank():
        return
    from mens.evaluate.card import write_card
    from mens.train.manifest import MANIFEST, Manifest, Results
    from mens.files import write_json_atomic

    model = trainer.model
    if start.base is None:  # the start was an adapter run: the output is the merged model
        model = model.merge_and_unload()
        model.generation_config = generation_config(model, start.tokenizer)
    model.save_pretrained(run)
    start.tokenizer.save_pretrained(run)
    state = trainer.state
    losses = [h["loss"] for h in state.log_history if "loss" in h]
    results = Results(steps=state.global_step, total_steps=state.max_steps, final_loss=losses[-1] if losses else None,
                      wall_time_s=round(wall, 3))
    manifest = Manifest(base_model=start.base.to_dict() if start.base else None,
                        backend="lora" if start.base else "full", quantization=None,
                        dtype="float32+bf16-autocast" if gpu_bf16(device) else "float32",
                        tokenizer={"chat_format": start.chat}, data={"path": str(data), "sha256": _sha256(data)},
                        hyperparameters=hyper, preset=None, seed=seed,
                        device={"type": device, **({"world_size": world_size()} if world_size() > 1 else {})},
                        provenance={"command": f"mens {'rl' if method == 'grpo' else method}", "start_model": start.source,
                                    "library": "trl"},
                        results=results, status=status)
    write_json_atomic(run / MANIFEST, {**manifest.to_dict(), "method": method})
    write_card(run)


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def clock() -> float:
    return time.monotonic()
