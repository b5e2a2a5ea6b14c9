import json
from pathlib import Path

import pytest

from mens.corpus import extract as extract_mod
from mens.corpus.extract import extract
from mens.corpus.units import read_units
from mens.errors import MensError


def rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def test_sources_and_docs_become_units_with_counted_drops(py_project, tmp_path):
    out = tmp_path / "out" / "units.jsonl"
    report = extract([py_project], out)
    units = list(read_units(out))
    by_kind = {}
    for u in units:
        by_kind.setdefault(u.kind, []).append(u)
    # geometry.py has four named constructs → a file unit and four construct units;
    # greet.py has one → a file unit only; golden.py two.
    files = {Path(u.path).name for u in by_kind["file"]}
    assert files == {"geometry.py", "greet.py", "golden.py"}
    geometry = [u for u in by_kind["construct"] if u.path.endswith("geometry.py")]
    assert [(u.construct, u.name) for u in geometry] == [
        ("const", "PI_ISH"), ("function", "circle_area"), ("function", "square_perimeter"), ("class", "Rect")]
    circle = geometry[1]
    assert circle.code.startswith("def circle_area(r):") and circle.doc_comment == "Area of a circle of radius r."
    assert circle.source.endswith("geometry.py:7") and circle.span[0] == 7 and circle.ast_hash
    assert circle.lang == "python" and circle.file_hash
    geo_file = next(u for u in by_kind["file"] if u.path.endswith("geometry.py"))
    assert geo_file.doc_comment.startswith("Geometry helpers") and "import" in geo_file.constructs
    # Docs: only the eligible page; a code unit per python block that parses, prose per section.
    code = by_kind["doc_code"]
    assert [u.name for u in code] == ["total", None]
    assert code[0].heading == "Loops" and code[0].context == "Here is how to sum a list with a loop:"
    assert code[0].frontmatter["status"] == "golden" and code[0].source.endswith("guide.md:18")  # the first code line
    prose = by_kind["doc_prose"]
    assert [u.heading for u in prose] == ["Loops"] and prose[0].lang == "python"
    assert "for loop walks" in prose[0].code
    assert report.dropped == {"binary": 1, "not_utf8": 1, "parse_error": 1, "doc_parse_error": 1,
                              "not_training_eligible": 1}
    assert report.counts["other_files"] == 1  # notes.txt; .hidden/ is not walked
    saved = json.loads((tmp_path / "out" / "units.extract_report.json").read_text())
    assert saved["stage"] == "extract" and saved["counts"]["units"] == len(units)
    assert set(saved["fingerprint"]) == {"inputs", "params", "packs", "code", "digest"}
    assert saved["fingerprint"]["packs"]["python"] and len(saved["fingerprint"]["inputs"]) == 8
    assert any(e["reason"] == "parse_error" and "broken.py" in e["where"] for e in saved["examples"])


def test_all_docs_flag_and_huge_files(py_project, tmp_path):
    (py_project / "pkg" / "huge.py").write_text("x = 1\n" * 1000)
    report = extract([py_project], tmp_path / "u.jsonl", docs_training_only=False, max_bytes=2000)
    assert report.dropped["huge"] == 1 and "not_training_eligible" not in report.dropped
    names = {u.name for u in read_units(tmp_path / "u.jsonl") if u.kind == "doc_code"}
    assert "draft" in names


def test_pool_and_serial_give_identical_output(py_project, tmp_path, monkeypatch):
    extract([py_project], tmp_path / "serial.jsonl", workers=1)
    monkeypatch.setattr(extract_mod, "SERIAL_BELOW", 0)
    extract([py_project], tmp_path / "pool.jsonl", workers=2)
    assert (tmp_path / "serial.jsonl").read_bytes() == (tmp_path / "pool.jsonl").read_bytes()


def test_incremental_reuses_unchanged_files_only(py_project, tmp_path):
    out = tmp_path / "u.jsonl"
    extract([py_project], out)
    (py_project / "pkg" / "greet.py").write_text('def greet(name):\n    return "hi " + name\n')
    report = extract([py_project], out, incremental=True)
    assert report.counts["files_reused"] == 3  # geometry.py, golden.py, guide.md (units-less files rerun)
    fresh = tmp_path / "fresh.jsonl"
    extract([py_project], fresh)
    assert out.read_bytes() == fresh.read_bytes()
    # Different parameters: nothing is reused.
    again = extract([py_project], out, incremental=True, max_bytes=10_000)
    assert again.counts["files_reused"] == 0


