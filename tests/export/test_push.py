"""`mens push`: the exact files and card `--dry-run DIR` writes, and the real upload (a `mens push`
child process, huggingface_hub pointed at tests/export/fake_hub.py with HF_ENDPOINT) commits the
same bytes; bad token, server error and no server are one-line errors."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from bad_input import assert_one_line_error, tree
from fake_hub import TOKEN, FakeHub, free_port


def _front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_adapter_run_dry_run(run_cli, make_adapter_run, tmp_path):
    run = make_adapter_run("push-lora")
    (run / "benchmark_results.json").write_text(json.dumps({"bench": "vox", "k": 1, "pass_at_1": 0.4,
                                                                   "pass_at_k": 0.4, "parse_rate": 0.9}))
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
    types = [m["type"] for r in meta["model-index"][0]["results"] for m in r["metrics"]]
    assert types.count("pass@1") == 1  # k = 1: pass@k is pass@1, listed once
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
def test_bad_input(run_cli, make_adapter_run, tmp_path, args, phrase):
    run = make_adapter_run("push-bad")
    if "--repo" not in args:
        args = ["--repo", "me/x", *args]
    assert_one_line_error(run_cli, ["push", run, *args, "--dry-run", tmp_path / "o"], 2, phrase, [run, tmp_path])


@pytest.mark.parametrize("dry_run, phrase", [
    ("", "--dry-run needs a new folder"),            # never read as "no --dry-run": that would upload
    ("afile", "--dry-run is a file, not a folder"),
    ("afile/sub", "afile is a file, not a folder"),
    ("full", "--dry-run folder exists and is not empty"),
])
def test_bad_dry_run_folder(run_cli, tiny_model_dir, tmp_path, monkeypatch, dry_run, phrase):
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")  # an upload would be tried with it
    (tmp_path / "afile").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    monkeypatch.chdir(tmp_path)
    assert_one_line_error(run_cli, ["push", tiny_model_dir, "--repo", "me/x", "--dry-run", dry_run], 2, phrase,
                          [tmp_path, tiny_model_dir])


def test_no_token(run_cli, tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_TOKEN_PATH", str(tmp_path / "hf" / "token"))
    monkeypatch.setattr(c, "HF_STORED_TOKENS_PATH", str(tmp_path / "hf" / "stored_tokens"))
    assert_one_line_error(run_cli, ["push", tiny_model_dir, "--repo", "me/x"], 2, "no Hugging Face token",
                          [tmp_path])


# -- the real upload, against the local stand-in for the Hub's upload API ----------------------


@pytest.fixture
def hub(tmp_path):
    with FakeHub(tmp_path / "hub") as hub:
        yield hub


def _push_child(args, endpoint: str, home, token: str = TOKEN) -> subprocess.CompletedProcess:
    """`mens push ARGS` as a user runs it, huggingface_hub talking to `endpoint` (set before it is
    imported, the supported way); HF_HOME keeps this machine's own token and cache out."""
    env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_TOKEN": token, "HF_HOME": str(home),
           "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_XET": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
           "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "mens", "push", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def _assert_one_line(proc, phrase: str) -> None:
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mens: error: upload failed: "), proc.stderr
    assert phrase in lines[0], proc.stderr


