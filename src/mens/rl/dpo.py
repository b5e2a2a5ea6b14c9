"""`mens dpo`: preference training on `prefs.jsonl` (`mens corpus prefs`) with TRL's DPOTrainer.

Rows `{prompt, chosen, rejected}` become chat turns (user prompt, assistant answer), so TRL
applies the model's chat template — the same one `mens train` trained with and `mens bench`
prompts with. The loss is TRL's sigmoid DPO loss, −log σ(β·[(log π − log π_ref)(chosen) −
(log π − log π_ref)(rejected)]); the reference is the start model (mens.rl.run). Telemetry's
step events carry `rewards_chosen`, `rewards_rejected`, `rewards_margins` (β-scaled log-ratio
gap) and `rewards_accuracies` beside the loss.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from mens.errors import MensError
from mens.files import release_lock
from mens.records import iter_jsonl
from mens.rl.checks import Checker
from mens.rl import run as rl_run

PREFS = "prefs.jsonl"


@dataclass
class DpoOptions:
    steps: int = 40
    learning_rate: float = 5e-4
    beta: float = 0.1
    batch_size: int = 4
    lora_r: int = 8
    lora_alpha: int = 16
    max_length: int = 512
    seed: int = 0
    save_steps: int = 20
    device: str = "cpu"

    def check(self, where: str = "dpo options", flags: dict[str, str] | None = None) -> "DpoOptions":
        """Every field's value (mens.rl.checks); `flags`: field → the flag that set it."""
        c = Checker(self, where, flags)
        c.whole("steps", "batch_size", "lora_r", "lora_alpha", "max_length", "save_steps")
        c.positive("learning_rate", "beta")
        c.seed()
        c.choice("device", ("auto", "cpu", "cuda"))
        return self


# The flags of `mens dpo` that set a DpoOptions field (lora_alpha is 2 × --lora-r).
FLAGS = {"steps": "--max-steps", "learning_rate": "--lr", "beta": "--beta", "batch_size": "--micro-batch",
         "lora_r": "--lora-r", "lora_alpha": "--lora-r", "max_length": "--seq-len", "seed": "--seed",
         "save_steps": "--save-interval", "device": "--device"}


def prefs_path(data: str | Path) -> Path:
    """DIR/prefs.jsonl for a directory, else the file itself."""
    data = Path(data)
    path = data / PREFS if data.is_dir() else data
    if not path.is_file():
        raise MensError("preference file not found", str(path), "build it with `mens corpus prefs … -o DIR/prefs.jsonl`")
    return path


def read_prefs(path: str | Path) -> list[dict[str, Any]]:
    """Rows with string prompt, chosen and rejected (chosen ≠ rejected), as chat turns."""
    rows = []
    for lineno, obj in iter_jsonl(path, has_lenient=False):
        where = f"{path}:{lineno}"
        if not isinstance(obj, dict):
            raise MensError(f"a preference row must be a JSON object, got {type(obj).__name__}", where,
                            "build it with `mens corpus prefs`")
        for key in ("prompt", "chosen", "rejected"):
            if key not in obj:
                raise MensError(f"field '{key}' is missing (a preference row needs prompt, chosen and rejected)",
                                where, "build it with `mens corpus prefs`")
            if not isinstance(obj[key], str) or not obj[key].strip():
                raise MensError(f"field '{key}' must be a non-empty string, got {_kind(obj[key])}", where,
                                "build it with `mens corpus prefs`")
        if obj["chosen"] == obj["rejected"]:
            raise MensError("'chosen' and 'rejected' are the same text", where, "drop the row")
        rows.append({"prompt": [{"role": "user", "content": obj["prompt"]}],
                     "chosen": [{"role": "assistant", "content": obj["chosen"]}],
                     "rejected": [{"role": "assistant", "content": obj["rejected"]}]})
    if not rows:
        raise MensError("no preference rows", str(path), "build them with `mens corpus prefs`")
    return rows


def _kind(value: Any) -> str:
    return "an empty string" if isinstance(value, str) else "null" if value is None else type(value).__name__


def dpo(model: str, data: str | Path, output_dir: str | Path, opts: DpoOptions = DpoOptions(),
        force_restart: bool = False, callbacks: list | None = None):
    """Train; returns TRL's trainer (its `state.log_history` holds every logged figure)."""
    from mens.positions import check_length, source_positions

    opts = replace(opts, device=rl_run.pick_device(opts.device))
    path = prefs_path(data)
    rows = read_prefs(path)
    check_length(opts.max_length, source_positions(model), FLAGS["max_length"], model)
    from datasets import Dataset  # after the checks: TRL takes seconds to import
    from trl import DPOConfig, DPOTrainer

    run, resume = rl_run.open_run(output_dir, force_restart, start=model)
    try:
        start = rl_run.load_start(model, opts.device)
        if force_restart:  # only now: a --model that does not load must not cost the earlier run
            rl_run.start_fresh(run)
        args = DPOConfig(**rl_run.trainer_args(run, steps=opts.steps, lr=opts.learning_rate, batch_size=opts.batch_size,
                                               seed=opts.seed, save_steps=opts.save_steps, device=opts.device),
                         beta=opts.beta, max_length=opts.max_length, loss_type=["sigmoid"], disable_dropout=True)
        trainer = DPOTrainer(model=start.model, args=args, train_dataset=Dataset.from_list(rows),
                             processing_class=start.tokenizer, peft_config=rl_run.lora_config(start.model, opts.lora_r, opts.lora_alpha),
                             callbacks=[rl_run.telemetry_callback(run, "dpo"), *(callbacks or [])])
        rl_run.quiet(trainer)
        began = rl_run.clock()
        trained = rl_run.train(trainer, resume, opts.steps)
        if trainer.state.global_step >= opts.steps and (trained or not rl_run.saved(run)):
            rl_run.save_run(run, trainer, start, method="dpo", data=path, hyper=asdict(opts), seed=opts.seed,
                            device=opts.device, wall=rl_run.clock() - began)
        return trainer
    finally:  # open_run's lock on the run dir
        release_lock(run)
