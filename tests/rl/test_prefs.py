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


@pytest.mark.parametrize("argv, phrase", [
    ([], "nothing to build from"),
    (["missing.jsonl"], "file not found"),
    (["PAIRS", "--model", "m"], "--model and --prompts go together"),
    (["PAIRS", "--bench", "nowhere"], "bench not found"),
    (["PAIRS", "--model", "nowhere/x", "--prompts", "PAIRS", "-n", "1"], "--samples must be 2 or more"),
])
def test_bad_input(run_cli, pairs_file, tmp_path, argv, phrase):
    argv = [str(pairs_file) if a == "PAIRS" else a for a in argv]
    assert_one_line_error(run_cli, ["corpus", "prefs", *argv, "-o", tmp_path / "p.jsonl"], 2, phrase, [tmp_path])
