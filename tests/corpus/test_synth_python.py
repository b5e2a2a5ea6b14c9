"""Synthetic Python pairs (`mens generate-data --lang python`): every program parses with the real
Python pack and is what its pair claims, prompts ask for Python and quote the code's names,
output is reproducible, Vox output is what it was before languages, and no name of the held-out
Python bench is ever produced; the same of the Python code drills, and the Vox drills are what
they were before them."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import sys
from pathlib import Path

import pytest

from mens.corpus.synth.drills import code_drills, copy_drills
from mens.corpus.synth.generate import LANGS, SynthStats, code_of, drafts, generate
from mens.corpus.synth.templates.python import PY_RESERVED
from mens.errors import MensError
from mens.lang import get_pack
from mens.records import read_pairs

BENCH = Path(__file__).resolve().parents[2] / "examples" / "base" / "bench" / "python_heldout.jsonl"
ALL_ON = {"english_names": 1.0, "made_up_names": 1.0, "made_up_subjects": 0.5}


@pytest.fixture(scope="module")
def pack():
    return get_pack("python")


@pytest.fixture(scope="module")
def batch():
    """300 pairs with the defaults and 300 with every made-up option on, with their stats."""
    out = []
    for seed, kw in ((0, {}), (1, ALL_ON)):
        stats = SynthStats()
        out.append((list(generate(300, seed, stats=stats, lang="python", **kw)), stats))
    return out


def test_every_program_parses_and_is_the_kind_it_claims(batch, pack):
    for pairs, stats in batch:
        assert len(pairs) == stats.kept == 300 and not stats.exhausted
        assert stats.parse_failures <= 0.02 * stats.drafts, stats.failures  # made-up fields that are keywords
        assert set(stats.by_category) == {"function", "class", "const"}
        for pair in pairs:
            assert pair.lang == "python" and pair.response.startswith("```python\n") and pair.response.endswith("\n```")
            analysis = pack.analyze(code_of(pair))
            assert analysis.ok, (pair.source, analysis.error, code_of(pair))
            assert pair.category in {c.kind for c in analysis.constructs}, (pair.source, code_of(pair))


def test_prompts_ask_for_python_and_quote_the_names_the_code_declares(batch):
    for pairs, _ in batch:
        sources = {p.source.removeprefix("synthetic:").partition(":")[0] for p in pairs}
        assert sources == set(LANGS["python"].templates)
        for pair in pairs:
            assert ("Python" in pair.prompt or "```python\n" in pair.prompt) and "Vox" not in pair.prompt, pair.prompt
            if pair.metadata.get("task") == "rename":  # test_rename_edits_…
                continue
            code = code_of(pair)
            declared = re.findall(r"^(?:def|class) (\w+)", code, re.M)
            quoted = re.findall(r"`([A-Za-z_]\w*)", pair.prompt)
            assert declared[-1] in quoted, (pair.prompt, code)  # the function asked for is named
            assert all(q in code for q in quoted), (pair.prompt, code)


def test_signatures_in_prompts_are_the_codes(batch):
    quoted_signatures = 0
    for pairs, _ in batch:
        for pair in pairs:
            for name, sig in re.findall(r"`(\w+)(\([^`]*\) -> [^`]+)`", pair.prompt):
                assert f"def {name}{sig}:" in code_of(pair), (pair.prompt, code_of(pair))
                quoted_signatures += 1
    assert quoted_signatures > 300


def test_rename_edits_show_the_code_and_answer_it_renamed(batch):
    renames = [p for pairs, _ in batch for p in pairs if p.metadata.get("task") == "rename"]
    assert len(renames) > 60
    for pair in renames:
        shown = re.search(r"```python\n(.*?)```", pair.prompt, re.S).group(1)
        answer = code_of(pair)
        assert shown != answer and len(shown.splitlines()) == len(answer.splitlines())


def test_made_up_subjects_spell_out_their_dataclass_fields(batch):
    pairs, _ = batch[1]
    spelled = 0
    for pair in pairs:
        for name, body in re.findall(r"^@dataclass\nclass (\w+):\n((?:    .+\n)+)", code_of(pair), re.M):
            fields = [line.strip() for line in body.splitlines()]
            if all(f in pair.prompt for f in fields):
                spelled += 1
    assert spelled > 20


def test_deterministic_for_a_seed():
    first = [p.to_dict() for p in generate(80, 5, lang="python", **ALL_ON)]
    assert first == [p.to_dict() for p in generate(80, 5, lang="python", **ALL_ON)]
    assert first != [p.to_dict() for p in generate(80, 6, lang="python", **ALL_ON)]


def test_vox_output_is_what_it_was_before_languages():
    """The bytes `generate-data` wrote for Vox before --lang (main at 20f1fe8): the Python port
    must not move a single draw of the Vox stream. Update the digest only when a change to the
    Vox data is meant."""
    digest = hashlib.sha256()
    for seed, kw in ((0, {}), (1, ALL_ON)):
        for pair in generate(100, seed, **kw):
            digest.update((json.dumps(pair.to_dict(), ensure_ascii=False) + "\n").encode())
    assert digest.hexdigest() == "230950cfa26729f4a4b5316a93443763902a96722ff5b7e65d95961368c2a3de"


def _bench_names() -> set[str]:
    """What the bench's tasks name: each reference's functions, classes and methods, and every
    name a prompt quotes, less Python's own words (keywords, builtins, modules, dunders, self)."""
    names: set[str] = set()
    for line in BENCH.read_text(encoding="utf-8").splitlines():
        task = json.loads(line)
        names |= set(re.findall(r"^\s*(?:async )?(?:def|class) (\w+)", task["reference"], re.M))
        names |= set(re.findall(r"`([A-Za-z_]\w*)", task["prompt"]))
    return {n for n in names if not n.startswith("__")} - PY_RESERVED - set(sys.stdlib_module_names) - {"self"}


