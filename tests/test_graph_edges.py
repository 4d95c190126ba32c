"""Edge quality on a fixture workspace: the exact edges the static binder must make, and must not.

tests/fixtures/edges/ holds one small case per hard problem (aliases, re-exports, relative imports,
factories, typed attributes, decorators, library objects whose methods share a project name, star
imports, guarded imports, namespace packages). Each row names the edge, its resolver where the
resolver is meaningful, and a snippet of the source line the edge's site must point at.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES, build_index

from ctx_lsp.index.graph import CodeGraph
from ctx_lsp.index.model import Edge, EdgeKind, Node
from ctx_lsp.index.workspace import WorkspaceIndex

ROOT = FIXTURES / "edges"

S = "app/services.py::"
M = "app/models.py::"
U = "app/util.py::"
D = "app/sub/deep.py::"
T = "suite/test_repo.py::"
C = "app/commands.py::"
CU = "app/cli_user.py::"

# (src, dst, kind, resolver or None, snippet of the site line or None)
MUST_EXIST: list[tuple[str, str, str, str | None, str | None]] = [
    # CONTAINS
    ("app/models.py", M + "Repo", "CONTAINS", "ast-contains", "class Repo(Base)"),
    (M + "Repo", M + "Repo.save", "CONTAINS", "ast-contains", None),
    (S + "outer", S + "outer.inner", "CONTAINS", "ast-contains", "def inner"),
    # IMPORTS, including relative ones (. and ..) and the package a `from . import x` goes through
    ("app/services.py", "app/models.py", "IMPORTS", "ast-import", None),
    ("app/services.py", "app/util.py", "IMPORTS", "ast-import", None),
    ("app/services.py", "app/__init__.py", "IMPORTS", "ast-import", "from . import models"),
    ("app/sub/deep.py", "app/models.py", "IMPORTS", "ast-import", "from .. import models"),
    ("app/sub/deep.py", "app/__init__.py", "IMPORTS", "ast-import", "from .. import models"),
    ("main.py", "app/models.py", "IMPORTS", "ast-import", "import app.models as m"),
    ("main.py", "app/sub/deep.py", "IMPORTS", "ast-import", "import app.sub.deep"),
    ("app/star_user.py", "app/util.py", "IMPORTS", "ast-import", "from .util import *"),
    ("app/guarded.py", "app/util.py", "IMPORTS", "ast-import", "from .util import helper"),  # inside try
    ("app/guarded.py", "app/models.py", "IMPORTS", "ast-import", "from .models import Repo"),  # TYPE_CHECKING
    ("nsp/plugins/user.py", "nsp/plugins/loader.py", "IMPORTS", "ast-import", None),  # namespace package
    ("nsp/plugins/loader.py", "app/__init__.py", "IMPORTS", "ast-import", "from app import Repo"),
    # REFERENCES: imported symbols (through re-exports to the defining file) and non-call uses
    ("app/__init__.py", M + "Base", "REFERENCES", "ast-import", "import Base as BaseModel"),
    ("nsp/plugins/loader.py", M + "Repo", "REFERENCES", "ast-import", "from app import Repo"),
    (S + "reference_only", U + "get", "REFERENCES", "ast-import", "callback = get"),
    ("app/models.py", M + "Repo", "REFERENCES", "ast-scope", "Alias = Repo"),
    # INHERITS: same file, across files through `from ..models import`, a module attribute, a re-export alias
    (M + "Repo", M + "Base", "INHERITS", "ast-scope", "class Repo(Base)"),
    (D + "SpecialRepo", M + "Repo", "INHERITS", "ast-import", "class SpecialRepo(Repo)"),
    (D + "OtherBase", M + "Base", "INHERITS", "ast-import", "class OtherBase(models.Base)"),
    ("main.py::Local", M + "Base", "INHERITS", "ast-import", "class Local(BaseModel)"),
    # OVERRIDES
    (M + "Repo.save", M + "Base.save", "OVERRIDES", "ast-mro", "def save"),
    (D + "SpecialRepo.find", M + "Repo.find", "OVERRIDES", "ast-mro", "def find"),
    (D + "SpecialRepo.__init__", M + "Repo.__init__", "OVERRIDES", "ast-mro", "def __init__"),
    (D + "OtherBase.validate", M + "Base.validate", "OVERRIDES", "ast-mro", "def validate"),
    ("main.py::Local.save", M + "Base.save", "OVERRIDES", "ast-mro", "def save"),
    # INSTANTIATES: direct, through `as`, a module-level alias, a re-export alias, classmethod cls()
    (M + "make_repo", M + "Repo", "INSTANTIATES", "ast-scope", "return Repo()"),
    (S + "Service.via_as_name", M + "Repo", "INSTANTIATES", "ast-import", "return R()"),
    (S + "Service.via_alias", M + "Repo", "INSTANTIATES", "ast-import", "a = Alias()"),
    (S + "Service.__init__", M + "Repo", "INSTANTIATES", "ast-import", "models.Repo()"),
    ("main.py::module_var_alias", M + "Repo", "INSTANTIATES", "ast-import", "m.Alias()"),
    ("main.py::reexport_alias", M + "Repo", "INSTANTIATES", "ast-import", "PublicRepo()"),
    (M + "Base.create", M + "Base", "INSTANTIATES", "ast-scope", "return cls()"),
    ("nsp/plugins/loader.py::load", M + "Repo", "INSTANTIATES", "ast-import", "return Repo()"),
    # CALLS: self.method, super(), typed attributes, factories, aliases, decorators, star imports
    (M + "Base.save", M + "Base.validate", "CALLS", "ast-scope", "self.validate()"),
    (M + "Repo.save", M + "Base.save", "CALLS", "ast-mro", "super().save()"),
    (D + "SpecialRepo.find", M + "Repo.find", "CALLS", "ast-mro", "super().find(key)"),
    (D + "SpecialRepo.__init__", M + "Repo.__init__", "CALLS", "ast-mro", "super().__init__"),
    (S + "Service.run_param", M + "Repo.save", "CALLS", "ast-type", "self.repo.save()"),
    (S + "Service.run_ctor", M + "Repo.find", "CALLS", "ast-type", "self.backup.find(1)"),
    (S + "Service.run_factory_attr", M + "Repo.find", "CALLS", "ast-type", "self.made.find(2)"),
    (S + "Service.run_class_annotation", M + "Repo.save", "CALLS", "ast-type", "self.store.save()"),
    (S + "Service.run_local_get", U + "get", "CALLS", "ast-import", 'get("local")'),
    (S + "Service.decorated", U + "logged", "CALLS", "ast-import", "@logged"),
    (S + "Service.decorated", U + "helper", "CALLS", "ast-import", "u.helper()"),
    # a decorator factory's result is called with the def; `f(a)(b)` calls what f returned
    (S + "Service.hooked", U + "registered", "CALLS", "ast-import", '@registered("svc")'),
    (S + "Service.hooked", U + "registered.decorator", "CALLS", None, '@registered("svc")'),
    (S + "Service.register_later", U + "registered", "CALLS", "ast-import", 'registered("late")(fn)'),
    (S + "Service.register_later", U + "registered.decorator", "CALLS", None, 'registered("late")(fn)'),
    (S + "Service.commanded", U + "command.decorator", "CALLS", None, "@command()"),
    # a def statement inside a function runs its decorators there
    (S + "build_routes", U + "registered", "CALLS", "ast-import", '@registered("view")'),
    (S + "build_routes", U + "registered.decorator", "CALLS", None, '@registered("view")'),
    (S + "build_routes.view", U + "registered", "CALLS", "ast-import", '@registered("view")'),
    (S + "build_routes", U + "logged", "CALLS", "ast-import", "@logged"),
    (S + "build_routes.plain", U + "logged", "CALLS", "ast-import", "@logged"),
    # calling a decorated def runs its decorator's wrapper (a factory's: the wrapper its decorator returns)
    (S + "call_decorated", S + "traced_helper", "CALLS", "ast-scope", "traced_helper()"),
    (S + "call_decorated", S + "logged_helper", "CALLS", "ast-scope", "logged_helper()"),
    (S + "call_decorated", U + "traced.wrapper", "CALLS", None, "traced_helper()"),
    (S + "call_decorated", U + "retry.deco.again", "CALLS", None, "flaky()"),
    # callbacks stored and run later: a may-call through values (flow.py), sited at the dispatching call
    ("app/registry.py::Registry.dispatch", S + "wire_handlers.on_save", "CALLS", "ast-flow",
     "self.ensure(self.handlers[name])()"),
    ("app/registry.py::Registry.run_hooks", S + "flush", "CALLS", "ast-flow", "fn()"),
    # click's shapes (commands.py): `cls = cast(..., Command)` fills a None-default parameter; a factory
    # returning another factory's decorator; a def decorated by `@group()` is a Group; a callback
    # stored on the command reaches `Context.invoke` as `self.callback`, and is called as one
    (C + "command.decorator", C + "Command", "INSTANTIATES", None, "return cls(name, callback=f)"),
    (CU + "build", C + "command.decorator", "CALLS", None, "@group()"),
    (CU + "build", C + "Group.command", "CALLS", None, "@cli.command()"),
    (CU + "build", C + "Group.command.decorator", "CALLS", None, "@cli.command()"),
    (C + "Context.invoke", CU + "build.sub", "CALLS", "ast-flow", "return callback()"),
    (C + "Context.invoke", CU + "build.cli", "CALLS", "ast-flow", "return callback()"),
    (C + "Command.validate", CU + "build.sub", "CALLS", "ast-flow", "self.callback(value)"),
    # a keyword argument forwarded through `**attrs` (and set with `kwargs.setdefault`) to the parameter
    (C + "Param.process", CU + "validate", "CALLS", "ast-flow", "return self.callback(value)"),
    (C + "Param.process", C + "show_help", "CALLS", "ast-flow", "return self.callback(value)"),
    # flask's error handlers: a lookup returns an item of the stored table (`handler = table.get(code)`)
    (C + "Handlers.handle", CU + "on_missing", "CALLS", "ast-flow", "return handler(code)"),
    # the implementation after `@overload` stubs is the def
    (C + "pick", U + "helper", "CALLS", "ast-import", "return helper()"),
    # calling a typed instance runs its class's __call__
    (S + "Service.fire", U + "Hook.__call__", "CALLS", "ast-type", "hook()"),
    (S + "Service.factory_annotated", M + "make_repo", "CALLS", "ast-import", "make_repo().save()"),
    (S + "Service.factory_annotated", M + "Repo.save", "CALLS", "ast-type", "make_repo().save()"),
    (S + "Service.factory_inferred", M + "build_repo", "CALLS", "ast-import", "models.build_repo().find(2)"),
    (S + "Service.factory_inferred", M + "Repo.find", "CALLS", "ast-type", "models.build_repo().find(2)"),
    (S + "Service.factory_local", M + "Repo.save", "CALLS", "ast-type", "r.save()"),
    (S + "Service.via_alias", M + "Repo.find", "CALLS", "ast-type", "a.find(3)"),
    (S + "Service.scoped_import", U + "helper", "CALLS", "ast-import", "return helper()"),
    (S + "create_base", M + "Base.create", "CALLS", "ast-import", "models.Base.create()"),
    (S + "outer", S + "outer.inner", "CALLS", "ast-scope", "return inner()"),
    ("app/star_user.py::use_helper", U + "helper", "CALLS", "ast-import", "return helper()"),
    ("app/guarded.py::use", U + "helper", "CALLS", "ast-import", "return helper()"),
    ("app/guarded.py::use", M + "Repo.find", "CALLS", "ast-type", "repo.find(1)"),
    ("main.py::reexport_alias", M + "Repo.save", "CALLS", "ast-type", "repo.save()"),
    ("main.py::module_alias", M + "make_repo", "CALLS", "ast-import", "m.make_repo()"),
    ("main.py::module_alias", M + "Repo.find", "CALLS", "ast-type", "m.make_repo().find(1)"),
    ("main.py::package_attr", M + "make_repo", "CALLS", "ast-import", "app.make_repo()"),
    ("main.py::dotted_module", D + "make_special", "CALLS", "ast-import", "app.sub.deep.make_special()"),
    ("main.py::submodule_via_package", U + "helper", "CALLS", "ast-import", "app.util.helper()"),
    ("main.py::module_var_alias", M + "Repo.save", "CALLS", "ast-type", "x.save()"),
    ("main.py::local_override", "main.py::Local.save", "CALLS", "ast-scope", "Local().save()"),
    ("main.py::star_from_package", M + "make_repo", "CALLS", "ast-import", "return make_repo()"),
    ("nsp/plugins/user.py::go", "nsp/plugins/loader.py::load", "CALLS", "ast-import", "loader.load()"),
    # a namespace directory inside a package: relative imports still climb to the package
    ("app/nsub/tool.py::tool_fn", M + "Repo", "INSTANTIATES", "ast-import", "return Repo()"),
    ("app/nsub/tool.py", "app/models.py", "IMPORTS", "ast-import", "from ..models import Repo"),
    (S + "namespace_portion", "app/nsub/tool.py::tool_fn", "CALLS", "ast-import", "return tool_fn()"),
    # pytest fixtures: a test's parameter has the value of the fixture of that name (file, then conftest.py)
    (T + "test_save", M + "Repo.save", "CALLS", "ast-type", "repo.save()"),
    (T + "test_yield_fixture", M + "Repo.find", "CALLS", "ast-type", "made.find(1)"),
    (T + "test_local_fixture", M + "Repo.save", "CALLS", "ast-type", "local_repo.save()"),
    (T + "TestRepo.test_method", M + "Repo.find", "CALLS", "ast-type", "repo.find(2)"),
    ("suite/conftest.py::made", M + "make_repo", "CALLS", "ast-import", "yield make_repo()"),
    (T + "TestWithClassFixture.test_uses_class_fixture", M + "Repo.find", "CALLS", "ast-type", "own.find(3)"),
    (T + "TestOverridingFixture.repo", M + "Repo.save", "CALLS", "ast-type", "repo.save()"),
    (T + "TestOverridingFixture.test_overridden", M + "Repo.find", "CALLS", "ast-type", "repo.find(4)"),
    (T + "test_imported_fixture", "app/unrelated.py::Cache.save", "CALLS", "ast-type", "cache.save()"),
]

# (src, dst, kind or None for any kind)
MUST_NOT_EXIST: list[tuple[str, str, str | None]] = [
    # a library object's method never becomes the project's same-named function
    (S + "Service.run_session", U + "get", None),
    (S + "Worker.run", U + "get", None),
    # decorators in a class body or at module level run at import time: no def calls them
    ("app/services.py", U + "logged", "CALLS"),
    # only what was registered flows into the table
    ("app/registry.py::Registry.dispatch", S + "never_registered", None),
    ("app/registry.py::Registry.run_hooks", S + "wire_handlers.on_save", None),
    # `logged` returns the def itself: calling a def it decorates runs no wrapper, and never `logged`
    (S + "call_decorated", U + "logged", "CALLS"),
    (S + "Service", U + "registered", "CALLS"),
    # a literal's method is the built-in type's
    (S + "literal_receiver", U + "get", None),
    # a fixture holding a library object; a parametrized argument is no fixture
    (T + "test_session", U + "get", None),
    (T + "test_param", M + "Repo.save", None),
    # a parameter shadows the imported name
    (S + "shadowed_param", U + "get", None),
    # same-named methods in unrelated classes never cross-link
    (S + "Service.run_param", "app/unrelated.py::Cache.save", None),
    (S + "Service.run_ctor", "app/unrelated.py::Cache.find", None),
    (S + "Service.untyped", M + "Repo.save", None),
    (S + "Service.untyped", "app/unrelated.py::Cache.save", None),
    (S + "Service.untyped", M + "Base.save", None),
    # a class with an external base overrides nothing in the project
    (S + "Worker.run", M + "Base.save", None),
    (S + "Worker.join", M + "Repo.find", None),
    # a name a star import does not export (`_private`, not in __all__)
    ("app/star_user.py::use_private", U + "_private", None),
    # the `except ImportError: helper = None` fallback is not what the call reaches
    ("app/guarded.py::use", "app/guarded.py::helper", None),
    # calls resolved to Repo.save, not also to the base's save it overrides
    (S + "Service.run_param", M + "Base.save", None),
    ("main.py::local_override", M + "Base.save", "CALLS"),
    # callbacks of one table never reach another table's dispatcher
    (C + "Context.invoke", CU + "on_missing", None),
    (C + "Handlers.handle", CU + "build.sub", None),
    # `find` returns the handler; calling `find` does not call it
    (C + "Handlers.find", CU + "on_missing", None),
    (C + "Param.process", CU + "on_missing", None),
    (C + "Param.process", CU + "build.sub", None),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> WorkspaceIndex:
    return build_index(ROOT, tmp_path_factory.mktemp("cache"))


def find_edge(graph: CodeGraph, src: str, dst: str, kind: str | None) -> list[Edge]:
    return [e for e in graph.out_edges(src) if e.dst == dst and (kind is None or e.kind == kind)]


def check(graph: CodeGraph, src: str, dst: str, kind: str, resolver: str | None, snippet: str | None) -> None:
    assert src in graph, f"missing source node {src}"
    assert dst in graph, f"missing target node {dst}"
    found = find_edge(graph, src, dst, kind)
    assert found, f"missing {kind} {src} -> {dst}; has {[(e.kind, e.dst) for e in graph.out_edges(src)]}"
    edge = found[0]
    if resolver is not None:
        assert edge.resolver == resolver, f"{kind} {src} -> {dst}: resolver {edge.resolver}, expected {resolver}"
    assert edge.path == src.partition("::")[0], "an edge is sited in the file of its source"
    if snippet is not None:
        line = (ROOT / edge.path).read_text().splitlines()[edge.line - 1]
        assert snippet in line, f"{kind} {src} -> {dst}: site line {edge.line} is {line!r}, expected {snippet!r}"
        assert 0 <= edge.col <= len(line)


@pytest.mark.parametrize(("src", "dst", "kind", "resolver", "snippet"), MUST_EXIST,
                         ids=[f"{k}:{s}->{d}" for s, d, k, _, _ in MUST_EXIST])
def test_edge_exists(index: WorkspaceIndex, src: str, dst: str, kind: str, resolver: str | None,
                     snippet: str | None) -> None:
    check(index.graph, src, dst, kind, resolver, snippet)


@pytest.mark.parametrize(("src", "dst", "kind"), MUST_NOT_EXIST, ids=[f"{s}-x->{d}" for s, d, _ in MUST_NOT_EXIST])
def test_edge_absent(index: WorkspaceIndex, src: str, dst: str, kind: str | None) -> None:
    assert src in index.graph, f"missing source node {src} (the negative case would pass vacuously)"
    assert dst in index.graph, f"missing target node {dst} (the negative case would pass vacuously)"
    assert not find_edge(index.graph, src, dst, kind), f"unexpected edge {src} -> {dst}"


def test_every_binder_edge_kind_is_exercised(index: WorkspaceIndex) -> None:
    counts = index.graph.edge_counts()
    binder_kinds = {k.value for k in EdgeKind} - {"COVERS", "TOUCHED"}
    assert {k for k in binder_kinds if counts[k] == 0} == set()
    assert {k for _, _, k, _, _ in MUST_EXIST} == binder_kinds


def test_no_edge_into_unrelated_class(index: WorkspaceIndex) -> None:
    """Only its own file and the fixture test that really uses it point at Cache: its method names
    collide with Repo's on purpose."""
    allowed = {"app/unrelated.py", "app/unrelated.py::Cache", "suite/plugins/shared.py",
               "suite/plugins/shared.py::cache", T + "test_imported_fixture"}
    for node in ("app/unrelated.py::Cache.save", "app/unrelated.py::Cache.find", "app/unrelated.py::Cache"):
        sources = {e.src for e in index.graph.in_edges(node)}
        assert sources <= allowed, sources


