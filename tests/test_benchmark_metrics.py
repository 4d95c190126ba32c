"""Each metric on a hand-computed example, and the bootstrap/paired test on cases with known answers."""

from __future__ import annotations

import math

import pytest

from benchmark_gen.metrics import (
    Bootstrap,
    all_at,
    any_at,
    dedupe,
    percentile,
    question_metrics,
    recall_at,
    reciprocal_rank,
    span_recall,
    tes,
)

RANKED = ["a.py", "b.py", "c.py", "d.py"]
GOLD = {"b.py", "d.py", "x.py"}  # x.py is never returned


def test_recall_all_any_rr_by_hand() -> None:
    assert recall_at(RANKED, GOLD, 1) == 0.0
    assert recall_at(RANKED, GOLD, 2) == pytest.approx(1 / 3)
    assert recall_at(RANKED, GOLD, 5) == pytest.approx(2 / 3)
    assert all_at(RANKED, GOLD, 10) == 0.0  # x.py missing
    assert all_at(RANKED, {"a.py", "b.py"}, 2) == 1.0
    assert all_at(RANKED, {"a.py", "c.py"}, 2) == 0.0
    assert any_at(RANKED, GOLD, 1) == 0.0
    assert any_at(RANKED, GOLD, 2) == 1.0
    assert reciprocal_rank(RANKED, GOLD) == 0.5
    assert reciprocal_rank(RANKED, {"zz.py"}) == 0.0


def test_tes_is_recall_over_log_of_items() -> None:
    # all returned files hold 2 of 3 gold files; 4 items returned
    assert tes(RANKED, GOLD, 4) == pytest.approx((2 / 3) / math.log(5))
    # the same recall from more items scores lower
    assert tes(RANKED, GOLD, 40) < tes(RANKED, GOLD, 4)
    assert tes([], GOLD, 0) == 0.0


def test_span_recall_counts_overlapping_gold_spans() -> None:
    items = [("a.py", 1, 10), ("b.py", 5, 8)]
    gold = [("b.py", 8, 20), ("b.py", 9, 12), ("a.py", 11, 12)]
    # only the first gold span touches a returned item (b.py line 8)
    assert span_recall(items, gold) == pytest.approx(1 / 3)


def test_question_metrics_keys_and_values() -> None:
    m = question_metrics(RANKED, GOLD, (1, 5), 4, [("b.py", 1, 3)], [("b.py", 2, 2)])
    assert m["R@1"] == 0.0 and m["R@5"] == pytest.approx(2 / 3)
    assert m["ALL@5"] == 0.0 and m["ANY@1"] == 0.0 and m["ANY@5"] == 1.0
    assert m["MRR"] == 0.5 and m["SpanR"] == 1.0


def test_dedupe_and_percentile() -> None:
    assert dedupe(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([1, 2, 3, 4], 100) == 4
    assert percentile([], 50) == 0.0


def test_bootstrap_interval_brackets_the_mean_and_is_reproducible() -> None:
    vals = [0.0, 1.0] * 50
    mean, lo, hi = Bootstrap(500, seed=3).ci(vals)
    assert mean == 0.5 and lo < 0.5 < hi
    assert (mean, lo, hi) == Bootstrap(500, seed=3).ci(vals)
    assert Bootstrap(200).ci([0.7] * 10) == (pytest.approx(0.7), pytest.approx(0.7), pytest.approx(0.7))


def test_paired_test_detects_a_consistent_win_and_no_difference() -> None:
    boot = Bootstrap(999, seed=1)
    win = boot.paired([1.0] * 30, [0.0] * 20 + [1.0] * 10)
    assert win["verdict"] == "better" and win["diff"] == pytest.approx(2 / 3)
    assert win["p"] <= 0.01
    same = boot.paired([0.0, 1.0] * 15, [1.0, 0.0] * 15)
    assert same["diff"] == 0.0 and same["verdict"] == "not distinguishable" and same["p"] > 0.5
    lose = boot.paired([0.0] * 20, [1.0] * 20)
    assert lose["verdict"] == "worse"
