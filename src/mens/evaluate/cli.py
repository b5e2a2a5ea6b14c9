"""`mens bench`, `mens gate`, `mens card`, `mens report`: thin wrappers over mens.evaluate.*."""

from __future__ import annotations

from pathlib import Path

from mens.flags import add_flag


def register(sub) -> None:
    bench = sub.add_parser("bench", help="held-out bench: generate, parse, score; pass@1 / pass@k",
                           description="Generate n samples per bench task with the model's chat template, "
                           "score each (parses with the language pack, not a stub, contains the expected "
                           "needles) and write benchmark_results.json.")
    add_flag(bench, "--model", required=True, help="run dir (adapter), merged/scratch model dir, or hub id")
    add_flag(bench, "--bench", type=Path, required=True, help="bench .jsonl file or directory of them")
    bench.add_argument("-k", type=int, default=1, help="k of pass@k (default 1)")
    add_flag(bench, "-n", "--samples", type=int, help="samples per task (default k; n > k uses the unbiased estimator)")
    add_flag(bench, "--temperature", type=float, default=0.0, help="0 = greedy (default); >0 samples")
    add_flag(bench, "--seed", type=int, default=0)
    add_flag(bench, "-o", "--output", type=Path, help="results file (default: MODEL/benchmark_results.json "
             "for a run dir, else ./benchmark_results.json)")
    add_flag(bench, "--limit", type=int, help="only the first N tasks")
    add_flag(bench, "--max-new-tokens", type=int, default=256, metavar="N",
             help="tokens per answer; the prompt and they must fit the model's positions (default 256)")
    bench.add_argument("--batch-size", type=int, default=8, help="answers generated together (default 8)")
    add_flag(bench, "--device", default="auto", help="auto, cpu, cuda, cuda:N (default auto)")
    add_flag(bench, "--train-data", type=Path, nargs="+", action="extend",
             help="training data to check for contamination (warns and records hits)")
    add_flag(bench, "--grammar",
             help="grammar-constrained decoding with that language pack (e.g. vox), as `mens serve "
                  "--grammar`: every token keeps the code a viable prefix (slow on a CPU)")
    bench.add_argument("--base", metavar="MODEL",
                       help="also bench the model a fine-tune started from, with the same settings, and "
                            "record `base` and `vs_base` (tasks lost and gained, sign-test p-values) for "
                            "`mens gate`'s fine-tune-vs-base gates")
    bench.set_defaults(func=_bench)

    deco = sub.add_parser("decontaminate", help="check that no bench prompt or reference is in training data",
                          description="Report bench tasks whose prompt (normalised text) or reference solution "
                          "(structural hash) appears in training JSONL files; exit 1 when any does.")
    add_flag(deco, "--bench", type=Path, required=True, help="bench .jsonl file or directory")
    add_flag(deco, "--train-data", type=Path, nargs="+", action="extend", required=True,
             help="training JSONL file(s)")
    add_flag(deco, "-o", "--output", type=Path, help="write the report as JSON")
    deco.set_defaults(func=_decontaminate)

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
    add_flag(gate, "--bench-results", type=Path, help="benchmark_results.json (default: the run's)")
    add_flag(gate, "-o", "--output", type=Path, help="receipt path (default: RUN/gate_receipt.json)")
    gate.set_defaults(func=_gate)

    report = sub.add_parser("report", help="one self-contained HTML page of a run's curves and results",
                            description="Render loss/val-loss, tokens/s, learning rate, bench pass@1 over "
                            "training and corpus composition as inline SVG in one HTML file (no network).")
    report.add_argument("run", type=Path, help="run directory")
    add_flag(report, "-o", "--output", type=Path, help="HTML file (default: RUN/report.html)")
    report.set_defaults(func=_report)


def _card(args) -> int:
    from mens.evaluate.card import write_card
    from mens.evaluate.checks import check_run
    from mens.progress import say

    path = write_card(check_run(args.run))
    say(f"wrote {path}")
    print(path)
    return 0


