"""What both serve engines share (serve/base_engine.py), on an engine with no model: its
scheduler only waits, so requests stay queued where the tests can see them. The queue is bounded
and all-or-none, cancellation frees its places, stop fails what waits, and the per-token
handling ends at end tokens, stop strings and max_tokens, holding back what may become a stop."""

import pytest

from mens.serve.base_engine import first_stop, hold_back
from mens.serve.requests import EngineStopped, QueueFull, Request, Sampling, Seq
from queue_only import QueueOnly


@pytest.fixture(scope="module")
def tok(tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_tokenizer_dir)


def _request(events, **sampling):
    return Request([1, 2, 3], Sampling(**{"max_tokens": 8, **sampling}), sink=events.append)


def test_the_queue_is_bounded_all_or_none_and_cancel_frees_it(tok):
    engine, events = QueueOnly(tok), []
    try:
        assert engine.alive and engine.batching == "continuous"
        first = [_request(events), _request(events)]
        engine.submit_all(first)
        with pytest.raises(QueueFull, match="2 requests are waiting"):
            engine.submit_all([_request(events), _request(events)])   # 2 + 2 > 3: neither waits
        stats = engine.snapshot()
        assert (stats["waiting"], stats["requests"], stats["rejected_queue_full"]) == (2, 2, 1)
        engine.cancel(first[:1])
        engine.cancel(first[:1])                     # twice: counted once
        assert first[0].cancelled and engine.snapshot()["waiting"] == 1 and engine.stats["cancelled"] == 1
        engine.submit_all([_request(events), _request(events)])      # the freed place takes one more
        assert engine.snapshot()["waiting"] == 3
    finally:
        engine.stop()
    assert not engine.alive and engine.snapshot()["waiting"] == 0
    assert events == [("error", "the server is shutting down")] * 3     # the waiting ones, told
    with pytest.raises(EngineStopped):
        engine.submit(_request(events))


def test_a_step_is_counted_in_the_histogram(tok):
    engine = QueueOnly(tok)
    engine.stop()
    for size in (1, 2, 2):
        engine._count_step(size)
    s = engine.snapshot()
    assert (s["decode_steps"], s["max_batch_size"], s["mean_batch_size"]) == (3, 2, 1.667)
    assert s["batch_size_histogram"] == {"1": 1, "2": 2} and s["grammar_rejections"] == 0


def test_a_fault_in_the_scheduler_shows_on_health(tok):
    class Broken(QueueOnly):
        def _schedule(self):
            raise RuntimeError("boom")

    engine = Broken(tok)
    engine._thread.join(timeout=10)
    assert not engine.alive and engine.error == "RuntimeError: boom"


def _accept_all(engine, seq, ids):
    for t in ids:
        if seq.finish is None:
            engine._accept(seq, t)


def test_accept_stops_at_a_stop_string_never_streaming_its_start(tok):
    engine = QueueOnly(tok, eos_ids=[tok.convert_tokens_to_ids("<|im_end|>")])
    engine.stop()
    events = []
    seq = Seq(_request(events, stop=("END",), max_tokens=50), 0)
    _accept_all(engine, seq, tok("hello world ENDING more").input_ids)
    streamed = "".join(e[2] for e in events if e[0] == "delta")
    assert streamed == "hello world " and seq.finish == "stop"
    assert events[-1][:3] == ("done", 0, "stop")
    assert seq.req.first_token_at is not None and engine.stats["tokens"] == events[-1][3]


def test_accept_ends_at_max_tokens_and_counts_the_end_token(tok):
    end = tok.convert_tokens_to_ids("<|im_end|>")
    engine = QueueOnly(tok, eos_ids=[end])
    engine.stop()
    events = []
    long = Seq(_request(events, max_tokens=3), 0)
    _accept_all(engine, long, tok("one two three four five").input_ids)
    assert long.finish == "length" and events[-1] == ("done", 0, "length", 3)
    events.clear()
    short = Seq(_request(events, max_tokens=30), 1)
    _accept_all(engine, short, [*tok("hi").input_ids, end])
    assert events[-1] == ("done", 1, "stop", len(tok("hi").input_ids) + 1)
    assert "".join(e[2] for e in events if e[0] == "delta") == "hi"


def test_first_stop_is_the_earliest_in_the_text():
    assert first_stop("a b STOP c END", ("END", "STOP"), 0) == 4
    assert first_stop("abc", ("x",), 0) is None
    assert first_stop("xxEND", ("END",), 3) == 2        # may start just before what was sent


def test_hold_back_keeps_what_may_become_a_stop():
    assert hold_back("hello EN", ("END",)) == "hello "
    assert hold_back("hello", ("END",)) == "hello"
    assert hold_back("caf\ufffd", ()) == "caf"          # a half-decoded character waits
