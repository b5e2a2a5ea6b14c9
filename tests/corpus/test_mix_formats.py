"""`mens corpus mix` takes sources in every row format mens.formats knows (and Parquet files),
writes them out in the pair contract, and `mens train`'s reader reads that output back."""

from __future__ import annotations

import json

import pytest

from mens.corpus.mix import mix
from mens.errors import MensError
from mens.records import read_pairs

SOURCES = {
    "alpaca.jsonl": [{"instruction": "Fix this.", "input": "fn f( {", "output": "fn f() {}"}],
    "sharegpt.jsonl": [{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}],
    "trl.jsonl": [{"prompt": "2+2?", "completion": "4"}],
    "messages.jsonl": [{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}],
    "text.jsonl": [{"text": "fn main() {}"}],
    "trace.jsonl": [{"prompt": "build", "trace": [{"command": "vox build", "output": "ok"}], "response": "done"}],
}


def config(tmp_path, body):
    path = tmp_path / "mix.yaml"
    path.write_text(body)
    return path


@pytest.fixture
def sources(write_jsonl):
    for name, rows in SOURCES.items():
        write_jsonl(name, rows)


def test_every_format_mixes_into_one_file_train_reads(tmp_path, sources):
    entries = "".join(f"  - {{path: {name}}}\n" for name in SOURCES if name != "trace.jsonl")
    cfg = config(tmp_path, "sources:\n" + entries + "  - {path: trace.jsonl, record_format: tool_trace}\n"
                 "output: train.jsonl\nshuffle: false\n")
    report = mix(cfg)
    assert report.counts["output_rows"] == len(SOURCES)
    pairs, _ = read_pairs(tmp_path / "train.jsonl")  # one format: the pair contract, stamped
    alpaca, sharegpt, trl, messages, text, trace = pairs
    assert alpaca.prompt == "Fix this.\nfn f( {" and alpaca.response == "fn f() {}"
    assert sharegpt.messages[0] == {"role": "user", "content": "hi"}
    assert (trl.prompt, trl.response) == ("2+2?", "4") and messages.response == "a"
    assert text.text == "fn main() {}"
    assert trace.lane == "tooling" and trace.tools[0]["function"]["name"] == "shell"
    assert trace.messages[1]["tool_calls"][0]["function"]["arguments"] == {"command": "vox build"}
    lines = (tmp_path / "train.jsonl").read_text().splitlines()
    assert all(json.loads(line)["schema_version"] == "mens.pair.v1" for line in lines)


def test_a_declared_format_and_a_mixed_source_fail_naming_the_line(tmp_path, sources, write_jsonl, run_cli):
    cfg = config(tmp_path, "sources: [{path: sharegpt.jsonl, record_format: alpaca}]\noutput: t.jsonl\n")
    with pytest.raises(MensError, match="row is in format sharegpt, not the record_format alpaca"):
        mix(cfg)
    write_jsonl("mixed.jsonl", SOURCES["trl.jsonl"] + SOURCES["text.jsonl"])
    cfg = config(tmp_path, "sources: [mixed.jsonl]\noutput: t.jsonl\n")
    code, _, err = run_cli("corpus", "mix", "--config", cfg)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"mixed.jsonl:2" in err and "format text" in err and "prompt_completion" in err
    code, _, _ = run_cli("corpus", "mix", "--config", cfg, "--lenient")
    assert code == 0 and len(read_pairs(tmp_path / "t.jsonl")[0]) == 1
    cfg = config(tmp_path, "sources: [{path: a.jsonl, record_format: csv}]\noutput: t.jsonl\n")
    with pytest.raises(MensError, match="record_format must be one of auto, pair, messages"):
        mix(cfg)


def test_parquet_sources_and_an_offline_hub_source(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(SOURCES["sharegpt.jsonl"] * 3), tmp_path / "chats.parquet")
    report = mix(config(tmp_path, "sources: [chats.parquet]\noutput: t.jsonl\n"))
    assert report.counts["output_rows"] == 3 and report.extra["sources"][0]["fingerprint"]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(MensError, match="offline"):
        mix(config(tmp_path, "sources: [{path: 'hf:tatsu-lab/alpaca'}]\noutput: t.jsonl\n"))
