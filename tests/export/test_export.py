"""`mens export`: checks before loading (always run), the Modelfile and the pre-tokenizer choice
(always run), and the GGUF round trip in llama.cpp (needs the `export` extra, skipped without)."""

import json

import numpy as np
import pytest

from bad_input import assert_one_line_error

PROMPT_USER = "Write a Vox function that adds two numbers.\nfn add(a: int, b: int) to int {\n    return a + b\n}"


# ---------------------------------------------------------------- before anything loads

def _scratch_like(tmp_path):
    """A GPT-2-shaped model with the VoxTokenizer (WordLevel): what `--backend scratch` saves."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from mens.train.vox_tokenizer import build_hf_tokenizer

    d = tmp_path / "scratch"
    tok = build_hf_tokenizer()
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_positions=64)).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.mark.parametrize("case,phrase", [
    ("missing", "not found"),
    ("not-model", "not a run or model directory"),
    ("quant", "unknown --quant"),
    ("suffix", "must name a .gguf file"),
    ("exists", "--gguf already exists"),
    ("lora-no-adapter", "--lora-gguf needs a run with an adapter"),
    ("ollama-file", "--ollama is a file"),
    ("scratch", "WordLevel"),
])
def test_bad_input(run_cli, tiny_model_dir, tmp_path, case, phrase):
    src, out, extra = tiny_model_dir, tmp_path / "m.gguf", []
    if case == "missing":
        src = tmp_path / "nope"
    elif case == "not-model":
        src = tmp_path / "empty"
        src.mkdir()
    elif case == "quant":
        extra = ["--quant", "q3"]
    elif case == "suffix":
        out = tmp_path / "m.bin"
    elif case == "exists":
        out.write_text("x")
    elif case == "lora-no-adapter":
        extra = ["--lora-gguf", tmp_path / "a.gguf"]
    elif case == "ollama-file":
        (tmp_path / "f").write_text("x")
        extra = ["--ollama", tmp_path / "f"]
    elif case == "scratch":
        src = _scratch_like(tmp_path)
    assert_one_line_error(run_cli, ["export", src, "--gguf", out, *extra], 2, phrase, [tmp_path])


def test_modelfile_chatml(tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    from mens.export.ollama import is_chatml, modelfile

    assert is_chatml(AutoTokenizer.from_pretrained(tiny_tokenizer_dir))
    text = modelfile("./m.gguf", chatml=True, stops=["<|im_end|>", "<|endoftext|>"], system="You write Vox.")
    assert text.splitlines()[1] == "FROM ./m.gguf"
    assert 'PARAMETER stop "<|im_end|>"' in text and 'SYSTEM """You write Vox."""' in text
    assert "{{ range .Messages }}" in text.replace("{{-", "{{") and "<|im_start|>assistant\n\"\"\"" in text


def test_pretokenizer_fallback(tiny_model_dir, tmp_path):
    """GPT-2's byte-level regex → gpt-2; transformers re-saves a Qwen2 tokenizer with Qwen2's
    Split regex → qwen2, and a Qwen3.5-MoE one with Qwen3.5's → qwen35 (llama.cpp's names; that
    family's GGUF export stopped on 'pre-tokenizer was not recognized'); an unknown split → None
    (the converter decides)."""
    from transformers import AutoTokenizer

    from families import tiny_family_dir
    from mens.export.gguf import pretokenizer_fallback

    assert pretokenizer_fallback(tiny_model_dir) == "gpt-2"
    AutoTokenizer.from_pretrained(tiny_family_dir("qwen3.5-moe")).save_pretrained(tmp_path / "q35")
    assert pretokenizer_fallback(tmp_path / "q35") == "qwen35"
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tmp_path / "q")   # a Qwen2Tokenizer now
    assert pretokenizer_fallback(tmp_path / "q") == "qwen2"
    tok = json.loads((tmp_path / "q" / "tokenizer.json").read_text())
    tok["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\s+"
    (tmp_path / "q" / "tokenizer.json").write_text(json.dumps(tok))
    assert pretokenizer_fallback(tmp_path / "q") is None


# ---------------------------------------------------------------- the round trip in llama.cpp

def _hf_logits(model_dir, ids):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].numpy()


def _gguf_logits(llama_cpp, path, ids):
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, logits_all=True, verbose=False, seed=0)
    llm.eval(ids)
    return llm, np.array(llm.scores[: len(ids)])


def _prompt_ids(model_dir):
    from mens.chat_template import chat_prompt
    from mens.hf import load_tokenizer

    tok = load_tokenizer(model_dir)
    return tok, tok(chat_prompt(tok, PROMPT_USER), add_special_tokens=False).input_ids


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen2", "llama", "gpt2"])
def test_gguf_matches_transformers(llama_cpp, arch, request, make_adapter_run, tmp_path):
    """f16: top-1 agrees on ≥ 90% of the positions of a real chat prompt, every logit within 0.05;
    q8_0: top-1 ≥ 90% too, its logits within 0.02 of f16's on average and 0.25 at most (the tiny
    random models' logits are ~0.2 wide, so these are loose in relative terms) — docs/export.md."""
    from mens.export.export import export
    from mens.export.gguf import read_info
    from mens.export.merge import merge_run

    base = request.getfixturevalue({"qwen2": "tiny_model_dir", "llama": "tiny_llama_dir",
                                    "gpt2": "tiny_gpt2_dir"}[arch])
    run = make_adapter_run(f"gguf-{arch}", base=base)
    merged = tmp_path / "merged"
    merge_run(run, merged, dtype="bf16")          # what export merges internally (bf16 by default)
    tok, ids = _prompt_ids(merged)
    assert len(ids) > 30
    want = _hf_logits(merged, ids)
    for quant, min_top1 in (("f16", 0.9), ("q8_0", 0.9)):
        out = tmp_path / f"{quant}.gguf"
        export(run, out, quant=quant)
        info = read_info(out)
        assert info.arch == arch and info.chat_template == tok.chat_template
        assert info.tokens[tok.convert_tokens_to_ids("<|im_end|>")] == "<|im_end|>"
        llm, got = _gguf_logits(llama_cpp, out, ids)
        top1 = float(np.mean(got.argmax(-1) == want.argmax(-1)))
        assert top1 >= min_top1, (quant, top1)
        if quant == "f16":
            f16 = got
            assert np.abs(got - want).max() < 0.05, np.abs(got - want).max()
        else:
            diff = np.abs(got - f16)
            assert diff.mean() < 0.02 and diff.max() < 0.25, (diff.mean(), diff.max())
        # llama.cpp tokenizes the prompt as transformers does (the pre-tokenizer mens named)
        text = tok.decode(ids)
        assert llm.tokenize(text.encode(), add_bos=False, special=True) == ids


