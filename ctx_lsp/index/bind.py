"""Static binding: turns per-file facts into typed edges without jedi.

Binds what can be bound statically: imports (absolute, relative, re-exports, star), local and module
scopes, `self.method()` through the class and its bases, `ClassName(...)`, and attribute chains whose
types are known from annotations, `__init__` assignments, local assignments and return values.
A chain that leaves the workspace (stdlib, site-packages) resolves to EXTERNAL and never to a
same-named project symbol. What cannot be bound is counted as unresolved, for jedi to refine.

Every lookup is recorded in the binding's `deps`, at two grains: module names (found or not: the
module table can change) and, for every file whose tables were read, the top-level names read there
(`name_dep(path, top)`). The incremental updater re-binds a file only when a name it read changed.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field

from ctx_lsp.index.chains import FIXTURE, is_fixture
from ctx_lsp.index.facts import CALL, Chain, Def, FileFacts, Import
from ctx_lsp.index.model import (
    RESOLVER_CONTAINS,
    RESOLVER_IMPORT,
    RESOLVER_MRO,
    RESOLVER_SCOPE,
    RESOLVER_TYPE,
    Edge,
    EdgeKind,
    symbol_id,
)

_BUILTINS = frozenset(dir(builtins))
_OBJECT_ATTRS = frozenset(dir(object)) | {"__dict__", "__module__", "__qualname__", "__name__", "__mro__"}
_MAX_DEPTH = 14

# Values: ("mod", name) | ("sym", node_id) | ("inst", class_id) | ("super", class_id) | EXT | None (unknown)
Value = tuple[str, str] | None
EXT: tuple[str, str] = ("ext", "")

# pytest's built-in fixtures: objects of pytest or the stdlib, never the project's
_PYTEST_FIXTURES = frozenset({
    "request", "tmp_path", "tmp_path_factory", "tmpdir", "tmpdir_factory", "monkeypatch", "capsys", "capsysbinary",
    "capfd", "capfdbinary", "caplog", "recwarn", "pytestconfig", "record_property", "record_xml_attribute",
    "record_testsuite_property", "cache", "doctest_namespace", "testdir", "pytester",
})

# decorators that make a member a data descriptor (wins over an instance attribute of the same name)
_PROPERTY_DECORATORS = frozenset({"property", "setter", "getter", "deleter"})

# A dependency on a file by path (not module name): conftest.py files, found by directory, not import.
PATH_DEP = "\0path:"

# A dependency on one name of a file: a top-level name (its def or import binding), a member of a
# top-level class ("Class.member": adding a method to a hub class re-binds only the files that looked
# that method up), "*" for its star imports or "__all__". See `dep_key` and `interface_parts`.
NAME_DEP = "\0name:"


def name_dep(path: str, key: str) -> str:
    return f"{NAME_DEP}{path}\0{key}"


def dep_key(classes: frozenset[str] | set[str], qual: str) -> str:
    """The interface key `qual` belongs to: its top-level name, or "Class.member" inside a top-level
    class (members of nested classes and locals of methods fall under that member's key)."""
    head, _, rest = qual.partition(".")
    if rest and head in classes:
        return f"{head}.{rest.partition('.')[0]}"
    return head


# resolver ranks: the weakest step used names the edge's resolver
_RANK = {RESOLVER_SCOPE: 0, RESOLVER_IMPORT: 1, RESOLVER_MRO: 2, RESOLVER_TYPE: 3}


@dataclass(slots=True)
class ModuleInfo:
    """Binding-relevant tables of one file, derived from its facts."""

    facts: FileFacts
    module: str  # canonical dotted name
    package: str  # the package relative imports start from
    defs: dict[str, Def]
    top: dict[str, str]  # top-level name -> qual of its def
    imports: dict[str, list[Import]]  # scope -> imports made there (module level is "")
    bound: dict[str, dict[str, Import]]  # scope -> local name -> the import binding it
    stars: list[Import]
    members: dict[str, dict[str, str]]  # class qual -> member name -> member qual
    classes: frozenset[str]  # top-level class names (see dep_key)
    params: dict[str, tuple[str, ...]]  # def qual -> parameter names in order (flowfacts "params")
    returns_param: dict[str, str]  # def qual -> a parameter it returns (flowfacts "returns")
    returns_local: frozenset[str]  # defs that return a local, a parameter or a nested def by name


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


def module_names(path: str, is_package_dir: set[str]) -> list[str]:
    """Candidate dotted module names of a workspace-relative path, best first.

    The package-derived name (walking up while `__init__.py` exists) comes first, then the
    root-relative name, then the name relative to a `src/` or `lib/` directory.
    """
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    names: list[str] = []
    # The name starts at the highest ancestor directory that is a package; directories without an
    # `__init__.py` below it are namespace portions of that package (flask/sansio/app.py is
    # flask.sansio.app). With no package above, the file is a top-level module.
    dirs = path.split("/")[:-1]
    i = len(dirs)
    prefix = ""
    for k, d in enumerate(dirs):
        prefix = f"{prefix}/{d}" if prefix else d
        if prefix in is_package_dir:
            i = k
            break
    pkg_parts = parts[i:]
    if pkg_parts:
        names.append(".".join(pkg_parts))
    if parts:
        names.append(".".join(parts))
    for anchor in ("src", "lib"):
        if anchor in parts[:-1]:
            k = parts.index(anchor)
            if parts[k + 1 :]:
                names.append(".".join(parts[k + 1 :]))
    seen: set[str] = set()
    return [n for n in names if n and not (n in seen or seen.add(n))]  # type: ignore[func-returns-value]


def build_module_info(facts: FileFacts, module: str) -> ModuleInfo:
    defs = {d.qual: d for d in facts.defs}
    top = {q: q for q in defs if "." not in q}
    imports: dict[str, list[Import]] = {}
    bound: dict[str, dict[str, Import]] = {}
    stars: list[Import] = []
    for imp in facts.imports:
        imports.setdefault(imp.scope, []).append(imp)
        if imp.name == "*":
            if imp.scope == "":
                stars.append(imp)
            continue
        local = imp.asname or (imp.name if imp.name is not None else imp.module.split(".")[0])
        bound.setdefault(imp.scope, {}).setdefault(local, imp)
    members: dict[str, dict[str, str]] = {}
    for q in defs:
        parent, _, name = q.rpartition(".")
        if parent and parent in defs and defs[parent].kind == "class":
            members.setdefault(parent, {})[name] = q
    is_pkg = facts.path.endswith("__init__.py")
    package = module if is_pkg else module.rpartition(".")[0]
    classes = frozenset(q for q in top if defs[q].kind == "class")
    params: dict[str, tuple[str, ...]] = {}
    returns_param: dict[str, str] = {}
    returns_local: set[str] = set()
    for fl in facts.flows:
        if fl[1] == "params":
            params.setdefault(fl[0], tuple(fl[4]))
        elif fl[1] == "returns":
            returns_local.add(fl[0])
            if fl[5] in params.get(fl[0], ()):
                returns_param.setdefault(fl[0], fl[5])
    return ModuleInfo(facts, module, package, defs, top, imports, bound, stars, members, classes, params,
                      returns_param, frozenset(returns_local))


def _import_wins(info: ModuleInfo, name: str) -> bool:
    """A module variable with no usable value (`except ImportError: helper = None`) loses to an import
    of the same name: the import is the binding that is there when the code actually runs. A
    variable that rebinds its own name (`str = str`, a compat module's re-export) is transparent:
    the name means what it meant before."""
    d = info.defs[info.top[name]]
    if d.kind != "variable":
        return False
    return (d.value is None and name in info.bound.get("", {})) or d.value == (name,)


def _eval_scopes(facts: FileFacts) -> set[str]:
    """Scopes in which other files' bindings evaluate this file's chains, with their ancestors.

    Another file evaluates a function's return type in the function's scope, a class's bases in its
    enclosing scope, an instance attribute's type in the method that assigned it and a variable's value
    in its enclosing scope; lookups there walk up to the module. The locals and imports of exactly these
    scopes are part of the interface.
    """
    seeds: set[str] = set()
    for d in facts.defs:
        parent = d.qual.rpartition(".")[0]
        if d.returns is not None:
            seeds.add(d.qual)
        if d.kind == "class":
            seeds.add(parent)
            seeds.update(scope for scope, _ in d.attrs.values())
        elif d.kind == "variable":
            seeds.add(parent)
    out: set[str] = set()
    for s in seeds:
        while s and s not in out:
            out.add(s)
            s = s.rpartition(".")[0]
    return out


def interface_parts(facts: FileFacts) -> dict[str, tuple]:
    """What other files' bindings can depend on, keyed by `dep_key`: defs (names, kinds, bases, types,
    fixture flags), the imports binding each name, typed instance attributes, "*" for star imports,
    "__all__", and the imports and locals of the scopes other files evaluate chains in (see
    `_eval_scopes`). A class member's part includes its class's header (a new base changes them all).

    Body-only edits (lines moved, calls changed) leave every part unchanged, so dependents are not
    re-bound; an edit that changes one part re-binds only the files that read that key.
    """
    scopes = _eval_scopes(facts)
    last = {d.qual: d for d in facts.defs}  # later definitions win, as in build_module_info
    classes = frozenset(q for q, d in last.items() if "." not in q and d.kind == "class")
    parts: dict[str, list] = {}
    for d in facts.defs:
        parts.setdefault(dep_key(classes, d.qual), []).append(
            (d.qual, d.kind, tuple(d.bases), d.returns, d.returns_def, d.returns_call, d.call_returns, d.value, tuple(d.decorators),
             tuple(sorted(d.locals.items(), key=lambda kv: kv[0])) if d.qual in scopes else ()))
        for name, attr in sorted(d.attrs.items()):
            parts.setdefault(dep_key(classes, f"{d.qual}.{name}"), []).append(("attr", d.qual, name, attr))
    for i in facts.imports:
        item = ("import", i.scope, i.module, i.name, i.asname, i.level)
        if i.scope:
            if i.scope in scopes:
                local = i.asname or (i.name if i.name is not None else i.module.split(".")[0])
                parts.setdefault(dep_key(classes, f"{i.scope}.{local}"), []).append(item)
        elif i.name == "*":
            parts.setdefault("*", []).append(item)
        else:
            parts.setdefault(i.asname or (i.name if i.name is not None else i.module.split(".")[0]), []).append(item)
    if facts.all_names is not None:
        parts.setdefault("__all__", []).append(tuple(facts.all_names))
    for fl in facts.flows:
        if fl[1] in ("params", "returns"):  # what other files' flow bindings read (see bind_flows)
            parts.setdefault(dep_key(classes, fl[0]), []).append((fl[1], fl[0], tuple(fl[4]), fl[5]))
    headers = {k: tuple(v) for k, v in parts.items() if k in classes}
    return {k: headers.get(k.partition(".")[0], ()) + tuple(v) if "." in k else tuple(v) for k, v in parts.items()}


def changed_names(old: dict[str, tuple], new: dict[str, tuple]) -> set[str]:
    """Top-level names whose interface part differs between two `interface_parts`."""
    return {k for k in old.keys() | new.keys() if old.get(k) != new.get(k)}


class Workspace:
    """The module table over all files' facts; resolves names across files."""

    def __init__(self, facts_by_path: dict[str, FileFacts], previous: Workspace | None = None) -> None:
        """`previous`: a workspace over mostly the same facts; its per-file tables are reused for files
        whose facts object and module name are unchanged (adding or removing one file is then cheap)."""
        self.facts = facts_by_path
        package_dirs = {p[: -len("/__init__.py")] for p in facts_by_path if p.endswith("/__init__.py")}
        self.package_dirs = package_dirs
        # module name -> path; first claim by the best candidate wins, deterministic order
        claims: dict[str, tuple[int, int, str]] = {}
        self.canonical: dict[str, str] = {}
        for path in facts_by_path:
            names = module_names(path, package_dirs)
            self.canonical[path] = names[0] if names else path
            for rank, name in enumerate(names):
                key = (rank, len(path), path)
                if name not in claims or key < claims[name]:
                    claims[name] = key
        self.modules: dict[str, str] = {name: key[2] for name, key in claims.items()}
        # dotted prefixes that exist (namespace packages have no file but are still project modules)
        self.prefixes: set[str] = set()
        for name in self.modules:
            parts = name.split(".")
            for i in range(1, len(parts)):
                self.prefixes.add(".".join(parts[:i]))
        self.info: dict[str, ModuleInfo] = {}
        for path, f in facts_by_path.items():
            old = previous.info.get(path) if previous is not None else None
            if old is not None and old.facts is f and old.module == self.canonical[path]:
                self.info[path] = old
            else:
                self.info[path] = build_module_info(f, self.canonical[path])
        self._class_cache: dict[str, tuple[list[Value], frozenset[str]]] = {}
        self._mro_active: set[str] = set()  # MROs being computed (cycle guard)


class Binder:
    """Binds one file at a time against a Workspace, recording the modules each file consulted."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.deps: set[str] = set()
        self.resolver = RESOLVER_SCOPE

    # -- module level ---------------------------------------------------------------------
    def use(self, path: str, qual: str) -> None:
        """Record that binding read `path`'s tables under `qual`'s interface key (see dep_key)."""
        info = self.ws.info.get(path)
        # interned: the same keys recur across thousands of bindings
        self.deps.add(sys.intern(name_dep(path, dep_key(info.classes, qual) if info is not None else qual.partition(".")[0])))

    def module_path(self, name: str) -> str | None:
        self.deps.add(name)
        return self.ws.modules.get(name)

    def is_project_module(self, name: str) -> bool:
        self.deps.add(name)
        return name in self.ws.modules or name in self.ws.prefixes

    def _weaken(self, resolver: str) -> None:
        if _RANK[resolver] > _RANK[self.resolver]:
            self.resolver = resolver

    def module_attr(self, module: str, name: str, depth: int) -> Value:
        """`module.name`: a def, an import re-exported by the module, or a submodule."""
        if depth > _MAX_DEPTH:
            return None
        path = self.module_path(module)
        if path is not None:
            info = self.ws.info[path]
            self.use(path, name)
            if name in info.top and not _import_wins(info, name):
                return ("sym", symbol_id(path, info.top[name]))
            imp = info.bound.get("", {}).get(name)
            if imp is not None and not (imp.name == name and self.absolute(info, imp) == module):
                self._weaken(RESOLVER_IMPORT)
                return self.import_value(info, imp, depth + 1)
            # else `from . import name` inside the package itself: that is the submodule, found below
        sub = f"{module}.{name}"
        if self.is_project_module(sub):
            return ("mod", sub)
        if path is not None:
            info = self.ws.info[path]
            for target, tinfo in self._star_sources(info, name, skip=module):
                if name.startswith("_") and tinfo.facts.all_names is None:
                    continue
                value = self.module_attr(target, name, depth + 1)
                if value is not None:
                    self._weaken(RESOLVER_IMPORT)
                    return value
            if name in _BUILTINS and name in info.top:
                return EXT  # `str = str` in a compat module: the builtin
            return None  # a project module without that name: unresolved, not external
        if self.is_project_module(module):
            return None
        return EXT

    def _star_sources(self, info: ModuleInfo, name: str, skip: str | None = None) -> Iterator[tuple[str, ModuleInfo]]:
        """Project modules a file star-imports that may export `name` (by their `__all__`)."""
        self.use(info.facts.path, "*")
        for star in info.stars:
            target = self.absolute(info, star)
            if target is None or target == skip:
                continue
            tpath = self.module_path(target)
            if tpath is None:
                continue
            tinfo = self.ws.info[tpath]
            self.use(tpath, "__all__")
            if tinfo.facts.all_names is not None and name not in tinfo.facts.all_names:
                continue
            yield target, tinfo

    def absolute(self, info: ModuleInfo, imp: Import) -> str | None:
        if imp.level == 0:
            return imp.module
        base = info.package.split(".") if info.package else []
        if imp.level - 1 > len(base):
            return None
        base = base[: len(base) - (imp.level - 1)] if imp.level > 1 else base
        parts = base + ([imp.module] if imp.module else [])
        return ".".join(p for p in parts if p)

    def import_value(self, info: ModuleInfo, imp: Import, depth: int) -> Value:
        module = self.absolute(info, imp)
        if module is None:
            return None
        if imp.name is None:
            target = module if imp.asname else module.split(".")[0]
            return ("mod", target) if self.is_project_module(target) else EXT
        return self.module_attr(module, imp.name, depth)

    # -- scopes ---------------------------------------------------------------------------
    def lookup(self, info: ModuleInfo, scope: str, name: str, depth: int) -> Value:
        """Resolve a bare name as Python would from `scope` (a def qual, "" for module level)."""
        if depth > _MAX_DEPTH:
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
        if name in info.top and not _import_wins(info, name):
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
        if name in _BUILTINS:
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
        if depth > _MAX_DEPTH or not chain:
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
        while value is not None and value[0] == "sym" and depth <= _MAX_DEPTH:
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
        if info is None or depth > _MAX_DEPTH:
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
            if cid in seen or d > _MAX_DEPTH:
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
        self.deps = saved | deps
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
        for index, site in enumerate(facts.sites):
            self.resolver = RESOLVER_SCOPE
            chain = site.chain
            recv: Value = None
            if len(chain) == 1:
                value = self.lookup(info, site.scope, chain[0].rstrip("()") if chain[0].endswith("()") else chain[0], 0)
                if chain[0].endswith("()"):
                    value = self.call_result(value, 0)
            else:
                value = recv = self.eval_chain(info, site.scope, chain[:-1], 0)
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
