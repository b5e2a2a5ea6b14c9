"""`mens corpus prefs`: preference pairs `{prompt, chosen, rejected}` (TRL's field names) for
`mens dpo`, from two sources:

- the corpus's error-correction lane (`mens corpus pairs`): chosen is the valid program, rejected
  its broken variant (the first fenced block of the fix prompt, re-checked: the pack must reject
  it and accept the chosen code). The prompt is the code-generation prompt of the same source when
  the corpus has one — so the model learns to write code that parses — else the fix prompt;
- a model's own samples (`--model`, `--prompts`): n samples per prompt ranked by the rewards of
  mens.rl.rewards; the best and the worst become a pair when their scores differ by `--min-gap`.

No held-out bench task may be among the prompts: with `--bench`, the bench's contamination check
(mens.evaluate.contamination) runs on the rows and every row it flags is dropped and counted (for
`--model`: on the prompts before sampling, so a held-out task is never sampled, then on the pairs).
A report `<output stem>.prefs_report.json` is written beside the output.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from mens.corpus.report import Report
from mens.errors import MensError
from mens.lang.base import extract_code
from mens.files import write_jsonl_atomic
from mens.records import iter_jsonl


def _code_of(response: str) -> str:
    return extract_code(response)[0]


def pairs_prefs(paths: list[str | Path], report: Report) -> list[dict[str, Any]]:
    """Preference rows from the error-correction rows of pair files (module doc)."""
    from mens.corpus.pairs import fence
    from mens.lang import get_pack

    rows = [(f"{p}:{n}", obj) for p in paths for n, obj in iter_jsonl(p, has_lenient=False)
            if isinstance(obj, dict)]
    codegen: dict[str, str] = {}
    for _, obj in rows:
        if obj.get("lane") == "codegen" and obj.get("source") and isinstance(obj.get("prompt"), str):
            codegen.setdefault(obj["source"], obj["prompt"])
    out: list[dict[str, Any]] = []
    for where, obj in rows:
        if obj.get("lane") != "error_correction":
            continue
        report.counts["error_correction_rows"] += 1
        prompt, response = obj.get("prompt"), obj.get("response")
        if not isinstance(prompt, str) or not isinstance(response, str):
            report.drop("schema", where, "an error-correction row needs string prompt and response")
            continue
        try:
            pack = get_pack(str(obj.get("lang") or "vox"))
        except (MensError, ImportError, AttributeError):
            report.drop("unknown_lang", where, f"no language pack {obj.get('lang')!r}")
            continue
        script = bool((obj.get("metadata") or {}).get("script"))
        broken, good = _code_of(prompt), _code_of(response)
        if not broken.strip() or pack.check(broken, script=script) is None:
            report.drop("rejected_parses", where, "the broken variant parses: not a preference")
            continue
        if pack.check(good, script=script) is not None:
            report.drop("chosen_does_not_parse", where, "the chosen program does not parse")
            continue
        gen_prompt = codegen.get(obj.get("source") or "")
        out.append({"prompt": gen_prompt or prompt, "chosen": response, "rejected": fence(broken, pack),
                    "lang": pack.name, "origin": "error_correction" if gen_prompt is None else "codegen",
                    "source": obj.get("source") or where})
        report.counts["prefs_from_pairs"] += 1
    return out


def sample_prefs(model: str, prompts: list[dict[str, Any]], report: Report, *, n: int = 4,
                 temperature: float = 0.8, seed: int = 0, max_new_tokens: int = 256,
                 min_gap: float = 0.5, weights: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Preference rows from the model's own samples, ranked by the rewards (module doc)."""
    from mens.evaluate.bench import generate
    from mens.inference import load_model
    from mens.rl.rewards import Task, score

    from mens.positions import check_generation_fits, source_positions, source_tokenizer

    check_generation_fits(source_tokenizer(model), [p["prompt"] for p in prompts], positions=source_positions(model),
                          new_tokens=max_new_tokens, flag="--max-new-tokens", where=model)
    lm, tokenizer, _ = load_model(model)
    texts = generate(lm, tokenizer, [p["prompt"] for p in prompts], n=n,
                     temperature=temperature, seed=seed, max_new_tokens=max_new_tokens)
    out = []
    for i, (row, samples) in enumerate(zip(prompts, texts)):
        task, where = Task.of(row), str(row.get("id") or f"prompt {i + 1}")
        report.counts["prompts_sampled"] += 1
        ranked = sorted(((score(s, task, weights)[0], s) for s in samples), key=lambda x: -x[0])
        (best, chosen), (worst, rejected) = ranked[0], ranked[-1]
        if best - worst < min_gap:
            report.drop("no_gap", where, f"best {best:.2f} − worst {worst:.2f} < {min_gap}")
            continue
        if not chosen.strip() or not rejected.strip() or chosen == rejected:
            report.drop("empty_or_same", where, "the chosen or rejected answer is empty, or both are the same text")
            continue
        out.append({"prompt": row["prompt"], "chosen": chosen, "rejected": rejected, "lang": task.lang,
                    "origin": "samples", "source": where, "chosen_score": best, "rejected_score": worst})
        report.counts["prefs_from_samples"] += 1
    return out