def _site_chains(index: WorkspaceIndex, path: str, which: str) -> set[tuple[str, ...]]:
    facts = index.facts[path]
    b = index.bindings[path]
    if which == "unresolved":
        return {facts.sites[i].chain for i in b.unresolved}
    return set()


def test_library_calls_count_as_external_not_unresolved(index: WorkspaceIndex) -> None:
    unresolved = _site_chains(index, "app/services.py", "unresolved")
    # unknown receivers stay unresolved (for jedi), library calls are external, not unresolved
    assert ("thing", "save") in unresolved
    assert ("get",) in unresolved  # the untyped parameter `get`
    for chain in [("self", "session", "get"), ("requests", "Session"), ("requests", "get"), ("resp", "json"),
                  ("self", "start"), ("self", "get"), ("options", "get")]:
        assert chain not in unresolved, chain
    suite = _site_chains(index, "suite/test_repo.py", "unresolved")
    assert ("value", "save") in suite  # a parametrized argument: unknown
    assert ("monkeypatch", "setattr") not in suite and ("tmp_path", "joinpath") not in suite  # pytest's own
    assert index.bindings["app/services.py"].external >= 6
    counts = index.resolution_counts()
    assert counts["internal"] > counts["unresolved"] > 0


def test_every_edge_has_provenance(index: WorkspaceIndex) -> None:
    for e in index.graph.edges():
        assert e.resolver, e
        assert (ROOT / e.path).is_file(), e
        assert e.line >= 1 and e.col >= 0, e


