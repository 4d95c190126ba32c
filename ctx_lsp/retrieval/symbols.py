"""The symbol ranking of a pack: where in the code to look, beyond what fits the token budget.

A pack's items are bounded by the budget, so the functions an edit needs often rank just past
the last item. `symbols` lists the leading classes, functions and methods with their reasons:
the scored candidates (the generators and typed expansion already gave them a score, scaled by
their file's rank), plus, inside the leading files of a task, every symbol whose own text shares
words with the task (its chunk's BM25), weighted by its file's share of the best file's score.
(On the SWE-bench dev split the candidates alone held the gold functions of 45% of the issues in
their first ten symbols; adding the leading files' chunk matches gave 48%, and the items 40%.)

For task text a symbol's score then grows with the log of its length: BM25 divides a match by the
chunk's length, while the code a fix edits is more often in a long function than in a short one (size
is the strongest single predictor of where defects are).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ctx_lsp.index.graph import CodeGraph
from ctx_lsp.retrieval.lexical import LexicalIndex
from ctx_lsp.retrieval.score import Candidate

SYMBOL_TOP = 30
LEXICAL_FILES = 5  # the leading files whose symbols are matched against the task by their own text
W_CHUNK = 1.0  # the best chunk match in the leading files weighs as much as the best candidate
_KINDS = frozenset({"class", "function", "method", "test"})
_REASONS = 3
W_LENGTH = 0.1  # task text: score * (1 + W_LENGTH * ln(lines)); a 100-line function x1.46, a 3-line one x1.11
CLASS_LINES = 50  # a class's own text is its header, docstring and attributes, not its methods: cap its length


def rank_symbols(graph: CodeGraph, ranked: list[Candidate], files: list[dict[str, Any]],
                 lexical: LexicalIndex | None, query: str, prior: Callable[[str], float],
                 top: int = SYMBOL_TOP, parts: bool = False) -> list[dict[str, Any]]:
    """Symbols best first, each `{path, symbol, kind, start_line, end_line, score,
    reasons}`. Deterministic (ties by id).
    `files` is the pack's file ranking; `lexical` None leaves the chunk matches out (short questions)."""
    scores: dict[str, float] = {}
    reasons: dict[str, list[dict[str, Any]]] = {}
    split: dict[str, dict[str, float]] = {}  # `parts`: the score's components per symbol
    best = 0.0
    for c in ranked:  # best first, so the first symbol sets the scale
        if c.score <= 0 or _kind(graph, c.node_id) not in _KINDS:
            continue
        best = best or c.score
        scores[c.node_id] = c.score / best
        if parts:
            split[c.node_id] = {"cand": c.score / best}
        reasons[c.node_id] = [r.to_json() for r in c.reasons[:_REASONS]]
    if lexical is not None and files:
        lead = files[0]["score"] or 1.0
        matches: list[tuple[str, float, float]] = []
        for f in files[:LEXICAL_FILES]:
            share = f["score"] / lead
            matches += [(nid, s, share) for nid, s in lexical.chunk_scores(query, f["path"]).items()
                        if _kind(graph, nid) in _KINDS]
        top_match = max((s for _, s, _ in matches), default=0.0)
        for nid, s, share in matches:
            w = W_CHUNK * share * (s / top_match) * prior(nid)
            if w <= 0:
                continue
            scores[nid] = scores.get(nid, 0.0) + w
            if parts:
                split.setdefault(nid, {}).update(chunk=s / top_match, share=share, prior=prior(nid))
            reasons.setdefault(nid, []).append({"via": "chunk-bm25", "from": None, "weight": round(w, 4),
                                                "value": round(s, 4)})
    if lexical is not None:
        for nid in scores:
            n = graph.node(nid)
            if n is not None:
                lines = n.end_line - n.start_line + 1
                scores[nid] *= 1 + W_LENGTH * math.log(max(1, min(lines, CLASS_LINES) if n.kind == "class" else lines))
    out: list[dict[str, Any]] = []
    for nid, score in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
        n = graph.node(nid)
        if n is None:
            continue
        out.append({"path": n.path, "symbol": n.qualname, "kind": n.kind, "start_line": n.start_line,
                    "end_line": n.end_line,
                    "score": round(score, 4),
                    **({"parts": {**split.get(nid, {}), "lines": n.end_line - n.start_line + 1}} if parts else {}),
                    "reasons": sorted(reasons.get(nid, []), key=lambda r: -float(r["weight"]))})
    return out


def _kind(graph: CodeGraph, node_id: str) -> str | None:
    n = graph.node(node_id)
    return n.kind if n is not None else None
