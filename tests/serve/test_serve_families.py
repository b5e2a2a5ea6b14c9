"""Every family users fine-tune (tests/families.py), served: through the real openai client, a
streamed chat, a non-streamed chat and a two-prompt completion that joins the running batch
answer exactly what transformers' greedy `generate` answers for each alone — Gated DeltaNet
states (Qwen3.5, Qwen3-Next) joined and dropped row by row, sliding windows crossed (prompts
longer than the window of 16). docs/serving.md's family table says what the engine does with
each; a cache the engine cannot batch is served one request at a time, exactly, and says so."""

import re
import threading
import time

import pytest

from families import FAMILIES, WINDOW, family_config, tiny_family_dir
from live_server import API_KEY, LiveServer
from paths import REPO

SYSTEM = "You write Vox, a small language for apps. Answer with code only."   # the prompt > WINDOW
LONG = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Write a Vox function that adds."}]
CHAT = [{"role": "user", "content": "Explain how match works in Vox."}]
PROMPTS = ["fn", "type Shape = | Circle(r: int) | Rect(w: int, h: int)\ncomponent Counter(start: int) {"]


def _greedy(model, tok, text: str, max_tokens: int, *shorter: int) -> str | list[str]:
    """transformers' greedy `generate` of `text` alone, `max_tokens` tokens (the model's stop ids
    off); with `shorter` lengths, also the answer cut to each of them (greedy: a prefix)."""
    import torch

    ids = tok(text, return_tensors="pt", add_special_tokens=False).input_ids
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_tokens,
                             do_sample=False, pad_token_id=tok.pad_token_id)[0, ids.shape[1]:]
    texts = [tok.decode(out[:n], skip_special_tokens=True) for n in (max_tokens, *shorter)]
    return texts if shorter else texts[0]


def _serve(model_dir, name: str) -> LiveServer:
    """A live server over `model_dir`, its stop tokens off: a random model ends early at random,
    and every answer should run its whole length (through the window and the joins)."""
    from mens.serve.app import build_server

    app, engine = build_server(str(model_dir), name=name, api_key=API_KEY, max_batch=8, queue_size=8, device="cpu")
    engine.eos_ids = []
    return LiveServer(app, engine)


def _join_while_running(engine, long_ids: list[int], prompt_ids: list[list[int]]) -> list[str]:
    """Start `long_ids` (16 tokens), and while it decodes queue `prompt_ids` (6 tokens each): they
    are prefilled together, left-padded, joined to the running row, and leave before it ends.
    The engine thread is held inside the long answer's first token until they are queued, so the
    join happens on any machine (held at the token, not at its text: a random model's first
    tokens may be half characters, which the engine streams only once whole). → each answer's
    text, the long one first."""
    from mens.serve.requests import Request, Sampling

    texts, done, held, gate = {}, [], threading.Event(), threading.Event()

    def sink(key, ev):
        if ev[0] == "delta":
            texts[key] = texts.get(key, "") + ev[2]
        else:   # ("done", …) or ("error", message): a failed answer shows up as its error
            done.append(key)
            texts[key] = texts.get(key, "") + ("" if ev[0] == "done" else f"<{ev}>")

    long = Request(long_ids, Sampling(max_tokens=16, temperature=0), lambda ev: sink(0, ev))
    accept = engine._accept

    def accept_and_hold(seq, token):
        accept(seq, token)
        if seq.req is long and not held.is_set():
            held.set()
            gate.wait(30)

    engine._accept = accept_and_hold
    engine.submit(long)
    assert held.wait(60)
    engine.submit_all([Request(ids, Sampling(max_tokens=6, temperature=0), lambda ev, k=k: sink(k, ev))
                       for k, ids in enumerate(prompt_ids, 1)])
    gate.set()
    deadline = time.time() + 120
    while len(done) < 1 + len(prompt_ids):
        assert time.time() < deadline, "the engine did not finish"
        time.sleep(0.01)
    assert done[-1] == 0                    # the newcomers left the batch first
    return [texts.get(k, "") for k in range(1 + len(prompt_ids))]