def test_incremental_reuses_nothing_after_the_unit_code_changed(py_project, tmp_path, monkeypatch):
    """After an upgrade of mens, a file's old units may not be what extract now makes of it."""
    from mens import fingerprint

    out = tmp_path / "u.jsonl"
    extract([py_project], out)
    assert extract([py_project], out, incremental=True).counts["files_reused"] == 4
    real = fingerprint.source_digest
    monkeypatch.setattr(fingerprint, "source_digest", lambda name: "new" if name == "mens.corpus.docs" else real(name))
    assert extract([py_project], out, incremental=True).counts["files_reused"] == 0


def test_bad_input_is_a_clear_error_and_writes_nothing(tmp_path, run_cli, py_project):
    out = tmp_path / "u.jsonl"
    code, _, err = run_cli("corpus", "extract", tmp_path / "missing", "-o", out)
    assert code == 2 and "mens: error: path not found" in err and not out.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.txt").write_text("x")
    code, _, err = run_cli("corpus", "extract", empty, "-o", out)
    assert code == 2 and "no units extracted" in err and not out.exists()
    assert list(tmp_path.glob(".u.jsonl*")) == []  # no temp file left behind
    with pytest.raises(MensError):
        extract([py_project], out, langs=["no-such-grammar-xyz"])


def test_cli_extract_writes_output_and_report(py_project, tmp_path, run_cli):
    out = tmp_path / "u.jsonl"
    code, _, _ = run_cli("corpus", "extract", py_project / "pkg", "-o", out)
    assert code == 0 and out.exists() and (tmp_path / "u.extract_report.json").exists()


def test_links_out_of_the_tree_are_skipped_and_counted(tmp_path, run_cli):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "real.py").write_text("def inside():\n    return 1\n")
    outside = tmp_path / "elsewhere.py"
    outside.write_text("def private_outside():\n    return 'not for training'\n")
    (root / "inside_link.py").symlink_to(root / "real.py")
    (root / "outside_link.py").symlink_to(outside)
    (root / "passwd.py").symlink_to("/etc/passwd")
    (root / "dangling.py").symlink_to(tmp_path / "nothing.py")
    out = tmp_path / "units.jsonl"
    report = extract([root], out)
    codes = "".join(u.code for u in read_units(out))
    assert "private_outside" not in codes and "root:" not in codes
    assert sorted(Path(u.path).name for u in read_units(out)) == ["inside_link.py", "real.py"]
    assert report.dropped["external_link"] == 2 and report.dropped["broken_link"] == 1
    example = next(e for e in report.examples if e["where"].endswith("outside_link.py"))
    assert str(outside) in example["message"] and "--follow-external-links" in example["message"]
    # Opting in reads the outside file (and /etc/passwd, which then fails to parse as Python).
    report = extract([root], out, follow_external_links=True)
    assert "private_outside" in "".join(u.code for u in read_units(out))
    assert "external_link" not in report.dropped and report.dropped["broken_link"] == 1
    # A path given on the command line is a root: a link to a file named there is inside.
    assert extract([root, outside], out).dropped["external_link"] == 1
    code, _, _ = run_cli("corpus", "extract", root, "-o", out, "--follow-external-links")
    assert code == 0 and "private_outside" in out.read_text()


def test_bom_and_crlf_line_ends_are_not_part_of_the_units(tmp_path, run_cli):
    """A file saved on Windows (BOM, CRLF) gives the same units as its LF twin, but its path."""
    for name, (bom, end) in {"lf": (b"", b"\n"), "win": (b"\xef\xbb\xbf", b"\r\n")}.items():
        (tmp_path / name / "docs").mkdir(parents=True)
        (tmp_path / name / "a.py").write_bytes(bom + end.join([b"def f():", b"    return 1", b""]))
        (tmp_path / name / "docs" / "d.md").write_bytes(bom + end.join(
            [b"---", b"training_eligible: true", b"---", b"# T", b"", b"```python", b"x = 1", b"```", b""]))
        code, _, err = run_cli("corpus", "extract", tmp_path / name, "-o", tmp_path / f"{name}.jsonl")
        assert code == 0, err
    lf, win = rows(tmp_path / "lf.jsonl"), rows(tmp_path / "win.jsonl")
    assert [u["kind"] for u in lf] == ["file", "doc_code"]
    drop = {"source", "path", "file_hash", "name"}
    assert [{k: v for k, v in u.items() if k not in drop} for u in win] == \
        [{k: v for k, v in u.items() if k not in drop} for u in lf]
    assert all("\r" not in u["code"] for u in win)


