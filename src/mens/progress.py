"""Progress for long work: a rich progress bar on a terminal, silence in pipes or with --quiet."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator


def quiet() -> bool:
    return os.environ.get("MENS_QUIET") == "1" or not sys.stderr.isatty()


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
    if os.environ.get("MENS_QUIET") != "1":
        print(message, file=sys.stderr)
