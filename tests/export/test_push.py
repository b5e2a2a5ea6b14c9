"""`mens push --dry-run DIR`: the exact files and card that would go to the Hub (no Hub here: the
upload itself is huggingface_hub's upload_folder, not exercised offline; see docs/export.md)."""

import json

import pytest
import yaml

from bad_input import assert_one_line_error


def _front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_adapter_run_dry_run(run_cli, make_adapter_run, tmp_path):
    run = make_adapter_run("push-lora")
    (run / "benchmark_results.json").write_text(json.dumps({"bench": "vox", "pass_at_1": 0.4, "parse_rate": 0.9}))
    (run / "gate_receipt.json").write_text(json.dumps({"passed": True, "policy": "p", "gates": [
        {"name": "parse", "metric": "parse_rate", "value": 0.9, "op": ">=", "threshold": 0.8, "blocking": True,
         "verdict": "pass"}]}))
    (run / "checkpoint-10").mkdir()
    (run / "telemetry.jsonl").write_text("{}\n")
    out = tmp_path / "staged"
    code, stdout, err = run_cli("push", run, "--repo", "me/vox-lora", "--upstream-model-id", "Qwen/Qwen2.5-0.5B",
                                "--dry-run", out)
    assert code == 0, err
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(["README.md", "adapter_config.json", "adapter_model.safetensors", "tokenizer.json",
                            "tokenizer_config.json", "chat_template.jinja"])
    assert json.loads((out / "adapter_config.json").read_text())["base_model_name_or_path"] == "Qwen/Qwen2.5-0.5B"
    card = (out / "README.md").read_text()
    meta = _front_matter(card)
    assert meta["base_model"] == "Qwen/Qwen2.5-0.5B" and meta["library_name"] == "peft"
    assert "mens" in meta["tags"] and "mens-gates-passed" in meta["tags"]
    metrics = {m["type"]: m["value"] for r in meta["model-index"][0]["results"] for m in r["metrics"]}
    assert metrics["pass@1"] == 0.4 and metrics["parse_rate"] == 0.9
    assert "## Gates" in card and "telemetry.jsonl" not in card


def test_merged_dir_dry_run(run_cli, tiny_model_dir, tmp_path):
    out = tmp_path / "staged"
    code, _, err = run_cli("push", tiny_model_dir, "--repo", "me/tiny", "--dry-run", out)
    assert code == 0, err
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= names
    assert "mens_fixture.json" not in names
    meta = _front_matter((out / "README.md").read_text())
    assert meta["library_name"] == "transformers" and "base_model" not in meta


@pytest.mark.parametrize("args,phrase", [
    (["--repo", "not a repo"], "bad --repo"),
    (["--repo", "noowner"], "no owner"),
    ([], "base is a local path"),                      # adapter over a local base, no upstream id
    (["--upstream-model-id", "/some/path"], "not a Hub id"),
])
def test_bad_input(run_cli, make_adapter_run, tmp_path, capsys, args, phrase):
    run = make_adapter_run("push-bad")
    capsys.readouterr()  # the fixture's own loading output
    if "--repo" not in args:
        args = ["--repo", "me/x", *args]
    assert_one_line_error(run_cli, ["push", run, *args, "--dry-run", tmp_path / "o"], 2, phrase, [run, tmp_path])


def test_no_token(run_cli, tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_TOKEN_PATH", str(tmp_path / "hf" / "token"))
    monkeypatch.setattr(c, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf" / "stored_tokens"))
    assert_one_line_error(run_cli, ["push", tiny_model_dir, "--repo", "me/x"], 2, "no Hugging Face token",
                          [tmp_path])
