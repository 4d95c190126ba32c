"""Architecture invariants (docs/architecture.md), checked mechanically.

- Every ctx_lsp module outside ctx_lsp/server/ never imports pygls or lsprotocol:
  checked at run time (a fresh interpreter's sys.modules) and statically (imports inside functions too).
- benchmark_gen never imports ctx_lsp.server (static check of every source file).
- Every edge of an indexed real project records its site and resolver.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TESTS, build_index, corpus_dir

from ctx_lsp.index.model import (
    RESOLVER_CONTAINS,
    RESOLVER_FLOW,
    RESOLVER_IMPORT,
    RESOLVER_MRO,
    RESOLVER_SCOPE,
    RESOLVER_TYPE,
)

REPO = TESTS.parent
CORE_REQUIRED = ["index.model", "index.extract", "index.bind", "index.graph", "index.workspace", "index.store",
                 "engine", "index.discovery"]
LSP_PACKAGES = ("pygls", "lsprotocol")


def core_files() -> list[Path]:
    pkg = REPO / "ctx_lsp"
    return sorted(p for p in pkg.rglob("*.py") if p.name != "__main__.py" and "server" not in p.relative_to(pkg).parts[:1])


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("").as_posix().replace("/", ".")
    return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel


def imported_modules(path: Path) -> set[str]:
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    return scan_imports(path.read_text(encoding="utf-8"), package)


def scan_imports(src: str, package: str) -> set[str]:
    """Every module an `import`/`from ... import` anywhere in the source names (relative ones resolved)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)  # `from ctx_lsp import server`
    return out


def test_core_modules_import_without_lsp_packages() -> None:
    modules = [f"ctx_lsp.{m}" for m in CORE_REQUIRED] + [module_name(p) for p in core_files()]
    code = (
        "import importlib, json, sys\n"
        f"for m in {sorted(set(modules))!r}:\n"
        "    importlib.import_module(m)\n"
        f"print(json.dumps(sorted(k for k in sys.modules if k.split('.')[0] in {LSP_PACKAGES!r})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
    assert "ctx_lsp.retrieval" in modules or not (REPO / "ctx_lsp/retrieval").exists()


def test_lsp_probe_would_notice_an_import() -> None:
    """The run-time check above is not vacuous: importing the server does pull pygls in."""
    code = "import sys, ctx_lsp.server.serve; print('pygls' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    if proc.returncode != 0:
        pytest.skip(f"ctx_lsp.server not importable here: {proc.stderr.strip().splitlines()[-1:]}")
    assert proc.stdout.strip() == "True"


@pytest.mark.parametrize("path", core_files(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_core_source_never_imports_lsp_packages(path: Path) -> None:
    mods = imported_modules(path)
    bad = {m for m in mods if m.split(".")[0] in LSP_PACKAGES}
    if path.relative_to(REPO).as_posix() != "ctx_lsp/cli/commands.py":  # `serve` dispatches to the server, by design
        bad |= {m for m in mods if m == "ctx_lsp.server" or m.startswith("ctx_lsp.server.")}
    assert not bad, f"{path.name} imports {sorted(bad)}"


def test_benchmark_gen_never_imports_the_server() -> None:
    files = sorted((REPO / "benchmark_gen").rglob("*.py"))
    assert files
    offenders = {}
    for path in files:
        bad = {m for m in imported_modules(path) if m == "ctx_lsp.server" or m.startswith("ctx_lsp.server.")}
        if bad:
            offenders[path.relative_to(REPO).as_posix()] = sorted(bad)
    assert offenders == {}


def test_import_scanner_sees_nested_and_relative_imports() -> None:
    """The static checks would catch a lazy (in-function) or relative import of the server or pygls."""
    src = "def f():\n    from ctx_lsp import server\n    from .server import run_server\n    import pygls.lsp\n"
    assert {"ctx_lsp.server", "ctx_lsp.server.run_server", "pygls.lsp"} <= scan_imports(src, "ctx_lsp")


# the callback-flow pass (flow.py) is part of binding: `hash_utf8 = md5_utf8` in requests' auth
BINDER_RESOLVERS = {RESOLVER_CONTAINS, RESOLVER_IMPORT, RESOLVER_SCOPE, RESOLVER_TYPE, RESOLVER_MRO, RESOLVER_FLOW}


def test_every_edge_of_a_real_project_has_site_and_resolver(tmp_path: Path) -> None:
    root = corpus_dir("requests")
    idx = build_index(root, tmp_path / "cache")
    edges = list(idx.graph.edges())
    assert len(edges) > 1000
    for e in edges:
        assert e.resolver in BINDER_RESOLVERS, e
        assert e.path in idx.facts, e
        assert 1 <= e.line <= max(idx.facts[e.path].lines, 1), e
        assert e.col >= 0, e
        assert e.src == e.path or e.src.startswith(e.path + "::"), "binder edges are sited in their source's file"
        assert e.src in idx.graph and e.dst in idx.graph
