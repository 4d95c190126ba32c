"""Static binding: turns per-file facts into typed edges without jedi.

Binds what can be bound statically: imports (absolute, relative, re-exports, star), local and module
scopes, `self.method()` through the class and its bases, `ClassName(...)`, and attribute chains whose
types are known from annotations, `__init__` assignments, local assignments and return values.
A chain that leaves the workspace (stdlib, site-packages) resolves to EXTERNAL and never to a
same-named project symbol. What cannot be bound is counted as unresolved, for jedi to refine.

Every lookup is recorded in the binding's `deps`, at two grains: module names (found or not: the
module table can change) and, for every file whose tables were read, the top-level names read there
(`name_dep(path, top)`). The incremental updater re-binds a file only when a name it read changed.

One class over three modules: `modules.ModuleScope` (the module table, modules and imports) <-
`evaluate.Evaluator` (scopes, calls, returns, MRO, members) <- `Binder` here (one file's edges and
its callback flow constraints).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctx_lsp.index.evaluate import Evaluator
from ctx_lsp.index.facts import CALL, Chain, unpack_records
from ctx_lsp.index.model import (
    RESOLVER_CONTAINS,
    RESOLVER_IMPORT,
    RESOLVER_MRO,
    RESOLVER_SCOPE,
    Edge,
    EdgeKind,
    symbol_id,
)
from ctx_lsp.index.modules import EXT, ModuleInfo, Value, name_dep


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
    # `deps` and `flows` packed (facts.pack_records) while nobody has read them: a warm start loads every
    # binding, but only an update reads them (8 and 5 MB of a Django cache)
    packed: tuple[bytes, bytes] | None = field(default=None, repr=False, compare=False)

    def __getattr__(self, name: str) -> Any:
        # called only for an unset slot: `deps` or `flows` of a binding loaded with them packed
        if name in ("deps", "flows") and self.packed is not None:
            self.deps = set(unpack_records(self.packed[0]))
            self.flows = list(unpack_records(self.packed[1]))
            self.packed = None
            return getattr(self, name)
        raise AttributeError(name)

    def defer(self, deps: bytes, flows: bytes) -> None:
        """Hold `deps` and `flows` as pack_records bytes, unpacked on first read of either."""
        del self.deps, self.flows
        self.packed = (deps, flows)



class Binder(Evaluator):
    """Binds one file at a time against a Workspace, recording the modules each file consulted."""

    memoize = True  # evaluate a site's name or receiver once per scope (off: every site, for tests)

    # -- callback flow (flow.py propagates what this resolves) --------------------------------
    def bind_flows(self, info: ModuleInfo, called: dict[tuple[int, int, Chain], tuple[str, bool]]) -> list[tuple]:
        """Resolve one file's flowfacts into constraints over variables: ("p", def id, name) for a
        parameter or local, ("a", class id, attr) for an attribute of a class's instances."""
        path = info.facts.path
        out: set[tuple] = set()

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

        for scope, kind, line, col, chain, name in info.facts.flows:
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
                hit = called.get((line, col, chain))
                kw_owner = kwargs_owner(scope, name)
                sig = signature(hit[0], hit[1]) if hit is not None and kw_owner is not None else None
                if sig is not None:
                    names = sig[1]
                    out.add(("s", kw_owner, sig[0], tuple(n for n in names if not n.startswith("**")),
                             bool(names) and names[-1].startswith("**")))
            elif kind == "result":
                hit = called.get((line, col, chain))
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
                hit = called.get((line, col, chain))
                pos, _, arg = name.partition("\0")
                if hit is not None:
                    target = param(hit[0], hit[1], pos)
                    for src in value_of(scope, arg):
                        flow_into(src, target)
            elif kind == "decor":
                hit = called.get((line, col, chain))
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
                    hit = called.get((line, col, chain))
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
        return sorted(out, key=repr)

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
    def bind_file(self, path: str) -> FileBinding:
        info = self.ws.info[path]
        facts = info.facts
        self.deps = set()
        out = FileBinding(path)
        edges: dict[tuple[str, str, str], Edge] = {}

        def add(src: str, dst: str, kind: str, line: int, col: int, resolver: str, extra: tuple[str, ...] = ()) -> None:
            key = (src, dst, kind)
            old = edges.get(key)
            if old is None:
                edges[key] = Edge(src, dst, kind, path, line, col, resolver, extra)
            elif extra:
                merged = tuple(sorted(set(old.extra) | set(extra)))
                edges[key] = Edge(src, dst, kind, path, old.line, old.col, old.resolver, merged)

        def scope_node(scope: str) -> str:
            return symbol_id(path, scope) if scope else path

        # CONTAINS: file -> top-level defs, class -> members, function -> nested defs
        for d in facts.defs:
            parent = d.qual.rpartition(".")[0]
            if parent and parent not in info.defs:
                continue
            add(scope_node(parent), symbol_id(path, d.qual), EdgeKind.CONTAINS.value, d.line, d.col, RESOLVER_CONTAINS)

        # IMPORTS (file -> file, with names) and REFERENCES for imported project symbols
        for imp in facts.imports:
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
            if (value is None or value is EXT) and raw is not None and raw[0] == "sym":
                value = raw  # a variable holding a literal or a library object: the variable itself
            if value is not None and value[0] == "sym" and value[1] != src_scope:
                add(src_scope, value[1], EdgeKind.REFERENCES.value, imp.line, imp.col, RESOLVER_IMPORT)

        # INHERITS and OVERRIDES
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
                self.resolver = RESOLVER_MRO
                over = self.member(cid, name, 0, skip_self=True)
                if over is not None and over[0] == "sym":
                    opath, _, oqual = over[1].partition("::")
                    self.use(opath, oqual)
                    odef = self.ws.info[opath].defs.get(oqual)
                    if odef is not None and odef.kind in ("method", "test"):
                        add(symbol_id(path, mq), over[1], EdgeKind.OVERRIDES.value, md.line, md.col, RESOLVER_MRO)

        # CALLS, INSTANTIATES, REFERENCES from sites
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

        for index, site in enumerate(facts.sites):
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
            src = scope_node(site.scope)
            if site.kind == CALL:
                callee = self.deref_variable(value, 0)
                if callee is not None and callee[0] == "inst" and not chain[-1].endswith("()"):
                    # calling a typed instance runs its __call__ (not after `f(a)(b)`: a function's
                    # recorded return is its first, and other branches may return something else)
                    callee = self.member(callee[1], "__call__", 0)
                if callee is None:
                    out.unresolved.append(index)
                    continue
                if callee is EXT or callee[0] != "sym":
                    if callee is EXT:
                        out.external += 1
                    else:
                        out.unresolved.append(index)
                    continue
                tpath, _, tqual = callee[1].partition("::")
                self.use(tpath, tqual)
                tdef = self.ws.info[tpath].defs.get(tqual)
                if tdef is None:
                    out.unresolved.append(index)
                    continue
                out.internal += 1
                if recv is not None:
                    recv = self.deref_variable(recv, 0)  # `registry.hook(f)`: a module variable holding an instance
                bound = recv is not None and recv[0] in ("inst", "super") and not chain[-1].endswith("()")
                called.setdefault((site.line, site.col, chain), (callee[1], bound))
                kind = EdgeKind.INSTANTIATES.value if tdef.kind == "class" else EdgeKind.CALLS.value
                if tdef.kind == "variable":
                    kind = EdgeKind.REFERENCES.value
                add(src, callee[1], kind, site.line, site.col, self.resolver)
                if kind == EdgeKind.CALLS.value and tdef.decorators:
                    for wrapper in self.wrappers(callee[1]):
                        # calling a decorated def runs the decorator's wrapper first
                        add(src, wrapper, kind, site.line, site.col, self.resolver)
            else:
                if value is None or value is EXT or value[0] != "sym" or value[1] == src:
                    continue
                add(src, value[1], EdgeKind.REFERENCES.value, site.line, site.col, self.resolver)

        out.edges = sorted(edges.values(), key=lambda e: (e.src, e.kind, e.dst))
        out.flows = self.bind_flows(info, called)
        # the file's own names need no record: a file is always re-bound when it changes
        own = name_dep(path, "")
        out.deps = {d for d in self.deps if not d.startswith(own)}
        return out
