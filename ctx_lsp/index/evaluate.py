"""`Evaluator`: chains evaluated to values in a scope, for the binder (`bind.py`) and snippet grounding.

Names resolve as Python would (local, enclosing and module scopes, then builtins; pytest fixtures by
parameter name), calls to what they return, attributes through the class's MRO (properties win over
instance attributes), decorated defs to what the decorator returns. Depth-bounded; unknown is None.
"""

from __future__ import annotations

from ctx_lsp.index.chains import FIXTURE, is_fixture
from ctx_lsp.index.facts import Chain
from ctx_lsp.index.model import RESOLVER_IMPORT, RESOLVER_MRO, RESOLVER_TYPE, symbol_id
from ctx_lsp.index.modules import (
    BUILTINS,
    EXT,
    MAX_DEPTH,
    PATH_DEP,
    ModuleInfo,
    ModuleScope,
    Value,
    import_wins,
)

_OBJECT_ATTRS = frozenset(dir(object)) | {"__dict__", "__module__", "__qualname__", "__name__", "__mro__"}

# pytest's built-in fixtures: objects of pytest or the stdlib, never the project's
_PYTEST_FIXTURES = frozenset({
    "request", "tmp_path", "tmp_path_factory", "tmpdir", "tmpdir_factory", "monkeypatch", "capsys", "capsysbinary",
    "capfd", "capfdbinary", "caplog", "recwarn", "pytestconfig", "record_property", "record_xml_attribute",
    "record_testsuite_property", "cache", "doctest_namespace", "testdir", "pytester",
})

# decorators that make a member a data descriptor (wins over an instance attribute of the same name)
_PROPERTY_DECORATORS = frozenset({"property", "setter", "getter", "deleter"})

# decorators whose def's name, read on an instance, gives what the def returns (functools' and
# Django's `cached_property` as `property`)
_GETTER_DECORATORS = frozenset({"property", "cached_property"})


