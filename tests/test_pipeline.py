"""`mens pipeline` on a small config: runs everything, reruns skipping everything, re-runs extract
and what depends on it after a source changes, plans with --dry-run, stops at a failure."""

import json
from pathlib import Path

import pytest
import yaml

from paths import EXAMPLES

VOX_A = """type Shape =
    | Circle(r: int)
    | Rect(w: int, h: int)

/// Area of a shape.
fn area(s: Shape) to int {
    match s {
        Circle(r) => 3 * r * r
        Rect(w, h) => w * h
    }
}
"""
VOX_B = """@table type Note {
    title: str
    body: str
}

fn add(a: int, b: int) to int {
    return a + b
}
"""
BENCH = [{"id": "b1", "category": "function", "prompt": "Write a Vox function that adds two ints.",
          "expect_contains": ["fn"], "context_files": []},
         {"id": "b2", "category": "type", "prompt": "Define a Vox ADT for shapes.",
          "expect_contains": ["type"], "context_files": []}]


@pytest.fixture
def project(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "shapes.vox").write_text(VOX_A)
    (tmp_path / "src" / "notes.vox").write_text(VOX_B)
    (tmp_path / "bench.jsonl").write_text("".join(json.dumps(b) + "\n" for b in BENCH))
    # Two optimizer steps need not lower the loss: only parse rate and a finite loss block here.
    policy = yaml.safe_load((EXAMPLES / "gates.yaml").read_text())
    for gate in policy["gates"]:
        gate["blocking"] = gate["metric"] in ("eval.parse_rate", "train.final_loss")
    (tmp_path / "gates.yaml").write_text(yaml.safe_dump(policy))
    config = {
        "work_dir": "work", "seed": 0,
        "corpus": {"sources": ["src"]},
        "generate_data": {"count": 30},
        "scratch": {"scratch_shape": "tiny", "max_steps": 3, "seq_len": 128, "eval_interval": 0, "save_interval": 0},
        "train": {"max_steps": 2, "seq_len": 128, "eval_interval": 0, "save_interval": 0},
        "bench": {"path": "bench.jsonl", "max_new_tokens": 8, "grammar": "vox"},
        "gate": {"policy": "gates.yaml"},
    }
    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump(config))
    return tmp_path


STAGE_NAMES = ["extract", "pairs", "validate", "generate-data", "mix", "eval", "train-scratch-base", "train",
               "bench", "gate", "card", "report"]


def _stages(err: str) -> dict[str, str]:
    """`[stage] status …` progress lines → {stage: first word of the status}."""
    out = {}
    for line in err.splitlines():
        if line.startswith("[") and "] " in line:
            name, rest = line[1:].split("] ", 1)
            if name in STAGE_NAMES:
                out[name] = rest.split()[0]
    return out


def test_pipeline_runs_skips_and_reruns_downstream_of_a_change(project, run_cli):
    cfg = project / "pipeline.yaml"
    code, out, err = run_cli("pipeline", "--config", cfg)
    assert code == 0, err
    assert set(_stages(err).values()) == {"done"}, err
    run = project / "work" / "run"
    for name in ("adapter_config.json", "adapter_model.safetensors", "training_manifest.json", "telemetry.jsonl",
                 "eval_results.json", "benchmark_results.json", "gate_receipt.json", "MODEL_CARD.md", "report.html"):
        assert (run / name).is_file(), name
    assert json.loads((run / "gate_receipt.json").read_text())["passed"] is True
    assert f"mens serve {run}" in out
    # The bench ran free, in grammar mode and on the base, and the summary says how good the model is.
    res = json.loads((run / "benchmark_results.json").read_text())
    assert res["grammar"]["lang"] == "vox" and Path(res["base"]["model"]).name == "base"
    assert res["vs_base"]["pass_at_1_drop"] == res["base"]["pass_at_1"] - res["pass_at_1"]
    assert res["vs_base"]["tasks_compared"] == res["n_tasks"] and 0 < res["vs_base"]["parse"]["p_value"] <= 1
    # The base was benched too, so the last line tells before → after in the bench's own figures.
    flat = " ".join(out.split())
    assert list(res)[-1] == "items" and "with --grammar vox: parse " in flat, flat[-800:]
    assert (f"Before → after the fine-tune, {res['n_tasks']} held-out bench tasks (greedy): parse "
            f"{res['base']['parse_rate']:.0%} → {res['parse_rate']:.0%}") in flat, flat[-800:]
    assert "out of date" not in out
    state = json.loads((project / "work" / "pipeline_state.json").read_text())
    assert list(state["stages"]) == STAGE_NAMES

    code, out, err = run_cli("pipeline", "--config", cfg)
    assert code == 0 and set(_stages(err).values()) == {"skipped"}, err

    with (project / "src" / "notes.vox").open("a") as fh:
        fh.write("\nfn sub(a: int, b: int) to int {\n    return a - b\n}\n")
    code, out, err = run_cli("pipeline", "--config", cfg, "--dry-run")
    plan = _stages(err)
    assert code == 0 and plan["extract"] == "would" and "input changed: notes.vox" in err
    assert (run / "report.html").stat().st_mtime > 0 and json.loads(
        (project / "work" / "pipeline_state.json").read_text()) == state  # a dry run changes nothing

    code, out, err = run_cli("pipeline", "--config", cfg, "--stages", "extract,pairs,validate,generate-data,mix,eval")
    st = _stages(err)
    assert code == 0, err
    assert st["extract"] == st["pairs"] == st["validate"] == st["mix"] == st["eval"] == "done"
    assert st["generate-data"] == "skipped"  # its inputs did not change
    assert set(st) == {"extract", "pairs", "validate", "generate-data", "mix", "eval"}
    # The summary still quotes the model's bench results, but says the new corpus outdated them.
    assert "Before → after the fine-tune" in out and "(of an earlier run, out of date: train-scratch-base: input changed" in \
        " ".join(out.split()), out
    code, out, err = run_cli("pipeline", "--config", cfg, "--dry-run")
    assert "[train-scratch-base] would run: input changed: train.jsonl" in err


