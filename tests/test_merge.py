"""`mens merge`: the merged model gives the adapter model's outputs and loads with plain transformers."""

import json

import pytest
import torch
from families import FAMILIES, tiny_family_dir
from paths import EXAMPLES


def _logits(model, tok, text="fn add(a: int, b: int) to int {"):
    with torch.no_grad():
        return model(input_ids=tok(text, return_tensors="pt").input_ids).logits.float()


def test_merge_matches_adapter_and_loads_plainly(make_adapter_run, tmp_path, run_cli):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = make_adapter_run("merge-lora", seed=3, copy_tokenizer=False)
    out = tmp_path / "merged"
    code, stdout, err = run_cli("merge", run, "--out", out, "--dtype", "f32", "--max-shard-size", "100KB")
    assert code == 0, err
    assert "max |logit diff|" in stdout
    shards = sorted(out.glob("model-*.safetensors"))
    assert len(shards) > 1 and (out / "model.safetensors.index.json").is_file()
    for name in ("config.json", "generation_config.json", "README.md", "merge_report.json"):
        assert (out / name).is_file(), name
    assert not list(tmp_path.glob(".merged.*")), "temp dir left behind"

    tok = AutoTokenizer.from_pretrained(out)
    assert tok.chat_template and "<|im_start|>" in tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    merged = AutoModelForCausalLM.from_pretrained(out)  # plain transformers, no peft
    manifest = json.loads((run / "training_manifest.json").read_text())
    base = AutoModelForCausalLM.from_pretrained(manifest["base_model"]["path"], dtype=torch.float32)
    adapter_model = PeftModel.from_pretrained(base, str(run)).eval()
    want, got = _logits(adapter_model, tok), _logits(merged, tok)
    assert torch.allclose(want, got, atol=1e-4), (want - got).abs().max()
    with adapter_model.disable_adapter():
        assert (want - _logits(adapter_model, tok)).abs().max() > 1e-2, "the adapter must change outputs"
    report = json.loads((out / "merge_report.json").read_text())
    assert report["max_logit_diff"] < 1e-4 and report["max_logit_diff_saved"] < 1e-4
    gen = json.loads((out / "generation_config.json").read_text())
    assert tok.convert_tokens_to_ids("<|im_end|>") in (gen["eos_token_id"] if isinstance(gen["eos_token_id"], list)
                                                       else [gen["eos_token_id"]])


def test_qlora_run_merges_into_the_fp_base(make_adapter_run, tmp_path):
    from mens.export.merge import merge_run
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = make_adapter_run("merge-qlora", seed=4, backend="qlora")
    report = merge_run(run, tmp_path / "m", dtype="bf16")
    assert report.backend == "qlora" and report.dtype == "bfloat16"
    assert report.max_logit_diff < 1e-4          # fold into fp weights is exact up to fp32 rounding
    assert report.max_logit_diff_saved < 0.1     # then rounded to bf16
    if report.max_logit_diff_vs_nf4 is not None:  # bitsandbytes NF4 ran: the quantisation gap is real
        assert report.max_logit_diff_vs_nf4 > report.max_logit_diff
    tok = AutoTokenizer.from_pretrained(run)
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "m", dtype=torch.float32)
    assert merged.dtype == torch.float32
    base = AutoModelForCausalLM.from_pretrained(report.base, dtype=torch.float32)
    ref = PeftModel.from_pretrained(base, str(run)).eval()
    assert (_logits(ref, tok) - _logits(merged, tok)).abs().max() < 0.1


def test_merge_refuses_non_empty_out_and_missing_run(make_adapter_run, tmp_path, run_cli):
    run = make_adapter_run("merge-errors")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("x")
    code, _, err = run_cli("merge", run, "--out", tmp_path / "taken")
    assert code == 2 and "not empty" in err
    code, _, err = run_cli("merge", tmp_path / "nope", "--out", tmp_path / "o")
    assert code == 2 and err.startswith("mens: error:")


def test_the_merged_card_names_no_local_path_as_its_base(make_adapter_run, tmp_path, run_cli):
    """README.md's `base_model` is Hub metadata (llama.cpp writes it into a GGUF as a
    huggingface.co URL): a local base is left out, the upstream id is used when the run has one."""
    import yaml

    run = make_adapter_run("card-base")
    code, _, err = run_cli("merge", run, "--out", tmp_path / "merged")
    assert code == 0, err
    meta = yaml.safe_load((tmp_path / "merged" / "README.md").read_text().split("---")[1])
    assert "base_model" not in meta and meta["library_name"] == "transformers"


