"""Reference checks of the training math: packing is exact, the loss equals transformers' own,
and accumulated micro-batches equal one big batch (loss and gradients)."""

from __future__ import annotations

import pytest
import torch

from mens.records import Pair
from mens.train.data import IGNORE, build_examples, collate, epoch_batches, pack_rows
from mens.train.loop import batch_loss
from mens.train.model import decoder_and_head

PAIRS = [Pair(prompt="Write a Vox function that adds two numbers.", response="fn add(a: int, b: int) to int {\n    return a + b\n}"),
         Pair(prompt="Explain how match works in Vox.", response="match picks the first arm that fits."),
         Pair(prompt="hello", response="def main():\n    print(\"hello world\")"),
         Pair(messages=[{"role": "user", "content": "count"}, {"role": "assistant", "content": "0123"},
                        {"role": "user", "content": "again"}, {"role": "assistant", "content": "456789"}])]


def _load(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    return model.train(), AutoTokenizer.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory, tiny_tokenizer_dir):
    from tiny import build_model

    return build_model(tmp_path_factory.mktemp("tiny-gpt2"), "gpt2", tokenizer_dir=tiny_tokenizer_dir)


@pytest.fixture(scope="module")
def gemma2_dir(tmp_path_factory, tiny_tokenizer_dir):
    """Gemma 2 soft-caps its logits: the loop's head must do the same (model.ScaledHead)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("tiny-gemma2")
    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    tok.save_pretrained(out)
    cfg = AutoConfig.for_model("gemma2", vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                               max_position_embeddings=512, final_logit_softcapping=2.0,
                               pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(out)
    return out


@pytest.mark.parametrize("arch", ["qwen2", "llama", "gpt2", "gemma2"])
def test_packed_loss_equals_per_sample_loss(arch, tiny_model_dir, tiny_llama_dir, gpt2_dir, gemma2_dir):
    model_dir = {"qwen2": tiny_model_dir, "llama": tiny_llama_dir, "gpt2": gpt2_dir, "gemma2": gemma2_dir}[arch]
    model, tok = _load(model_dir)
    model.config.resid_pdrop = 0.0
    model.eval()  # plain HF model: no dropout in either path
    examples, stats = build_examples(PAIRS, tok, seq_len=256)
    decoder, head = decoder_and_head(model)
    with torch.no_grad():
        packed = collate(pack_rows(examples, seq_len=512), tok.pad_token_id)
        assert packed.input_ids.shape[0] == 1  # everything in one row
        s_packed, n_packed = batch_loss(decoder, head, packed, "cpu", chunk_size=7)
        s_single, n_single = 0.0, 0
        for ex in examples:
            s, n = batch_loss(decoder, head, collate(pack_rows([ex], 512), tok.pad_token_id), "cpu", 1024)
            s_single, n_single = s_single + float(s), n_single + n
            # ... and each single example matches transformers' own shifted cross-entropy.
            ref = model(input_ids=torch.tensor([ex.input_ids]), labels=torch.tensor([ex.labels])).loss
            assert float(s) / n == pytest.approx(float(ref), rel=1e-5)
    assert n_packed == n_single == stats.supervised_tokens
    assert float(s_packed) == pytest.approx(s_single, rel=1e-5)


def test_labels_cover_only_assistant_turns(tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    (ex,), _ = build_examples(PAIRS[3:], tok, seq_len=256)
    supervised = tok.decode([t for t in ex.labels if t != IGNORE])
    assert supervised == "0123<|im_end|>456789<|im_end|>"


def test_examples_built_in_shares_equal_one_build(tiny_tokenizer_dir):
    """What `mens train --nproc N` ranks build (a share each, `distributed.build_in_shares`) and
    merge is what one process builds: the same examples in the same order, the same counts."""
    from transformers import AutoTokenizer

    from mens.train.data import DataStats

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    pairs = PAIRS + [Pair(prompt="long " * 200, response="fn cut() to int {\n    return 1\n}")]
    whole, whole_stats = build_examples(pairs, tok, seq_len=64)
    parts = [build_examples(pairs[lo:hi], tok, seq_len=64, stats=DataStats(pairs=lo)) for lo, hi in ((0, 2), (2, 5))]
    assert [ex for exs, _ in parts for ex in exs] == whole
    merged = DataStats.merged([st for _, st in parts], len(pairs))
    assert merged == whole_stats and merged.truncated_examples == 1 and merged.pairs == 5


def test_packed_rows_restart_positions_and_never_predict_across_samples(tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    examples, _ = build_examples(PAIRS, tok, seq_len=256)
    a, b = examples[0], examples[1]
    rows = pack_rows([a, b], seq_len=len(a.input_ids) + len(b.input_ids))
    assert len(rows) == 1
    batch = collate(rows + pack_rows([a], 256), tok.pad_token_id)
    pos, tgt = batch.position_ids, batch.targets
    assert pos[0, len(a.input_ids)] == 0  # the second sample starts again at 0
    assert tgt[0, len(a.input_ids) - 1] == IGNORE  # a's last token does not predict b's first
    assert pos[1, len(a.input_ids)] == 0 and (tgt[1, len(a.input_ids):] == IGNORE).all()  # padding
    assert batch.n_supervised == 2 * a.n_supervised + b.n_supervised


def test_truncation_keeps_prompt_start_and_whole_response(tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    from mens.train.data import DataStats

    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    long = Pair(prompt="Explain how match works in Vox. " * 20, response="fn add(a: int, b: int) to int")
    (full,), _ = build_examples([long], tok, seq_len=4096)
    (cut,), stats = build_examples([long], tok, seq_len=60)
    assert len(cut.input_ids) == 60 and stats.truncated_examples == 1
    assert stats.truncated_prompt_tokens == len(full.input_ids) - 60 and stats.truncated_response_tokens == 0
    assert cut.input_ids[:10] == full.input_ids[:10]  # the start of the prompt
    assert cut.input_ids[-full.n_supervised - 1:] == full.input_ids[-full.n_supervised - 1:]  # the whole response
    warning = stats.truncation_warning(60)
    assert warning.startswith("mens: warning: 1 of 1 training examples (100%) are longer than --seq-len 60")
    assert f"{stats.truncated_prompt_tokens} prompt and 0 response tokens dropped" in warning
    short = Pair(prompt="a", response="b")
    _, stats = build_examples([long] + [short] * 9, tok, seq_len=60)  # 1 of 10 cut: not worth a warning
    assert stats.truncated_examples == 1 and stats.truncation_warning(60) is None
    _, stats = build_examples([long] * 2 + [short] * 8, tok, seq_len=60)
    assert "2 of 10 training examples (20%)" in stats.truncation_warning(60)
    # --ce-last-k and --min-rating
    (last3,), _ = build_examples([long], tok, seq_len=4096, ce_last_k=3)
    assert last3.n_supervised == 3
    rated = [Pair(prompt="a", response="b", rating=2), Pair(prompt="a", response="b", rating=5)]
    kept, stats = build_examples(rated, tok, seq_len=64, min_rating=4, stats=DataStats())
    assert len(kept) == 1 and stats.dropped_min_rating == 1


def test_accumulated_micro_batches_equal_one_big_batch(tiny_model_dir):
    """4 micro-batches of one row, each divided by the window's supervised tokens, give the
    same loss and gradients as one batch of 4 rows (what the loop does per step)."""
    from peft import LoraConfig, get_peft_model

    model, tok = _load(tiny_model_dir)
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear",
                                             init_lora_weights=False))
    decoder, head = decoder_and_head(model)
    examples, _ = build_examples(PAIRS * 2, tok, seq_len=64)
    params = [p for p in model.parameters() if p.requires_grad]

    def grads(micro_batch: int):
        batches = epoch_batches(examples, 64, micro_batch, seed=1, epoch=0, pad_id=tok.pad_token_id)
        n_window = sum(b.n_supervised for b in batches)
        total = 0.0
        for b in batches:
            s, _ = batch_loss(decoder, head, b, "cpu", 1024)
            (s / n_window).backward()
            total += float(s.detach())
        out = [p.grad.clone() for p in params]
        model.zero_grad(set_to_none=True)
        return total / n_window, out, len(batches)

    loss_small, g_small, n_small = grads(1)
    loss_big, g_big, n_big = grads(n_small)
    assert n_big == 1 and n_small > 1
    assert loss_small == pytest.approx(loss_big, rel=1e-5)
    for a, b in zip(g_small, g_big):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_real_qwen2_template_masks_only_assistant_turns():
    from paths import SHARED_ASSETS
    from transformers import AutoTokenizer

    path = SHARED_ASSETS / "qwen2-tokenizer"
    if not path.is_dir():
        pytest.skip("shared Qwen2 tokenizer not present")
    tok = AutoTokenizer.from_pretrained(path)
    (single, multi), stats = build_examples([PAIRS[0], PAIRS[3]], tok, seq_len=512)
    assert stats.chat_format == "template"
    text = tok.decode(single.input_ids)
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant")  # the template's own start
    assert tok.decode([t for t in single.labels if t != IGNORE]) == PAIRS[0].response + "<|im_end|>"
    assert tok.decode([t for t in multi.labels if t != IGNORE]) == "0123<|im_end|>456789<|im_end|>"