def test_grammar_change_forces_reextraction_and_model_skips_scratch(project, run_cli, monkeypatch, tiny_model_dir):
    cfg = project / "pipeline.yaml"
    code, _, err = run_cli("pipeline", "--config", cfg, "--model", tiny_model_dir)
    assert code == 0, err
    st = _stages(err)
    assert st["train-scratch-base"] == "not" and st["train"] == "done" and st["report"] == "done"
    manifest = json.loads((project / "work" / "run" / "training_manifest.json").read_text())
    assert str(tiny_model_dir) in json.dumps(manifest["base_model"])

    from mens.lang import get_pack

    monkeypatch.setattr(type(get_pack("vox")), "grammar_version", "grammar-changed")
    code, _, err = run_cli("pipeline", "--config", cfg, "--model", tiny_model_dir, "--dry-run")
    assert code == 0 and "[extract] would run: language pack changed: vox" in err
    monkeypatch.undo()

    # New mens code re-runs the stages built from it (here: the evaluate package), not the others.
    import mens.fingerprint as engine

    real = engine.source_digest
    monkeypatch.setattr(engine, "source_digest",
                        lambda name: "edited" if name == "mens.evaluate" else real(name))
    code, _, err = run_cli("pipeline", "--config", cfg, "--model", tiny_model_dir, "--dry-run")
    plan = _stages(err)
    assert code == 0 and "[bench] would run: mens code changed: mens.evaluate" in err, err
    assert plan["gate"] == plan["card"] == plan["report"] == "would"
    assert plan["extract"] == plan["train"] == "skipped"


def test_dpo_and_rl_stages_run_between_train_and_bench(project, run_cli, tiny_model_dir):
    """With `dpo:` and `rl:` sections the fine-tune goes on through DPO (pairs from the corpus's
    fix lane) and GRPO; bench, gate, card and report judge the rl run; a rerun skips both."""
    (project / "prompts.jsonl").write_text("".join(json.dumps({"prompt": f"Write a Vox type number {i}."}) + "\n"
                                                   for i in range(2)))
    cfg = project / "pipeline.yaml"
    config = yaml.safe_load(cfg.read_text())
    config.update(dpo={"steps": 2, "batch_size": 2, "save_steps": 2, "max_length": 256},
                  rl={"prompts": "prompts.jsonl", "steps": 2, "prompts_per_step": 1, "num_generations": 2,
                      "max_completion_length": 8, "save_steps": 2, "rewards": {"parses": 1.0, "not_stub": 0.5}})
    cfg.write_text(yaml.safe_dump(config))
    code, out, err = run_cli("pipeline", "--config", cfg, "--model", tiny_model_dir)
    assert code == 0, err
    work = project / "work"
    dpo, rl = (json.loads((work / n / "training_manifest.json").read_text()) for n in ("dpo", "rl"))
    assert (dpo["method"], rl["method"], rl["provenance"]["start_model"]) == ("dpo", "grpo", str(work / "dpo"))
    assert (work / "corpus" / "prefs.jsonl").stat().st_size > 0
    for name in ("benchmark_results.json", "gate_receipt.json", "MODEL_CARD.md", "report.html"):
        assert (work / "rl" / name).is_file(), name
    assert "<title>reward</title>" in (work / "rl" / "report.html").read_text()
    assert f"mens serve {work / 'rl'}" in out
    state = json.loads((work / "pipeline_state.json").read_text())
    assert list(state["stages"])[6:9] == ["train", "dpo", "rl"]  # no scratch base with --model
    code, out, err = run_cli("pipeline", "--config", cfg, "--model", tiny_model_dir)
    assert code == 0 and "[dpo] skipped" in err and "[rl] skipped" in err, err


