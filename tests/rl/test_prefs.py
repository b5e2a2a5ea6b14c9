"""`mens corpus prefs`: preference rows from the error-correction lane; bench tasks never among them."""

from __future__ import annotations

import json

import pytest

from bad_input import assert_one_line_error
from paths import EXAMPLES


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    from mens.corpus.extract import extract
    from mens.corpus.pairs import make_pairs

    tmp = tmp_path_factory.mktemp("prefs")
    extract([EXAMPLES / "vox"], tmp / "units.jsonl", workers=1)
    make_pairs(tmp / "units.jsonl", tmp / "pairs.jsonl", seed=0, workers=1)
    return tmp / "pairs.jsonl"


def test_prefs_from_error_correction_lane(run_cli, pairs_file, tmp_path):
    from mens.lang import get_pack
    from mens.lang.base import extract_code

    out = tmp_path / "prefs.jsonl"
    code, _, err = run_cli("corpus", "prefs", pairs_file, "-o", out, "--bench", EXAMPLES / "bench")
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) >= 20
    pack = get_pack("vox")
    codegen = {json.loads(line)["prompt"] for line in pairs_file.read_text().splitlines()
               if json.loads(line)["lane"] == "codegen"}
    for row in rows:
        assert set(row) >= {"prompt", "chosen", "rejected"}
        assert pack.check(extract_code(row["chosen"])[0]) is None
        assert pack.check(extract_code(row["rejected"])[0]) is not None
        assert row["chosen"] != row["rejected"]
    assert sum(r["prompt"] in codegen for r in rows) == len(rows)  # the codegen prompt of the same source
    report = json.loads((tmp_path / "prefs.prefs_report.json").read_text())
    assert report["counts"]["rows_written"] == len(rows)
    assert report["contamination"]["tasks_checked"] > 0


def test_bench_tasks_are_dropped(pairs_file, tmp_path):
    from mens.corpus.prefs import make_prefs

    task = json.loads((EXAMPLES / "bench" / "vox_heldout.jsonl").read_text().splitlines()[0])
    leaked = tmp_path / "leaked.jsonl"
    rows = [json.loads(line) for line in pairs_file.read_text().splitlines()]
    victim = next(r for r in rows if r["lane"] == "codegen" and
                  any(o["lane"] == "error_correction" and o["source"] == r["source"] for o in rows))
    victim["prompt"] = task["prompt"]
    leaked.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    clean = make_prefs([leaked], tmp_path / "a.jsonl")
    report = make_prefs([leaked], tmp_path / "b.jsonl", bench=EXAMPLES / "bench")
    assert report.dropped["bench_task"] == 1
    assert report.counts["rows_written"] == clean.counts["rows_written"] - 1
    assert task["prompt"] not in (tmp_path / "b.jsonl").read_text()


PROMPTS = [
    {"id": "py-add", "prompt": "Write a Python function add(a, b).", "lang": "python", "expect_contains": ["def add"],
     "tests": ["assert add(1, 2) == 3"]},
    {"id": "vox-double", "prompt": "Write a Vox function that doubles a number.", "lang": "vox"},
    {"id": "py-one", "prompt": "Write a Python function one() returning 1.", "lang": "python",
     "expect_contains": ["def one", "return 1"]},
    {"id": "py-digits", "prompt": "Write the ten digits.", "lang": "python", "expect_contains": list("0123456789")},
]


