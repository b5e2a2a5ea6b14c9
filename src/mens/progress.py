"""Progress for long work: status lines through the `mens` logger, a rich progress bar on a
terminal, silence in pipes' bars or with --quiet.

Whether anything is said is the CLI's decision (`configure`, from --quiet or MENS_QUIET at the
edge), made the way Python libraries leave it to applications: through the logger's level. Called
as a library, mens says nothing until the caller configures the `mens` logger.
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from typing import Iterator

log = logging.getLogger("mens")


class _StderrHandler(logging.Handler):
    """Writes to sys.stderr as it is at each line (a redirected or captured stream included)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr)


def configure(quiet: bool) -> None:
    """The CLI edge: status lines on stderr, or (quiet) none."""
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        log.addHandler(_StderrHandler())
    log.propagate = False
    log.setLevel(logging.WARNING if quiet else logging.INFO)


def verbose() -> bool:
    return log.isEnabledFor(logging.INFO)


def quiet() -> bool:
    """No progress bar: nothing is to be said, or stderr is not a terminal."""
    return not verbose() or not sys.stderr.isatty()


def plain_lines() -> bool:
    """Progress as plain status lines instead of a bar: asked to speak, into a pipe or file."""
    return verbose() and not sys.stderr.isatty()


class NoBar:
    def advance(self, n: int = 1) -> None:  # noqa: D401 - same interface as the rich bar
        pass

    def update(self, **fields) -> None:
        pass


class _RichBar:
    def __init__(self, progress, task):
        self._progress, self._task = progress, task

    def advance(self, n: int = 1) -> None:
        self._progress.advance(self._task, n)

    def update(self, **fields) -> None:
        self._progress.update(self._task, **fields)


@contextmanager
def progress(description: str, total: int | None = None) -> Iterator[NoBar | _RichBar]:
    """`with progress("extract", total=n) as bar: … bar.advance()` — a no-op when quiet."""
    if quiet():
        yield NoBar()
        return
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), transient=False,
                  console=None) as prog:
        yield _RichBar(prog, prog.add_task(description, total=total))


def say(message: str) -> None:
    """A status line on stderr, unless quiet was asked for."""
    log.info(message)


def warn(message: str) -> None:
    """A warning line on stderr, said under --quiet too (quiet silences progress, not problems)."""
    log.warning(message)
