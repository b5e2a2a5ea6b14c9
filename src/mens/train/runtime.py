"""Process-level helpers of the training loop: the Ctrl+C protocol, peak memory, and a dropout
switch that leaves every other layer in train mode."""

from __future__ import annotations

import contextlib
import resource
import signal

from mens.progress import say


class StopFlag:
    """Ctrl+C (or SIGTERM) once: finish the step, checkpoint, exit cleanly. Twice: exit now.

    Python runs a signal handler only between bytecodes, so a handler cannot stop a step stuck in
    one long C++ call (a backward pass in emulated bf16 took over 15 minutes on an AVX2 CPU, and
    `kill` twice did not stop it). After the first signal SIGTERM goes back to the system's
    default: a second `kill` ends the process at once, wherever it is (the run dir's leftovers are
    tidied by the next run, mens.train.prepare.open_run)."""

    def __init__(self):
        self.requested = False
        self._old = {}

    def _handle(self, signum, frame):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        say("mens: stopping after this step (checkpoint, then exit); press Ctrl+C again to exit now")

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


def peak_memory_gb(device: str) -> float:
    import torch

    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


@contextlib.contextmanager
def dropout_off(model):
    """Deterministic validation without model.eval(): only dropout switches off. Dropout layers go
    to eval and their p to 0, and attention modules' float dropout rates to 0, since attention
    kernels take the rate as an argument while the module trains (GPT-2 passes
    `attn_dropout.p`, Llama-style modules `attention_dropout`)."""
    import torch

    saved = []
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            saved.append((m, "p", m.p, m.training))
            m.p = 0.0
            m.eval()
        for name in ("attention_dropout", "dropout"):
            value = getattr(m, name, None)
            if type(value) is float and value > 0:
                saved.append((m, name, value, None))
                setattr(m, name, 0.0)
    try:
        yield
    finally:
        for m, name, value, training in saved:
            setattr(m, name, value)
            if training:
                m.train()