@pytest.mark.slow   # a live server per family
@pytest.mark.parametrize("family", FAMILIES)
def test_served_answers_equal_generate(family):
    """Rows joined to a running batch and dropped from it, then a streamed and a plain chat at
    once through the openai client: each answer is what `generate` answers for it alone."""
    model_dir = tiny_family_dir(family)
    server = _serve(model_dir, family)
    engine, tok = server.engine, server.engine.tokenizer
    template = lambda messages: tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)  # noqa: E731
    try:
        long_ids = tok(template(LONG), add_special_tokens=False).input_ids
        joined = _join_while_running(engine, long_ids, [tok(p).input_ids for p in PROMPTS])
        stats = engine.snapshot()
        client, answers = server.client(), {}
        assert client.models.retrieve(family).model_extra["batching"] == "continuous"
        chat = threading.Thread(target=lambda: answers.update(chat=client.chat.completions.create(
            model=family, messages=CHAT, max_tokens=8, temperature=0)))
        chat.start()
        stream = client.chat.completions.create(model=family, messages=LONG, max_tokens=8, temperature=0,
                                                stream=True)
        streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        chat.join(60)
    finally:
        server.close()
    assert len(long_ids) > WINDOW and stats["max_batch_size"] == 3 and stats["prefills"] == 2
    model = engine.model
    long_answer, long_start = _greedy(model, tok, template(LONG), 16, 8)
    assert joined == [long_answer, *(_greedy(model, tok, p, 6) for p in PROMPTS)]
    assert streamed == long_start
    assert answers["chat"].choices[0].message.content == _greedy(model, tok, template(CHAT), 8)


# ---------------------------------------------------------------- the family table in docs/serving.md

def _table(doc: str, heading: str) -> dict[str, list[str]]:
    """The rows of the markdown table under `heading` in docs/`doc`, by their first cell."""
    text = (REPO / "docs" / doc).read_text()
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip().strip("`") for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("|") and not re.match(r"\|\s*-", line)]
    return {row[0]: row[1:] for row in rows[1:]}


def _cache_kinds(config) -> str:
    """The kinds of cache layer the engine builds for `config`, in layer order, deduplicated."""
    from mens.serve.batch_cache import new_cache

    names = {"DynamicLayer": "full", "SlidingLayerKeptWhole": "sliding (kept whole)",
             "LinearAttentionLayer": "Gated DeltaNet state"}
    kinds = [names.get(type(layer).__name__, type(layer).__name__) for layer in new_cache(config).layers]
    return " + ".join(dict.fromkeys(kinds))


def test_the_family_table_says_what_the_engine_does():
    from mens.serve.batch_cache import row_batching

    table = _table("serving.md", "### Families")
    assert set(table) == set(FAMILIES)
    for family, (model_type, cache, batching, exact) in table.items():
        config = family_config(family, vocab_size=384)
        assert model_type == FAMILIES[family].model_type
        assert cache == _cache_kinds(config), family
        assert batching == ("continuous" if row_batching(config) is None else "one request at a time"), family
        assert exact == "yes", family   # test_served_answers_equal_generate proves it


# ---------------------------------------------------------------- one request at a time

def _lfm2_dir(tmp_path_factory):
    """A tiny LFM2 (Liquid AI: short-convolution layers + attention), a family the engine has no
    proof of joining rows for (its conv state is not in batch_cache.EXACT_PADDED_LINEAR)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from tiny import build_tokenizer

    out = build_tokenizer(tmp_path_factory.mktemp("tiny-lfm2"))
    tok = AutoTokenizer.from_pretrained(out)
    cfg = AutoConfig.for_model("lfm2", vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                               layer_types=["conv", "full_attention"], max_position_embeddings=512,
                               eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(cfg).save_pretrained(out)
    return out


@pytest.mark.slow   # a live server
def test_a_cache_the_engine_cannot_batch_is_served_one_request_at_a_time(tmp_path_factory):
    model_dir = _lfm2_dir(tmp_path_factory)
    server = _serve(model_dir, "lfm2")
    try:
        client = server.client()
        batching = client.models.retrieve("lfm2").model_extra["batching"]
        assert batching.startswith("one request at a time: lfm2 layer 0 (conv)")
        outcome = {}
        chat = threading.Thread(target=lambda: outcome.update(chat=client.chat.completions.create(
            model="lfm2", messages=CHAT, max_tokens=8, temperature=0)))
        chat.start()
        completion = client.completions.create(model="lfm2", prompt=PROMPTS, max_tokens=8, temperature=0)
        chat.join(60)
        # two choices sampled together; the one that stops first rides along, never sampled again:
        # choice i of seed s is what choice 0 of seed s + i is, served alone
        pair = client.completions.create(model="lfm2", prompt="fn", max_tokens=16, temperature=1.0, seed=7, n=2,
                                         stop=["e"])
        alone = [client.completions.create(model="lfm2", prompt="fn", max_tokens=16, temperature=1.0, seed=7 + i,
                                           stop=["e"]).choices[0].text for i in range(2)]
        stats = server.engine.snapshot()
    finally:
        server.close()
    assert [c.text for c in sorted(pair.choices, key=lambda c: c.index)] == alone
    assert len(alone[0]) != len(alone[1])         # the two ended at different steps
    assert stats["max_batch_size"] == 2           # the two choices of one request, never two requests
    model, tok = server.engine.model, server.engine.tokenizer
    chat_text = tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    assert outcome["chat"].choices[0].message.content == _greedy(model, tok, chat_text, 8)
    assert [c.text for c in completion.choices] == [_greedy(model, tok, p, 8) for p in PROMPTS]
