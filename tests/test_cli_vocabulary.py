"""One vocabulary across every command (issue 36): every command's parser in the command table
(mens.cli) is walked, and a concept spelled two ways, a spelling that means two things in two
commands, an alias a command forgot or a stray one fails here; the README and docs use the
canonical spellings (mens.flags)."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

import pytest

from mens.cli import build_parser
from mens.flags import ALIASES, LEGACY, METAVARS, SHARED, dtype_value
from paths import REPO

TOP_LEVEL = {"-h", "--help", "--version", "--debug", "--quiet", "-q"}
# Spellings whose kind differs between commands on purpose, with the reason.
KIND_DIFFERS = {"--dry-run": "push writes the files it would upload to the DIR it takes; pipeline only says what "
                             "would run"}


def commands() -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in dict.fromkeys(action.choices.values()):
                    found[sub.prog] = sub
                    walk(sub)

    walk(build_parser())
    return found


def kind(action: argparse.Action) -> tuple[str, str]:
    """(switch | value, the value's type): str, Path and text converters are all "text"."""
    if action.nargs == 0:
        return "switch", ""
    t = action.type
    return "value", {int: "int", float: "float"}.get(t, "text" if t in (None, str, Path, dtype_value) else repr(t))


def flags():
    """(command, option string, action, visible) for every flag of every command."""
    for name, parser in commands().items():
        for action in parser._actions:
            for opt in action.option_strings:
                if opt not in TOP_LEVEL:
                    yield name, opt, action, action.help is not argparse.SUPPRESS


FLAGS = list(flags())
VISIBLE = [(c, o, a) for c, o, a, v in FLAGS if v]
ALL_ALIASES = {a for aliases in ALIASES.values() for a in aliases}


def test_the_walk_sees_every_command():
    names = set(commands())
    assert {"mens train", "mens rl", "mens dpo", "mens bench", "mens serve", "mens merge", "mens export",
            "mens corpus prefs", "mens corpus extract", "mens gate", "mens pipeline"} <= names
    assert len(FLAGS) > 200


def test_a_hidden_spelling_is_a_declared_alias_of_the_flag_beside_it():
    for command, opt, action, visible in FLAGS:
        if visible:
            continue
        canonical = [o for c, o, a in VISIBLE if c == command and a.dest == action.dest and o.startswith("--")]
        assert len(canonical) == 1, (command, opt)
        assert opt in ALIASES.get(canonical[0], ()) or LEGACY.get((command, opt)) == canonical[0], \
            f"{command} {opt}: an undeclared second spelling of {canonical[0]} (add it to mens.flags)"


def test_every_alias_is_accepted_wherever_its_flag_is():
    hidden = {(c, o): a.dest for c, o, a, v in FLAGS if not v}
    for command, opt, action in VISIBLE:
        for alias in ALIASES.get(opt, ()):
            assert hidden.get((command, alias)) == action.dest, f"{command} {opt} does not accept {alias}"
    for (command, old), new in LEGACY.items():
        dest = next((a.dest for c, o, a in VISIBLE if c == command and o == new), None)
        assert dest is not None and hidden.get((command, old)) == dest, f"{command} {old} is no longer read as {new}"


def test_no_alias_is_a_flag_of_its_own():
    for command, opt, action in VISIBLE:
        assert opt not in ALL_ALIASES, f"{command} {opt} is an alias: spell it {_canonical_of(opt)}"
        assert (command, opt) not in LEGACY, f"{command} {opt} is an older spelling: {LEGACY[(command, opt)]}"


def _canonical_of(alias: str) -> str:
    return next(c for c, aliases in ALIASES.items() if alias in aliases)


def test_a_spelling_means_one_thing_in_every_command():
    by_opt = defaultdict(list)
    for command, opt, action in VISIBLE:
        by_opt[opt].append((command, action))
    for opt, uses in by_opt.items():
        if len({c for c, _ in uses}) < 2:
            continue
        assert opt in SHARED, f"{opt} is used by {sorted(c for c, _ in uses)}: say what it means in mens.flags.SHARED"
        dests = {a.dest for _, a in uses}
        assert len(dests) == 1 or (opt == "-o" and dests <= {"output", "output_dir"}), (opt, dests)
        if opt not in KIND_DIFFERS:
            kinds = {(c, kind(a)) for c, a in uses}
            assert len({k for _, k in kinds}) == 1, f"{opt} takes different values: {sorted(kinds)}"


def test_the_shared_table_names_only_shared_spellings():
    users = defaultdict(set)
    for command, opt, _ in VISIBLE:
        users[opt].add(command)
    assert not [opt for opt in SHARED if len(users[opt]) < 2]


def test_a_concept_is_spelled_one_way_in_every_command():
    by_dest = defaultdict(set)
    for command, opt, action in VISIBLE:  # an action's first long name (`--x` of `--x/--no-x`)
        if opt == next((o for o in action.option_strings if o.startswith("--")), None):
            by_dest[action.dest].add((command, opt))
    for dest, uses in by_dest.items():
        spellings = {o for _, o in uses}
        assert len(spellings) == 1, f"{dest} is spelled {sorted(uses)}"


def shown(action: argparse.Action) -> str:
    """What `--help` shows for a flag's value: its choices, or its metavar."""
    if action.nargs == 0:
        return ""
    if action.choices:
        return "{" + ",".join(action.choices) + "}"
    return str(action.metavar or action.dest.upper())


def test_a_shared_value_is_shown_one_way():
    for command, opt, action in VISIBLE:
        if opt in METAVARS and not action.choices and action.nargs != 0:
            assert shown(action) == METAVARS[opt], f"{command} {opt} shows {shown(action)} (mens.flags.METAVARS)"


def test_rl_and_train_help_agree_on_their_shared_flags():
    """`mens rl --help` and `mens train --help` (issue 36): the same flags, read into the same
    settings, shown the same way; rl's --device offers what TRL trains on (no mps)."""
    rl = {o: a for c, o, a in VISIBLE if c == "mens rl"}
    train = {o: a for c, o, a in VISIBLE if c == "mens train"}
    shared = set(rl) & set(train)
    assert {"--model", "--output-dir", "-o", "--max-steps", "--lr", "--seed", "--device", "--bench", "--config",
            "--force-restart", "--save-interval"} <= shared
    for opt in shared - {"--device"}:
        assert (rl[opt].dest, kind(rl[opt]), shown(rl[opt])) == (train[opt].dest, kind(train[opt]),
                                                                 shown(train[opt])), opt
    assert set(rl["--device"].choices) == set(train["--device"].choices) - {"mps"}


@pytest.mark.parametrize("argv, dest, value", [
    (["rl", "--model", "m", "-o", "r", "--prompts", "p", "--steps", "3", "--learning-rate", "1e-3",
      "--num-generations", "4", "--max-completion-length", "9", "--save-steps", "2"],
     ("max_steps", "lr", "samples", "max_new_tokens", "save_interval"), (3, 1e-3, 4, 9, 2)),
    (["dpo", "--model", "m", "-o", "r", "--data-dir", "d", "--batch-size", "2", "--max-length", "64"],
     ("micro_batch", "seq_len"), (2, 64)),
    (["train", "--num-train-epochs", "2", "--per-device-train-batch-size", "3", "--gradient-accumulation-steps",
      "5", "--learning-rate", "1e-4", "--max-seq-length", "128"],
     ("epochs", "micro_batch", "grad_accum", "lr", "seq_len"), (2.0, 3, 5, 1e-4, 128)),
    (["merge", "run", "--out", "m", "--dtype", "f16"], ("output_dir", "dtype"), ("m", "fp16")),
    (["gate", "--run", "r", "--policy", "p", "--bench", "b.json"], ("bench_results",), (Path("b.json"),)),
    (["decontaminate", "--bench", "b", "--data", "x.jsonl", "y.jsonl"], ("train_data",),
     ([Path("x.jsonl"), Path("y.jsonl")],)),
    (["export", "run", "--gguf", "o.gguf", "--system", "Be brief."], ("system_prompt",), ("Be brief.",)),
    (["corpus", "gather", "--output", "src"], ("output_dir",), (Path("src"),)),
    (["dpo", "--model", "m", "-o", "r", "--data-dir", "d", "--device", "auto"], ("device",), ("auto",)),
])
def test_aliases_and_older_spellings_parse_as_the_flag(argv, dest, value):
    args = build_parser().parse_args(argv)
    assert tuple(getattr(args, d) for d in dest) == value


# A line of the docs may name an alias where it says that it is one.
_EXPLAINED = re.compile(r"\balias|\balso\b|TRL|transformers'|older spelling", re.I)
_OTHER_SPELLING = re.compile(r"(?<![\w-])(%s)(?![\w-])" % "|".join(
    re.escape(s) for s in sorted(ALL_ALIASES | {old for _, old in LEGACY}, key=len, reverse=True)))


def test_the_readme_and_docs_use_one_vocabulary():
    bad = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        lines = page.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines, 1):
            found = list(_OTHER_SPELLING.finditer(line))
            if not found or re.search(r"\b(bench|scripts)/", line):  # (their own flags)
                continue
            before = " ".join(lines[max(0, n - 4):n - 1])  # a sentence or command line may wrap
            if _EXPLAINED.search(before + " " + line):
                continue
            for m in found:
                if m[1] in ALL_ALIASES:
                    bad.append(f"{page.name}:{n}: {m[1]} (say {_canonical_of(m[1])})")
                    continue
                named = re.findall(r"mens (?:corpus )?[a-z][\w-]*", before + " " + line[:m.start()])
                new = named and LEGACY.get((named[-1], m[1]))  # the command the flag is given to
                if new:
                    bad.append(f"{page.name}:{n}: {named[-1]} {m[1]} (say {new})")
    assert not bad, "\n".join(bad)