def _gate(args) -> int:
    from mens.evaluate.gates import enforce, format_receipt, run_gates

    from mens.evaluate.checks import check_input_file, check_run, check_run_output
    from mens.files import check_output

    check_run(args.run)
    overrides = {k: check_input_file(v, flag) for k, v, flag in (("eval", args.eval, "--eval"),
                                                                  ("bench", args.bench_results, "--bench-results")) if v}
    check_output(args.output or args.run / "gate_receipt.json", "-o")
    if args.output:
        check_run_output(args.output, args.run, "gate_receipt.json", args.policy, *overrides.values())
    receipt = run_gates(args.run, args.policy, args.output, overrides)
    print(format_receipt(receipt))
    enforce(receipt)
    return 0


def _bench(args) -> int:
    from mens.evaluate.bench import run_bench

    out = args.output
    if out is None:
        model_dir = Path(args.model)
        out = model_dir / "benchmark_results.json" if (model_dir / "training_manifest.json").is_file() \
            else Path("benchmark_results.json")
    opts = dict(k=args.k, n=args.samples, temperature=args.temperature, seed=args.seed, limit=args.limit,
                max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, device=args.device,
                grammar=args.grammar)
    if args.base:
        from mens.evaluate.checks import check_bench_args

        # Both models' files are checked before either loads; the results are written once, whole.
        check_bench_args(args.base, args.bench, k=args.k, n=args.samples, temperature=args.temperature,
                         limit=args.limit, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size,
                         device=args.device, out=out, train_data=None)
    res = run_bench(args.model, args.bench, **opts, out=None if args.base else out, train_data=args.train_data)
    if args.base:
        from mens.evaluate.compare import attach_base, describe
        from mens.files import write_json_atomic

        attach_base(res, run_bench(args.base, args.bench, **opts), args.base)
        write_json_atomic(out, res)
    at_k = f"pass@{res['k']} {res['pass_at_k']:.3f}  " if res["k"] > 1 else ""  # pass@1 once at k=1
    print(f"{res['n_tasks']} tasks x {res['n_samples']} samples: pass@1 {res['pass_at_1']:.3f}  "
          f"{at_k}parses {res['parse_rate']:.3f}  "
          f"semantic {res['semantic_pass_rate']:.3f}  not-stub {res['anti_stub_rate']:.3f}")
    for name, c in res["by_category"].items():
        print(f"  {name:<16} {c['n_tasks']:>3} tasks  pass@1 {c['pass_at_1']:.3f}  parses {c['parse_rate']:.3f}")
    if args.base:
        print(f"base {args.base}: pass@1 {res['base']['pass_at_1']:.3f}  parses {res['base']['parse_rate']:.3f}")
        print(describe(res["vs_base"]))
    print(f"wrote {out}")
    return 0


def _decontaminate(args) -> int:
    from mens.errors import GateFailure
    from mens.evaluate.checks import check_input_file
    from mens.evaluate.contamination import find_contamination
    from mens.files import check_not_input, check_output, write_json_atomic

    for path in args.train_data:
        check_input_file(path, "--train-data")
    if args.output:
        check_not_input(args.output, *args.train_data, args.bench)
        check_output(args.output, "-o")
    report = find_contamination(args.bench, args.train_data)
    if args.output:
        write_json_atomic(args.output, report)
    for hit in report["hits"]:
        print(f"{hit['id']}: {hit['field']} found in {hit['where']}")
    print(f"{report['tasks_checked']} tasks checked against {report['training_rows']} training rows: "
          f"{len(report['contaminated'])} contaminated")
    if report["contaminated"]:
        raise GateFailure(f"{len(report['contaminated'])} bench task(s) appear in the training data")
    return 0


def _report(args) -> int:
    from mens.evaluate.checks import check_run, check_run_output
    from mens.evaluate.report import write_report
    from mens.files import check_output

    check_run(args.run)
    check_output(args.output or args.run / "report.html", "-o")
    if args.output:
        check_run_output(args.output, args.run, "report.html")
    path = write_report(args.run, args.output)
    print(path)
    return 0
