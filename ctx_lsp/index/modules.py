"""The module table of static binding: which module each file is (`module_names`, `Workspace`), what
it defines and imports (`ModuleInfo`), the interface keys an update compares (`interface_parts`,
`dep_key`, `name_dep`), and `ModuleScope`, the binder's base: module names and imports resolved to
values, recording in `deps` what each lookup consulted.
"""

from __future__ import annotations

import builtins
import hashlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ctx_lsp.index.facts import Def, FileFacts, Import
from ctx_lsp.index.model import RESOLVER_IMPORT, RESOLVER_MRO, RESOLVER_SCOPE, RESOLVER_TYPE, symbol_id

BUILTINS = frozenset(dir(builtins))
MAX_DEPTH = 14

# Values: ("mod", name) | ("sym", node_id) | ("inst", class_id) | ("super", class_id) | EXT | None (unknown)
Value = tuple[str, str] | None
EXT: tuple[str, str] = ("ext", "")


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


def import_wins(info: ModuleInfo, name: str) -> bool:
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


def top_classes(facts: FileFacts) -> frozenset[str]:
    """The top-level class names of a file (`ModuleInfo.classes`, without building its tables): the
    last definition of a name wins, as in build_module_info."""
    last = {d.qual: d for d in facts.defs}
    return frozenset(q for q, d in last.items() if "." not in q and d.kind == "class")


def interface_parts(facts: FileFacts) -> dict[str, tuple]:
    """What other files' bindings can depend on, keyed by `dep_key`: defs (names, kinds, bases, types,
    fixture flags), the imports binding each name, typed instance attributes, "*" for star imports,
    "__all__", and the imports and locals of the scopes other files evaluate chains in (see
    `_eval_scopes`). A class member's part includes its class's header (a new base changes them all).

    Body-only edits (lines moved, calls changed) leave every part unchanged, so dependents are not
    re-bound; an edit that changes one part re-binds only the files that read that key.
    """
    scopes = _eval_scopes(facts)
    classes = top_classes(facts)
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


def interface_digests(facts: FileFacts) -> dict[str, str]:
    """`interface_parts` with each part as a short digest: what an update compares, small enough to
    hand back from an extraction worker (which computes it beside the file's facts)."""
    return {k: hashlib.blake2b(repr(v).encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
            for k, v in interface_parts(facts).items()}


def changed_names(old: dict[str, Any], new: dict[str, Any]) -> set[str]:
    """Interface keys whose part differs between two `interface_parts` (or two `interface_digests`)."""
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
        # The per-file tables are built one by one as they are first read: a warm start would
        # otherwise build ~2,800 of them (0.1-0.25 s on Django) where an edit's binding or a task's
        # snippet reads a few hundred. Tables of the previous workspace whose facts object and
        # module name are unchanged are reused.
        self.info: ModuleTables = ModuleTables(self, previous.info if previous is not None else None)
        self._class_cache: dict[str, tuple[list[Value], frozenset[str]]] = {}
        self._mro_active: set[str] = set()  # MROs being computed (cycle guard)


class ModuleTables(dict[str, ModuleInfo]):
    """path -> ModuleInfo of a Workspace's files, each built on first read and then a plain dict entry
    (the binder reads them on its hottest path). `in` and `get` answer for every file of the workspace."""

    def __init__(self, ws: Workspace, previous: ModuleTables | None) -> None:
        super().__init__()
        self._ws = ws
        self._reuse: dict[str, ModuleInfo] = {}
        if previous is not None:
            facts = ws.facts
            for src in (previous._reuse, previous):
                for path, info in dict.items(src):
                    if facts.get(path) is info.facts:  # stale tables are dropped, not kept alive
                        self._reuse[path] = info

    def __missing__(self, path: str) -> ModuleInfo:
        f = self._ws.facts.get(path)
        if f is None:
            raise KeyError(path)
        module = self._ws.canonical[path]
        old = self._reuse.pop(path, None)
        info = old if old is not None and old.facts is f and old.module == module else build_module_info(f, module)
        self[path] = info
        return info

    def get(self, path: str, default: ModuleInfo | None = None) -> ModuleInfo | None:  # type: ignore[override]
        try:
            return self[path]
        except KeyError:
            return default

    def __contains__(self, path: object) -> bool:
        return path in self._ws.facts

    def build_all(self) -> None:
        for path in self._ws.facts:
            if not dict.__contains__(self, path):
                self.__missing__(path)

    def forget(self, path: str) -> None:
        """Drop a file's table (its facts changed): it is built again when next read."""
        self.pop(path, None)
        self._reuse.pop(path, None)


class ModuleScope:
    """The binder's base: names of modules and imports resolved to values against a Workspace,
    recording what each lookup consulted in `deps` (see `name_dep`)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.deps: set[str] = set()
        self.resolver = RESOLVER_SCOPE
        self._dep_keys: dict[str, dict[str, str]] = {}  # path -> qual -> its interned name_dep key

    # -- module level ---------------------------------------------------------------------
    def use(self, path: str, qual: str) -> None:
        """Record that binding read `path`'s tables under `qual`'s interface key (see dep_key)."""
        # memoised: the binder asks for the same (path, qual) thousands of times (a third of its time
        # on a large file went here); interned: the same keys recur across thousands of bindings
        keys = self._dep_keys.get(path)
        if keys is None:
            keys = self._dep_keys[path] = {}
        key = keys.get(qual)
        if key is None:
            info = self.ws.info.get(path)
            key = keys[qual] = sys.intern(name_dep(path, dep_key(info.classes, qual) if info is not None
                                                   else qual.partition(".")[0]))
        self.deps.add(key)

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
        if depth > MAX_DEPTH:
            return None
        path = self.module_path(module)
        if path is not None:
            info = self.ws.info[path]
            self.use(path, name)
            if name in info.top and not import_wins(info, name):
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
            if name in BUILTINS and name in info.top:
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