def test_files_without_code_are_dropped_as_empty(tmp_path):
    # A real package's empty `__init__.py` and a licence-only module made the pairs "Create the
    # Python file `__init__`." → an empty block (validate's empty_code) and → a bare comment.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "licence.py").write_text("# Copyright (c) the authors.\n#\n# SPDX-License-Identifier: MIT\n\n")
    # sympy/parsing/c/__init__.py: the prompt "Write Python code for this: Used for translating C
    # source code into a SymPy expression." was answered by that docstring.
    (pkg / "c.py").write_text('"""Used for translating C source code into a SymPy expression"""\n')
    (pkg / "real.py").write_text("def f():\n    return 1\n")
    (pkg / "script.py").write_text('"""Print a greeting."""\nprint("hello")\n')
    report = extract([pkg], tmp_path / "u.jsonl")
    assert report.dropped == {"empty": 3}
    assert [Path(u.path).name for u in read_units(tmp_path / "u.jsonl")] == ["real.py", "script.py"]
    assert {e["where"] for e in report.examples} == {f"{pkg / name}:1" for name in ("__init__.py", "licence.py", "c.py")}


def test_crlf_and_bom_files_give_the_units_of_the_plain_file(tmp_path):
    # A module saved on Windows (CRLF, often with a BOM), with non-ASCII names and docstrings:
    # its units, spans and pairs must be those of the same file saved with LF line ends, with no
    # carriage return left for the model to learn.
    source = ('"""Modul für Größen."""\n\n\ndef größe(x):\n    """Gibt die Größe zurück."""\n'
              '    return x * 2\n\n\nclass Ñandú:\n    """Ein Vogel 🐦."""\n\n    def 飛ぶ(self):\n'
              '        return "飛"\n')
    (tmp_path / "lf").mkdir()
    (tmp_path / "crlf").mkdir()
    (tmp_path / "lf" / "m.py").write_text(source, encoding="utf-8", newline="\n")
    (tmp_path / "crlf" / "m.py").write_bytes(b"\xef\xbb\xbf" + source.replace("\n", "\r\n").encode("utf-8"))
    for name in ("lf", "crlf"):
        extract([tmp_path / name], tmp_path / f"{name}.jsonl")
    lf, crlf = ([u.to_dict() for u in read_units(tmp_path / f"{name}.jsonl")] for name in ("lf", "crlf"))
    assert [u["name"] for u in crlf] == ["m", "größe", "Ñandú"]
    assert not any("\r" in u["code"] for u in crlf)
    strip = lambda u: {k: v for k, v in u.items() if k not in ("source", "path", "file_hash")}  # noqa: E731
    assert [strip(u) for u in crlf] == [strip(u) for u in lf]
    assert crlf[0]["file_hash"] != lf[0]["file_hash"]  # the bytes differ: --incremental re-reads it


def test_a_docs_block_that_does_not_parse_is_reported_at_its_line_in_the_page(tmp_path):
    page = tmp_path / "guide.md"
    page.write_text("---\ntraining_eligible: true\n---\n# Guide\n\nAn example:\n\n```python\n"
                    "import os\n\ndef f(:\n    pass\n```\n", encoding="utf-8")
    (tmp_path / "ok.py").write_text("x = 1\n")
    report = extract([tmp_path], tmp_path / "out" / "u.jsonl")
    [drop] = [e for e in report.examples if e["reason"] == "doc_parse_error"]
    # `def f(:` is line 11 of the page (line 3 of the block, which starts at line 9).
    assert drop["where"] == f"{page}:11" and drop["message"] == "11:7: invalid syntax"


def test_docs_prose_keeps_the_lines_of_tables_and_lists(tmp_path):
    # From docs/serving.md: the prose unit of "The API" was one line, `| route | | |---|---| | ...`.
    page = tmp_path / "api.md"
    page.write_text("---\ntraining_eligible: true\n---\n# The API\n\n"
                    "The server answers these routes, each described below in more detail, and every\n"
                    "route needs the key except the health check:\n\n"
                    "| route | what |\n|---|---|\n| `GET /health` | status, no key |\n| `GET /v1/models` | the names |\n\n"
                    "- **f16**: top-1 agrees on 90% of positions,\n  which is the usual bar;\n"
                    "- **q8_0**: on 80%.\n", encoding="utf-8")
    extract([tmp_path], tmp_path / "out" / "u.jsonl")
    [prose] = [u for u in read_units(tmp_path / "out" / "u.jsonl") if u.kind == "doc_prose"]
    assert prose.code == (
        "The server answers these routes, each described below in more detail, and every route needs "
        "the key except the health check:\n\n"
        "| route | what |\n|---|---|\n| `GET /health` | status, no key |\n| `GET /v1/models` | the names |\n\n"
        "- **f16**: top-1 agrees on 90% of positions, which is the usual bar;\n- **q8_0**: on 80%.")


