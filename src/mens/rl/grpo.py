"""`mens rl`: GRPO with rewards from the language pack, on TRL's GRPOTrainer.

Per step, `prompts_per_step` prompts are each sampled `num_generations` times; every completion
is scored by the weighted rewards of mens.rl.rewards (each also logged on its own as
`rewards_<name>`); a completion's advantage is its reward minus its group's mean, over the
group's standard deviation; the loss is the clipped policy-gradient surrogate (`epsilon`) plus
`beta` × KL to the start model (the reference, mens.rl.run). Telemetry's step events carry
`reward`, `reward_std`, `kl`, each `rewards_<name>` and the clip ratios beside the loss.

Prompt rows (JSONL): `{prompt, lang?, expect_contains?, tests?, id?}` — bench-style task files
and pair files both fit. No held-out bench task may be among them (`bench`: the contamination
check runs on the file and any overlap is refused).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from mens.errors import MensError, did_you_mean
from mens.files import release_lock
from mens.rl.checks import Checker, is_number, known_keys
from mens.rl import run as rl_run
from mens.rl.rewards import DEFAULT_WEIGHTS, NAMES, batch_reward, tests_source
from mens.rl.sandbox import Limits


@dataclass
class RlOptions:
    rewards: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    steps: int = 50
    learning_rate: float = 5e-5
    prompts_per_step: int = 2
    num_generations: int = 4
    max_completion_length: int = 256
    temperature: float = 1.0
    beta: float = 0.04           # KL to the start model
    epsilon: float = 0.2         # clipping of the probability ratio
    lora_r: int = 16
    lora_alpha: int = 32
    train_lm_head: bool = False  # the output head trains in full beside the LoRA (all-linear leaves it out)
    seed: int = 0
    save_steps: int = 25
    device: str = "cpu"
    sandbox_timeout_s: float = 5.0
    sandbox_memory_mb: int = 512

    def check(self, where: str = "rl config", flags: dict[str, str] | None = None) -> "RlOptions":
        """Every field's value (mens.rl.checks); `flags`: field → the flag that set it."""
        c = Checker(self, where, flags)
        c.whole("steps", "prompts_per_step", "max_completion_length", "lora_r", "lora_alpha", "save_steps",
                "sandbox_memory_mb")
        if not isinstance(self.num_generations, int) or isinstance(self.num_generations, bool) \
                or self.num_generations < 2:
            raise c.fail("num_generations", f"num_generations must be 2 or more, got {self.num_generations!r}",
                         "GRPO compares samples within a group: give 2 or more")
        c.positive("learning_rate", "temperature", "sandbox_timeout_s")
        c.not_negative("beta", "epsilon")
        c.boolean("train_lm_head")
        c.seed()
        c.choice("device", ("auto", "cpu", "cuda"))
        check_rewards(self.rewards, where)
        return self


def check_rewards(rewards: Any, where: str) -> None:
    """A mapping of known reward names to weights ≥ 0, at least one above 0."""
    if not isinstance(rewards, dict) or not rewards:
        raise MensError(f"rewards must map reward names to weights, got {rewards!r}", where,
                        "e.g. rewards: {parses: 1.0, not_stub: 0.5}")
    for name, w in rewards.items():
        if name not in NAMES:
            raise MensError(f"unknown reward {name!r}", where, did_you_mean(name, NAMES, f"use {', '.join(NAMES)}"))
        if not is_number(w) or w < 0:
            raise MensError(f"reward weight of {name} must be a number, 0 or more, got {w!r}", where,
                            f"give {name} a weight such as 1.0 (0 turns it off)")
    if not any(rewards.values()):
        raise MensError("every reward weight is 0", where, "give at least one reward a positive weight")


# The flags of `mens rl` that set an RlOptions field (mens.flags: TRL's spellings are accepted too).
FLAGS = {"steps": "--max-steps", "learning_rate": "--lr", "num_generations": "--samples",
         "max_completion_length": "--max-new-tokens", "save_steps": "--save-interval", "seed": "--seed",
         "device": "--device"}


def read_config(path: str | Path | None, overrides: dict[str, Any]) -> RlOptions:
    """RlOptions from rl.yaml (keys = the field names), then the flags given (not None); checked."""
    from mens.files import read_yaml

    data: dict[str, Any] = {}
    if path is not None:
        data = read_yaml(path, "rl config", "write a mapping of RlOptions fields (docs/rl.md)") or {}
        if not isinstance(data, dict):
            raise MensError("the rl config must be a mapping", str(path), "write `key: value` lines (docs/rl.md)")
        data = known_keys(data, RlOptions, str(path))
    given = {k: v for k, v in overrides.items() if v is not None}
    data.update(given)
    return RlOptions(**data).check(str(path) if path else "flags", {k: FLAGS.get(k, k) for k in given})


