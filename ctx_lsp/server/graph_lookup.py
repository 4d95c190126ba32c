"""Graph look-ups by name, for agents and pictures: `ctx.neighbourhood` (a file's or a symbol's typed
1-hop neighbourhood as nodes and edges) and `ctx.symbolRelations` (callers, callees, tests, ... of a
symbol named in text, not at a cursor). Thin adapters over the engine; shapes: docs/protocol.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ctx_lsp.engine import TargetNotFound
from ctx_lsp.index.model import Node
from ctx_lsp.server import params as P
from ctx_lsp.server.convert import rel_in, uri_to_path
from ctx_lsp.server.folders import Root
from ctx_lsp.server.navigation import symbol_under
from ctx_lsp.server.server import Ctx, CtxLanguageServer, guarded

# `history` needs git and is answered by ctx.related; the rest are what an agent asks before an edit
NAME_RELATIONS = ("callers", "callees", "tests", "references", "implementations", "importers")
SITE_RELATIONS = ("callers", "references", "importers")  # located at the edge's site
DEFAULT_LIMIT = 120  # neighbours drawn at most (a hub file can have thousands)
MAX_CANDIDATES = 5
COMMIT_LABEL = 60  # a commit node's label (short hash and subject) is cut here


def _node_json(ctx: Ctx, n: Node | dict[str, Any]) -> dict[str, Any]:
    if isinstance(n, Node):
        kind, path, symbol, line, nid = n.kind, n.path, n.qualname, n.start_line, n.id
        subject = n.signature if kind == "commit" else ""
    else:
        kind, path, symbol, line, nid = n["kind"], n["path"], n["symbol"], n["line"], n["id"]
        subject = ""
    if kind == "commit":  # its short hash (the qualname) and subject, as `git log --oneline` shows it
        short = symbol or nid.removeprefix("commit:")[:12]
        label = f"{short} {subject}".strip()
        return {"id": nid, "label": label[:COMMIT_LABEL] + ("…" if len(label) > COMMIT_LABEL else ""), "kind": kind,
                "path": None, "symbol": symbol, "line": None, "uri": None}
    label = symbol or path.rsplit("/", 1)[-1]
    return {"id": nid, "label": label, "kind": kind, "path": path, "symbol": symbol, "line": line,
            "uri": ctx.uri(path)}


def _looks_like_path(text: str) -> bool:
    t = text.strip()
    return "::" not in t and (t.endswith((".py", ".pyi")) or "/" in t or "\\" in t or t.startswith("file:"))


def _resolve(ctx: Ctx, target: str | None, rel: str | None, position: Any) -> tuple[str | None, list[str], str | None]:
    """(node id, other candidates, reason when nothing was found)."""
    eng = ctx.engine
    if target is not None and _looks_like_path(target):
        path = uri_to_path(target) if target.startswith("file:") else Path(os.path.normpath(ctx.root.path / target))
        rel = rel_in(ctx.root.path, path) if path is not None else None
        if rel is None:
            return None, [], f"{target} is outside the workspace folder {ctx.root.path}"
        target = None  # a file: answered below like a uri
    if target is not None:
        try:
            node_id = eng.resolve_target(target)
        except TargetNotFound as exc:  # an unknown name's message says which names are close
            return None, [], str(exc)
        found = eng.graph.node(node_id)
        is_file = found is None or found.qualname is None
        others = [] if "::" in target or is_file else \
            [c.id for c in eng.find_symbols(target) if c.id != node_id][:MAX_CANDIDATES]
        return node_id, others, None
    assert rel is not None
    if rel not in eng.graph:
        return None, [], f"file not in the index: {rel}"
    if position is None:
        return rel, [], None
    node = symbol_under(ctx, rel, position)
    if node is None:
        line, col = ctx.pos.to_core(ctx.abspath(rel), position)
        return None, [], f"no symbol at {rel}:{line}:{col}"
    return node.id, [], None


def neighbourhood(ctx: Ctx, target: str | None, rel: str | None, position: Any, limit: int) -> dict[str, Any]:
    node_id, others, reason = _resolve(ctx, target, rel, position)
    if node_id is None:
        return {"center": None, "candidates": [], "nodes": [], "edges": [], "truncated": 0, "reason": reason}
    g = ctx.engine.graph
    center = g.node(node_id)
    assert center is not None
    items = ctx.engine.neighbors(node_id)
    nodes: dict[str, dict[str, Any]] = {node_id: _node_json(ctx, center)}
    edges: dict[tuple[str, str, str], dict[str, Any]] = {}
    truncated: set[str] = set()
    for it in items:
        other = it["id"]
        if other not in nodes:
            if len(nodes) > limit:
                truncated.add(other)
                continue
            nodes[other] = _node_json(ctx, it)
        src, dst = (node_id, other) if it["direction"] == "out" else (other, node_id)
        key = (src, dst, it["edge"])
        site = it["site"]
        if key not in edges:
            edges[key] = {"source": src, "target": dst, "kind": it["edge"], "count": 0,
                          "site": {"path": site["path"], "line": site["line"], "uri": ctx.uri(site["path"])},
                          "via": it.get("from_symbol")}
        edges[key]["count"] += 1
    return {"center": nodes[node_id], "candidates": others, "nodes": list(nodes.values()),
            "edges": list(edges.values()), "truncated": len(truncated),
            "reason": None if edges else f"no edges in the graph for {center.qualname or center.path}"}


def symbol_relations(ctx: Ctx, symbol: str, relation: str) -> dict[str, Any]:
    node_id, others, reason = _resolve(ctx, symbol, None, None)
    if node_id is None:
        return {"symbol": None, "candidates": [], "relation": relation, "locations": [], "reason": reason}
    eng = ctx.engine
    node = eng.graph.node(node_id)
    assert node is not None
    if relation != "importers" and node.qualname is None:
        return {"symbol": node_id, "candidates": others, "relation": relation, "locations": [],
                "reason": f"{node_id} is a file; {relation} needs a symbol (use ctx.neighbourhood for a file)"}
    locations: list[dict[str, Any]] = []
    if relation == "tests":
        for t in eng.tests_for(node_id):
            n = t["node"]
            locations.append({**_location(ctx, n.path, n.start_line), "symbol": n.qualname, "kind": n.kind,
                              "reason": t["reason"]})
    else:
        for r in eng.related(node_id, relation, every_site=True):  # callers: every call site
            n, e = r["node"], r["edge"]
            path, line = (e.path, e.line) if relation in SITE_RELATIONS else (n.path, n.start_line)
            locations.append({**_location(ctx, path, line), "symbol": n.qualname, "kind": n.kind, "reason": r["reason"]})
    what = node.qualname or node.path
    return {"symbol": node_id, "candidates": others, "relation": relation, "locations": locations,
            "reason": None if locations else f"no {relation} of {what} in the graph"}


def _location(ctx: Ctx, path: str, line: int) -> dict[str, Any]:
    return {"path": path, "line": line, "uri": ctx.uri(path)}


def _root_for(ls: CtxLanguageServer, obj: dict[str, Any]) -> tuple[Root | None, str | None]:
    uri = P.string(obj, "uri", required=False)
    if uri is not None:
        return ls.locate(uri)
    return (ls.roots[0] if ls.roots else None), None


def register(server: CtxLanguageServer) -> None:
    @server.command("ctx.neighbourhood")
    @guarded("ctx.neighbourhood")
    async def cmd_neighbourhood(ls: CtxLanguageServer, *args: Any) -> dict[str, Any]:
        obj = P.params_object("ctx.neighbourhood", args)
        target = P.string(obj, "target", required=False)
        position = P.position(obj, required=False)
        limit = P.positive_int(obj, "limit", DEFAULT_LIMIT)
        if target is None and obj.get("uri") is None:
            raise P.invalid("ctx.neighbourhood needs 'target' (a file path or symbol name) or 'uri'")
        if position is not None and obj.get("uri") is None:
            raise P.invalid("field 'position' needs 'uri'")
        root, rel = _root_for(ls, obj)
        if root is None:
            return {"center": None, "candidates": [], "nodes": [], "edges": [], "truncated": 0,
                    "reason": "no workspace folder is open"}
        if target is not None:
            rel, position = None, None  # the uri only chose the folder
        return await ls.query(root, lambda ctx: neighbourhood(ctx, target, rel, position, limit))

    @server.command("ctx.symbolRelations")
    @guarded("ctx.symbolRelations")
    async def cmd_symbol_relations(ls: CtxLanguageServer, *args: Any) -> dict[str, Any]:
        obj = P.params_object("ctx.symbolRelations", args)
        symbol = P.string(obj, "symbol") or ""
        relation = P.choice(obj, "relation", NAME_RELATIONS)
        root, _ = _root_for(ls, obj)
        if root is None:
            return {"symbol": None, "candidates": [], "relation": relation, "locations": [],
                    "reason": "no workspace folder is open"}
        return await ls.query(root, lambda ctx: symbol_relations(ctx, symbol, relation))
