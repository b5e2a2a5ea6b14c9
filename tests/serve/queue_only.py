"""A real serve engine without a model, for the tests of what the engines and routes share:
BaseEngine's queue, stats and per-token handling, with a scheduler that takes nothing off the
queue until stopped, so requests stay where a test can see them."""

from mens.serve.base_engine import BaseEngine


class QueueOnly(BaseEngine):
    def __init__(self, tokenizer, queue_size=3, eos_ids=(0,)):
        super().__init__(tokenizer, context_window=64, max_batch=2, queue_size=queue_size, device="cpu",
                         eos_ids=list(eos_ids))
        self._start("test-queue-only")

    def _schedule(self):
        with self._cond:
            while not self._stop:
                self._cond.wait()