def read_prompt_rows(path: str | Path, bench: str | Path | None = None) -> list[dict[str, Any]]:
    """Rows for the trainer: prompt as a user turn, lang, expect_contains, tests (one type each)."""
    from mens.corpus.prefs import read_numbered_prompts

    numbered = read_numbered_prompts(path)
    if bench is not None:
        from mens.evaluate.contamination import find_contamination

        hits = find_contamination(bench, [path])["hits"]
        if hits:
            raise MensError(f"the prompts hold held-out bench task {hits[0]['id']!r} ({len(hits)} overlap(s))",
                            hits[0]["where"], "remove bench tasks from the prompts: RL on them measures memory")
    from mens.lang import get_pack

    out, packs = [], {}
    for i, (line, row) in enumerate(numbered, 1):
        where = f"{path}:{line}"
        needles = row.get("expect_contains") or []
        if not isinstance(needles, list) or not all(isinstance(n, str) for n in needles):
            raise MensError(f"'expect_contains' of prompt row {i} must be a list of strings, got {needles!r}", where,
                            "e.g. \"expect_contains\": [\"def add\"]")
        tests, lang = row.get("tests"), row.get("lang") or "vox"
        if tests is not None and not isinstance(tests, (str, list)):
            raise MensError(f"'tests' of prompt row {i} must be a string or a list of statements, got {tests!r}",
                            where, "fix the row")
        if not isinstance(lang, str):
            raise MensError(f"'lang' of prompt row {i} must be a language name, got {lang!r}", where,
                            "e.g. \"lang\": \"python\" (default vox)")
        if lang not in packs:  # an unknown language now, not at the first reward after the model loads
            try:
                packs[lang] = get_pack(lang)
            except MensError as err:
                raise MensError(f"prompt row {i}: {err.what}", where, err.todo or "fix its 'lang'") from None
        out.append({"prompt": [{"role": "user", "content": row["prompt"]}], "lang": lang,
                    "expect_contains": needles, "tests": tests_source(tests)})
    return out


def grpo(model: str, prompts: str | Path, output_dir: str | Path, opts: RlOptions = RlOptions(), *,
         bench: str | Path | None = None, force_restart: bool = False,
         extra_rewards: dict[str, tuple[Callable, float]] | None = None, callbacks: list | None = None):
    """Train; returns TRL's trainer. `extra_rewards`: name → (TRL-shaped callable, weight), for
    rewards beyond mens's own (the tests' toy task)."""
    opts = replace(opts, device=rl_run.pick_device(opts.device))
    rows = read_prompt_rows(prompts, bench)
    if len(rows) < opts.prompts_per_step:  # TRL would drop the short batch and train 0 steps
        raise MensError(f"{len(rows)} prompt(s), fewer than prompts_per_step ({opts.prompts_per_step}): no step "
                        "would train", str(prompts), "add prompts, or set prompts_per_step lower in the rl config")
    from mens.positions import check_generation_fits, source_positions, source_tokenizer

    # GRPO samples each prompt whole (TRL cuts none) and --max-new-tokens more: past the positions that
    # is an IndexError in the position embedding after the model has loaded (issue 36).
    check_generation_fits(source_tokenizer(model), [r["prompt"][0]["content"] for r in rows],
                          positions=source_positions(model), new_tokens=opts.max_completion_length,
                          flag=FLAGS["max_completion_length"], where=str(model))
    from datasets import Dataset  # after the checks: TRL takes seconds to import
    from trl import GRPOConfig

    from mens.rl.sampler import grpo_trainer_class

    limits = Limits(timeout_s=opts.sandbox_timeout_s, memory_mb=opts.sandbox_memory_mb)
    funcs = [batch_reward(n, limits) for n, w in opts.rewards.items() if w]
    weights = [float(w) for w in opts.rewards.values() if w]
    for name, (func, w) in (extra_rewards or {}).items():
        func.__name__ = name
        funcs.append(func)
        weights.append(float(w))
    run, resume = rl_run.open_run(output_dir, force_restart, start=model)
    try:
        start = rl_run.load_start(model, opts.device)
        if force_restart:  # only now: a --model that does not load must not cost the earlier run
            rl_run.start_fresh(run)
        args = GRPOConfig(**rl_run.trainer_args(run, steps=opts.steps, lr=opts.learning_rate,
                                                batch_size=opts.prompts_per_step * opts.num_generations, seed=opts.seed,
                                                save_steps=opts.save_steps, device=opts.device),
                          num_generations=opts.num_generations, max_completion_length=opts.max_completion_length,
                          temperature=opts.temperature, top_p=1.0, beta=opts.beta, epsilon=opts.epsilon,
                          reward_weights=weights, loss_type="grpo", scale_rewards="group", disable_dropout=True,
                          log_completions=False)
        trainer = grpo_trainer_class()(model=start.model, reward_funcs=funcs, args=args,
                                       train_dataset=Dataset.from_list(rows),
                                       processing_class=start.tokenizer,
                                       peft_config=rl_run.lora_config(start.model, opts.lora_r, opts.lora_alpha,
                                                                      train_lm_head=opts.train_lm_head),
                                       callbacks=[rl_run.telemetry_callback(run, "grpo"), *(callbacks or [])])
        rl_run.quiet(trainer)
        began = rl_run.clock()
        trained = rl_run.train(trainer, resume, opts.steps)
        if trainer.state.global_step >= opts.steps and (trained or not rl_run.saved(run)):
            rl_run.save_run(run, trainer, start, method="grpo", data=Path(prompts), hyper=asdict(opts), seed=opts.seed,
                            device=opts.device, wall=rl_run.clock() - began)
        return trainer
    finally:  # open_run's lock on the run dir
        release_lock(run)
