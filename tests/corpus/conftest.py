"""Small corpora for the corpus-stage tests: a Python project with docs, and broken inputs."""

import json
from pathlib import Path

import pytest

GEOMETRY = '''"""Geometry helpers: areas and perimeters of simple shapes."""
import math

PI_ISH = 3.14


def circle_area(r):
    """Area of a circle of radius r."""
    return math.pi * r * r


def square_perimeter(side):
    return 4 * side


class Rect:
    """An axis-aligned rectangle."""

    def __init__(self, w, h):
        self.w, self.h = w, h

    def area(self):
        return self.w * self.h
'''

GREET = '''def greet(name):
    """Say hello."""
    return f"hello {name}"
'''

GOLDEN = '''"""Golden: the reference fizzbuzz."""


def fizzbuzz(n):
    return "Fizz" * (n % 3 == 0) + "Buzz" * (n % 5 == 0) or str(n)


def test_fizzbuzz():
    assert fizzbuzz(15) == "FizzBuzz"
'''

GUIDE = '''---
title: Python guide
training_eligible: true
status: golden
---
# Python guide

Intro words that are not many.

## Loops

A for loop walks over the items of any iterable, one at a time, binding each item to the loop
variable in turn; an else clause runs when the loop was not ended by a break statement.

Here is how to sum a list with a loop:

```python
def total(xs):
    s = 0
    for x in xs:
        s += x
    return s
```

```python
print("script-ish top level")
```

```text
not code for any pack
```

## Broken

```python
def oops(:
    pass
```
'''

DRAFT = '''---
title: Draft
training_eligible: false
---
# Draft

```python
def draft():
    return 1
```
'''


@pytest.fixture
def py_project(tmp_path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "pkg" / "geometry.py").write_text(GEOMETRY)
    (root / "pkg" / "greet.py").write_text(GREET)
    (root / "pkg" / "golden.py").write_text(GOLDEN)
    (root / "pkg" / "broken.py").write_text("def broken(:\n    pass\n")
    (root / "pkg" / "binary.py").write_bytes(b"x = 1\n\x00\x01\x02")
    (root / "pkg" / "latin1.py").write_bytes("s = 'café'\n".encode("latin-1"))
    (root / "pkg" / "notes.txt").write_text("not a source file")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "secret.py").write_text("x = 1\n")
    (root / "docs" / "guide.md").write_text(GUIDE)
    (root / "docs" / "draft.md").write_text(DRAFT)
    return root


@pytest.fixture
def write_jsonl(tmp_path):
    def _write(name: str, rows: list) -> Path:
        path = tmp_path / name
        path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
        return path
    return _write
