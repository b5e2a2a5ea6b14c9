"""Scratch builders: shapes, seeded init, raw-text chunks, save/load as a plain HF model."""

from __future__ import annotations

import pytest
import torch

from mens.errors import MensError
from mens.train import vox_tokenizer as vt
from mens.train.scratch import (SCRATCH_PRESETS, ScratchShape, build_model_and_tokenizer, gpt2_config,
                                raw_text_chunks, save_scratch_model, scratch_shape)

TINY = SCRATCH_PRESETS["tiny"]


def test_default_shape_is_the_design_shape():
    assert SCRATCH_PRESETS["default"] == ScratchShape(n_layer=12, n_head=8, n_embd=512, n_inner=2048,
                                                      dropout=0.1, n_positions=512)
    assert set(SCRATCH_PRESETS) >= {"default", "small", "tiny"}


def test_builder_shapes_and_special_ids():
    model, tok = build_model_and_tokenizer(TINY, seed=0)
    cfg = model.config
    assert (cfg.model_type, cfg.vocab_size, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.n_inner, cfg.n_positions) == \
        ("gpt2", 133, 2, 4, 128, 512, 256)
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id) == (vt.EOS_ID, vt.IM_END_ID, vt.PAD_ID)
    assert model.get_input_embeddings().weight.shape == (133, 128)
    assert len(model.transformer.h) == 2 and model.transformer.h[0].mlp.c_fc.nf == 512
    assert len(tok) == 133 and tok.eos_token_id == vt.IM_END_ID
    from transformers import GPT2LMHeadModel

    with torch.device("meta"):  # the DESIGN shape without allocating or initialising 38M weights
        default = GPT2LMHeadModel(gpt2_config(SCRATCH_PRESETS["default"]))
    n = sum(p.numel() for p in default.parameters())
    assert 37e6 < n < 39e6  # 12 x 512-wide blocks with 2048 FFN, tied 133-token head
    assert default.config.resid_pdrop == default.config.attn_pdrop == default.config.embd_pdrop == 0.1


def test_init_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a = build_model_and_tokenizer(TINY, seed=7)[0]
    after = torch.rand(3)
    b = build_model_and_tokenizer(TINY, seed=7)[0]
    c = build_model_and_tokenizer(TINY, seed=8)[0]
    assert torch.equal(expected, after)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["transformer.h.0.attn.c_attn.weight"], sc["transformer.h.0.attn.c_attn.weight"])


def test_shape_overrides_and_errors():
    s = scratch_shape("tiny", n_layer=3, n_embd=None)
    assert (s.n_layer, s.n_embd) == (3, 128)
    with pytest.raises(MensError, match="unknown scratch preset"):
        scratch_shape("huge")
    with pytest.raises(MensError, match="not divisible"):
        scratch_shape("tiny", n_head=3)
    with pytest.raises(MensError, match="unknown architecture"):
        scratch_shape("tiny", arch="mamba")


def test_packed_sequences_do_not_attend_to_each_other():
    # The loop packs examples with restarting position ids and no attention mask; GPT-2 must
    # read that as separate sequences, so packed logits equal the logits of each on its own.
    # Only without a KV cache: with one, transformers ignores the restarting positions (which
    # is why the loop sets `config.use_cache = False`).
    model, _ = build_model_and_tokenizer(TINY, seed=0)
    model.eval()
    a, b = vt.encode("fn add(a: int) to int {"), vt.encode("let x = 1\n")
    packed = torch.tensor([a + b])
    positions = torch.tensor([list(range(len(a))) + list(range(len(b)))])
    with torch.no_grad():
        out = model(input_ids=packed, position_ids=positions, use_cache=False).logits[0]
        la = model(input_ids=torch.tensor([a])).logits[0]
        lb = model(input_ids=torch.tensor([b])).logits[0]
    torch.testing.assert_close(out, torch.cat([la, lb]), atol=1e-5, rtol=1e-4)


