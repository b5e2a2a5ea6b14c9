import subprocess
import sys


def test_help_lists_commands_without_importing_torch():
    out = subprocess.run([sys.executable, "-m", "mens", "--help"], capture_output=True, text=True, check=True)
    assert "vox" in out.stdout
    # The CLI must not import torch/transformers just to print help.
    probe = subprocess.run([sys.executable, "-c", "import sys, mens.cli; mens.cli.build_parser(); "
                            "print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"],
                           capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[]"


def test_no_module_warns_when_it_is_compiled():
    """A fresh install compiles each module on its first import, and Python 3.12+ prints a
    SyntaxWarning for an invalid escape such as "\\w" in a plain string — on stderr, before a
    command's one-line error (3.11 raises only a silent DeprecationWarning, so the test turns
    every warning into an error)."""
    import warnings
    from pathlib import Path

    import mens

    for path in sorted(Path(mens.__file__).parent.rglob("*.py")):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            compile(path.read_text(encoding="utf-8"), str(path), "exec")


def test_unknown_command_exits_2():
    out = subprocess.run([sys.executable, "-m", "mens", "nope"], capture_output=True, text=True)
    assert out.returncode == 2


# ---------------------------------------------------------------- the one edge for errors

def test_argparse_errors_are_one_line_and_help_is_untouched(run_cli, capsys):
    import pytest

    code, out, err = run_cli("bench", "--model", "m", "--bench", "b", "--limit", "ten")
    assert code == 2 and out == ""
    assert err == ("mens: error: argument --limit: invalid int value: 'ten' (mens bench) — see `mens bench --help`\n")
    code, _, err = run_cli("corpus", "validate")
    assert code == 2 and err.count("\n") == 1 and "(mens corpus validate)" in err
    with pytest.raises(SystemExit) as exit_:
        run_cli("bench", "--help")
    assert exit_.value.code == 0 and "usage: mens bench" in capsys.readouterr().out


def _raising(exc):
    def cmd(args):
        raise exc
    return cmd


def test_leftover_errors_become_one_line_with_the_path(run_cli, monkeypatch):
    import errno
    import json

    import mens.train.cli as train_cli

    cases = [
        (PermissionError(errno.EACCES, "Permission denied", "/x/y"), "mens: error: permission denied (/x/y) — "),
        (IsADirectoryError(errno.EISDIR, "Is a directory", "/x/d"), "mens: error: is a folder, not a file (/x/d)"),
        (OSError(errno.ENOSPC, "No space left on device", "/x/f"), "no space left on the device (/x/f)"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid"),
         "mens: error: not UTF-8 text (byte 0)"),
        (RecursionError("maximum recursion depth exceeded"), "input nested too deeply to read"),
        (json.JSONDecodeError("Expecting value", "x", 0), "mens: error: malformed JSON: Expecting value"),
    ]
    for exc, phrase in cases:
        monkeypatch.setattr(train_cli, "cmd_probe", _raising(exc))
        code, out, err = run_cli("probe")
        assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err
        assert err.startswith(phrase) or phrase in err, err


def test_debug_keeps_the_traceback_and_a_bug_stays_a_bug(run_cli, monkeypatch):
    import pytest

    import mens.train.cli as train_cli

    monkeypatch.setattr(train_cli, "cmd_probe", _raising(FileNotFoundError(2, "No such file", "/x/z")))
    code, _, err = run_cli("--debug", "probe")
    assert code == 2 and "Traceback" in err and err.strip().endswith("no such file or folder (/x/z) — check the path")
    monkeypatch.setattr(train_cli, "cmd_probe", _raising(ZeroDivisionError("a bug")))
    with pytest.raises(ZeroDivisionError):
        run_cli("probe")
