"""The rooms of the code (docs/architecture.md) as an import check: no circles, no upward imports.

Every module of `ctx_lsp` and `benchmark_gen` is read with `ast` (never imported). Its imports, in
functions too, become edges of a module graph; imports under `if TYPE_CHECKING:` are skipped (they
never run). An import of `a.b.c` runs `a`, `a.b` and `a.b.c`, so it is an edge to each of them, except
to the importer's own packages: Python runs those before the importer, so they are no new edge.

Layers, from the bottom: the core (`ctx_lsp.index`, `ctx_lsp.sources`, `ctx_lsp.retrieval`,
`ctx_lsp.engine`) never imports an adapter (`ctx_lsp.cli`, `ctx_lsp.mcp`, `ctx_lsp.server`,
`ctx_lsp.daemon`, `ctx_lsp.workspace_args`); retrieval never imports the server; nothing in
`ctx_lsp` imports `benchmark_gen`; `benchmark_gen` never imports the server.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import networkx as nx
import pytest
from conftest import TESTS

REPO = Path(os.environ.get("CTX_LSP_LAYERS_ROOT") or TESTS.parent)  # another checkout's layout, to compare
PACKAGES = ("ctx_lsp", "benchmark_gen")
CORE = ("ctx_lsp.index", "ctx_lsp.sources", "ctx_lsp.retrieval", "ctx_lsp.engine")
ADAPTERS = ("ctx_lsp.cli", "ctx_lsp.mcp", "ctx_lsp.server", "ctx_lsp.daemon", "ctx_lsp.workspace_args")
# (importer prefixes, forbidden target prefixes, why)
FORBIDDEN = [
    (CORE, ADAPTERS, "the core imports an adapter"),
    (("ctx_lsp.retrieval",), ("ctx_lsp.server",), "retrieval imports the server"),
    (("ctx_lsp",), ("benchmark_gen",), "ctx_lsp imports benchmark_gen"),
    (("benchmark_gen",), ("ctx_lsp.server",), "benchmark_gen imports the server"),
]


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def modules_of(root: Path) -> dict[str, Path]:
    """Module name -> source file, for every module of PACKAGES under `root`."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            if "__pycache__" in path.parts or "node_modules" in path.parts:
                continue
            name = path.relative_to(root).with_suffix("").as_posix().replace("/", ".")
            out[name.removesuffix(".__init__")] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: all of them but those inside `if TYPE_CHECKING:`."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def imports_of(module: str, src: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules (of `known`) that running `module` may import, with the packages above each."""
    package = module if is_package else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in _runtime_imports(ast.parse(src)):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join(parts + ([base] if base else []))
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            targets.add(sub if sub in known else base)  # `from pkg import mod` runs mod; a name runs pkg
    own = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)} | {module}
    edges: set[str] = set()
    for t in targets:
        parts = t.split(".")
        for i in range(1, len(parts) + 1):
            m = ".".join(parts[:i])
            if m in known and m not in own:
                edges.add(m)
    return edges


def import_graph(root: Path) -> nx.DiGraph:
    mods = modules_of(root)
    known = set(mods)
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        for dst in imports_of(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", known):
            g.add_edge(name, dst)
    return g


def cycles(g: nx.DiGraph) -> list[list[str]]:
    """Each elementary circle (a -> b -> a), starting at its smallest module; bounded, as a tangle
    has many and a few name it."""
    out = []
    for cycle in nx.simple_cycles(g):
        i = cycle.index(min(cycle))
        out.append(cycle[i:] + cycle[:i] + [cycle[i]])
        if len(out) >= 50:
            break
    return sorted(out)


def upward(g: nx.DiGraph) -> list[str]:
    return sorted(f"{a} -> {b}: {why}" for a, b in g.edges for src, dst, why in FORBIDDEN
                  if within(a, src) and within(b, dst))


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    g = import_graph(REPO)
    assert g.number_of_nodes() > 50 and g.number_of_edges() > 100, "the walk found too little to check"
    return g


def test_no_import_circles(graph: nx.DiGraph) -> None:
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_no_upward_imports(graph: nx.DiGraph) -> None:
    found = upward(graph)
    assert not found, "upward imports:\n" + "\n".join(found)


def test_the_rooms_exist(graph: nx.DiGraph) -> None:
    """The layer rules name real packages (a rule over a renamed package would pass vacuously)."""
    for prefix in CORE + ADAPTERS:
        assert any(within(m, (prefix,)) for m in graph), prefix


def test_cycle_finder_on_a_tiny_graph() -> None:
    g = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "e"), ("d", "f")])
    assert cycles(g) == [["a", "b", "c", "a"], ["e", "e"]]
    assert cycles(nx.DiGraph([("a", "b"), ("b", "c"), ("a", "c")])) == []


def test_import_reader_follows_python() -> None:
    """Function-level and relative imports count; TYPE_CHECKING ones do not; `from pkg import mod`
    is an edge to mod and pkg; the importer's own packages are no edge."""
    known = {"p", "p.q", "p.q.r", "p.q.s", "p.t", "x", "x.y"}
    src = ("from typing import TYPE_CHECKING\nfrom . import s\nfrom p.q import r\n"
           "if TYPE_CHECKING:\n    import x.y\nelse:\n    pass\n"
           "def f():\n    from ..t import NAME\n")
    assert imports_of("p.q.z", src, False, known) == {"p.q.s", "p.q.r", "p.t"}
    assert imports_of("p.t", "import x.y\nfrom p.q import NAME\n", False, known) == {"x", "x.y", "p.q"}
    g = nx.DiGraph([("ctx_lsp.index.graph", "ctx_lsp.cli.main"), ("benchmark_gen.speed", "ctx_lsp.server.serve"),
                    ("ctx_lsp.engine", "ctx_lsp.retrieval.engine")])
    assert upward(g) == ["benchmark_gen.speed -> ctx_lsp.server.serve: benchmark_gen imports the server",
                         "ctx_lsp.index.graph -> ctx_lsp.cli.main: the core imports an adapter"]