def test_syntax_error_file_is_indexed_and_reported(tmp_path: Path) -> None:
    """The fixture stays valid; a broken copy still yields its definitions and edges."""
    import shutil

    root = tmp_path / "ws"
    shutil.copytree(ROOT, root)
    p = root / "app/models.py"
    p.write_text(p.read_text().replace("def find(self, key):", "def find(self, key:"))
    idx = build_index(root, tmp_path / "cache")
    assert any(err["path"] == "app/models.py" and "syntax error" in err["message"] for err in idx.errors())
    check(idx.graph, M + "Repo", M + "Base", "INHERITS", "ast-scope", None)
    check(idx.graph, S + "Service.run_param", M + "Repo.save", "CALLS", "ast-type", None)


def test_overload_stubs_give_way_to_the_implementation(index: WorkspaceIndex) -> None:
    node = index.graph.node(C + "pick")
    assert node is not None
    line = (ROOT / "app/commands.py").read_text().splitlines()[node.start_line - 1]
    assert line == "def pick(x):", "the node spans the implementation, not the first @overload stub"
    assert index.graph.node(C + "pick#2") is None, "the other stubs are no nodes of their own"


def test_setting_a_store_to_the_edges_it_holds_leaves_the_graph_or_puts_its_own_edge_back() -> None:
    """Re-setting a file's edges to the same list (a dependent re-bound after a checkout) changes
    nothing; but when another store's edge of the same key is the linked one, setting the file's
    edges again links the file's edge, as dropping and re-adding them always did."""
    g = CodeGraph()
    for path in ("a.py", "b.py"):
        g.set_file(path, [Node(path, "file", path, None, 1, 9), Node(f"{path}::f", "function", path, "f", 1, 2)])
    mine = Edge("a.py::f", "b.py::f", "CALLS", "a.py", 3, 4, "ast-scope")
    theirs = Edge("a.py::f", "b.py::f", "CALLS", "a.py", 5, 6, "jedi")
    g.set_edges("a.py", [mine])
    revision = g.revision
    g.set_edges("a.py", [mine])
    assert g.revision == revision and g.edges_between("a.py::f", "b.py::f") == [mine]
    g.set_edges("refine:a.py", [theirs], store=g.extra_edges)
    assert g.edges_between("a.py::f", "b.py::f") == [theirs]
    g.set_edges("a.py", [mine])
    assert g.edges_between("a.py::f", "b.py::f") == [mine]
    # and a store whose edge waits for a missing node keeps waiting
    g.set_edges("a.py", [mine, Edge("a.py::f", "c.py::g", "CALLS", "a.py", 7, 8, "ast-scope")])
    g.set_edges("a.py", list(g.file_edges["a.py"]))
    g.set_file("c.py", [Node("c.py", "file", "c.py", None, 1, 9), Node("c.py::g", "function", "c.py", "g", 1, 2)])
    g.relink()
    assert g.has_edge("a.py::f", "c.py::g", "CALLS")


