"""What the libraries under mens print, kept off a normal run's terminal: `mens --debug …` shows it.

A plain `mens train` / `rl` / `dpo` / `merge` used to print transformers' FutureWarnings, PEFT's
UserWarnings, bitsandbytes' "Failed to load CPU gemm_4bit_forward from kernels-community",
datasets' and transformers' progress bars — nothing a user can act on. The causes mens owns are
fixed where they are (TrainingArguments' `activation_checkpointing`, LoRA's `fan_in_fan_out` on
GPT-2's Conv1D layers); what the libraries say of their own (PEFT and TRL read transformers'
deprecated `is_gradient_checkpointing`) is routed here, at the CLI edge (`route`):

- Python warnings go to the `mens.library` logger instead of stderr;
- library loggers that propagate to the root logger (bitsandbytes, accelerate, torch, TRL's)
  go there too, so Python's last-resort handler no longer prints their warnings;
- transformers' and datasets' own log handlers and progress bars are turned down through their
  environment variables (read at import, so set before they load; applied at once where
  transformers is loaded already).

`mens.library` prints through the `mens` logger's stderr handler with --debug, and nothing
without. mens's own warnings (`mens: warning: …`) are log records of `mens`, untouched.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

LOG = logging.getLogger("mens.library")
_QUIET_ENV = {"TRANSFORMERS_VERBOSITY": "error", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
              "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
              "DATASETS_VERBOSITY": "error"}


class _ToLibraryLog(logging.Handler):
    """On the root logger: a library's log record, re-said by `mens.library`."""

    def emit(self, record: logging.LogRecord) -> None:
        LOG.log(record.levelno, "%s: %s", record.name, record.getMessage())


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    LOG.warning("%s", warnings.formatwarning(message, category, filename, lineno, line).rstrip())


def route(debug: bool) -> None:
    """Send what libraries print to `mens.library`: shown with --debug, dropped without."""
    LOG.setLevel(logging.DEBUG if debug else logging.CRITICAL + 1)
    warnings.showwarning = _show_warning
    root = logging.getLogger()
    if not any(isinstance(h, _ToLibraryLog) for h in root.handlers):
        root.addHandler(_ToLibraryLog())
    if not debug:
        for name, value in _QUIET_ENV.items():
            os.environ.setdefault(name, value)  # a user's own setting wins
    if "transformers" in sys.modules:  # loaded before the edge (a caller's process): its handler now
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_warning() if debug else hf_logging.set_verbosity_error()
        if not debug:
            hf_logging.disable_progress_bar()


def quiet_hub_kernel_notice() -> None:
    """bitsandbytes warns at import, on CPUs with AVX512-BF16, that it cannot fetch an optional
    kernel from the hub (`pip install kernels`); its fallback is the path it always had, so the
    message only alarms users. Call before anything imports bitsandbytes."""
    logging.getLogger("bitsandbytes.backends.cpu.ops").setLevel(logging.ERROR)
