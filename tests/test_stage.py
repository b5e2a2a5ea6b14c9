"""The Stage seam (mens.stage): a new corpus stage is one module plus one registration line, and
both `mens pipeline` and `mens corpus` take it from there — its config section checked with the
config, its fingerprint deciding reruns, its command with its own flags."""

import json
import sys

import pytest
import yaml

TOY = '''
"""A toy corpus stage: `lines` numbered rows, a report beside them."""
from dataclasses import dataclass
from pathlib import Path

from mens.corpus.report import Report
from mens.corpus.stages import CORPUS_CODE
from mens.fingerprint import fingerprint_block
from mens.stage import Command, Options, Stage, option, whole


@dataclass
class ToyOptions(Options):
    lines: int = option(3, whole(1), "a whole number, 1 or more")


def make(out, lines):
    report = Report("toy", str(out))
    report.counts["rows"] = lines
    report.drop("odd", "toy", "odd rows are dropped") if lines > 1 else None
    return report.publish(({"n": i} for i in range(lines)), fingerprint_block({}, {"lines": lines}))


def params(ctx):
    return {"lines": ToyOptions.read(ctx.config.get("toy"), "toy", "pipeline config").lines}


def run(ctx):
    return {"rows": make(ctx.work_file("corpus", "toy.jsonl"), params(ctx)["lines"]).counts["rows"]}


def arguments(p):
    p.add_argument("-o", "--output", type=Path, required=True)
    p.add_argument("--lines", type=int, default=3)


def command(args):
    make(args.output, args.lines)
    return 0


STAGE = Stage("toy", inputs=lambda c: [], outputs=lambda c: [c.work_file("corpus", "toy.jsonl")], run=run,
              params=params, code=CORPUS_CODE, section="toy", options=ToyOptions, help="numbered rows",
              command=Command("toy", "numbered rows", arguments, command))
'''


@pytest.fixture
def toy_registered(tmp_path, monkeypatch):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "toy_stage.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    from mens.corpus import stages

    monkeypatch.setattr(stages, "STAGE_MODULES", [*stages.STAGE_MODULES, "toy_stage"])  # the one line
    yield
    sys.modules.pop("toy_stage", None)


def test_a_registered_stage_runs_through_the_pipeline_and_its_command(tmp_path, toy_registered, capsys):
    from mens.cli import main

    config = tmp_path / "p.yaml"
    config.write_text(yaml.safe_dump({"work_dir": "work", "toy": {"lines": 4}}))
    assert main(["pipeline", "--config", str(config), "--stages", "toy"]) == 0
    out = tmp_path / "work" / "corpus" / "toy.jsonl"
    assert [json.loads(line)["n"] for line in out.read_text().splitlines()] == [0, 1, 2, 3]
    report = json.loads((tmp_path / "work" / "corpus" / "toy.toy_report.json").read_text())
    assert report["counts"] == {"rows": 4} and report["dropped"] == {"odd": 1}
    assert report["fingerprint"]["params"] == {"lines": 4}
    state = json.loads((tmp_path / "work" / "pipeline_state.json").read_text())
    assert state["stages"]["toy"]["figures"] == {"rows": 4}
    assert state["stages"]["toy"]["fingerprint"]["params"] == {"lines": 4}
    capsys.readouterr()
    assert main(["pipeline", "--config", str(config), "--stages", "toy"]) == 0  # unchanged: skipped
    assert "[toy] skipped (unchanged)" in capsys.readouterr().err
    config.write_text(yaml.safe_dump({"work_dir": "work", "toy": {"lines": 2}}))
    assert main(["pipeline", "--config", str(config), "--stages", "toy"]) == 0
    assert "[toy] done" in capsys.readouterr().err and len(out.read_text().splitlines()) == 2
    # its own command, from the same registration
    assert main(["corpus", "toy", "-o", str(tmp_path / "t.jsonl"), "--lines", "5"]) == 0
    assert len((tmp_path / "t.jsonl").read_text().splitlines()) == 5


@pytest.mark.parametrize("section, message", [
    ({"lnes": 4}, "unknown key(s) in 'toy': lnes ({t}/p.yaml) — did you mean 'lines'?"),
    ({"lines": 0}, "toy.lines must be a whole number, 1 or more, got 0"),
    ([4], "'toy' must be a mapping"),
])
def test_a_registered_stage_checks_its_section_with_the_config(tmp_path, toy_registered, capsys, section, message):
    from mens.cli import main

    config = tmp_path / "p.yaml"
    config.write_text(yaml.safe_dump({"work_dir": "work", "toy": section}))
    assert main(["pipeline", "--config", str(config), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert message.format(t=tmp_path) in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "work").exists()


def test_without_its_line_the_stage_is_unknown(tmp_path, capsys):
    from mens.cli import main

    config = tmp_path / "p.yaml"
    config.write_text(yaml.safe_dump({"work_dir": "work", "toy": {"lines": 4}}))
    assert main(["pipeline", "--config", str(config), "--dry-run"]) == 2
    assert "unknown key(s) toy" in capsys.readouterr().err
