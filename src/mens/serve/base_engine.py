"""What every serve engine shares, and the interface the HTTP app asks of one.

`BaseEngine` owns, once, the state both engines (serve/engine.py over PyTorch,
serve/llamacpp_engine.py over llama.cpp) keep alike: the bounded all-or-none queue (429 when it
is full), cancellation, liveness and stop, the /stats counters, the background thread that runs
the engine's own `_schedule`, and the per-token handling (`_accept`: end tokens, stop strings,
max_tokens, the context window, streaming with held-back stop prefixes), so `max_tokens`, stop
strings and `usage` mean the same whichever engine serves. A subclass sets up its model, calls
`BaseEngine.__init__`, then `_start()`, and writes `_schedule` (and `_text`, how it decodes ids).

The app (serve/app.py, serve/routes/) uses an engine only through `ServedEngine`'s members.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from typing import Protocol

from mens.progress import say
from mens.serve.requests import EngineStopped, QueueFull, Request, Seq


class ServedEngine(Protocol):
    """What the routes ask of an engine (BaseEngine's subclasses have it all; a test may stand
    in with any object that has these)."""

    tokenizer: object          # called for ids, .decode(), len(), and the chat template
    context_window: int
    queue_size: int
    grammar: object | None     # a mens.grammar.Constraint, or None without --grammar
    device: object
    error: str | None          # why the engine stopped, for /health

    @property
    def alive(self) -> bool: ...

    def submit_all(self, reqs: list[Request]) -> None: ...

    def cancel(self, reqs) -> None: ...

    def snapshot(self) -> dict: ...


class BaseEngine:
    batching = "continuous"    # or why the engine serves one request at a time
    grammar = None
    _chooser = None            # a mens.grammar.TokenChooser where grammar mode runs

    def __init__(self, tokenizer, *, context_window: int, max_batch: int, queue_size: int, device,
                 eos_ids) -> None:
        self.tokenizer, self.device = tokenizer, device
        self.context_window, self.max_batch, self.queue_size = context_window, max_batch, queue_size
        self.eos_ids = eos_ids       # anything with `in`: a list of ids, or llama.cpp's end-of-generation set
        self.stats = {"requests": 0, "sequences": 0, "decode_steps": 0, "prefills": 0, "tokens": 0,
                      "max_batch_size": 0, "rejected_queue_full": 0, "cancelled": 0,
                      "batch_size_histogram": Counter()}
        self._stats_lock = threading.Lock()  # the histogram is read by the server thread
        self._waiting: deque[Request] = deque()
        self._cond = threading.Condition()
        self._stop = False
        self.error: str | None = None   # why the engine thread died (a bug of ours, never a request's)
        self._thread: threading.Thread | None = None

    def _start(self, name: str) -> None:
        """Start the engine thread; the subclass's state must be complete by now."""
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ public

    def submit(self, req: Request) -> None:
        self.submit_all([req])

    def submit_all(self, reqs: list[Request]) -> None:
        """Queue all of `reqs` or none: a request with several prompts that does not fit whole is
        refused (QueueFull) before any of its prompts waits."""
        with self._cond:
            if not self.alive:
                raise EngineStopped(self.error or "the engine was stopped")
            if len(self._waiting) + len(reqs) > self.queue_size:
                self.stats["rejected_queue_full"] += 1
                raise QueueFull(f"{len(self._waiting)} requests are waiting (queue size {self.queue_size})")
            self._waiting.extend(reqs)
            self.stats["requests"] += len(reqs)
            self._cond.notify()

    def cancel(self, reqs) -> None:
        """Cancel requests: those still waiting leave the queue at once (they no longer count
        against --queue-size), running ones leave the batch after the current step."""
        with self._cond:
            for req in reqs:
                if req.cancelled:
                    continue
                req.cancelled = True
                try:
                    self._waiting.remove(req)
                    self.stats["cancelled"] += 1
                except ValueError:
                    pass            # running (or finished): the scheduler drops its rows

    @property
    def alive(self) -> bool:
        """Is the engine thread running and taking requests?"""
        return self._thread is not None and self._thread.is_alive() and not self._stop and self.error is None

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._fail_waiting("the server is shutting down")

    def snapshot(self) -> dict:
        with self._stats_lock:
            s = dict(self.stats)
            hist = Counter(s.pop("batch_size_histogram"))
        s["batch_size_histogram"] = {str(k): v for k, v in sorted(hist.items())}
        steps = sum(hist.values())
        s["mean_batch_size"] = round(sum(k * v for k, v in hist.items()) / steps, 3) if steps else 0.0
        s["waiting"] = len(self._waiting)
        s["grammar_rejections"] = self._chooser.rejections if self._chooser else 0
        s["grammar_fallbacks"] = self._chooser.fallbacks if self._chooser else 0
        s["grammar_finishes"] = self._chooser.finishes if self._chooser else 0
        return s

    # ------------------------------------------------------------------ the thread and its faults

    def _schedule(self) -> None:
        """The engine's loop: take waiting requests, decode, `_accept` each sampled token, until
        `_stop`; then tell the running requests the server is shutting down."""
        raise NotImplementedError

    def _count_step(self, batch_size: int) -> None:
        """One decode step of `batch_size` rows, in /stats."""
        self.stats["decode_steps"] += 1
        with self._stats_lock:
            self.stats["batch_size_histogram"][batch_size] += 1
        self.stats["max_batch_size"] = max(self.stats["max_batch_size"], batch_size)

    def _loop(self) -> None:
        try:
            self._schedule()
        except BaseException as exc:  # a fault outside any request's handling: say so on /health
            self.error = f"{type(exc).__name__}: {exc}"
            say(f"serve: the engine stopped: {self.error}")
            self._fail_waiting(f"the engine stopped: {self.error}")

    def _fail(self, seqs: list[Seq], exc: Exception) -> None:
        say(f"serve: generation failed: {type(exc).__name__}: {exc}")
        for req in {id(s.req): s.req for s in seqs}.values():
            req.emit(("error", f"generation failed: {type(exc).__name__}: {exc}"))
            req.cancelled = True

    def _fail_waiting(self, message: str) -> None:
        with self._cond:
            waiting, self._waiting = list(self._waiting), deque()
        for req in waiting:
            req.emit(("error", message))
            req.cancelled = True

    # ------------------------------------------------------------------ per-token handling and streaming

    def _text(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def _accept(self, s: Seq, token: int) -> None:
        req, sp = s.req, s.req.sampling
        if req.first_token_at is None:
            req.first_token_at = time.perf_counter()
        self.stats["tokens"] += 1
        if token in self.eos_ids:  # the end token counts as generated, as in OpenAI's usage
            self._finish(s, "stop", self._text(s.generated), len(s.generated) + 1)
            return
        s.generated.append(token)
        s.pending = token
        text = s.text = self._text(s.generated)
        at = first_stop(text, sp.stop, len(s.sent))
        if at is not None:
            self._finish(s, "stop", text[:at])
            return
        if len(s.generated) >= sp.max_tokens or len(req.prompt_ids) + len(s.generated) >= self.context_window:
            self._finish(s, "length", text)
            return
        safe = hold_back(text, sp.stop)
        if len(safe) > len(s.sent):
            req.emit(("delta", s.index, safe[len(s.sent):]))
            s.sent = safe

    def _finish(self, s: Seq, reason: str, text: str, count: int | None = None) -> None:
        if len(text) > len(s.sent) and text.startswith(s.sent):
            s.req.emit(("delta", s.index, text[len(s.sent):]))
        s.finish = reason
        s.req.emit(("done", s.index, reason, len(s.generated) if count is None else count))


def first_stop(text: str, stops: tuple[str, ...], sent: int) -> int | None:
    """Where the first stop string in `text` starts (None: there is none). The earliest in the
    text, not the first listed: one token can complete two stop strings, and the answer must
    end before either. The search starts just before the `sent` characters already streamed
    (held back, no stop string can start earlier)."""
    hits = [text.find(stop, max(0, sent - len(stop))) for stop in stops]
    return min((at for at in hits if at >= 0), default=None)


def hold_back(text: str, stops: tuple[str, ...]) -> str:
    """`text` minus a tail that could still become a stop string or is a half-decoded character."""
    cut = len(text)
    for stop in stops:
        for k in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:k]):
                cut = min(cut, len(text) - k)
                break
    text = text[:cut]
    return text.rstrip("\ufffd")
