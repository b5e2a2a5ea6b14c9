import json

from mens.evaluate.contamination import find_contamination, normalise


def test_normalise():
    assert normalise("  Write a   FUNCTION, please!\n") == "write a function please"


def test_prompt_and_reformatted_reference_are_found(tmp_path, run_cli):
    bench = tmp_path / "bench.jsonl"
    tasks = [
        {"id": "leaked", "category": "function", "lang": "python",
         "prompt": "Write a Python function that returns the sum of two integers a and b.",
         "expect_contains": ["def"]},
        {"id": "ref", "category": "function", "lang": "python", "prompt": "Something else entirely here.",
         "expect_contains": [], "reference": "def mul(a, b):\n    return a * b\n"},
        {"id": "clean", "category": "function", "lang": "python", "prompt": "Write a sorting routine for lists.",
         "expect_contains": []},
    ]
    bench.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    data = tmp_path / "train.jsonl"
    rows = [
        {"prompt": "Please: write a python function that returns the SUM of two integers a and b!", "response": "x"},
        {"prompt": "multiply", "response": "```python\ndef mul(a,   b):\n    # times\n    return a*b\n```"},
        {"prompt": "Write a sorting routine", "response": "def s(x):\n    return sorted(x)"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = find_contamination(bench, [data])
    assert report["contaminated"] == ["leaked", "ref"]
    assert {(h["id"], h["field"]) for h in report["hits"]} == {("leaked", "prompt"), ("ref", "reference")}

    code, out, _ = run_cli("decontaminate", "--bench", bench, "--data", data, "-o", tmp_path / "r.json")
    assert code == 1 and "leaked: prompt found in" in out
    assert json.loads((tmp_path / "r.json").read_text())["tasks_checked"] == 3
    clean = tmp_path / "clean.jsonl"
    clean.write_text(json.dumps(rows[2]) + "\n")
    code, out, _ = run_cli("decontaminate", "--bench", bench, "--data", clean)
    assert code == 0 and "0 contaminated" in out


def test_rows_with_fields_of_any_type_are_read_not_a_traceback(tmp_path, run_cli):
    """Any row shape counts: a number prompt beside messages, messages that are not a list."""
    bench = tmp_path / "bench.jsonl"
    bench.write_text(json.dumps({"id": "t", "lang": "python", "prompt": "Write a sorting routine for lists.",
                                 "expect_contains": []}) + "\n")
    data = tmp_path / "train.jsonl"
    rows = [{"prompt": 5, "messages": [{"role": "user", "content": "write a sorting routine for lists"},
                                       {"role": "assistant", "content": "x"}]},
            {"prompt": "a", "response": ["b"], "messages": 5}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = run_cli("decontaminate", "--bench", bench, "--data", data)
    assert "Traceback" not in err and code == 0, err
    assert "2 training rows: 0 contaminated" in out
