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


# ---------------------------------------------------------------- viable prefixes

RUST_PROGRAM = r"""//! A small crate.
use std::collections::HashMap;
use std::fmt::{self, Display};

/// A shape with a name.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Circle { r: f64 },
    Rect(f64, f64),
    Empty,
}

impl Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Circle { r } if *r > 0.0 => write!(f, "circle {r:.2}"),
            Shape::Rect(w, h) => write!(f, "rect {}x{}", w, h),
            _ => f.write_str("empty"),
        }
    }
}

pub trait Area {
    fn area(&self) -> f64;
    fn double(&self) -> f64 where Self: Sized { self.area() * 2.0 }
}

impl Area for Shape {
    fn area(&self) -> f64 {
        match *self {
            Shape::Circle { r } => std::f64::consts::PI * r * r,
            Shape::Rect(w, h) => w * h,
            Shape::Empty => 0.0,
        }
    }
}

const LIMIT: usize = 1_000;
static GREETING: &str = "hello \"world\"\n";

fn tally<'a, T: AsRef<str> + ?Sized>(words: &'a [&'a T]) -> HashMap<&'a str, usize> {
    let mut counts = HashMap::new();
    for w in words.iter().take(LIMIT) {
        *counts.entry(w.as_ref()).or_insert(0) += 1;
    }
    let raw = r#"a "raw" string"#;
    let bytes = b"bytes";
    let c = 'x';
    let closure = |x: i32| -> i32 { x << 2 | 1 };
    let _ = (raw, bytes, c, closure(3), 0xff_u8, 1e-3, [0u8; 4], &mut vec![1, 2][..]);
    if let Some(n) = counts.get("a") {
        println!("{} {:?}", n, counts);
    } else if counts.is_empty() {
        return counts;
    }
    while let Some(_) = None::<i32> {
        break;
    }
    loop {
        break;
    }
    counts
}

mod tests {
    use super::*;

    #[test]
    fn areas() {
        let s = Shape::Rect(2.0, 3.0);
        assert_eq!(s.area(), 6.0);
        assert!(matches!(s, Shape::Rect(..)));
    }
}

async fn fetch(url: &str) -> Result<String, Box<dyn std::error::Error>> {
    let body = reqwest::get(url).await?.text().await?;
    Ok(body)
}

struct Wrapper<T>(T);

impl<T: Display> Wrapper<T> {
    pub fn show(&self) -> String { format!("[{}]", self.0) }
}

macro_rules! square {
    ($x:expr) => { $x * $x };
}
"""

JS_PROGRAM = r"""// A small module.
import { readFile } from "node:fs/promises";
import * as path from 'node:path';

/** A shape. */
export class Shape {
  #secret = 1;
  static count = 0;

  constructor(name, ...sides) {
    this.name = name ?? "anon";
    this.sides = sides;
    Shape.count++;
  }

  get perimeter() {
    return this.sides.reduce((a, b) => a + b, 0);
  }

  *[Symbol.iterator]() {
    yield* this.sides;
  }

  async load(file) {
    const text = await readFile(path.join(".", file), { encoding: "utf8" });
    return JSON.parse(text)?.shapes || [];
  }
}

const LIMIT = 1_000;
let counter = 0, other = null;
var legacy = undefined;

function tally(words = [], { limit = LIMIT } = {}) {
  const counts = new Map();
  for (const w of words.slice(0, limit)) {
    counts.set(w, (counts.get(w) || 0) + 1);
  }
  for (let i = 0; i < words.length; i += 2) {
    if (i % 3 === 0 && words[i] !== "x") continue;
    else if (i > 10) break;
  }
  for (const key in counts) { counter--; }
  const re = /ab+c/gi, tpl = `count ${counts.size} of ${words.length}`;
  const obj = { a: 1, 'b': [1, 2, 3], [`k${counter}`]: tpl, ...other, f() { return re; } };
  const { a, b: [first, ...rest] } = obj;
  switch (typeof first) {
    case "number":
      return a + first * 2 ** 3;
    default:
      break;
  }
  try {
    JSON.parse("{");
  } catch (err) {
    console.error(err instanceof SyntaxError ? "syntax" : err);
  } finally {
    counter = counter > 0 ? counter - 1 : 0;
  }
  do { counter <<= 1; } while (counter < 8 && !legacy);
  return rest.length ? counts : new Map([[1, 2]]);
}

export default async function* stream(items) {
  for await (const item of items) {
    yield item?.value;
  }
}

label: for (;;) { break label; }
const arrow = async (x) => { await null; return void x; };
new Shape("sq", 1, 1, 1, 1);
"""


def test_every_prefix_of_a_real_program_is_viable():
    pytest.importorskip("tree_sitter_javascript")
    for lang, program in (("rust", RUST), ("rust", RUST_PROGRAM), ("javascript", JS_PROGRAM)):
        pack = get_pack(lang)
        assert pack.check(program) is None
        for cut in range(len(program) + 1):
            assert pack.viable_prefix(program[:cut]), (lang, program[max(0, cut - 60):cut])


def test_prefixes_ending_inside_a_token_or_a_construct_are_viable():
    pytest.importorskip("tree_sitter_javascript")
    cases = {
        "rust": ["fn f(", "fn f() -", "fn main() { let x = [1,", "fn f() { match x { A =", 'fn f() { let s = "ab',
                 'fn f() { let s = r#"ab', 'fn f() { let s = r#"a "', "impl A { fn f(&self) -> i32 { self.",
                 "fn f() { let x = 0x", "fn f() { let x = 1e-", "fn f() { x.iter().ma", "fn f() { if a { b } el",
                 "fn f() { let c = '", "fn f() { loop { br", "fn f() { let x = retur", "pub(cra", "#[deri",
                 "fn f() { let x: Vec<Vec<i32>", "fn f() { a::", "// just a comment", "/* open comment",
                 "fn f() { x =", ""],
        "javascript": ["function f(", "x = [1,", "if (a) {\n", "class A {\n  #", "const s = 'ab", "const t = `a ${b",
                       "const t = `a ${b} c", "x = a =", "x = a !", "x = a ?.", "const f = (a) =", "export c",
                       "x = 1.", "x = 0x", "for (const a o", "async functi", "x = { a: 1, ...", "/* c"],
    }
    for lang, texts in cases.items():
        pack = get_pack(lang)
        for text in texts:
            assert pack.viable_prefix(text), (lang, text)


def test_prefixes_that_no_continuation_can_mend_are_not_viable():
    pytest.importorskip("tree_sitter_javascript")
    cases = {
        "rust": ["fn f() { let x = );", ")", "fn f() {}\n}", "struct A { x: i32 } }", "fn f() -> { let x = 1;",
                 "use std::;", "fn 1f() {", "fn f() { let x = 1 2 ", "fn f() { (1, 2] }", "fn f() { let x = (1 + ) "],
        "javascript": ["x = )", ")", "let x = 1 2 ", "function f() { return return ", "if (a)) {", "x = (1, 2]",
                       "const = 5", "x = ) + (", "function f(:"],
    }
    for lang, texts in cases.items():
        pack = get_pack(lang)
        for text in texts:
            assert not pack.viable_prefix(text), (lang, text)
