"""Vox conformance suite: mens must give the reference parser's verdict on every case.

tests/lang/vox_conformance/cases/<area>/<case>.vox are small programs, one rule each, valid forms
and near-misses. verdicts.json holds the reference parser's verdict on each (recorded by
`scripts/record_vox_verdicts` from `vox-ref-oracle`, the real Vox compiler's lexer and parser);
this test needs no oracle. Cases under `script/` are parsed in script mode, the rest in module
mode. See tests/lang/vox_conformance/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mens.lang import get_pack

SUITE = Path(__file__).parent / "vox_conformance"
CASES = SUITE / "cases"
VERDICTS: dict[str, dict] = json.loads((SUITE / "verdicts.json").read_text(encoding="utf-8"))

# Every area folder the suite must cover (each with at least MIN_PER_AREA cases).
AREAS = {
    "actor", "commas", "components", "decl_fn", "decorators", "eof_quirks", "expressions",
    "form", "fragments", "imports", "lambda", "lexer", "match", "mobile", "model_answers", "newlines", "patterns",
    "quotes", "routes", "script", "state_machine", "statements", "tables", "tokens", "toplevel",
    "types", "url", "v0", "view_calls", "workflow",
}
MIN_CASES = 400
MIN_PER_AREA = 10

# Rejected cases where mens may report the error on a different line than the reference does
# (the verdict must still match). Each entry needs a comment saying why the line differs and why
# that is acceptable. Keep this set small; it starts empty.
KNOWN_LINE_DIFFERENCES: set[str] = set()


def _read(rel: str) -> str:
    # Bytes, not text mode: some cases hold CR / CRLF / BOM characters that must reach the parser.
    return (CASES / rel).read_bytes().decode("utf-8")


def _case_files() -> list[str]:
    return sorted(p.relative_to(CASES).as_posix() for p in CASES.rglob("*") if p.is_file())


_PACK = None


def _pack():
    global _PACK
    if _PACK is None:
        _PACK = get_pack("vox")
    return _PACK


@pytest.mark.parametrize("case", sorted(VERDICTS))
def test_case_matches_reference(case: str):
    want = VERDICTS[case]
    got = _pack().analyze(_read(case), script=want["mode"] == "script")
    where = f"{want['line']}:{want['col']}"
    if want["ok"]:
        assert got.ok, f"the reference accepts {case}; mens rejects it: {got.error}"
        return
    assert not got.ok, (f"the reference rejects {case} at {where} ({want['message']}); "
                        f"mens accepts it")
    if case not in KNOWN_LINE_DIFFERENCES:
        assert got.error.line == want["line"], (
            f"{case}: the reference reports line {want['line']} ({where}: {want['message']}); "
            f"mens reports {got.error}")


def test_every_case_has_a_verdict_and_every_verdict_a_case():
    files = _case_files()
    assert all(f.endswith(".vox") for f in files), [f for f in files if not f.endswith(".vox")]
    missing = sorted(set(files) - set(VERDICTS))
    stale = sorted(set(VERDICTS) - set(files))
    assert not missing, f"cases with no recorded verdict (run scripts/record_vox_verdicts): {missing}"
    assert not stale, f"verdicts for cases that no longer exist: {stale}"


def test_verdicts_are_well_formed():
    for rel, v in VERDICTS.items():
        assert set(v) == {"mode", "ok", "line", "col", "message"}, rel
        assert v["mode"] == ("script" if rel.split("/", 1)[0] == "script" else "module"), rel
        if v["ok"]:
            assert v["line"] is v["col"] is v["message"] is None, rel
        else:
            assert isinstance(v["line"], int) and v["line"] >= 1, rel
            assert isinstance(v["col"], int) and v["col"] >= 1, rel
            assert isinstance(v["message"], str) and v["message"], rel
    assert list(VERDICTS) == sorted(VERDICTS), "verdicts.json must be sorted by path"


def test_known_line_differences_are_rejected_cases():
    for rel in KNOWN_LINE_DIFFERENCES:
        assert rel in VERDICTS and not VERDICTS[rel]["ok"], rel


def test_suite_size_and_coverage():
    assert len(VERDICTS) >= MIN_CASES
    per_area: dict[str, int] = {}
    for rel in VERDICTS:
        area = rel.split("/", 1)[0]
        per_area[area] = per_area.get(area, 0) + 1
    assert set(per_area) == AREAS, (sorted(set(per_area) - AREAS), sorted(AREAS - set(per_area)))
    thin = {a: n for a, n in per_area.items() if n < MIN_PER_AREA}
    assert not thin, f"areas with fewer than {MIN_PER_AREA} cases: {thin}"
    accepted = sum(v["ok"] for v in VERDICTS.values())
    # Roughly half valid forms, half near-misses.
    assert 0.35 <= accepted / len(VERDICTS) <= 0.65, accepted