def test_a_whole_model_is_re_saved_and_reported_without_an_adapter(tiny_model_dir, tmp_path, run_cli):
    """A full or scratch run has no adapter: the report and card speak of the re-save alone (they
    said 'adapter vs merged', always 0, as if something had been folded)."""
    out = tmp_path / "saved"
    code, stdout, _ = run_cli("merge", tiny_model_dir, "--out", out, "--dtype", "f32")
    assert code == 0
    assert "run vs saved float32: 0.000e+00" in stdout and "adapter" not in stdout
    card = (out / "README.md").read_text()
    assert "no adapter to fold" in card and "adapter vs" not in card


def test_an_adapter_run_without_its_weights_is_refused_before_loading(make_adapter_run, tmp_path, run_cli):
    """adapter_config.json alone (the weights deleted or never copied): one line naming the
    missing file, before the base is loaded (it said "not a model path or hub id: Repo id must be
    in the form 'repo_name' …" about the run dir, after loading the base)."""
    import shutil

    from bad_input import assert_one_line_error

    run = tmp_path / "run"
    shutil.copytree(make_adapter_run("merge-no-weights"), run)
    (run / "adapter_model.safetensors").unlink()
    err = assert_one_line_error(run_cli, ["merge", run, "--out", tmp_path / "merged"], 2,
                                "adapter_model.safetensors", [tmp_path])
    assert "no adapter weights" in err


def test_the_merged_card_body_names_no_path_of_this_machine(make_adapter_run, tmp_path, run_cli):
    """The merged folder is what users upload (`hf upload`, vLLM hosts): its README.md names the
    run by its folder name and the base by its Hub id (or `…/<name>`), not by where they were
    here (it said "from the lora run `/tmp/…/run` … weights of `/tmp/…/base`")."""
    import yaml

    run = make_adapter_run("card-body")
    manifest = json.loads((run / "training_manifest.json").read_text())
    manifest["provenance"] = {"upstream_model_id": "Qwen/Qwen2.5-0.5B", "license": "apache-2.0"}
    (run / "training_manifest.json").write_text(json.dumps(manifest))
    code, _, err = run_cli("merge", run, "--out", tmp_path / "merged")
    assert code == 0, err
    card = (tmp_path / "merged" / "README.md").read_text()
    assert str(run) not in card and manifest["base_model"]["path"] not in card and "/tmp" not in card, card
    assert f"`{run.name}`" in card and "`Qwen/Qwen2.5-0.5B`" in card
    meta = yaml.safe_load(card.split("---")[1])
    assert meta["base_model"] == "Qwen/Qwen2.5-0.5B" and meta["license"] == "apache-2.0"


def test_a_full_run_saved_without_its_kv_cache_is_merged_with_it(tiny_model_dir, tmp_path, run_cli):
    """`mens train --backend full` saves config.json with training's `use_cache: false`; the
    merged folder is for inference (and the Hub shows its config), so it has `use_cache: true`."""
    import shutil

    run = tmp_path / "full-run"
    shutil.copytree(tiny_model_dir, run)
    cfg = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**cfg, "use_cache": False}))
    code, _, err = run_cli("merge", run, "--out", tmp_path / "merged", "--dtype", "f32")
    assert code == 0, err
    assert json.loads((tmp_path / "merged" / "config.json").read_text())["use_cache"] is True


def test_the_merged_card_header_is_the_hub_metadata_push_writes(make_adapter_run, tmp_path, run_cli):
    """The merged README.md's header says what `mens push`'s does for the same run: the licence as
    the Hub's lower-case id and every value valid YAML (it wrote `license: {as typed}` unquoted, so
    `Apache-2.0` was no Hub licence id and a licence holding ': ' broke the header)."""
    import yaml

    from mens.evaluate.card import hub_metadata

    run = make_adapter_run("card-header")
    manifest = json.loads((run / "training_manifest.json").read_text())
    for licence in ("Apache-2.0", "other: see LICENSE"):
        manifest["provenance"] = {"upstream_model_id": "Qwen/Qwen2.5-0.5B", "license": licence}
        (run / "training_manifest.json").write_text(json.dumps(manifest))
        out = tmp_path / licence.split(":")[0]
        code, _, err = run_cli("merge", run, "--out", out)
        assert code == 0, err
        meta = yaml.safe_load((out / "README.md").read_text().split("---\n")[1])
        pushed = yaml.safe_load(hub_metadata(run, adapter=False, base_model="Qwen/Qwen2.5-0.5B").split("---\n")[1])
        assert meta["license"] == pushed["license"] == licence.lower()
        assert meta["base_model"] == "Qwen/Qwen2.5-0.5B" and meta["library_name"] == "transformers"
        assert meta["tags"] == ["mens", "merged"]


