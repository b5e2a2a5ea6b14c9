"""What the server hands the engines and gets back: a request (its tokenised prompt, sampling
and event sink), each of its choices as a running sequence, the two refusals (queue full: 429,
engine stopped: 503), and response ids."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable

import torch


class QueueFull(Exception):
    """The waiting queue is at its bound: the server answers 429."""


class EngineStopped(Exception):
    """The engine thread is not running (stopped, or died of a fault of its own): 503."""


@dataclass
class Sampling:
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1


@dataclass
class Request:
    """One API request: a tokenised prompt, its sampling, and where its events go. Events are
    ("delta", choice, text), ("done", choice, finish_reason, completion_tokens), ("error", message)."""

    prompt_ids: list[int]
    sampling: Sampling
    sink: Callable[[tuple], None]
    adapter: str | None = None
    grammar: bool = False
    grammar_prefix: str | None = None  # whole-mode constraint: the code before the completion
    cancelled: bool = False
    arrived: float = field(default_factory=time.perf_counter)
    first_token_at: float | None = None

    def emit(self, event: tuple) -> None:
        """Send an event to the client; a sink that fails (its event loop is gone) cancels the request."""
        try:
            self.sink(event)
        except Exception:
            self.cancelled = True


@dataclass
class Seq:
    """One choice being generated: a row of the running batch."""

    req: Request
    index: int
    generated: list[int] = field(default_factory=list)
    sent: str = ""                     # text already streamed
    text: str = ""                     # decoded text of `generated`
    generator: torch.Generator | None = None
    pending: int | None = None         # last sampled token, not yet fed to the model
    finish: str | None = None


_ids = itertools.count(1)


def next_id(prefix: str) -> str:
    return f"{prefix}-{int(time.time())}{next(_ids):06d}"