def _no_lone_bytes(llama_cpp, llm):
    """A logits processor that bans tokens whose bytes are not UTF-8 on their own. llama-cpp-python
    0.3.36's create_completion skips its max_tokens check while it waits for the rest of a
    multi-byte character; a random model that repeats a lone lead byte (0xFA here) never gives it
    one, so generation runs on to the end of the context and llama_decode fails ("failed to find a
    memory slot for batch of size 1"). A trained model does not do that; mens serve's llama.cpp
    engine counts tokens itself and is not affected (tests/serve/test_llamacpp.py)."""
    banned = []
    for i in range(llm.n_vocab()):
        try:
            llm.detokenize([i]).decode("utf-8")
        except UnicodeDecodeError:
            banned.append(i)

    def ban(input_ids, scores):
        scores[banned] = -np.inf
        return scores

    return ban


@pytest.mark.slow
def test_greedy_generation_stops_at_end_of_turn(llama_cpp, make_adapter_run, tmp_path):
    """The GGUF marks <|im_end|> as end of generation: greedy decoding that reaches it stops
    there (finish_reason stop, the token not in the text); a random model reaches it when its
    logit is raised from the third token on, as a trained one does at the end of a turn."""
    from mens.export.export import export

    run = make_adapter_run("gguf-stop")
    out = tmp_path / "m.gguf"
    export(run, out)
    tok, ids = _prompt_ids(run)
    end = tok.convert_tokens_to_ids("<|im_end|>")

    def fresh():
        return llama_cpp.Llama(model_path=str(out), n_ctx=512, n_batch=512, verbose=False, seed=0)

    llm = fresh()
    assert llama_cpp.llama_vocab_is_eog(llm._model.vocab, end)
    ban = _no_lone_bytes(llama_cpp, llm)
    free = llm.create_completion(ids, max_tokens=12, temperature=0.0,
                                 logits_processor=llama_cpp.LogitsProcessorList([ban]))
    assert free["choices"][0]["finish_reason"] == "length" and free["usage"]["completion_tokens"] == 12
    steps = []

    def push_end(input_ids, scores):
        steps.append(1)
        if len(steps) >= 3:
            scores[end] = scores.max() + 10.0
        return scores

    stopped = fresh().create_completion(ids, max_tokens=12, temperature=0.0,
                                        logits_processor=llama_cpp.LogitsProcessorList([ban, push_end]))
    choice = stopped["choices"][0]
    assert choice["finish_reason"] == "stop" and len(steps) == 3 and "<|im_end|>" not in choice["text"]
    assert stopped["usage"]["completion_tokens"] == 2


