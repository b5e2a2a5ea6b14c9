"""User-facing errors: one line, `mens: error: <what> (<where>) — <what to do>`, exit code 2."""

from __future__ import annotations


class MensError(Exception):
    """An error the user caused and can fix. The CLI prints `format()` and exits with code 2."""

    exit_code = 2

    def __init__(self, what: str, where: str | None = None, todo: str | None = None):
        super().__init__(what)
        self.what = what
        self.where = where
        self.todo = todo

    def format(self) -> str:
        line = f"mens: error: {self.what}"
        if self.where:
            line += f" ({self.where})"
        if self.todo:
            line += f" — {self.todo}"
        return line


class GateFailure(Exception):
    """A check that ran correctly and said no (a failed gate, a file that does not parse):
    exit code 1, not 2, because the input was fine and the answer is the result."""

    exit_code = 1
