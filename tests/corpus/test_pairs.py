import json
from pathlib import Path

from mens.corpus import pairs as pairs_mod
from mens.corpus.extract import extract
from mens.corpus.pairs import make_pairs
from mens.lang import extract_code, get_pack


def rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def build(py_project, tmp_path, seed=0, name="pairs.jsonl", **kw):
    units = tmp_path / "units.jsonl"
    if not units.exists():
        extract([py_project], units)
    out = tmp_path / name
    report = make_pairs(units, out, seed=seed, **kw)
    return out, report


def test_every_pair_kind_with_contract_fields(py_project, tmp_path):
    out, report = build(py_project, tmp_path)
    got = rows(out)
    kinds = {(r["lane"], r["metadata"]["unit"]) for r in got}
    assert {("codegen", "file"), ("codegen", "construct"), ("codegen", "doc_code"), ("docs_qa", "doc_prose"),
            ("followup", "construct"), ("error_correction", "file"), ("error_correction", "doc_code")} <= kinds
    python = get_pack("python")
    for r in got:
        assert r["schema_version"] == "mens.pair.v1" and r["lang"] == "python" and ":" in r["source"]
        if r["response_mode"] == "code_only":
            response = r["messages"][-1]["content"] if "messages" in r else r["response"]
            code, tag = extract_code(response)
            assert tag == "python" and python.check(code) is None
    prose = next(r for r in got if r["lane"] == "docs_qa")
    assert prose["response_mode"] == "prose_only" and prose["category"] == "docs" and "Loops" in prose["prompt"]
    assert prose["rating"] == 5  # the page is status: golden
    ratings = {r["source"].split("/")[-1].split(":")[0]: r["rating"] for r in got if r["lane"] == "codegen"}
    assert ratings["golden.py"] == 4 and ratings["greet.py"] == 4  # module docstring "Golden:" is not a status
    circle = next(r for r in got if r.get("metadata", {}).get("name") == "circle_area" and r["lane"] == "codegen")
    assert "circle_area" in circle["prompt"] and circle["category"] == "function"
    geo = next(r for r in got if r["lane"] == "codegen" and r["metadata"]["unit"] == "file"
               and "geometry" in r["source"])
    assert geo["prompt"].endswith("Geometry helpers: areas and perimeters of simple shapes.")
    assert report.counts["pairs"] == len(got)


def test_error_correction_is_verified_by_the_parser(py_project, tmp_path):
    out, _ = build(py_project, tmp_path)
    python = get_pack("python")
    fixes = [r for r in rows(out) if r["lane"] == "error_correction"]
    assert fixes
    for r in fixes:
        broken, _ = extract_code(r["prompt"])
        err = python.check(broken)
        assert err is not None and str(err) in r["prompt"]  # the parser's own message
        assert python.check(extract_code(r["response"])[0]) is None


def test_follow_up_is_a_two_turn_conversation(py_project, tmp_path):
    out, _ = build(py_project, tmp_path)
    follow = [r for r in rows(out) if r["lane"] == "followup"]
    assert len(follow) == 2  # geometry.py and golden.py have two or more constructs
    msgs = follow[0]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant"]
    first, _ = extract_code(msgs[1]["content"])
    assert extract_code(msgs[3]["content"])[0].startswith(first.rstrip())


def test_same_seed_is_byte_identical_and_seeds_differ(py_project, tmp_path, monkeypatch):
    a, _ = build(py_project, tmp_path, seed=7, name="a.jsonl")
    b, _ = build(py_project, tmp_path, seed=7, name="b.jsonl")
    c, _ = build(py_project, tmp_path, seed=8, name="c.jsonl")
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    monkeypatch.setattr(pairs_mod, "SERIAL_BELOW", 0)
    d, _ = build(py_project, tmp_path, seed=7, name="d.jsonl", workers=2)
    assert d.read_bytes() == a.read_bytes()


def test_no_error_correction_flag(py_project, tmp_path):
    out, report = build(py_project, tmp_path, error_correction=False)
    assert not any(r["lane"] == "error_correction" for r in rows(out))


