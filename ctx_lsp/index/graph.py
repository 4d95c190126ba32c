"""The code graph: nodes and typed edges, in plain dicts. Everything else asks it questions.

Source of truth is per file: the nodes a file defines and the edges whose site is in that file.
The adjacency (src -> dst -> kind -> Edge, and the reverse sharing the same inner dicts: a multigraph
keyed by edge kind) is kept in step with those lists; an edge whose target node does not exist (yet)
is kept in the per-file list but not in the adjacency.

Why not networkx: it was only ever a container here (no algorithm ran on it), and its attribute
dicts per node and per edge, its API layers and its import cost 0.17 s of a 1.4 s Django warm start.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ctx_lsp.index.model import Edge, EdgeKind, Node, python_qualname


class CodeGraph:
    def __init__(self) -> None:
        self._node: dict[str, Node] = {}
        # src -> dst -> kind -> edge, and dst -> src -> the same inner dict: iteration follows insertion
        self._succ: dict[str, dict[str, dict[str, Edge]]] = {}
        self._pred: dict[str, dict[str, dict[str, Edge]]] = {}
        self.file_nodes: dict[str, list[str]] = {}  # path -> node ids it defines (file node first)
        self.file_edges: dict[str, list[Edge]] = {}  # site path -> edges sited there
        self.extra_edges: dict[str, list[Edge]] = {}  # other producers (history, coverage), by producer key
        self.by_name: dict[str, set[str]] = {}  # lower-cased short name -> node ids
        self.revision = 0
        # Incremental relinking (a full pass over every stored edge costs ~100 ms on Django per update):
        # stores holding an edge that waits for a missing node, by that node's id; stores to rescan at
        # the next relink(); and, for producer stores, which of them hold an edge key (so a removed
        # graph edge another store also holds is put back).
        self._waiting: dict[str, set[tuple[int, str]]] = {}
        self._recheck: set[tuple[int, str]] = set()
        self._extra_owners: dict[tuple[str, str, str], set[str]] = {}

    # -- writes ----------------------------------------------------------------------------
    def set_file(self, path: str, nodes: list[Node]) -> None:
        """Replace the nodes of one file, updating attributes in place for ids that persist."""
        old = set(self.file_nodes.get(path, ()))
        new_ids = [n.id for n in nodes]
        for node_id in old - set(new_ids):
            self._drop_node(node_id)
        node = self._node
        for n in nodes:
            nid = n[0]
            if nid in node:
                # the same id is the same path and qualname, so the same name, indexed already (after
                # a checkout most nodes of a changed file persist: two thirds of this loop's time)
                node[nid] = n
                continue
            node[nid] = n
            self._succ[nid] = {}
            self._pred[nid] = {}
            # edges stored anywhere that waited for this node: linked by the next relink()
            self._recheck.update(self._waiting.pop(nid, ()))
            self.by_name.setdefault(n.name.lower(), set()).add(nid)
        self.file_nodes[path] = new_ids
        self.revision += 1

    def bulk_load(self, nodes_by_file: dict[str, list[Node]], edges_by_file: dict[str, list[Edge]]) -> None:
        """Fill an empty graph in one go (warm start): the same result as set_file for every file, then
        set_edges for every file, without the per-call bookkeeping."""
        if self.file_nodes or self.file_edges or self._node:
            for path in sorted(nodes_by_file):
                self.set_file(path, nodes_by_file[path])
            for path in sorted(edges_by_file):
                self.set_edges(path, edges_by_file[path])
            self.relink()
            return
        by_name = self.by_name
        node, succ, pred, waiting = self._node, self._succ, self._pred, self._waiting
        # tuple indexing, not attribute access: these loops run ~230k times on a Django warm start
        for path in sorted(nodes_by_file):
            nodes = nodes_by_file[path]
            ids = []
            for n in nodes:
                nid = n[0]
                if nid not in node:
                    succ[nid] = {}
                    pred[nid] = {}
                node[nid] = n
                ids.append(nid)
                qual = n[3]  # Node.name, inlined (a redefinition `f#2` is named `f`, as set_file names it)
                name = (n[2].rsplit("/", 1)[-1] if qual is None else python_qualname(qual).rsplit(".", 1)[-1]).lower()
                held = by_name.get(name)
                if held is None:
                    by_name[name] = {nid}
                else:
                    held.add(nid)
            self.file_nodes[path] = ids
        file_edges = self.file_edges
        for path in sorted(edges_by_file):
            edges = file_edges[path] = list(edges_by_file[path])
            for e in edges:
                src, dst, kind = e[0], e[1], e[2]
                out = succ.get(src)
                if out is None or dst not in node:
                    waiting.setdefault(dst if out is not None else src, set()).add((0, path))
                    continue
                keydict = out.get(dst)
                if keydict is None:
                    keydict = out[dst] = {}
                    pred[dst][src] = keydict
                keydict[kind] = e
        self.revision += 1

    # -- the adjacency -------------------------------------------------------------------------
    def _add_edge(self, e: Edge) -> None:
        """Link an edge whose endpoints exist; an edge of the same (src, dst, kind) is replaced."""
        out = self._succ[e.src]
        keydict = out.get(e.dst)
        if keydict is None:
            keydict = out[e.dst] = {}
            self._pred[e.dst][e.src] = keydict
        keydict[e.kind] = e

    def _linked(self, src: str, dst: str, kind: str) -> Edge | None:
        keydict = self._succ.get(src, {}).get(dst)
        return keydict.get(kind) if keydict is not None else None

    def _remove_edge(self, src: str, dst: str, kind: str) -> None:
        out = self._succ[src]
        keydict = out[dst]
        del keydict[kind]
        if not keydict:
            del out[dst]
            del self._pred[dst][src]

    def _unindex(self, n: Node) -> None:
        ids = self.by_name.get(n.name.lower())
        if ids is not None:
            ids.discard(n.id)
            if not ids:
                del self.by_name[n.name.lower()]

    def _drop_node(self, node_id: str) -> None:
        n = self._node.pop(node_id, None)
        if n is None:
            return
        self._unindex(n)
        # the stores of the edges that go with the node wait for it to come back
        waiting = self._waiting.setdefault(node_id, set())
        succ, pred = self._succ.pop(node_id), self._pred.pop(node_id)
        for src, keydict in pred.items():
            for e in keydict.values():
                waiting.update(self._owners(e))
            if src != node_id:
                del self._succ[src][node_id]
        for dst, keydict in succ.items():
            for e in keydict.values():
                waiting.update(self._owners(e))
            if dst != node_id:
                del self._pred[dst][node_id]

    def _owners(self, e: Edge) -> list[tuple[int, str]]:
        """Stores that may hold `e`: the binder's store of its site file, and producer stores with its key."""
        out = [(0, e.path)] if e.path in self.file_edges else []
        out.extend((1, k) for k in self._extra_owners.get(e.key(), ()))
        return out

    def remove_file(self, path: str) -> None:
        for node_id in self.file_nodes.pop(path, []):
            self._drop_node(node_id)
        self.set_edges(path, [])
        self.file_edges.pop(path, None)
        self.revision += 1

    def set_edges(self, path: str, edges: list[Edge], store: dict[str, list[Edge]] | None = None) -> None:
        """Replace the edges sited in `path` (or owned by a producer key in `store`)."""
        store = self.file_edges if store is None else store
        tag = 0 if store is self.file_edges else 1
        held = store.get(path)
        if held is not None and held == edges and self._all_linked(edges):
            # the same edges, each linked as its own (not another store's edge of its key): dropping
            # and adding them back would leave the graph as it is (after a checkout: the dependents
            # re-bound to the same edges, the test files whose static COVERS did not move)
            return
        # a key the store holds again is overwritten in place by the loop below (as dropping then adding
        # it would leave it): after a checkout most of a re-bound file's edges only moved lines
        again = {e[:3] for e in edges} if held else ()
        for e in held or ():
            key = e[:3]
            if key in again:
                continue
            if tag:
                owners = self._extra_owners.get(key)
                if owners is not None:
                    owners.discard(path)
                    if not owners:
                        del self._extra_owners[key]
            if self._linked(e.src, e.dst, e.kind) == e:
                self._remove_edge(e.src, e.dst, e.kind)
                # another store may hold the same key: let it put its edge back
                self._recheck.update(o for o in self._owners(e) if o != (tag, path))
        store[path] = list(edges)
        node = self._node
        for e in edges:
            if tag:
                self._extra_owners.setdefault(e.key(), set()).add(path)
            if e.src in node and e.dst in node:
                self._add_edge(e)
            else:
                self._waiting.setdefault(e.src if e.src not in node else e.dst, set()).add((tag, path))
        self.revision += 1

    def _all_linked(self, edges: list[Edge]) -> bool:
        """Whether each edge whose endpoints exist is the edge the graph links for its key."""
        node, succ = self._node, self._succ
        for e in edges:
            src, dst = e[0], e[1]
            if src in node and dst in node:
                keydict = succ[src].get(dst)
                if keydict is None or keydict.get(e[2]) != e:
                    return False
        return True

    def relink(self, full: bool = False) -> None:
        """Add every stored edge whose endpoints now exist (after nodes were added).

        Only the stores that had an edge waiting for a node added since, or that lost a shared edge,
        are rescanned; `full=True` walks every stored edge.
        """
        if full:
            todo = {(0, k) for k in self.file_edges} | {(1, k) for k in self.extra_edges}
        else:
            todo = self._recheck
        self._recheck = set()
        node = self._node
        for tag, key in todo:
            for e in (self.extra_edges if tag else self.file_edges).get(key, ()):
                if e.src in node and e.dst in node:
                    if self._linked(e.src, e.dst, e.kind) is None:
                        self._add_edge(e)
                else:
                    self._waiting.setdefault(e.src if e.src not in node else e.dst, set()).add((tag, key))

    # -- reads -----------------------------------------------------------------------------
    def node(self, node_id: str) -> Node | None:
        return self._node.get(node_id)

    def __contains__(self, node_id: str) -> bool:
        return node_id in self._node

    def number_of_nodes(self) -> int:
        return len(self._node)

    def nodes(self) -> Iterator[Node]:
        yield from self._node.values()

    def edges(self) -> Iterator[Edge]:
        for out in self._succ.values():
            for keydict in out.values():
                yield from keydict.values()

    def has_edge(self, src: str, dst: str, kind: str | None = None) -> bool:
        keydict = self._succ.get(src, {}).get(dst)
        if not keydict:
            return False
        return kind is None or kind in keydict

    def edges_between(self, src: str, dst: str) -> list[Edge]:
        return list(self._succ.get(src, {}).get(dst, {}).values())

    def out_edges(self, node_id: str, kinds: Iterable[str] | None = None) -> list[Edge]:
        out = self._succ.get(node_id)
        if not out:
            return []
        wanted = set(kinds) if kinds is not None else None
        return [e for keydict in out.values() for k, e in keydict.items() if wanted is None or k in wanted]

    def in_edges(self, node_id: str, kinds: Iterable[str] | None = None) -> list[Edge]:
        into = self._pred.get(node_id)
        if not into:
            return []
        wanted = set(kinds) if kinds is not None else None
        return [e for keydict in into.values() for k, e in keydict.items() if wanted is None or k in wanted]

    def symbols_named(self, name: str) -> list[Node]:
        return [self._node[i] for i in sorted(self.by_name.get(name.lower(), ()))]

    def nodes_of_file(self, path: str) -> list[Node]:
        node = self._node
        return [node[i] for i in self.file_nodes.get(path, []) if i in node]

    def paths(self) -> list[str]:
        return sorted(self.file_nodes)

    def innermost(self, path: str, line: int) -> Node | None:
        """The smallest symbol whose span holds `line` (1-based), or the file node."""
        best: Node | None = None
        for n in self.nodes_of_file(path):
            if n.qualname is None:
                if best is None:
                    best = n
                continue
            if n.start_line <= line <= n.end_line:
                if best is None or best.qualname is None or (n.end_line - n.start_line) <= (best.end_line - best.start_line):
                    best = n
        return best

    def edge_counts(self) -> dict[str, int]:
        counts = {k.value: 0 for k in EdgeKind}
        for e in self.edges():
            counts[e.kind] = counts.get(e.kind, 0) + 1
        return counts

    def snapshot(self) -> tuple[frozenset[Node], frozenset[Edge]]:
        """A comparable view of the whole graph (used to check incremental == from scratch)."""
        return frozenset(self.nodes()), frozenset(self.edges())