def test_no_name_of_the_held_out_bench_is_produced():
    bench = _bench_names()
    assert len(bench) > 100 and "kiln_cooldown_minutes" in bench
    for kw in ({}, ALL_ON):
        for _, draft, prompt, _ in itertools.islice(drafts(0, lang=LANGS["python"], **kw), 2500):
            made = set(re.findall(r"\b(?:def|class) (\w+)", draft.code)) | \
                set(re.findall(r"^([A-Z][A-Z0-9_]*)\b", draft.code, re.M)) | set(re.findall(r"`([A-Za-z_]\w*)", prompt))
            assert not made & bench, (made & bench, prompt)


def test_generate_data_command_writes_python_pairs_and_refuses_unknown_languages(run_cli, tmp_path):
    out = tmp_path / "py.jsonl"
    code, _, err = run_cli("generate-data", "--lang", "python", "--limit", "40", "--seed", "3", "-o", out)
    assert code == 0, err
    rows, _ = read_pairs(out)
    assert len(rows) == 40 and all(r.lang == "python" for r in rows)
    report = json.loads(out.with_name("py.generate_report.json").read_text())
    assert report["fingerprint"]["params"]["lang"] == "python" and "python" in report["fingerprint"]["packs"]
    assert report["counts"]["drafts"] == 40 + sum(report["dropped"].values())
    code, _, err = run_cli("generate-data", "--lang", "rust", "--limit", "5", "-o", tmp_path / "r.jsonl")
    assert code == 2 and "vox, python" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli("generate-data", "--lang", "python", "--kind", "copy-drills", "--limit", "5",
                           "-o", tmp_path / "d.jsonl")
    assert code == 2 and "Vox drills only" in err and "--kind code-drills" in err
    with pytest.raises(MensError, match="no templates"):
        next(generate(1, 0, lang="cobol"))


# ---------------------------------------------------------------- code drills in Python

# What a Python drill writes that the prompt does not hold: its keywords and type names.
DRILL_WORDS = {"def", "pass", "class", "from", "import", "dataclasses", "dataclass", "int", "str", "bool", "float",
               "list", "dict", "None"}


@pytest.fixture(scope="module")
def python_drills():
    return list(code_drills(2000, 0, 0.5, lang="python"))