def test_bad_units_file_fails_cleanly_or_is_skipped_leniently(tmp_path, run_cli, write_jsonl, py_project):
    extract([py_project / "pkg" / "greet.py"], tmp_path / "good.jsonl")
    good = (tmp_path / "good.jsonl").read_text().splitlines()
    bad = write_jsonl("bad.jsonl", good + ["{oops", json.dumps({"kind": "nope"})])
    out = tmp_path / "p.jsonl"
    code, _, err = run_cli("corpus", "pairs", bad, "-o", out)
    assert code == 2 and "bad.jsonl:2" in err and not out.exists()
    code, _, err = run_cli("corpus", "pairs", bad, "-o", out, "--lenient")
    assert code == 0 and out.exists()
    report = json.loads((tmp_path / "p.pairs_report.json").read_text())
    assert report["dropped"] == {"malformed_unit": 2}
    code, _, err = run_cli("corpus", "pairs", tmp_path / "nope.jsonl", "-o", out)
    assert code == 2 and "file not found" in err


def test_the_same_sources_elsewhere_make_the_same_pairs(tmp_path):
    """Two clones of a repository in different places make the same pairs: each unit's prompt is
    drawn by what it is, not where it lies (seeding by the absolute path once gave every clone
    its own corpus, and its own fine-tune). Only the `source` paths differ."""
    import shutil

    repo = Path(__file__).resolve().parents[2]
    made = []
    for place in (tmp_path / "a", tmp_path / "b" / "deeper"):
        shutil.copytree(repo / "examples" / "vox", place / "vox")
        shutil.copytree(repo / "examples" / "docs", place / "docs")
        extract([place / "vox", place / "docs"], place / "units.jsonl")
        make_pairs(place / "units.jsonl", place / "pairs.jsonl", seed=0)
        made.append([{k: v for k, v in r.items() if k != "source"} for r in rows(place / "pairs.jsonl")])
    assert made[0] == made[1] and len(made[0]) > 100


def test_followup_request_names_the_docstring_summary_only(tmp_path):
    # From rich/__init__.py: the follow-up turn was "Next, also write the function `reconfigure`
    # that reconfigures the global console by replacing it with another. Args: *args (Any): …".
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "console.py").write_text(
        'def get_console():\n    """Get a global Console instance."""\n    return None\n\n\n'
        'def reconfigure(*args, **kwargs):\n    """Reconfigures the global console by replacing it with another.\n\n'
        '    Args:\n        *args (Any): Positional arguments for the replacement Console.\n'
        '        **kwargs (Any): Keyword arguments for the replacement Console.\n    """\n', encoding="utf-8")
    extract([tmp_path / "src"], tmp_path / "units.jsonl")
    requests = set()
    for seed in range(12):  # one of three templates carries the doc comment
        make_pairs(tmp_path / "units.jsonl", tmp_path / "pairs.jsonl", seed=seed)
        [followup] = [r for r in rows(tmp_path / "pairs.jsonl") if r["lane"] == "followup"]
        requests.add(followup["messages"][2]["content"])
    assert "Next, also write the function `reconfigure`: Reconfigures the global console by replacing it " \
           "with another." in requests
    assert not any("Args" in r or "\n" in r for r in requests)


def test_file_prompts_count_kinds_in_plain_english():
    # rich/highlighter.py was asked for as "Implement `highlighter` in Python with 6 classs and a function."
    import random

    from mens.corpus.templates import file_prompt
    from mens.corpus.units import Unit

    unit = Unit(kind="file", lang="python", source="highlighter.py:1", path="highlighter.py", span=[1, 1, 9, 1],
                construct="class", name="highlighter", code="",
                constructs=["import", "function"] + ["class"] * 6 + ["test_class"] * 2 + ["const"] * 2)
    prompts = {file_prompt(unit, "Python", random.Random(seed)) for seed in range(20)}
    assert all(p.endswith("with 6 classes, 2 constants, a function and 2 test classes.") for p in prompts)
    # Sphinx's doctools.js: "… with 5 expression statements and a if statement."
    unit.constructs = ["expression_statement", "if_statement", "async_function"]
    assert file_prompt(unit, "JavaScript", random.Random(0)).endswith(
        "with an async function, an expression statement and an if statement.")