def test_the_saved_folder_carries_sha256sums_that_every_load_checks(tiny_model_dir, tmp_path, run_cli):
    """mens merge writes SHA256SUMS (sha256sum's format); a file changed afterwards (a git-lfs
    pointer, a truncated copy) is a one-line error naming it before any weight loads."""
    import hashlib

    out = tmp_path / "saved"
    assert run_cli("merge", tiny_model_dir, "--out", out, "--dtype", "f32")[0] == 0
    sums = dict(reversed(line.split("  ")) for line in (out / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {p.name for p in out.iterdir()} - {"SHA256SUMS"}
    assert sums["model.safetensors"] == hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()
    (out / "tokenizer.json").write_text((out / "tokenizer.json").read_text().replace('"', "'", 1))
    code, _, err = run_cli("bench", "--model", out, "--bench", EXAMPLES / "bench", "--limit", "1")
    assert code == 2 and err.strip() == (
        f"mens: error: sha256 does not match SHA256SUMS (the file changed or is incomplete) ({out / 'tokenizer.json'})"
        " — restore it (git checkout / git lfs pull / copy it again) or remove the folder's SHA256SUMS if you changed "
        "it on purpose")


def test_the_merged_folder_keeps_the_base_tokenizer_files_llama_cpp_reads(make_adapter_run, tmp_path):
    """transformers 5 saves a tokenizer as tokenizer.json alone, under its generic class name;
    llama.cpp's converter reads Gemma 2's and Phi-3's vocabulary from tokenizer.model and takes
    Phi-4's as GPT-2's only by tokenizer_config's `GPT2Tokenizer` (their GGUF export stopped on
    'File not found: tokenizer.model'). The merge of a run whose copy lost both has the base's."""
    import shutil

    from families import tiny_family_dir
    from mens.export.merge import keep_base_tokenizer_files, merge_run

    base = tmp_path / "phi-base"
    shutil.copytree(tiny_family_dir("phi3"), base)
    config = json.loads((base / "tokenizer_config.json").read_text())
    (base / "tokenizer_config.json").write_text(json.dumps({**config, "tokenizer_class": "GPT2Tokenizer"}))
    (base / "tokenizer.model").write_bytes(b"the SentencePiece model, copied as it is")
    run = make_adapter_run("merge-phi", base=base)
    assert not (run / "tokenizer.model").exists()
    assert json.loads((run / "tokenizer_config.json").read_text())["tokenizer_class"] == "TokenizersBackend"
    merge_run(run, tmp_path / "merged", dtype="f32")
    assert (tmp_path / "merged" / "tokenizer.model").read_bytes() == (base / "tokenizer.model").read_bytes()
    assert json.loads((tmp_path / "merged" / "tokenizer_config.json").read_text())["tokenizer_class"] == "GPT2Tokenizer"
    # a base with another vocabulary (a tokenizer the run trained) gives nothing
    tok = json.loads((base / "tokenizer.json").read_text())
    tok["model"]["vocab"]["<|new|>"] = len(tok["model"]["vocab"])
    (base / "tokenizer.json").write_text(json.dumps(tok))
    (tmp_path / "merged" / "tokenizer.model").unlink()
    keep_base_tokenizer_files(tmp_path / "merged", [str(base)])
    assert not (tmp_path / "merged" / "tokenizer.model").exists()


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_merges_within_1e_5(make_adapter_run, family, tmp_path):
    """A LoRA adapter on every linear layer of each family users fine-tune (tests/families.py),
    folded and saved in fp32: the saved model's logits are the adapter model's within 1e-5."""
    from mens.export.merge import merge_run

    report = merge_run(make_adapter_run(f"merge-{family}", base=tiny_family_dir(family)), tmp_path / "m", dtype="f32")
    assert report.max_logit_diff <= 1e-5 and report.max_logit_diff_saved <= 1e-5, report
