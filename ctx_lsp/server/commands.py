"""The ctx.* commands (workspace/executeCommand) and the cancellable ctx/* requests: thin adapters
over the engine. Shapes: docs/protocol.md.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from lsprotocol import types

from ctx_lsp.engine import RELATIONS, TargetNotFound
from ctx_lsp.server import params as P
from ctx_lsp.server.navigation import node_range, short_name, site_range, symbol_under
from ctx_lsp.server.server import Ctx, CtxLanguageServer, guarded, make_checkpoint

SITE_RELATIONS = ("callers", "references", "importers")  # located at the edge's site, others at the definition


def empty_pack(query: str, budget: int, reason: str, stale: bool = False) -> dict[str, Any]:
    return {"query": query, "plan": None, "budget": budget, "tokens": 0, "stale": stale, "dirty_files": [],
            "files": [], "symbols": [], "items": [], "timings_ms": {}, "reason": reason}


def _finish_pack(ctx: Ctx, pack: dict[str, Any]) -> dict[str, Any]:
    for item in pack.get("items", []) + pack.get("symbols", []):
        if isinstance(item, dict) and item.get("path") and "uri" not in item:
            item["uri"] = ctx.uri(item["path"])
    pack["stale"] = bool(pack.get("stale")) or ctx.root.state != "ready"
    return pack


# -- the engine calls ------------------------------------------------------------------------------
def get_context(ctx: Ctx, query: str, budget: int, rel: str | None, position: Any) -> dict[str, Any]:
    line = None
    if rel is not None and position is not None:
        line = ctx.pos.to_core(ctx.abspath(rel), position)[0]
    if rel is not None and rel not in ctx.engine.graph:
        rel, line = None, None  # a file not in the index cannot anchor the query; still answer it
    note = None
    if rel is not None and line is not None and line > (lines := ctx.engine.index.facts[rel].lines):
        # a cursor below the last line anchors the question to the file alone: it is still answered.
        # The line after the final newline is where an editor's cursor rests at the end (Ctrl+End);
        # past that (a stale position) the pack says so
        if line > lines + 1:
            note = f"line {line} is past the end of {rel} ({lines} lines): the question is anchored to the file only"
        line = None
    pack = ctx.engine.context(query, budget, path=rel, line=line, checkpoint=ctx.checkpoint)
    if note is not None:
        pack["notes"] = [*pack.get("notes", []), note]
    return _finish_pack(ctx, pack)


def context_at_cursor(ctx: Ctx, rel: str, position: Any, budget: int) -> dict[str, Any]:
    if rel not in ctx.engine.graph:
        return empty_pack("", budget, f"file not in the index: {rel}", ctx.root.state != "ready")
    line, col = ctx.pos.to_core(ctx.abspath(rel), position)
    lines = ctx.engine.index.facts[rel].lines
    if line > lines + 1:  # an editor's cursor may sit on the empty line after the last newline, never below
        return empty_pack("", budget, f"line {line} is past the end of {rel} ({lines} lines)", ctx.root.state != "ready")
    pack = ctx.engine.context_at(rel, line, col, budget, checkpoint=ctx.checkpoint)
    return _finish_pack(ctx, pack)


def architectural(ctx: Ctx, uri: str, rel: str) -> dict[str, Any]:
    if rel not in ctx.engine.graph:
        return {"uri": uri, "path": rel, "groups": [], "reason": f"file not in the index: {rel}"}
    out = ctx.engine.architectural(rel)
    for group in out["groups"]:
        for n in group["neighbors"]:
            n["uri"] = ctx.uri(n["path"]) if n.get("kind") != "commit" else None
            site = n.get("site")
            if isinstance(site, dict) and site.get("path"):
                site["uri"] = ctx.uri(site["path"])
    return {"uri": uri, **out}


def related(ctx: Ctx, rel: str, position: Any, relation: str) -> dict[str, Any]:
    node = symbol_under(ctx, rel, position)
    if node is None:
        line, col = ctx.pos.to_core(ctx.abspath(rel), position)
        return {"symbol": None, "relation": relation, "locations": [],
                "reason": f"no symbol at {rel}:{line}:{col}" if rel in ctx.engine.graph else f"file not in the index: {rel}"}
    try:
        if relation == "tests":  # as ctx.symbolRelations and the MCP tool: covering, then reaching it
            found = [{"node": t["node"], "edge": None, "reason": t["reason"]} for t in ctx.engine.tests_for(node.id)]
        else:
            found = ctx.engine.related(node.id, relation, every_site=True)  # callers: every call site
    except TargetNotFound as exc:
        return {"symbol": node.id, "relation": relation, "locations": [], "reason": str(exc)}
    locations = []
    rng: types.Range | None
    for r in found:
        n, e = r["node"], r["edge"]
        real_file = n.kind != "commit" and n.path in ctx.engine.index.facts
        if relation in SITE_RELATIONS:
            rng = site_range(ctx, e.path, e.line, e.col, short_name(e.dst))
            path = e.path
        else:
            rng = node_range(ctx, n) if real_file else None
            path = n.path
        loc: dict[str, Any] = {"uri": ctx.uri(path) if real_file or relation in SITE_RELATIONS else None,
                               "path": path, "range": rng, "symbol": n.qualname, "kind": n.kind,
                               "reason": r["reason"]}
        if n.kind == "commit":
            loc["commit"] = {"id": n.id, "signature": n.signature, "doc": n.doc}
        locations.append(loc)
    return {"symbol": node.id, "relation": relation, "locations": locations,
            "reason": None if locations else f"no {relation} of {node.qualname} in the graph"}


# -- handlers ------------------------------------------------------------------------------------
async def _cancellable(ls: CtxLanguageServer, root: Any, fn: Any, method: str) -> Any:
    """Run engine work whose checkpoints raise once the awaiting request is cancelled."""
    cancelled = threading.Event()
    try:
        return await ls.query(root, fn, checkpoint=make_checkpoint(ls, cancelled, method))
    except asyncio.CancelledError:
        cancelled.set()  # the worker thread stops at its next checkpoint
        raise


async def _get_context(ls: CtxLanguageServer, obj: dict[str, Any], method: str) -> dict[str, Any]:
    query = P.string(obj, "query")
    budget = P.positive_int(obj, "budget", ls.options.budget, P.MAX_BUDGET)
    uri = P.string(obj, "uri", required=False)
    position = P.position(obj, required=False)
    if position is not None and uri is None:
        raise P.invalid("field 'position' needs 'uri'")
    if uri is not None:
        root, rel = ls.locate(uri)
    elif ls.roots:
        root, rel = ls.roots[0], None  # multi-root without a uri: the first folder
    else:
        return empty_pack(query or "", budget, "no workspace folder is open")
    return await _cancellable(ls, root, lambda ctx: get_context(ctx, query or "", budget, rel, position),
                              method)


async def _context_at_cursor(ls: CtxLanguageServer, obj: dict[str, Any], method: str) -> dict[str, Any]:
    uri = P.string(obj, "uri")
    position = P.position(obj)
    budget = P.positive_int(obj, "budget", ls.options.budget, P.MAX_BUDGET)
    root, rel = ls.locate(uri or "")
    return await _cancellable(ls, root, lambda ctx: context_at_cursor(ctx, rel, position, budget),
                              method)


def register(server: CtxLanguageServer) -> None:
    @server.command("ctx.getContext")
    @guarded("ctx.getContext")
    async def cmd_get_context(ls: CtxLanguageServer, *args: Any) -> dict[str, Any]:
        return await _get_context(ls, P.params_object("ctx.getContext", args), "ctx.getContext")

    @server.command("ctx.contextAtCursor")
    @guarded("ctx.contextAtCursor")
    async def cmd_context_at_cursor(ls: CtxLanguageServer, *args: Any) -> dict[str, Any]:
        return await _context_at_cursor(ls, P.params_object("ctx.contextAtCursor", args), "ctx.contextAtCursor")

    @server.command("ctx.architecturalContext")
    @guarded("ctx.architecturalContext")
    async def cmd_architectural(ls: CtxLanguageServer, *args: Any) -> dict[str, Any]:
        obj = P.params_object("ctx.architecturalContext", args)
        uri = P.string(obj, "uri") or ""
        root, rel = ls.locate(uri)
        return await ls.query(root, lambda ctx: architectural(ctx, uri, rel))

    @server.command("ctx.related")
    @guarded("ctx.related")
    async def cmd_related(ls: CtxLanguageServer, *args: Any) -> dict[str, Any]:
        obj = P.params_object("ctx.related", args)
        uri = P.string(obj, "uri") or ""
        position = P.position(obj)
        relation = P.choice(obj, "relation", RELATIONS)
        root, rel = ls.locate(uri)
        result = await ls.query(root, lambda ctx: related(ctx, rel, position, relation))
        for loc in result["locations"]:  # lsprotocol Range -> JSON
            if loc["range"] is not None:
                loc["range"] = ls.protocol._converter.unstructure(loc["range"])
        return result

    @server.command("ctx.indexStatus")
    @guarded("ctx.indexStatus")
    async def cmd_index_status(ls: CtxLanguageServer, *args: Any) -> dict[str, Any]:
        P.params_object("ctx.indexStatus", args)
        return await ls.index_status()

    @server.command("ctx.reindex")
    @guarded("ctx.reindex")
    async def cmd_reindex(ls: CtxLanguageServer, *args: Any) -> dict[str, Any]:
        P.params_object("ctx.reindex", args)
        await ls.reindex()
        return await ls.index_status()

    @server.feature("ctx/getContext")
    @guarded("ctx/getContext")
    async def req_get_context(ls: CtxLanguageServer, params: Any) -> dict[str, Any]:
        return await _get_context(ls, P.params_object("ctx/getContext", params), "ctx/getContext")

    @server.feature("ctx/contextAtCursor")
    @guarded("ctx/contextAtCursor")
    async def req_context_at_cursor(ls: CtxLanguageServer, params: Any) -> dict[str, Any]:
        return await _context_at_cursor(ls, P.params_object("ctx/contextAtCursor", params), "ctx/contextAtCursor")
