"""The fine-tune-vs-base comparison the gates judge: a paired sign test over the bench's tasks."""

from itertools import product

import pytest

from mens.evaluate.compare import compare_to_base, sign_test_p


@pytest.mark.parametrize("lost,gained", [(0, 0), (1, 0), (3, 0), (5, 0), (5, 2), (2, 5), (7, 2), (4, 4), (9, 3)])
def test_sign_test_is_the_binomial_tail_counted_by_hand(lost, gained):
    """Against every outcome enumerated: of the 2^n ways n changed tasks can fall, the share with
    at least `lost` losses."""
    n = lost + gained
    outcomes = list(product((0, 1), repeat=n))
    expected = sum(sum(o) >= lost for o in outcomes) / len(outcomes)
    assert sign_test_p(lost, gained) == pytest.approx(expected, abs=1e-12)


def test_known_values_of_the_shipped_gate():
    assert sign_test_p(5, 0) == 1 / 32 < 0.05      # five lost, none gained: blocked
    assert sign_test_p(3, 0) == 1 / 8 > 0.05       # three lost, none gained: a neutral fine-tune's flips
    assert sign_test_p(0, 4) == 1.0


def _item(task, parses, passed):
    return {"id": task, "pass_at_1": sum(passed) / len(passed),
            "samples": [{"parses": p, "passed": q} for p, q in zip(parses, passed)]}


def _results(items):
    n = len(items)
    return {"items": items, "pass_at_1": sum(i["pass_at_1"] for i in items) / n,
            "parse_rate": sum(sum(s["parses"] for s in i["samples"]) / len(i["samples"]) for i in items) / n}


def test_tasks_are_compared_with_themselves():
    base = _results([_item("a", [True], [True]), _item("b", [True], [False]), _item("c", [False], [False]),
                     _item("d", [True], [False])])
    # a: still passes; b: no longer parses; c: now parses and passes; d: unchanged.
    tuned = _results([_item("a", [True], [True]), _item("b", [False], [False]), _item("c", [True], [True]),
                      _item("d", [True], [False])])
    vs = compare_to_base(base, tuned)
    assert vs["tasks_compared"] == 4
    assert vs["parse"] == {"lost": 1, "gained": 1, "p_value": 0.75, "p_better": 0.75, "lost_tasks": ["b"],
                           "gained_tasks": ["c"]}
    assert vs["pass"] == {"lost": 0, "gained": 1, "p_value": 1.0, "p_better": 0.5, "lost_tasks": [],
                          "gained_tasks": ["c"]}
    # The rates agree with the per-task view: the same parse rate, one more pass.
    assert vs["parse_rate_drop"] == 0 and vs["pass_at_1_drop"] == -0.25


def test_several_samples_a_task_compare_their_shares():
    """With n samples a task, a task is lost when a smaller share of its samples parse or pass."""
    base = _results([_item("a", [True, True, False, False], [True, False, False, False])])
    tuned = _results([_item("a", [True, False, False, False], [True, True, False, False])])
    vs = compare_to_base(base, tuned)
    assert (vs["parse"]["lost"], vs["parse"]["gained"]) == (1, 0)
    assert (vs["pass"]["lost"], vs["pass"]["gained"]) == (0, 1)


def test_only_tasks_both_benches_hold_are_compared():
    base = _results([_item("a", [True], [True]), _item("b", [True], [True])])
    tuned = _results([_item("a", [False], [False])])
    vs = compare_to_base(base, tuned)
    assert vs["tasks_compared"] == 1 and vs["parse"]["lost_tasks"] == ["a"]
