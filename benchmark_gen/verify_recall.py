"""`verify-edges` recall: pyright's outgoing calls of sampled functions (static) and the calls the
test suite executed under the tracer (dynamic) matched against our CALLS/INSTANTIATES; each miss
classified by why the binder missed it. Also the precision of callback-flow (`ast-flow`) edges.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from typing import Any

from benchmark_gen.oracle_trace import SYNTHETIC as SYNTHETIC_CODE
from benchmark_gen.oracle_trace import CodeMapper
from benchmark_gen.verify_precision import Judge
from benchmark_gen.verify_sampling import (
    CALL_KINDS,
    PROPERTY_DECORATORS,
    Workspace,
    chain_shape,
    sample_symbols,
    site_value,
    wilson,
)
from ctx_lsp.index.bind import Binder
from ctx_lsp.index.facts import Site
from ctx_lsp.index.model import RESOLVER_FLOW, Edge, EdgeKind, symbol_id
from ctx_lsp.index.modules import EXT


def family_ids(ws: Workspace, nid: str) -> set[str]:
    """A def and the defs nested in it (pyright's outgoing calls walk nested bodies too)."""
    node = ws.node(nid)
    if node is None:
        return {nid}
    prefix = (node.qualname or "") + "."
    return {nid} | {symbol_id(node.path, d.qual) for d in ws.facts[node.path].defs if d.qual.startswith(prefix)}


def out_targets(ws: Workspace, ids: set[str], kinds: Iterable[str] = CALL_KINDS) -> dict[str, Edge]:
    graph = ws.index.graph
    out: dict[str, Edge] = {}
    for i in sorted(ids):
        for e in graph.out_edges(i, kinds):
            out.setdefault(e.dst, e)
    return out


def class_of_init(ws: Workspace, nid: str) -> str | None:
    """`pkg/m.py::C.__init__` -> `pkg/m.py::C` (constructor calls are INSTANTIATES edges of the class)."""
    path, _, qual = nid.partition("::")
    if qual.endswith(".__init__") or qual.endswith(".__new__"):
        cls = symbol_id(path, qual.rsplit(".", 1)[0])
        d = ws.def_of.get(cls)
        if d is not None and d.kind == "class":
            return cls
    return None


def subclasses(ws: Workspace, cls: str) -> set[str]:
    graph = ws.index.graph
    out = {cls}
    todo = [cls]
    while todo:
        cur = todo.pop()
        for e in graph.in_edges(cur, [EdgeKind.INHERITS.value]):
            if e.src not in out:
                out.add(e.src)
                todo.append(e.src)
    return out


def is_hit(ws: Workspace, targets: dict[str, Edge], callee: str) -> Edge | None:
    """Does the graph have the call edge? A constructor (`__init__`) call is found as INSTANTIATES of
    its class or of a subclass that inherits that constructor."""
    if callee in targets:
        return targets[callee]
    cls = class_of_init(ws, callee)
    if cls is not None:
        for c in sorted(subclasses(ws, cls)):
            if c in targets and targets[c].kind == EdgeKind.INSTANTIATES.value:
                return targets[c]
    d = ws.def_of.get(callee)
    if d is not None and d.kind == "class":
        for c in sorted(subclasses(ws, callee)):
            if c in targets:
                return targets[c]
    return None


async def static_recall(judge: Judge, ws: Workspace, n: int, seed: int) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    misses: list[dict[str, Any]] = []
    hits_by_resolver: Counter[str] = Counter()
    patterns: Counter[str] = Counter()
    examples: dict[str, dict[str, Any]] = {}
    for nid in sample_symbols(ws, n, seed):
        d = ws.def_of[nid]
        node = ws.node(nid)
        if node is None:
            continue
        async with judge.sem:
            try:
                calls = await judge.oracle.outgoing_calls(ws.root / node.path, d.line - 1, d.col)
            except (asyncio.TimeoutError, RuntimeError):
                calls = None
        if calls is None:
            counts["symbols without a call-hierarchy item"] += 1
            continue
        counts["symbols"] += 1
        family = sorted(family_ids(ws, nid))
        seen: set[str] = set()
        for call in calls:
            if ws.rel_of(call.loc) is None:
                counts["calls outside the workspace"] += 1
                continue
            if call.kind == "Property":
                counts["property accesses (not call edges)"] += 1
                continue
            callee = ws.node_at(call.loc)
            if callee is None:
                counts["calls to a declaration that is not a node"] += 1
                continue
            if callee in seen:
                continue
            seen.add(callee)
            expected = "INSTANTIATES" if (class_of_init(ws, callee) or ws.def_of.get(callee, d).kind == "class") else "CALLS"
            counts[f"{expected} expected"] += 1
            found = next((h for h in (find_call(ws, m, callee, indirect=False) for m in family) if h), None)
            if found is not None:
                counts[f"{expected} found"] += 1
                counts[f"{expected} found ({found[0]})"] += 1
                hits_by_resolver[found[1].resolver] += 1
                continue
            pattern = classify_miss(judge.binder, ws, nid, callee)
            patterns[pattern] += 1
            miss = {"caller": nid, "callee": callee, "expected": expected, "pattern": pattern}
            misses.append(miss)
            examples.setdefault(pattern, miss)
    out: dict[str, Any] = {"counts": dict(sorted(counts.items())), "hits_by_resolver": dict(sorted(hits_by_resolver.items()))}
    for kind in CALL_KINDS:
        exp, got = counts[f"{kind} expected"], counts[f"{kind} found"]
        out[kind] = {"expected": exp, "found": got, "recall": (got / exp) if exp else None,
                     "ci": list(wilson(got, exp))}
    exp = sum(counts[f"{k} expected"] for k in CALL_KINDS)
    got = sum(counts[f"{k} found"] for k in CALL_KINDS)
    out["all"] = {"expected": exp, "found": got, "recall": (got / exp) if exp else None, "ci": list(wilson(got, exp))}
    out["patterns"] = [{"pattern": p, "count": c, "example": examples[p]} for p, c in top_counts(patterns)]
    out["misses"] = misses
    return out


# -- matching executed/pyright calls against the graph --------------------------------------------
FOUND_DIRECT, FOUND_DECORATOR, FOUND_DISPATCH, FOUND_REFERENCE = "direct", "decorator", "dispatch", "reference"


def overridden(ws: Workspace, nid: str) -> set[str]:
    """The methods `nid` overrides, transitively, by the graph's OVERRIDES edges."""
    graph = ws.index.graph
    out: set[str] = set()
    todo = [nid]
    while todo:
        for e in graph.out_edges(todo.pop(), [EdgeKind.OVERRIDES.value]):
            if e.dst not in out:
                out.add(e.dst)
                todo.append(e.dst)
    return out


def is_property(ws: Workspace, nid: str) -> bool:
    d = ws.def_of.get(nid)
    return d is not None and any(c and c[-1] in PROPERTY_DECORATORS for c in d.decorators)


def find_call(ws: Workspace, caller: str, callee: str, indirect: bool) -> tuple[str, Edge] | None:
    """How the graph holds an executed caller -> callee call, if it does.

    direct: a CALLS/INSTANTIATES edge (a constructor through its class or an inheriting subclass; a
    property getter through the REFERENCES edge of the attribute read). decorator: the decorator call
    is an edge of the decorated def nested in the caller (the extractor files decorators there).
    dispatch: the caller CALLS a method the callee overrides (virtual dispatch is CALLS + OVERRIDES).
    reference: the callee ran from inside a builtin or without a call site naming it, and the caller
    REFERENCES it (a callback passed as a value).
    """
    targets = out_targets(ws, {caller})
    hit = is_hit(ws, targets, callee)
    if hit is not None:
        return FOUND_DIRECT, hit
    refs = out_targets(ws, {caller}, [EdgeKind.REFERENCES.value])
    if is_property(ws, callee) and callee in refs:
        return FOUND_DIRECT, refs[callee]
    node = ws.node(caller)
    if node is not None and node.qualname is not None:
        for d in ws.facts[node.path].defs:
            if d.decorators and d.qual.rpartition(".")[0] == node.qualname:
                nested = symbol_id(node.path, d.qual)
                for e in ws.index.graph.out_edges(nested, CALL_KINDS):
                    if d.start <= e.line < d.line and is_hit(ws, {e.dst: e}, callee) is not None:
                        return FOUND_DECORATOR, e
    for base in sorted(overridden(ws, callee)):
        if base in targets and targets[base].kind == EdgeKind.CALLS.value:
            return FOUND_DISPATCH, targets[base]
    if indirect and callee in refs:
        return FOUND_REFERENCE, refs[callee]
    return None


def classify_miss(binder: Binder, ws: Workspace, caller: str, callee: str, via_builtin: bool = False,
                  generator: bool = False, wrapper: bool = False) -> str:
    """Why the graph lacks an executed (or pyright-found) call: a pattern name for the report."""
    node = ws.node(caller)
    cdef = ws.def_of.get(callee)
    callee_qual = callee.rsplit("::", 1)[-1]
    callee_name = callee_qual.rsplit(".", 1)[-1]
    if is_property(ws, callee):
        return "property read (the getter runs; no REFERENCES edge for the attribute read)"
    if node is None or node.qualname is None:
        return "caller is not a def"
    f = ws.facts[node.path]
    scopes = {d.qual for d in f.defs if d.qual == node.qualname or d.qual.startswith(node.qualname + ".")}
    names = {callee_name}
    if callee_name in ("__init__", "__new__") and "." in callee_qual:
        names.add(callee_qual.rsplit(".", 2)[-2])
    sites = [s for s in f.sites if s.scope in scopes and s.kind == "call" and s.chain[-1].removesuffix("()") in names]
    if not sites:
        if wrapper:
            return "call into a decorator's wrapper (the decorated def's call is not resolved either)"
        if via_builtin:
            return "called back from inside a builtin (sorted key=, map, io, ...)"
        if generator:
            return "generator resumed by a function other than its creator"
        parent = symbol_id(callee.rsplit("::", 1)[0], callee_qual.rpartition(".")[0]) if "." in callee_qual else ""
        pdef = ws.def_of.get(parent)
        if pdef is not None and pdef.kind in ("function", "method"):
            made = [s for s in f.sites if s.scope in scopes and s.kind == "call"]
            for s in made:
                v = site_value(binder, ws, s, node.path)
                if v is not None and v is not EXT and v[0] == "sym" and v[1] == parent:
                    return "function returned by a call (decorator factory / closure)"
            pname = pdef.qual.rsplit(".", 1)[-1]
            if any(s.chain[-1].removesuffix("()") == pname for s in made):
                return "function returned by a call (decorator factory / closure)"
        if any(s.chain[-1] in names for s in f.sites if s.scope in scopes):
            return "callback / higher-order (the function is passed as a value)"
        own = ws.def_of.get(caller)
        if own is not None and own.kind == "function" and "." in node.qualname:
            return "closure/decorator wrapper calls a function it was given"
        return "indirect call (no call site names the callee: parameter, local variable, getattr, table)"
    site = sites[0]
    head = site.chain[0].removesuffix("()")
    values = [site_value(binder, ws, s, node.path) for s in sites]
    resolved = [v for v in values if v is not None and v is not EXT and v[0] == "sym"]
    if resolved:
        other = resolved[0][1]
        odef = ws.def_of.get(other)
        init_of = class_of_init(ws, callee)
        if other == callee or (init_of is not None and other in subclasses(ws, init_of)):
            return "bound at a site of a nested def (the edge's source differs)"
        if odef is not None and odef.kind == "variable":
            return "resolved to a variable/attribute holding the callable"
        if odef is not None and odef.kind == "method" and cdef is not None and cdef.kind == "method":
            return "resolved to another class's method (polymorphic receiver)"
        return "resolved to another symbol"
    if any(v is EXT for v in values):
        return f"resolved outside the workspace, ran a workspace object: {chain_shape(ws, node.path, site)}"
    if head == "super":
        return "super() call unresolved"
    if head in ("self", "cls"):
        if len(site.chain) == 2:
            return f"{head}.<m>() unresolved (not found on the static class: mixin/dynamic attribute)"
        return f"{head}.<attr>...<m>() through an attribute of unknown type"
    if len(site.chain) > 1:
        hv = site_value(binder, ws, Site(site.scope, site.line, site.col, site.chain[:1], "ref"), node.path)
        if hv is not None and hv is not EXT and hv[0] == "sym":
            hdef = ws.def_of.get(hv[1])
            if hdef is not None and hdef.kind in ("function", "method") and hdef.decorators:
                return "receiver is a decorated def (the decorator changes its type)"
    shape = chain_shape(ws, node.path, site)
    if "<untyped-local/param>" in shape:
        return f"receiver is an untyped parameter or local: {shape}"
    return f"unresolved: {shape}"


# -- the dynamic oracle ----------------------------------------------------------------------------
def decorator_wrappers(ws: Workspace, pairs: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """Wrapper closures of decorators and the decorated defs they ran: W -> {F} for executed pairs
    W -> F where W is defined inside a function D and F is decorated with D (`@D` / `@x.D(...)`)."""
    out: dict[str, set[str]] = {}
    for caller, callee in pairs:
        node = ws.node(caller)
        if node is None or node.qualname is None or "." not in node.qualname:
            continue
        outer = ws.def_of.get(symbol_id(node.path, node.qualname.rpartition(".")[0]))
        fdef = ws.def_of.get(callee)
        if outer is None or fdef is None or outer.kind not in ("function", "method"):
            continue
        dname = outer.qual.rsplit(".", 1)[-1]
        if any(c and c[-1].removesuffix("()") == dname for c in fdef.decorators):
            out.setdefault(caller, set()).add(callee)
    return out


def dynamic_recall(ws: Workspace, calls: list[Any], binder: Binder) -> dict[str, Any]:
    mapper = CodeMapper(ws.facts)
    excluded: Counter[str] = Counter()
    pairs: dict[tuple[str, str], tuple[bool, bool]] = {}
    for c in calls:
        if not c.caller.is_function:
            excluded["caller is a module or class body (import time)"] += 1
            continue
        if c.callee.name in SYNTHETIC_CODE:
            excluded["lambda or comprehension body"] += 1
            continue
        caller = mapper.node_of(c.caller)
        callee = mapper.node_of(c.callee)
        if caller is None or callee is None:
            excluded["code object without a node (module-level lambda, generated code)"] += 1
            continue
        name = callee.rsplit("::", 1)[-1].rsplit(".", 1)[-1]
        if name.startswith("__") and name.endswith("__") and name not in ("__init__", "__new__", "__call__"):
            excluded["implicit protocol call (dunder method)"] += 1
            continue
        via, gen = pairs.get((caller, callee), (True, False))
        # a pair seen both through a builtin and directly counts as direct
        pairs[(caller, callee)] = (via and c.via_builtin, gen or c.callee.is_generator)
    wrapped = decorator_wrappers(ws, pairs)
    executed = set(pairs)  # wrapper -> wrapped included: flow edges name those calls too
    for (caller, callee) in list(pairs):
        if callee in wrapped.get(caller, ()):
            del pairs[(caller, callee)]
            excluded["decorator's wrapper calling the def it wraps"] += 1
    counts: Counter[str] = Counter()
    patterns: Counter[str] = Counter()
    examples: dict[str, dict[str, Any]] = {}
    hits_by_resolver: Counter[str] = Counter()
    misses = []
    groups = ("source callers", "test callers")
    for (caller, callee), (via, gen) in sorted(pairs.items()):
        cnode = ws.node(caller)
        group = groups[1] if cnode is not None and ws.facts[cnode.path].is_test_file else groups[0]
        counts[f"{group} pairs"] += 1
        found = find_call(ws, caller, callee, indirect=via or gen)
        if found is None and callee in wrapped:
            # caller -> wrapper: the graph's edge goes to the decorated def the wrapper ran
            targets = out_targets(ws, {caller})
            edge = next((targets[f] for f in sorted(wrapped[callee]) if f in targets), None)
            found = (FOUND_DECORATOR, edge) if edge is not None else None
        if found is not None:
            how, edge = found
            counts[f"{group} {how}"] += 1
            hits_by_resolver[edge.resolver] += 1
            continue
        pattern = classify_miss(binder, ws, caller, callee, via_builtin=via, generator=gen, wrapper=callee in wrapped)
        patterns[pattern] += 1
        miss = {"caller": caller, "callee": callee, "pattern": pattern}
        misses.append(miss)
        examples.setdefault(pattern, miss)
    out: dict[str, Any] = {"excluded": dict(sorted(excluded.items())),
                           "hits_by_resolver": dict(sorted(hits_by_resolver.items()))}
    for group in (*groups, "all"):
        sel: tuple[str, ...] = groups if group == "all" else (group,)
        n = sum(counts[f"{g} pairs"] for g in sel)
        by_how = {h: sum(counts[f"{g} {h}"] for g in sel)
                  for h in (FOUND_DIRECT, FOUND_DECORATOR, FOUND_DISPATCH, FOUND_REFERENCE)}
        strict = by_how[FOUND_DIRECT]
        graph = sum(by_how.values())
        out[group] = {"pairs": n, "found": by_how, "recall_strict": strict / n if n else None,
                      "ci_strict": list(wilson(strict, n)), "recall": graph / n if n else None,
                      "ci": list(wilson(graph, n))}
    out["patterns"] = [{"pattern": p, "count": c, "example": examples[p]} for p, c in top_counts(patterns)]
    out["misses"] = misses
    out["flow_precision"] = flow_precision(ws, executed)
    return out


def flow_precision(ws: Workspace, pairs: set[tuple[str, str]]) -> dict[str, Any]:
    """The trace as the oracle of `ast-flow` edges (may-calls through values, which pyright cannot
    judge): of the flow edges whose caller ran, the share whose callee it was seen calling. A lower
    bound: a registered callback the tests never dispatched counts against it."""
    ran = {caller for caller, _ in pairs}
    flow = [e for es in ws.index.graph.extra_edges.values() for e in es if e.resolver == RESOLVER_FLOW]
    judged = [e for e in flow if e.src in ran]
    seen = sum(1 for e in judged if (e.src, e.dst) in pairs)
    unseen: Counter[str] = Counter(e.src for e in judged if (e.src, e.dst) not in pairs)
    return {"edges": len(flow), "caller_ran": len(judged), "confirmed": seen,
            "precision": seen / len(judged) if judged else None, "ci": list(wilson(seen, len(judged))),
            "unseen_by_caller": top_counts(unseen)}


def top_counts(counter: Counter[str], k: int = 10) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda t: (-t[1], t[0]))[:k]