@pytest.mark.slow
def test_q4_k_m_and_lora_and_ollama(llama_cpp, make_adapter_run, tmp_path):
    """q4_k_m goes through llama.cpp's quantizer; --lora-gguf writes a LoRA llama.cpp loads over
    the base; --ollama writes a Modelfile FROM the exported file."""
    from mens.export.export import export
    from mens.export.gguf import read_info

    run = make_adapter_run("gguf-q4")
    out = tmp_path / "out" / "m.gguf"
    report = export(run, out, quant="q4_k_m", lora_gguf=tmp_path / "out" / "a.gguf", ollama_dir=tmp_path / "ol",
                    system="You write Vox.", upstream_model_id="Qwen/Qwen2.5-0.5B")
    assert read_info(out).file_type == llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    llm = llama_cpp.Llama(model_path=str(out), n_ctx=256, verbose=False)
    tok, _ = _prompt_ids(run)
    assert llama_cpp.llama_vocab_is_eog(llm._model.vocab, tok.convert_tokens_to_ids("<|im_end|>"))
    lora = read_info(tmp_path / "out" / "a.gguf")
    assert lora.arch == "qwen2"
    modelfile = (tmp_path / "ol" / "Modelfile").read_text()
    assert "FROM ../out/m.gguf" in modelfile and 'PARAMETER stop "<|im_end|>"' in modelfile
    assert report.stop_tokens[0] == "<|im_end|>"
    assert not list((tmp_path / "out").glob(".mens-export-*"))
    # the base is named by its Hub id alone: no local path (the run's, its base's, a temp copy's)
    for path in (out, tmp_path / "out" / "a.gguf"):
        strings = _metadata_strings(path)
        assert not [v for v in strings if "/tmp" in v or str(tmp_path) in v or str(run) in v], path
        assert "https://huggingface.co/Qwen/Qwen2.5-0.5B" in strings, path


def _metadata_strings(path) -> list[str]:
    """Every string (and string in an array) of a GGUF's metadata, read with the gguf package."""
    from gguf import GGUFReader

    out = []
    for name, fld in GGUFReader(str(path)).fields.items():
        if name.startswith("GGUF.") or name == "tokenizer.ggml.tokens":
            continue
        value = fld.contents()
        out += [v for v in (value if isinstance(value, list) else [value]) if isinstance(v, str)]
    return out


def test_clean_adapter_copy(make_adapter_run, tmp_path):
    """What the LoRA converter is given: the base named by its Hub id in adapter_config.json and
    in README.md's front matter (where the converter takes general.base_model from), or not at all."""
    import yaml

    from mens.export.gguf import clean_adapter_copy

    run = make_adapter_run("lora-clean")
    assert str(tmp_path.parent) in (run / "README.md").read_text()          # PEFT wrote the local base path
    for upstream, dest in (("Qwen/Qwen2.5-0.5B", tmp_path / "a"), (None, tmp_path / "b")):
        dest.mkdir()
        clean = clean_adapter_copy(run, dest, upstream)
        assert clean.name == run.name and (clean / "adapter_model.safetensors").is_file()
        cfg = json.loads((clean / "adapter_config.json").read_text())
        card = yaml.safe_load((clean / "README.md").read_text().split("---\n")[1])
        assert cfg.get("base_model_name_or_path") == upstream and card.get("base_model") == upstream
        assert str(tmp_path.parent) not in (clean / "adapter_config.json").read_text() + str(card)


@pytest.mark.slow
def test_a_scratch_model_with_its_learned_bpe_is_refused_in_one_line(llama_cpp, run_cli, tmp_path):
    """mens's learned BPE splits text by its own rule, which llama.cpp cannot reproduce: the
    export says so in one line (exit 2) and names what to do instead; nothing is written."""
    from mens.train.scratch import build_model_and_tokenizer, save_scratch_model, scratch_shape, train_bpe_tokenizer

    texts = ["fn crate_count(loaves: int) to int {\n    return (loaves + 11) / 12\n}"] * 20
    model, tok = build_model_and_tokenizer(scratch_shape("tiny", arch="llama"), 0, train_bpe_tokenizer(texts, 300))
    save_scratch_model(model, tok, tmp_path / "base")
    code, _, err = run_cli("export", tmp_path / "base", "--gguf", tmp_path / "out.gguf")
    assert code == 2 and "splits text by a rule llama.cpp does not know" in err and "mens serve" in err, err
    assert len(err.strip().splitlines()) <= 3 and not (tmp_path / "out.gguf").exists()


