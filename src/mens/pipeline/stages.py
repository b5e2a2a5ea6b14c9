"""The stages of `mens pipeline`: what each reads, writes and depends on, and the call that does
the work. Each `run` calls the stage's own Python function (the same one its CLI command wraps)
and returns a few key figures for the summary table.

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
from typing import Any, Callable

from mens.corpus.synth.words import MADE_UP_SHARE
from mens.errors import MensError
from mens.pipeline.judging import (bench_params, final_run, fine_tunes, model_files, policy, run_results,
                                   ship_params, stage_bench, stage_card, stage_gate, stage_report, stage_ship)
from mens.pipeline.runner import Context, Stage
from mens.pipeline.training import (after_sft, base_inputs, dpo_data, dpo_params, off, rl_params, scratch_inputs,
                                    scratch_params, stage_dpo, stage_rl, stage_scratch, stage_train, train_params)


def _langs(ctx: Context) -> list[str]:
    return list(ctx.section("corpus").get("langs") or [])


def _all_packs(ctx: Context) -> list[str]:
    from mens.lang import builtin_names

    return builtin_names() + [n for n in _langs(ctx) if n not in builtin_names()]


# ---------------------------------------------------------------- corpus

def _gather_sources(ctx: Context) -> list:
    from mens.corpus.installed import STDLIB, Source

    sec = ctx.section("gather")
    return ([Source(STDLIB)] if sec.get("stdlib", True) else []) + \
        [Source.parse(p, "pipeline config: gather.packages") for p in sec.get("packages") or []]


def _gather_params(ctx: Context) -> dict[str, Any]:
    """What was asked for and the versions installed now: an upgrade gathers again."""
    from mens.corpus.installed import source_versions, sources_dict

    sources = _gather_sources(ctx)
    return {"sources": sources_dict(sources), "versions": source_versions(sources),
            "max_file_bytes": int(ctx.section("gather").get("max_file_bytes", 400_000))}


def _gather(ctx: Context) -> dict[str, Any]:
    from mens.corpus.installed import gather

    rep = gather(_gather_sources(ctx), ctx.work_file("sources"), max_file_bytes=_gather_params(ctx)["max_file_bytes"])
    return {"files": rep.counts["files"], "MB": round(rep.counts["bytes"] / 1e6, 1)}


def _sources(ctx: Context) -> list[Path]:
    sources = ctx.section("corpus").get("sources") or []
    if not sources:
        raise MensError("no corpus sources", "pipeline config: corpus.sources", "list source and docs folders")
    return [ctx.path(s) for s in sources]


def _extract(ctx: Context) -> dict[str, Any]:
    from mens.corpus.extract import extract

    rep = extract(_sources(ctx), ctx.work_file("corpus", "units.jsonl"), langs=_langs(ctx))
    return {"units": rep.counts["units"], "files": rep.counts["files_used"]}


def _pairs(ctx: Context) -> dict[str, Any]:
    from mens.corpus.pairs import make_pairs

    rep = make_pairs(ctx.work_file("corpus", "units.jsonl"), ctx.work_file("corpus", "pairs.jsonl"),
                     seed=int(ctx.config.get("seed", 0)))
    return {"pairs": rep.counts["pairs"]}


def _validate(ctx: Context) -> dict[str, Any]:
    from mens.corpus.validate import validate

    rep = validate(ctx.work_file("corpus", "pairs.jsonl"), ctx.work_file("corpus", "pairs.valid.jsonl"),
                   quarantine=ctx.work_file("corpus", "quarantine.jsonl"))
    return {"kept": rep.counts["kept"], "rejected": rep.counts["rejected"]}


# generate_data keys that each write corpus/<key>.jsonl with mens.corpus.synth.drills.<key>
DRILL_KINDS = ("copy_drills", "code_drills")


def _gen_params(ctx: Context) -> dict[str, Any]:
    sec = ctx.section("generate_data")
    params = {"count": int(sec.get("count", 0)), "seed": int(sec.get("seed", ctx.config.get("seed", 0)))}
    for kind in DRILL_KINDS:  # absent at 0, so earlier configs keep their fingerprint
        if sec.get(kind):
            params[kind] = int(sec[kind])
    if sec.get("english_names"):  # absent at 0, so earlier configs keep their fingerprint
        params["english_names"] = float(sec["english_names"])
    if sec.get("drill_english_names") is not None:  # absent: the drills take english_names, as before
        params["drill_english_names"] = float(sec["drill_english_names"])
    if sec.get("made_up_names") is not None and float(sec["made_up_names"]) != MADE_UP_SHARE:  # likewise
        params["made_up_names"] = float(sec["made_up_names"])
    if sec.get("made_up_subjects"):  # absent at 0, likewise
        params["made_up_subjects"] = float(sec["made_up_subjects"])
    if sec.get("lang", "vox") != "vox":  # absent for Vox, likewise
        params["lang"] = str(sec["lang"])
    return params


def _gen_outputs(ctx: Context) -> list[Path]:
    params = _gen_params(ctx)
    return [ctx.work_file("corpus", "synthetic.jsonl")] + \
        [ctx.work_file("corpus", f"{kind}.jsonl") for kind in DRILL_KINDS if params.get(kind)]


def _generate(ctx: Context) -> dict[str, Any]:
    from mens.corpus.synth import drills
    from mens.corpus.synth.generate import SynthStats, generate
    from mens.files import write_jsonl_atomic

    p = _gen_params(ctx)
    stats = SynthStats()
    english = p.get("english_names", 0.0)
    n = write_jsonl_atomic(ctx.work_file("corpus", "synthetic.jsonl"),
                           generate(p["count"], p["seed"], stats=stats, english_names=english,
                                    made_up_names=p.get("made_up_names", MADE_UP_SHARE),
                                    made_up_subjects=p.get("made_up_subjects", 0.0), lang=p.get("lang", "vox")))
    made = {"rows": n}
    drill_english = p.get("drill_english_names", english)
    for kind in DRILL_KINDS:  # a scratch base's curriculum (scratch.curriculum_data)
        if p.get(kind):
            write_jsonl_atomic(ctx.work_file("corpus", f"{kind}.jsonl"),
                               getattr(drills, kind)(p[kind], p["seed"], drill_english))
            made[kind] = p[kind]
    return made


# ---------------------------------------------------------------- data

def _mix_sources(ctx: Context) -> list[dict[str, Any]]:
    sec = ctx.section("mix")
    sources = sec.get("sources") or [{"path": "{work_dir}/corpus/pairs.valid.jsonl"},
                                     {"path": "{work_dir}/corpus/synthetic.jsonl", "optional": True}]
    out = []
    for src in sources:
        src = {"path": src} if isinstance(src, str) else dict(src)
        src["path"] = str(ctx.path(src["path"]).resolve())
        out.append(src)
    return out


def _mix_params(ctx: Context) -> dict[str, Any]:
    sec = dict(ctx.section("mix"))
    sec["sources"] = _mix_sources(ctx)
    sec.setdefault("seed", int(ctx.config.get("seed", 0)))
    return sec


def _mix(ctx: Context) -> dict[str, Any]:
    from mens.corpus.mix import mix_pairs, parse_config

    # The `mix` section is a mix.yaml minus `output`: validated by the same parser, handed over
    # as a MixConfig. The mix report beside train.jsonl records the spec it was made from.
    where = "pipeline config: mix"
    spec = {**_mix_params(ctx), "output": str(ctx.work_file("data", "train.jsonl").resolve())}
    rep = mix_pairs(parse_config(spec, ctx.work_file("data"), where), where=where)
    return {"rows": rep.counts["output_rows"]}


def _eval(ctx: Context) -> dict[str, Any]:
    from mens.corpus.evaluate import evaluate

    res = evaluate(ctx.work_file("data", "train.jsonl"), ctx.work_file("data", "eval_results.json"))
    return {"parse_rate": res["parse_rate"], "coverage_pct": res["construct_coverage_pct"]}



# The mens code each stage's outputs depend on (its fingerprint hashes their sources). The corpus
# stages' reports carry fingerprint blocks, so the fingerprint module is part of their code.
_CORPUS = ("mens.corpus", "mens.records", "mens.files", "mens.pipeline.fingerprint")
_TRAIN = ("mens.train", "mens.records", "mens.files", "mens.hf", "mens.chat_template")
_EVALUATE = ("mens.evaluate",)
_RL = ("mens.rl", "mens.hf", "mens.chat_template", "mens.records", "mens.files")



def _at(*parts: str) -> Callable[[Context], list[Path]]:
    """A stage's one file under the work dir, as `inputs`/`outputs` take it."""
    return lambda ctx: [ctx.work_file(*parts)]


