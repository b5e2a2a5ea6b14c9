"""The batching engine on its own: continuous batching joins newcomers mid-decode, and a request
that breaks the model fails alone."""

import threading
import time

import pytest


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    from mens.inference import load_model
    from mens.serve.engine import Engine

    model, tok, _ = load_model(tiny_model_dir, device="cpu")
    eng = Engine(model, tok, context_window=512, max_batch=4)
    yield eng
    eng.stop()


def _submit(engine, prompt_ids, max_tokens):
    from mens.serve.requests import Request, Sampling

    events, done = [], threading.Event()

    def sink(ev):
        events.append(ev)
        if ev[0] in ("done", "error"):
            done.set()

    engine.submit(Request(prompt_ids, Sampling(max_tokens=max_tokens, temperature=0), sink))
    return events, done


def test_newcomers_join_a_running_batch(engine):
    tok = engine.tokenizer
    long_events, long_done = _submit(engine, tok("fn add(a: int").input_ids, 60)
    while not any(e[0] == "delta" for e in long_events):
        time.sleep(0.005)
    before = engine.snapshot()["prefills"]
    short_events, short_done = _submit(engine, tok("The quick brown fox jumps").input_ids, 5)
    assert short_done.wait(30) and not long_done.is_set()     # finished while the long one still runs
    assert long_done.wait(60)
    assert engine.snapshot()["prefills"] == before + 1 and engine.snapshot()["batch_size_histogram"].get("2")
    assert short_events[-1][:3] == ("done", 0, "length") and long_events[-1][3] == 60


def test_a_failing_request_fails_alone(engine):
    tok = engine.tokenizer
    good_events, good_done = _submit(engine, tok("def").input_ids, 30)
    while not any(e[0] == "delta" for e in good_events):
        time.sleep(0.005)
    bad_events, bad_done = _submit(engine, [10 ** 6], 5)       # an id past the embedding table
    assert bad_done.wait(30) and bad_events[-1][0] == "error"
    assert good_done.wait(60) and good_events[-1][:3] == ("done", 0, "length")
    after_events, after_done = _submit(engine, tok("fn").input_ids, 3)
    assert after_done.wait(30) and after_events[-1][0] == "done"


def test_a_request_that_breaks_sampling_or_admission_fails_alone(engine):
    """Past the API's checks nothing a request carries can stop the engine: a max_tokens of None
    breaks sampling for its row only, a seed torch cannot take breaks admission for that request
    only, and a sink that raises just cancels its request."""
    from mens.serve.requests import Request, Sampling

    tok = engine.tokenizer
    good_events, good_done = _submit(engine, tok("def").input_ids, 30)
    while not any(e[0] == "delta" for e in good_events):
        time.sleep(0.005)
    bad = []
    for sampling in (Sampling(max_tokens=None), Sampling(max_tokens=5, seed="x")):
        events, done = [], threading.Event()
        engine.submit(Request(tok("fn").input_ids, sampling,
                              lambda ev, e=events, d=done: (e.append(ev), ev[0] != "delta" and d.set())))
        bad.append((events, done))
    broken = Request(tok("fn").input_ids, Sampling(max_tokens=5, temperature=0), sink=lambda ev: 1 / 0)
    engine.submit(broken)
    for events, done in bad:
        assert done.wait(30) and events[-1][0] == "error", events
    assert good_done.wait(60) and good_events[-1][:3] == ("done", 0, "length")
    deadline = time.time() + 30
    while engine.snapshot()["waiting"] and time.time() < deadline:
        time.sleep(0.01)
    assert broken.cancelled and engine.alive and engine.error is None
    after_events, after_done = _submit(engine, tok("fn").input_ids, 3)
    assert after_done.wait(30) and after_events[-1][0] == "done"


def test_a_join_that_fails_part_way_fails_only_the_newcomers(engine, monkeypatch):
    """Joining a newcomer's KV cache to the running batch can fail part-way (out of memory on a
    GPU): the running batch's cache must be left whole, so the running request goes on to the
    same answer it gives alone and only the newcomer fails."""
    tok = engine.tokenizer
    alone_events, alone_done = _submit(engine, tok("fn add(a: int").input_ids, 40)
    assert alone_done.wait(60)
    prefill = engine._prefill

    def prefill_whose_second_layer_breaks(seqs):
        new_cache, new_mask = prefill(seqs)
        new_cache.layers[1].keys = None  # torch.cat fails on the second layer, after the first is built
        return new_cache, new_mask

    long_events, long_done = _submit(engine, tok("fn add(a: int").input_ids, 40)
    while not any(e[0] == "delta" for e in long_events):
        time.sleep(0.005)
    monkeypatch.setattr(engine, "_prefill", prefill_whose_second_layer_breaks)
    new_events, new_done = _submit(engine, tok("The quick brown fox").input_ids, 5)
    assert new_done.wait(30) and new_events[-1][0] == "error"
    monkeypatch.setattr(engine, "_prefill", prefill)
    assert long_done.wait(60) and long_events[-1][:3] == ("done", 0, "length")
    text = lambda events: "".join(e[2] for e in events if e[0] == "delta")  # noqa: E731
    assert text(long_events) == text(alone_events)


@pytest.mark.parametrize("peak", [12.0, 4.0, 0.0])   # peaked (the candidates hold top_p) … flat (sorted whole)
def test_nucleus_from_the_likeliest_candidates_equals_sorting_everything(peak):
    import torch

    from mens.serve.engine import NUCLEUS_CANDIDATES, _top_p

    g = torch.Generator().manual_seed(int(peak))
    logits = torch.randn(8 * NUCLEUS_CANDIDATES, generator=g) * 3
    logits[:40] += peak
    probs = torch.softmax(logits, -1)
    for top_p in (0.3, 0.9, 0.95, 0.999):
        sorted_p, order = probs.sort(descending=True)
        sorted_p[sorted_p.cumsum(-1) - sorted_p > top_p] = 0.0
        assert torch.equal(_top_p(probs, top_p), torch.zeros_like(probs).scatter(-1, order, sorted_p)), top_p


def test_the_kv_cache_goes_by_the_name_forward_takes(tiny_model_dir):
    """transformers 5.2x renamed forward's `past_key_values` to `cache`: the old name warned at
    every step of every request (and goes in 5.40). The engine asks the model which it takes,
    through a PEFT wrapper too (whose forward takes **kwargs)."""
    import warnings

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import DynamicCache

    from mens.inference import load_model
    from mens.serve.engine import _cache_kwarg, _cache_of

    model, _, _ = load_model(tiny_model_dir, device="cpu")
    name = _cache_kwarg(model)
    wrapped = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"]))
    assert _cache_kwarg(wrapped) == name
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a deprecation warning fails the test
        out = wrapped(input_ids=torch.tensor([[1, 2, 3]]), use_cache=True, **{name: DynamicCache()})
        assert _cache_of(out).get_seq_length() == 3
