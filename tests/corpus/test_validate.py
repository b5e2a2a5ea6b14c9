import json
from pathlib import Path

import pytest

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
    assert report.counts["code_checked"] == 4 and report.counts["prose"] == 1 and report.counts["unchecked"] == 0
    rejected = rows(quarantine)
    assert len(rejected) == 6
    duplicate = next(r for r in rejected if r["reason"] == "duplicate")  # names the row that stays
    assert duplicate["where"] == f"{src}:2" and duplicate["error"] == f"same code structure and prompt as {src}:1"
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


# The Vox design's own pair format: plain Vox code in the response, no `lang`, no fence.
VOX_OK = {"instruction": "add two ints", "output": "fn add(a: int, b: int) to int {\n    return a + b\n}\n"}
VOX_BROKEN = {"prompt": "add, broken", "response": "fn add(a: int, b: int) to int {\n    return a +\n}\n"}
VOX_CUT = {"prompt": "cut short", "response": "fn f() {", "category": "function"}


def verdicts(path):
    report = json.loads(Path(path).with_name(Path(path).stem + ".validate_report.json").read_text())
    return {k: report["counts"][k] for k in ("code_checked", "prose", "unchecked")}, report


def test_plain_vox_rows_are_parsed_with_lang_option(tmp_path, write_jsonl):
    src = write_jsonl("vox.jsonl", [VOX_OK, VOX_BROKEN, VOX_CUT])
    out, quarantine = tmp_path / "v.jsonl", tmp_path / "q.jsonl"
    report = validate(src, out, quarantine=quarantine, lang="vox")
    assert [r["prompt"] for r in rows(out)] == ["add two ints"]
    assert report.dropped == {"parse_error": 2}
    assert [(q["row"]["prompt"], q["error"].split(":")[0]) for q in rows(quarantine)] == [("add, broken", "2"),
                                                                                       ("cut short", "1")]
    counts, saved = verdicts(out)
    assert counts == {"code_checked": 1, "prose": 0, "unchecked": 0} and saved["lang"] == "vox"
    assert saved["fingerprint"]["params"]["lang"] == "vox" and saved["fingerprint"]["packs"]["vox"]


def test_plain_rows_without_any_language_are_kept_but_unchecked(tmp_path, write_jsonl):
    src = write_jsonl("vox.jsonl", [VOX_OK, VOX_BROKEN, VOX_CUT])
    out = tmp_path / "v.jsonl"
    report = validate(src, out)
    assert len(rows(out)) == 3 and not report.dropped
    counts, saved = verdicts(out)
    assert counts == {"code_checked": 0, "prose": 0, "unchecked": 3}
    assert saved["unchecked"]["rows"] == 3 and saved["lang"] is None
    assert saved["unchecked"]["why"] == {"no language: no lang field, no fence tag, no --lang": 3}
    assert [e["where"].rsplit(":", 1)[1] for e in saved["unchecked"]["examples"]] == ["1", "2", "3"]


def test_row_lang_or_fence_decides_without_the_option(tmp_path, write_jsonl):
    src = write_jsonl("vox.jsonl", [{**VOX_BROKEN, "lang": "vox"},
                                    {**VOX_CUT, "response": "```vox\nfn f() {\n```"},
                                    {**VOX_OK, "output": "```vox\n" + VOX_OK["output"] + "```"}])
    report = validate(src, tmp_path / "v.jsonl")
    assert report.dropped == {"parse_error": 2} and report.counts["code_checked"] == 1


