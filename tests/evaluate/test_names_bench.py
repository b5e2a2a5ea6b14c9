"""bench/names_bench.py: held-out synthetic requests whose needles are made-up names — every task
is one `mens bench` reads, its reference parses and holds its needles, no needle is a domain
word, and a seed writes the same bench."""

from __future__ import annotations

import subprocess
import sys

from paths import REPO

from mens.evaluate.tasks import load_tasks
from mens.lang import get_pack


def test_the_names_bench_is_reproducible_and_its_needles_are_made_up(tmp_path):
    script = REPO / "bench" / "names_bench.py"
    for name in ("a", "b"):
        subprocess.run([sys.executable, str(script), "-o", str(tmp_path / name), "--n", "20"], check=True,
                       capture_output=True)
    text = (tmp_path / "a" / "names.jsonl").read_text()
    assert text == (tmp_path / "b" / "names.jsonl").read_text()
    tasks = [task for task, _ in load_tasks(tmp_path / "a")]
    assert len(tasks) == 20
    vox = get_pack("vox")
    for task in tasks:
        assert vox.check(task.reference) is None, task.id
        assert task.expect_contains and all(n in task.reference and f"`{n}" in task.prompt
                                            for n in task.expect_contains), task.id
        assert not any(n in ("name", "title", "total") for n in task.expect_contains)