class Evaluator(ModuleScope):
    """Chains evaluated to values in a scope: names through local, enclosing and module scopes (and
    fixtures), calls and what they return, attributes through the MRO, decorated defs."""

    # -- scopes ---------------------------------------------------------------------------
    def lookup(self, info: ModuleInfo, scope: str, name: str, depth: int) -> Value:
        """Resolve a bare name as Python would from `scope` (a def qual, "" for module level)."""
        if depth > MAX_DEPTH:
            return None
        path = info.facts.path
        cur = scope
        first = True
        while cur:
            self.use(path, f"{cur}.{name}")
            d = info.defs.get(cur)
            if d is not None and (d.kind != "class" or first):
                imp = info.bound.get(cur, {}).get(name)
                if imp is not None:
                    self._weaken(RESOLVER_IMPORT)
                    return self.import_value(info, imp, depth + 1)
                child = f"{cur}.{name}"
                if child in info.defs and (d.kind != "class" or first):
                    return ("sym", symbol_id(path, child))
                if d.kind != "class" and name in d.locals:
                    chain = d.locals[name]
                    if chain is None:
                        return None
                    if chain == ("<self>",):
                        owner = self.enclosing_class(info, cur)
                        return ("inst", symbol_id(path, owner)) if owner else None
                    if chain == ("<cls>",):
                        owner = self.enclosing_class(info, cur)
                        return ("sym", symbol_id(path, owner)) if owner else None
                    self._weaken(RESOLVER_TYPE)
                    return self.eval_chain(info, cur, chain, depth + 1, skip_locals_of=name)
            first = False
            cur = cur.rpartition(".")[0]
        self.use(path, name)
        if name in info.top and not import_wins(info, name):
            return ("sym", symbol_id(path, info.top[name]))
        imp = info.bound.get("", {}).get(name)
        if imp is not None:
            self._weaken(RESOLVER_IMPORT)
            return self.import_value(info, imp, depth + 1)
        for target, _tinfo in self._star_sources(info, name):
            value = self.module_attr(target, name, depth + 1)
            if value is not None and value is not EXT:
                self._weaken(RESOLVER_IMPORT)
                return value
        if name in BUILTINS:
            return EXT
        if info.stars:
            return None  # may come from a non-project star import: unknown rather than wrong
        return None

    def enclosing_class(self, info: ModuleInfo, qual: str) -> str | None:
        parent = qual.rpartition(".")[0]
        while parent:
            d = info.defs.get(parent)
            if d is not None and d.kind == "class":
                return parent
            parent = parent.rpartition(".")[0]
        return None

    def eval_chain(self, info: ModuleInfo, scope: str, chain: Chain, depth: int, skip_locals_of: str = "") -> Value:
        """The value of a whole chain (every segment, calls applied)."""
        if depth > MAX_DEPTH or not chain:
            return None
        head = chain[0]
        called = head.endswith("()")
        name = head[:-2] if called else head
        if skip_locals_of and name == skip_locals_of:
            # `x = x.y` style self-reference: look the name up in the enclosing scopes instead
            value = self.lookup(info, scope.rpartition(".")[0], name, depth + 1)
        elif name == "<ext>":
            return EXT  # a literal or display (extract.EXT_CHAIN): a built-in type
        elif name == "super" and called:
            owner = self.enclosing_class(info, scope)
            value = ("super", symbol_id(info.facts.path, owner)) if owner else None
            called = False
        else:
            value = self.lookup(info, scope, name, depth + 1)
        rest = chain[1:]
        if name == FIXTURE and rest:
            value = self.fixture(info, scope, rest[0], depth + 1)
            rest = rest[1:]
        if called:
            value = self.apply_call(value, depth + 1)
        for seg in rest:
            called = seg.endswith("()")
            value = self.attr(value, seg[:-2] if called else seg, depth + 1)
            if called:
                value = self.apply_call(value, depth + 1)
            if value is None or value is EXT:
                return value
        return value

    def fixture(self, info: ModuleInfo, scope: str, name: str, depth: int) -> Value:
        """The value pytest fixture `name` provides to the test or fixture `scope` in `info`'s file: a
        fixture method of its class, else one defined in the file, else in the nearest conftest.py up
        the directory tree, else pytest's own (tmp_path, monkeypatch, ...: outside the workspace).
        A fixture that requests its own name gets the one it overrides (pytest's rule)."""
        path = info.facts.path
        owner = self.enclosing_class(info, scope) if scope else None
        if owner is not None:
            self.use(path, f"{owner}.{name}")
            mq = info.members.get(owner, {}).get(name)
            if mq is not None and mq != scope and is_fixture(info.defs[mq].decorators):
                self._weaken(RESOLVER_TYPE)
                return self.apply_call(("sym", symbol_id(path, mq)), depth + 1)
        dirs = path.split("/")[:-1]
        candidates = [path] + ["/".join(dirs[:k] + ["conftest.py"]) for k in range(len(dirs), -1, -1)]
        for cand in candidates:
            if cand != path:
                # recorded whether or not it exists: adding or editing that conftest re-binds this file
                self.deps.add(PATH_DEP + cand)
            cinfo = self.ws.info.get(cand)
            if cinfo is None:
                continue
            qual = cinfo.top.get(name)
            self.use(cand, name)
            self.use(cand, "*")
            if qual is None and (name in cinfo.bound.get("", {}) or cinfo.stars):
                # a fixture imported into the conftest or test module (`from .fixtures import *`)
                value = self.lookup(cinfo, "", name, depth + 1)
                if value is not None and value[0] == "sym":
                    fpath, _, fqual = value[1].partition("::")
                    self.use(fpath, fqual)
                    fdef = self.ws.info[fpath].defs.get(fqual) if fpath in self.ws.info else None
                    if fdef is not None and is_fixture(fdef.decorators):
                        self._weaken(RESOLVER_TYPE)
                        return self.apply_call(value, depth + 1)
                continue
            if qual is None or not is_fixture(cinfo.defs[qual].decorators):
                continue
            if cand == path and qual == scope:
                continue  # a fixture asking for its own name gets the one it overrides, further up
            self._weaken(RESOLVER_TYPE)
            return self.apply_call(("sym", symbol_id(cand, qual)), depth + 1)
        return EXT if name in _PYTEST_FIXTURES else None

    def deref_variable(self, value: Value, depth: int) -> Value:
        """A module/class variable stands for what it was assigned (aliases, singletons)."""
        while value is not None and value[0] == "sym" and depth <= MAX_DEPTH:
            path, _, qual = value[1].partition("::")
            info = self.ws.info.get(path)
            if info is None:
                return None
            self.use(path, qual)
            d = info.defs.get(qual)
            if d is None or d.kind != "variable":
                return value
            if d.value is None:
                return value
            scope = qual.rpartition(".")[0]
            inner = self.eval_chain(info, scope, d.value, depth + 1)
            if inner is None:
                return value
            value = inner
            depth += 1
        return value

    def apply_call(self, value: Value, depth: int) -> Value:
        value = self.deref_variable(value, depth)
        if value is None or value is EXT:
            return value
        kind, ident = value
        if kind == "sym":
            path, _, qual = ident.partition("::")
            info = self.ws.info[path]
            self.use(path, qual)
            d = info.defs.get(qual)
            if d is None:
                return None
            if d.kind == "class":
                return ("inst", ident)
            if d.returns is not None:
                self._weaken(RESOLVER_TYPE)
                return self.eval_chain(info, qual, d.returns, depth + 1)
            return None
        return None

    def call_result(self, value: Value, depth: int) -> Value:
        """What calling `value` returns, for a call of that result (`f(a)(b)`, `@factory(...)`): a
        function that returns a nested def by name (a decorator factory) returns that def, whatever
        its other branches return."""
        target = self.deref_variable(value, depth)
        if target is not None and target[0] == "sym":
            nested = self.returned_def(target[1])
            if nested is not None:
                return ("sym", nested)
        return self.apply_call(value, depth)

    def returned_def(self, node_id: str, depth: int = 0) -> str | None:
        """The nested def that the def `node_id` returns by name (`Def.returns_def`), or that the
        function it returns a call of returns (`return option(*decls)` hands out option's decorator)."""
        path, _, qual = node_id.partition("::")
        info = self.ws.info.get(path)
        if info is None or depth > MAX_DEPTH:
            return None
        self.use(path, qual)
        d = info.defs.get(qual)
        if d is None:
            return None
        if d.returns_def is not None and f"{qual}.{d.returns_def}" in info.defs:
            return symbol_id(path, f"{qual}.{d.returns_def}")
        if d.returns_call is None or d.kind == "class":
            return None
        target = self.deref_variable(self.eval_chain(info, qual, d.returns_call, depth + 1), depth + 1)
        if target is None or target[0] != "sym" or target[1] == node_id:
            return None
        return self.returned_def(target[1], depth + 1)

    # -- classes and members -------------------------------------------------------------
    def class_mro(self, class_id: str, depth: int) -> list[Value]:
        """The class and its ancestors (depth-first, left to right), each ("sym", id) or EXT."""
        cached = self.ws._class_cache.get(class_id)
        if cached is not None:
            self.deps.update(cached[1])
            return cached[0]
        active = self.ws._mro_active
        if class_id in active:
            return [("sym", class_id), ("unknown", "")]  # a base expression that needs this very MRO
        active.add(class_id)
        saved = self.deps
        self.deps = set()
        out: list[Value] = []
        seen: set[str] = set()

        def visit(cid: str, d: int) -> None:
            if cid in seen or d > MAX_DEPTH:
                return
            seen.add(cid)
            out.append(("sym", cid))
            path, _, qual = cid.partition("::")
            info = self.ws.info.get(path)
            if info is None:
                return
            self.use(path, qual)
            cdef = info.defs.get(qual)
            if cdef is None:
                return
            scope = qual.rpartition(".")[0]
            for base in cdef.bases:
                bval = self.deref_variable(self.eval_chain(info, scope, base, d + 1), d + 1)
                if bval is not None and bval[0] == "sym":
                    bpath, _, bqual = bval[1].partition("::")
                    self.use(bpath, bqual)
                    bdef = self.ws.info[bpath].defs.get(bqual)
                    if bdef is not None and bdef.kind == "class":
                        visit(bval[1], d + 1)
                        continue
                if bval is EXT or bval is None:
                    out.append(EXT if bval is EXT else ("unknown", ""))

        saved_resolver = self.resolver
        try:
            # A fresh depth budget: the cached MRO must not depend on how deep the lookup that first
            # asked for it was, or results would depend on binding order.
            visit(class_id, 0)
        finally:
            active.discard(class_id)
        self.resolver = saved_resolver
        deps = frozenset(self.deps)
        incomplete = any(v == ("unknown", "") for v in out)
        if not incomplete or not active:
            self.ws._class_cache[class_id] = (out, deps)
        saved.update(deps)  # the same set: a binding records each site group's lookups in its own
        self.deps = saved
        return out

    def member(self, class_id: str, name: str, depth: int, skip_self: bool = False, raw: bool = False) -> Value:
        """Look `name` up along the MRO: a member def, or a typed instance attribute. `raw`: a class
        variable is returned itself (what a read refers to), not the value its type gives."""
        mro = self.class_mro(class_id, depth)
        start = 1 if skip_self else 0
        for i, entry in enumerate(mro[start:], start):
            if entry is None:
                continue
            if entry[0] == "ext":
                return EXT
            if entry[0] == "unknown":
                return None
            cid = entry[1]
            path, _, qual = cid.partition("::")
            info = self.ws.info[path]
            self.use(path, f"{qual}.{name}")
            mq = info.members.get(qual, {}).get(name)
            if i > 0:
                self._weaken(RESOLVER_MRO)
            if mq is not None:
                d = info.defs[mq]
                if d.kind == "variable" and not raw:
                    attr = info.defs[qual].attrs.get(name)
                    if attr is not None:
                        self._weaken(RESOLVER_TYPE)
                        value = self.eval_chain(info, attr[0], attr[1], depth + 1)
                        if value is None or value is EXT:
                            # unknown or a built-in/library type: the class variable itself (a REFERENCES
                            # target); attribute access on it still derefs to what it holds
                            return ("sym", symbol_id(path, mq))
                        return value
                return ("sym", symbol_id(path, mq))
            attr = info.defs[qual].attrs.get(name)
            if attr is not None:
                prop = self._property_in(mro[i + 1:], name)
                if prop is not None:
                    return prop  # `self.debug = x` under a base's `debug` property runs its setter
                self._weaken(RESOLVER_TYPE)
                return self.eval_chain(info, attr[0], attr[1], depth + 1)
        if name == "__class__" and not skip_self:
            return ("sym", class_id)  # self.__class__ is the class itself
        if name in _OBJECT_ATTRS:
            return EXT  # __dict__, __init__ of object, ...: not the project's
        return None

    def _property_in(self, mro: list[Value], name: str) -> Value:
        """The property `name` the first class of `mro` defining `name` declares, if it is one: a data
        descriptor on a class wins over an instance attribute of the same name."""
        for entry in mro:
            if entry is None or entry[0] != "sym":
                return None
            path, _, qual = entry[1].partition("::")
            info = self.ws.info[path]
            self.use(path, f"{qual}.{name}")
            mq = info.members.get(qual, {}).get(name)
            if mq is not None:
                d = info.defs[mq]
                if any(c and c[-1] in _PROPERTY_DECORATORS for c in d.decorators):
                    self._weaken(RESOLVER_MRO)
                    return ("sym", symbol_id(path, mq))
                return None
        return None

    def attr(self, value: Value, name: str, depth: int, raw: bool = False) -> Value:
        value = self.deref_variable(value, depth)
        if value is None or value is EXT:
            return value
        kind, ident = value
        if kind == "mod":
            return self.module_attr(ident, name, depth + 1)
        if kind == "inst":
            return self.member(ident, name, depth + 1, raw=raw)
        if kind == "super":
            return self.member(ident, name, depth + 1, skip_self=True, raw=raw)
        if kind == "sym":
            path, _, qual = ident.partition("::")
            self.use(path, qual)
            d = self.ws.info[path].defs.get(qual)
            if d is not None and d.kind == "class":
                return self.member(ident, name, depth + 1, raw=raw)
            if d is not None and d.kind != "variable" and any(c and c[-1] in _GETTER_DECORATORS for c in d.decorators):
                # `self.cookies.extract(...)`: an attribute of a property is one of the value its
                # getter returns (its annotation, or what its `return` gives)
                return self.attr(self.apply_call(value, depth + 1), name, depth + 1, raw=raw)
            if d is not None and d.decorators:
                decorated = self.decorated(ident, depth + 1)
                if decorated is not None:
                    return self.member(decorated[1], name, depth + 1, raw=raw)
        return None

    def decorated(self, def_id: str, depth: int) -> Value:
        """The project instance a decorated def's name holds, when its outermost decorator says so:
        `@click.group()` makes `cli` a Group (group's `-> Callable[..., Group]`, or the annotation of
        the decorator the factory returns), `@d` with `def d(f) -> Command` a Command. None otherwise:
        the name then stays the def (most decorators return a wrapper of the same function)."""
        path, _, qual = def_id.partition("::")
        info = self.ws.info[path]
        dec = info.defs[qual].decorators[0]
        scope = qual.rpartition(".")[0]
        value: Value
        if dec[-1].endswith("()"):
            factory = self.deref_variable(self.eval_chain(info, scope, dec[:-1] + (dec[-1][:-2],), depth + 1), depth + 1)
            if factory is None or factory[0] != "sym":
                return None
            fpath, _, fqual = factory[1].partition("::")
            fdef = self.ws.info[fpath].defs.get(fqual)
            if fdef is None or fdef.kind == "class":
                return None
            if fdef.call_returns is not None:
                value = self.eval_chain(self.ws.info[fpath], fqual, fdef.call_returns, depth + 1)
            else:
                inner = self.returned_def(factory[1])
                value = self.apply_call(("sym", inner), depth + 1) if inner is not None else None
        else:
            target = self.deref_variable(self.eval_chain(info, scope, dec, depth + 1), depth + 1)
            if target is None or target[0] != "sym":
                return None
            tpath, _, tqual = target[1].partition("::")
            tdef = self.ws.info[tpath].defs.get(tqual)
            value = self.apply_call(target, depth + 1) if tdef is not None and tdef.kind != "class" else None
        return value if value is not None and value[0] == "inst" else None