def _render_ollama(template: str, messages: list[dict]) -> str:
    """Render a Modelfile TEMPLATE as Ollama renders a chat (its template/template.go: `Execute`
    with `collate`): a template that ranges over `.Messages` gets every message, the system ones
    included (the Modelfile's SYSTEM is one, prepended when the request has none), and `.System`
    too, their contents joined. Knows the Go template forms a Modelfile of mens holds:
    `{{ .Field }}`, `{{ if .Field }}`, `{{ range .Messages }}`, `{{ end }}`, `{{-` and `-}}`."""
    import re

    parts = re.split(r"({{.*?}})", template, flags=re.S)
    for i, part in enumerate(parts):  # the trims: whitespace beside `{{-` / `-}}` goes
        if part.startswith("{{"):
            continue
        if i > 0 and parts[i - 1].endswith("-}}"):
            part = part.lstrip()
        if i + 1 < len(parts) and parts[i + 1].startswith("{{-"):
            part = part.rstrip()
        parts[i] = part

    def render(pos: int, scope: dict, out: list[str]) -> int:  # → the index after this block's `end`
        while pos < len(parts):
            part = parts[pos]
            pos += 1
            if not part.startswith("{{"):
                out.append(part)
                continue
            words = part.strip("{}").strip("-").split()
            if words[0] == "end":
                return pos
            if words[0] in ("if", "range"):
                value, block_end = scope[words[1].lstrip(".")], None
                for item in (value if words[0] == "range" else [scope] * bool(value)) or [None]:
                    sink = out if item is not None else []
                    block_end = render(pos, item if item is not None else scope, sink)
                pos = block_end
            else:
                out.append(str(scope[words[0].lstrip(".")]))
        return pos

    out: list[str] = []
    render(0, {"System": "\n\n".join(m["content"] for m in messages if m["role"] == "system"),
               "Messages": [{"Role": m["role"], "Content": m["content"]} for m in messages]}, out)
    return "".join(out)


def test_the_modelfile_template_renders_a_chat_as_the_model_was_trained(tiny_tokenizer_dir):
    """Ollama, rendering the TEMPLATE with the Modelfile's SYSTEM, gives the prompt the model's
    own chat template gives: the system prompt once (it was there twice, from `.System` and again
    among `.Messages`)."""
    from transformers import AutoTokenizer

    from mens.export.ollama import CHATML_GO_TEMPLATE

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    chat = [{"role": "system", "content": "You write Vox."}, {"role": "user", "content": "Add two numbers."},
            {"role": "assistant", "content": "fn add(a: int, b: int) to int {\n    return a + b\n}"},
            {"role": "user", "content": "Now three."}]
    for messages in (chat, chat[1:]):
        want = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert _render_ollama(CHATML_GO_TEMPLATE, messages) == want


def test_a_template_s_default_system_prompt_becomes_the_modelfile_s_system(tiny_tokenizer_dir):
    """Qwen2.5's ChatML template writes "You are a helpful assistant." when a chat has no system
    message, and a model fine-tuned from it was trained so: the Modelfile's SYSTEM carries it (the
    Modelfile had no SYSTEM and Ollama rendered such chats without it)."""
    from transformers import AutoTokenizer

    from mens.export.ollama import CHATML_GO_TEMPLATE, default_system, is_chatml, modelfile
    from test_formats import QWEN25_TOOL_TEMPLATE

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    assert default_system(tok) is None  # mens's own ChatML writes none
    tok.chat_template = QWEN25_TOOL_TEMPLATE
    assert is_chatml(tok) and default_system(tok) == "You are a helpful assistant."
    assert 'SYSTEM """You are a helpful assistant."""' in modelfile(
        "./m.gguf", chatml=True, stops=["<|im_end|>"], system=default_system(tok))
    chat = [{"role": "user", "content": "Add two numbers."}]
    ollama_chat = [{"role": "system", "content": default_system(tok)}, *chat]  # SYSTEM, put first by Ollama
    assert _render_ollama(CHATML_GO_TEMPLATE, ollama_chat) == tok.apply_chat_template(
        chat, tokenize=False, add_generation_prompt=True)
