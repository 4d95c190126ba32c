"""Static binding: turns per-file facts into typed edges without jedi.

Binds what can be bound statically: imports (absolute, relative, re-exports, star), local and module
scopes, `self.method()` through the class and its bases, `ClassName(...)`, and attribute chains whose
types are known from annotations, `__init__` assignments, local assignments and return values.
A chain that leaves the workspace (stdlib, site-packages) resolves to EXTERNAL and never to a
same-named project symbol. What cannot be bound is counted as unresolved, for jedi to refine.

Every lookup is recorded in the binding's `deps`, at two grains: module names (found or not: the
module table can change) and, for every file whose tables were read, the top-level names read there
(`name_dep(path, top)`). The incremental updater re-binds a file only when a name it read changed,
and then evaluates again only the site groups (see `Group`) whose text or read names changed.

One class over three modules: `modules.ModuleScope` (the module table, modules and imports) <-
`evaluate.Evaluator` (scopes, calls, returns, MRO, members) <- `Binder` here (one file's edges and
its callback flow constraints).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any

from ctx_lsp.index.evaluate import Evaluator
from ctx_lsp.index.facts import CALL, Chain, Def, FileFacts, Import, Site, pack_records, unpack_records
from ctx_lsp.index.model import (
    RESOLVER_CONTAINS,
    RESOLVER_IMPORT,
    RESOLVER_MRO,
    RESOLVER_SCOPE,
    Edge,
    EdgeKind,
    symbol_id,
)
from ctx_lsp.index.modules import EXT, ModuleInfo, Value, dep_key, name_dep, top_classes

log = logging.getLogger(__name__)

# A site group's results: the sites of one interface key's scopes (a top-level function, or a member
# of a top-level class, with everything nested in it; see modules.dep_key), bound together. Kept per
# binding so an update re-evaluates only the groups whose text or dependencies changed:
# (dependency keys read, own file's included; internal calls; external calls; unresolved sites as
# offsets into the group's sites; the flow constraints its flows made, as indexes into `flows`)
Group = tuple[AbstractSet[str], int, int, tuple[int, ...], tuple[int, ...]]

# the edge kinds a site group's scopes make (from sites, imports there, and methods' OVERRIDES); the
# rest (CONTAINS, IMPORTS, INHERITS) come from defs and imports, bound every time
_CALLS, _INSTANTIATES, _REFERENCES = EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value, EdgeKind.REFERENCES.value
_KEPT_KINDS = frozenset({_CALLS, _INSTANTIATES, _REFERENCES, EdgeKind.OVERRIDES.value})


@dataclass(slots=True)
class FileBinding:
    path: str
    edges: list[Edge] = field(default_factory=list)
    deps: set[str] = field(default_factory=set)
    internal: int = 0  # call sites resolved to a workspace symbol
    external: int = 0  # call sites resolved outside the workspace
    unresolved: list[int] = field(default_factory=list)  # indexes into facts.sites (calls only)
    # callback flow constraints (flow.py): ("v", var, var) | ("f", function id, var) | ("c", caller, var, line, col)
    flows: list[tuple] = field(default_factory=list)
    groups: dict[str, Group] = field(default_factory=dict)  # group key -> its results (see Group)
    # `deps`, `flows` and `groups` packed (facts.pack_records) while nobody has read them, each unpacked
    # on its first read: a warm start loads every binding, an update reads every binding's deps, and
    # only the re-bound files' flows and groups (8, 5 and N MB of a Django cache)
    packed: list[bytes | None] | None = field(default=None, repr=False, compare=False)

    def __getattr__(self, name: str) -> Any:
        # called only for an unset slot: `deps`, `flows` or `groups` of a binding loaded packed
        i = _PACKED.get(name, -1)
        data = self.packed[i] if i >= 0 and self.packed is not None else None
        if data is None:
            raise AttributeError(name)
        value: Any
        if i == 0:
            value = set(unpack_records(data))
        elif i == 1:
            value = list(unpack_records(data))
        else:  # its keys point into the sorted deps
            held = self.packed
            assert held is not None
            value = unpack_groups(self.path, data, unpack_records(held[0]) if held[0] is not None else sorted(self.deps))
        setattr(self, name, value)
        held = self.packed
        assert held is not None
        held[i] = None
        if not any(held):
            self.packed = None
        return value

    def defer(self, deps: bytes, flows: bytes, groups: bytes) -> None:
        """Hold `deps`, `flows` and `groups` as packed bytes, each unpacked on its first read."""
        del self.deps, self.flows, self.groups
        self.packed = [deps, flows, groups]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # pickled (from a bind worker) as it is: what is packed stays packed, not unpacked to be sent
        held = list(self.packed) if self.packed is not None else [None, None, None]
        values = [None if held[i] is not None else getattr(self, name) for name, i in _PACKED.items()]
        return _restore, (self.path, self.edges, self.internal, self.external, self.unresolved, *values, held)

    def pack(self) -> None:
        """Hold `deps` and `groups` packed until they are next read: only the next update of this
        file reads its groups, and any update the deps of all; as sets they were 12% of a process
        that binds a Django-sized workspace itself (the server), and a bind worker sends them packed."""
        held: list[bytes | None] = self.packed if self.packed is not None else [None, None, None]
        if held[0] is not None or held[2] is not None:
            return
        deps = sorted(self.deps)
        held[0], held[2] = pack_records(deps), pack_groups(self.path, self.groups, deps)
        del self.deps, self.groups
        self.packed = held

    def packed_parts(self) -> tuple[bytes, bytes, bytes]:
        """`deps`, `flows` and `groups` packed, as the cache stores them."""
        deps, flows, groups = self.packed or (None, None, None)
        if deps is None:
            deps = pack_records(sorted(self.deps))
        if flows is None:
            flows = pack_records(self.flows)
        if groups is None:  # its keys point into the sorted deps
            groups = pack_groups(self.path, self.groups, list(unpack_records(deps)))
        return deps, flows, groups


def _restore(path: str, edges: list[Edge], internal: int, external: int, unresolved: list[int], deps: Any,
             flows: Any, groups: Any, held: list[bytes | None]) -> FileBinding:
    b = FileBinding(path, edges, internal=internal, external=external, unresolved=unresolved)
    for name, value in (("deps", deps), ("flows", flows), ("groups", groups)):
        if value is None:
            delattr(b, name)
        else:
            setattr(b, name, value)
    b.packed = held if any(h is not None for h in held) else None
    return b


def pack_groups(path: str, groups: dict[str, Group], deps: list[str]) -> bytes:
    """Site groups as [own keys, rows of (key, key indexes, internal, external, unresolved offsets,
    flow indexes)]: a key index points into `deps` (the binding's sorted dependency keys), then into
    the own keys (`name_dep(path, own)`: of the file itself, which `deps` leaves out)."""
    at = dict(zip(deps, range(len(deps)), strict=True))
    own = sorted(set().union(*(g[0] for g in groups.values())).difference(at)) if groups else []
    at.update(zip(own, range(len(deps), len(deps) + len(own)), strict=True))
    prefix = name_dep(path, "")
    assert all(k.startswith(prefix) for k in own), "a group read a key its binding's deps lack"
    get = at.__getitem__
    rows = [(key, sorted(map(get, g[0])), g[1], g[2], g[3], g[4]) for key, g in sorted(groups.items())]
    cut = len(prefix)
    return pack_records(([k[cut:] for k in own], rows))


def unpack_groups(path: str, packed: bytes, deps: list[str] | tuple[str, ...]) -> dict[str, Group]:
    own, rows = unpack_records(packed)
    table = (*deps, *(name_dep(path, k) for k in own))
    return {key: (frozenset([table[i] for i in keys]), internal, external, tuple(unresolved), tuple(flows))
            for key, keys, internal, external, unresolved, flows in rows}


_PACKED = {"deps": 0, "flows": 1, "groups": 2}
_EDGE_ORDER = itemgetter(0, 2, 1)  # a binding's edges by (src, kind, dst), the key read in C
_NO_KEYS: frozenset[str] = frozenset()


@dataclass(slots=True)
class PriorBinding:
    """A file's binding before an update: `Binder.bind_file` keeps the results of its site groups
    whose sites, defs and imports are the same (up to a shift of lines) and whose dependency keys
    the update did not change."""

    binding: FileBinding
    facts: FileFacts  # what it was bound from: the same object when the file's text did not change
    changed: frozenset[str]  # dependency keys whose meaning the update changed (see WorkspaceIndex._affected)


def _moved(constraint: tuple, delta: int) -> tuple:
    """A flow constraint of a group moved by `delta` lines (only a call's carries a line)."""
    if delta and constraint[0] == "c":
        return constraint[:3] + (constraint[3] + delta,) + constraint[4:]
    return constraint


def _group_keys(classes: frozenset[str]) -> Callable[[str], str]:
    """Scope -> its site group's key (memoised: every site asks)."""
    keys: dict[str, str] = {}

    def key(scope: str) -> str:
        k = keys.get(scope)
        if k is None:
            k = keys[scope] = dep_key(classes, scope) if scope else ""
        return k

    return key


_Grouped = tuple[dict[str, list[int]], dict[str, list[Def]], dict[str, list[Import]], dict[str, list[tuple]]]


def _by_group(facts: FileFacts, classes: frozenset[str]) -> _Grouped:
    """Site indexes, defs, imports and flows of each site group (see Group); module level and class
    bodies of top-level classes are "" and the class name, never kept."""
    key = _group_keys(classes)
    sites: dict[str, list[int]] = {}
    scope: str | None = None
    into: list[int] = []
    for i, s in enumerate(facts.sites):
        if s.scope != scope:  # sites come in runs of one scope
            scope = s.scope
            into = sites.setdefault(key(scope), [])
        into.append(i)
    defs: dict[str, list[Def]] = {}
    for d in facts.defs:
        defs.setdefault(key(d.qual), []).append(d)
    imports: dict[str, list[Import]] = {}
    for imp in facts.imports:
        imports.setdefault(key(imp.scope), []).append(imp)
    flows: dict[str, list[tuple]] = {}
    for fl in facts.flows:
        flows.setdefault(key(fl[0]), []).append(fl)
    return sites, defs, imports, flows


def _def_shape(d: Def) -> tuple:
    """What binding reads of a def, but its position."""
    return (d.qual, d.kind, d.col, d.bases, d.decorators, d.returns, d.value, d.attrs, d.locals,
            d.returns_def, d.returns_call, d.call_returns)


def _shift(old: FileFacts, new: FileFacts, old_g: _Grouped, new_g: _Grouped, key: str) -> int | None:
    """The line shift that maps group `key`'s old sites, defs, imports and flows onto the new ones, or
    None when anything but their lines differs (or their lines moved unevenly)."""
    osites: list[int] = old_g[0].get(key, [])
    nsites: list[int] = new_g[0].get(key, [])
    if len(osites) != len(nsites) or not nsites:
        return None
    a, b = old.sites, new.sites
    delta = b[nsites[0]].line - a[osites[0]].line
    for i, j in zip(osites, nsites, strict=True):
        s, t = a[i], b[j]
        if t.line - s.line != delta or s.col != t.col or s.chain != t.chain or s.kind != t.kind or s.scope != t.scope:
            return None
    odefs, ndefs = old_g[1].get(key, ()), new_g[1].get(key, ())
    if len(odefs) != len(ndefs) or any(
            e.line - d.line != delta or _def_shape(d) != _def_shape(e) for d, e in zip(odefs, ndefs, strict=True)):
        return None
    oimps, nimps = old_g[2].get(key, ()), new_g[2].get(key, ())
    if len(oimps) != len(nimps) or any(
            j.line - i.line != delta or i._replace(line=0) != j._replace(line=0) for i, j in zip(oimps, nimps, strict=True)):
        return None
    oflows, nflows = old_g[3].get(key, ()), new_g[3].get(key, ())
    if len(oflows) != len(nflows) or any(
            g[2] - f[2] != delta or f[:2] != g[:2] or f[3:] != g[3:] for f, g in zip(oflows, nflows, strict=True)):
        return None
    return delta


class Binder(Evaluator):
    """Binds one file at a time against a Workspace, recording the modules each file consulted."""

    memoize = True  # evaluate a site's name or receiver once per scope (off: every site, for tests)
    # keep an edge per call site, not one per (source, target, kind): for a query that lists every call
    # (call hierarchy ranges, find_callers), never for the index, whose graph holds one edge per pair
    every_site = False

    # -- callback flow (flow.py propagates what this resolves) --------------------------------
    def bind_flows(self, info: ModuleInfo, called: Callable[[tuple[int, int, Chain]], tuple[str, bool] | None],
                   group_of: Callable[[str], str], deps_of: Callable[[str], set[str]],
                   skip: Container[str] = ()) -> dict[str, set[tuple]]:
        """Resolve one file's flowfacts into constraints over variables: ("p", def id, name) for a
        parameter or local, ("a", class id, attr) for an attribute of a class's instances. Per site
        group (see Group) of the flows' scopes, but those in `skip`, its lookups recorded in
        `deps_of(group)`."""

        path = info.facts.path
        per_group: dict[str, set[tuple]] = {}
        out: set[tuple] = set()  # the current group's: the helpers below add to it

        def var(scope: str, name: str) -> tuple | None:
            """The variable `name` denotes in `scope`, or ("fn", id) for a project function."""
            cur = scope
            while cur:
                d = info.defs.get(cur)
                nested = info.defs.get(f"{cur}.{name}")
                if d is not None and d.kind != "class" and nested is not None and nested.kind == "function":
                    return ("fn", symbol_id(path, nested.qual))  # `return view`: the closure itself
                if d is not None and d.kind != "class" and (name in info.params.get(cur, ()) or name in d.locals):
                    return ("p", symbol_id(path, cur), name)
                cur = cur.rpartition(".")[0]
            value = self.deref_variable(self.lookup(info, scope, name, 0), 0)
            if value is not None and value[0] == "sym":
                fpath, _, fqual = value[1].partition("::")
                self.use(fpath, fqual)
                d = self.ws.info[fpath].defs.get(fqual)
                if d is not None and d.kind in ("function", "method", "test"):
                    return ("fn", value[1])
            return None

        def attrs(scope: str, attr: str) -> list[tuple]:
            owner = self.enclosing_class(info, scope)
            if owner is None:
                return []
            return [("a", e[1], attr) for e in self.class_mro(symbol_id(path, owner), 0) if e is not None and e[0] == "sym"]

        def signature(callee: str, bound: bool) -> tuple[str, tuple[str, ...], int] | None:
            """(def id, parameter names, positional offset) of what a call of `callee` runs: a
            class's `__init__`; the offset skips a bound method's self."""
            cpath, _, cqual = callee.partition("::")
            cinfo = self.ws.info.get(cpath)
            if cinfo is None:
                return None
            self.use(cpath, cqual)
            d = cinfo.defs.get(cqual)
            if d is not None and d.kind == "class":
                cqual, bound = f"{cqual}.__init__", True
                self.use(cpath, cqual)
                d = cinfo.defs.get(cqual)
            if d is None:
                return None
            offset = 1 if bound and d.kind == "method" and not any(c[-1] == "staticmethod" for c in d.decorators) else 0
            return symbol_id(cpath, cqual), cinfo.params.get(cqual, ()), offset

        def param(callee: str, bound: bool, pos: str) -> tuple | None:
            """The variable of `callee` an argument at `pos` ("2", "=name") binds: a parameter, or
            the `**kwargs` entry `name` ("k", def id, name) when no parameter has that name."""
            sig = signature(callee, bound)
            if sig is None:
                return None
            target, names, offset = sig
            if pos.startswith("="):
                if pos[1:] in names:
                    return ("p", target, pos[1:])
                return ("k", target, pos[1:]) if names and names[-1].startswith("**") else None
            i = int(pos) + offset
            return ("p", target, names[i]) if i < len(names) and not names[i].startswith("**") else None

        def kwargs_owner(scope: str, name: str) -> str | None:
            """The def (this one or an enclosing one) whose `**name` parameter `name` is."""
            cur = scope
            while cur:
                if f"**{name}" in info.params.get(cur, ()):
                    return symbol_id(path, cur)
                d = info.defs.get(cur)
                if d is not None and d.kind != "class" and name in d.locals and name in info.params.get(cur, ()):
                    return None
                cur = cur.rpartition(".")[0]
            return None

        def flow_into(src: tuple | None, dst: tuple | None) -> None:
            if src is None or dst is None or src == dst:
                return
            out.add(("f", src[1], dst) if src[0] == "fn" else ("v", src, dst))

        def value_of(scope: str, name: str) -> list[tuple | None]:
            """An argument's variables: a local or name, or `@attr`, the attribute on every class of self."""
            return list(attrs(scope, name[1:])) if name.startswith("@") else [var(scope, name)]

        def returned(callee: str) -> tuple | None:
            """The return variable of a function that returns a local or nested def by name."""
            cpath, _, cqual = callee.partition("::")
            cinfo = self.ws.info.get(cpath)
            if cinfo is None:
                return None
            self.use(cpath, cqual)
            if cqual not in cinfo.returns_local or cqual in cinfo.returns_param:
                return None  # an identity (`ensure_sync(f)`) would merge every caller's argument
            return ("r", callee)

        for run, flows in groupby(info.facts.flows, key=itemgetter(0)):  # flows come in runs of one scope
            key = group_of(run)
            if key in skip:
                continue
            self.deps = deps_of(key)
            out = per_group.setdefault(key, set())
            for scope, kind, line, col, chain, name in flows:
                if kind == "returns":
                    if info.returns_param.get(scope) != name:
                        flow_into(var(scope, name), ("r", symbol_id(path, scope)))
                elif kind == "alias":
                    flow_into(var(scope, chain[0]), var(scope, name))
                elif kind == "kwstore":
                    kw_owner = kwargs_owner(scope, chain[0])
                    if kw_owner is not None:
                        flow_into(var(scope, name), ("k", kw_owner, chain[1]))
                elif kind == "spread":
                    hit = called((line, col, chain))
                    kw_owner = kwargs_owner(scope, name)
                    sig = signature(hit[0], hit[1]) if hit is not None and kw_owner is not None else None
                    if sig is not None:
                        names = sig[1]
                        out.add(("s", kw_owner, sig[0], tuple(n for n in names if not n.startswith("**")),
                                 bool(names) and names[-1].startswith("**")))
                elif kind == "result":
                    hit = called((line, col, chain))
                    if hit is not None:
                        flow_into(returned(hit[0]), var(scope, name))
                elif kind == "store":
                    stored = var(scope, name)
                    for owner in attrs(scope, chain[0])[:1]:  # the class whose method stores it
                        flow_into(stored, owner)
                elif kind == "load":
                    loaded = var(scope, name)
                    for owner in attrs(scope, chain[0]):
                        flow_into(owner, loaded)
                elif kind == "arg":
                    hit = called((line, col, chain))
                    pos, _, arg = name.partition("\0")
                    if hit is not None:
                        target = param(hit[0], hit[1], pos)
                        for src in value_of(scope, arg):
                            flow_into(src, target)
                elif kind == "decor":
                    hit = called((line, col, chain))
                    if hit is not None:
                        flow_into(("fn", symbol_id(path, name)), param(hit[0], hit[1], "0"))
                elif kind in ("callvar", "callattr", "callself", "callwrap"):
                    caller = symbol_id(path, scope)
                    targets: list[tuple | None]
                    if kind == "callvar":
                        targets = [var(scope, name)]
                    elif kind in ("callattr", "callself"):
                        targets = list(attrs(scope, chain[0]))
                    else:
                        hit = called((line, col, chain))
                        if hit is None:
                            continue
                        p = param(hit[0], hit[1], "0")
                        wpath, _, wqual = hit[0].partition("::")
                        winfo = self.ws.info.get(wpath)
                        if p is None or winfo is None or winfo.returns_param.get(wqual) != p[2]:
                            continue  # not a function that hands its argument back (ensure_sync(f) -> f)
                        targets = value_of(scope, name)
                    for t in targets:
                        if t is not None and t[0] != "fn":
                            out.add(("c", caller, t, line, col))
        return per_group

    def wrappers(self, callee_id: str) -> list[str]:
        """The wrapper closures that run when the decorated def `callee_id` is called: for each
        decorator that is a project function returning a nested def by name (`def setupmethod(f):
        def wrapper_func(...)...; return wrapper_func`), or a factory returning such a decorator."""
        path, _, qual = callee_id.partition("::")
        info = self.ws.info.get(path)
        if info is None:
            return []
        d = info.defs.get(qual)
        if d is None or not d.decorators or d.kind == "class":
            return []
        out: list[str] = []
        scope = qual.rpartition(".")[0]
        for dec in d.decorators:
            if dec[-1].endswith("()"):
                value = self.call_result(self.eval_chain(info, scope, dec[:-1] + (dec[-1][:-2],), 0), 0)
            else:
                value = self.deref_variable(self.eval_chain(info, scope, dec, 0), 0)
            if value is None or value[0] != "sym":
                continue
            dpath, _, dqual = value[1].partition("::")
            wrapper = self.returned_def(value[1])
            ddef = self.ws.info[dpath].defs.get(dqual)
            if wrapper is None or ddef is None or ddef.kind not in ("function", "method"):
                continue
            wpath, _, wqual = wrapper.partition("::")
            if self.ws.info[wpath].defs[wqual].kind == "function":
                out.append(wrapper)
        return out

    # -- one file ---------------------------------------------------------------------------
    def bind_file(self, path: str, prior: PriorBinding | None = None,
                  only: AbstractSet[str] | None = None) -> FileBinding:
        """One file's edges, counts, flows and dependency keys. `prior`: its binding before an
        update, whose unchanged site groups are kept instead of evaluated again. `only`: evaluate the
        sites and methods of these site groups alone, and no flows (a partial binding, for reading
        some scopes' call sites; never one to keep)."""
        info = self.ws.info[path]
        facts = info.facts
        classes = info.classes
        self.deps = file_deps = set[str]()
        out = FileBinding(path)
        edges: dict[tuple[Any, ...], Edge] = {}
        keep: dict[str, int] = {}  # kept group -> its line shift
        site_groups: dict[str, list[int]] = {}
        old_classes = classes
        if prior is not None:
            try:
                if prior.binding.groups:
                    grouped = _by_group(facts, classes)
                    site_groups = grouped[0]
                    old_classes = classes if prior.facts is facts else top_classes(prior.facts)
                    keep = self._kept_groups(facts, classes, grouped, prior, old_classes)
            except Exception:  # keeping groups never costs a binding: evaluate them all
                log.exception("keeping the site groups of %s failed; binding it whole", path)
                keep = {}
        group_deps: dict[str, set[str]] = {}
        group_of = _group_keys(classes)

        def deps_of(key: str) -> set[str]:
            """Where a lookup for `key`'s group records what it read (module level and class
            bodies are never kept: the file's own set)."""
            if not key or key in classes:
                return file_deps
            got = group_deps.get(key)
            if got is None:
                got = group_deps[key] = set()
            return got

        nodes: dict[str, str] = {"": path}  # the binding's ids, each one string object

        every_site = self.every_site

        def add(src: str, dst: str, kind: str, line: int, col: int, resolver: str, extra: tuple[str, ...] = ()) -> None:
            key = (src, dst, kind, line, col) if every_site else (src, dst, kind)
            old = edges.get(key)
            if old is None:
                # one string object per id in the binding: a target many sites reach is one string
                edges[key] = Edge(nodes.setdefault(src, src), nodes.setdefault(dst, dst), kind, path, line, col,
                                  resolver, extra)
            elif extra:
                merged = tuple(sorted(set(old.extra) | set(extra)))
                edges[key] = old._replace(extra=merged)

        scopes: dict[str, str] = {"": path}

        def scope_node(scope: str) -> str:
            node = scopes.get(scope)
            if node is None:
                sid = symbol_id(path, scope)
                node = scopes[scope] = nodes.setdefault(sid, sid)
            return node

        # CONTAINS: file -> top-level defs, class -> members, function -> nested defs
        for d in facts.defs:
            parent = d.qual.rpartition(".")[0]
            if parent and parent not in info.defs:
                continue
            add(scope_node(parent), symbol_id(path, d.qual), EdgeKind.CONTAINS.value, d.line, d.col, RESOLVER_CONTAINS)

        # IMPORTS (file -> file, with names) and REFERENCES for imported project symbols
        for imp in facts.imports:
            # an import inside a kept group makes edges from that group's scope: its group depends on it
            self.deps = deps_of(group_of(imp.scope))
            module = self.absolute(info, imp)
            if module is None:
                continue
            src_scope = scope_node(imp.scope)
            if imp.name is None:
                target = self.module_path(module)
                if target is not None and target != path:
                    add(path, target, EdgeKind.IMPORTS.value, imp.line, imp.col, RESOLVER_IMPORT, (module,))
                continue
            mpath = self.module_path(module)
            if imp.name == "*":
                if mpath is not None and mpath != path:
                    add(path, mpath, EdgeKind.IMPORTS.value, imp.line, imp.col, RESOLVER_IMPORT, ("*",))
                continue
            sub = self.module_path(f"{module}.{imp.name}")
            if mpath is not None and mpath != path:
                add(path, mpath, EdgeKind.IMPORTS.value, imp.line, imp.col, RESOLVER_IMPORT, (imp.name,))
            if mpath is not None:
                self.use(mpath, imp.name)
            if sub is not None and sub != path and (mpath is None or imp.name not in self.ws.info[mpath].top):
                add(path, sub, EdgeKind.IMPORTS.value, imp.line, imp.col, RESOLVER_IMPORT, (imp.name,))
            self.resolver = RESOLVER_IMPORT
            raw = self.module_attr(module, imp.name, 0) if mpath else None
            value = self.deref_variable(raw, 0)
            if (value is None or value is EXT or value[0] != "sym") and raw is not None and raw[0] == "sym":
                # a variable holding a literal, a library object or an instance (`DEFAULT = Limits()`):
                # the variable itself
                value = raw
            if value is not None and value[0] == "sym" and value[1] != src_scope:
                add(src_scope, value[1], EdgeKind.REFERENCES.value, imp.line, imp.col, RESOLVER_IMPORT)

        self.deps = file_deps

        # The kept groups' edges from the prior binding, moved by their groups' line shift: only a
        # group's sites, imports and methods make edges of these kinds from its scopes
        if keep:
            assert prior is not None
            prefix = path + "::"
            for e in prior.binding.edges:
                if e.kind in _KEPT_KINDS and e.src.startswith(prefix):
                    delta = keep.get(dep_key(old_classes, e.src[len(prefix):]))
                    if delta is None:
                        continue
                    if delta or e.extra:
                        add(e.src, e.dst, e.kind, e.line + delta, e.col, e.resolver, e.extra)
                    else:
                        edges.setdefault((e.src, e.dst, e.kind), e)

        # INHERITS and OVERRIDES (a method's, with its group's lookups)
        for d in facts.defs:
            if d.kind != "class":
                continue
            cid = symbol_id(path, d.qual)
            scope = d.qual.rpartition(".")[0]
            for base in d.bases:
                self.resolver = RESOLVER_SCOPE
                bval = self.deref_variable(self.eval_chain(info, scope, base, 0), 0)
                if bval is not None and bval[0] == "sym" and bval[1] != cid:
                    add(cid, bval[1], EdgeKind.INHERITS.value, d.line, d.col, self.resolver)
            for name, mq in info.members.get(d.qual, {}).items():
                md = info.defs[mq]
                if md.kind not in ("method", "test"):
                    continue
                group = group_of(mq)
                if group in keep or (only is not None and group not in only):
                    continue
                self.deps = deps_of(group)
                self.resolver = RESOLVER_MRO
                over = self.member(cid, name, 0, skip_self=True)
                if over is not None and over[0] == "sym":
                    opath, _, oqual = over[1].partition("::")
                    self.use(opath, oqual)
                    odef = self.ws.info[opath].defs.get(oqual)
                    if odef is not None and odef.kind in ("method", "test"):
                        add(symbol_id(path, mq), over[1], EdgeKind.OVERRIDES.value, md.line, md.col, RESOLVER_MRO)
            self.deps = file_deps

        called: dict[tuple[int, int, Chain], tuple[str, bool]] = {}  # call site -> (callee, bound method call)
        # Sites repeat names and receivers (a test file's 8,000 sites hold ~600 distinct scope/name pairs):
        # a name or receiver chain is evaluated once per scope, its value, resolver and deps replayed
        memo: dict[tuple[str, str | Chain], tuple[Value, str, set[str]]] = {}

        def evaluated(scope: str, key: str | Chain) -> Value:
            hit = memo.get((scope, key)) if self.memoize else None
            if hit is not None:
                self.deps.update(hit[2])
                self._weaken(hit[1])
                return hit[0]
            saved = self.deps
            self.deps = set()
            try:
                if isinstance(key, str):
                    value = self.lookup(info, scope, key, 0)
                else:
                    value = self.eval_chain(info, scope, key, 0)
            finally:
                got, self.deps = self.deps, saved
                saved.update(got)
            # from RESOLVER_SCOPE, the strongest, so replaying the weakest it reached is exact
            memo[(scope, key)] = (value, self.resolver, got)
            return value

        def resolve(site: Site) -> tuple[Value, Value]:
            """(value, receiver) of a site's chain; for a call, the value is its callee."""
            self.resolver = RESOLVER_SCOPE
            chain = site.chain
            recv: Value = None
            if len(chain) == 1:
                value = evaluated(site.scope, chain[0].rstrip("()") if chain[0].endswith("()") else chain[0])
                if chain[0].endswith("()"):
                    value = self.call_result(value, 0)
            else:
                value = recv = evaluated(site.scope, chain[:-1])
                last = chain[-1]
                value = self.attr(value, last[:-2] if last.endswith("()") else last, 0, raw=site.kind != CALL)
                if last.endswith("()"):
                    value = self.call_result(value, 0)  # `a.f(x)(y)`: the callee is what f returned
            if site.kind == CALL:
                value = self.deref_variable(value, 0)
                if value is not None and value[0] == "inst" and not chain[-1].endswith("()"):
                    # calling a typed instance runs its __call__ (not after `f(a)(b)`: a function's
                    # recorded return is its first, and other branches may return something else)
                    value = self.member(value[1], "__call__", 0)
            return value, recv

        def project_def(site: Site, callee: Value, recv: Value) -> tuple[Def, bool] | None:
            """A resolved call's project def and whether it is a bound method call."""
            assert callee is not None and callee is not EXT
            tpath, _, tqual = callee[1].partition("::")
            self.use(tpath, tqual)
            tdef = self.ws.info[tpath].defs.get(tqual)
            if tdef is None:
                return None
            if recv is not None:
                recv = self.deref_variable(recv, 0)  # `registry.hook(f)`: a module variable holding an instance
            return tdef, recv is not None and recv[0] in ("inst", "super") and not site.chain[-1].endswith("()")

        # per evaluated group: [internal, external, unresolved offsets, sites so far]
        stats: dict[str, list[Any]] = {}
        for run, sites in groupby(enumerate(facts.sites), key=lambda t: t[1].scope):  # runs of one scope
            key = group_of(run)
            if key in keep or (only is not None and key not in only):
                continue
            self.deps = deps_of(key)
            st = stats.setdefault(key, [0, 0, [], 0])
            src = scope_node(run)
            for index, site in sites:
                offset = st[3]
                st[3] += 1
                value, recv = resolve(site)
                if site.kind == CALL:
                    if value is None or (value is not EXT and value[0] != "sym"):
                        st[2].append(offset)
                        out.unresolved.append(index)
                        continue
                    if value is EXT:
                        st[1] += 1
                        continue
                    found = project_def(site, value, recv)
                    if found is None:
                        st[2].append(offset)
                        out.unresolved.append(index)
                        continue
                    st[0] += 1
                    tdef, bound = found
                    called.setdefault((site.line, site.col, site.chain), (value[1], bound))
                    kind = _INSTANTIATES if tdef.kind == "class" else _CALLS
                    if tdef.kind == "variable":
                        kind = _REFERENCES
                    add(src, value[1], kind, site.line, site.col, self.resolver)
                    if kind == _CALLS and tdef.decorators:
                        for wrapper in self.wrappers(value[1]):
                            # calling a decorated def runs the decorator's wrapper first
                            add(src, wrapper, kind, site.line, site.col, self.resolver)
                else:
                    if value is None or value is EXT or value[0] != "sym" or value[1] == src:
                        continue
                    add(src, value[1], _REFERENCES, site.line, site.col, self.resolver)
        self.deps = file_deps

        lazy: dict[tuple[int, int, Chain], int] | None = None

        def call_hit(at: tuple[int, int, Chain]) -> tuple[str, bool] | None:
            """The call at (line, col, chain): a kept group's calls are resolved only if a flow of
            another group asks."""
            nonlocal lazy
            hit = called.get(at)
            if hit is not None or not keep:
                return hit
            if lazy is None:
                lazy = {}
                for key in keep:
                    for i in site_groups[key]:
                        s = facts.sites[i]
                        if s.kind == CALL:
                            lazy.setdefault((s.line, s.col, s.chain), i)
            i = lazy.pop(at, -1)
            if i < 0:
                return None
            site = facts.sites[i]
            value, recv = resolve(site)
            if value is None or value is EXT or value[0] != "sym":
                return None
            found = project_def(site, value, recv)
            if found is None:
                return None
            hit = called[at] = (value[1], found[1])
            return hit

        made = self.bind_flows(info, call_hit, group_of, deps_of, keep) if only is None else {}
        self.deps = file_deps
        flows: set[tuple] = set().union(*made.values()) if made else set()
        if keep:
            assert prior is not None
            old_flows = prior.binding.flows
            for key, delta in keep.items():
                made[key] = {_moved(old_flows[i], delta) for i in prior.binding.groups[key][4]}
                flows.update(made[key])
        out.flows = sorted(flows, key=repr)
        at = {c: i for i, c in enumerate(out.flows)}

        for key, st in stats.items():
            out.internal += st[0]
            out.external += st[1]
            if key and key not in classes:
                # the group's own set: nothing adds to it after this
                out.groups[key] = (group_deps.get(key, _NO_KEYS), st[0], st[1], tuple(st[2]),
                                   tuple(sorted([at[c] for c in made[key]])) if key in made else ())
        for gd in group_deps.values():
            file_deps.update(gd)
        for key in keep:  # their keys are the prior ones (their imports and flows were read again only in part)
            assert prior is not None
            rec: Group = prior.binding.groups[key][:4] + (tuple(sorted(at[c] for c in made[key])),)
            out.groups[key] = rec
            out.internal += rec[1]
            out.external += rec[2]
            idx = site_groups[key]
            out.unresolved.extend(idx[o] for o in rec[3])
            file_deps.update(rec[0])
        out.unresolved.sort()

        out.edges = sorted(edges.values(), key=_EDGE_ORDER)
        # the file's own names need no record: a file is always re-bound when it changes
        own = name_dep(path, "")
        out.deps = {d for d in file_deps if not d.startswith(own)}
        return out

    def bind_scopes(self, path: str, scopes: Iterable[str]) -> FileBinding:
        """A partial binding of one file: the site groups of these scopes ("" module level, else a
        qualified name) alone, for reading their call sites (never one to keep)."""
        group_of = _group_keys(self.ws.info[path].classes)
        return self.bind_file(path, only={group_of(s) for s in scopes})

    def _kept_groups(self, facts: FileFacts, classes: frozenset[str], grouped: _Grouped, prior: PriorBinding,
                     old_classes: frozenset[str]) -> dict[str, int]:
        """Group key -> line shift, for each site group whose prior results still hold: its sites,
        defs, imports and flows are the prior ones moved by a shift, and no key it read changed."""
        recs = prior.binding.groups
        same = prior.facts is facts
        # groups statement_reuse copied whole from the prior facts need no comparing (FileFacts.moved)
        moved = facts.moved[1] if facts.moved is not None and facts.moved[0] == prior.facts.digest else {}
        old_grouped: _Grouped | None = grouped if same else None
        out: dict[str, int] = {}
        for key in grouped[0]:
            rec = recs.get(key)
            if rec is None or not key or key in classes or key in old_classes or not rec[0].isdisjoint(prior.changed):
                continue
            delta = 0 if same else moved.get(key)
            if delta is None:
                if old_grouped is None:
                    old_grouped = _by_group(prior.facts, old_classes)
                delta = _shift(prior.facts, facts, old_grouped, grouped, key)
            if delta is not None:
                out[key] = delta
        return out
