import json
from pathlib import Path

import pytest

from mens.corpus.mix import load_config, mix
from mens.errors import MensError


def rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def pairs(tag, n, lane="codegen"):
    return [{"prompt": f"{tag} {i}", "response": f"r{i}", "lane": lane} for i in range(n)]


@pytest.fixture
def sources(write_jsonl):
    write_jsonl("a.jsonl", pairs("a", 200))
    write_jsonl("b.jsonl", pairs("b", 100, lane="docs_qa"))


def config(tmp_path, text):
    path = tmp_path / "mix.yaml"
    path.write_text(text)
    return path


def test_weights_shares_report_and_reproducibility(tmp_path, sources):
    cfg = config(tmp_path, "sources:\n  - {path: a.jsonl, weight: 2.5}\n  - {path: b.jsonl, weight: 0.5}\n"
                           "  - {path: c.jsonl, optional: true}\noutput: out/train.jsonl\nseed: 3\n")
    report = mix(cfg)
    out = tmp_path / "out" / "train.jsonl"
    got = rows(out)
    a = sum(r["prompt"].startswith("a") for r in got)
    b = len(got) - a
    assert 460 <= a <= 540 and 30 <= b <= 70  # 2.5 × 200 and 0.5 × 100, floor plus Bernoulli
    # Each row of a appears 2 or 3 times, never another count.
    counts = {}
    for r in got:
        counts[r["prompt"]] = counts.get(r["prompt"], 0) + 1
    assert {v for k, v in counts.items() if k.startswith("a")} <= {2, 3}
    saved = json.loads((tmp_path / "out" / "train.mix_report.json").read_text())
    by_path = {Path(s["path"]).name: s for s in saved["sources"]}
    assert by_path["a.jsonl"]["input_rows"] == 200 and by_path["a.jsonl"]["emitted_rows"] == a
    assert by_path["a.jsonl"]["fingerprint"] and abs(by_path["b.jsonl"]["share"] - b / len(got)) < 1e-5
    assert by_path["c.jsonl"]["skipped_reason"] == "missing (optional)" and by_path["c.jsonl"]["emitted_rows"] == 0
    assert report.counts["output_rows"] == len(got)
    first = out.read_bytes()
    mix(cfg)
    assert out.read_bytes() == first  # same seed, same bytes
    cfg.write_text(cfg.read_text().replace("seed: 3", "seed: 4"))
    mix(cfg)
    assert out.read_bytes() != first


def test_lanes_sample_rate_and_no_shuffle(tmp_path, sources):
    cfg = config(tmp_path, "sources: [a.jsonl, {path: b.jsonl, sample_rate: 0.5}]\noutput: t.jsonl\n"
                           "exclude_lanes: [codegen]\nshuffle: false\n")
    mix(cfg)
    got = rows(tmp_path / "t.jsonl")
    assert all(r["lane"] == "docs_qa" for r in got) and 30 <= len(got) <= 70
    assert [r["prompt"] for r in got] == sorted((r["prompt"] for r in got), key=lambda p: int(p.split()[1]))
    cfg = config(tmp_path, "sources: [a.jsonl, b.jsonl]\noutput: t.jsonl\ninclude_lanes: [codegen]\n")
    assert mix(cfg).counts["output_rows"] == 200


def test_max_chars_drops_the_rows_a_training_window_would_cut(tmp_path, write_jsonl):
    write_jsonl("long.jsonl", [{"prompt": "p" * 10, "response": "r" * n} for n in (5, 20, 90)]
                + [{"messages": [{"role": "user", "content": "u" * 50}, {"role": "assistant", "content": "a" * 60}]}])
    report = mix(config(tmp_path, "sources: [{path: long.jsonl, max_chars: 30}]\noutput: t.jsonl\n"))
    assert sorted(len(r["response"]) for r in rows(tmp_path / "t.jsonl")) == [5, 20]
    assert report.counts["output_rows"] == 2 and report.dropped["too_long"] == 2
    saved = json.loads((tmp_path / "t.mix_report.json").read_text())
    assert saved["sources"][0]["max_chars"] == 30 and "100 characters, over max_chars 30" in json.dumps(saved)


def test_missing_source_fails_unless_allowed(tmp_path, sources, run_cli):
    cfg = config(tmp_path, "sources: [a.jsonl, nope.jsonl]\noutput: t.jsonl\n")
    code, _, err = run_cli("corpus", "mix", "--config", cfg)
    assert code == 2 and "mix source not found" in err and "nope.jsonl" in err
    assert not (tmp_path / "t.jsonl").exists()
    code, _, _ = run_cli("corpus", "mix", "--config", cfg, "--allow-missing-sources")
    assert code == 0 and len(rows(tmp_path / "t.jsonl")) == 200


