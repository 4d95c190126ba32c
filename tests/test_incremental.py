"""Incremental updates equal a build from scratch (hypothesis).

A small generated multi-file package is edited by random operations (add/remove/rename functions and
classes, change imports and bases, create/delete/rename files including `__init__.py`, introduce and
fix syntax errors). After every step the incrementally updated index must equal an index built from
scratch on the same contents: same nodes, same edges with the same provenance, same per-file bindings
(including edges whose target does not exist) and the same resolution counts.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctx_lsp.index.workspace import WorkspaceIndex

PATHS = [
    "pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/sub/__init__.py", "pkg/sub/c.py", "pkg/sub/d.py",
    "top.py", "other/e.py", "other/__init__.py", "pkg/a/__init__.py",
]
CLASSES = ["Alpha", "Beta", "Gamma"]
FUNCS = ["make", "helper", "get"]
METHODS = ["run", "save", "__init__"]
BASES = ["Alpha", "Beta", "Gamma", "a.Alpha", "pb.Beta", "Exception", "Alias", "c.Gamma"]
MODULE_STMTS = [
    "from pkg.a import Alpha",
    "from pkg.b import Beta, make",
    "from .a import Gamma",
    "from . import a",
    "from .. import b",
    "import pkg.b as pb",
    "from pkg import *",
    "from .sub.c import helper",
    "from pkg.sub import c",
    "from .b import *",
    "import top",
    "from top import get as make",
    "try:\n    from pkg.a import helper\nexcept ImportError:\n    helper = None",
    "if TYPE_CHECKING:\n    from pkg.b import Gamma",
    "Alias = Alpha",
    "__all__ = ['Alpha', 'make', 'Gamma']",
    "import requests",
    "a = make()",
]
BODIES = [
    "return Alpha()",
    "return make().run()",
    "Beta().save()",
    "x = Gamma()\nx.run()",
    "helper()",
    "a.make()",
    "pb.Beta().run()",
    "return get(1)",
    "requests.get(1).json()",
    "return Alias().save()",
    "top.get().run()",
    "c.helper()",
    "helper = 1\nreturn helper()",  # a local shadowing a module name, in a function whose return type matters
    "(helper=None)\nreturn helper()",  # a parameter doing the same
    "from pkg.b import Beta as Alpha\nreturn Alpha()",  # a function-scope import deciding the return type
    "from pkg.sub.c import Gamma as Alpha\nreturn Alpha()",
    "class Inner(Alpha):\n    pass\nreturn Inner().run()",  # a nested class based on a module name
    "def inner():\n    return Alpha()\nreturn inner",  # a decorator factory/decorator returning its nested def
    "def inner():\n    return Beta()\nreturn update_wrapper(inner, Beta)",
    "return make()(1)",  # a call of a call's result
    "return helper(1)(2).run()",
    "h = make()\nreturn h()",  # a callback received from a call (flow.py: return values)
    "cb = get\nfor f in [cb]:\n    f()\nreturn cb(1)",  # local aliases of a function value
]
# decorators put on functions and methods: plain, factories, through modules and aliases
DECORATORS = ["", "@make", "@helper()", "@get", "@a.make", "@make()", "@pb.Beta", "@Alias"]
METHOD_BODIES = BODIES + [
    "self.run()",
    "super().save()",
    "self.dep.save()",
    "self.other.run()",
    "return type(self)()",
    "Gamma = make\nself.extra = Gamma()\nreturn self.extra.run()",
    "self.cb = helper\nreturn self.cb()",  # a stored callback called as an attribute
    "return self.dep.run(self.cb)",  # a stored attribute passed on
]
# (extra parameters, first body lines): rebinds a name inside a function without touching its return chain
SHADOWS = [
    ("", ""),
    ("", "helper = 1"),
    ("helper=None", ""),
    ("", "from pkg.b import Beta as Alpha"),
    ("", "Gamma = make"),
    ("", "from pkg.sub.c import Gamma as Alpha\nGamma = Alpha"),
    ("helper=None", "if helper is None:\n    helper = make"),  # a None default filled in the body
    ("**kw", "kw.setdefault('f', get)\nmake(**kw)"),  # keywords forwarded through **kwargs
]
BROKEN = [
    "",
    "\ndef broken(:\n    pass\n",
    "\nclass Broken(\n",
    "\ndef bad():\n  x = 1\n    y = 2\n",
]


@dataclass
class ClassModel:
    bases: list[str] = field(default_factory=list)
    methods: dict[str, str] = field(default_factory=dict)


@dataclass
class FileModel:
    stmts: list[str] = field(default_factory=list)
    classes: dict[str, ClassModel] = field(default_factory=dict)
    funcs: dict[str, str] = field(default_factory=dict)
    shadows: dict[str, int] = field(default_factory=dict)  # function or "Class.__init__" -> SHADOWS index
    decorators: dict[str, int] = field(default_factory=dict)  # function or "Class.method" -> DECORATORS index
    broken: int = 0

    def render(self) -> str:
        out: list[str] = ['"""generated"""']
        out.extend(self.stmts)
        for name, cls in self.classes.items():
            out.append(f"\n\nclass {name}({', '.join(cls.bases)}):" if cls.bases else f"\n\nclass {name}:")
            out.append("    attr: Beta")
            for m, body in cls.methods.items():
                if m == "__init__":
                    params, prefix = SHADOWS[self.shadows.get(f"{name}.__init__", 0)]
                    out.append(f"    def __init__(self, dep: Alpha = None{', ' + params if params else ''}):")
                    out.extend("        " + line for line in prefix.splitlines())
                    out.append("        self.dep = dep")
                    out.append("        self.other = Gamma()")
                else:
                    if self.decorators.get(f"{name}.{m}"):
                        out.append("    " + DECORATORS[self.decorators[f"{name}.{m}"]])
                    out.append(f"    def {m}(self):")
                if body.startswith("("):
                    body = body.partition("\n")[2]
                out.extend("        " + line for line in body.splitlines())
        for name, body in self.funcs.items():
            params = "()"
            if body.startswith("("):
                params, _, body = body.partition("\n")
            extra, prefix = SHADOWS[self.shadows.get(name, 0)]
            if extra:
                params = f"({extra})" if params == "()" else params
            deco = DECORATORS[self.decorators.get(name, 0)]
            out.append(f"\n\n{deco}\ndef {name}{params}:" if deco else f"\n\ndef {name}{params}:")
            out.extend("    " + line for line in (prefix.splitlines() + body.splitlines()))
        return "\n".join(out) + "\n" + BROKEN[self.broken]


def initial() -> dict[str, FileModel]:
    return {
        "pkg/__init__.py": FileModel(stmts=["from .a import Alpha", "from .b import *"]),
        "pkg/a.py": FileModel(stmts=["from .b import Beta"],
                              classes={"Alpha": ClassModel(["Beta"], {"run": "self.save()"})},
                              funcs={"make": "return Alpha()"}),
        "pkg/b.py": FileModel(stmts=["import requests", "from pkg.a import make"],
                              classes={"Beta": ClassModel([], {"save": "requests.get(1)", "__init__": "pass"})},
                              funcs={"helper": "return Beta()", "get": "return make().run()"}),
        "pkg/sub/__init__.py": FileModel(),
        "pkg/sub/c.py": FileModel(stmts=["from .. import b", "from ..a import Alpha"],
                                  classes={"Gamma": ClassModel(["Alpha"], {"run": "super().run()"})},
                                  funcs={"get": "return b.helper()"}),
        "top.py": FileModel(stmts=["from pkg import Alpha", "from pkg.sub.c import Gamma"],
                            funcs={"get": "return Gamma()", "make": "return Gamma().other.run()"}),
    }


# One operation: (kind, i, j, k) with small integers interpreted per kind; nonsensical ones are no-ops.
OPS = ["add_func", "remove_def", "rename_def", "add_class", "set_bases", "add_stmt", "remove_stmt",
       "create_file", "delete_file", "rename_file", "break", "fix", "add_method", "shadow", "shadow",
       "decorate", "decorate"]
op_strategy = st.tuples(st.sampled_from(OPS), st.integers(0, 40), st.integers(0, 40), st.integers(0, 40))


def apply_op(model: dict[str, FileModel], op: tuple[str, int, int, int]) -> tuple[str, Any] | None:
    """Mutate the model; return what happened to files: ("write", path) | ("delete", path) | ("rename", (old, new))."""
    kind, i, j, k = op
    files = sorted(model)
    if kind == "create_file":
        path = PATHS[i % len(PATHS)]
        if path in model:
            return None
        model[path] = FileModel(stmts=[MODULE_STMTS[j % len(MODULE_STMTS)]], funcs={FUNCS[k % 3]: BODIES[k % len(BODIES)]})
        return ("write", path)
    if not files:
        return None
    path = files[i % len(files)]
    fm = model[path]
    if kind == "delete_file":
        del model[path]
        return ("delete", path)
    if kind == "rename_file":
        new = PATHS[j % len(PATHS)]
        if new == path:
            return None
        model[new] = model.pop(path)
        return ("rename", (path, new))
    if kind == "add_func":
        fm.funcs[FUNCS[j % 3]] = BODIES[k % len(BODIES)]
    elif kind == "remove_def":
        name = (CLASSES + FUNCS)[j % 6]
        if fm.classes.pop(name, None) is None and fm.funcs.pop(name, None) is None:
            return None
    elif kind == "rename_def":
        old, new = (CLASSES + FUNCS)[j % 6], (CLASSES + FUNCS)[k % 6]
        if old in fm.classes and new in CLASSES:
            fm.classes[new] = fm.classes.pop(old)
        elif old in fm.funcs and new in FUNCS:
            fm.funcs[new] = fm.funcs.pop(old)
        else:
            return None
    elif kind == "add_class":
        fm.classes[CLASSES[j % 3]] = ClassModel([BASES[k % len(BASES)]] if k % 3 else [],
                                                {METHODS[k % 3]: METHOD_BODIES[(j + k) % len(METHOD_BODIES)]})
    elif kind == "add_method":
        if not fm.classes:
            return None
        cls = fm.classes[sorted(fm.classes)[j % len(fm.classes)]]
        cls.methods[METHODS[k % 3]] = METHOD_BODIES[(j * 7 + k) % len(METHOD_BODIES)]
    elif kind == "set_bases":
        if not fm.classes:
            return None
        cls = fm.classes[sorted(fm.classes)[j % len(fm.classes)]]
        cls.bases = [BASES[b % len(BASES)] for b in {k % 9, (k // 9) % 9} if b < len(BASES)][: 1 + k % 2]
    elif kind == "add_stmt":
        stmt = MODULE_STMTS[j % len(MODULE_STMTS)]
        if stmt in fm.stmts:
            return None
        fm.stmts.insert(k % (len(fm.stmts) + 1), stmt)
    elif kind == "remove_stmt":
        if not fm.stmts:
            return None
        fm.stmts.pop(j % len(fm.stmts))
    elif kind == "shadow":
        targets = sorted(fm.funcs) + [f"{c}.__init__" for c, m in sorted(fm.classes.items()) if "__init__" in m.methods]
        if not targets:
            return None
        fm.shadows[targets[j % len(targets)]] = k % len(SHADOWS)
    elif kind == "decorate":
        targets = sorted(fm.funcs) + [f"{c}.{m}" for c, cm in sorted(fm.classes.items()) for m in sorted(cm.methods)
                                      if m != "__init__"]
        if not targets:
            return None
        fm.decorators[targets[j % len(targets)]] = k % len(DECORATORS)
    elif kind == "break":
        fm.broken = 1 + j % (len(BROKEN) - 1)
    elif kind == "fix":
        if not fm.broken:
            return None
        fm.broken = 0
    return ("write", path)


def comparable(index: WorkspaceIndex) -> dict[str, Any]:
    nodes, edges = index.graph.snapshot()
    return {
        "nodes": nodes,
        "edges": edges,
        # every binding, including edges whose target does not exist (not in the graph), and what the
        # next update reads of it: its dependency keys, flows and site groups (kept or evaluated again)
        "bindings": {p: (tuple(b.edges), b.internal, b.external, tuple(b.unresolved), frozenset(b.deps),
                         tuple(b.flows), tuple(sorted(b.groups.items())))
                     for p, b in sorted(index.bindings.items())},
        "files": sorted(index.facts),
        "errors": index.errors(),
        # the name index symbol lookups read (a warm start fills it without set_file)
        "names": {name: sorted(ids) for name, ids in sorted(index.graph.by_name.items()) if ids},
    }


def write_model(root: Path, model: dict[str, FileModel]) -> None:
    for rel, fm in model.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(fm.render(), encoding="utf-8")


def from_scratch(model: dict[str, FileModel]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        write_model(root, model)
        index = WorkspaceIndex(root, cache_dir=Path(tmp) / "cache", workers=1)
        index.load_or_build()
        return comparable(index)


def diff(a: dict[str, Any], b: dict[str, Any]) -> str:
    lines = []
    for key in a:
        if a[key] != b[key]:
            if key in ("nodes", "edges"):
                lines.append(f"{key}: only incremental {sorted(a[key] - b[key], key=str)[:6]}; "
                             f"only scratch {sorted(b[key] - a[key], key=str)[:6]}")
            elif key == "bindings":
                for p in sorted(set(a[key]) | set(b[key])):
                    if a[key].get(p) != b[key].get(p):
                        lines.append(f"binding {p}: incremental {a[key].get(p)}\n   scratch {b[key].get(p)}")
            else:
                lines.append(f"{key}: {a[key]} != {b[key]}")
    return "\n".join(lines)


SETTINGS = settings(max_examples=int(os.environ.get("CTX_HYPO_EXAMPLES", "60")), deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(st.lists(op_strategy, min_size=1, max_size=8))
def test_api_updates_equal_scratch_build(ops: list[tuple[str, int, int, int]]) -> None:
    """Changes applied through update_file / remove_file / rename_file."""
    model = initial()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        write_model(root, model)
        index = WorkspaceIndex(root, cache_dir=Path(tmp) / "cache", workers=1)
        index.load_or_build()
        for step, op in enumerate(ops):
            what = apply_op(model, op)
            if what is None:
                continue
            action, arg = what
            if action == "write":
                index.update_file(arg, model[arg].render())
            elif action == "delete":
                index.remove_file(arg)
            else:
                old, new = arg
                index.rename_file(old, new, model[new].render())
            got, want = comparable(index), from_scratch(model)
            assert got == want, f"after step {step} {op} -> {what}:\n{diff(got, want)}"


@SETTINGS
@given(st.lists(op_strategy, min_size=1, max_size=6))
def test_disk_changes_refresh_and_warm_start_equal_scratch_build(ops: list[tuple[str, int, int, int]]) -> None:
    """Changes written to disk and picked up by refresh(); then a warm start from the saved cache."""
    model = initial()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        write_model(root, model)
        cache = Path(tmp) / "cache"
        index = WorkspaceIndex(root, cache_dir=cache, workers=1)
        index.load_or_build()
        tick = 1_700_000_000_000_000_000
        for op in ops:
            what = apply_op(model, op)
            if what is None:
                continue
            action, arg = what
            touched: list[str] = []
            if action == "write":
                touched = [arg]
            elif action == "delete":
                (root / arg).unlink()
            else:
                old, new = arg
                (root / new).parent.mkdir(parents=True, exist_ok=True)
                os.replace(root / old, root / new)
                touched = [new]
            for rel in touched:
                p = root / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_text(model[rel].render(), encoding="utf-8")
                tick += 1_000_000_000  # a distinct mtime even on coarse-grained file systems
                os.utime(p, ns=(tick, tick))
            index.refresh()
        want = from_scratch(model)
        got = comparable(index)
        assert got == want, f"refresh after {ops}:\n{diff(got, want)}"
        warm = WorkspaceIndex(root, cache_dir=cache, workers=1)
        report = warm.load_or_build()
        assert report.warm and report.extracted == 0
        got = comparable(warm)
        assert got == want, f"warm start after {ops}:\n{diff(got, want)}"


# Regressions the generator found, pinned as plain examples: (files, path to change, new text or None = delete)
A_PY = ("class A:\n    def run(self): pass\n\n\nclass B:\n    def run(self): pass\n\n\n"
        "def helper():\n    return A()\n\n\ndef get():\n    return helper()\n")
REDEF_PY = """from functools import singledispatch

