"""Is a fine-tuned model worse on the bench than the model it started from? A paired sign test.

The pipeline's bench stage (`bench.compare_base`) and `mens bench --base` bench the fine-tuned
run and its base on the same tasks, and the gates ask whether the fine-tune made the base worse.
Comparing the two rates against a fixed tolerance cannot answer that on a small bench: greedy
answers of a small model flip on a few tasks from any change to its weights, either way. Measured on the quickstart
(docs/performance.md, "Is the fine-tune worse than its base?"): the same neutral fine-tune in six
data orders lost 0-3 of 54 greedy parses, while eight samples a task showed the same fine-tunes
within ±0.03 of their base; a tolerance of 2 tasks failed half of those runs, i.e. it judged noise.

So each task is compared with itself: a task is *lost* when the fine-tuned model's figure on it
(the share of its samples that parse, or that pass) is below the base's, *gained* when above, and
the rest did not change. If the fine-tune were no worse, a changed task would be as likely lost as
gained, so the chance of at least `lost` losses among the `lost + gained` changed tasks is the
upper tail of Binomial(lost + gained, 1/2): the exact one-sided sign (McNemar) test. A small
`p_value` says the fine-tune broke more than chance explains; the shipped gate blocks below 0.05,
the usual level (e.g. 5 tasks lost and none gained: p = 0.031; 3 lost, none gained: 0.125).
"""

from __future__ import annotations

from math import comb
from typing import Any


def sign_test_p(lost: int, gained: int) -> float:
    """One-sided exact sign test: P(X >= lost) for X ~ Binomial(lost + gained, 1/2); 1.0 when no
    task changed."""
    n = lost + gained
    return sum(comb(n, i) for i in range(lost, n + 1)) / 2 ** n


def _per_task(items: list[dict]) -> dict[str, tuple[float, float]]:
    """task id -> (share of its samples that parse, its pass@1)."""
    out = {}
    for item in items:
        samples = item.get("samples") or []
        parses = sum(bool(s.get("parses")) for s in samples) / len(samples) if samples else 0.0
        out[str(item["id"])] = (parses, float(item.get("pass_at_1", 0.0)))
    return out


def _changes(base: dict[str, float], tuned: dict[str, float]) -> dict[str, Any]:
    lost = sorted(t for t in base if tuned[t] < base[t])
    gained = sorted(t for t in base if tuned[t] > base[t])
    # p_value: did the fine-tune break more than chance explains; p_better: did it mend more
    # (the same test the other way round: a gate that wants the fine-tune to beat its base).
    return {"lost": len(lost), "gained": len(gained), "p_value": sign_test_p(len(lost), len(gained)),
            "p_better": sign_test_p(len(gained), len(lost)), "lost_tasks": lost, "gained_tasks": gained}


def compare_to_base(base: dict, tuned: dict) -> dict[str, Any]:
    """`vs_base` of a benchmark_results document: the rate drops (base minus fine-tuned) and, per
    figure, the tasks lost and gained with the sign test's p-value. Only tasks both benches hold
    are compared (the same bench and limit give the same tasks)."""
    b, t = _per_task(base["items"]), _per_task(tuned["items"])
    common = [task for task in b if task in t]
    return {"pass_at_1_drop": base["pass_at_1"] - tuned["pass_at_1"],
            "parse_rate_drop": base["parse_rate"] - tuned["parse_rate"],
            "tasks_compared": len(common),
            "parse": _changes({k: b[k][0] for k in common}, {k: t[k][0] for k in common}),
            "pass": _changes({k: b[k][1] for k in common}, {k: t[k][1] for k in common})}


# The figures of a bench run that a results document repeats for its base (and grammar) runs.
RATES = ("n_tasks", "pass_at_1", "pass_at_k", "parse_rate", "semantic_pass_rate", "anti_stub_rate")


def attach_base(results: dict, base: dict, base_model: str, base_grammar: dict | None = None) -> dict:
    """`results` with its base's figures (`base`, and `base.grammar` when the base was benched in
    grammar mode too) and the comparison (`vs_base`) added, as `mens bench --base` and the
    pipeline's bench stage write them; the per-task items stay last."""
    results["base"] = {"model": str(base_model), **{k: base[k] for k in RATES}}
    if base_grammar is not None:
        results["base"]["grammar"] = {"lang": base_grammar.get("lang"), **{k: base_grammar[k] for k in RATES}}
    results["vs_base"] = compare_to_base(base, results)
    results["items"] = results.pop("items")
    return results


def describe(vs_base: dict) -> str:
    """One line: what the fine-tune lost and gained against its base, and the sign tests."""
    p, q = vs_base["parse"], vs_base["pass"]
    return (f"vs base: parses lost {p['lost']}, gained {p['gained']} (sign test p {p['p_value']:.3g}); "
            f"passes lost {q['lost']}, gained {q['gained']} (p {q['p_value']:.3g})")