STAGES: list[Stage] = [
    Stage("gather", inputs=lambda c: [], outputs=_at("sources", "SOURCES.json"), run=_gather, params=_gather_params,
          code=_CORPUS, needed=lambda c: None if "gather" in c.config else "no `gather:` section",
          help="this Python's own code (standard library, packages) → sources/"),
    Stage("extract", inputs=_sources, outputs=_at("corpus", "units.jsonl"), run=_extract,
          params=lambda c: {"langs": _langs(c)}, packs=_all_packs, code=_CORPUS,
          help="split sources and docs into units (language packs)"),
    Stage("pairs", inputs=_at("corpus", "units.jsonl"), outputs=_at("corpus", "pairs.jsonl"),
          run=_pairs, params=lambda c: {"seed": int(c.config.get("seed", 0))}, code=_CORPUS,
          help="units → instruction pairs"),
    Stage("validate", inputs=_at("corpus", "pairs.jsonl"),
          outputs=_at("corpus", "pairs.valid.jsonl"), run=_validate, packs=_all_packs, code=_CORPUS,
          help="parse, dedupe, quarantine"),
    Stage("generate-data", inputs=lambda c: [], outputs=_gen_outputs, run=_generate,
          params=_gen_params, packs=lambda c: [_gen_params(c).get("lang", "vox")], code=_CORPUS,
          needed=lambda c: None if _gen_params(c)["count"] > 0 else "generate_data.count is 0",
          help="synthetic Vox (or Python) pairs that parse"),
    Stage("mix", inputs=lambda c: [Path(s["path"]) for s in _mix_sources(c)],
          outputs=_at("data", "train.jsonl"), run=_mix, params=_mix_params, code=_CORPUS,
          help="weighted mix → train.jsonl"),
    Stage("eval", inputs=_at("data", "train.jsonl"), outputs=_at("data", "eval_results.json"),
          run=_eval, packs=_all_packs, code=_CORPUS, help="corpus parse rate and coverage"),
    Stage("train-scratch-base", inputs=scratch_inputs,
          outputs=_at("base", "config.json"), run=stage_scratch, params=scratch_params,
          needed=lambda c: f"--model {c.model} is fine-tuned instead" if c.model else None, code=_TRAIN,
          help="tiny model from scratch (VoxTokenizer)"),
    Stage("train", inputs=lambda c: [c.work_file("data", "train.jsonl"), *base_inputs(c)],
          outputs=_at("run", "training_manifest.json"), run=stage_train, params=train_params, code=_TRAIN,
          needed=lambda c: None if fine_tunes(c) else "train: false (the scratch base is the model)",
          help="QLoRA fine-tune of the base"),
    Stage("dpo", inputs=lambda c: [*model_files(after_sft(c, "dpo")), dpo_data(c)],
          outputs=_at("dpo", "training_manifest.json"), run=stage_dpo, params=dpo_params, needed=off("dpo"),
          packs=_all_packs, code=_RL + ("mens.corpus",), help="preference training (DPO) on the corpus's fix pairs"),
    Stage("rl", inputs=lambda c: [*model_files(after_sft(c, "rl")), Path(rl_params(c)["prompts"])],
          outputs=_at("rl", "training_manifest.json"), run=stage_rl, params=rl_params, needed=off("rl"),
          packs=_all_packs, code=_RL + ("mens.evaluate",), help="GRPO with the language pack's rewards"),
    Stage("bench", inputs=lambda c: [*model_files(final_run(c)), c.path(bench_params(c)["path"]), *base_inputs(c)],
          outputs=lambda c: run_results(c, "benchmark_results.json"), run=stage_bench, params=bench_params,
          packs=_all_packs, code=_EVALUATE + ("mens.inference", "mens.hf", "mens.chat_template"), help="held-out bench pass@k"),
    Stage("gate", inputs=lambda c: [c.work_file("data", "eval_results.json"), policy(c),
                                    *run_results(c, "training_manifest.json", "telemetry.jsonl",
                                                 "benchmark_results.json")],
          outputs=lambda c: run_results(c, "gate_receipt.json", "eval_results.json"), run=stage_gate, code=_EVALUATE,
          help="promotion gates"),
    Stage("card", inputs=lambda c: run_results(c, "training_manifest.json", "eval_results.json",
                                                "benchmark_results.json", "gate_receipt.json"),
          outputs=lambda c: run_results(c, "MODEL_CARD.md"), run=stage_card, code=_EVALUATE, help="MODEL_CARD.md"),
    Stage("report", inputs=lambda c: run_results(c, "training_manifest.json", "telemetry.jsonl", "eval_results.json",
                                                  "benchmark_results.json", "gate_receipt.json"),
          outputs=lambda c: run_results(c, "report.html"), run=stage_report, code=_EVALUATE, help="HTML report"),
    Stage("ship", inputs=lambda c: [*model_files(final_run(c)), *run_results(c, "MODEL_CARD.md")],
          outputs=lambda c: [Path(ship_params(c)["to"]) / "SHA256SUMS"], run=stage_ship, params=ship_params,
          needed=lambda c: None if "ship" in c.config else "no `ship:` section",
          code=("mens.export", "mens.hf", "mens.pipeline"), help="the judged model as a folder to hand out"),
]
