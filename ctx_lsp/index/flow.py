"""Callback flow: which functions a call of a parameter, local or stored attribute can run.

bind.py resolves each file's flowfacts into constraints (a function flows into a variable, a
variable into another, a variable is called at a site). This module propagates function values
over the whole workspace and turns every call of a variable into CALLS edges to the functions that
can reach it, with resolver `ast-flow`: `Flask.dispatch_request -> index` for a view registered
with `@app.route`. The edges are what *may* run (every view registered anywhere reaches
`view_functions`), so the resolver keeps them apart from the name-resolved ones.

It is a pure function of all bindings' constraints: the incremental graph stays equal to a scratch
build. `flow_values` propagates (the costly part: 0.2 s on sympy), `emit_edges` places the edges at
the calls; an update that only moves calls keeps the values (workspace._update_flow).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ctx_lsp.index.model import RESOLVER_FLOW, Edge, EdgeKind

FLOW_KEY = "flow"  # graph.extra_edges key


Values = dict[tuple, set[str]]  # variable -> the function ids that can reach it


def flow_edges(bindings: Iterable[tuple[str, list[tuple]]], existing: set[tuple[str, str]] | None = None,
               overrides: Iterable[tuple[str, str]] = ()) -> list[Edge]:
    """CALLS edges from every call of a variable to the functions that flow into it.

    `bindings`: (path, constraints) per file. `existing`: (src, dst) pairs that already have a CALLS
    edge (name-resolved edges win; no duplicate). `overrides`: (method, the base method it
    overrides): an argument passed to the base method reaches the override's same-named parameter
    (virtual dispatch: `self.add_url_rule(..., f)` in Scaffold runs App.add_url_rule), and what the
    override returns reaches the callers of the base method."""
    items = list(bindings)
    return emit_edges(call_sites(items), flow_values(items, overrides), existing)


def call_sites(bindings: Iterable[tuple[str, list[tuple]]]) -> list[tuple[str, tuple, str, int, int]]:
    """(caller, called variable, path, line, col) of every call of a variable."""
    return [(c[1], tuple(c[2]), path, c[3], c[4]) for path, constraints in bindings for c in constraints if c[0] == "c"]


def without_positions(constraints: list[tuple]) -> list[tuple]:
    """The constraints as `flow_values` reads them: a call's line and column only place its edges, so
    an edit that moves calls (a line inserted above them) leaves the propagated values as they were."""
    return [c[:3] if c[0] == "c" else c for c in constraints]


def flow_values(bindings: Iterable[tuple[str, list[tuple]]], overrides: Iterable[tuple[str, str]] = ()) -> Values:
    """The functions that can reach each variable: the constraints propagated to a fixpoint."""
    succ: dict[tuple, set[tuple]] = defaultdict(set)
    values: dict[tuple, set[str]] = defaultdict(set)
    called: list[tuple] = []
    spreads: list[tuple[str, str, tuple[str, ...], bool]] = []
    for _path, constraints in bindings:
        for c in constraints:
            if c[0] == "v":
                succ[tuple(c[1])].add(tuple(c[2]))
            elif c[0] == "f":
                values[tuple(c[2])].add(c[1])
            elif c[0] == "c":
                called.append(tuple(c[2]))
            elif c[0] == "s":
                spreads.append((c[1], c[2], tuple(c[3]), c[4]))
    by_def: dict[str, set[tuple]] = defaultdict(set)
    for v in [*succ, *values, *(w for ws in succ.values() for w in ws), *called]:
        if v[0] in ("p", "r"):
            by_def[v[1]].add(v)
    for method, base in overrides:
        for v in list(by_def.get(base, ())):
            if v[0] == "p":
                succ[v].add(("p", method, v[2]))
            else:  # a call resolved to the base gets what the override returns
                succ[("r", method)].add(v)
    _spread_keywords(succ, values, spreads)
    work = list(values)
    while work:
        v = work.pop()
        for w in succ.get(v, ()):
            before = len(values[w])
            values[w] |= values[v]
            if len(values[w]) != before:
                work.append(w)
    return dict(values)


def emit_edges(calls: list[tuple[str, tuple, str, int, int]], values: Values,
               existing: set[tuple[str, str]] | None = None) -> list[Edge]:
    out: dict[tuple[str, str], Edge] = {}
    for caller, var, path, line, col in sorted(calls):
        for fn in sorted(values.get(var, ())):
            key = (caller, fn)
            if fn == caller or key in out or (existing is not None and key in existing):
                continue
            out[key] = Edge(caller, fn, EdgeKind.CALLS.value, path, line, col, RESOLVER_FLOW)
    return sorted(out.values(), key=lambda e: (e.src, e.dst))


def _spread_keywords(succ: dict[tuple, set[tuple]], values: dict[tuple, set[str]],
                     spreads: list[tuple[str, str, tuple[str, ...], bool]]) -> None:
    """`g(**kwargs)`: each keyword entry ("k", f, key) of f's `**kwargs` reaches g's parameter `key`,
    or g's own `**` entry `key` (click's `option(callback=f)` -> `Option(**attrs)` ->
    `Parameter.__init__(callback)`). Entries created this way can be spread again: to a fixpoint."""
    if not spreads:
        return
    keys: dict[str, set[str]] = defaultdict(set)
    for v in [*succ, *values, *(w for ws in succ.values() for w in ws)]:
        if v[0] == "k":
            keys[v[1]].add(v[2])
    changed = True
    while changed:
        changed = False
        for src, dst, names, has_kw in spreads:
            for key in list(keys.get(src, ())):
                if key in names:
                    succ[("k", src, key)].add(("p", dst, key))
                elif has_kw and key not in keys[dst]:
                    keys[dst].add(key)
                    succ[("k", src, key)].add(("k", dst, key))
                    changed = True
                elif has_kw:
                    succ[("k", src, key)].add(("k", dst, key))
