import json
from pathlib import Path

from mens.corpus import validate as validate_mod
from mens.corpus.validate import validate

GOOD = {"prompt": "add", "response": "```python\ndef add(a, b):\n    return a + b\n```", "lang": "python",
        "category": "function"}
SAME_SHAPE = {**GOOD, "response": "```python\ndef add(a, b):  # same code, other layout\n    return a+b\n```"}
OTHER_PROMPT = {**GOOD, "prompt": "sum two numbers"}
BROKEN = {"prompt": "bad", "response": "```python\ndef add(a, b:\n    return a\n```", "lang": "python"}
PLAIN = {"prompt": "plain", "response": "x = [1, 2,", "lang": "python"}  # no fence: the whole response
FENCED_NO_LANG = {"prompt": "fence only", "response": "```py\nprint(1)\n```"}
PROSE = {"prompt": "explain", "response": "Loops repeat.", "response_mode": "prose_only", "lang": "python"}
UNKNOWN = {"prompt": "rust?", "response": "fn main() {}", "lang": "no-such-grammar-xyz"}
BAD_MODE = {**OTHER_PROMPT, "prompt": "mode", "response_mode": "poetry"}
MESSAGES = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "```python\nx = 1\n```"},
                         {"role": "user", "content": "b"}, {"role": "assistant", "content": "```python\nx = 2\n```"}],
            "lang": "python"}


def rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_parse_dedupe_schema_and_quarantine(tmp_path, write_jsonl):
    src = write_jsonl("pairs.jsonl", [GOOD, SAME_SHAPE, OTHER_PROMPT, BROKEN, PLAIN, FENCED_NO_LANG, PROSE,
                                      UNKNOWN, BAD_MODE, MESSAGES, {"prompt": "no response"}])
    out, quarantine = tmp_path / "v.jsonl", tmp_path / "q.jsonl"
    report = validate(src, out, quarantine=quarantine)
    kept = rows(out)
    assert [r.get("prompt") or r["messages"][0]["content"] for r in kept] == [
        "add", "sum two numbers", "fence only", "explain", "a"]
    assert report.dropped == {"duplicate": 1, "parse_error": 2, "unknown_lang": 1, "schema": 2}
    assert report.counts["code_checked"] == 4 and report.counts["unchecked"] == 1
    rejected = rows(quarantine)
    assert len(rejected) == 6
    broken = next(r for r in rejected if r["row"]["prompt"] == "bad")
    assert broken["reason"] == "parse_error" and broken["error"].startswith("1:") and broken["where"].endswith(":4")
    saved = json.loads((tmp_path / "v.validate_report.json").read_text())
    assert saved["counts"]["kept"] == 5 and saved["fingerprint"]["packs"]["python"]


def test_strict_exits_1_after_writing_and_clean_input_passes(tmp_path, write_jsonl, run_cli):
    src = write_jsonl("pairs.jsonl", [GOOD, BROKEN])
    out = tmp_path / "v.jsonl"
    code, _, err = run_cli("corpus", "validate", src, "-o", out, "--strict")
    assert code == 1 and "1 of 2 rows rejected" in err and len(rows(out)) == 1
    clean = write_jsonl("clean.jsonl", [GOOD, OTHER_PROMPT])
    code, _, _ = run_cli("corpus", "validate", clean, "-o", out, "--strict")
    assert code == 0


def test_malformed_lines_error_or_lenient(tmp_path, write_jsonl, run_cli):
    src = write_jsonl("pairs.jsonl", [GOOD, "{broken json", OTHER_PROMPT])
    out = tmp_path / "v.jsonl"
    code, _, err = run_cli("corpus", "validate", src, "-o", out)
    assert code == 2 and "pairs.jsonl:2" in err and "malformed JSON" in err and not out.exists()
    code, _, _ = run_cli("corpus", "validate", src, "-o", out, "--lenient")
    assert code == 0 and len(rows(out)) == 2
    assert json.loads((tmp_path / "v.validate_report.json").read_text())["dropped"] == {"malformed": 1}
    code, _, err = run_cli("corpus", "validate", src, "-o", src)
    assert code == 2 and "overwrite the input" in err


def test_pool_matches_serial(tmp_path, write_jsonl, monkeypatch):
    many = [{**GOOD, "prompt": f"p{i}", "response": f"```python\nx{i} = {i}\n```"} for i in range(50)]
    src = write_jsonl("pairs.jsonl", many + [BROKEN, GOOD, GOOD])
    validate(src, tmp_path / "serial.jsonl", workers=1)
    monkeypatch.setattr(validate_mod, "SERIAL_BELOW", 0)
    validate(src, tmp_path / "pool.jsonl", workers=2)
    assert (tmp_path / "serial.jsonl").read_bytes() == (tmp_path / "pool.jsonl").read_bytes()
