"""The walk-through of docs/corpus.md on the bundled examples/, stage by stage through the CLI."""

import json
import shutil
from pathlib import Path

from mens.lang import extract_code, get_pack

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def walkthrough(tmp_path: Path, run_cli, seed: int = 0) -> Path:
    work = tmp_path / "out" / "corpus"
    (tmp_path / "examples").mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES / "mix.yaml", tmp_path / "examples" / "mix.yaml")
    steps = [
        ("corpus", "extract", EXAMPLES / "vox", "-o", work / "units.jsonl"),
        ("corpus", "extract", EXAMPLES / "docs", "-o", work / "docs_units.jsonl"),
        ("corpus", "pairs", work / "units.jsonl", "-o", work / "pairs.jsonl", "--seed", seed),
        ("corpus", "pairs", work / "docs_units.jsonl", "-o", work / "docs_pairs.jsonl", "--seed", seed),
        ("corpus", "validate", work / "pairs.jsonl", "-o", work / "validated.jsonl",
         "--quarantine", work / "quarantine.jsonl"),
        ("corpus", "validate", work / "docs_pairs.jsonl", "-o", work / "docs_validated.jsonl"),
        ("generate-data", "--limit", 60, "--seed", seed, "-o", work / "synthetic.jsonl"),
        ("corpus", "mix", "--config", tmp_path / "examples" / "mix.yaml"),
        ("corpus", "eval", work / "train.jsonl", "-o", work / "eval_results.json", "--min-parse-rate", "1.0"),
    ]
    for args in steps:
        code, _, err = run_cli(*args)
        assert code == 0, (args, err)
    return work


def test_examples_to_train_jsonl_and_eval_results(tmp_path, run_cli):
    work = walkthrough(tmp_path, run_cli)
    units = rows(work / "units.jsonl")
    vox_files = sorted(EXAMPLES.joinpath("vox").rglob("*.vox"))
    report = json.loads((work / "units.extract_report.json").read_text())
    # Every .vox file is either a file unit or a counted drop.
    assert report["counts"]["files_seen"] >= len(vox_files)
    assert sum(u["kind"] == "file" for u in units) + sum(report["dropped"].values()) == report["counts"]["files_seen"] \
        - sum(1 for p in EXAMPLES.joinpath("vox").rglob("*.md"))
    assert {u["lang"] for u in units} == {"vox"}
    docs = rows(work / "docs_units.jsonl")
    assert {u["kind"] for u in docs} == {"doc_code", "doc_prose"}
    assert not any("roadmap.md" in u["path"] for u in docs)  # training_eligible: false
    vox = get_pack("vox")
    train = rows(work / "train.jsonl")
    lanes = {r.get("lane") for r in train}
    assert {"codegen", "docs_qa", "error_correction", "followup"} <= lanes
    assert {r["rating"] for r in train} >= {3, 4}
    for r in train:
        if r.get("response_mode") != "prose_only":
            response = r["messages"][-1]["content"] if "messages" in r else r["response"]
            assert vox.check(extract_code(response)[0]) is None
    mix_report = json.loads((work / "train.mix_report.json").read_text())
    assert [Path(s["path"]).name for s in mix_report["sources"]] == [
        "validated.jsonl", "docs_validated.jsonl", "synthetic.jsonl"]
    assert all(s["emitted_rows"] > 0 and s["fingerprint"] for s in mix_report["sources"])
    results = json.loads((work / "eval_results.json").read_text())
    for key in ("total_samples", "code_samples", "format_validity", "parse_rate", "construct_coverage",
                "construct_total", "construct_coverage_pct", "safety_rejection_rate", "by_category", "failures"):
        assert key in results
    assert results["parse_rate"] == 1.0 and results["format_validity"] == 1.0
    assert results["construct_total"] == len(vox.taxonomy) and results["construct_coverage_pct"] > 50
    assert results["total_samples"] == len(train)


def test_same_seed_same_bytes_at_every_stage(tmp_path, run_cli):
    a = walkthrough(tmp_path / "a", run_cli)
    b = walkthrough(tmp_path / "b", run_cli)
    for name in ("units.jsonl", "docs_units.jsonl", "pairs.jsonl", "validated.jsonl", "synthetic.jsonl",
                 "train.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def _vox(meta: str, body: str = "fn answer() to int {\n    return 42\n}\n") -> str:
    return meta + body


def test_vox_metadata_drives_skips_prompts_and_ratings(tmp_path, run_cli):
    src = tmp_path / "vox"
    src.mkdir()
    (src / "skip.vox").write_text(_vox("// vox:skip\n"))
    (src / "old.vox").write_text(_vox("// ---\n// status: deprecated\n// ---\n"))
    (src / "no.vox").write_text(_vox("// ---\n// training_eligible: false\n// ---\n"))
    (src / "gold.vox").write_text(_vox("// ---\n// title: Answer\n// description: The answer.\n// status: golden\n"
                                       "// ---\n// @training_prompt: Return the answer to everything.\n\n"
                                       "/// The answer.\n"))
    (src / "plain.vox").write_text(_vox("", "fn one() to int {\n    return 1\n}\n\nfn two() to int {\n    return 2\n}\n"))
    units, pairs = tmp_path / "u.jsonl", tmp_path / "p.jsonl"
    assert run_cli("corpus", "extract", src, "-o", units)[0] == 0
    report = json.loads((tmp_path / "u.extract_report.json").read_text())
    assert report["dropped"] == {"skip_marker": 1, "deprecated": 1, "not_training_eligible": 1}
    assert run_cli("corpus", "pairs", units, "-o", pairs)[0] == 0
    got = rows(pairs)
    gold = next(r for r in got if r["lane"] == "codegen" and "gold.vox" in r["source"])
    assert gold["prompt"] == "Return the answer to everything." and gold["rating"] == 5
    # The frontmatter and training prompt are not part of the answer; the doc comment is.
    assert gold["response"] == "```vox\n/// The answer.\nfn answer() to int {\n    return 42\n}\n```"
    plain = [r for r in got if "plain.vox" in r["source"] and r["lane"] == "codegen"]
    assert {r["category"] for r in plain} == {"function"} and {r["rating"] for r in plain} == {4}
    assert len(plain) == 3  # the file and its two functions


def test_generate_data_command(tmp_path, run_cli):
    out = tmp_path / "s.jsonl"
    code, _, err = run_cli("generate-data", "--limit", 0, "-o", out)
    assert code == 2 and "--limit" in err and not out.exists()
    code, _, _ = run_cli("generate-data", "--limit", 5, "--seed", 1, "-o", out)
    assert code == 0 and len(rows(out)) == 5 and {r["rating"] for r in rows(out)} == {3}
    report = json.loads((tmp_path / "s.generate_report.json").read_text())
    assert report["counts"]["pairs"] == 5 and report["fingerprint"]["packs"]["vox"]