def drop_contaminated(rows: list[dict[str, Any]], bench: str | Path, report: Report) -> list[dict[str, Any]]:
    """`rows` without those whose prompt or code the bench's contamination check flags."""
    from mens.evaluate.contamination import find_contamination

    with tempfile.TemporaryDirectory(prefix="mens-prefs-") as tmp:
        probe = Path(tmp) / "rows.jsonl"
        write_jsonl_atomic(probe, ({"prompt": r["prompt"],
                                    "response": r.get("chosen", "") + "\n" + r.get("rejected", "")} for r in rows))
        found = find_contamination(bench, [probe])
    bad = {int(h["where"].rsplit(":", 1)[1]) - 1: h["id"] for h in found["hits"]}
    for i, task in sorted(bad.items()):
        report.drop("bench_task", str(rows[i].get("source") or rows[i].get("id") or i),
                    f"overlaps held-out bench task {task!r}")
    before = report.extra.get("contamination", {}).get("dropped", 0)
    report.extra["contamination"] = {"bench": str(bench), "tasks_checked": found["tasks_checked"],
                                     "dropped": before + len(bad)}
    return [r for i, r in enumerate(rows) if i not in bad]


def read_numbered_prompts(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(line, row) of each prompt row (bench-style tasks or pair rows): each needs a non-empty
    string `prompt`. The line names the row in a later check's error (mens rl's fields)."""
    rows = []
    for lineno, obj in iter_jsonl(path, has_lenient=False):
        if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str) or not obj["prompt"].strip():
            raise MensError("a prompt row needs a non-empty string 'prompt'", f"{path}:{lineno}",
                            "write one JSON object a line with a 'prompt' (and optional lang, expect_contains, tests)")
        rows.append((lineno, obj))
    if not rows:
        raise MensError("no prompts", str(path), "give a JSONL file with one prompt a line")
    return rows


def read_prompts(path: str | Path) -> list[dict[str, Any]]:
    """The prompt rows of `read_numbered_prompts`, without their lines."""
    return [row for _, row in read_numbered_prompts(path)]


def make_prefs(pairs: list[str | Path], output: str | Path, *, bench: str | Path | None = None,
               model: str | None = None, prompts: str | Path | None = None, **sampling: Any) -> Report:
    report = Report("prefs", str(output))
    rows = pairs_prefs(pairs, report) if pairs else []
    if bench is not None and rows:
        rows = drop_contaminated(rows, bench, report)
    if model and prompts:
        asked = read_prompts(prompts)
        if bench is not None:  # a held-out task is never sampled; then the answers are checked too
            asked = drop_contaminated(asked, bench, report)
        sampled = sample_prefs(model, asked, report, **sampling) if asked else []
        rows += drop_contaminated(sampled, bench, report) if bench is not None and sampled else sampled
    if not rows:  # an empty prefs.jsonl would only fail later, in `mens dpo`
        why = (f"dropped: {', '.join(f'{k} {v}' for k, v in sorted(report.dropped.items()))}" if report.dropped
               else "the pair files hold no error-correction rows" if pairs and not model
               else "no candidate pair")
        raise MensError(f"no preference pairs made: {why}", ", ".join(map(str, pairs or [prompts])),
                        "give pairs from `mens corpus pairs` without --no-error-correction, "
                        "or --model with --prompts")
    report.counts["rows_written"] = write_jsonl_atomic(output, rows)
    report.write()
    return report


# ---------------------------------------------------------------- the command

def register(corpus) -> None:
    from mens.flags import add_flag

    p = corpus.add_parser("prefs", help="preference pairs {prompt, chosen, rejected} for mens dpo",
                          description="From the error-correction lane of pair files (chosen: the valid "
                          "program, rejected: its parser-rejected variant) and, with --model and --prompts, "
                          "from the model's own samples ranked by the rewards. --bench drops every row that "
                          "overlaps a held-out task. Report: <output stem>.prefs_report.json.")
    p.add_argument("pairs", nargs="*", type=Path, help="pairs JSONL from `mens corpus pairs` (or validated)")
    add_flag(p, "-o", "--output", type=Path, required=True, help="prefs.jsonl to write")
    add_flag(p, "--bench", type=Path, help="held-out bench (file or folder): its tasks never become prompts")
    add_flag(p, "--model", help="also rank this model's samples (a run dir or model dir)")
    add_flag(p, "--prompts", type=Path, help="prompt rows for --model (bench-style tasks or pairs)")
    add_flag(p, "-n", "--samples", type=int, default=4, help="samples per prompt (default 4)")
    add_flag(p, "--temperature", type=float, default=0.8)
    p.add_argument("--min-gap", type=float, default=0.5, help="least score gap between chosen and rejected")
    add_flag(p, "--max-new-tokens", type=int, default=256, metavar="N",
             help="tokens per sample; the prompt and they must fit the model's positions (default 256)")
    add_flag(p, "--seed", type=int, default=0)
    p.set_defaults(func=_cmd)


def _cmd(args) -> int:
    from mens.corpus.cli import check_outputs as _outputs
    from mens.files import check_not_input
    from mens.evaluate.checks import at_least, check_input_file

    if not args.pairs and not args.model:
        raise MensError("nothing to build from", "mens corpus prefs", "give pair files, or --model with --prompts")
    if bool(args.model) != bool(args.prompts):
        raise MensError("--model and --prompts go together", "--model" if args.model else "--prompts",
                        "give both, or neither")
    for path in args.pairs:
        check_input_file(path, "pairs")
    if args.prompts:
        check_input_file(args.prompts, "--prompts")
    at_least(args.samples, 2, "--samples")
    at_least(args.max_new_tokens, 1, "--max-new-tokens")
    for flag, value in (("--temperature", args.temperature), ("--min-gap", args.min_gap)):
        if not (math.isfinite(value) and value > 0):
            raise MensError(f"{flag} must be a positive number, got {value}", flag,
                            "samples are ranked against each other: they must differ (temperature) and so must "
                            "their scores (min gap)")
    if args.bench is not None and not args.bench.exists():
        raise MensError("bench not found", str(args.bench), "give a bench .jsonl file or a folder holding some")
    check_not_input(args.output, *args.pairs, *([args.prompts] if args.prompts else []))
    _outputs((args.output, "-o"), report="prefs")
    if args.model:
        from mens.hf import check_files, check_source

        check_source(args.model)
        check_files(args.model)
    report = make_prefs(args.pairs, args.output, bench=args.bench, model=args.model, prompts=args.prompts,
                        n=args.samples, temperature=args.temperature, min_gap=args.min_gap, seed=args.seed,
                        max_new_tokens=args.max_new_tokens)
    print(report.summary())
    return 0