PROPERTY = '''class Box:
    @property
    def size(self):
        return self._size

    @size.setter
    def size(self, value):
        self._size = clamp(value)

    @size.deleter
    def size(self):
        del self._size

    def other(self):
        return 1


def clamp(v):
    return v
'''


def test_a_property_is_one_node_spanning_its_getter_setter_and_deleter(tmp_path: Path) -> None:
    """`@size.setter` redefines `size`: the node keeps the getter's start and header, spans the
    setter and deleter too (the setter's calls are this node's), and its chunk holds their words."""
    from conftest import write_tree

    write_tree(tmp_path / "ws", {"box.py": PROPERTY})
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    node = idx.graph.node("box.py::Box.size")
    assert node is not None
    assert (node.start_line, node.end_line) == (2, 12)
    assert idx.graph.node("box.py::Box.other") is not None
    calls = [e for e in idx.graph.out_edges("box.py::Box.size") if e.kind == "CALLS"]
    assert [(e.dst, e.line) for e in calls] == [("box.py::clamp", 8)]
    assert node.start_line <= calls[0].line <= node.end_line
    from ctx_lsp.index.chunk_terms import unpack_chunk_terms

    chunk = dict(unpack_chunk_terms(idx.facts["box.py"].chunk_terms))["box.py::Box.size"]
    assert "clamp" in chunk, "the setter's words are in the property's chunk"



