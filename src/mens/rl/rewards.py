"""Rewards from the language's own verdict, as plain callables TRL's GRPOTrainer takes.

Each reward is `name(completions, **columns) -> list[float | None]`, one value in [0, 1] per
completion; `columns` are the prompt rows' fields (lists, one entry per completion), as TRL
passes them. None means "does not apply to this task" (TRL leaves it out of the weighted sum).

- `parses`:   1 when the task's language pack (`lang`, default vox) accepts the code of the answer
              — the bench's own verdict (`score_sample`: first fenced block, an unclosed fence, or
              the whole answer; an answer with no code line does not parse);
- `not_stub`: 1 when the bench's anti-stub check finds no placeholder and more than one line;
- `expects`:  the share of the task's `expect_contains` strings found in the code (None without);
- `tests`:    the share of the task's unit tests that pass in the sandbox (mens.rl.sandbox), for
              packs whose code runs (Python); None without tests.

`score(answer, task, weights)` gives the weighted total and each part, for ranking samples.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from mens.evaluate.bench import code_of, score_sample
from mens.evaluate.tasks import BenchTask
from mens.lang import get_pack
from mens.rl.sandbox import Limits, run_tests

RUNNABLE = ("python",)          # packs whose code the `tests` reward can execute
NAMES = ("parses", "not_stub", "expects", "tests")
DEFAULT_WEIGHTS = {"parses": 1.0, "not_stub": 0.5, "expects": 0.5, "tests": 1.0}


@dataclass
class Task:
    """What a reward needs of a prompt row."""

    lang: str = "vox"
    expect_contains: list[str] = field(default_factory=list)
    tests: str = ""

    @classmethod
    def of(cls, row: dict[str, Any]) -> "Task":
        return cls(lang=str(row.get("lang") or "vox"), expect_contains=list(row.get("expect_contains") or []),
                   tests=tests_source(row.get("tests")))


def tests_source(tests: Any) -> str:
    """A task's tests as one Python source of `test_*` functions: a string is kept, a list of
    statements becomes one function each (so every row's `tests` column has one type)."""
    if not tests:
        return ""
    if isinstance(tests, str):
        return tests
    body = []
    for i, stmt in enumerate(tests):
        lines = "\n".join("    " + line for line in str(stmt).splitlines()) or "    pass"
        body.append(f"def test_{i}():\n{lines}\n")
    return "\n".join(body)


def text_of(completion: Any) -> str:
    """A completion's text: TRL hands in a string, or (conversational) a list of messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion or "")


def _bench_score(answer: str, task: Task):
    return score_sample(answer, BenchTask(id="", category="", prompt="", expect_contains=task.expect_contains,
                                          lang=task.lang), get_pack(task.lang))


def reward_parses(answer: str, task: Task) -> float:
    return float(_bench_score(answer, task).parses)


def reward_not_stub(answer: str, task: Task) -> float:
    return float(_bench_score(answer, task).stub_reason is None)


def reward_expects(answer: str, task: Task) -> float | None:
    if not task.expect_contains:
        return None
    missing = _bench_score(answer, task).missing
    return 1.0 - len(missing) / len(task.expect_contains)


def reward_tests(answer: str, task: Task, limits: Limits = Limits()) -> float | None:
    if not task.tests or task.lang not in RUNNABLE:
        return None
    code = code_of(answer)
    if not code.strip():
        return 0.0
    return run_tests(code, task.tests, limits).score


_ONE: dict[str, Callable[[str, Task], float | None]] = {
    "parses": reward_parses, "not_stub": reward_not_stub, "expects": reward_expects, "tests": reward_tests}


def _rows(n: int, columns: dict[str, Any]) -> list[Task]:
    keys = ("lang", "expect_contains", "tests")
    return [Task.of({k: (columns[k][i] if isinstance(columns.get(k), list) else columns.get(k)) for k in keys})
            for i in range(n)]


def batch_reward(name: str, limits: Limits = Limits()) -> Callable[..., list[float | None]]:
    """The TRL-shaped reward `name` (its __name__ is `name`, which TRL logs it under)."""
    one = _ONE[name]

    def reward(completions: list[Any], **columns: Any) -> list[float | None]:
        answers = [text_of(c) for c in completions]
        tasks = _rows(len(answers), columns)
        if name == "tests":  # each run is a child process: run them side by side
            with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
                return list(pool.map(lambda at: reward_tests(at[0], at[1], limits), zip(answers, tasks)))
        return [one(a, t) for a, t in zip(answers, tasks)]

    reward.__name__ = name
    reward.__qualname__ = name
    return reward


def score(answer: str, task: Task, weights: dict[str, float] | None = None,
          limits: Limits = Limits()) -> tuple[float, dict[str, float | None]]:
    """(weighted total, each reward) of one answer; rewards that do not apply add nothing."""
    weights = DEFAULT_WEIGHTS if weights is None else weights
    parts: dict[str, float | None] = {}
    for name, w in weights.items():
        if w:
            parts[name] = reward_tests(answer, task, limits) if name == "tests" else _ONE[name](answer, task)
    total = sum(weights[n] * v for n, v in parts.items() if v is not None)
    return total, parts
