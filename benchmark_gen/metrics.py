"""Retrieval metrics on one question, bootstrap intervals and a paired test over many.

File level: `ranked` is the list of distinct files in the order a strategy returned them; `gold` the
gold file set. ALL@k = every gold file is in the top k; ANY@k = at least one is; Recall@k = the
fraction of gold files in the top k; RR = 1 / rank of the first gold file (0 when none);
TES (token-efficiency score) = recall over everything returned / ln(1 + items returned).
Span level: the fraction of gold spans overlapped by at least one returned item.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

Span = tuple[str, int, int]


def dedupe(paths: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for p in paths:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def recall_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def all_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return 1.0 if gold and gold <= set(ranked[:k]) else 0.0


def any_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    return 1.0 if gold & set(ranked[:k]) else 0.0


def reciprocal_rank(ranked: Sequence[str], gold: set[str]) -> float:
    for i, p in enumerate(ranked, 1):
        if p in gold:
            return 1.0 / i
    return 0.0


def tes(ranked: Sequence[str], gold: set[str], n_items: int) -> float:
    if n_items <= 0 or not gold:
        return 0.0
    return recall_at(ranked, gold, len(ranked)) / math.log(1 + n_items)


def span_recall(items: Sequence[Span], gold: Sequence[Span]) -> float:
    """Fraction of gold spans that some returned item overlaps (same path, intersecting lines)."""
    if not gold:
        return 0.0
    hit = 0
    for gp, gs, ge in gold:
        if any(p == gp and s <= ge and gs <= e for p, s, e in items):
            hit += 1
    return hit / len(gold)


def question_metrics(ranked: Sequence[str], gold: set[str], ks: Sequence[int], n_items: int,
                     items: Sequence[Span] = (), gold_spans: Sequence[Span] = ()) -> dict[str, float]:
    out: dict[str, float] = {}
    for k in ks:
        out[f"ALL@{k}"] = all_at(ranked, gold, k)
        out[f"ANY@{k}"] = any_at(ranked, gold, k)
        out[f"R@{k}"] = recall_at(ranked, gold, k)
    out["MRR"] = reciprocal_rank(ranked, gold)
    out["TES"] = tes(ranked, gold, n_items)
    if gold_spans:
        out["SpanR"] = span_recall(items, gold_spans)
    return out


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    return float(np.percentile(np.asarray(values, dtype=float), q))


class Bootstrap:
    """Resample indices drawn once per sample size from a fixed seed, shared by every strategy.

    Sharing the indices makes the intervals of two strategies on the same questions paired.
    """

    def __init__(self, resamples: int = 1000, seed: int = 0) -> None:
        self.resamples = resamples
        self.seed = seed
        self._idx: dict[int, np.ndarray] = {}

    def indices(self, n: int) -> np.ndarray:
        if n not in self._idx:
            rng = np.random.default_rng(self.seed + n)
            self._idx[n] = rng.integers(0, n, size=(self.resamples, n))
        return self._idx[n]

    def ci(self, values: Sequence[float], alpha: float = 0.05) -> tuple[float, float, float]:
        """(mean, lo, hi): the mean and its percentile bootstrap interval."""
        v = np.asarray(values, dtype=float)
        if v.size == 0:
            return 0.0, 0.0, 0.0
        means = v[self.indices(v.size)].mean(axis=1)
        return float(v.mean()), float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))

    def paired(self, a: Sequence[float], b: Sequence[float], alpha: float = 0.05) -> dict[str, Any]:
        """Paired comparison of a against b on the same questions.

        diff = mean(a - b) with its bootstrap interval, and a two-sided sign-flip permutation p-value
        (the exact null of "a and b are exchangeable per question"). The verdict is `better`/`worse` only
        when the interval excludes zero and p < 0.05.
        """
        d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
        if d.size == 0:
            return {"n": 0, "diff": 0.0, "lo": 0.0, "hi": 0.0, "p": 1.0, "verdict": "n/a"}
        mean, lo, hi = self.ci(d, alpha)
        rng = np.random.default_rng(self.seed + 7919 * d.size)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(self.resamples, d.size))
        null = np.abs((signs * d).mean(axis=1))
        p = float((np.sum(null >= abs(mean) - 1e-12) + 1) / (self.resamples + 1))
        # both tests must agree: percentile intervals are too narrow when only a few differences are nonzero
        verdict = "better" if lo > 0 and p < 0.05 else ("worse" if hi < 0 and p < 0.05 else "not distinguishable")
        return {"n": int(d.size), "diff": mean, "lo": lo, "hi": hi, "p": p, "verdict": verdict}