def test_raw_text_chunks(tmp_path):
    (tmp_path / "a.vox").write_text("fn a() to int {\n\treturn 1\n}\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.vox").write_text("let x = 2\n")
    (tmp_path / ".hidden").write_text("ignored")
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2binary")
    tok = vt.build_hf_tokenizer()
    stream = vt.encode("fn a() to int {\n\treturn 1\n}\n") + [vt.EOS_ID] + vt.encode("let x = 2\n") + [vt.EOS_ID]
    chunks = raw_text_chunks(tmp_path, tok, seq_len=8)
    assert [t for c in chunks for t in c] == stream
    assert all(len(c) == 8 for c in chunks[:-1]) and 2 <= len(chunks[-1]) <= 8
    assert raw_text_chunks(tmp_path, tok, seq_len=1000) == [stream]
    with pytest.raises(MensError, match="does not exist"):
        raw_text_chunks(tmp_path / "missing", tok, 8)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(MensError, match="no text files"):
        raw_text_chunks(empty, tok, 8)


def test_save_and_load_as_plain_hf_model(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = build_model_and_tokenizer(TINY, seed=0)
    model.config.use_cache = False  # as training leaves it: saved on all the same (for inference)
    (tmp_path / "manifest.json").write_text("{}")  # files the run keeps beside the model survive
    save_scratch_model(model, tok, tmp_path)
    names = {p.name for p in tmp_path.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
            "tokenizer_config.json", "manifest.json"} <= names
    assert not [n for n in names if n.startswith(".")]
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert loaded.config.use_cache is True and model.config.use_cache is False
    ltok = AutoTokenizer.from_pretrained(tmp_path)
    assert ltok.chat_template and "<|im_start|>" in ltok.chat_template
    assert loaded.generation_config.eos_token_id == [vt.IM_END_ID, vt.EOS_ID]
    ids = torch.tensor([vt.encode("fn main() {")])
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits)
    out = loaded.generate(ids, max_new_tokens=5, do_sample=False)
    assert out.shape[1] > ids.shape[1]
    assert ltok.decode(out[0]).startswith("fn main() {")


def _vox_pairs(n: int) -> list[dict]:
    """Small, regular Vox prompt/response pairs: enough structure for a tiny model to learn fast."""
    ops = [("add", "+"), ("sub", "-"), ("mul", "*")]
    rows = []
    for i in range(n):
        name, op = ops[i % 3]
        k = i % 7 + 1
        rows.append({"prompt": f"Write a Vox function `{name}_{k}` that combines a and b with {op} and {k}.",
                     "response": f"```vox\nfn {name}_{k}(a: int, b: int) to int {{\n    let c = a {op} b\n"
                                 f"    return c {op} {k}\n}}\n```"})
    return rows


def test_mens_train_scratch_tiny_end_to_end(tmp_path, run_cli):
    import json

    from transformers import AutoModelForCausalLM, AutoTokenizer

    data, run = tmp_path / "data", tmp_path / "run"
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _vox_pairs(42)))
    code, out, err = run_cli("train", "--backend", "scratch", "--preset", "tiny", "--data-dir", data,
                             "--output-dir", run, "--max-steps", 24, "--lr", 3e-3, "--warmup-steps", 4,
                             "--micro-batch", 4, "--eval-interval", 0, "--save-interval", 0, "--device", "cpu")
    assert code == 0, err
    assert "were cut" not in err  # every pair fits the preset's sequence length: no truncation warning
    events = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
    losses = [e["loss"] for e in events if e["event"] == "step"]
    assert len(losses) == 24
    first, last = losses[0], sum(losses[-5:]) / 5
    assert first > 4.0 and last < 0.5 * first, (first, last)  # from ~ln(133) to well below half

    manifest = json.loads((run / "training_manifest.json").read_text())
    assert manifest["scratch_shape"] == SCRATCH_PRESETS["tiny"].to_dict()  # --preset tiny → tiny shape
    model = AutoModelForCausalLM.from_pretrained(run)
    tok = AutoTokenizer.from_pretrained(run)
    assert model.config.model_type == "gpt2" and model.config.n_layer == 2 and len(tok) == 133
    prompt = tok.apply_chat_template([{"role": "user", "content": "Write a Vox function `add_3`."}],
                                     tokenize=False, add_generation_prompt=True)
    ids = tok(prompt, return_tensors="pt")
    gen = model.generate(**ids, max_new_tokens=40, do_sample=False)[0, ids["input_ids"].shape[1]:]
    assert len(gen) > 0 and int(gen.max()) < 133
    text = tok.decode(gen, skip_special_tokens=True)
    assert "fn" in text or "```" in text, text  # it has at least picked up the shape of an answer