def test_precedence_row_lang_then_fence_then_option(tmp_path, write_jsonl):
    vox_fn = VOX_OK["output"]
    src = write_jsonl("mixed.jsonl", [
        {"prompt": "p1", "response": "def f(:\n    pass\n", "lang": "python"},   # lang beats --lang: python error
        {"prompt": "p2", "response": "```python\n" + vox_fn + "```", "lang": "vox"},  # lang beats the fence
        {"prompt": "p3", "response": "```py\nx = [1, 2]\n```"},                   # fence beats --lang
        {"prompt": "p4", "response": "```sh\nfn f() {\n```"},                     # a fence tag no pack owns
        {"prompt": "p5", "response": "```\nfn f() {\n```"},                       # bare fence: --lang
    ])
    out, quarantine = tmp_path / "v.jsonl", tmp_path / "q.jsonl"
    report = validate(src, out, quarantine=quarantine, lang="vox")
    assert [r["prompt"] for r in rows(out)] == ["p2", "p3", "p4"]
    assert [q["row"]["prompt"] for q in rows(quarantine)] == ["p1", "p5"]
    assert report.counts["code_checked"] == 2 and report.counts["unchecked"] == 1
    assert report.extra["unchecked"]["why"] == {"fence tag 'sh' names no language pack": 1}


def test_prose_rows_stay_prose_even_with_lang_option(tmp_path, write_jsonl):
    prose = "Loops repeat their body while the condition holds; break leaves early."
    src = write_jsonl("docs.jsonl", [
        {"prompt": "q1", "response": prose, "response_mode": "prose_only", "lane": "docs_qa", "lang": "vox"},
        {"prompt": "q2", "response": prose, "lane": "docs_qa"},                    # the lane says explanation
        {"prompt": "q3", "response": "Like so:\n```vox\nfn f() {\n```", "lane": "docs_qa"},  # its block is code
        {"prompt": "q4", "response": prose, "response_mode": "mixed"},             # no block to check
        {"prompt": "q5", "response": prose, "response_mode": "code_only"},         # says code: parsed, fails
    ])
    out, quarantine = tmp_path / "v.jsonl", tmp_path / "q.jsonl"
    report = validate(src, out, quarantine=quarantine, lang="vox")
    assert [r["prompt"] for r in rows(out)] == ["q1", "q2", "q4"]
    assert [q["row"]["prompt"] for q in rows(quarantine)] == ["q3", "q5"]
    assert report.counts["prose"] == 2 and report.counts["unchecked"] == 1
    assert report.extra["unchecked"]["why"] == {"response_mode mixed without a fenced code block": 1}


def test_cli_lang_option_strict_and_bad_name(tmp_path, write_jsonl, run_cli, capsys):
    src = write_jsonl("vox.jsonl", [VOX_OK, VOX_BROKEN])
    out, quarantine = tmp_path / "v.jsonl", tmp_path / "q.jsonl"
    code, _, _ = run_cli("corpus", "validate", src, "-o", out, "--strict")
    assert code == 0 and len(rows(out)) == 2                      # nothing checkable: nothing rejected
    code, _, err = run_cli("corpus", "validate", src, "-o", out, "--quarantine", quarantine, "--strict",
                           "--lang", "vox")
    assert code == 1 and "1 of 2 rows rejected (parse_error 1)" in err
    assert [r["prompt"] for r in rows(out)] == ["add two ints"] and rows(quarantine)[0]["reason"] == "parse_error"
    other = tmp_path / "other.jsonl"
    code, _, err = run_cli("corpus", "validate", src, "-o", other, "--lang", "no-such-grammar-xyz")
    assert code == 2 and err.startswith("mens: error: unknown language pack 'no-such-grammar-xyz' (--lang) — ")
    assert not other.exists()
    with pytest.raises(SystemExit) as exit_:
        run_cli("corpus", "validate", "--help")
    assert exit_.value.code == 0 and "--lang LANG" in capsys.readouterr().out


