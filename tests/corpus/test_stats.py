import json

from mens.fingerprint import file_hash, fingerprint_block, stage_fingerprint
from mens.corpus.stats import format_stats, stats
from mens.lang import get_pack

ROWS = [
    {"prompt": "a", "response": "x" * 100, "category": "function", "lane": "codegen", "lang": "python", "rating": 4},
    {"prompt": "b", "response": "y" * 3000, "category": "class", "lane": "codegen", "lang": "python", "rating": 5},
    {"prompt": "c", "response": "Prose.", "lane": "docs_qa", "response_mode": "prose_only"},
]


def test_stats_counts_and_char_histogram(tmp_path, write_jsonl, run_cli):
    src = write_jsonl("t.jsonl", ROWS)
    res = stats(src)
    assert res["rows"] == 3 and res["by_lane"] == {"codegen": 2, "docs_qa": 1}
    assert res["by_rating"] == {"4": 1, "5": 1, "none": 1} and res["length_unit"] == "chars"
    assert sum(res["length_histogram"].values()) == 3 and res["length"]["max"] > 3000
    assert json.loads((tmp_path / "t.stats_report.json").read_text())["rows"] == 3
    assert "by category:" in format_stats(res)
    code, out, _ = run_cli("corpus", "stats", src)
    assert code == 0 and "3 rows" in out and "by lane:" in out


def test_stats_with_a_real_tokenizer(tmp_path, write_jsonl, tiny_tokenizer_dir, run_cli):
    src = write_jsonl("t.jsonl", ROWS)
    res = stats(src, tokenizer=tiny_tokenizer_dir, out=tmp_path / "s.json")
    assert res["length_unit"] == "tokens" and 0 < res["length"]["min"] < res["length"]["max"]
    code, _, err = run_cli("corpus", "stats", src, "--tokenizer", tmp_path / "nope")
    assert code == 2 and "tokenizer" in err


def test_fingerprints_change_with_inputs_params_and_packs(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one")
    h1 = file_hash(f)
    python = get_pack("python")
    fp1 = stage_fingerprint([f], {"seed": 0}, [python])
    assert fp1 == stage_fingerprint([f], {"seed": 0}, [python])
    assert fp1 != stage_fingerprint([f], {"seed": 1}, [python])
    assert fp1 != stage_fingerprint([f], {"seed": 0}, [])
    f.write_text("two")
    assert file_hash(f) != h1 and stage_fingerprint([f], {"seed": 0}, [python]) != fp1
    block = fingerprint_block([tmp_path], {}, [python])
    assert block["inputs"] == {str(f): file_hash(f)} and block["packs"] == {"python": python.fingerprint()}