PROPERTY_VALUES = '''import pathlib
from functools import cached_property


class Cache:
    def put(self, k):
        return k

    def exists(self):
        return True


class Holder:
    def __init__(self):
        self._c = Cache()

    @property
    def typed(self) -> Cache:
        return self._c

    @property
    def built(self):
        return Cache()

    @cached_property
    def lazy(self) -> "Cache":
        return Cache()

    @property
    def where(self) -> pathlib.Path:
        return pathlib.Path(".")

    def use_typed(self):
        self.typed.put(1)

    def use_built(self):
        self.built.put(2)

    def use_lazy(self):
        self.lazy.put(3)

    def use_where(self):
        return self.where.exists()

    def read_only(self):
        return self.typed


def outside(h: Holder):
    h.typed.put(5)
    h.typed.missing(6)
'''


def test_an_attribute_of_a_property_is_one_of_the_value_its_getter_returns(tmp_path: Path) -> None:
    """`self.cookies.extract(...)` under `@property def cookies(self) -> Cookies`: the call lands on
    Cookies.extract, typed by the getter's annotation or by what it returns (`cached_property` too);
    a getter typed by a library class links to no project member, and reading the property alone
    still refers to the property."""
    from conftest import write_tree

    write_tree(tmp_path / "ws", {"box.py": PROPERTY_VALUES})
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    callers = {(e.src.partition("::")[2], e.line, e.resolver) for e in idx.graph.in_edges("box.py::Cache.put")
               if e.kind == "CALLS"}
    assert callers == {("Holder.use_typed", 34, "ast-type"), ("Holder.use_built", 37, "ast-type"),
                       ("Holder.use_lazy", 40, "ast-type"), ("outside", 50, "ast-type")}
    assert not [e for e in idx.graph.in_edges("box.py::Cache.exists") if e.kind == "CALLS"], "pathlib's exists"
    refs = {(e.src, e.kind) for e in idx.graph.in_edges("box.py::Holder.typed")}
    assert ("box.py::Holder.read_only", "REFERENCES") in refs