from pkg.a import A, B


@singledispatch
def handle(x):
    return x


@handle.register(int)
def _(x):
    return A().run()


@handle.register(str)
def _(x):
    return B()


class Box:
    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self._v = A().run()
"""
# a registry storing callbacks, and a module registering one (callback flow, flow.py)
REG_PY = ("class Registry:\n    def __init__(self):\n        self.hooks = []\n\n"
          "    def hook(self, fn):\n        self.hooks.append(fn)\n\n"
          "    def run(self):\n        for fn in self.hooks:\n            fn()\n\n\nregistry = Registry()\n")
H_PY = "from pkg.reg import registry\n\n\ndef job():\n    pass\n\n\ndef setup():\n    registry.hook(job)\n"
CMD_PY = ("import typing as t\n\n\nclass Command:\n    def __init__(self, callback=None):\n"
          "        self.callback = callback\n\n    def invoke(self):\n        return self.callback()\n\n\n"
          "class Group(Command):\n    def command(self):\n        def decorator(f):\n"
          "            return Command(f)\n        return decorator\n\n\n"
          "def command(cls=None):\n    if cls is None:\n        cls = t.cast('type[Command]', Command)\n\n"
          "    def decorator(f):\n        return cls(callback=f)\n    return decorator\n\n\n"
          "def group() -> t.Callable[[t.Callable], Group]:\n    return command(Group)\n")
CLI_PY = ("from pkg.cmd import group\n\n\ndef build():\n    @group()\n    def cli():\n        pass\n\n"
          "    @cli.command()\n    def sub():\n        pass\n")
LOOKUP_PY = ("class Handlers:\n    def __init__(self):\n        self.spec = {}\n\n"
             "    def add(self, fn):\n        self.spec[1] = fn\n\n"
             "    def find(self):\n        table = self.spec\n        handler = table.get(1)\n        return handler\n\n"
             "    def handle(self):\n        handler = self.find()\n        return handler()\n")
USE_LOOKUP_PY = "from pkg.lk import Handlers\n\n\ndef job():\n    pass\n\n\ndef wire(h: Handlers):\n    h.add(job)\n"
KW_PY = ("class Param:\n    def __init__(self, callback=None, **attrs):\n        self.callback = callback\n\n"
         "    def process(self):\n        return self.callback()\n\n\n"
         "def option(**attrs):\n    return Param(**attrs)\n")
KW_USE_PY = "from pkg.kw import option\n\n\ndef job():\n    pass\n\n\ndef wire():\n    option(callback=job)\n"
REGRESSIONS = {
    # a parameter now shadows the module function the return type was computed from
    "parameter-shadows-return": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY, "pkg/u.py": "from pkg.a import get\n\n\ndef f():\n    get().run()\n"},
        "pkg/a.py", A_PY.replace("def get():", "def get(helper=None):"),
    ),
    # a function-scope import decides the return type; only the imported name changes
    "scoped-import-return": (
        {"pkg/__init__.py": "", "pkg/u.py": "from pkg.a import get\n\n\ndef f():\n    get().run()\n",
         "pkg/a.py": A_PY.replace("    return helper()", "    from pkg.a import A as helper\n    return helper()")},
        "pkg/a.py", A_PY.replace("    return helper()", "    from pkg.a import B as helper\n    return helper()"),
    ),
    # deleting an __init__.py renames a module whose relative imports then fail; its dependents must follow
    "init-deleted-relative-base": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY, "pkg/sub/__init__.py": "",
         "pkg/sub/c.py": "from ..a import A\n\n\nclass C(A):\n    pass\n",
         "top.py": "from pkg.sub.c import C\n\n\ndef go():\n    C().run()\n",
         "a.py": "class A:\n    pass\n"},  # what `..a` means once pkg is no longer a package
        "pkg/__init__.py", None,
    ),
    # a conftest.py appears next to a test: its fixture now types the test's parameter
    "conftest-created": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY, "tests/test_x.py": "def test_it(thing):\n    thing.run()\n"},
        "tests/conftest.py", "import pytest\nfrom pkg.a import A\n\n\n@pytest.fixture\ndef thing():\n    return A()\n",
    ),
    # the fixture in a parent directory's conftest.py changes what it provides
    "conftest-fixture-changed": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY, "tests/unit/test_x.py": "def test_it(thing):\n    thing.run()\n",
         "tests/conftest.py": "import pytest\nfrom pkg.a import A\n\n\n@pytest.fixture\ndef thing():\n    yield A()\n"},
        "tests/conftest.py", "import pytest\nfrom pkg.a import B\n\n\n@pytest.fixture\ndef thing():\n    yield B()\n",
    ),
    # a fixture imported into conftest.py from a plugin module changes in that module
    "imported-fixture-changed": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY, "tests/test_x.py": "def test_it(thing):\n    thing.run()\n",
         "tests/conftest.py": "from pkg.fixtures import *\n",
         "pkg/fixtures.py": "import pytest\nfrom pkg.a import A\n\n\n@pytest.fixture\ndef thing():\n    return A()\n"},
        "pkg/fixtures.py", "import pytest\nfrom pkg.a import B\n\n\n@pytest.fixture\ndef thing():\n    return B()\n",
    ),
    # name-level dependencies: each change below alters one top-level name that another file read
    # indirectly (through a variable's value, a base's MRO, a star import's __all__, a decorator)
    "fixture-decorator-removed": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY, "tests/test_x.py": "def test_it(thing):\n    thing.run()\n",
         "tests/conftest.py": "import pytest\nfrom pkg.a import A\n\n\n@pytest.fixture\ndef thing():\n    return A()\n"},
        "tests/conftest.py", "import pytest\nfrom pkg.a import A\n\n\ndef thing():\n    return A()\n",
    ),
    "alias-target-retyped": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY, "pkg/v.py": "from pkg.a import A, B\n\nfactory = A\n",
         "pkg/u.py": "from pkg.v import factory\n\n\ndef go():\n    factory().run()\n"},
        "pkg/v.py", "from pkg.a import A, B\n\nfactory = B\n",
    ),
    "base-gains-method-two-files-away": (
        {"pkg/__init__.py": "", "pkg/base.py": "class Root:\n    pass\n",
         "pkg/mid.py": "from pkg.base import Root\n\n\nclass Mid(Root):\n    pass\n",
         "pkg/leaf.py": "from pkg.mid import Mid\n\n\nclass Leaf(Mid):\n    def save(self):\n        pass\n"},
        "pkg/base.py", "class Root:\n    def save(self):\n        pass\n",
    ),
    "instance-attribute-retyped": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY,
         "pkg/holder.py": "from pkg.a import A, B\n\n\nclass Holder:\n    def __init__(self):\n        self.part = A()\n",
         "pkg/user.py": "from pkg.holder import Holder\n\n\nclass User(Holder):\n    def go(self):\n        self.part.run()\n"},
        "pkg/holder.py", "from pkg.a import A, B\n\n\nclass Holder:\n    def __init__(self):\n        self.part = B()\n",
    ),
    "class-gains-base-with-member": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY,
         "pkg/k.py": "from pkg.a import A\n\n\nclass K:\n    pass\n",
         "pkg/user.py": "from pkg.k import K\n\n\ndef go():\n    K().run()\n"},
        "pkg/k.py", "from pkg.a import A\n\n\nclass K(A):\n    pass\n",
    ),
    # callback flow (flow.py): a handler registered in another file stops being registered
    "flow-handler-unregistered": (
        {"pkg/__init__.py": "", "pkg/reg.py": REG_PY, "pkg/h.py": H_PY},
        "pkg/h.py", H_PY.replace("registry.hook(job)", "pass"),
    ),
    "flow-store-moves-to-another-attribute": (
        {"pkg/__init__.py": "", "pkg/reg.py": REG_PY, "pkg/h.py": H_PY},
        "pkg/reg.py", REG_PY.replace("self.hooks.append(fn)", "self.others = [fn]"),
    ),
    # a decorated def is typed by its factory's `-> Callable[..., Group]`: retyping it retargets `cli.command()`
    "factory-callable-result-retyped": (
        {"pkg/__init__.py": "", "pkg/cmd.py": CMD_PY, "pkg/cli.py": CLI_PY},
        "pkg/cmd.py", CMD_PY.replace("t.Callable[[t.Callable], Group]", "t.Callable[[t.Callable], Command]"),
    ),
    # a factory returning another factory's decorator: what `group()` returns follows `command`
    "returned-call-retargeted": (
        {"pkg/__init__.py": "", "pkg/cmd.py": CMD_PY, "pkg/cli.py": CLI_PY},
        "pkg/cmd.py", CMD_PY.replace("    return command(Group)", "    return Group(None)"),
    ),
    # a lookup method's return value stops handing out the stored handler
    "flow-return-value-dropped": (
        {"pkg/__init__.py": "", "pkg/lk.py": LOOKUP_PY, "pkg/u.py": USE_LOOKUP_PY},
        "pkg/lk.py", LOOKUP_PY.replace("        return handler\n", "        return None\n"),
    ),
    # a keyword forwarded through `**attrs` stops reaching the parameter that stores it
    "flow-kwargs-forwarding-dropped": (
        {"pkg/__init__.py": "", "pkg/kw.py": KW_PY, "pkg/u.py": KW_USE_PY},
        "pkg/kw.py", KW_PY.replace("return Param(**attrs)", "return Param()"),
    ),
    # redefinitions: a registration inserted before others renumbers `_#2`, `_#3` (a name two
    # statements define: the whole file is extracted again)
    "redefinition-inserted-before-others": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY, "pkg/reg.py": REDEF_PY},
        "pkg/reg.py", REDEF_PY.replace("@handle.register(int)", "@handle.register(float)\ndef _(x):\n"
                                       "    return B().run()\n\n\n@handle.register(int)"),
    ),
    # a setter's body edited inside its class (one statement: spliced)
    "property-setter-edited": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY, "pkg/reg.py": REDEF_PY},
        "pkg/reg.py", REDEF_PY.replace("self._v = A().run()", "self._v = B().run()"),
    ),
    "star-all-narrowed": (
        {"pkg/__init__.py": "", "pkg/a.py": A_PY + "\n__all__ = ['A', 'B']\n", "pkg/s.py": "from pkg.a import *\n",
         "pkg/t.py": "from pkg.s import B\n\n\ndef go():\n    B().run()\n"},
        "pkg/a.py", A_PY + "\n__all__ = ['A']\n",
    ),
}




def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression_equals_scratch(name: str, tmp_path: Path) -> None:
    files, rel, text = REGRESSIONS[name]
    root = tmp_path / "ws"
    _write(root, files)
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    index.load_or_build()
    before = comparable(index)
    if text is None:
        index.remove_file(rel)
        (root / rel).unlink()
    else:
        index.update_file(rel, text)
        (root / rel).write_text(text, encoding="utf-8")
    scratch = WorkspaceIndex(root, cache_dir=tmp_path / "cache2", workers=1)
    scratch.load_or_build()
    want = comparable(scratch)
    assert want["edges"] != before["edges"], "the change must matter, or the case proves nothing"
    got = comparable(index)
    assert got == want, diff(got, want)
    # and a warm start from the scratch build's cache (a redefinition `_#2` is named `_` there too)
    scratch.wait_saved()
    warm = WorkspaceIndex(root, cache_dir=tmp_path / "cache2", workers=1)
    assert warm.load_or_build().warm
    assert comparable(warm) == want, diff(comparable(warm), want)


# The graph's own bookkeeping: after any sequence of node and edge writes to the binder's and other
# producers' stores, then relink(), exactly the stored edges whose endpoints exist are in the graph.
G_FILES = ["a.py", "b.py", "c.py"]
G_NODES = [f"{f}::{q}" for f in G_FILES for q in ("x", "y")]
g_edge = st.tuples(st.sampled_from(G_NODES + G_FILES), st.sampled_from(G_NODES + G_FILES),
                   st.sampled_from(["CALLS", "REFERENCES"]), st.integers(1, 3))  # the line: a key set again moves
g_op = st.one_of(
    st.tuples(st.just("nodes"), st.sampled_from(G_FILES), st.sets(st.sampled_from(["x", "y"]))),
    st.tuples(st.just("edges"), st.sampled_from(G_FILES), st.lists(g_edge, max_size=4)),
    st.tuples(st.just("extra"), st.sampled_from(["jedi:a", "git"]), st.lists(g_edge, max_size=4)),
    st.tuples(st.just("remove"), st.sampled_from(G_FILES), st.just(None)),
)


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(g_op, max_size=14))
def test_graph_links_exactly_the_stored_edges_with_both_endpoints(ops: list[tuple[str, str, Any]]) -> None:
    from ctx_lsp.index.graph import CodeGraph
    from ctx_lsp.index.model import Edge, Node

    g = CodeGraph()
    for kind, key, arg in ops:
        if kind == "nodes":
            g.set_file(key, [Node(key, "file", key, None, 1, 1)] +
                       [Node(f"{key}::{q}", "function", key, q, 1, 1) for q in sorted(arg)])
        elif kind == "remove":
            g.remove_file(key)
        else:
            # binder edges are sited in their source's file; producers' edges anywhere
            edges = [Edge(s, d, k, key if kind == "edges" else s.partition("::")[0], line, 0, "r")
                     for s, d, k, line in {a[:3]: a for a in arg}.values()  # one edge per key, as stores hold
                     if kind == "extra" or s.partition("::")[0] == key]
            if kind == "edges":
                g.set_edges(key, edges)
            else:
                g.set_edges(key, edges, store=g.extra_edges)
        g.relink()
        stored = {e.key() for store in (g.file_edges, g.extra_edges) for es in store.values() for e in es
                  if e.src in g and e.dst in g}
        linked = {(u, v, k) for u, out in g._succ.items() for v, kd in out.items() for k in kd}
        assert linked == stored
        held: dict[tuple[str, str, str], list[Edge]] = {}
        for store in (g.file_edges, g.extra_edges):
            for es in store.values():
                for e in es:
                    held.setdefault(e.key(), []).append(e)
        # each linked edge is one a store holds now, never one it held before a key was set again
        assert all(e in held[e.key()] for out in g._succ.values() for kd in out.values() for e in kd.values())
        for u, out in g._succ.items():
            for v, kd in out.items():
                assert kd and g._pred[v][u] is kd  # no empty entry; the reverse shares the inner dict
                for k, e in kd.items():
                    assert e.key() == (u, v, k)
        assert sum(len(into) for into in g._pred.values()) == sum(len(out) for out in g._succ.values())
        assert set(g._succ) == set(g._pred) == {n.id for n in g.nodes()}


def test_an_edit_rebinds_only_the_files_that_read_a_changed_name(tmp_path: Path) -> None:
    """Name-level dependencies: a new function in a widely imported module re-binds that module alone;
    retyping one of its names re-binds exactly the files that looked that name up."""
    files = {"pkg/__init__.py": "", "pkg/hub.py": "def f():\n    pass\n\n\ndef g():\n    pass\n"}
    for i in range(6):
        files[f"pkg/uses_f{i}.py"] = "from pkg.hub import f\n\n\ndef go():\n    f()\n"
    files["pkg/uses_g.py"] = "from pkg import hub\n\n\ndef go():\n    hub.g()\n"
    root = tmp_path / "ws"
    _write(root, files)
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    index.load_or_build()
    hub = files["pkg/hub.py"]
    assert index.update_file("pkg/hub.py", hub + "\n\ndef new():\n    pass\n") == 1
    assert index.update_file("pkg/hub.py", hub.replace("def g():\n    pass", "class g:\n    pass")) == 2
    assert index.graph.has_edge("pkg/uses_g.py::go", "pkg/hub.py::g")
    kinds = {e.kind for e in index.graph.edges_between("pkg/uses_g.py::go", "pkg/hub.py::g")}
    assert kinds == {"INSTANTIATES"}
    # a hub class: a new method re-binds its module alone, a method others call re-binds those callers
    cls = "class Hub:\n    def run(self):\n        pass\n"
    index.update_file("pkg/hub.py", cls)
    index.update_file("pkg/uses_g.py", "from pkg.hub import Hub\n\n\ndef go():\n    Hub().run()\n")
    assert index.update_file("pkg/hub.py", cls + "\n    def extra(self):\n        pass\n") == 1
    assert index.update_file("pkg/hub.py", cls.replace("def run(self):\n        pass", "run = None")) == 2


def test_a_checkout_of_few_large_files_extracts_in_parallel_and_equals_scratch(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout changes the project's big files: few files, many bytes. Their extraction goes to the
    process pool by bytes (PARALLEL_BYTES), not only by count, and the result equals a scratch build."""
    from ctx_lsp.index import workspace as ws_mod

    monkeypatch.setattr(ws_mod, "PARALLEL_BYTES", 150_000)  # the rule, at a size a test can afford

    def big(i: int, tag: str) -> str:
        body = "".join(f"    def m{j}(self, x):\n        return helper_{tag}(x) + {j}\n\n" for j in range(900))
        return f"from pkg.util import helper_{tag}\n\n\nclass Big{i}:\n{body}"

    files = {"pkg/__init__.py": "", "pkg/util.py": "def helper_a(x):\n    return x\n\n\ndef helper_b(x):\n    return x\n"}
    files |= {f"pkg/big{i}.py": big(i, "a") for i in range(8)}
    root = tmp_path / "ws"
    _write(root, files)
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=2)
    index.load_or_build()
    assert sum(len(files[f"pkg/big{i}.py"]) for i in range(4)) >= ws_mod.PARALLEL_BYTES
    for i in range(4):  # the checkout: four large files change on disk
        (root / f"pkg/big{i}.py").write_text(big(i, "b"), encoding="utf-8")
    index.refresh()
    assert index.workers_used.get("extract") == 2
    assert index.graph.has_edge("pkg/big0.py::Big0.m0", "pkg/util.py::helper_b")
    scratch = WorkspaceIndex(root, cache_dir=tmp_path / "cache2", workers=1)
    scratch.load_or_build()
    got, want = comparable(index), comparable(scratch)
    assert got == want, diff(got, want)
    # a small edit stays in process
    (root / "pkg/util.py").write_text(files["pkg/util.py"] + "\n\ndef helper_c(x):\n    return x\n", encoding="utf-8")
    index.refresh()
    assert index.workers_used.get("extract") == 1


