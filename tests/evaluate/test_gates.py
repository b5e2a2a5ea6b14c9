import json
import math
import shutil

import pytest
from evaluate_run_fixture import make_run

from paths import EXAMPLES
from mens.evaluate.gates import Gate, check_gates


def _policy(tmp_path, gates):
    import yaml

    path = tmp_path / "gates.yaml"
    path.write_text(yaml.safe_dump({"gates": gates}))
    return path


def test_shipped_policy_passes_a_healthy_run(tmp_path, run_cli):
    run = make_run(tmp_path, pass_at_1=0.24, bench_parse_rate=0.65)   # the quickstart's figures
    code, out, err = run_cli("gate", "--run", run, "--policy", EXAMPLES / "gates.yaml")
    assert code == 0, out + err
    receipt = json.loads((run / "gate_receipt.json").read_text())
    assert receipt["passed"] is True
    # One line per gate, its metric in one column however long the gate's name.
    rows = [line for line in out.splitlines() if line.startswith("  PASS") or line.startswith("  WARN")]
    assert len(rows) == len(receipt["gates"]) and len({row.index(g["metric"]) for row, g in
                                                        zip(rows, receipt["gates"])}) == 1
    by_name = {g["name"]: g for g in receipt["gates"]}
    assert by_name["bench pass@1"]["verdict"] == "pass" and by_name["bench pass@1"]["blocking"] is True
    # The fine-tune kept its base's figures (no task lost), so the blocking base gates pass.
    assert by_name["fine-tune keeps the base's parse rate"]["verdict"] == "pass"
    assert by_name["fine-tune keeps the base's parse rate"]["blocking"] is True
    assert receipt["warnings"] == []
    assert by_name["bench code parses"]["verdict"] == "pass" and by_name["bench code parses"]["blocking"] is True
    assert by_name["loss decreased"]["verdict"] == "pass"
    losses = [4.0 * math.exp(-s / 8) + 1.5 * (1 - math.exp(-s / 8)) for s in range(1, 21)]
    assert by_name["loss decreased"]["value"] == pytest.approx(sum(losses[-5:]) / sum(losses[:5]))


def test_shipped_policy_blocks_a_model_whose_bench_code_mostly_does_not_parse(tmp_path, run_cli):
    run = make_run(tmp_path, pass_at_1=0.24, bench_parse_rate=0.5)
    code, _, err = run_cli("gate", "--run", run, "--policy", EXAMPLES / "gates.yaml")
    assert code == 1 and "blocking gate(s) failed: bench code parses\n" in err


def test_shipped_policy_blocks_grammar_mode_code_that_does_not_parse(tmp_path, run_cli):
    run = make_run(tmp_path, pass_at_1=0.24, grammar_parse_rate=0.9)
    code, _, err = run_cli("gate", "--run", run, "--policy", EXAMPLES / "gates.yaml")
    assert code == 1 and "blocking gate(s) failed: bench code parses with --grammar\n" in err


def test_shipped_policy_blocks_a_model_under_issue_12s_pass_at_1(tmp_path, run_cli):
    """pass@1 0.2 blocks: a model whose code parses but does not do what the tasks ask (the
    quickstart's before code drills: 0.85 parse, pass@1 0) is not promoted."""
    run = make_run(tmp_path, pass_at_1=0.185, bench_parse_rate=0.85)
    code, _, err = run_cli("gate", "--run", run, "--policy", EXAMPLES / "gates.yaml")
    assert code == 1 and "blocking gate(s) failed: bench pass@1\n" in err


def test_blocking_failure_exits_1_and_still_writes_receipt(tmp_path, run_cli):
    run = make_run(tmp_path, parse_rate=0.5)
    policy = _policy(tmp_path, [{"name": "parses", "metric": "eval.parse_rate", "op": ">=", "threshold": 0.9},
                                {"name": "p1", "metric": "bench.pass_at_1", "op": ">=", "threshold": 0.1}])
    code, out, err = run_cli("gate", "--run", run, "--policy", policy)
    assert code == 1
    assert "blocking gate(s) failed: parses" in err
    receipt = json.loads((run / "gate_receipt.json").read_text())
    assert receipt["passed"] is False
    assert [g["verdict"] for g in receipt["gates"]] == ["fail", "pass"]


def test_missing_metric_is_a_clear_failure(tmp_path):
    run = make_run(tmp_path, with_bench=False)
    results = check_gates(run, [Gate("p1", "bench.pass_at_1", ">=", 0.1),
                                Gate("typo", "eval.parse_rat", ">=", 0.1),
                                Gate("nested", "eval.by_category.function.n", "==", 40)])
    assert results[0].verdict == "fail" and "benchmark_results.json not found" in results[0].message
    assert results[1].verdict == "fail" and "no 'parse_rat' in eval_results.json" in results[1].message
    assert results[2].verdict == "pass"