BRANCHES = '''import sys


if sys.platform == "win32":
    def launch(cmd):
        return cmd
else:
    def launch(runner):
        return runner.start()


def start():
    return 0


class Runner:
    def start(self):
        return 1


runner = Runner()


def launch_later(job):
    return job


def launch_later(job, runner):
    return runner.start()
'''


def test_a_def_redefined_in_another_branch_spans_both_and_its_parameters_stay_local(tmp_path: Path) -> None:
    """The `else:` def of `launch` is the same node (it spans both branches), and its parameter
    `runner` is a local there, not the module's `runner`: no CALLS edge to Runner.start. A
    redefinition in another statement is a node of its own, `launch_later#2`, with its own
    parameters."""
    from conftest import write_tree

    write_tree(tmp_path / "ws", {"plat.py": BRANCHES})
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    node = idx.graph.node("plat.py::launch")
    assert node is not None and (node.start_line, node.end_line) == (5, 9)
    later = idx.graph.node("plat.py::launch_later")
    assert later is not None and (later.start_line, later.end_line) == (24, 25)
    again = idx.graph.node("plat.py::launch_later#2")
    assert again is not None and (again.start_line, again.end_line) == (28, 29)
    assert again.signature == "def launch_later(job, runner)"
    for src in ("plat.py::launch", "plat.py::launch_later", "plat.py::launch_later#2"):
        assert not [e for e in idx.graph.out_edges(src) if e.kind == "CALLS"], src
    assert any(e.dst == "plat.py::Runner" for e in idx.graph.out_edges("plat.py") if e.kind == "INSTANTIATES")


