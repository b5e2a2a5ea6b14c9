"""`mens bench`, `mens gate`, `mens card`, `mens report`: thin wrappers over mens.evaluate.*."""

from __future__ import annotations

from pathlib import Path


def register(sub) -> None:
    card = sub.add_parser("card", help="(re)render MODEL_CARD.md of a run from the files in it",
                          description="Render MODEL_CARD.md from the run's manifest, eval, bench and gate results.")
    card.add_argument("run", type=Path, help="run directory")
    card.set_defaults(func=_card)

    gate = sub.add_parser("gate", help="check a run against a gate policy; exit 1 on a blocking failure",
                          description="Compare eval.*, bench.* and train.* metrics of a run with a policy "
                          "(YAML gates: [{name, metric, op, threshold, blocking}]) and write gate_receipt.json.")
    gate.add_argument("--run", type=Path, required=True, help="run directory")
    gate.add_argument("--policy", type=Path, required=True, help="gate policy YAML (see examples/gates.yaml)")
    gate.add_argument("--eval", type=Path, help="eval_results.json (default: the run's)")
    gate.add_argument("--bench", type=Path, help="benchmark_results.json (default: the run's)")
    gate.add_argument("-o", "--output", type=Path, help="receipt path (default: RUN/gate_receipt.json)")
    gate.set_defaults(func=_gate)


def _card(args) -> int:
    from mens.evaluate.card import write_card
    from mens.progress import say

    path = write_card(args.run)
    say(f"wrote {path}")
    print(path)
    return 0


def _gate(args) -> int:
    from mens.evaluate.gates import enforce, format_receipt, run_gates

    overrides = {k: v for k, v in (("eval", args.eval), ("bench", args.bench)) if v}
    receipt = run_gates(args.run, args.policy, args.output, overrides)
    print(format_receipt(receipt))
    enforce(receipt)
    return 0