def test_python_code_drills_compile_and_every_name_comes_from_the_prompt(python_drills, pack):
    """Every answer is a ```python fence (as the Python pairs') of code the Python pack parses and
    CPython compiles (no name twice in a signature), whose every other word the prompt holds."""
    shapes = set()
    for pair in python_drills:
        assert pair.lang == "python" and pair.response_mode == "code_only" and pair.source == "synthetic:copy"
        assert pair.response.startswith("```python\n") and pair.response.endswith("\n```"), pair.response
        code = code_of(pair)
        assert pack.analyze(code).ok, code
        compile(code, "<drill>", "exec")
        asked = set(re.findall(r"[A-Za-z_]\w*", pair.prompt))
        assert "Python" in asked and "Vox" not in asked, pair.prompt
        names = set(re.findall(r"[A-Za-z_]\w*", code)) - DRILL_WORDS
        assert names and names <= asked, (pair.prompt, code)
        shapes.add((code.split()[0], code.count("def ") > 1))
    assert shapes == {("def", False), ("def", True), ("from", False)}


def test_python_code_drills_declare_what_was_asked(python_drills):
    """The signature quoted is the one declared; the dataclass has the listed fields, in order, after
    its import (as templates/python.py writes a dataclass); the stubs are the listed names, in order."""
    for pair in python_drills:
        code, quoted = code_of(pair), re.findall(r"`([^`]+)`", pair.prompt)
        if code.startswith("from dataclasses import dataclass\n\n\n@dataclass\nclass "):
            head, *fields = code.splitlines()[4:]
            assert head == f"class {quoted[0]}:" and [f.strip() for f in fields] == quoted[1:], (pair.prompt, code)
        elif code.count("def ") > 1:
            assert re.findall(r"^def (\w+)\(\):\n    pass$", code, re.M) == quoted, (pair.prompt, code)
        else:
            assert code == f"def {quoted[0]}:\n    pass\n", (pair.prompt, code)


def test_python_code_drills_make_no_name_of_the_held_out_bench():
    bench = _bench_names()
    for pair in code_drills(2000, 1, 1.0, lang="python"):  # every name of English words: the likeliest to meet one
        made = set(re.findall(r"[A-Za-z_]\w*", code_of(pair))) - DRILL_WORDS
        assert not made & bench and not made & PY_RESERVED, (made & (bench | PY_RESERVED), pair.prompt)


def test_code_drills_are_deterministic_and_vox_drills_what_they_were_before_python():
    """The bytes of the Vox drills before Python drills (integrate at ea2ad67): Python's must not move
    a draw of the Vox stream. Update the digest only when a change to the Vox drills is meant."""
    digest = hashlib.sha256()
    for drills in (code_drills, copy_drills):
        for seed, english in ((0, 0.0), (1, 0.5)):
            for pair in drills(200, seed, english):
                digest.update((json.dumps(pair.to_dict(), ensure_ascii=False) + "\n").encode())
    assert digest.hexdigest() == "e640bfdce6075643c34ac7a057ca31b4002295786ef581176ca6021594ca740b"
    first = [p.to_dict() for p in code_drills(50, 4, 0.5, lang="python")]
    assert first == [p.to_dict() for p in code_drills(50, 4, 0.5, lang="python")]
    assert first != [p.to_dict() for p in code_drills(50, 5, 0.5, lang="python")]
    with pytest.raises(MensError, match="no code drills"):
        next(code_drills(1, 0, lang="cobol"))


def test_generate_data_command_writes_python_code_drills(run_cli, tmp_path):
    out = tmp_path / "drills.jsonl"
    code, _, err = run_cli("generate-data", "--lang", "python", "--kind", "code-drills", "--limit", "30",
                           "--seed", "2", "--english-names", "0.5", "-o", out)
    assert code == 0, err
    rows, _ = read_pairs(out)
    assert [r.to_dict() for r in rows] == [p.to_dict() for p in code_drills(30, 2, 0.5, lang="python")]
    report = json.loads(out.with_name("drills.generate_report.json").read_text())
    params = report["fingerprint"]["params"]
    assert params["lang"] == "python" and params["kind"] == "code-drills" and "python" in report["fingerprint"]["packs"]
