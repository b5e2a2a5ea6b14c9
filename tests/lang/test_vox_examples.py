"""Every example program parses, every invalid one fails with its expected message, and the
constructs found in a sample of files are the right ones. Also the `mens vox` commands."""

import json
from pathlib import Path

import pytest

from mens.lang import get_pack
from mens.lang.vox import TAXONOMY

REPO = Path(__file__).resolve().parents[2]
VALID = sorted((REPO / "examples" / "vox").rglob("*.vox"))
INVALID = sorted((REPO / "examples" / "vox-invalid").glob("*.vox"))
SCRIPTS = sorted((REPO / "examples" / "vox-script").glob("*.vox"))
PACK = get_pack("vox")


def test_corpus_is_big_enough():
    assert len(VALID) >= 45
    assert sum(len(p.read_text().splitlines()) for p in VALID) >= 1000
    assert len(INVALID) >= 15


@pytest.mark.parametrize("path", VALID, ids=lambda p: str(p.relative_to(REPO / "examples" / "vox")))
def test_example_parses(path):
    a = PACK.analyze(path.read_text())
    assert a.ok, f"{path}:{a.error}"
    assert a.constructs, "every example declares something"


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_example_fails_with_expected_message(path):
    text = path.read_text()
    first = text.splitlines()[0]
    assert first.startswith("// expect: "), "invalid files start with their expected message"
    expected = first[len("// expect: "):].strip()
    a = PACK.analyze(text)
    assert not a.ok
    assert expected in a.error.message
    # The error is reported inside the program, after the comment header.
    assert 2 <= a.error.line <= len(text.splitlines()) + 1


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_scripts_parse_in_script_mode_only(path):
    text = path.read_text()
    assert PACK.analyze(text, script=True).ok
    assert not PACK.analyze(text).ok


def test_examples_cover_the_whole_taxonomy():
    seen = set()
    for path in VALID:
        for c in PACK.analyze(path.read_text()).constructs:
            seen.add(c.kind)
            seen.update(c.tags)
    assert seen == set(TAXONOMY)


def _constructs(rel):
    a = PACK.analyze((REPO / "examples" / "vox" / rel).read_text())
    assert a.ok
    return [(c.kind, c.name) for c in a.constructs]


def test_constructs_of_todo_app():
    assert _constructs("app/todo_app.vox") == [
        ("import", "std.time"), ("table", "Todo"), ("index", "Todo.by_done"), ("type", "Filter"),
        ("query", "todos"), ("mutation", "add_todo"), ("mutation", "toggle"),
        ("component", "TodoPage"), ("routes", None), ("test", "test_add_empty"),
        ("mcp_tool", "mcp_add_todo"),
    ]


def test_constructs_of_sample_files():
    assert _constructs("ops/workflows.vox") == [
        ("activity", "load_open_tasks"), ("activity", "send_email"),
        ("workflow", "daily_digest"), ("workflow", "fan_out")]
    assert _constructs("ai/mcp.vox") == [
        ("mcp_tool", "search_notes"), ("mcp_tool", "create_task"), ("mcp_tool", "ping"),
        ("mcp_resource", "notes_resource"), ("mcp_resource", "open_tasks_resource")]
    assert _constructs("ui/mobile.vox") == [
        ("mobile", "back_button"), ("mobile", "push"), ("mobile", "deep_link")]
    assert _constructs("tasks/lifecycle.vox") == [
        ("state_machine", "TaskLifecycle"), ("state_machine", "Review")]
    assert _constructs("ops/tests.vox") == [
        ("test", "test_empty_title"), ("test", "test_preview_short"), ("test", "test_preview_long"),
        ("forall", "prop_valid_titles"), ("forall", "prop_preview_never_longer")]
    assert [k for k, _ in _constructs("notes/server.vox")] == ["server_fn", "server_fn"]
    assert [k for k, _ in _constructs("app/consts.vox")] == ["const"] * 8
    assert _constructs("ui/tokens.vox") == [("tokens", None)]
    assert _constructs("ui/v0.vox") == [("v0_component", "Hero"), ("v0_component", "PricingTable")]
    assert _constructs("ai/training.vox") == [("function", "step"), ("workflow", "train_tagger")]