def test_learned_bpe_tokenizer_round_trips_and_keeps_names_whole(tmp_path):
    from transformers import AutoTokenizer

    from mens.train.scratch import train_bpe_tokenizer

    code = "```vox\nfn crate_count(loaves: int) to int {\n    return (loaves + 11) / 12\n}\n```"
    texts = [f"Write `crate_count` {i}" for i in range(20)] + [code] * 20
    tok = train_bpe_tokenizer(texts, 300)
    assert tok.convert_tokens_to_ids(["[PAD]", "[UNK]", "[EOS]", "<|im_start|>", "<|im_end|>"]) == [0, 1, 2, 3, 4]
    chat = tok.apply_chat_template([{"role": "user", "content": "hi `x_y` café"},
                                    {"role": "assistant", "content": code}], tokenize=False)
    assert tok.decode(tok(chat)["input_ids"]) == chat  # byte-level: every text round-trips
    # A name is the same pieces after a space, a backtick or a bracket (so it can be copied).
    pieces = [tok.tokenize(s)[1:] for s in (" loaves", "`loaves", "(loaves")]
    assert pieces[0] == pieces[1] == pieces[2]
    model, tok = build_model_and_tokenizer(TINY, seed=0, tokenizer=tok)
    assert model.config.vocab_size == len(tok) and model.generation_config.eos_token_id == [4, 2]
    save_scratch_model(model, tok, tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)(chat)["input_ids"] == tok(chat)["input_ids"]
    with pytest.raises(MensError, match="at least 261"):
        train_bpe_tokenizer(texts, 200)


@pytest.mark.parametrize("as_file", [False, True])
def test_learned_bpe_reads_the_training_data_however_it_is_named(tmp_path, as_file):
    """The tokenizer learns from the pairs training reads: a folder's train.jsonl or the file itself
    (what the pipeline's scratch stage passes), in any row format. It once looked only for
    DIR/train.jsonl, so a file learned no merges at all: 261 ids of bytes, every program a few
    hundred ids longer than the bench's token budget."""
    import json

    from mens.train.scratch import train_bpe_tokenizer, training_texts

    rows = [{"messages": [{"role": "user", "content": f"Write `crate_count_{i}` in Vox"},
                          {"role": "assistant", "content": "```vox\nfn crate_count(loaves: int) to int {\n"
                                                           "    return (loaves + 11) / 12\n}\n```"}]}
            for i in range(30)]
    data = tmp_path / ("synthetic.jsonl" if as_file else "train.jsonl")
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    texts = list(training_texts(data if as_file else tmp_path))
    assert len(texts) == 60 and texts[0] == "Write `crate_count_0` in Vox"
    tok = train_bpe_tokenizer(texts, 300)
    assert len(tok) == 300 and tok.tokenize("return loaves") == ["return", "Ġ", "loaves"]  # merges learned


def test_bf16_mixed_on_cpu_trains_like_fp32(tmp_path, run_cli):
    """--dtype bf16-mixed: fp32 weights and optimizer, matmuls under CPU autocast. It must learn
    as fp32 does (the same data and seed end at nearly the same loss) and save fp32 weights."""
    import json

    from safetensors.torch import load_file

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _vox_pairs(42)))
    finals = {}
    for dtype in ("fp32", "bf16-mixed"):
        run = tmp_path / dtype
        code, _, err = run_cli("train", "--backend", "scratch", "--preset", "tiny", "--data-dir", data,
                               "--output-dir", run, "--max-steps", 24, "--lr", 3e-3, "--warmup-steps", 4,
                               "--micro-batch", 4, "--eval-interval", 0, "--save-interval", 0, "--device", "cpu",
                               "--dtype", dtype)
        assert code == 0, err
        losses = [e["loss"] for e in map(json.loads, (run / "telemetry.jsonl").read_text().splitlines())
                  if e["event"] == "step"]
        finals[dtype] = sum(losses[-5:]) / 5
        manifest = json.loads((run / "training_manifest.json").read_text())
        assert manifest["dtype"] == ("float32+bf16-autocast" if dtype == "bf16-mixed" else "float32")
        assert {str(t.dtype) for t in load_file(run / "model.safetensors").values()} == {"torch.float32"}
    assert abs(finals["bf16-mixed"] - finals["fp32"]) < 0.1 * finals["fp32"], finals


