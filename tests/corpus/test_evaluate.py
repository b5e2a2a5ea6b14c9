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
    assert res["by_category"]["function"] == {"samples": 3, "code_samples": 3, "parsed": 2, "unchecked": 0,
                                              "parse_rate": 0.666667}
    assert res["prose_samples"] == 1 and res["unchecked_samples"] == 0 and res["unchecked_reasons"] == {}
    assert res["by_category"]["docs"]["parse_rate"] is None  # no code in it: n/a, not 0
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
    code, stdout, err = run_cli("corpus", "eval", src, "-o", out, "--min-parse-rate", "0.9")
    assert code == 1 and "parse_rate 0.6667 < 0.9" in err and out.exists()
    assert "parse rate 0.667" in stdout  # the summary line is printed when the gate fails too
    assert json.loads(out.read_text())["gate"]["passed"] is False
    code, _, err = run_cli("corpus", "eval", src, "-o", out, "--min-coverage", "50")
    assert code == 1 and "coverage" in err
    # The environment is a default of the CLI's flags, read at the edge; evaluate() ignores it.
    monkeypatch.setenv("MENS_EVAL_MIN_PARSE_RATE", "0.95")
    code, _, err = run_cli("corpus", "eval", src, "-o", out)
    assert code == 1 and "parse_rate 0.6667 < 0.95" in err
    assert evaluate(src, out)["gate"] == {"min_parse_rate": None, "min_coverage": None, "strict": False,
                                          "passed": True, "problems": []}
    code, _, err = run_cli("corpus", "eval", src, "-o", out, "--min-parse-rate", "0.5")
    assert code == 0  # the flag beats the environment
    monkeypatch.setenv("MENS_EVAL_MIN_PARSE_RATE", "lots")
    code, _, err = run_cli("corpus", "eval", src, "-o", out)
    assert code == 2 and "MENS_EVAL_MIN_PARSE_RATE must be a number" in err
    monkeypatch.delenv("MENS_EVAL_MIN_PARSE_RATE")
    clean = write_jsonl("clean.jsonl", [FN, CLS])
    assert evaluate(clean, out, strict=True)["gate"]["passed"]
    monkeypatch.setenv("MENS_EVAL_STRICT", "1")
    assert evaluate(src, out)["gate"]["passed"]
    code, _, err = run_cli("corpus", "eval", src, "-o", out)
    assert code == 1 and "do not parse" in err
    monkeypatch.setenv("MENS_EVAL_MIN_COVERAGE", "50")
    monkeypatch.delenv("MENS_EVAL_STRICT")
    code, _, err = run_cli("corpus", "eval", src, "-o", out)
    assert code == 1 and "coverage" in err


def test_evaluate_reads_no_environment():
    """The library's evaluate() and its gate take every threshold as an argument; only the
    command (`_command`, `_env_float`) reads MENS_EVAL_* from the environment."""
    import inspect

    import mens.corpus.evaluate as module

    for function in (module.evaluate, module._gate, module._run):
        code = inspect.getsource(function)
        assert "os.environ" not in code and "getenv" not in code and "_env_float" not in code


@pytest.mark.parametrize("flag, value", [("--min-parse-rate", "1.5"), ("--min-parse-rate", "-0.1"),
                                         ("--min-coverage", "101"), ("--min-coverage", "-1")])
def test_out_of_range_thresholds_are_user_errors(tmp_path, write_jsonl, run_cli, flag, value):
    src = write_jsonl("t.jsonl", [FN])
    code, _, err = run_cli("corpus", "eval", src, "-o", tmp_path / "e.json", flag, value)
    assert code == 2 and flag in err and not (tmp_path / "e.json").exists()


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


# The Vox design's own pair format: plain Vox code in the response, no `lang`, no fence.
VOX_ADD = {"prompt": "add", "response": "fn add(a: int, b: int) to int {\n    return a + b\n}\n",
           "category": "function"}
VOX_BROKEN = {"prompt": "b1", "response": "fn add(a: int, b: int) to int {\n    return a +\n}\n",
              "category": "function"}
VOX_CUT = {"prompt": "b2", "response": "fn f() {", "category": "function"}
VOX_DOUBLE = {"instruction": "double it", "output": "fn double(x: int) to int {\n    return x * 2\n}\n"}


def test_plain_vox_rows_with_lang_option(tmp_path, write_jsonl):
    from mens.lang import get_pack

    src = write_jsonl("vox.jsonl", [VOX_ADD, VOX_BROKEN, VOX_CUT, VOX_DOUBLE, PROSE])
    res = evaluate(src, tmp_path / "e.json", lang="vox")
    assert res["lang"] == "vox" and res["code_samples"] == 4 and res["parsed_samples"] == 2
    assert res["parse_rate"] == 0.5 and res["unchecked_samples"] == 0 and res["prose_samples"] == 1
    assert res["constructs_seen"] == ["function"] and res["construct_coverage"] == 1
    total = len(get_pack("vox").taxonomy)
    assert res["construct_total"] == total and res["construct_coverage_pct"] == round(100 / total, 2)
    assert res["by_category"]["function"]["parse_rate"] == 0.333333
    assert sorted(f["where"].rsplit(":", 1)[1] for f in res["failures"] if f["kind"] == "parse") == ["2", "3"]


