"""The binder evaluates a name or receiver chain once per scope and replays its value, resolver and
dependencies for the sites that repeat it (Binder.memoize): the bindings are the same without it, on
this project's own sources."""

from __future__ import annotations

from pathlib import Path

from ctx_lsp.index.bind import Binder
from ctx_lsp.index.workspace import WorkspaceIndex

ROOT = Path(__file__).resolve().parent.parent


def _bindings(index: WorkspaceIndex, memoize: bool) -> dict[str, tuple]:
    binder = Binder(index.ws)
    binder.memoize = memoize
    out = {}
    for path in sorted(index.facts):
        b = binder.bind_file(path)
        out[path] = (b.edges, sorted(b.deps), b.internal, b.external, b.unresolved, b.flows)
    return out


def test_memoized_binding_equals_binding_every_site(tmp_path: Path) -> None:
    index = WorkspaceIndex(ROOT / "ctx_lsp", cache_dir=tmp_path)
    index.load_or_build(save=False)
    plain, memoized = _bindings(index, False), _bindings(index, True)
    assert sum(len(v[0]) for v in plain.values()) > 1000  # a real workspace, many edges
    assert memoized == plain