def test_auto_dtype_is_bf16_mixed_only_on_a_cpu_where_bf16_pays(tmp_path, run_cli, monkeypatch):
    """`dtype: auto` (the quickstart's) computes in bf16 where the CPU's bf16 matmuls beat fp32's
    (MENS_CPU_BF16 stands for the measured verdict, probe.cpu_bf16) and in fp32 where bf16 is
    emulated or slower; asking for bf16-mixed on such a CPU still gets it, with a warning that
    says what it costs."""
    import json

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _vox_pairs(8)))
    for native, dtype, expect in (("1", "auto", "float32+bf16-autocast"), ("0", "auto", "float32"),
                                  ("0", "bf16-mixed", "float32+bf16-autocast")):
        monkeypatch.setenv("MENS_CPU_BF16", native)
        run = tmp_path / f"{native}-{dtype}"
        code, _, err = run_cli("train", "--backend", "scratch", "--preset", "tiny", "--data-dir", data,
                               "--output-dir", run, "--max-steps", 2, "--eval-interval", 0, "--save-interval", 0,
                               "--device", "cpu", "--dtype", dtype)
        assert code == 0, err
        assert json.loads((run / "training_manifest.json").read_text())["dtype"] == expect
        assert ("bf16 matmuls are slower than fp32 on this CPU" in err) == (dtype == "bf16-mixed"), err


def test_llama_arch_trains_saves_and_loads(tmp_path, run_cli):
    """--scratch-arch llama: a rotary-position, SwiGLU model of the same sizes, trained by the same
    loop, saved as a plain HF Llama directory that AutoModelForCausalLM loads to the same logits;
    packed examples still do not attend to each other (restarting position ids)."""
    import json

    from transformers import AutoModelForCausalLM

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _vox_pairs(42)))
    run = tmp_path / "run"
    code, _, err = run_cli("train", "--backend", "scratch", "--preset", "tiny", "--data-dir", data,
                           "--output-dir", run, "--max-steps", 24, "--lr", 3e-3, "--warmup-steps", 4,
                           "--micro-batch", 4, "--eval-interval", 0, "--save-interval", 0, "--device", "cpu",
                           "--scratch-arch", "llama")
    assert code == 0, err
    losses = [e["loss"] for e in map(json.loads, (run / "telemetry.jsonl").read_text().splitlines())
              if e["event"] == "step"]
    assert sum(losses[-5:]) / 5 < 0.5 * losses[0], losses
    manifest = json.loads((run / "training_manifest.json").read_text())
    assert manifest["scratch_shape"]["arch"] == "llama"
    model = AutoModelForCausalLM.from_pretrained(run).eval()
    assert model.config.model_type == "llama" and model.config.hidden_size == TINY.n_embd
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    whole = model(input_ids=ids).logits
    # Packed rows as training passes them (no KV cache: transformers finds packed sequences by
    # their restarting positions only then; the saved config has the cache on, for inference).
    packed = model(input_ids=torch.cat([ids, ids], 1), position_ids=torch.tensor([list(range(6)) * 2]),
                   use_cache=False).logits
    assert torch.allclose(packed[:, 6:], whole, atol=1e-4)  # the second copy sees only itself


