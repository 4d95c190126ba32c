"""Standard LSP features answered from the graph: call hierarchy (CALLS, INSTANTIATES), type hierarchy
(INHERITS), code lens ("N callers · M tests") and workspace symbols.

Builders take a `Ctx` (engine with its lock held, positions over one buffer snapshot) and return
lsprotocol objects; the handlers at the bottom only locate the folder and run them.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from lsprotocol import types

from ctx_lsp.index.facts import Def
from ctx_lsp.index.model import EdgeKind, Node
from ctx_lsp.server.server import Ctx, CtxLanguageServer, guarded

CALL_KINDS = (EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value)
INHERITS = (EdgeKind.INHERITS.value,)
SYMBOL_KINDS = {
    "file": types.SymbolKind.File, "class": types.SymbolKind.Class, "function": types.SymbolKind.Function,
    "method": types.SymbolKind.Method, "test": types.SymbolKind.Function, "variable": types.SymbolKind.Variable,
}
WORKSPACE_SYMBOL_LIMIT = 200


# -- shared pieces ---------------------------------------------------------------------------------
def definition(ctx: Ctx, node: Node) -> Def | None:
    facts = ctx.engine.index.facts.get(node.path)
    if facts is None or node.qualname is None:
        return None
    for d in facts.defs:
        if d.qual == node.qualname:
            return d
    return None


def name_range(ctx: Ctx, node: Node) -> types.Range:
    """The range of the defined name (the `selectionRange`); the first line for a file."""
    d = definition(ctx, node)
    path = ctx.abspath(node.path)
    if d is not None:
        return ctx.pos.span(path, d.line, d.col, len(node.name))
    return ctx.pos.lines_range(path, node.start_line, node.start_line)


def node_range(ctx: Ctx, node: Node) -> types.Range:
    return ctx.pos.lines_range(ctx.abspath(node.path), node.start_line, max(node.end_line, node.start_line))


def detail(node: Node) -> str:
    return f"{node.qualname} · {node.path}" if node.qualname else node.path


def item_data(ctx: Ctx, node: Node) -> dict[str, Any]:
    return {"root": str(ctx.root.path), "id": node.id}


def symbol_under(ctx: Ctx, rel: str, position: types.Position) -> Node | None:
    line, col = ctx.pos.to_core(ctx.abspath(rel), position)
    node = ctx.engine.symbol_at(rel, line, col)
    if node is None or node.qualname is None or node.kind == "commit":
        return None
    return node


def site_range(ctx: Ctx, path: str, line: int, col: int, name: str) -> types.Range:
    return ctx.pos.name_span(ctx.abspath(path), line, col, name)


def short_name(node_id: str) -> str:
    return node_id.rsplit("::", 1)[-1].rsplit(".", 1)[-1]


# -- call hierarchy --------------------------------------------------------------------------------
def call_item(ctx: Ctx, node: Node) -> types.CallHierarchyItem:
    return types.CallHierarchyItem(
        name=node.name, kind=SYMBOL_KINDS.get(node.kind, types.SymbolKind.Function), uri=ctx.uri(node.path),
        range=node_range(ctx, node), selection_range=name_range(ctx, node), detail=detail(node),
        data=item_data(ctx, node))


def prepare_call(ctx: Ctx, rel: str, position: types.Position) -> list[types.CallHierarchyItem] | None:
    node = symbol_under(ctx, rel, position)
    return [call_item(ctx, node)] if node is not None else None


def incoming_calls(ctx: Ctx, node_id: str) -> list[types.CallHierarchyIncomingCall]:
    g = ctx.engine.graph
    by_src: dict[str, list[types.Range]] = defaultdict(list)
    name = short_name(node_id)
    for e in ctx.engine.call_sites(node_id, "in"):  # every call, not only each caller's first
        by_src[e.src].append(site_range(ctx, e.path, e.line, e.col, name))
    out = []
    for src, ranges in by_src.items():
        n = g.node(src)
        if n is not None:
            out.append(types.CallHierarchyIncomingCall(from_=call_item(ctx, n), from_ranges=ranges))
    return out


def outgoing_calls(ctx: Ctx, node_id: str) -> list[types.CallHierarchyOutgoingCall]:
    g = ctx.engine.graph
    by_dst: dict[str, list[types.Range]] = defaultdict(list)
    for e in ctx.engine.call_sites(node_id, "out"):
        by_dst[e.dst].append(site_range(ctx, e.path, e.line, e.col, short_name(e.dst)))
    out = []
    for dst, ranges in by_dst.items():
        n = g.node(dst)
        if n is not None:
            out.append(types.CallHierarchyOutgoingCall(to=call_item(ctx, n), from_ranges=ranges))
    return out


# -- type hierarchy --------------------------------------------------------------------------------
def type_item(ctx: Ctx, node: Node) -> types.TypeHierarchyItem:
    return types.TypeHierarchyItem(
        name=node.name, kind=types.SymbolKind.Class, uri=ctx.uri(node.path), range=node_range(ctx, node),
        selection_range=name_range(ctx, node), detail=detail(node), data=item_data(ctx, node))


def prepare_type(ctx: Ctx, rel: str, position: types.Position) -> list[types.TypeHierarchyItem] | None:
    node = symbol_under(ctx, rel, position)
    while node is not None and node.kind != "class":
        # on a method: its class; elsewhere: nothing
        parent = node.qualname.rsplit(".", 1)[0] if node.qualname and "." in node.qualname else None
        node = ctx.engine.graph.node(f"{node.path}::{parent}") if parent else None
    return [type_item(ctx, node)] if node is not None else None


def supertypes(ctx: Ctx, node_id: str) -> list[types.TypeHierarchyItem]:
    g = ctx.engine.graph
    nodes = [g.node(e.dst) for e in g.out_edges(node_id, INHERITS)]
    return [type_item(ctx, n) for n in sorted((n for n in nodes if n), key=lambda n: n.id)]


def subtypes(ctx: Ctx, node_id: str) -> list[types.TypeHierarchyItem]:
    g = ctx.engine.graph
    nodes = [g.node(e.src) for e in g.in_edges(node_id, INHERITS)]
    return [type_item(ctx, n) for n in sorted((n for n in nodes if n), key=lambda n: n.id)]


# -- code lens ---------------------------------------------------------------------------------------
def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def code_lenses(ctx: Ctx, rel: str) -> list[types.CodeLens]:
    g = ctx.engine.graph
    out: list[types.CodeLens] = []
    for node in g.nodes_of_file(rel):
        if node.kind not in ("function", "method", "class", "test"):
            continue
        callers = {e.src for e in g.in_edges(node.id, CALL_KINDS)}
        # the tests ctx.related, ctx.symbolRelations and the MCP tool list: covering it, then reaching it
        # through calls (a file's lenses: 60 ms at most on Django's)
        tests = ctx.engine.tests_for(node.id)
        rng = name_range(ctx, node)
        title = f"{plural(len(callers), 'caller')} · {plural(len(tests), 'test')}"
        args = [{"uri": ctx.uri(rel), "position": {"line": rng.start.line, "character": rng.start.character}}]
        out.append(types.CodeLens(range=rng, command=types.Command(title=title, command="ctx.contextAtCursor",
                                                                   arguments=args)))
    return out


# -- workspace symbols -------------------------------------------------------------------------------
def fuzzy_rank(name: str, query: str) -> int | None:
    """0 exact, 1 prefix, 2 substring, 3 in-order subsequence; None = no match (case-insensitive)."""
    n, q = name.lower(), query.lower()
    if not q or n == q:
        return 0 if n == q else 2
    if n.startswith(q):
        return 1
    if q in n:
        return 2
    it = iter(n)
    return 3 if all(ch in it for ch in q) else None


def workspace_symbols(ctx: Ctx, query: str) -> list[tuple[tuple[Any, ...], types.SymbolInformation]]:
    g = ctx.engine.graph
    ranked: list[tuple[tuple[Any, ...], Node]] = []
    kind_rank = {"class": 0, "function": 1, "method": 2, "test": 3, "variable": 4}
    # `Client.send`, `sessions.Session.send`: the last part matches names, the rest their containers
    # (enclosing classes, then the module's dotted path)
    outer, _, name = query.strip().rpartition(".")
    if not name or not outer.strip("."):
        outer, name = "", query
    for key in list(g.by_name):
        rank = fuzzy_rank(key, name)
        if rank is None:
            continue
        for node in g.symbols_named(key):
            if node.qualname is None or node.kind not in kind_rank:
                continue
            inner = 0
            if outer:
                where = (node.path.removesuffix(".py").replace("/", ".") + "." + node.qualname.rpartition(".")[0]).rstrip(".")
                found = fuzzy_rank(where, outer)
                if found is None:
                    continue
                inner = 0 if ("." + where.lower()).endswith("." + outer.lower()) else found
            ranked.append(((rank, inner, kind_rank[node.kind], len(node.name), node.path, node.qualname), node))
    ranked.sort(key=lambda h: h[0])
    # only what is answered gets a location: a short query ("get") matches thousands of symbols, and
    # each name's range is read from its file's text
    hits: list[tuple[tuple[Any, ...], types.SymbolInformation]] = []
    for rank_key, node in ranked[:WORKSPACE_SYMBOL_LIMIT]:
        assert node.qualname is not None
        container = node.qualname.rsplit(".", 1)[0] if "." in node.qualname else node.path
        hits.append((rank_key, types.SymbolInformation(
            name=node.name, kind=SYMBOL_KINDS[node.kind],
            location=types.Location(uri=ctx.uri(node.path), range=name_range(ctx, node)),
            container_name=container)))
    return hits


# -- handlers ----------------------------------------------------------------------------------------
def _node_of_item(ls: CtxLanguageServer, item: types.CallHierarchyItem | types.TypeHierarchyItem):  # type: ignore[no-untyped-def]
    """(root, node id) of a hierarchy item: from its `data`, else from its URI and selection range."""
    root = ls.root_of_data(item.data)
    if root is not None and isinstance(item.data, dict) and isinstance(item.data.get("id"), str):
        return root, item.data["id"], None
    root, rel = ls.locate(item.uri, "item.uri")
    return root, None, (rel, item.selection_range.start)


def register(server: CtxLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_PREPARE_CALL_HIERARCHY)
    @guarded(types.TEXT_DOCUMENT_PREPARE_CALL_HIERARCHY)
    async def prepare_call_hierarchy(ls: CtxLanguageServer, params: types.CallHierarchyPrepareParams):  # type: ignore[no-untyped-def]
        root, rel = ls.locate(params.text_document.uri, "textDocument.uri")
        return await ls.query(root, lambda ctx: prepare_call(ctx, rel, params.position))

    async def _resolve(ls: CtxLanguageServer, item: Any, fn: Any) -> Any:
        root, node_id, where = _node_of_item(ls, item)

        def run(ctx: Ctx) -> Any:
            nid = node_id
            if nid is None:
                node = symbol_under(ctx, where[0], where[1])
                if node is None:
                    return []
                nid = node.id
            return fn(ctx, nid)

        return await ls.query(root, run)

    @server.feature(types.CALL_HIERARCHY_INCOMING_CALLS)
    @guarded(types.CALL_HIERARCHY_INCOMING_CALLS)
    async def incoming(ls: CtxLanguageServer, params: types.CallHierarchyIncomingCallsParams):  # type: ignore[no-untyped-def]
        return await _resolve(ls, params.item, incoming_calls)

    @server.feature(types.CALL_HIERARCHY_OUTGOING_CALLS)
    @guarded(types.CALL_HIERARCHY_OUTGOING_CALLS)
    async def outgoing(ls: CtxLanguageServer, params: types.CallHierarchyOutgoingCallsParams):  # type: ignore[no-untyped-def]
        return await _resolve(ls, params.item, outgoing_calls)

    @server.feature(types.TEXT_DOCUMENT_PREPARE_TYPE_HIERARCHY)
    @guarded(types.TEXT_DOCUMENT_PREPARE_TYPE_HIERARCHY)
    async def prepare_type_hierarchy(ls: CtxLanguageServer, params: types.TypeHierarchyPrepareParams):  # type: ignore[no-untyped-def]
        root, rel = ls.locate(params.text_document.uri, "textDocument.uri")
        return await ls.query(root, lambda ctx: prepare_type(ctx, rel, params.position))

    @server.feature(types.TYPE_HIERARCHY_SUPERTYPES)
    @guarded(types.TYPE_HIERARCHY_SUPERTYPES)
    async def type_supertypes(ls: CtxLanguageServer, params: types.TypeHierarchySupertypesParams):  # type: ignore[no-untyped-def]
        return await _resolve(ls, params.item, supertypes)

    @server.feature(types.TYPE_HIERARCHY_SUBTYPES)
    @guarded(types.TYPE_HIERARCHY_SUBTYPES)
    async def type_subtypes(ls: CtxLanguageServer, params: types.TypeHierarchySubtypesParams):  # type: ignore[no-untyped-def]
        return await _resolve(ls, params.item, subtypes)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    @guarded(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(ls: CtxLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        got = ls.find(params.text_document.uri)
        if got is None or not ls.options.code_lens:
            return []  # lenses are asked for every open file: no error for files outside the folders
        root, rel = got
        return await ls.query(root, lambda ctx: code_lenses(ctx, rel))

    @server.feature(types.WORKSPACE_SYMBOL)
    @guarded(types.WORKSPACE_SYMBOL)
    async def workspace_symbol(ls: CtxLanguageServer, params: types.WorkspaceSymbolParams) -> list[types.SymbolInformation]:
        hits: list[tuple[tuple[Any, ...], types.SymbolInformation]] = []
        for root in list(ls.roots):
            hits.extend(await ls.query(root, lambda ctx: workspace_symbols(ctx, params.query)))
        hits.sort(key=lambda h: h[0])
        return [info for _, info in hits[:WORKSPACE_SYMBOL_LIMIT]]
