"""Other languages' idioms written into real Vox programs: the near-misses a model (or a person)
who knows Python, Rust or TypeScript writes when it writes Vox — `->` for `to`, `let mut`,
`elif`, `List<int>`, `f"…"`, `x++`, `|x|` lambdas, `;` line ends, `struct`, `use std::x`.

`bench/vox_conformance.py` applies one to three of these to a program of examples/vox or of the
synthetic generator (the "idioms" source) and asks both parsers. Each entry is a regular
expression over the program's text and the replacements one match may get (`\\1` for its
groups); which match and which replacement is the fuzzer's seeded choice. The table names
forms, not verdicts: whether the reference accepts a mutant is for the oracle to say.
"""

from __future__ import annotations

import re

IDIOMS: list[tuple[str, list[str]]] = [
    # functions: the return arrow, the keyword, modifiers
    (r"\) to ([^{\n]+) \{", [r") -> \1 {", r"): \1 {", r") to \1:", r") \1 {", r") => \1 {"]),
    (r"\bfn (\w+)", [r"def \1", r"function \1", r"func \1", r"fun \1", r"pub fn \1", r"async fn \1",
                     r"pub async fn \1", r"fn<T> \1", r"fn \1 "]),
    (r"\bfn\((\w+)(: \w+)?\)", [r"|\1|", r"\1 =>", r"lambda \1:", r"fn(\1) =>", r"(\1) =>", r"fn \1 ->",
                                r"\\\1 ->"]),
    (r"\breturn ([^\n]+)", [r"return \1;", r"return(\1)", r"\1", r"return \1 \1", r"ret \1", r"yield \1"]),
    # bindings and statements
    (r"\blet (\w+) =", [r"let mut \1 =", r"var \1 =", r"const \1 =", r"\1 :=", r"let \1: int =", r"let \1 ==",
                        r"let mut \1: int =", r"val \1 =", r"\1 ="]),
    (r"(\S)\n", [r"\1;\n"]),
    (r"(\w+) = (\w+) \+ 1", [r"\1 += 1", r"\1++", r"++\1", r"\1 + = 1"]),
    (r"\bif (.+?) \{", [r"if (\1) {", r"if \1:", r"if \1 then {", "if (\\1)\n{", r"if \1 { "]),
    (r"\} else if ", ["} elif ", "} else\nif ", "}\nelse if ", "} elsif ", "} else { if "]),
    (r"\} else \{", ["}\nelse {", "} else: {", "else {", "} else if {"]),
    (r"\bwhile (.+?) \{", [r"while (\1) {", r"while \1:", r"while \1 do {"]),
    (r"\bfor (\w+) in (.+?) \{", [r"for (\1 in \2) {", r"for \1 in \2:", r"for (let \1 of \2) {", r"for \1 of \2 {",
                                  r"for let \1 in \2 {", r"foreach \1 in \2 {", r"for \1, i in \2 {",
                                  r"for (\1, i) in \2 {"]),
    (r"\bmatch (\w+) \{", [r"match (\1) {", r"switch \1 {", r"match \1:", r"case \1 of {", r"when \1 {"]),
    (r"\n(\s+)(\w+)(\(.*?\))? ->", [r"\n\1case \2\3 ->", r"\n\1\2\3 =>", r"\n\1| \2\3 ->", r"\n\1\2\3:",
                                     r"\n\1.\2\3 ->"]),
    # operators and literals
    (r" -> ", [" => ", ": ", " = ", " -> -> ", " ->\n", " - > "]),
    (r" => ", [" -> ", ": "]),
    (r"\band\b", ["&&", "AND", "and and"]),
    (r"\bor\b", ["||", "OR"]),
    (r"\bnot ", ["!", "not not ", "! "]),
    (r"\btrue\b", ["True", "TRUE", "yes"]),
    (r"\bfalse\b", ["False", "nil", "null", "None"]),
    (r" == ", [" === ", " = ", " is ", " eq ", " != ", " <> "]),
    (r" != ", [" !== ", " <> ", " isnt ", " ~= ", " not= "]),
    (r" (<|>|<=|>=) ", [r" \1= ", r" =\1 ", r" \1\1 "]),
    (r"\|> (\w+)\(", [r"| \1(", r".\1(", r"|>> \1(", r"|> \1 (", "|>\n\\1("]),
    (r'"([^"\n]*)"', [r'f"\1"', r"`\1`", r'r"\1"', r"'\1'", r'"""\1"""', r'b"\1"', r'"\1" + ""', r'"\1{x}"']),
    (r"(\d+)", [r"\1.0", r"\1_000", r"0x\1", r"\1L", r"\1u32", r"-\1", r"\1e3", r"\1."]),
    # types
    (r"List\[(\w+)\]", [r"List<\1>", r"list[\1]", r"Vec<\1>", r"\1[]", r"[\1]", r"List[\1,]", r"List[ \1 ]",
                        r"List[\1][]"]),
    (r"Option\[(\w+)\]", [r"Option<\1>", r"\1?", r"Optional[\1]", r"Option[\1]?"]),
    (r"Result\[(\w+)\]", [r"Result<\1>", r"Result[\1, str]", r"Result<\1, str>"]),
    (r"\bint\b", ["i32", "Int", "number", "integer"]),
    (r"\bstr\b", ["String", "string", "&str"]),
    (r"\btype (\w+) \{", [r"struct \1 {", r"class \1 {", r"enum \1 {", r"type \1 = {", r"interface \1 {",
                          r"type \1 {,", r"data \1 {", r"record \1 {"]),
    (r"\n(\s+)(\w+): (\w+)\n", [r"\n\1\2: \3,\n", r"\n\1\3 \2\n", r"\n\1\2 \3\n", r"\n\1let \2: \3\n",
                                r"\n\1\2: \3;\n", r"\n\1pub \2: \3\n", r"\n\1\2: \3 = 0\n"]),
    # modules, comments, decorators
    (r"\bimport ([\w.]+)", [r"import \1;", r"use \1", r"from \1 import *", r"import \1 as x", r"import \1.*",
                            r'import "\1"', r"#include \1", r"require \1"]),
    (r"\n(\s*)//", [r"\n\1#", r"\n\1/*", r"\n\1--", r"\n\1///", r"\n\1/ /"]),
    (r"\n(\s*)#", [r"\n\1//", r"\n\1##"]),
    (r"@(\w+)\(", [r"@\1 (", r"@ \1(", r"#[\1(", r"@\1()("]),
    (r"@(\w+)\n", ["@\\1()\n", "@\\1;\n", "@\\1 @\\1\n", "#[\\1]\n", "@\\1\n\n"]),
    # layout: braces, calls, commas, member access, blank lines
    (r"\{\n", ["{{\n", "{\n{\n", "\n{\n", "{ \n", "{\t\n", "{\r\n", "{ // c\n", "{ # c\n"]),
    (r"\n\}", ["\n}}", "\n};", "\nend", "\n} ", "\n}\n}", "\n)"]),
    (r"(\w+)\(", [r"\1 (", "\\1\n(", r"\1.("]),
    (r", ", [",", " , ", ",, ", ";", " "]),
    (r"(\w+)\.(\w+)", [r"\1::\2", r"\1->\2", r"\1?.\2", r"\1!.\2", r"\1 . \2", r"\1..\2"]),
    (r"\n", ["\n\n", "\n    \n", "\n\t", "\r\n"]),
]
_COMPILED = [(re.compile(p), repls) for p, repls in IDIOMS]


def idiom_mutant(text: str, rng, edits: int) -> tuple[str, int, str] | None:
    """`text` with `edits` idioms written in (fewer where no pattern matches): the new text, the
    offset of the first edit and what was done; None when nothing applied."""
    done, first = [], None
    for _ in range(edits):
        for _try in range(10):  # a pattern may not occur in this program
            pattern, repls = rng.choice(_COMPILED)
            found = list(pattern.finditer(text))
            if not found:
                continue
            m = rng.choice(found)
            new = m.expand(rng.choice(repls))
            text = text[:m.start()] + new + text[m.end():]
            first = m.start() if first is None else min(first, m.start())
            done.append(f"{m.group(0)[:30]!r} -> {new[:30]!r}")
            break
    return (text, first, "; ".join(done)) if done else None