def test_pipeline_stops_at_the_first_failure(project, run_cli):
    (project / "src" / "shapes.vox").unlink()
    (project / "src" / "notes.vox").unlink()
    code, out, err = run_cli("pipeline", "--config", project / "pipeline.yaml", "--stages", "extract,pairs")
    assert code == 2
    assert "[extract] FAILED: mens: error: no units extracted" in err
    assert "pairs" not in _stages(err)
    code, _, err = run_cli("pipeline", "--config", project / "pipeline.yaml", "--stages", "extract,nope")
    assert code == 2 and "unknown stage(s): nope" in err


@pytest.mark.parametrize("name", ["pipeline.yaml", "pipeline-gpu.yaml"])
def test_examples_pipeline_config_plans(run_cli, tmp_path, name):
    """The bundled configs parse and plan every stage (the quickstart runs pipeline.yaml for
    real; pipeline-gpu.yaml is scripts/gpu_check's, on a GPU)."""
    config = yaml.safe_load((EXAMPLES / name).read_text())
    config["work_dir"] = str(tmp_path / "work")
    for key in ("sources",):
        config["corpus"][key] = [str(EXAMPLES / s) for s in config["corpus"][key]]
    config["bench"]["path"] = str(EXAMPLES / config["bench"]["path"])
    config["gate"]["policy"] = str(EXAMPLES / config["gate"]["policy"])
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(config))
    code, out, err = run_cli("pipeline", "--config", tmp_path / "p.yaml", "--dry-run")
    assert code == 0, err
    assert list(_stages(err)) == STAGE_NAMES
    assert not (tmp_path / "work").exists()  # a dry run writes nothing, not even the work dir


@pytest.mark.parametrize("model, phrase", [("no-such-org/no-such-model", "not in the local cache"),
                                           ("./no/such/dir", "model path not found")])