def test_fp16_mixed_scales_the_loss_and_skips_overflowing_steps(tmp_path):
    """--dtype fp16-mixed: fp32 weights, fp16 autocast, dynamic loss scaling. The gradients are
    unscaled before they are clipped and logged (the first steps' norms are fp32's), a step whose
    scaled gradients overflow fp16 is skipped (logged with no norm) and the scale halved, the
    model still learns, and the scale travels in the checkpoint: a run interrupted after the
    scale came down and resumed ends exactly as the uninterrupted run."""
    import json
    import os
    import signal

    from safetensors.torch import load_file

    from mens.train.config import resolve_config
    from mens.train.loop import train

    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _vox_pairs(42)))

    def cfg(out, dtype):
        return resolve_config({"backend": "scratch", "preset": "tiny", "data_dir": str(data), "output_dir": str(out),
                               "max_steps": 16, "lr": 3e-3, "warmup_steps": 4, "micro_batch": 4, "eval_interval": 0,
                               "save_interval": 0, "device": "cpu", "dtype": dtype, "log_interval": 1})

    def steps(run):
        return [e for e in map(json.loads, (run / "telemetry.jsonl").read_text().splitlines()) if e["event"] == "step"]

    fp32 = train(cfg(tmp_path / "fp32", "fp32"))
    whole = train(cfg(tmp_path / "whole", "fp16-mixed"))
    ref, got = steps(tmp_path / "fp32"), steps(tmp_path / "whole")
    for a, b in zip(ref[:4], got[:4]):  # before any overflow: fp32's loss and gradient norm
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-3) and b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-2)
    skipped = [e["step"] for e in got if e["grad_norm"] is None]
    assert skipped, "the first scale (2**16) overflows fp16 on this model's gradient spike"
    assert whole.final_loss < 0.35 * got[0]["loss"] and fp32.final_loss < 0.35 * ref[0]["loss"]
    manifest = json.loads((tmp_path / "whole" / "training_manifest.json").read_text())
    assert manifest["dtype"] == "float32+fp16-autocast"
    assert {str(t.dtype) for t in load_file(tmp_path / "whole" / "model.safetensors").values()} == {"torch.float32"}

    cut_at = skipped[-1] + 1

    def ctrl_c(step: int, loss: float) -> None:
        if step == cut_at:
            os.kill(os.getpid(), signal.SIGINT)

    run = tmp_path / "cut"
    first = train(cfg(run, "fp16-mixed"), on_step=ctrl_c)
    assert first.status == "interrupted"
    saved = json.loads((run / "checkpoints" / f"step-{cut_at}" / "progress.json").read_text())
    assert saved["loss_scale"]["scale"] == 2.0 ** 16 / 2 ** len(skipped)
    second = train(cfg(run, "fp16-mixed"))
    assert first.losses + second.losses == pytest.approx(whole.losses, rel=1e-6, abs=0)


def test_fp16_mixed_is_refused_for_qlora():
    from mens.errors import MensError
    from mens.train.config import resolve_config

    with pytest.raises(MensError, match="fp16-mixed does not apply to qlora"):
        resolve_config({"backend": "qlora", "model": "m", "dtype": "fp16-mixed"})


def test_joined_bpe_words_take_the_space_before_them_and_cost_fewer_tokens():
    """`--scratch-bpe-spaces joined` (the shipped base's tokenizer): ` loaves` is one piece with its
    space, as code models' tokenizers cut it, and the same code costs fewer ids than `apart`."""
    from mens.train.scratch import train_bpe_tokenizer

    code = "fn crate_count(loaves: int) to int {\n    return (loaves + 11) / 12\n}\n"
    texts = [f"Write `crate_count` for {i} loaves" for i in range(30)] + [code] * 30
    apart, joined = train_bpe_tokenizer(texts, 320), train_bpe_tokenizer(texts, 320, spaces="joined")
    assert "Ġloaves" in joined.tokenize("return loaves") and "Ġloaves" not in apart.tokenize("return loaves")
    assert len(joined.tokenize(code)) < len(apart.tokenize(code))
    assert joined.decode(joined(code)["input_ids"]) == code


def test_a_bpe_learns_from_an_even_sample_of_a_large_corpus(monkeypatch):
    """Past BPE_TRAIN_MAX_CHARS the merges come from every k-th text, all of the corpus's kinds kept."""
    from mens.train import scratch

    monkeypatch.setattr(scratch, "BPE_TRAIN_MAX_CHARS", 2_000)
    texts = ["alpha beta gamma " * 5] * 40 + ["{ brace; } " * 8] * 40
    tok = scratch.train_bpe_tokenizer(texts, 300)
    assert tok.tokenize("alpha") == ["alpha"] and tok.tokenize("brace") == ["brace"]  # both kinds sampled