@pytest.mark.parametrize("target", ["pkg/a.py.bak", "ignored/a.py", "node_modules/a.py", "pkg/big2.py"])
def test_a_rename_indexes_the_new_path_as_a_scratch_build_would(tmp_path: Path, target: str) -> None:
    """A file moved to a name, folder or size the index does not take leaves the index (and a
    skipped file renamed is reported under its new path only), as in a scratch build."""
    from ctx_lsp.index.discovery import FileFilter

    flt = FileFilter(max_bytes=200)
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/__init__.py").write_text("")
    (root / ".gitignore").write_text("ignored/\n")
    old = "pkg/big.py" if target == "pkg/big2.py" else "pkg/a.py"
    text = "def f():\n    return 1\n" + ("# pad\n" * 40 if old == "pkg/big.py" else "")
    (root / old).write_text(text)
    index = WorkspaceIndex(root, cache_dir=tmp_path / "c1", flt=flt, workers=1)
    index.load_or_build(save=False)
    (root / target).parent.mkdir(parents=True, exist_ok=True)
    (root / old).rename(root / target)
    index.rename_file(old, target, text)
    scratch = WorkspaceIndex(root, cache_dir=tmp_path / "c2", flt=flt, workers=1)
    scratch.load_or_build(save=False)
    assert sorted(index.facts) == sorted(scratch.facts) == ["pkg/__init__.py"]
    assert index.errors() == scratch.errors()
    assert comparable(index) == comparable(scratch)
