import json

import pytest

pytest.importorskip("tree_sitter_rust")  # in the dev extra; grammar wheels need no network

from mens.corpus.extract import extract  # noqa: E402
from mens.corpus.pairs import make_pairs  # noqa: E402
from mens.corpus.validate import validate  # noqa: E402
from mens.errors import MensError  # noqa: E402
from mens.lang import get_pack, pack_for_fence  # noqa: E402
from mens.lang.treesitter import TreeSitterPack  # noqa: E402

RUST = """// Shapes.

/// Adds two numbers.
/// Never overflows in tests.
fn add(a: i32, b: i32) -> i32 { a + b }

struct Point { x: i32, y: i32 }

#[test]
fn adds() { assert_eq!(add(1, 2), 3); }

use std::io;
impl Point { fn norm(&self) -> i32 { self.x * self.x } }
const LIMIT: u32 = 5; // é
"""


def test_constructs_kinds_names_docs_and_spans():
    pack = get_pack("rust")
    assert isinstance(pack, TreeSitterPack) and pack.extensions == (".rs",) and "rs" in pack.fence_tags
    analysis = pack.analyze(RUST)
    assert analysis.ok
    got = [(c.kind, c.name) for c in analysis.constructs]
    assert got == [("function", "add"), ("struct", "Point"), ("test_function", "adds"), ("import", None),
                   ("impl", "Point"), ("const", "LIMIT")]
    add, test = analysis.constructs[0], analysis.constructs[2]
    assert add.doc == "Adds two numbers. Never overflows in tests."
    assert RUST[add.span.start:add.span.end] == "fn add(a: i32, b: i32) -> i32 { a + b }"
    assert RUST[test.span.start:test.span.end].startswith("#[test]\nfn adds()")  # the attribute is included
    assert (add.span.start_line, add.span.start_col) == (5, 1)


def test_syntax_errors_come_from_error_and_missing_nodes():
    pack = get_pack("rust")
    err = pack.check("fn add(a: i32 { a }")
    assert err is not None and err.line == 1 and "missing" in err.message
    err = pack.check("fn ok() {}\nfn é() { let x = ; }\n")
    assert err is not None and (err.line, err.col) == (2, 16)  # columns count characters, not bytes
    assert pack.check(RUST) is None


def test_structural_hash_ignores_comments_and_layout():
    pack = get_pack("rust")
    a = "fn f() -> i32 { 1 + 2 }\n"
    assert pack.structural_hash(a) == pack.structural_hash("// c\nfn f()->i32{\n  1+2 // three\n}")
    assert pack.structural_hash(a) != pack.structural_hash(a.replace("2", "3"))


def test_other_grammars_and_unknown_names():
    pytest.importorskip("tree_sitter_javascript")
    js = get_pack("javascript")
    kinds = [(c.kind, c.name) for c in js.analyze("export function f(a) { return a }\nclass A {}\nconst x = 1;\n").constructs]
    assert kinds == [("function", "f"), ("class", "A"), ("const", "x")]
    assert pack_for_fence("js", [js]) is js
    with pytest.raises(MensError, match="no tree-sitter grammar"):
        TreeSitterPack("surely_not_a_grammar")
    with pytest.raises(MensError, match="not a grammar name"):
        TreeSitterPack("../evil")


def test_fingerprint_names_the_grammar_version():
    pack = get_pack("rust")
    assert "tree-sitter-rust" in pack.grammar_version and len(pack.fingerprint()) == 16


def test_corpus_stages_with_lang_rust(tmp_path, run_cli):
    src = tmp_path / "src"
    src.mkdir()
    (src / "lib.rs").write_text(RUST)
    (src / "broken.rs").write_text("fn broken( {\n")
    (tmp_path / "guide.md").write_text("---\ntraining_eligible: true\n---\n# Adding\n\n```rust\n"
                                       "fn add(a: i32, b: i32) -> i32 { a + b }\n```\n")
    units = tmp_path / "units.jsonl"
    code, _, err = run_cli("corpus", "extract", src, tmp_path / "guide.md", "-o", units, "--lang", "rust")
    assert code == 0, err
    rows = [json.loads(line) for line in units.read_text().splitlines()]
    assert {r["kind"] for r in rows} == {"file", "construct", "doc_code"} and {r["lang"] for r in rows} == {"rust"}
    report = json.loads((tmp_path / "units.extract_report.json").read_text())
    assert report["dropped"] == {"parse_error": 1} and "rust" in report["fingerprint"]["packs"]
    make_pairs(units, tmp_path / "pairs.jsonl", workers=1)
    rep = validate(tmp_path / "pairs.jsonl", tmp_path / "v.jsonl", workers=1)
    assert rep.dropped.get("parse_error", 0) == 0 and rep.counts["code_checked"] > 5