def test_a_redefinition_with_other_defs_between_is_a_node_of_its_own(tmp_path: Path) -> None:
    """`if`/`elif` branches each defining several functions: `root` must not span `sqrt`, so the
    second `root` is `root#2`, and its call comes from it."""
    from conftest import write_tree

    text = ("import os\n\nif os.name == 'nt':\n    def root(x):\n        return x\nelse:\n"
            "    def sqrt(x):\n        return x\n\n    def root(x):\n        return sqrt(x)\n")
    write_tree(tmp_path / "ws", {"flav.py": text})
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    root, sqrt = idx.graph.node("flav.py::root"), idx.graph.node("flav.py::sqrt")
    assert root is not None and sqrt is not None
    assert (root.start_line, root.end_line) == (4, 5)
    assert (sqrt.start_line, sqrt.end_line) == (7, 8)
    again = idx.graph.node("flav.py::root#2")
    assert again is not None and (again.start_line, again.end_line) == (10, 11)
    assert not [e for e in idx.graph.out_edges("flav.py::root") if e.kind == "CALLS"]
    assert [(e.dst, e.line) for e in idx.graph.out_edges("flav.py::root#2") if e.kind == "CALLS"] == [("flav.py::sqrt", 11)]


def test_a_redefinition_of_its_own_gets_its_flows_and_a_class_is_never_extended_by_a_def(tmp_path: Path) -> None:
    """`wrapper` is a class in one branch and a def in the other: two nodes, and the call of the
    callback that flows into the def (`wrapped(*args)`) comes from `deco.wrapper#2`, whose lines
    hold it."""
    from conftest import write_tree

    text = ("def deco(wrapped):\n    if hasattr(wrapped, '__mro__'):\n        class wrapper(wrapped):\n"
            "            pass\n    else:\n        def wrapper(*args):\n            return wrapped(*args)\n"
            "    return wrapper\n\n\n@deco\ndef target():\n    return 1\n")
    write_tree(tmp_path / "ws", {"deco.py": text})
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    cls, fn = idx.graph.node("deco.py::deco.wrapper"), idx.graph.node("deco.py::deco.wrapper#2")
    assert cls is not None and fn is not None
    assert (cls.kind, cls.start_line, cls.end_line) == ("class", 3, 4)
    assert (fn.kind, fn.start_line, fn.end_line) == ("function", 6, 7)
    assert fn.name == "wrapper", "the name as written (editors show it; `#2` is in the qualname only)"
    assert [(e.dst, e.line, e.resolver) for e in idx.graph.out_edges(fn.id) if e.kind == "CALLS"] \
        == [("deco.py::target", 7, "ast-flow")]
    assert not [e for e in idx.graph.out_edges(cls.id) if e.kind == "CALLS"]