@pytest.mark.parametrize("text, message", [
    ("- just a list", "must be a mapping"),
    ("sources: []\noutput: t.jsonl", "non-empty list"),
    ("sources: [a.jsonl]", "'output'"),
    ("sources: [{path: a.jsonl, weight: -1}]\noutput: t.jsonl", "'weight'"),
    ("sources: [{path: a.jsonl, sample_rate: 2}]\noutput: t.jsonl", "'sample_rate'"),
    ("sources: [{path: a.jsonl, weight: 1.0e+9}]\noutput: t.jsonl", "'weight' must be a number between 0.0 and 100.0"),
    ("sources: [{path: a.jsonl, color: red}]\noutput: t.jsonl", "unknown source key"),
    ("sources: [a.jsonl]\noutput: t.jsonl\nseeed: 1", "unknown key"),
    ("sources: [a.jsonl]\noutput: t.jsonl\nseed: x", "'seed'"),
    ("sources: [{path: a.jsonl, record_format: csv}]\noutput: t.jsonl", "record_format"),
    ("sources: [{path: a.jsonl, max_chars: 0}]\noutput: t.jsonl", "'max_chars' must be a whole number"),
    ("sources: [a.jsonl\n", "not valid YAML"),
])
def test_bad_config_is_a_clear_error(tmp_path, sources, text, message):
    with pytest.raises(MensError, match=message):
        load_config(config(tmp_path, text))


@pytest.mark.parametrize("text, what, todo", [
    ("sources: [{path: a.jsonl, wieght: 2}]\noutput: t.jsonl", "unknown source key 'wieght'", "did you mean 'weight'?"),
    ("sources: [a.jsonl]\noutput: t.jsonl\nseeed: 1", "unknown key 'seeed'", "did you mean 'seed'?"),
])
def test_a_misspelt_key_is_named_with_the_close_one(tmp_path, sources, text, what, todo):
    with pytest.raises(MensError) as err:
        load_config(config(tmp_path, text))
    assert err.value.what == what and err.value.todo == todo


def test_malformed_rows_strict_by_default(tmp_path, write_jsonl, run_cli):
    write_jsonl("a.jsonl", pairs("a", 3) + ['{"prompt": "x"}'])
    cfg = config(tmp_path, "sources: [a.jsonl]\noutput: t.jsonl\n")
    code, _, err = run_cli("corpus", "mix", "--config", cfg)
    assert code == 2 and "a.jsonl:4" in err and not (tmp_path / "t.jsonl").exists()
    code, _, _ = run_cli("corpus", "mix", "--config", cfg, "--lenient")
    assert code == 0 and len(rows(tmp_path / "t.jsonl")) == 3
    write_jsonl("alpaca.jsonl", [{"instruction": "i", "output": "o"}])
    cfg = config(tmp_path, "sources: [{path: alpaca.jsonl, record_format: messages}]\noutput: t.jsonl\n")
    with pytest.raises(MensError, match="record_format"):
        mix(cfg)


def test_a_spec_object_mixes_like_its_yaml(tmp_path, sources):
    """`mens pipeline` hands mix a MixConfig built from plain data: same rows as the YAML, errors
    name where the spec came from, and the report records the spec, not a file."""
    from mens.corpus.mix import mix_pairs, parse_config

    spec = {"sources": [{"path": "a.jsonl", "weight": 1.5}, "b.jsonl"], "output": "yaml/train.jsonl", "seed": 4}
    mix(config(tmp_path, json.dumps(spec)))
    cfg = parse_config({**spec, "output": "obj/train.jsonl"}, tmp_path, "pipeline config: mix")
    report = mix_pairs(cfg, where="pipeline config: mix")
    assert (tmp_path / "obj" / "train.jsonl").read_bytes() == (tmp_path / "yaml" / "train.jsonl").read_bytes()
    saved = json.loads((tmp_path / "obj" / "train.mix_report.json").read_text())
    assert set(saved["fingerprint"]["inputs"]) == {str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")}
    assert saved["fingerprint"]["params"]["config"]["seed"] == 4 and report.counts["output_rows"] > 300
    with pytest.raises(MensError, match=r"unknown key 'nope'") as err:
        parse_config({**spec, "nope": 1}, tmp_path, "pipeline config: mix")
    assert err.value.where == "pipeline config: mix"