def test_ai_functions_are_tagged():
    a = PACK.analyze((REPO / "examples/vox/ai/functions.vox").read_text())
    tagged = {c.name for c in a.constructs if "ai_function" in c.tags}
    assert tagged == {"summarize", "suggest_tags", "triage", "related_notes", "fill_in", "classify"}


def test_spans_slice_whole_declarations_and_docs_exclude_metadata():
    text = (REPO / "examples/vox/app/todo_app.vox").read_text()
    a = PACK.analyze(text)
    by_name = {c.name: c for c in a.constructs}
    table = by_name["Todo"]
    assert text[table.span.start:table.span.end].startswith("@table type Todo {")
    assert text[table.span.start:table.span.end].endswith("}")
    assert table.doc == "A todo item."          # not the ANCHOR line above it
    page = by_name["TodoPage"]
    assert text[page.span.start:page.span.end].endswith("    }\n}")
    assert by_name["std.time"].doc is None       # frontmatter and @training_prompt are not docs
    # Every construct's slice parses again on its own.
    for c in a.constructs:
        assert PACK.analyze(text[c.span.start:c.span.end]).ok, c.name


# ------------------------------------------------------------------ CLI


def test_cli_check_accepts_examples(run_cli):
    code, out, err = run_cli("vox", "check", REPO / "examples" / "vox")
    assert code == 0, out
    assert out.strip().endswith(f"{len(VALID)} files, {len(VALID)} parsed, 0 failed")


def test_cli_check_rejects_invalid_with_locations(run_cli):
    code, out, _ = run_cli("vox", "check", REPO / "examples" / "vox-invalid")
    assert code == 1
    lines = out.strip().splitlines()
    assert lines[-1] == f"{len(INVALID)} files, 0 parsed, {len(INVALID)} failed"
    assert all(":" in ln and ": error: " in ln for ln in lines[:-1])


def test_cli_check_json_warnings_and_script(run_cli, tmp_path):
    f = tmp_path / "q.vox"
    f.write_text("fn f(ok: bool) -> int {\n    if !ok { return 1; }\n    return 2\n}\n")
    code, out, _ = run_cli("vox", "check", "--warnings", f)
    assert code == 0
    assert f"{f}:1:16: warning: '->' return type is deprecated" in out
    assert f"{f}:2:8: warning: dropped character '!'" in out
    code, out, _ = run_cli("vox", "check", "--json", f)
    data = json.loads(out)
    assert data["summary"] == {"files": 1, "parsed": 1, "failed": 0, "warnings": 3}
    s = tmp_path / "s.vox"
    s.write_text('let x = 1\nprint(x)\n')
    assert run_cli("vox", "check", s)[0] == 1
    assert run_cli("vox", "check", "--script", s)[0] == 0


def test_cli_missing_path_is_a_user_error(run_cli, tmp_path):
    code, _, err = run_cli("vox", "check", tmp_path / "nope.vox")
    assert code == 2
    assert err.startswith("mens: error: no such file or folder")


def test_cli_check_stdin(run_cli, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("fn f() {\n"))
    code, out, _ = run_cli("vox", "check", "-")
    assert code == 1
    assert "<stdin>:2:1: error: unexpected end of input" in out


def test_cli_constructs(run_cli):
    path = REPO / "examples/vox/ui/routes.vox"
    code, out, _ = run_cli("vox", "constructs", path)
    assert code == 0
    assert "routes" in out and "9-19" in out
    code, out, _ = run_cli("vox", "constructs", "--json", REPO / "examples/vox/ai/functions.vox")
    data = json.loads(out)
    cons = data["files"][0]["constructs"]
    assert cons[0]["kind"] == "function" and cons[0]["name"] == "summarize"
    assert cons[0]["tags"] == ["ai_function"] and cons[0]["doc"] == "Summarises a note in one sentence."


@pytest.mark.parametrize("path", VALID[::3], ids=lambda p: p.name)
def test_construct_spans_are_ordered_and_reparse(path):
    text = path.read_text()
    cons = PACK.analyze(text).constructs
    for a, b in zip(cons, cons[1:]):
        assert a.span.end <= b.span.start
    for c in cons:
        piece = text[c.span.start:c.span.end]
        assert piece == piece.strip()
        again = PACK.analyze(piece).constructs
        assert [(x.kind, x.name) for x in again] == [(c.kind, c.name)], piece
