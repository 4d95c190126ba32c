"""Gold answers read mechanically off the code graph, one function per relation.

A gold item is the span of a related node: `{path, start_line, end_line, symbol}` (symbol None for a
file node, whose span is the whole file). The target itself is never part of its own answer.

Relations are data-driven: `tests` and `history` are offered only when the graph holds COVERS or
TOUCHED edges (made by the coverage and git producers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctx_lsp.index.graph import CodeGraph
from ctx_lsp.index.model import EdgeKind, Node

CALLS = EdgeKind.CALLS.value
INST = EdgeKind.INSTANTIATES.value
REFS = EdgeKind.REFERENCES.value
INH = EdgeKind.INHERITS.value
OVR = EdgeKind.OVERRIDES.value
IMP = EdgeKind.IMPORTS.value
COVERS = EdgeKind.COVERS.value
TOUCHED = EdgeKind.TOUCHED.value

CODE_KINDS = ("class", "function", "method")
Gold = list[dict[str, Any]]


def span(n: Node) -> dict[str, Any]:
    return {"path": n.path, "start_line": n.start_line, "end_line": n.end_line, "symbol": n.qualname}


def _gold(g: CodeGraph, target: Node, ids: set[str]) -> Gold:
    items = {}
    for i in ids:
        n = g.node(i)
        if n is None or n.id == target.id:
            continue
        s = span(n)
        items[(s["path"], s["start_line"], s["end_line"], s["symbol"] or "")] = s
    return [items[k] for k in sorted(items)]


def _in(g: CodeGraph, node_id: str, kinds: tuple[str, ...]) -> set[str]:
    return {e.src for e in g.in_edges(node_id, kinds)}


def _out(g: CodeGraph, node_id: str, kinds: tuple[str, ...]) -> set[str]:
    return {e.dst for e in g.out_edges(node_id, kinds)}


def _closure_in(g: CodeGraph, node_id: str, kinds: tuple[str, ...], depth: int = 4) -> set[str]:
    seen: set[str] = set()
    frontier = {node_id}
    for _ in range(depth):
        nxt = set()
        for cur in frontier:
            nxt |= _in(g, cur, kinds)
        nxt -= seen | {node_id}
        seen |= nxt
        frontier = nxt
    return seen


def callers(g: CodeGraph, t: Node) -> set[str]:
    return _in(g, t.id, (CALLS, INST))


def callees(g: CodeGraph, t: Node) -> set[str]:
    return {d for d in _out(g, t.id, (CALLS, INST)) if (n := g.node(d)) is not None and n.kind in CODE_KINDS}


def implementations(g: CodeGraph, t: Node) -> set[str]:
    if t.kind == "class":
        return _closure_in(g, t.id, (INH,))
    if t.kind == "method":
        return _closure_in(g, t.id, (OVR,))
    return set()


def references(g: CodeGraph, t: Node) -> set[str]:
    return _in(g, t.id, (REFS, CALLS, INST, INH))


def importers(g: CodeGraph, t: Node) -> set[str]:
    """Files importing the target's name from its module, or through one re-exporting module."""
    direct = {e.src for e in g.in_edges(t.path, (IMP,)) if t.name in e.extra}
    again = set()
    for f in direct:
        again |= {e.src for e in g.in_edges(f, (IMP,)) if t.name in e.extra}
    return (direct | again) - {t.path}


def instantiations(g: CodeGraph, t: Node) -> set[str]:
    return _in(g, t.id, (INST,)) if t.kind == "class" else set()


def impact(g: CodeGraph, t: Node) -> set[str]:
    """What must change with the target's signature: callers, instantiators, overriders/subclasses."""
    out = _in(g, t.id, (CALLS, INST))
    if t.kind == "method":
        out |= _closure_in(g, t.id, (OVR,))
    elif t.kind == "class":
        out |= _closure_in(g, t.id, (INH,))
    return out


def tests(g: CodeGraph, t: Node) -> set[str]:
    return _in(g, t.id, (COVERS,))


def history(g: CodeGraph, t: Node) -> set[str]:
    return _in(g, t.id, (TOUCHED,))


# relation -> (gold function, target kinds, whether test code may be the target)
RELATIONS: dict[str, tuple[Callable[[CodeGraph, Node], set[str]], tuple[str, ...], bool]] = {
    "callers": (callers, ("function", "method"), False),
    "callees": (callees, ("function", "method", "test"), True),
    "implementations": (implementations, ("class", "method"), False),
    "references": (references, ("class", "function", "method", "variable"), False),
    "importers": (importers, ("class", "function", "variable"), False),
    "instantiations": (instantiations, ("class",), False),
    "impact": (impact, ("class", "function", "method"), False),
    "tests": (tests, ("class", "function", "method"), False),
    "history": (history, ("class", "function", "method"), False),
}
DATA_RELATIONS = {"tests": COVERS, "history": TOUCHED}


def available_relations(g: CodeGraph, pinned_history: bool = True) -> list[str]:
    """Every relation whose edges exist in this graph (tests/history only with COVERS/TOUCHED edges).

    `history` also needs `pinned_history`: the header's commit must pin the git history the TOUCHED
    edges come from (a root inside another repository's work tree has no commit of its own).
    """
    counts = g.edge_counts()
    out = [r for r in RELATIONS if r not in DATA_RELATIONS or counts.get(DATA_RELATIONS[r], 0) > 0]
    return [r for r in out if r != "history" or pinned_history]


RECENT_COMMITS = 5


def commit_span(n: Node) -> dict[str, Any]:
    """A commit as a gold item: path `commit:<short sha>` (how the evaluator names commit items)."""
    return {"path": f"commit:{n.qualname}", "start_line": 0, "end_line": 0, "symbol": n.id}


def gold_for(g: CodeGraph, relation: str, t: Node) -> Gold:
    fn = RELATIONS[relation][0]
    if relation == "history":
        # "what changed recently": the newest commits touching the target (doc starts with the ISO date)
        commits = [n for i in fn(g, t) if (n := g.node(i)) is not None and n.kind == "commit"]
        commits.sort(key=lambda n: (n.doc.split(" ", 1)[0], n.id), reverse=True)
        return sorted((commit_span(n) for n in commits[:RECENT_COMMITS]), key=lambda s: s["path"])
    return _gold(g, t, fn(g, t))