def test_prefs_from_the_models_own_samples(run_cli, tiny_model_dir, tmp_path):
    """--model: the tiny random model's samples (garbage) ranked by the rewards; a held-out bench
    task among the prompts is never sampled nor written; the same seed writes the same file."""
    from mens.rl.rewards import Task, score

    task = json.loads((EXAMPLES / "bench" / "vox_heldout.jsonl").read_text().splitlines()[0])
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in [*PROMPTS, {"id": "leak", "prompt": task["prompt"]}]))

    def build(name: str, seed: str = "0"):
        out = tmp_path / name / "prefs.jsonl"
        code, stdout, err = run_cli("corpus", "prefs", "-o", out, "--model", tiny_model_dir, "--prompts", prompts,
                                    "--bench", EXAMPLES / "bench", "-n", "4", "--temperature", "1.0",
                                    "--min-gap", "0.05", "--max-new-tokens", "24", "--seed", seed)
        assert code == 0, err
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        return rows, json.loads((out.parent / "prefs.prefs_report.json").read_text()), out.read_bytes()

    rows, report, raw = build("a")
    assert rows, report  # a random model's samples differ enough on at least one prompt
    by_id = {r["id"]: r for r in PROMPTS}
    for row in rows:
        assert {"prompt", "chosen", "rejected", "lang", "origin", "source"} <= set(row)
        assert row["origin"] == "samples" and row["chosen"] != row["rejected"]
        asked = by_id[row["source"]]
        assert (row["prompt"], row["lang"]) == (asked["prompt"], asked["lang"])
        # the scores are the rewards' own, re-computed; chosen beats rejected by the gap
        good, bad = (score(row[k], Task.of(asked))[0] for k in ("chosen", "rejected"))
        assert (good, bad) == (row["chosen_score"], row["rejected_score"])
        assert good >= bad + 0.05
    assert task["prompt"] not in raw.decode()
    counts, dropped = report["counts"], report["dropped"]
    assert counts["prompts_sampled"] == len(PROMPTS)  # the leaked task is not sampled
    assert dropped["bench_task"] == 1 and report["contamination"]["dropped"] == 1
    assert counts["prefs_from_samples"] == counts["rows_written"] == len(rows)
    assert len(rows) + dropped.get("no_gap", 0) + dropped.get("empty_or_same", 0) == len(PROMPTS)
    assert build("b")[2] == raw  # deterministic for a seed
    assert build("c", seed="1")[2] != raw


@pytest.mark.parametrize("argv, phrase", [
    ([], "nothing to build from"),
    (["missing.jsonl"], "file not found"),
    (["PAIRS", "--model", "m"], "--model and --prompts go together"),
    (["PAIRS", "--bench", "nowhere"], "bench not found"),
    (["PAIRS", "--model", "nowhere/x", "--prompts", "PAIRS", "-n", "1"], "--samples must be 2 or more"),
    (["PAIRS", "--model", "nowhere/x", "--prompts", "PAIRS", "--temperature", "0"], "--temperature must be a positive"),
    (["PAIRS", "--model", "nowhere/x", "--prompts", "PAIRS", "--min-gap", "nan"], "--min-gap must be a positive"),
    (["PAIRS", "--model", "nowhere/x", "--prompts", "PAIRS", "--max-new-tokens", "0"],
     "--max-new-tokens must be 1 or more"),
    (["PAIRS", "--model", "./nowhere/x", "--prompts", "PAIRS"], "model path not found"),
])
def test_bad_input(run_cli, pairs_file, tmp_path, argv, phrase):
    argv = [str(pairs_file) if a == "PAIRS" else a for a in argv]
    assert_one_line_error(run_cli, ["corpus", "prefs", *argv, "-o", tmp_path / "p.jsonl"], 2, phrase, [tmp_path])


@pytest.mark.parametrize("case, phrase", [
    ("no-error-correction", "no preference pairs made: the pair files hold no error-correction rows"),
    ("not-objects", "no preference pairs made"),
    ("output-is-input", "the output would overwrite the input"),
    ("report-place-taken", "(report {t}/p.prefs_report.json)"),
])
def test_prefs_that_would_make_nothing_or_clobber_an_input(run_cli, pairs_file, tmp_path, case, phrase):
    """An empty prefs.jsonl is an error here, not a surprise in `mens dpo`; -o over an input and a
    report whose place is taken are refused before any work."""
    rows = [json.loads(line) for line in pairs_file.read_text().splitlines()]
    pairs = tmp_path / "pairs.jsonl"
    out = tmp_path / "p.jsonl"
    if case == "no-error-correction":
        pairs.write_text("".join(json.dumps(r) + "\n" for r in rows if r.get("lane") != "error_correction"))
    elif case == "not-objects":
        pairs.write_text("[1, 2]\n\"text\"\n")
    else:
        pairs.write_text(pairs_file.read_text())
    if case == "output-is-input":
        out = pairs
    if case == "report-place-taken":
        (tmp_path / "p.prefs_report.json").mkdir()
    before = pairs.read_bytes()
    assert_one_line_error(run_cli, ["corpus", "prefs", pairs, "-o", out], 2, phrase.format(t=tmp_path), [tmp_path])
    assert pairs.read_bytes() == before
