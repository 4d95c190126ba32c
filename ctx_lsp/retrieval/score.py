"""Candidates and their scores: every candidate is scored once, keeping each contribution as a reason."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class Reason:
    via: str  # generator ("symbol-exact", "bm25", ...) or edge kind with direction ("CALLS<-")
    source: str | None  # node id the candidate was reached from (None for seeds)
    weight: float
    value: float | None = None  # the measure behind the weight, when there is one (dense: the cosine)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"via": self.via, "from": self.source, "weight": round(self.weight, 4)}
        if self.value is not None:
            out["value"] = round(self.value, 4)
        return out


@dataclass(slots=True)
class Candidate:
    node_id: str
    hops: int = 0  # distance from the nearest seed
    reasons: list[Reason] = field(default_factory=list)
    score: float = 0.0

    @property
    def memory_only(self) -> bool:
        """Whether working memory alone brought it (an open file, the last answer): it adds an item to a
        session's pack and is no target, expansion source or rank another item yields to."""
        return bool(self.reasons) and all(r.via == "working-memory" for r in self.reasons)


class Candidates:
    """The pool: add contributions, then `ranked()` scores every candidate once."""

    def __init__(self) -> None:
        self.pool: dict[str, Candidate] = {}

    def add(self, node_id: str, via: str, weight: float, source: str | None = None, hops: int = 0,
            value: float | None = None) -> Candidate:
        c = self.pool.get(node_id)
        if c is None:
            c = self.pool[node_id] = Candidate(node_id, hops)
        else:
            c.hops = min(c.hops, hops)
        for r in c.reasons:
            if r.via == via and r.source == source:
                r.weight = max(r.weight, weight)
                return c
        c.reasons.append(Reason(via, source, weight, value))
        return c

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.pool

    def ranked(self, prior: Callable[[str], float] | None = None,
               tie: Callable[[str], float] | None = None) -> list[Candidate]:
        """Score every candidate once. `prior(node_id)` multiplies a score (e.g. tests when the
        question is not about tests); `tie(node_id)` orders equal scores, lower first (else node ids)."""
        for c in self.pool.values():
            # diminishing returns: the strongest reason counts fully, further ones by half
            ws = sorted((r.weight for r in c.reasons), reverse=True)
            c.score = ws[0] + 0.5 * sum(ws[1:]) if ws else 0.0
            if prior is not None:
                c.score *= prior(c.node_id)
            c.reasons.sort(key=lambda r: (-r.weight, r.via, r.source or ""))
        order = tie or _no_tie
        return sorted(self.pool.values(), key=lambda c: (-c.score, c.hops, order(c.node_id), c.node_id))


def _no_tie(_node_id: str) -> float:
    return 0.0
