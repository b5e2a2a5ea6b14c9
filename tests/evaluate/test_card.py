from evaluate_run_fixture import make_run

from paths import EXAMPLES
from mens.evaluate.gates import run_gates


def test_card_renders_every_section_present(tmp_path, run_cli):
    run = make_run(tmp_path)
    run_gates(run, EXAMPLES / "gates.yaml")
    code, out, _ = run_cli("card", run)
    assert code == 0
    text = (run / "MODEL_CARD.md").read_text()
    for needle in ("# Model card: run", "out/base", "## Intended use", "### Hyper-parameters", "| lora_r | 8 |",
                   "| final_loss | 1.5 |", "## Data", "deadbeef", "## Corpus evaluation", "| parse_rate | 0.98 |",
                   "## Held-out bench", "| pass@1 | 0.25 |", "| function | 2 | 0.5 | 1 |",
                   "## Gates", "Overall: **PASSED**", "`bench.pass_at_1`", "| licence | apache-2.0 |",
                   "`gate_receipt.json`"):
        assert needle in text, needle
    assert text.count("| pass@1 | 0.25 |") == 1  # k = 1: pass@k is pass@1, listed once


def test_card_of_a_bare_run_says_what_is_unknown(tmp_path):
    from mens.evaluate.card import write_card

    (tmp_path / "bare").mkdir()
    text = write_card(tmp_path / "bare").read_text()
    assert "No `training_manifest.json`" in text
    assert "## Held-out bench" not in text and "## Gates" not in text
    assert "licence | unknown" in text