def test_generated_files_are_dropped_with_their_marker(tmp_path):
    # The first lines of rich/_unicode_data/unicode13-0-0.py, sympy's ANTLR parsers and
    # sympy/polys/numberfields/resolvent_lookup.py; each became a whole-file pair (and a "fix the
    # syntax error" pair) of a tool's output. A docstring or a comment further down that says
    # "generated by" describes code, and keeps the file.
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "widths.py").write_text("# Auto generated by tools/make_width_tables.py\n"
                                   "# Data from wcwidth project (https://github.com/jquast/wcwidth)\n\n"
                                   "WIDTHS = [(0, 0, 0), (1, 31, -1)]\n")
    (pkg / "parser.py").write_text("# *** GENERATED BY `setup.py antlr`, DO NOT EDIT BY HAND ***\n"
                                   "#\n# Generated from ../LaTeX.g4, derived from latex2sympy\n\nX = 1\n")
    (pkg / "lookup.py").write_text('"""Lookup table for Galois resolvents."""\n'
                                   "# This table was generated by a call to\n# `generate_lambda_lookup()`.\n"
                                   "resolvent_coeff_lambdas = {}\n")
    (pkg / "hand.py").write_text('"""Components generated by v0 and imported with typed props."""\n'
                                 "import re\n\n# generated by scripts/generate_identifier_pattern.py\n"
                                 "pattern = re.compile('x')\n")
    report = extract([pkg], tmp_path / "u.jsonl")
    assert report.dropped == {"generated": 3}
    assert [Path(u.path).name for u in read_units(tmp_path / "u.jsonl")] == ["hand.py"]
    where = {e["where"]: e["message"] for e in report.examples}
    assert where[f"{pkg / 'lookup.py'}:2"] == "generated file: # This table was generated by a call to"
    assert f"{pkg / 'widths.py'}:1" in where and f"{pkg / 'parser.py'}:1" in where


UNDERSCORE_MIN = (  # the start of underscore.min.js 1.13.4 (MIT), closed so that it parses
    '!function(n,r){var t,e;"object"==typeof exports&&"undefined"!=typeof module?module.exports=r():'
    '"function"==typeof define&&define.amd?define("underscore",r):(n="undefined"!=typeof globalThis?'
    'globalThis:n||self,t=n._,(e=n._=r()).noConflict=function(){return n._=t,e})}(this,function(){'
    'var n="1.13.4",r="object"==typeof self&&self.self===self&&self||"object"==typeof global&&'
    'global.global===global&&global||Function("return this")()||{},e=Array.prototype,'
    'F=Object.prototype,P=e.push,f=e.slice,s=F.toString,q=F.hasOwnProperty;return{VERSION:n}});\n')


def test_minified_files_are_dropped(tmp_path):
    # /usr/share/javascript's underscore.min.js and sphinx's css3-mediaqueries.js (one line each)
    # became whole-file pairs; so did sympy's machine-written tables of expressions.
    pytest.importorskip("tree_sitter_javascript")
    src = tmp_path / "src"
    src.mkdir()
    (src / "underscore.min.js").write_text(UNDERSCORE_MIN)
    (src / "app.js").write_text("function add(a, b) {\n  return a + b;\n}\n")
    (src / "table.py").write_text("ROOTS = [" + ", ".join(f"{i}*x**{i} + {i + 1}*y" for i in range(60)) + "]\n"
                                  "OTHER = " + " + ".join(f"x**{i}" for i in range(120)) + "\n")
    (src / "hand.py").write_text("def f(x):\n    return x\n")
    report = extract([src], tmp_path / "u.jsonl", langs=["javascript"])
    assert report.dropped == {"minified": 2}
    assert {Path(u.path).name for u in read_units(tmp_path / "u.jsonl")} == {"app.js", "hand.py"}
    assert all("minified or machine-written" in e["message"] for e in report.examples)
