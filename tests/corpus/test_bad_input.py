"""Bad input to `mens corpus …` and `mens vox …`: each case is one line
`mens: error: … (where) — what to do`, exit code 2, no traceback, and nothing written — not even
a temp file.

A case is (argv, exit code, a phrase the error line must contain); `{t}` is the case's folder,
which holds the inputs made by `inputs()`."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from paths import EXAMPLES

GOOD = {"prompt": "add", "response": "```python\ndef add(a, b):\n    return a + b\n```", "lang": "python"}
UNIT = {"kind": "file", "lang": "python", "source": "a.py:1", "path": "a.py", "span": [1, 1, 2, 1],
        "construct": "function", "name": "a", "code": "def a():\n    return 1\n"}
DEEP = "[" * 100_000


def inputs(t: Path) -> None:
    line = json.dumps(GOOD) + "\n"
    (t / "pairs.jsonl").write_text(line)
    (t / "units.jsonl").write_text(json.dumps(UNIT) + "\n")
    (t / "deep.jsonl").write_text(line + DEEP + "\n")
    (t / "list_row.jsonl").write_text(line + "[1, 2]\n")
    (t / "deep_units.jsonl").write_text(json.dumps(UNIT) + "\n" + DEEP + "\n")
    (t / "latin1.jsonl").write_bytes(line.encode() + '{"prompt": "café"}\n'.encode("latin-1"))
    (t / "binary.jsonl").write_bytes(b"\x00\x01\x02PK\x03\x04\xff\xfe" * 64)
    (t / "latin1.vox").write_bytes("fn f() to int {\n    return 1 // café\n}\n".encode("latin-1"))
    (t / "binary.vox").write_bytes(b"fn f() to int {\n\x00\x01}\n")
    (t / "tokenizer.json").write_bytes(b"\x00\x01\x02")
    (t / "surrogate.jsonl").write_text(line + json.dumps({**GOOD, "prompt": "lone \ud800"}) + "\n")
    (t / "mix_deep.yaml").write_text("sources: " + DEEP + "\n")
    (t / "mix_binary.yaml").write_bytes(b"sources: \xff\xfe\x00\n")
    (t / "src").mkdir()
    (t / "src" / "a.py").write_text(UNIT["code"])
    (t / "adir").mkdir()
    (t / "afile").write_text("a file, not a folder\n")
    (t / "r" / "v.validate_report.json").mkdir(parents=True)  # the report's place is taken
    (t / "r" / "m.mix_report.json").mkdir()
    mix = "sources: [{path: pairs.jsonl%s}]\noutput: %s\n"
    (t / "mix_ok.yaml").write_text(mix % ("", "train.jsonl"))
    (t / "mix_self.yaml").write_text(mix % ("", "pairs.jsonl"))
    (t / "mix_optional_str.yaml").write_text(mix % (", optional: 'no'", "train.jsonl"))
    (t / "mix_shuffle_str.yaml").write_text(mix % ("", "train.jsonl") + "shuffle: 'false'\n")
    (t / "mix_no_lane.yaml").write_text(mix % ("", "train.jsonl") + "include_lanes: [nosuchlane]\n")
    (t / "mix_folder.yaml").write_text("sources: [{path: adir}]\noutput: train.jsonl\n")
    (t / "units_frontmatter.jsonl").write_text(json.dumps({**UNIT, "frontmatter": ["a"]}) + "\n")
    (t / "units_heading.jsonl").write_text(json.dumps({**UNIT, "kind": "doc_prose", "heading": 5}) + "\n")


OUTPUT_IS_FOLDER = "the output is an existing folder"
PARENT_IS_FILE = "afile is a file, not a folder"

CASES = {
    # deep nesting: the JSON decoder's RecursionError is a bad line, with file:line
    "validate-deep": (["corpus", "validate", "{t}/deep.jsonl", "-o", "{t}/v.jsonl"], 2,
                      "JSON nested too deeply ({t}/deep.jsonl:2) — flatten the line or pass --lenient"),
    "pairs-deep": (["corpus", "pairs", "{t}/deep_units.jsonl", "-o", "{t}/p.jsonl"], 2,
                   "JSON nested too deeply ({t}/deep_units.jsonl:2)"),
    "stats-deep": (["corpus", "stats", "{t}/deep.jsonl", "-o", "{t}/s.json"], 2,
                   "JSON nested too deeply ({t}/deep.jsonl:2)"),
    "mix-deep-config": (["corpus", "mix", "--config", "{t}/mix_deep.yaml", "-o", "{t}/train.jsonl"], 2,
                        "mix config is nested too deeply ({t}/mix_deep.yaml)"),
    # non-UTF-8 and binary inputs
    "validate-lone-surrogate": (["corpus", "validate", "{t}/surrogate.jsonl", "-o", "{t}/v.jsonl"], 2,
                                "a lone surrogate escape ('\\ud800') is not text ({t}/surrogate.jsonl:2)"),
    "mix-binary-config": (["corpus", "mix", "--config", "{t}/mix_binary.yaml", "-o", "{t}/train.jsonl"], 2,
                          "({t}/mix_binary.yaml)"),
    "validate-latin1": (["corpus", "validate", "{t}/latin1.jsonl", "-o", "{t}/v.jsonl"], 2,
                        "line is not UTF-8 text (byte 15) ({t}/latin1.jsonl:2) — re-encode the file as UTF-8"),
    "pairs-binary": (["corpus", "pairs", "{t}/binary.jsonl", "-o", "{t}/p.jsonl"], 2,
                     "({t}/binary.jsonl:1)"),
    "stats-latin1": (["corpus", "stats", "{t}/latin1.jsonl", "-o", "{t}/s.json"], 2, "{t}/latin1.jsonl:2"),
    "stats-list-row": (["corpus", "stats", "{t}/list_row.jsonl", "-o", "{t}/s.json"], 2,
                       "row is in no known format (a JSON list, not an object) ({t}/list_row.jsonl:2)"),
    "stats-binary-tokenizer": (["corpus", "stats", "{t}/pairs.jsonl", "--tokenizer", "{t}/tokenizer.json",
                                "-o", "{t}/s.json"], 2, "cannot load tokenizer"),
    "vox-check-latin1": (["vox", "check", "{t}/latin1.vox"], 2,
                         "not UTF-8 text (byte 35) ({t}/latin1.vox:2) — re-encode the file as UTF-8"),
    "vox-check-binary": (["vox", "check", "{t}/binary.vox"], 2, "binary data, not Vox source (a NUL byte) ({t}/binary.vox:2)"),
    "vox-constructs-latin1": (["vox", "constructs", "{t}/latin1.vox"], 2, "not UTF-8 text"),
    # numeric flags
    "generate-negative-limit": (["generate-data", "--limit", "-5", "-o", "{t}/g.jsonl"], 2,
                                "--limit must be 1 or more, got -5"),
    "generate-zero-limit": (["generate-data", "--limit", "0", "-o", "{t}/g.jsonl"], 2, "--limit must be 1 or more"),
    "validate-negative-workers": (["corpus", "validate", "{t}/pairs.jsonl", "-o", "{t}/v.jsonl", "--workers", "-3"], 2,
                                  "--workers must be 1 or more, got -3"),
    "extract-negative-workers": (["corpus", "extract", "{t}/src", "-o", "{t}/u.jsonl", "--workers", "-3"], 2,
                                 "--workers must be 1 or more"),
    "pairs-zero-workers": (["corpus", "pairs", "{t}/units.jsonl", "-o", "{t}/p.jsonl", "--workers", "0"], 2,
                           "--workers must be 1 or more"),
    "extract-negative-max-bytes": (["corpus", "extract", "{t}/src", "-o", "{t}/u.jsonl", "--max-bytes", "-1"], 2,
                                   "--max-bytes must be 1 or more"),
    "eval-parse-rate-above-1": (["corpus", "eval", "{t}/pairs.jsonl", "-o", "{t}/e.json", "--min-parse-rate", "1.5"],
                                2, "--min-parse-rate must be between 0 and 1"),
    "eval-negative-coverage": (["corpus", "eval", "{t}/pairs.jsonl", "-o", "{t}/e.json", "--min-coverage", "-5"], 2,
                               "--min-coverage must be"),
    "validate-unknown-lang": (["corpus", "validate", "{t}/pairs.jsonl", "-o", "{t}/v.jsonl", "--lang", "klingon"], 2,
                              "unknown language pack 'klingon'"),
    # an output that is a folder, under a file, beside a folder, or on a read-only file system
    "validate-output-folder": (["corpus", "validate", "{t}/pairs.jsonl", "-o", "{t}/adir"], 2, OUTPUT_IS_FOLDER),
    "extract-output-folder": (["corpus", "extract", "{t}/src", "-o", "{t}/adir"], 2, OUTPUT_IS_FOLDER),
    "pairs-output-folder": (["corpus", "pairs", "{t}/units.jsonl", "-o", "{t}/adir"], 2, OUTPUT_IS_FOLDER),
    "eval-output-folder": (["corpus", "eval", "{t}/pairs.jsonl", "-o", "{t}/adir"], 2, OUTPUT_IS_FOLDER),
    "stats-output-folder": (["corpus", "stats", "{t}/pairs.jsonl", "-o", "{t}/adir"], 2, OUTPUT_IS_FOLDER),
    "generate-output-folder": (["generate-data", "--limit", "3", "-o", "{t}/adir"], 2, OUTPUT_IS_FOLDER),
    "mix-output-folder": (["corpus", "mix", "--config", str(EXAMPLES / "mix.yaml"), "-o", "{t}/adir"], 2,
                          OUTPUT_IS_FOLDER),
    # two outputs in one file: the quarantine's write removed the output's temp (a stray empty file and
    # "no such file" were all that came of it)
    "quarantine-is-output": (["corpus", "validate", "{t}/pairs.jsonl", "-o", "{t}/v.jsonl", "--quarantine",
                              "{t}/../{t.name}/v.jsonl"], 2,
                             "--quarantine is the same file as -o ({t}/../{t.name}/v.jsonl) — give --quarantine a file"),
    "quarantine-is-report": (["corpus", "validate", "{t}/pairs.jsonl", "-o", "{t}/v.jsonl", "--quarantine",
                              "{t}/v.validate_report.json"], 2, "--quarantine is the same file as the validate report"),
    "quarantine-folder": (["corpus", "validate", "{t}/pairs.jsonl", "-o", "{t}/v.jsonl", "--quarantine", "{t}/adir"],
                          2, "(--quarantine {t}/adir)"),
    "validate-parent-is-file": (["corpus", "validate", "{t}/pairs.jsonl", "-o", "{t}/afile/v.jsonl"], 2,
                                PARENT_IS_FILE),
    "extract-ancestor-is-file": (["corpus", "extract", "{t}/src", "-o", "{t}/afile/sub/u.jsonl"], 2, PARENT_IS_FILE),
    "eval-parent-is-file": (["corpus", "eval", "{t}/pairs.jsonl", "-o", "{t}/afile/e.json"], 2, PARENT_IS_FILE),
    "report-place-is-folder": (["corpus", "validate", "{t}/pairs.jsonl", "-o", "{t}/r/v.jsonl"], 2,
                               "(report {t}/r/v.validate_report.json)"),
    "validate-read-only-fs": (["corpus", "validate", "{t}/pairs.jsonl", "-o", "/sys/mens-v.jsonl"], 2,
                              "cannot write in /sys"),
    "eval-read-only-fs": (["corpus", "eval", "{t}/pairs.jsonl", "-o", "/sys/mens-e.json"], 2, "cannot write in /sys"),
    # inputs that are not there or not files
    "validate-input-folder": (["corpus", "validate", "{t}/adir", "-o", "{t}/v.jsonl"], 2, "is a folder, not a JSONL file"),
    "validate-missing-input": (["corpus", "validate", "{t}/none.jsonl", "-o", "{t}/v.jsonl"], 2, "file not found"),
    "extract-missing-path": (["corpus", "extract", "{t}/none", "-o", "{t}/u.jsonl"], 2, "path not found"),
    "vox-check-missing": (["vox", "check", "{t}/none.vox"], 2, "no such file or folder"),
    # a check of nothing: a folder without .vox files
    "vox-check-no-vox-files": (["vox", "check", "{t}/adir"], 2, "no .vox files in this folder ({t}/adir)"),
    "vox-constructs-no-vox-files": (["vox", "constructs", "{t}/src"], 2, "no .vox files in this folder ({t}/src)"),
    # `-o ''` is the current folder (no name for a report beside it), an output that is an input
    "extract-output-empty": (["corpus", "extract", "{t}/src", "-o", ""], 2, "the output is an existing folder (-o .)"),
    "generate-output-empty": (["generate-data", "--limit", "3", "-o", ""], 2, "the output is an existing folder"),
    "stats-input-empty": (["corpus", "stats", ""], 2, "not a file path (.)"),
    "extract-output-is-input": (["corpus", "extract", "{t}/src/a.py", "-o", "{t}/src/a.py"], 2,
                                "the output would overwrite the input ({t}/src/a.py)"),
    # mix: its output over a source or over the config, its report's place taken, wrong types
    "mix-output-is-source": (["corpus", "mix", "--config", "{t}/mix_self.yaml"], 2,
                             "the mix output would overwrite its source ({t}/pairs.jsonl)"),
    "mix-output-is-config": (["corpus", "mix", "--config", "{t}/mix_ok.yaml", "-o", "{t}/mix_ok.yaml"], 2,
                             "the output would overwrite the input ({t}/mix_ok.yaml)"),
    "mix-report-place-is-folder": (["corpus", "mix", "--config", "{t}/mix_ok.yaml", "-o", "{t}/r/m.jsonl"], 2,
                                   "(report {t}/r/m.mix_report.json)"),
    "mix-optional-not-bool": (["corpus", "mix", "--config", "{t}/mix_optional_str.yaml"], 2,
                              "'optional' must be true or false, got 'no' ({t}/mix_optional_str.yaml: sources[0])"),
    "mix-shuffle-not-bool": (["corpus", "mix", "--config", "{t}/mix_shuffle_str.yaml"], 2,
                             "'shuffle' must be true or false, got 'false' ({t}/mix_shuffle_str.yaml)"),
    "mix-no-rows-names-config": (["corpus", "mix", "--config", "{t}/mix_no_lane.yaml"], 2,
                                 "the mix produced no rows ({t}/mix_no_lane.yaml)"),
    "mix-source-folder": (["corpus", "mix", "--config", "{t}/mix_folder.yaml"], 2,
                          "mix source is a folder, not a file ({t}/adir)"),
    # pairs: unit fields of the wrong type
    "pairs-unit-frontmatter-list": (["corpus", "pairs", "{t}/units_frontmatter.jsonl", "-o", "{t}/p.jsonl"], 2,
                                    "field(s) of the wrong type: frontmatter ({t}/units_frontmatter.jsonl:1)"),
    "pairs-unit-heading-int": (["corpus", "pairs", "{t}/units_heading.jsonl", "-o", "{t}/p.jsonl"], 2,
                               "field(s) of the wrong type: heading ({t}/units_heading.jsonl:1)"),
}


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("argv, code, phrase", CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, run_cli, argv, code, phrase):
    if "/sys/" in " ".join(argv) and os.access("/sys", os.W_OK) and not _read_only("/sys"):
        pytest.skip("/sys is writable here")
    inputs(tmp_path)
    before = _tree(tmp_path)
    got, out, err = run_cli(*[a.format(t=tmp_path) for a in argv])
    assert "Traceback" not in err + out
    assert got == code, err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("mens: error: ")
    assert phrase.format(t=tmp_path) in err
    assert _tree(tmp_path) == before, "something was written"


def _read_only(folder: str) -> bool:
    try:
        Path(folder, ".mens-probe").touch()
    except OSError:
        return True
    Path(folder, ".mens-probe").unlink()
    return False


# ---------------------------------------------------------------- a full disk: a tiny tmpfs

def _can_mount_tmpfs() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


FULL = {
    "validate": ["corpus", "validate", "{t}/big.jsonl", "-o", "{mnt}/v.jsonl", "--quarantine", "{mnt}/q.jsonl"],
    "extract": ["corpus", "extract", str(EXAMPLES / "vox"), "-o", "{mnt}/units.jsonl"],
    "generate-data": ["generate-data", "--limit", "200", "-o", "{mnt}/synthetic.jsonl"],
}


@pytest.mark.skipif(not _can_mount_tmpfs(), reason="cannot mount a tmpfs in a user namespace here")
@pytest.mark.parametrize("argv", FULL.values(), ids=FULL.keys())
def test_full_disk_is_one_line_and_leaves_nothing(tmp_path, argv):
    """The output goes to a 16 KiB tmpfs mounted in a private namespace: the write fails with
    ENOSPC part-way; the error names the output and the tmpfs is empty afterwards."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with (tmp_path / "big.jsonl").open("w") as fh:
        for i in range(400):
            fh.write(json.dumps({**GOOD, "prompt": f"add, number {i}"}) + "\n")
    args = " ".join(f"'{a.format(t=tmp_path, mnt=mnt)}'" for a in argv)
    script = (f"mount -t tmpfs -o size=16k tmpfs '{mnt}' && "
              f"'{sys.executable}' -m mens {args}; echo \"exit=$?\"; ls -A '{mnt}'")
    res = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, MENS_QUIET="1"))
    assert "Traceback" not in res.stderr
    output = argv[argv.index("-o") + 1].format(t=tmp_path, mnt=mnt)
    assert res.stderr.strip() == (f"mens: error: cannot write: no space left on the device ({output}) — "
                                  "free some space or write somewhere else")
    assert res.stdout.split() == ["exit=2"], "the tmpfs is not empty: " + res.stdout


def test_vox_check_of_non_utf8_stdin_is_one_line(run_cli, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO("fn f() to int {\n    return 1 // café\n}\n"
                                                                 .encode("latin-1"))))
    code, out, err = run_cli("vox", "check", "-")
    assert code == 2 and out == "" and err.strip() == (
        "mens: error: not UTF-8 text (byte 35) (<stdin>:2) — re-encode the file as UTF-8")


@pytest.mark.parametrize("report", ["[1, 2]", '{"fingerprint": 5}'])
def test_incremental_extract_over_a_garbled_report_starts_afresh(tmp_path, run_cli, report):
    """A previous report that is JSON but not a report is not reused, never a traceback."""
    inputs(tmp_path)
    out = tmp_path / "u.jsonl"
    out.write_text(json.dumps(UNIT) + "\n")
    (tmp_path / "u.extract_report.json").write_text(report)
    code, _, err = run_cli("corpus", "extract", tmp_path / "src", "-o", out, "--incremental")
    assert code == 0, err
    assert json.loads(out.read_text().splitlines()[0])["path"] == str(tmp_path / "src" / "a.py")
