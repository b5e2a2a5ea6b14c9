"""The files mens writes and reads whole: atomic writes (a reader never sees half an output, a
killed write's temps are cleared by the next one), output checks made before any work, and YAML
read with one-line errors."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable

from mens.errors import MensError, output_error


@contextmanager
def atomic_path(path: str | Path, suffix: str = ""):
    """Yield a temp path beside `path`; on success rename it over `path`, on error delete it.
    Works for files and directories alike, so no reader ever sees a half-written output. A
    failure to write (no permission, a full disk, a file or folder in the way) raises
    `OutputError` — an OSError that prints as one line naming `path`. Temps that an earlier,
    killed write of `path` left are removed first (`remove_leftovers`)."""
    path = Path(path)
    remove_leftovers(path)  # the temps of an earlier write of `path` that was killed
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:  # a file where a folder should be, no permission, a read-only disk
        raise output_error(exc, path) from exc
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.is_dir() and path.is_dir():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp_path, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp_path, path)
    except BaseException as exc:
        if tmp_path.is_dir():
            shutil.rmtree(tmp_path, ignore_errors=True)
        elif tmp_path.exists():
            tmp_path.unlink()
        if isinstance(exc, OSError) and not isinstance(exc, MensError) and _writing(exc, tmp_path, path):
            raise output_error(exc, path) from exc  # a full disk, a folder in the way: one line, the path
        raise


def _writing(exc: OSError, tmp: Path, path: Path) -> bool:
    """Whether `exc` came from writing the output (its temp, the rename), not from reading some
    input inside the `with` block."""
    names = [str(n) for n in (exc.filename, exc.filename2) if n is not None]
    return not names or any(n.startswith(str(tmp)) or n == str(path) for n in names)


def check_output(path: str | Path, flag: str = "-o") -> Path:
    """Fail before any work when `path` cannot become a file: a folder is in the way, a part of
    its parent path is a file, or the folder it would go in is not writable."""
    path = Path(path)
    where = f"{flag} {path}"
    if path.is_dir():
        raise MensError("the output is an existing folder", where, f"give a file path, e.g. {path / 'out.jsonl'}")
    parent = path.parent
    while not parent.exists() and not parent.is_symlink() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise MensError(f"{parent} is a file, not a folder", where, "give a path under a folder")
    try:  # a real probe: as root, os.access says yes to read-only and special file systems
        fd, probe = tempfile.mkstemp(prefix=".mens-probe.", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise MensError(f"cannot write in {parent}: {exc.strerror or exc}", where,
                        "choose a folder you can write to") from None
    return path


LOCK_FILE = ".mens.lock"
_HELD: dict[Path, int] = {}  # folder → the open lock file this process holds
_CREATED: set[Path] = set()  # folders hold_lock made: an early error leaves no empty folder behind


def hold_lock(folder: str | Path, what: str) -> None:
    """Take this process's exclusive lock on `folder` (a `.mens.lock` file in it) until
    `release_lock`, or until the process ends: the OS drops a dead process's lock, so a killed
    run never leaves a stale one. A second mens process writing the same run or work dir would
    mix its checkpoints, telemetry and manifest with the first one's; it stops here instead, with
    one line. Taken again by the process that holds it, it is a no-op. Without fcntl (Windows)
    there is no lock."""
    try:
        import fcntl
    except ImportError:
        return
    folder = Path(folder).resolve()
    if folder in _HELD:
        return
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise MensError(f"another mens process is writing this {what}", str(folder),
                        "wait for it to finish (or stop it) before running this again") from None
    _HELD[folder] = fd
    if created:
        _CREATED.add(folder)


def release_lock(folder: str | Path) -> None:
    """Give back `hold_lock`'s lock (the lock file goes too: a run dir holds only what it says;
    a folder hold_lock made and nothing was written in goes as well)."""
    folder = Path(folder).resolve()
    fd = _HELD.pop(folder, None)
    if fd is not None:
        (folder / LOCK_FILE).unlink(missing_ok=True)
        os.close(fd)
    if folder in _CREATED:
        _CREATED.discard(folder)
        try:
            folder.rmdir()  # only if the command wrote nothing in it (it stopped before its first write)
        except OSError:
            pass


def check_not_input(out: str | Path, *inputs: str | Path) -> None:
    """Fail before any work when the output `out` is one of the `inputs` (the same file by any
    path): writing it would replace what the command reads."""
    out = Path(out)
    for path in map(Path, inputs):
        if path.exists() and out.exists() and out.resolve() == path.resolve():
            raise MensError("the output would overwrite the input", str(out), "write to another file")


def remove_leftovers(path: str | Path) -> list[Path]:
    """Delete what `atomic_path` left beside `path` when a process writing it was killed (its
    `.NAME.XXXXXXXX.tmp` file or folder, a `.NAME.old` folder) and return what went. Called by
    the command that writes `path` before it writes it again: a temp of `path` belongs to it."""
    path = Path(path)
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.(?:[a-z0-9_]{{8}}.*\.tmp|old)$")
    gone = []
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return gone
    for item in siblings:
        if pattern.match(item.name):
            shutil.rmtree(item, ignore_errors=True) if item.is_dir() and not item.is_symlink() \
                else item.unlink(missing_ok=True)
            gone.append(item)
    return gone


def replace_folder(new: str | Path, out: str | Path) -> None:
    """Swap a finished folder `new` (built beside `out`) into `out`: the old one is renamed away
    first, then removed, so a reader sees the old folder or the new one, never a mix."""
    new, out = Path(new), Path(out)
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
    os.replace(new, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def write_jsonl_atomic(path: str | Path, rows: Iterable[Any]) -> int:
    """Write rows (dicts or Pairs) one JSON object a line; returns the count."""
    n = 0
    with atomic_path(path) as tmp:
        with tmp.open("w", encoding="utf-8") as fh:
            for row in rows:
                if hasattr(row, "to_dict"):  # a Pair
                    row = row.to_dict()
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
    return n


@functools.cache
def _unique_key_loader():
    """yaml.SafeLoader that refuses a key written twice in one mapping (PyYAML keeps the last
    silently: `lr: 1e-4` … `lr: 3e-3` trains at 3e-3 with nothing said). Keys a `<<` merge brings
    in may be overridden, as YAML allows."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} appears twice (first at line {seen[key] + 1})", key_node.start_mark)
                seen.setdefault(key, key_node.start_mark.line)
            return super().construct_mapping(node, deep)

    return UniqueKeys


def read_yaml(path: str | Path, what: str, fix: str) -> Any:
    """A YAML file's data (a config, a policy); every way it can be unreadable is one line naming
    the file: missing, not UTF-8, nested too deeply, malformed (at its line), a key twice."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise MensError(f"{what} not found", str(path), fix)
    try:
        return yaml.load(path.read_bytes().decode("utf-8"), Loader=_unique_key_loader())  # noqa: S506 - a SafeLoader
    except UnicodeDecodeError:
        raise MensError(f"{what} is not UTF-8 text", str(path), fix) from None
    except RecursionError:
        raise MensError(f"{what} is nested too deeply", str(path), fix) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
        raise MensError(f"{what} is not valid YAML: {problem}", f"{path}:{mark.line + 1}" if mark else str(path),
                        "fix the YAML") from None
