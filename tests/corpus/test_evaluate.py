import json
from pathlib import Path

import pytest

from mens.corpus.evaluate import evaluate, safety_flags
from mens.errors import GateFailure

FN = {"prompt": "f", "response": "```python\ndef f():\n    return 1\n```", "lang": "python", "category": "function"}
CLS = {"prompt": "c", "response": "```python\nclass A:\n    pass\n```", "lang": "python", "category": "class"}
BAD = {"prompt": "b", "response": "```python\ndef f(:\n```", "lang": "python", "category": "function"}
PROSE = {"prompt": "p", "response": "Explained.", "response_mode": "prose_only", "category": "docs"}
UNSAFE = {"prompt": "u", "response": "```python\nimport os\nos.system('rm -rf /')\n```", "lang": "python",
          "category": "function"}


def test_results_follow_the_contract(tmp_path, write_jsonl):
    src = write_jsonl("t.jsonl", [FN, CLS, BAD, PROSE, UNSAFE, "{oops"])
    out = tmp_path / "eval_results.json"
    res = evaluate(src, out)
    assert json.loads(out.read_text()) == res
    assert res["total_samples"] == 6 and res["valid_samples"] == 5 and res["format_validity"] == pytest.approx(5 / 6, abs=1e-5)
    assert res["code_samples"] == 4 and res["parsed_samples"] == 3 and res["parse_rate"] == 0.75
    assert res["construct_coverage"] == 3 and res["constructs_seen"] == ["class", "function", "import"]
    assert res["construct_total"] == 7 and res["construct_coverage_pct"] == pytest.approx(42.86)
    assert res["safety_rejections"] == 1 and res["safety_rejection_rate"] == 0.2
    assert res["by_category"]["function"] == {"samples": 3, "code_samples": 3, "parsed": 2, "parse_rate": 0.666667}
    kinds = sorted(f["kind"] for f in res["failures"])
    assert kinds == ["format", "parse", "safety"]
    parse = next(f for f in res["failures"] if f["kind"] == "parse")
    assert parse["where"].endswith("t.jsonl:3") and parse["error"].startswith("1:")
    assert res["gate"]["passed"] is True


def test_gates_from_flags_and_env(tmp_path, write_jsonl, run_cli, monkeypatch):
    src = write_jsonl("t.jsonl", [FN, CLS, BAD])
    out = tmp_path / "e.json"
    code, stdout, _ = run_cli("corpus", "eval", src, "-o", out, "--min-parse-rate", "0.5")
    assert code == 0 and "parse rate 0.667" in stdout
    code, _, err = run_cli("corpus", "eval", src, "-o", out, "--min-parse-rate", "0.9")
    assert code == 1 and "parse_rate 0.6667 < 0.9" in err and out.exists()
    assert json.loads(out.read_text())["gate"]["passed"] is False
    code, _, err = run_cli("corpus", "eval", src, "-o", out, "--min-coverage", "50")
    assert code == 1 and "coverage" in err
    monkeypatch.setenv("MENS_EVAL_MIN_PARSE_RATE", "0.95")
    with pytest.raises(GateFailure):
        evaluate(src, out)
    monkeypatch.setenv("MENS_EVAL_MIN_PARSE_RATE", "lots")
    code, _, err = run_cli("corpus", "eval", src, "-o", out)
    assert code == 2 and "MENS_EVAL_MIN_PARSE_RATE must be a number" in err
    monkeypatch.delenv("MENS_EVAL_MIN_PARSE_RATE")
    clean = write_jsonl("clean.jsonl", [FN, CLS])
    assert evaluate(clean, out, strict=True)["gate"]["passed"]
    monkeypatch.setenv("MENS_EVAL_STRICT", "1")
    with pytest.raises(GateFailure, match="do not parse"):
        evaluate(src, out)


def test_empty_or_missing_file_is_a_user_error(tmp_path, run_cli):
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n")
    code, _, err = run_cli("corpus", "eval", empty, "-o", tmp_path / "r.json")
    assert code == 2 and "empty" in err and not (tmp_path / "r.json").exists()
    code, _, err = run_cli("corpus", "eval", tmp_path / "none.jsonl", "-o", tmp_path / "r.json")
    assert code == 2 and "file not found" in err


@pytest.mark.parametrize("text, flagged", [
    ("rm -rf / --no-preserve-root", True),
    ("sudo rm -rf ~", True),
    ("rm -rf ./build", False),
    ("rm -rf /tmp/cache", False),
    ("key = 'AKIAABCDEFGHIJKLMNOP'", True),
    ("-----BEGIN RSA PRIVATE KEY-----", True),
    ('password = "correcthorsebatterystaple"', True),
    ('password = "<your-password>"', False),
    ("password = env.get(\"PASSWORD\")", False),
    (":(){ :|:& };:", True),
    ("dd if=/dev/zero of=/dev/sda bs=1M", True),
    ("fn add(a: int, b: int) to int { return a + b }", False),
])
def test_safety_patterns(text, flagged):
    assert bool(safety_flags(text)) is flagged


def test_tagged_constructs_count_towards_coverage(tmp_path):
    from mens.corpus.evaluate import evaluate

    data = tmp_path / "ai.jsonl"
    code = "@ai\\nfn summarize(text: str) to str"
    data.write_text('{"prompt": "p", "response": "```vox\\n' + code + '\\n```", "lang": "vox"}\n')
    res = evaluate(data, tmp_path / "eval.json")
    assert res["parse_rate"] == 1.0
    assert "ai_function" in res["constructs_seen"] and "function" in res["constructs_seen"]