def test_plain_rows_without_a_language_are_unchecked_not_failed(tmp_path, write_jsonl):
    src = write_jsonl("vox.jsonl", [VOX_ADD, VOX_BROKEN, VOX_CUT])
    out = tmp_path / "e.json"
    res = evaluate(src, out)
    assert res["code_samples"] == 0 and res["unchecked_samples"] == 3 and res["parsed_samples"] == 0
    assert res["parse_rate"] is None and res["construct_coverage_pct"] is None and res["construct_total"] == 0
    assert res["unchecked_reasons"] == {"no language: no lang field, no fence tag, no --lang": 3}
    assert res["by_category"]["function"] == {"samples": 3, "code_samples": 0, "parsed": 0, "unchecked": 3,
                                              "parse_rate": None}
    assert json.loads(out.read_text())["parse_rate"] is None and res["gate"]["passed"]
    with pytest.raises(GateFailure, match="3 rows unchecked"):
        evaluate(src, out, strict=True)
    # A row's own lang or fence tag is enough without the option.
    labelled = write_jsonl("labelled.jsonl", [{**VOX_ADD, "lang": "vox"},
                                              {**VOX_CUT, "response": "```vox\nfn f() {\n```"}])
    res = evaluate(labelled, out)
    assert res["code_samples"] == 2 and res["parse_rate"] == 0.5 and res["unchecked_samples"] == 0


def test_all_prose_or_unknown_language_reports_na_and_gates_fail(tmp_path, write_jsonl, run_cli):
    prose = write_jsonl("prose.jsonl", [PROSE, {**PROSE, "prompt": "q", "response_mode": None, "lane": "docs_qa"}])
    out = tmp_path / "e.json"
    code, stdout, _ = run_cli("corpus", "eval", prose, "-o", out, "--lang", "vox")
    res = json.loads(out.read_text())
    assert code == 0 and res["prose_samples"] == 2 and res["code_samples"] == 0 and res["parse_rate"] is None
    assert "parse rate n/a (0/0), unchecked 0, prose 2" in stdout and "coverage 0/0 (n/a)" in stdout
    unknown = write_jsonl("unknown.jsonl", [VOX_ADD, VOX_CUT, {"prompt": "s", "response": "```sh\nls -l\n```"}])
    code, stdout, _ = run_cli("corpus", "eval", unknown, "-o", out)
    assert code == 0 and "parse rate n/a (0/0), unchecked 3, prose 0" in stdout
    assert json.loads(out.read_text())["unchecked_reasons"]["fence tag 'sh' names no language pack"] == 1
    # A threshold over nothing checked fails, saying so — it must not pass, nor compare 0 < 0.5.
    code, _, err = run_cli("corpus", "eval", unknown, "-o", out, "--min-parse-rate", "0.5")
    assert code == 1 and "parse_rate n/a: no code sample was checked (3 unchecked, 0 prose;" in err
    assert json.loads(out.read_text())["gate"]["passed"] is False
    code, _, err = run_cli("corpus", "eval", prose, "-o", out, "--min-coverage", "0.1")
    assert code == 1 and "construct coverage n/a: no code sample was checked (0 unchecked, 2 prose;" in err


def test_cli_lang_option(tmp_path, write_jsonl, run_cli):
    src = write_jsonl("vox.jsonl", [VOX_ADD, VOX_BROKEN, VOX_CUT])
    out = tmp_path / "e.json"
    code, stdout, _ = run_cli("corpus", "eval", src, "-o", out, "--lang", "vox", "--min-parse-rate", "0.3")
    assert code == 0 and "parse rate 0.333 (1/3), unchecked 0" in stdout
    code, _, err = run_cli("corpus", "eval", src, "-o", out, "--lang", "vox", "--min-parse-rate", "0.5")
    assert code == 1 and "parse_rate 0.3333 < 0.5" in err
    out.unlink()
    code, _, err = run_cli("corpus", "eval", src, "-o", out, "--lang", "no-such-grammar-xyz")
    assert code == 2 and "unknown language pack 'no-such-grammar-xyz' (--lang)" in err and not out.exists()


def test_corpus_help_names_every_subcommand(run_cli):
    """`mens corpus` alone prints its help; the group's line names each of its commands."""
    code, out, _ = run_cli("corpus")
    summary = " ".join(out.split()).split("positional arguments")[0]
    assert code == 2 and all(name in summary for name in
                             ("extract", "pairs", "validate", "mix", "eval", "stats", "prefs"))


def test_safety_hints_never_hide_a_match():
    # safety_flags skips a pattern whose literal hint is absent; over real text (this repository's
    # sources and docs, which quote every pattern) and the cases above, it finds what a full
    # scan finds.
    from pathlib import Path

    from mens.corpus.safety import SAFETY_PATTERNS

    root = Path(__file__).resolve().parents[2]
    texts = [p.read_text(encoding="utf-8") for p in sorted((root / "src" / "mens").rglob("*.py"))]
    texts += [p.read_text(encoding="utf-8") for p in sorted((root / "docs").glob("*.md"))]
    texts += ["rm -rf / --no-preserve-root", "PASSWORD = 'correcthorsebatterystaple'", "mkfs.ext4 /dev/sdb1",
              "Api-Key: 'abcdefghijklmnop'", "token ghp_" + "a" * 36]
    flagged = 0
    for text in texts:
        full = [name for name, pattern in SAFETY_PATTERNS.items() if pattern.search(text)]
        assert safety_flags(text) == full
        flagged += bool(full)
    assert flagged >= 5