@pytest.mark.slow
def test_push_to_local_hub(run_cli, make_adapter_run, tiny_model_dir, hub, tmp_path):
    run = make_adapter_run("push-real")
    manifest = json.loads((run / "training_manifest.json").read_text())   # where things were, as mens train writes
    manifest.update(data={"dir": str(tmp_path / "data"), "train_file": str(tmp_path / "data" / "train.jsonl")},
                    hyperparameters={"model": str(tiny_model_dir), "output_dir": str(run), "lr": 1e-3},
                    tokenizer={"source": str(tiny_model_dir)})
    (run / "training_manifest.json").write_text(json.dumps(manifest))
    (run / "benchmark_results.json").write_text(json.dumps({"bench": "vox", "k": 1, "pass_at_1": 0.4,
                                                                   "pass_at_k": 0.4, "parse_rate": 0.9}))
    (run / "gate_receipt.json").write_text(json.dumps({"passed": True, "policy": str(tmp_path / "gates.yaml"),
                                                       "gates": []}))
    (run / "checkpoint-10").mkdir()
    (run / "checkpoint-10" / "adapter_model.safetensors").write_bytes(b"not for the hub")
    (run / "telemetry.jsonl").write_text("{}\n")
    staged = tmp_path / "staged"
    code, _, err = run_cli("push", run, "--repo", "me/vox-lora", "--upstream-model-id", "Qwen/Qwen2.5-0.5B",
                           "--dry-run", staged)
    assert code == 0, err

    proc = _push_child([run, "--repo", "me/vox-lora", "--private", "--upstream-model-id", "Qwen/Qwen2.5-0.5B"],
                       hub.url, tmp_path / "hf")
    assert proc.returncode == 0, proc.stderr
    assert f"pushed 6 files to {hub.url}/me/vox-lora" in proc.stdout
    assert hub.repos == {"me/vox-lora": {"private": True, "commits": [f"mens push {run.name}"]}}
    assert hub.unknown == []

    # exactly the dry run's files, byte for byte; the weights went up through LFS
    uploaded = hub.files("me/vox-lora")
    assert uploaded == {p.name: p.read_bytes() for p in staged.iterdir()}
    assert hub.lfs_paths == ["adapter_model.safetensors"]
    assert set(uploaded) == {"README.md", "adapter_config.json", "adapter_model.safetensors", "tokenizer.json",
                             "tokenizer_config.json", "chat_template.jinja"}
    assert uploaded["adapter_model.safetensors"] == (run / "adapter_model.safetensors").read_bytes()
    meta = _front_matter(uploaded["README.md"].decode())
    assert meta["base_model"] == "Qwen/Qwen2.5-0.5B" and meta["library_name"] == "peft"
    assert json.loads(uploaded["adapter_config.json"])["base_model_name_or_path"] == "Qwen/Qwen2.5-0.5B"
    for name, data in uploaded.items():   # no path of this machine in anything that went up
        for local in (str(tmp_path.parent), str(tmp_path.parent.parent), os.path.expanduser("~")):
            assert local.encode() not in data, (name, local)
    card = uploaded["README.md"].decode()
    assert "| base model | Qwen/Qwen2.5-0.5B |" in card and f"| output_dir | …/{run.name} |" in card
    assert "| train_file | …/train.jsonl |" in card and "policy `…/gates.yaml`" in card

    # a second push to the same repo (exist_ok) commits again; the repo stays private
    again = _push_child([run, "--repo", "me/vox-lora", "--upstream-model-id", "Qwen/Qwen2.5-0.5B"],
                        hub.url, tmp_path / "hf")
    assert again.returncode == 0, again.stderr
    assert hub.repos["me/vox-lora"]["private"] is True and len(hub.repos["me/vox-lora"]["commits"]) == 2


@pytest.mark.slow
def test_push_upload_errors(make_adapter_run, hub, tmp_path):
    run = make_adapter_run("push-errors")
    args = [run, "--repo", "me/vox-lora", "--upstream-model-id", "Qwen/Qwen2.5-0.5B"]
    before = tree(run)

    _assert_one_line(_push_child(args, hub.url, tmp_path / "hf", token="hf_wrong"), "Invalid credentials")
    assert hub.repos == {}

    hub.fail = {"commit": 500}   # (500 on preupload or the LFS batch is retried for ~20 s first)
    _assert_one_line(_push_child(args, hub.url, tmp_path / "hf"), "commit failed on purpose")
    assert hub.files("me/vox-lora") == {}       # the repo was created, nothing committed

    hub.fail = {"lfs": 403}
    _assert_one_line(_push_child(args, hub.url, tmp_path / "hf"), "403 Forbidden")
    assert hub.files("me/vox-lora") == {}

    nobody = f"http://127.0.0.1:{free_port()}"  # a port nothing listens on
    _assert_one_line(_push_child(args, nobody, tmp_path / "hf"), "Connection refused")
    assert tree(run) == before and hub.unknown == []
