"""Each reward on good, broken, empty and hostile answers; the sandbox stops what it must."""

from __future__ import annotations

import time

import pytest

from mens.rl.rewards import Task, batch_reward, reward_expects, reward_not_stub, reward_parses, reward_tests, score
from mens.rl.sandbox import Limits, run_tests

VOX_GOOD = "```vox\nfn add(a: int, b: int) to int {\n    let c = a + b\n    return c\n}\n```"
VOX_BROKEN = "```vox\nfn add(a: int, b: int) to int {\n    let c = a + \n    return c\n```"
VOX_STUB = "```vox\nfn add(a: int, b: int) to int {\n    // TODO\n    ...\n}\n```"
PY_GOOD = "```python\ndef add(a, b):\n    total = a + b\n    return total\n```"
PY_WRONG = "```python\ndef add(a, b):\n    total = a - b\n    return total\n```"
PY_TESTS = ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(2, 2) == 4"]
FAST = Limits(timeout_s=2.0, memory_mb=256)

HOSTILE = {
    "reads a file outside": "def add(a, b):\n    return a + b\nprint(open('/etc/passwd').read())\n",
    "reads the repo": "def add(a, b):\n    return a + b\nopen('../../pyproject.toml')\n",
    "loops forever": "def add(a, b):\n    return a + b\nwhile True:\n    pass\n",
    "forks": "import os\ndef add(a, b):\n    return a + b\nos.fork()\n",
    "runs a shell": "import os\ndef add(a, b):\n    return a + b\nos.system('echo hi > /tmp/mens-pwned')\n",
    "allocates 10 GB": "def add(a, b):\n    return a + b\nblob = bytearray(10 * 2**30)\n",
    "opens a socket": "import socket\ndef add(a, b):\n    return a + b\nsocket.create_connection(('1.1.1.1', 80), 1)\n",
    "writes outside": "def add(a, b):\n    return a + b\nopen('/tmp/mens-pwned', 'w').write('x')\n",
    "cheats in a test": "def add(a, b):\n    return a + b\nimport sys\nsys.exit(0)\n",
}


def test_parses_good_broken_empty():
    vox = Task(lang="vox")
    assert reward_parses(VOX_GOOD, vox) == 1.0
    assert reward_parses(VOX_BROKEN, vox) == 0.0
    assert reward_parses("", vox) == 0.0
    assert reward_parses("Sure! Here is how you would do it.", vox) == 0.0
    assert reward_parses(PY_GOOD, Task(lang="python")) == 1.0
    assert reward_parses("```python\ndef add(a, b)\n    return a\n```", Task(lang="python")) == 0.0


def test_not_stub_good_stub_empty():
    vox = Task(lang="vox")
    assert reward_not_stub(VOX_GOOD, vox) == 1.0
    assert reward_not_stub(VOX_STUB, vox) == 0.0
    assert reward_not_stub("", vox) == 0.0
    assert reward_not_stub("```python\ndef f():\n    raise NotImplementedError\n```", Task(lang="python")) == 0.0


def test_expects_share_of_needles():
    task = Task(lang="vox", expect_contains=["fn add", "return", "a * b"])
    assert reward_expects(VOX_GOOD, task) == pytest.approx(2 / 3)
    assert reward_expects("", task) == 0.0
    assert reward_expects(VOX_GOOD, Task(lang="vox")) is None


def test_tests_good_wrong_empty_and_not_applicable():
    task = Task(lang="python", tests=PY_TESTS)
    from mens.rl.rewards import tests_source

    task.tests = tests_source(PY_TESTS)
    assert reward_tests(PY_GOOD, task, FAST) == 1.0
    assert reward_tests(PY_WRONG, task, FAST) == pytest.approx(1 / 3)
    assert reward_tests("", task, FAST) == 0.0
    assert reward_tests("```python\ndef add(a, b)\n```", task, FAST) == 0.0
    assert reward_tests(PY_GOOD, Task(lang="python"), FAST) is None
    assert reward_tests(VOX_GOOD, Task(lang="vox", tests="def test_x():\n    pass\n"), FAST) is None


def test_tests_as_functions_count_each():
    tests = "def test_small():\n    assert add(1, 2) == 3\n\ndef test_wrong():\n    assert add(2, 2) == 5\n"
    run = run_tests("def add(a, b):\n    return a + b\n", tests, FAST)
    assert (run.status, run.passed, run.total) == ("ok", 1, 2)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_answers_are_stopped_and_score_zero(name, tmp_path):
    from mens.rl.rewards import tests_source

    task = Task(lang="python", tests=tests_source(PY_TESTS))
    start = time.monotonic()
    run = run_tests(HOSTILE[name], task.tests, FAST)
    assert time.monotonic() - start < FAST.timeout_s + 3
    assert run.score == 0.0, run
    assert reward_tests(f"```python\n{HOSTILE[name]}```", task, FAST) == 0.0
    import os

    assert not os.path.exists("/tmp/mens-pwned")


