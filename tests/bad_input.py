"""The checks every table-driven bad-input test makes (tests/*/test*_bad_input.py): exit code, a
single `mens: error: …` line holding the expected phrase (after any warnings), no traceback,
nothing written."""

from __future__ import annotations

from pathlib import Path


def tree(*roots: Path) -> dict[Path, set[str]]:
    """Every path under each root, relative to it (what 'nothing was written' compares)."""
    return {root: {str(p.relative_to(root)) for p in root.rglob("*")} for root in roots}


def assert_one_line_error(run_cli, argv: list[str], code: int, phrase: str, roots: list[Path]) -> str:
    before = tree(*roots)
    got, out, err = run_cli(*argv)
    assert "Traceback" not in err + out, err
    assert got == code, err
    # Warnings are said even under MENS_QUIET (an honest "only 8 training pairs" may come first);
    # the error itself is one line, the last.
    lines = [line for line in err.strip().splitlines() if not line.startswith("mens: warning: ")]
    assert len(lines) == 1, err
    assert lines[0].startswith("mens: error: ") and err.strip().endswith(lines[0]), err
    assert phrase in err, err
    assert tree(*roots) == before, "something was written"
    return err
