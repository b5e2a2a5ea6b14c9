"""User-facing errors: one line, `mens: error: <what> (<where>) — <what to do>`, exit code 2."""

from __future__ import annotations

import errno


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


def did_you_mean(name: str, known, fallback: str) -> str:
    """The fix for an unknown name: the known one closest to it, else `fallback`."""
    import difflib

    close = difflib.get_close_matches(str(name), sorted(map(str, known)), n=1)
    return f"did you mean {close[0]!r}?" if close else fallback


def refuse_unknown_keys(mapping: dict, known, where: str, what: str = "key") -> None:
    """A misspelt key (`wieght: 2`, `blokcing: false`) is an error naming the key it is closest
    to, never ignored (ignored, it leaves the default in force without a word)."""
    unknown = sorted(str(k) for k in mapping if str(k) not in known)
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise MensError(f"unknown {what}{'s' if len(unknown) > 1 else ''} {names}", where,
                        did_you_mean(unknown[0], known, f"use {', '.join(sorted(known))}"))


class GateFailure(Exception):
    """A check that ran correctly and said no (a failed gate, a file that does not parse):
    exit code 1, not 2, because the input was fine and the answer is the result."""

    exit_code = 1


class OutputError(MensError, OSError):
    """An output that cannot be written (no permission, a full disk, a file or folder in the
    way): the one-line form with the output's path, and still an OSError for code that catches
    those."""


_OS_WHAT = {
    errno.ENOSPC: ("no space left on the device", "free some space or write somewhere else"),
    errno.EDQUOT: ("disk quota exceeded", "free some space or write somewhere else"),
    errno.EFBIG: ("file too large for this file system or limit", "write somewhere else"),
    errno.EACCES: ("permission denied", "choose a path you can read/write, or fix its permissions"),
    errno.EPERM: ("operation not permitted", "choose a path you can read/write, or fix its permissions"),
    errno.EROFS: ("read-only file system", "write somewhere else"),
    errno.EISDIR: ("is a folder, not a file", "give a file path"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "give a path under a folder"),
    errno.ENOENT: ("no such file or folder", "check the path"),
    errno.EEXIST: ("already exists", "remove it or give another path"),
}


def user_error(exc: BaseException, where: str | None = None) -> MensError | None:
    """The one-line form of an OS, decode or recursion error that reached a command's edge;
    None for anything else (a bug, which keeps its traceback). `where` overrides the path the
    error carries (e.g. the output a temp file stood for)."""
    if isinstance(exc, MensError):
        return exc
    if isinstance(exc, OSError):
        what, todo = _OS_WHAT.get(exc.errno, (exc.strerror or str(exc), "check the path"))
        return MensError(what, where or (str(exc.filename) if exc.filename else None), todo)
    if isinstance(exc, UnicodeDecodeError):
        return MensError(f"not UTF-8 text (byte {exc.start})", where, "re-encode the file as UTF-8")
    if isinstance(exc, RecursionError):
        return MensError("input nested too deeply to read", where, "flatten it or leave it out")
    return None


def edge_error(exc: BaseException) -> MensError | None:
    """What reached the command line's edge, in the one-line form: an OS, decode or recursion
    error (`user_error`, with the path the error carries), or a library's complaint about a
    file it was given (a torn safetensors file, malformed JSON or YAML, a refused pickle, a bad
    hub id). None for anything else: a bug keeps its traceback."""
    mine = user_error(exc)
    if mine is not None:
        return mine
    names = {f"{c.__module__}.{c.__name__}" for c in type(exc).__mro__} | {c.__name__ for c in type(exc).__mro__}
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    for name, what, todo in _LIBRARY_ERRORS:
        if name in names:
            return MensError(f"{what}: {first}", None, todo)
    return None


_REPAIR = "restore the file, or re-run the mens command that wrote it"
_LIBRARY_ERRORS = (
    ("SafetensorError", "corrupt or truncated safetensors file", _REPAIR),
    ("json.decoder.JSONDecodeError", "malformed JSON", _REPAIR),
    ("yaml.error.YAMLError", "malformed YAML", "fix the YAML file"),
    ("_pickle.UnpicklingError", "refused to load a pickled file", "only load files mens wrote"),
    ("huggingface_hub.errors.HFValidationError", "not a model path or hub id", "check the path or the hub id"),
    ("zipfile.BadZipFile", "corrupt or truncated file", _REPAIR),
)


def output_error(exc: OSError, path: object) -> OutputError:
    """`exc` (raised while writing `path` or its temp file) as an OutputError naming `path`."""
    base = user_error(exc, str(path))
    err = OutputError(f"cannot write: {base.what}", base.where, base.todo)
    err.errno, err.strerror, err.filename = exc.errno, exc.strerror, str(path)
    return err