def test_pool_matches_serial_with_lang_option(tmp_path, write_jsonl, monkeypatch):
    many = [{"prompt": f"p{i}", "response": f"fn f{i}() to int {{\n    return {i}\n}}\n"} for i in range(30)]
    src = write_jsonl("vox.jsonl", many + [VOX_BROKEN, VOX_CUT])
    validate(src, tmp_path / "serial.jsonl", workers=1, lang="vox")
    monkeypatch.setattr(validate_mod, "SERIAL_BELOW", 0)
    report = validate(src, tmp_path / "pool.jsonl", workers=2, lang="vox")
    assert (tmp_path / "serial.jsonl").read_bytes() == (tmp_path / "pool.jsonl").read_bytes()
    assert report.counts["code_checked"] == 30 and report.dropped == {"parse_error": 2}


AWS_IN_PROMPT = {"prompt": "Use key AKIAABCDEFGHIJKLMNOP to upload", "lang": "python",
                 "response": "```python\ndef upload(key):\n    return key\n```"}
TOKEN_IN_RESPONSE = {"prompt": "connect", "lang": "python",
                     "response": "```python\nTOKEN = 'ghp_" + "a1B2" * 9 + "'\n```"}
SECRET_IN_MESSAGES = {"messages": [{"role": "user", "content": "password = 'hunter2hunter2hunter2'"},
                                   {"role": "assistant", "content": "```python\nx = 3\n```"}], "lang": "python"}


def test_rows_with_secrets_are_quarantined_by_default(tmp_path, write_jsonl, run_cli):
    src = write_jsonl("pairs.jsonl", [GOOD, AWS_IN_PROMPT, TOKEN_IN_RESPONSE, SECRET_IN_MESSAGES])
    out, quarantine = tmp_path / "v.jsonl", tmp_path / "q.jsonl"
    report = validate(src, out, quarantine=quarantine)
    assert rows(out) == [{**GOOD, "schema_version": "mens.pair.v1"}]
    assert report.dropped == {"unsafe": 3} and report.counts["rejected"] == 3
    bad = rows(quarantine)
    assert [r["reason"] for r in bad] == ["unsafe"] * 3
    assert [r["error"] for r in bad] == ["aws_access_key in prompt", "github_token in response",
                                         "hardcoded_secret in messages[0]"]
    assert bad[0]["where"].endswith("pairs.jsonl:2") and bad[0]["row"] == AWS_IN_PROMPT
    # Opting out keeps them, counted.
    report = validate(src, out, keep_unsafe=True)
    assert len(rows(out)) == 4 and report.counts["unsafe_kept"] == 3 and "unsafe" not in report.dropped
    code, _, _ = run_cli("corpus", "validate", src, "-o", out, "--keep-unsafe")
    assert code == 0 and len(rows(out)) == 4
    code, _, _ = run_cli("corpus", "validate", src, "-o", out, "--strict")
    assert code == 1 and len(rows(out)) == 1


def test_eval_counts_a_secret_in_the_prompt(tmp_path, write_jsonl):
    from mens.corpus.evaluate import evaluate

    res = evaluate(write_jsonl("t.jsonl", [GOOD, AWS_IN_PROMPT]), tmp_path / "e.json")
    assert res["safety_rejections"] == 1
    assert any(f["kind"] == "safety" and "aws_access_key in prompt" in f["error"] for f in res["failures"])


def test_bundled_examples_hold_no_unsafe_row(tmp_path):
    from mens.corpus.extract import extract
    from mens.corpus.pairs import make_pairs
    from paths import EXAMPLES

    for name in ("vox", "docs"):
        extract([EXAMPLES / name], tmp_path / f"{name}.units.jsonl")
        make_pairs(tmp_path / f"{name}.units.jsonl", tmp_path / f"{name}.pairs.jsonl")
        report = validate(tmp_path / f"{name}.pairs.jsonl", tmp_path / f"{name}.v.jsonl")
        assert report.counts["kept"] == report.counts["input_rows"] and not report.dropped, report.dropped
    bench = validate(EXAMPLES / "bench" / "vox_heldout.jsonl", tmp_path / "bench.v.jsonl", lang="vox")
    assert "unsafe" not in bench.dropped