def test_a_model_that_cannot_load_stops_the_pipeline_before_the_corpus(run_cli, tmp_path, monkeypatch, model, phrase):
    """`--model` an uncached hub id while offline, or a path that is not there: one line, exit 2,
    before extract runs (not after the corpus and synthetic stages)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    config = yaml.safe_load((EXAMPLES / "pipeline.yaml").read_text())
    config["work_dir"] = str(tmp_path / "work")
    config["corpus"]["sources"] = [str(EXAMPLES / s) for s in config["corpus"]["sources"]]
    config["bench"]["path"] = str(EXAMPLES / config["bench"]["path"])
    config["gate"]["policy"] = str(EXAMPLES / config["gate"]["policy"])
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(config))
    code, _, err = run_cli("pipeline", "--config", tmp_path / "p.yaml", "--model", model)
    assert code == 2 and phrase in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "work").exists()


def test_an_interrupted_stage_resumes_with_unchanged_inputs(tmp_path):
    """The engine on two small stages of its own: an interrupted stage is retried with
    ctx.resume set when nothing changed, and from scratch when its input did."""
    from mens.pipeline.runner import Context, Stage, load_state, run_pipeline

    src = tmp_path / "in.txt"
    src.write_text("a")
    seen = []

    def copy(ctx):
        seen.append(ctx.resume)
        if len(seen) == 1:
            raise KeyboardInterrupt  # cut off part-way
        (ctx.work / "out.txt").write_text(src.read_text())
        return {"chars": len(src.read_text())}

    stage = Stage("copy", inputs=lambda c: [src], outputs=lambda c: [c.work / "out.txt"], run=copy)
    ctx = Context(config={}, base_dir=tmp_path, work=tmp_path / "work")
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(ctx, [stage])
    assert "copy" in load_state(ctx.work)["attempts"] and "copy" not in load_state(ctx.work)["stages"]
    [outcome] = run_pipeline(ctx, [stage])
    assert outcome.status == "ran" and seen == [False, True]
    assert load_state(ctx.work)["attempts"] == {} and load_state(ctx.work)["stages"]["copy"]["figures"] == {"chars": 1}
    [outcome] = run_pipeline(ctx, [stage])
    assert outcome.status == "skipped" and len(seen) == 2
    src.write_text("bb")
    [outcome] = run_pipeline(ctx, [stage])
    assert outcome.status == "ran" and outcome.reason == "input changed: in.txt" and seen[-1] is False


def test_an_interrupted_stage_resumes_across_a_change_of_mens_code(tmp_path, monkeypatch, capsys):
    """Hours of training are not thrown away because mens's own code changed between the
    interruption and the rerun: the stage resumes and says why; a changed input still restarts."""
    import mens.pipeline.runner as runner
    from mens.progress import configure

    configure(quiet=False)  # status lines on stderr, as the CLI sets them
    src = tmp_path / "in.txt"
    src.write_text("a")
    seen = []

    def copy(ctx):
        seen.append(ctx.resume)
        if len(seen) in (1, 3):
            raise KeyboardInterrupt  # cut off part-way, twice
        return {}

    stage = runner.Stage("copy", inputs=lambda c: [src], outputs=lambda c: [], run=copy)
    ctx = runner.Context(config={}, base_dir=tmp_path, work=tmp_path / "work")
    with pytest.raises(KeyboardInterrupt):
        runner.run_pipeline(ctx, [stage])
    real = runner.fingerprint
    monkeypatch.setattr(runner, "fingerprint", lambda c, s: {**real(c, s), "code": {"mens.train": "edited"},
                                                             "digest": real(c, s)["digest"][::-1]})
    runner.run_pipeline(ctx, [stage])
    assert seen == [False, True]
    assert "[copy] resuming the interrupted run although mens's code changed" in capsys.readouterr().err
    src.write_text("b")
    with pytest.raises(KeyboardInterrupt):
        runner.run_pipeline(ctx, [stage])
    src.write_text("bb")
    runner.run_pipeline(ctx, [stage])
    assert seen == [False, True, False, False]  # its input changed: from scratch


@pytest.mark.parametrize("edit, message", [
    ({"max_step": 3}, "unknown key(s) max_step"),
    ({"train": {"max_step": 3}}, "unknown config key 'max_step'"),
    ({"scratch": {"data": "x.jsonl", "lr": 1e-3, "layers": 2}}, "unknown config key 'layers'"),
    ({"bench": {"paths": "bench"}}, "unknown key(s) in 'bench': paths"),
    ({"gate": {"policy": "gates.yaml", "strict": True}}, "unknown key(s) in 'gate': strict"),
    ({"rl": {"prompts": "p.jsonl", "stepz": 3}}, "unknown key(s) in 'rl': stepz"),
    ({"dpo": {"beta": 0.1, "lr": 3}}, "unknown key(s) in 'dpo': lr"),
])
def test_a_misspelt_config_key_is_an_error_not_a_default(run_cli, tmp_path, edit, message):
    config = yaml.safe_load((EXAMPLES / "pipeline.yaml").read_text())
    for key, value in edit.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) and key in config else value
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(config))
    code, _, err = run_cli("pipeline", "--config", tmp_path / "p.yaml", "--dry-run")
    assert code == 2 and message in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("edit, message", [
    ({"bench": {"k": -1}}, "bench.k must be a whole number, 1 or more, got -1"),
    ({"bench": {"max_new_tokens": 0}}, "bench.max_new_tokens must be"),
    ({"bench": {"temperature": "hot"}}, "bench.temperature must be 0 (greedy) or more"),
    ({"corpus": {"sources": "vox"}}, "corpus.sources must be a list"),
    ({"corpus": {"sources": 5}}, "corpus.sources must be a list"),
    ({"corpus": {"langs": [5]}}, "corpus.langs must be a list"),
    ({"seed": "abc"}, "seed must be a whole number"),
    ({"generate_data": {"count": "many"}}, "generate_data.count must be 0 or more"),
    ({"mix": {"sources": [5]}}, "mix.sources must be a list of paths"),
    ({"gate": {"policy": ["gates.yaml"]}}, "gate.policy must be a gate policy YAML"),
    ({"generate_data": {"english_names": 2}}, "generate_data.english_names must be a share from 0 to 1"),
    ({"generate_data": {"code_drills": -3}}, "generate_data.code_drills must be 0 or more"),
    ({"generate_data": {"made_up_names": 1.5}}, "generate_data.made_up_names must be a share from 0 to 1"),
    ({"generate_data": {"made_up_subjects": "half"}}, "generate_data.made_up_subjects must be a share from 0 to 1"),
    ({"generate_data": {"drill_english_names": -1}}, "generate_data.drill_english_names must be a share from 0 to 1"),
    ({"generate_data": {"copy_drills": "lots"}}, "generate_data.copy_drills must be 0 or more"),
    ({"generate_data": {"lang": "rust"}}, "generate_data.lang must be a language with templates (vox, python)"),
    ({"generate_data": {"lang": "python", "copy_drills": 5}}, "generate_data.copy_drills makes Vox drills only"),
    ({"model": 5}, "model must be a model path or hub id"),
    # the mix section, by the mix's own parser, before the corpus stages run
    ({"mix": {"sources": [{"path": "a.jsonl", "weight": -1}]}}, "'weight' must be a number between 0.0 and 100.0"),
    ({"mix": {"sources": [{"path": "a.jsonl", "wieght": 2}]}}, "unknown source key 'wieght'"),
    ({"mix": {"shufle": False}}, "p.yaml: mix) — did you mean 'shuffle'?"),
    ({"mix": {"output": "t.jsonl"}}, "mix.output is set by the pipeline"),
    ({"mix": ["a.jsonl"]}, "mix must be a mapping"),
    ({"corpus": {"sources": ["nowhere"]}}, "corpus source not found: {t}/nowhere ({t}/p.yaml: corpus.sources)"),
])
def test_a_wrong_typed_config_value_is_an_error_before_any_stage_runs(run_cli, tmp_path, edit, message):
    """Found when the config is read (even by --dry-run), not when the stage reading it is
    reached after corpus and training — and never a traceback."""
    config = yaml.safe_load((EXAMPLES / "pipeline.yaml").read_text())
    for key, value in edit.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) and isinstance(config.get(key), dict) else value
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(config))
    code, _, err = run_cli("pipeline", "--config", tmp_path / "p.yaml", "--dry-run")
    assert code == 2 and message.format(t=tmp_path) in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_binary_or_deeply_nested_config_is_a_one_line_error(run_cli, tmp_path):
    for body in (b"seed: \xff\xfe\n", b"seed: " + b"[" * 100_000 + b"\n"):
        (tmp_path / "p.yaml").write_bytes(body)
        code, _, err = run_cli("pipeline", "--config", tmp_path / "p.yaml", "--dry-run")
        assert code == 2 and "p.yaml" in err and "Traceback" not in err, err


def test_training_benches_answer_as_long_as_the_bench_stage(tmp_path):
    """The bench curves of the scratch and fine-tune stages cap answers at the bench stage's
    max_new_tokens (they once used 128 against the stage's 200, so the curve read ~10 points low)."""
    from mens.pipeline.runner import Context
    from mens.pipeline.training import scratch_params, train_params

    config = yaml.safe_load((EXAMPLES / "pipeline.yaml").read_text())
    config["train"]["bench"] = "bench"  # the quickstart's fine-tune has no curve of its own; a config may
    ctx = Context(config=config, base_dir=EXAMPLES, work=tmp_path / "work")
    want = config["bench"]["max_new_tokens"]
    assert scratch_params(ctx)["bench_max_new_tokens"] == want == train_params(ctx)["bench_max_new_tokens"]
    batch = config["bench"]["batch_size"]  # and answer as many at once
    assert scratch_params(ctx)["bench_batch_size"] == batch == train_params(ctx)["bench_batch_size"]
    config["train"]["bench_max_new_tokens"] = 64  # an explicit value wins
    assert train_params(Context(config=config, base_dir=EXAMPLES, work=tmp_path / "w"))["bench_max_new_tokens"] == 64


def test_drills_take_their_own_english_share(tmp_path):
    """`generate_data.drill_english_names` sets the drills' share of English made-up names apart
    from the programs' (`english_names`); left out, the drills take `english_names` as before."""
    from mens.corpus.synth import drills
    from mens.corpus.synth.generate import generate
    from mens.files import write_jsonl_atomic
    from mens.corpus.synth.stage import STAGE
    from mens.stage import Context

    def made(gen: dict) -> tuple[str, str]:
        ctx = Context(config={"work_dir": str(tmp_path / "w"), "generate_data": gen}, base_dir=EXAMPLES,
                      work=tmp_path / "w")
        STAGE.run(ctx)
        corpus = tmp_path / "w" / "corpus"
        return (corpus / "synthetic.jsonl").read_text(), (corpus / "code_drills.jsonl").read_text()

    def expected(name: str, rows) -> str:
        write_jsonl_atomic(tmp_path / name, rows)
        return (tmp_path / name).read_text()

    programs, drill_rows = made({"count": 30, "code_drills": 12, "english_names": 1.0, "drill_english_names": 0.0})
    assert programs == expected("p.jsonl", generate(30, 0, english_names=1.0))
    assert drill_rows == expected("d.jsonl", drills.code_drills(12, 0, 0.0))
    assert drill_rows != expected("d1.jsonl", drills.code_drills(12, 0, 1.0))  # the share makes a difference
    _, drill_rows = made({"count": 30, "code_drills": 12, "english_names": 1.0})
    assert drill_rows == expected("d1.jsonl", drills.code_drills(12, 0, 1.0))
    ctx = Context(config={"generate_data": {"count": 5, "english_names": 0.5}}, base_dir=EXAMPLES, work=tmp_path / "w")
    assert STAGE.params(ctx)["drill_english_names"] == 0.5  # left out: the programs' share


def test_generate_data_lang_python_writes_python_programs_and_drills(tmp_path):
    """`generate_data.lang: python` writes the Python programs of `generate-data --lang python`,
    checked by the Python pack, and its code drills in Python; without it the params (and so Vox
    configs' fingerprints) are as before."""
    from mens.corpus.synth.generate import generate
    from mens.corpus.synth.stage import STAGE
    from mens.stage import Context

    from mens.corpus.synth.drills import code_drills

    ctx = Context(config={"work_dir": str(tmp_path / "w"),
                          "generate_data": {"count": 12, "lang": "python", "code_drills": 9}},
                  base_dir=EXAMPLES, work=tmp_path / "w")
    STAGE.run(ctx)
    rows = (tmp_path / "w" / "corpus" / "synthetic.jsonl").read_text().splitlines()
    assert [json.loads(r) for r in rows] == [p.to_dict() for p in generate(12, 0, lang="python")]
    rows = (tmp_path / "w" / "corpus" / "code_drills.jsonl").read_text().splitlines()  # and Python drills
    assert [json.loads(r) for r in rows] == [p.to_dict() for p in code_drills(9, 0, lang="python")]
    assert STAGE.packs(ctx) == ["python"] and STAGE.params(ctx)["lang"] == "python"
    vox = Context(config={"generate_data": {"count": 5, "lang": "vox"}}, base_dir=EXAMPLES, work=tmp_path / "w")
    assert "lang" not in STAGE.params(vox) and STAGE.packs(vox) == ["vox"]


@pytest.mark.parametrize("kind", ["copy_drills", "code_drills"])
def test_drills_feed_the_scratch_base_as_its_curriculum(project, run_cli, kind):
    from mens.lang import get_pack

    cfg = yaml.safe_load((project / "pipeline.yaml").read_text())
    cfg["generate_data"][kind] = 20
    cfg["scratch"].update(curriculum_data=f"{{work_dir}}/corpus/{kind}.jsonl", curriculum_steps=2, max_steps=4)
    (project / "pipeline.yaml").write_text(yaml.safe_dump(cfg))
    stages = "extract,pairs,validate,generate-data,mix,eval,train-scratch-base"
    code, _, err = run_cli("pipeline", "--config", project / "pipeline.yaml", "--stages", stages)
    assert code == 0, err
    drills = project / "work" / "corpus" / f"{kind}.jsonl"
    rows = [json.loads(line) for line in drills.read_text().splitlines()]
    assert len(rows) == 20
    if kind == "copy_drills":  # said back as given
        assert all(r["response"] in r["prompt"] for r in rows)
    else:  # Vox that parses, whose first declared name the prompt holds
        vox = get_pack("vox")
        assert all(vox.check(r["response"]) is None for r in rows)
        assert all(r["response"].split("(")[0].split("{")[0].split()[-1] in r["prompt"] for r in rows)
    manifest = json.loads((project / "work" / "base" / "training_manifest.json").read_text())
    assert manifest["hyperparameters"]["curriculum_data"] == str(drills.resolve())
    assert manifest["hyperparameters"]["curriculum_steps"] == 2
    cfg["generate_data"][kind] = 30  # new drills: the base that learnt from them is stale
    (project / "pipeline.yaml").write_text(yaml.safe_dump(cfg))
    code, _, err = run_cli("pipeline", "--config", project / "pipeline.yaml", "--stages", stages, "--dry-run")
    assert code == 0 and _stages(err)["generate-data"] == "would" and _stages(err)["train-scratch-base"] == "would", err


@pytest.mark.parametrize("section, phrase", [
    ({"scratch": {"max_steps": -5}}, "max_steps must be >= 1, got -5"),
    ({"scratch": {"scratch_shape": "nope"}}, "unknown scratch preset 'nope'"),
    ({"train": {"backend": "nope"}}, "unknown backend value 'nope'"),
    ({"train": {"lr": "fast"}}, "lr"),
])
def test_training_values_are_checked_before_any_stage_runs(tmp_path, run_cli, section, phrase):
    """The `scratch:` and `train:` values are `mens train`'s, checked as it checks them when the
    config is read — a dry run names them, not a traceback (or a stage failing) after the corpus."""
    import yaml

    config = tmp_path / "p.yaml"
    config.write_text(yaml.safe_dump({"work_dir": str(tmp_path / "out"), **section}))
    code, _, err = run_cli("pipeline", "--config", config, "--dry-run")
    assert code == 2 and "Traceback" not in err and phrase in err and f"{config}: " in err, err
    assert not (tmp_path / "out").exists()


def test_a_second_pipeline_on_a_busy_work_dir_stops(project, run_cli, held_elsewhere):
    """While another process holds the work dir (a pipeline running), a second pipeline on it
    stops at once with one line and runs no stage; once the holder is gone, it runs; no lock file
    is left behind. A dry run plans without the lock."""
    work = project / "work"
    with held_elsewhere(work, "pipeline work dir"):
        code, _, err = run_cli("pipeline", "--config", project / "pipeline.yaml", "--stages", "extract")
        assert code == 2 and f"another mens process is writing this pipeline work dir ({work.resolve()})" in err
        assert not (work / "corpus").exists()
        code, _, _ = run_cli("pipeline", "--config", project / "pipeline.yaml", "--dry-run")
        assert code == 0
    code, _, err = run_cli("pipeline", "--config", project / "pipeline.yaml", "--stages", "extract")
    assert code == 0, err
    assert not (work / ".mens.lock").exists()


def test_a_broken_gate_policy_is_named_before_any_stage_runs(project, run_cli):
    """The gate runs last; its policy is read when the config is, so a mistake in it does not
    wait for the corpus and training stages."""
    (project / "gates.yaml").write_text("gates:\n  - metric: eval.parse_rate\n    min: 0.5\n")
    code, _, err = run_cli("pipeline", "--config", project / "pipeline.yaml", "--dry-run")
    assert code == 2 and f"({project / 'gates.yaml'}: gates[0])" in err, err
    assert not (project / "work").exists()


@pytest.mark.parametrize("bench, where, message", [
    ({"path": "missing.jsonl"}, "bench.path", "bench not found"),
    ({"path": "empty.jsonl"}, "bench.path", "the bench holds no tasks"),
    ({"path": "bench.jsonl", "grammar": "klingon"}, "bench.grammar", "klingon"),
])
def test_the_bench_and_its_grammar_are_checked_before_any_stage_runs(project, run_cli, bench, where, message):
    """The bench stage runs after corpus and training; a bench that is not there (or holds no
    task) or a grammar that names no language pack is said first — and only when the bench stage
    is among the stages run."""
    (project / "empty.jsonl").write_text("")
    config = yaml.safe_load((project / "pipeline.yaml").read_text())
    config["bench"].update(bench)
    config["bench"].pop("grammar") if "grammar" not in bench else None
    (project / "pipeline.yaml").write_text(yaml.safe_dump(config))
    code, _, err = run_cli("pipeline", "--config", project / "pipeline.yaml")
    assert code == 2 and message in err and f"{project / 'pipeline.yaml'}: {where}" in err, err
    assert not (project / "work").exists()
    code, _, err = run_cli("pipeline", "--config", project / "pipeline.yaml", "--stages", "extract")
    assert code == 0, err


@pytest.mark.slow  # two training ranks
def test_scratch_nproc_trains_the_base_in_two_ranks(project, run_cli, monkeypatch):
    """`scratch: {nproc: 2}`: the base stage runs as two local ranks (mens.train.launch) and the
    stage's figures come from the manifest rank 0 wrote."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cfg = yaml.safe_load((project / "pipeline.yaml").read_text())
    cfg["scratch"]["nproc"] = 2
    cfg["scratch"]["device"] = "cpu"  # two CPU ranks also where one GPU is (two on it is refused)
    (project / "pipeline.yaml").write_text(yaml.safe_dump(cfg))
    stages = "extract,pairs,validate,generate-data,mix,train-scratch-base"
    code, _, err = run_cli("pipeline", "--config", project / "pipeline.yaml", "--stages", stages)
    assert code == 0, err
    manifest = json.loads((project / "work" / "base" / "training_manifest.json").read_text())
    assert manifest["device"]["world_size"] == 2 and manifest["status"] == "completed"
    state = json.loads((project / "work" / "pipeline_state.json").read_text())
    assert state["stages"]["train-scratch-base"]["figures"]["steps"] == 3


def test_quality_line_says_what_the_fine_tune_did_to_its_base(tmp_path):
    from mens.pipeline.cli import quality_line

    res = {"parse_rate": 0.907, "pass_at_1": 0.463, "n_tasks": 54,
           "grammar": {"lang": "vox", "parse_rate": 1.0, "pass_at_1": 0.519},
           "base": {"parse_rate": 0.056, "pass_at_1": 0.0,
                    "grammar": {"lang": "vox", "parse_rate": 0.981, "pass_at_1": 0.037}},
           "vs_base": {"parse": {"lost": 0, "gained": 46, "p_value": 1.0}}}
    path = tmp_path / "benchmark_results.json"
    path.write_text(json.dumps(res))
    assert quality_line(path) == (
        "Before → after the fine-tune, 54 held-out bench tasks (greedy): parse 6% → 91%, pass@1 0.00 → 0.46; "
        "with --grammar vox: parse 98% → 100%, pass@1 0.04 → 0.52 (the fine-tune gained 46 parsing answers and "
        "lost 0)")
    del res["base"]["grammar"], res["base"], res["vs_base"]
    path.write_text(json.dumps(res))
    assert quality_line(path) == ("Model quality: 91% of answers parse, pass@1 0.46 on 54 held-out bench tasks "
                                  "(greedy); with --grammar vox: 100% parse, pass@1 0.52")
    path.write_text("{")
    assert quality_line(path) is None


def test_help_names_every_stage(capsys):
    """`mens pipeline --help` lists the stages in order, the optional dpo and rl too."""
    from mens.cli import main
    from mens.pipeline.stages import all_stages

    with pytest.raises(SystemExit):
        main(["pipeline", "--help"])
    assert ", ".join(s.name for s in all_stages()) in " ".join(capsys.readouterr().out.split())


def test_a_base_pipeline_gathers_trains_judges_and_ships_without_a_fine_tune(tmp_path, run_cli, monkeypatch):
    """examples/base/pipeline.yaml's shape: gather an installed distribution's code, learn a joined
    BPE and a scratch base on it (raw files + Python pairs), `train: false`, bench the base on Python
    tasks, ship it as a folder with SOURCES.json and SHA256SUMS that loads and checks itself."""
    from test_pipeline_helpers import fake_distribution

    site = tmp_path / "site"
    fake_distribution(site, "orchard", {
        "orchard/__init__.py": '"""Orchards."""\n',
        "orchard/trees.py": "".join(f'def yield_of_{i}(trees):\n    """Apples from {i} rows of trees."""\n'
                                    f'    return trees * {i}\n\n\n' for i in range(12)),
        "orchard/tests/test_trees.py": "def test_x():\n    assert True\n"})
    monkeypatch.syspath_prepend(str(site))
    bench = [{"id": "p1", "category": "function", "lang": "python", "prompt": "Write a Python function `pear_count`.",
              "expect_contains": ["def pear_count"], "context_files": []}]
    (tmp_path / "bench.jsonl").write_text("".join(json.dumps(b) + "\n" for b in bench))
    (tmp_path / "gates.yaml").write_text(yaml.safe_dump({"gates": [
        {"name": "loss is finite", "metric": "train.final_loss", "op": "<=", "threshold": 1e6, "blocking": True}]}))
    config = {
        "work_dir": "work", "seed": 0,
        "gather": {"stdlib": False, "packages": ["orchard"]},
        "corpus": {"sources": ["{work_dir}/sources/files"]},
        "mix": {"sources": [{"path": "{work_dir}/corpus/pairs.valid.jsonl"}]},
        "scratch": {"raw_text": "{work_dir}/sources/files", "scratch_arch": "llama", "scratch_shape": "tiny",
                    "scratch_vocab": 300, "scratch_bpe_spaces": "joined", "max_steps": 2, "seq_len": 128,
                    "eval_interval": 0, "save_interval": 0},
        "train": False,
        "bench": {"path": "bench.jsonl", "max_new_tokens": 4},
        "gate": {"policy": "gates.yaml"},
        "ship": {"to": "shipped", "dtype": "bf16"},
    }
    (tmp_path / "pipeline.yaml").write_text(yaml.safe_dump(config))
    code, _, err = run_cli("pipeline", "--config", tmp_path / "pipeline.yaml")
    assert code == 0, err
    assert "[train] not needed: train: false" in err and "[ship] done" in err
    shipped = tmp_path / "shipped"
    sources = json.loads((shipped / "SOURCES.json").read_text())
    assert [f["path"] for f in sources["files"]] == ["files/orchard/orchard/__init__.py",
                                                      "files/orchard/orchard/trees.py"]
    sums = (shipped / "SHA256SUMS").read_text()
    assert all(f"  {name}\n" in sums for name in ("model.safetensors", "tokenizer.json", "SOURCES.json",
                                                   "MODEL_CARD.md", "training_manifest.json"))
    assert json.loads((shipped / "config.json").read_text())["dtype"] == "bfloat16"
    results = json.loads((tmp_path / "work" / "base" / "benchmark_results.json").read_text())
    assert results["n_tasks"] == 1 and "base" not in results  # the base is the model judged: nothing to compare
    code, _, err = run_cli("bench", "--model", shipped, "--bench", tmp_path / "bench.jsonl", "--max-new-tokens", "2")
    assert code == 0, err
    (shipped / "model.safetensors").write_bytes((shipped / "model.safetensors").read_bytes()[:-8])
    code, _, err = run_cli("bench", "--model", shipped, "--bench", tmp_path / "bench.jsonl")
    assert code == 2 and "sha256 does not match SHA256SUMS" in err and "model.safetensors" in err


def test_train_false_with_a_model_is_refused(project, run_cli):
    cfg = yaml.safe_load((project / "pipeline.yaml").read_text())
    cfg.update(train=False, model="somewhere")
    (project / "pipeline.yaml").write_text(yaml.safe_dump(cfg))
    code, _, err = run_cli("pipeline", "--config", project / "pipeline.yaml", "--dry-run")
    assert code == 2 and "train: false with a model" in err
