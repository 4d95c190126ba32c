"""Typed expansion: follow the edges a plan asks for, within bounded hops and a cap per edge kind."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from ctx_lsp.index.facts import is_test_path
from ctx_lsp.index.model import RESOLVER_IMPORT, EdgeKind
from ctx_lsp.retrieval.plan import Plan
from ctx_lsp.retrieval.score import Candidates

if TYPE_CHECKING:
    from ctx_lsp.index.graph import CodeGraph

CAP_PER_KIND = 12
K = EdgeKind
IMPORTED_BY = "REFERENCES/import"  # pseudo-kind: REFERENCES edges made by an import statement

# operator -> [(edge kind, direction, weight)]; "in" follows edges pointing at the target
OPERATOR_EDGES: dict[str, list[tuple[str, str, float]]] = {
    "definition": [(K.CONTAINS.value, "out", 0.35), (K.CALLS.value, "in", 0.3), (K.CALLS.value, "out", 0.25),
                   (K.INHERITS.value, "out", 0.35)],
    "callers": [(K.CALLS.value, "in", 1.0), (K.INSTANTIATES.value, "in", 0.9)],
    "callees": [(K.CALLS.value, "out", 1.0), (K.INSTANTIATES.value, "out", 0.9)],
    "implementations": [(K.INHERITS.value, "in", 1.0), (K.OVERRIDES.value, "in", 1.0)],
    "references": [(K.REFERENCES.value, "in", 1.0), (K.CALLS.value, "in", 0.9), (K.INSTANTIATES.value, "in", 0.9)],
    # importers of a symbol: the import statements that name it (REFERENCES made by ast-import)
    "importers": [(K.IMPORTS.value, "in", 1.0), (IMPORTED_BY, "in", 1.0)],
    "dependencies": [(K.IMPORTS.value, "out", 1.0)],
    "instantiations": [(K.INSTANTIATES.value, "in", 1.0)],
    "tests": [(K.COVERS.value, "in", 1.0), (K.COVERS.value, "out", 1.0)],
    "history": [(K.TOUCHED.value, "in", 1.0)],
    "impact": [(K.CALLS.value, "in", 0.95), (K.INSTANTIATES.value, "in", 0.95), (K.OVERRIDES.value, "in", 0.9),
               (K.INHERITS.value, "in", 0.85), (K.REFERENCES.value, "in", 0.7), (K.IMPORTS.value, "in", 0.5),
               (K.COVERS.value, "in", 0.5), (K.CONTAINS.value, "out", 0.5)],
}
# "move X" / "extract X": what X uses must be importable from its new home
MOVE_EDGES = [(K.CALLS.value, "out", 0.7), (K.REFERENCES.value, "out", 0.6), (K.INSTANTIATES.value, "out", 0.6)]
_MOVE = re.compile(r"\b(?:move|moving|extract|split|relocate)\b", re.I)
# concept queries: a light structural neighbourhood around lexical hits
CONCEPT_EDGES = [(K.CALLS.value, "out", 0.25), (K.CALLS.value, "in", 0.2), (K.INHERITS.value, "out", 0.3),
                 (K.INSTANTIATES.value, "in", 0.25)]


def edges_for(plan: Plan, history_tests: bool) -> list[tuple[str, str, float]]:
    spec: list[tuple[str, str, float]] = []
    for op in plan.operators:
        spec.extend(OPERATOR_EDGES.get(op, []))
    if "impact" in plan.operators and _MOVE.search(plan.query):
        spec.extend(MOVE_EDGES)
    if not spec:
        spec = list(CONCEPT_EDGES)
    if not history_tests:
        spec = [s for s in spec if s[0] not in (K.COVERS.value, K.TOUCHED.value)]
    # one entry per (kind, direction), at its strongest weight: two operators asking for one edge kind
    # ("definition" and "callers" both follow CALLS in) share its cap, and the weaker one took it all
    best: dict[tuple[str, str], float] = {}
    for kind, direction, w in spec:
        best[(kind, direction)] = max(w, best.get((kind, direction), w))
    return [(kind, direction, w) for (kind, direction), w in best.items()]


TEST_DAMPING = 0.7  # tests reached by a non-test relation: relevant, but must not crowd out the code


def is_test_node(graph: CodeGraph, node_id: str) -> bool:
    n = graph.node(node_id)
    return n is not None and n.path is not None and (n.kind == "test" or is_test_path(n.path))


def expand(graph: CodeGraph, cands: Candidates, sources: list[str], spec: list[tuple[str, str, float]],
           hops: int = 2, decay: float = 0.45, scope: Callable[[str], float] | None = None) -> list[str]:
    """Expand from `sources` along `spec`; returns the nodes reached (each once, first reach wins).
    `scope(path)` (retrieval.files.scope_prior): past the cap per edge kind, package code is kept
    before tests and tests before examples, docs and scripts (which weigh as much once reached: an
    example that calls a changed function must change too)."""
    wants_tests = any(kind == K.COVERS.value and w >= 1.0 for kind, _, w in spec)

    def place(node_id: str) -> tuple[float, bool]:
        """Sort key past the cap: package code, then tests, then examples, docs and scripts."""
        assert scope is not None
        n = graph.node(node_id)
        if n is None or n.path is None:
            return -1.0, False
        return -scope(n.path), is_test_node(graph, node_id)

    reached: list[str] = []
    frontier = [(s, cands.pool[s].score if s in cands.pool and cands.pool[s].score else _seed_weight(cands, s), 0)
                for s in dict.fromkeys(sources)]
    seen = set(sources)
    for _ in range(hops):
        nxt: list[tuple[str, float, int]] = []
        for node_id, base, depth in frontier:
            per_kind: dict[tuple[str, str], int] = {}
            for kind, direction, w in spec:
                real = K.REFERENCES.value if kind == IMPORTED_BY else kind
                edges = graph.in_edges(node_id, (real,)) if direction == "in" else graph.out_edges(node_id, (real,))
                if kind == IMPORTED_BY:
                    edges = [e for e in edges if e.resolver == RESOLVER_IMPORT]
                ends = sorted(e.src if direction == "in" else e.dst for e in edges)
                if scope is not None and len(ends) > CAP_PER_KIND:
                    ends.sort(key=place)  # stable: ids order ties; under the cap every end is taken anyway
                for other in ends:
                    key = (kind, direction)
                    if per_kind.get(key, 0) >= CAP_PER_KIND:
                        break
                    per_kind[key] = per_kind.get(key, 0) + 1
                    if kind == K.CONTAINS.value and direction == "in":
                        continue
                    arrow = "<-" if direction == "in" else "->"
                    weight = base * w * (decay ** depth)
                    if not wants_tests and kind != K.COVERS.value and is_test_node(graph, other):
                        weight *= TEST_DAMPING
                    if kind == K.CONTAINS.value and direction == "out":
                        # members of a class enter at lower weight and are not expanded further
                        cands.add(other, f"{kind}->", weight * 0.8, source=node_id, hops=depth + 1)
                        continue
                    cands.add(other, f"{kind}{arrow}", weight, source=node_id, hops=depth + 1)
                    if other not in seen:
                        seen.add(other)
                        reached.append(other)
                        nxt.append((other, weight, depth + 1))
        frontier = nxt
        if not frontier:
            break
    return reached


def _seed_weight(cands: Candidates, node_id: str) -> float:
    c = cands.pool.get(node_id)
    if c is None or not c.reasons:
        return 1.0
    return max(r.weight for r in c.reasons)
