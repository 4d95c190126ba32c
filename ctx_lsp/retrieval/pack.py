"""Pack: ranked candidates -> items inside a hard token budget.

Symbol-level spans rather than whole files; a span inside an already delivered span is merged into it;
detail falls off with rank and distance (full text, then signature, then a one-line reference); an
adaptive cut stops where scores drop. The sum of item tokens never exceeds the budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctx_lsp.index.graph import CodeGraph
from ctx_lsp.index.model import Node
from ctx_lsp.retrieval.score import Candidate
from ctx_lsp.retrieval.tokens import count_tokens

CUT_RATIO = 0.08  # drop candidates scoring under this share of the best
MAX_ITEMS = 40
FULL_RANKS = 8  # ranks that may get full text
MAX_FULL_SHARE = 0.45  # one item's full text may take at most this share of the budget
FULL_SHARE = 0.8  # full texts stop here, leaving room for lower-ranked signatures and references
OUTLINE_MEMBERS = 20

SourceLines = Callable[[str], list[str]]


@dataclass
class Item:
    node: Node
    cand: Candidate
    detail: str
    text: str
    tokens: int
    merged: list[Candidate] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        reasons = [r.to_json() for r in self.cand.reasons]
        for m in self.merged:
            reasons.extend({**r.to_json(), "merged": m.node_id} for r in m.reasons[:2])
        n = self.node
        return {
            "path": n.path, "start_line": n.start_line, "end_line": n.end_line, "symbol": n.qualname,
            "kind": n.kind, "detail": self.detail, "score": round(self.cand.score, 4), "tokens": self.tokens,
            "reasons": reasons[:8], "text": self.text,
        }


def _header_tokens(node: Node) -> int:
    return count_tokens(f"### {node.path}:{node.start_line}-{node.end_line} {node.qualname or ''} reasons") + 6


def full_text(node: Node, lines: list[str]) -> str:
    if node.kind == "commit":
        return f"{node.qualname} {node.doc}: {node.signature}"
    end = node.end_line if node.qualname is not None else min(node.end_line, 40)
    return "\n".join(lines[node.start_line - 1 : end])


def signature_text(node: Node, graph: CodeGraph) -> str:
    if node.kind == "commit":
        return f"{node.qualname} {node.doc}: {node.signature}"
    if node.qualname is None:
        return f"# {node.path}" + (f": {node.doc}" if node.doc else "")
    parts = [node.signature or node.qualname]
    if node.doc:
        parts.append(f'    """{node.doc}"""')
    if node.kind == "class":
        found = [graph.node(e.dst) for e in graph.out_edges(node.id, ("CONTAINS",))]
        members = sorted((m for m in found if m is not None and m.kind in ("method", "test")), key=lambda m: m.start_line)
        for m in members[:OUTLINE_MEMBERS]:
            parts.append(f"    {m.signature}  # line {m.start_line}")
        if len(members) > OUTLINE_MEMBERS:
            parts.append(f"    # ... {len(members) - OUTLINE_MEMBERS} more methods")
    return "\n".join(parts)


def reference_text(node: Node) -> str:
    if node.kind == "commit":
        return f"{node.qualname}: {node.signature}"
    return f"{node.path}:{node.start_line} {node.qualname or ''} ({node.kind})".replace("  ", " ")


TARGET_FULL_SHARE = 0.2  # a relation question's own target gets full text only when it is this small


def pack(ranked: list[Candidate], graph: CodeGraph, source: SourceLines, budget: int,
         targets: frozenset[str] = frozenset()) -> list[Item]:
    """Pack ranked candidates. `targets` are the subjects of a relation question ("who calls X":
    X): their bodies are not the answer, so they are kept short to leave room for what is."""
    if not ranked:
        return []
    top = ranked[0].score
    items: list[Item] = []
    used = 0
    for rank, cand in enumerate(ranked[: MAX_ITEMS * 2]):
        if cand.score < CUT_RATIO * top or len(items) >= MAX_ITEMS:
            break
        node = graph.node(cand.node_id)
        if node is None:
            continue
        container = next((it for it in items if it.detail == "full" and it.node.path == node.path and node.kind != "commit"
                          and it.node.start_line <= node.start_line and node.end_line <= it.node.end_line
                          and it.node.qualname is not None), None)
        if container is not None:
            container.merged.append(cand)
            continue
        contains_chosen = any(it.node.path == node.path and node.start_line <= it.node.start_line
                              and it.node.end_line <= node.end_line for it in items)
        head = _header_tokens(node)
        remaining = budget - used - head
        if remaining <= 0:
            continue
        options: list[str] = []
        if rank < FULL_RANKS and cand.hops <= 1 and not contains_chosen and node.kind != "commit":
            options.append("full")
        if rank < FULL_RANKS * 2 or cand.hops <= 1:
            options.append("signature")
        options.append("reference")
        for detail in options:
            if detail == "full":
                text = full_text(node, source(node.path))
                if not text:
                    continue
                cost = count_tokens(text)
                if cost > MAX_FULL_SHARE * budget and rank > 0:
                    continue
                if cand.node_id in targets and cost > TARGET_FULL_SHARE * budget:
                    continue
                if items and used + cost + head > FULL_SHARE * budget:
                    continue
            elif detail == "signature":
                text = signature_text(node, graph)
                cost = count_tokens(text)
            else:
                text = reference_text(node)
                cost = count_tokens(text)
            if cost <= remaining:
                items.append(Item(node, cand, detail, text, cost + head))
                used += cost + head
                break
    return items
