"""The held-out bench's tasks: one JSONL object a line, `{id, category, prompt,
expect_contains[], context_files[], lang?, reference?}`, read and checked before any model
loads (a bad task is named by file:line, not found after minutes of generating)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mens.errors import MensError
from mens.records import iter_jsonl


@dataclass
class BenchTask:
    id: str
    category: str
    prompt: str
    expect_contains: list[str] = field(default_factory=list)
    context_files: list[str] = field(default_factory=list)
    lang: str = "vox"
    reference: str | None = None
    where: str = ""

    def full_prompt(self, base_dir: Path) -> str:
        """The prompt with its context files appended as fenced blocks (paths relative to the
        bench file), so the model sees the code the task refers to."""
        parts = [self.prompt]
        for rel in self.context_files:
            path = context_path(base_dir, rel, self.where)
            parts.append(f"Context file `{rel}`:\n```{self.lang}\n{path.read_text(encoding='utf-8').rstrip()}\n```")
        return "\n\n".join(parts)


def context_path(base_dir: Path, rel: str, where: str) -> Path:
    """A task's context file: a file inside the bench's own folder (links resolved), never an
    absolute path or one that climbs out — a bench file must not make mens read /etc/passwd."""
    root = base_dir.resolve()
    path = (root / rel).resolve()
    if Path(rel).is_absolute() or not path.is_relative_to(root):
        raise MensError(f"context file {rel!r} is outside the bench folder", where,
                        "give a path relative to the bench file, inside its folder")
    if not path.is_file():
        raise MensError(f"context file {rel!r} not found", where, "fix context_files")
    return path


def bench_files(path: str | Path) -> list[Path]:
    path = Path(path)
    if path.is_file():
        return [path]
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else []
    if not files:
        raise MensError("no bench tasks found", str(path), "give a .jsonl file or a directory holding some")
    return files


def load_tasks(path: str | Path, limit: int | None = None) -> list[tuple[BenchTask, Path]]:
    """(task, its file's directory) for every task, in file order; ids must be unique."""
    tasks: list[tuple[BenchTask, Path]] = []
    seen: set[str] = set()
    langs: set[str] = set()
    for file in bench_files(path):
        for lineno, obj in iter_jsonl(file, has_lenient=False):
            where = f"{file}:{lineno}"
            if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str) or not obj["prompt"].strip():
                raise MensError("a bench task needs a non-empty string 'prompt'", where,
                                "write {id, category, prompt, expect_contains, context_files}")
            needles = obj.get("expect_contains") or []
            if not isinstance(needles, list) or not all(isinstance(n, str) for n in needles):
                raise MensError("'expect_contains' must be a list of strings", where, "fix the task")
            files = obj.get("context_files") or []
            if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
                raise MensError("'context_files' must be a list of strings", where,
                                "list paths relative to the bench file, e.g. [\"shapes.vox\"]")
            task = BenchTask(id=str(obj.get("id") or f"{file.stem}-{lineno}"), category=str(obj.get("category") or "other"),
                             prompt=obj["prompt"], expect_contains=needles,
                             context_files=files, lang=str(obj.get("lang") or "vox"),
                             reference=obj.get("reference") or obj.get("solution"), where=where)
            for rel in task.context_files:  # checked here, before any model loads
                context_path(file.parent, str(rel), where)
            if task.lang not in langs:  # its pack scores the answers: found now, not after generating
                from mens.lang import get_pack

                try:
                    get_pack(task.lang)
                except MensError as exc:
                    raise MensError(f"unknown lang {task.lang!r}: {exc.what}", where,
                                    "give a language pack name (vox, python, or a tree-sitter grammar)") from None
                langs.add(task.lang)
            if task.id in seen:
                raise MensError(f"duplicate task id {task.id!r}", where, "give every task its own id")
            seen.add(task.id)
            tasks.append((task, file.parent))
    return tasks[:limit] if limit else tasks
