"""The stages of `mens pipeline`, in order: the corpus stages (each declared by its own module,
listed in mens.corpus.stages), then the training and judging ones declared here. Each `run`
calls the stage's own Python function (the same one its CLI command wraps) and returns a few key
figures for the summary table.

Work-dir layout (all under the config's `work_dir`, e.g. `out/quickstart/`):

    corpus/units.jsonl  pairs.jsonl  pairs.valid.jsonl  quarantine.jsonl  synthetic.jsonl
           copy_drills.jsonl / code_drills.jsonl (with generate_data.copy_drills / .code_drills: a
           scratch base's curriculum)
    data/train.jsonl (+ mix report)  eval_results.json
    base/   the tiny scratch base model (HF dir)      run/   the fine-tuned run (adapter, manifest,
    telemetry, eval/bench results, gate receipt, MODEL_CARD.md, report.html)
    dpo/  rl/   the optional `mens dpo` / `mens rl` runs (config sections `dpo:` / `rl:`), each over
    the one before it; the last run made is the one bench, gate, card and report judge
    corpus/prefs.jsonl   dpo's preference pairs (`mens corpus prefs` on pairs.valid.jsonl)
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from mens.corpus.stages import all_packs, corpus_stages
from mens.pipeline.judging import (BenchOptions, GateOptions, ShipOptions, bench_params, check_policy, final_run,
                                   fine_tunes, model_files, policy, run_results, ship_params, stage_bench, stage_card,
                                   stage_gate, stage_report, stage_ship)
from mens.pipeline.training import (after_sft, base_inputs, check_rl_section, check_training, dpo_data, dpo_params, off,
                                    rl_params, scratch_inputs, scratch_params, stage_dpo, stage_rl, stage_scratch,
                                    stage_train, train_params)
from mens.stage import Context, Stage

# The mens code each stage's outputs depend on (its fingerprint hashes their sources).
_TRAIN = ("mens.train", "mens.records", "mens.files", "mens.hf", "mens.chat_template")
_EVALUATE = ("mens.evaluate",)
_RL = ("mens.rl", "mens.hf", "mens.chat_template", "mens.records", "mens.files")


def _at(*parts: str) -> Callable[[Context], list[Path]]:
    """A stage's one file under the work dir, as `inputs`/`outputs` take it."""
    return lambda ctx: [ctx.work_file(*parts)]


def all_stages() -> list[Stage]:
    """Every stage in the order the pipeline runs them (what `--stages` picks from)."""
    return [*corpus_stages(), *MODEL_STAGES]


MODEL_STAGES: list[Stage] = [
    Stage("train-scratch-base", inputs=scratch_inputs,
          outputs=_at("base", "config.json"), run=stage_scratch, params=scratch_params,
          needed=lambda c: f"--model {c.model} is fine-tuned instead" if c.model else None, code=_TRAIN,
          section="scratch", check=check_training("scratch"),
          help="tiny model from scratch (VoxTokenizer)"),
    Stage("train", inputs=lambda c: [c.work_file("data", "train.jsonl"), *base_inputs(c)],
          outputs=_at("run", "training_manifest.json"), run=stage_train, params=train_params, code=_TRAIN,
          section="train", check=check_training("train"),
          needed=lambda c: None if fine_tunes(c) else "train: false (the scratch base is the model)",
          help="QLoRA fine-tune of the base"),
    Stage("dpo", inputs=lambda c: [*model_files(after_sft(c, "dpo")), dpo_data(c)],
          outputs=_at("dpo", "training_manifest.json"), run=stage_dpo, params=dpo_params, needed=off("dpo"),
          section="dpo", check=check_rl_section("dpo"),
          packs=all_packs, code=_RL + ("mens.corpus",), help="preference training (DPO) on the corpus's fix pairs"),
    Stage("rl", inputs=lambda c: [*model_files(after_sft(c, "rl")), Path(rl_params(c)["prompts"])],
          outputs=_at("rl", "training_manifest.json"), run=stage_rl, params=rl_params, needed=off("rl"),
          section="rl", check=check_rl_section("rl"),
          packs=all_packs, code=_RL + ("mens.evaluate",), help="GRPO with the language pack's rewards"),
    Stage("bench", inputs=lambda c: [*model_files(final_run(c)), c.path(bench_params(c)["path"]), *base_inputs(c)],
          outputs=lambda c: run_results(c, "benchmark_results.json"), run=stage_bench, params=bench_params,
          section="bench", options=BenchOptions,
          packs=all_packs, code=_EVALUATE + ("mens.inference", "mens.hf", "mens.chat_template"), help="held-out bench pass@k"),
    Stage("gate", inputs=lambda c: [c.work_file("data", "eval_results.json"), policy(c),
                                    *run_results(c, "training_manifest.json", "telemetry.jsonl",
                                                 "benchmark_results.json")],
          outputs=lambda c: run_results(c, "gate_receipt.json", "eval_results.json"), run=stage_gate, code=_EVALUATE,
          section="gate", options=GateOptions, preflight=check_policy,
          help="promotion gates"),
    Stage("card", inputs=lambda c: run_results(c, "training_manifest.json", "eval_results.json",
                                                "benchmark_results.json", "gate_receipt.json"),
          outputs=lambda c: run_results(c, "MODEL_CARD.md"), run=stage_card, code=_EVALUATE, help="MODEL_CARD.md"),
    Stage("report", inputs=lambda c: run_results(c, "training_manifest.json", "telemetry.jsonl", "eval_results.json",
                                                  "benchmark_results.json", "gate_receipt.json"),
          outputs=lambda c: run_results(c, "report.html"), run=stage_report, code=_EVALUATE, help="HTML report"),
    Stage("ship", inputs=lambda c: [*model_files(final_run(c)), *run_results(c, "MODEL_CARD.md")],
          outputs=lambda c: [Path(ship_params(c)["to"]) / "SHA256SUMS"], run=stage_ship, params=ship_params,
          section="ship", options=ShipOptions,
          needed=lambda c: None if "ship" in c.config else "no `ship:` section",
          code=("mens.export", "mens.hf", "mens.pipeline"), help="the judged model as a folder to hand out"),
]