def test_hostile_kinds_are_named():
    assert run_tests(HOSTILE["loops forever"], PY_TESTS, Limits(timeout_s=1)).status == "timeout"
    assert run_tests(HOSTILE["forks"], PY_TESTS, FAST).status == "violation"
    assert run_tests(HOSTILE["reads a file outside"], PY_TESTS, FAST).message == "open /etc/passwd"


def test_sandbox_cwd_is_a_fresh_temp_dir():
    code = "import os\ndef here():\n    return os.getcwd()\n"
    run = run_tests(code, ["assert 'mens-sandbox-' in here()",
                           "import os\nassert set(os.listdir('.')) == {'answer.py', 'tests.json'}"], FAST)
    assert (run.passed, run.total) == (2, 2), run


def test_batch_reward_is_trl_shaped():
    parses = batch_reward("parses")
    assert parses.__name__ == "parses"
    assert parses(completions=[VOX_GOOD, VOX_BROKEN], prompts=["p", "p"], lang=["vox", "vox"]) == [1.0, 0.0]
    conversational = [[{"role": "assistant", "content": VOX_GOOD}]]
    assert parses(completions=conversational, lang=["vox"]) == [1.0]
    tests = batch_reward("tests", FAST)
    from mens.rl.rewards import tests_source

    src = tests_source(PY_TESTS)
    assert tests(completions=[PY_GOOD, PY_WRONG, VOX_GOOD], lang=["python", "python", "vox"],
                 tests=[src, src, ""]) == [1.0, pytest.approx(1 / 3), None]


def test_score_weights_and_skips_what_does_not_apply():
    total, parts = score(VOX_GOOD, Task(lang="vox"), {"parses": 1.0, "not_stub": 0.5, "expects": 1.0})
    assert parts == {"parses": 1.0, "not_stub": 1.0, "expects": None}
    assert total == 1.5


# Calls that change the file system without opening a file: each raises its own audit event (or,
# for mkfifo/mknod, none at all), which the "open" check alone never saw — a test once truncated,
# chmod-ed and re-dated a host file and removed a host directory, scoring 1.
OUTSIDE_FS = {
    "truncates": "import os\nos.truncate({victim!r}, 0)\n",
    "chmods": "import os\nos.chmod({victim!r}, 0o600)\n",
    "re-dates": "import os\nos.utime({victim!r}, (0, 0))\n",
    "removes a dir": "import os\nos.rmdir({victim_dir!r})\n",
    "makes a dir": "import os\nos.mkdir({outside!r})\n",
    "hard-links": "import os\nos.link({victim!r}, {outside!r})\n",
    "hard-links in": "import os\nos.link({victim!r}, 'mine')\nopen('mine', 'w').write('')\n",
    "symlinks": "import os\nos.symlink('/x', {outside!r})\n",
    "makes a fifo": "import os\nos.mkfifo({outside!r})\n",  # no such function there: the answer fails
    "re-imports posix": "import sys\ndel sys.modules['posix']\nimport posix\nposix.mkfifo({outside!r})\n",
    "writes through a dir fd": "import os\nfd = os.open({host_dir!r}, os.O_RDONLY)\n"
                               "os.close(os.open('new', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n",
}


@pytest.mark.parametrize("name", sorted(OUTSIDE_FS))
def test_file_system_changes_outside_are_stopped(name, tmp_path):
    import os

    victim, victim_dir, outside = tmp_path / "victim", tmp_path / "victim_dir", tmp_path / "made"
    victim.write_text("keep")
    victim.chmod(0o644)
    victim_dir.mkdir()
    stamp = victim.stat().st_mtime
    host_dir = os.path.dirname(os.__file__)  # a directory the sandbox may read (the standard library)
    code = OUTSIDE_FS[name].format(victim=str(victim), victim_dir=str(victim_dir), outside=str(outside),
                                   host_dir=host_dir)
    run = run_tests(code, ["assert True"], FAST)
    made = os.path.join(host_dir, "new")
    if os.path.exists(made):  # pragma: no cover - only when the sandbox failed
        os.remove(made)
        pytest.fail("wrote into the standard library through a directory fd")
    assert run.score == 0.0 and run.status == ("ok" if name == "makes a fifo" else "violation"), run
    assert victim.read_text() == "keep" and victim.stat().st_mode & 0o777 == 0o644
    assert victim.stat().st_mtime == stamp and victim_dir.is_dir() and not outside.exists()


def test_file_system_changes_inside_the_temp_dir_are_allowed():
    code = ("import os\nos.mkdir('sub')\nopen('sub/x', 'w').write('1')\nos.chmod('sub/x', 0o600)\n"
            "os.utime('sub/x', (0, 0))\nos.truncate('sub/x', 0)\nos.symlink('sub/x', 'ln')\n")
    assert run_tests(code, ["assert os.path.getsize('sub/x') == 0"], FAST).score == 1.0