def test_nan_loss_fails_the_finite_gate(tmp_path):
    run = make_run(tmp_path)
    manifest = json.loads((run / "training_manifest.json").read_text())
    manifest["results"]["final_loss"] = float("nan")
    (run / "training_manifest.json").write_text(json.dumps(manifest))
    [res] = check_gates(run, [Gate("finite", "train.final_loss", "<=", 1e6)])
    assert res.verdict == "fail" and "not finite" in res.message and res.value is None


def test_bad_policy_is_a_user_error(tmp_path, run_cli):
    run = make_run(tmp_path)
    policy = _policy(tmp_path, [{"metric": "loss", "op": ">=", "threshold": 1}])
    code, _, err = run_cli("gate", "--run", run, "--policy", policy)
    assert code == 2 and "must start with eval., bench. or train." in err
    shutil.rmtree(run)
    code, _, err = run_cli("gate", "--run", run, "--policy", EXAMPLES / "gates.yaml")
    assert code == 2 and "run directory not found" in err


def test_shipped_policy_blocks_a_corpus_with_secrets(tmp_path, run_cli):
    run = make_run(tmp_path)
    results = json.loads((run / "eval_results.json").read_text())
    results["safety_rejections"] = 1
    (run / "eval_results.json").write_text(json.dumps(results))
    code, _, err = run_cli("gate", "--run", run, "--policy", EXAMPLES / "gates.yaml")
    assert code == 1 and "corpus holds no secrets" in err
    del results["safety_rejections"]  # an eval that did not measure safety cannot pass the gate either
    (run / "eval_results.json").write_text(json.dumps(results))
    code, _, err = run_cli("gate", "--run", run, "--policy", EXAMPLES / "gates.yaml")
    assert code == 1 and "corpus holds no secrets" in err


@pytest.mark.parametrize("metric, threshold, phrase", [
    ("eval.parse_rate", 1.5, "out of range for eval.parse_rate (0-1)"),
    ("bench.pass_at_1", -0.1, "out of range"),
    ("eval.construct_coverage_pct", 150, "(0-100)"),
    ("eval.safety_rejections", -1, "(0 or more)"),
    ("eval.parse_rate", float("nan"), "finite number"),
])
def test_out_of_range_thresholds_are_user_errors(tmp_path, run_cli, metric, threshold, phrase):
    run = make_run(tmp_path)
    policy = _policy(tmp_path, [{"metric": metric, "op": ">=", "threshold": threshold}])
    code, _, err = run_cli("gate", "--run", run, "--policy", policy)
    assert code == 2 and phrase in err and len(err.strip().splitlines()) == 1, err
    assert not (run / "gate_receipt.json").exists()


@pytest.mark.parametrize("content, phrase", [
    (b"gates:\n  - metric: \xff\xfe\n", "not UTF-8"),
    (b"gates: " + b"[" * 100_000, "nested too deeply"),
    (b"gates: [unclosed\n", "not valid YAML"),
])
def test_unreadable_policy_is_one_line(tmp_path, run_cli, content, phrase):
    run = make_run(tmp_path)
    policy = tmp_path / "gates.yaml"
    policy.write_bytes(content)
    code, _, err = run_cli("gate", "--run", run, "--policy", policy)
    assert code == 2 and phrase in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


def test_shipped_policy_blocks_a_fine_tune_that_lost_parse_rate(tmp_path, run_cli):
    """A fine-tune that lost significantly more bench tasks than it gained against its base (sign
    test p < 0.05: 5 lost, none gained) is blocked; 3 lost and none gained (p 0.125, what a neutral
    fine-tune's greedy flips give) passes. A run benched without its base cannot show it kept it,
    so it is blocked too (never a silent pass)."""
    from mens.evaluate.compare import sign_test_p

    run = make_run(tmp_path)
    results = json.loads((run / "benchmark_results.json").read_text())
    for figure, name in (("parse", "parse rate"), ("pass", "pass@1")):
        for lost, code in ((3, 0), (5, 1)):
            results["vs_base"][figure].update(lost=lost, p_value=sign_test_p(lost, 0))
            (run / "benchmark_results.json").write_text(json.dumps(results))
            code_, _, err = run_cli("gate", "--run", run, "--policy", EXAMPLES / "gates.yaml")
            assert code_ == code, (figure, lost, err)
            assert code == 0 or f"blocking gate(s) failed: fine-tune keeps the base's {name}\n" in err
        results["vs_base"][figure].update(lost=0, p_value=1.0)
    del results["vs_base"]
    (run / "benchmark_results.json").write_text(json.dumps(results))
    code, out, err = run_cli("gate", "--run", run, "--policy", EXAMPLES / "gates.yaml")
    assert code == 1 and "fine-tune keeps the base" in err