REDEFINED = '''from functools import singledispatch

from box import Box


@singledispatch
def show(x):
    return str(x)


@show.register(int)
def _(x):
    return Box()


class Report:
    def render(self):
        return show(1)


@show.register(list)
def _(x):
    return [show(i) for i in x]


class Report(Report):
    def render(self):
        return Box().size
'''


def test_every_edge_of_a_def_is_sited_in_its_lines(index: WorkspaceIndex, tmp_path: Path) -> None:
    """The site of an edge a def or class makes lies in that def's lines: on the fixture
    (decorators, factories, overloads) and on redefinitions (`_` registrations, a class redefined,
    a property's accessors, defs in branches)."""
    from conftest import write_tree

    write_tree(tmp_path / "ws", {"box.py": PROPERTY, "redef.py": REDEFINED, "plat.py": BRANCHES})
    redefined = build_index(tmp_path / "ws", tmp_path / "cache")
    second = redefined.graph.node("redef.py::_#2")
    assert second is not None and redefined.graph.node("redef.py::Report#2") is not None
    assert second.signature == "@show.register(list) def _(x)", "its decorator says which `_` it is"
    for idx in (index, redefined):
        outside = []
        for node in idx.graph.nodes():
            if node.qualname is None or node.kind == "commit":
                continue
            for e in idx.graph.out_edges(node.id):
                if e.kind != "CONTAINS" and not node.start_line <= e.line <= node.end_line:
                    outside.append((node.id, node.start_line, node.end_line, e.kind, e.dst, e.line))
        assert not outside


def test_importing_a_variable_that_holds_an_instance_references_the_variable(tmp_path: Path) -> None:
    """`from conf import settings` where `settings = Settings()` refers to `settings` (it referred to
    nothing: the variable stands for an instance, and only a symbol could be the target); an alias
    variable (`Alias = Settings`) still refers to the class it names."""
    from conftest import write_tree

    write_tree(tmp_path / "ws", {
        "conf.py": "class Settings:\n    debug = False\n\n\nsettings = Settings()\nAlias = Settings\nLIMIT = 20\n",
        "user.py": "from conf import settings, Alias, LIMIT\n\n\ndef debug():\n    return settings.debug\n",
    })
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    refs = {(e.dst, e.line, e.resolver) for e in idx.graph.out_edges("user.py") if e.kind == "REFERENCES"}
    assert refs == {("conf.py::settings", 1, "ast-import"), ("conf.py::Settings", 1, "ast-import"),
                    ("conf.py::LIMIT", 1, "ast-import")}
