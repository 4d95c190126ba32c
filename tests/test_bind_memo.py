"""The binder evaluates a name or receiver chain once per scope and replays its value, resolver and
dependencies for the sites that repeat it (Binder.memoize): the bindings are the same without it, on
this project's own sources."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ctx_lsp.index.bind import Binder
from ctx_lsp.index.model import Edge
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


def test_binding_some_site_groups_gives_their_call_sites_alone(tmp_path: Path) -> None:
    """`bind_file(only=...)` (Engine.call_sites reads a hub's callers that way): each group's
    every-site calls are those of the whole binding, and no other group's sites are evaluated."""
    from ctx_lsp.index.bind import _group_keys

    index = WorkspaceIndex(ROOT / "ctx_lsp", cache_dir=tmp_path)
    index.load_or_build(save=False)
    binder = Binder(index.ws)
    binder.every_site = True
    kinds = {"CALLS", "INSTANTIATES", "REFERENCES", "OVERRIDES"}
    checked = 0
    for path in sorted(index.facts):
        group_of = _group_keys(index.ws.info[path].classes)

        def group(e: Edge, group_of: Callable[[str], str] = group_of) -> str:
            return group_of(e.src.partition("::")[2])

        whole = [e for e in binder.bind_file(path).edges if e.kind in kinds]
        for key in sorted({group(e) for e in whole})[:6]:
            part = [e for e in binder.bind_file(path, only={key}).edges if e.kind in kinds]
            assert {group(e) for e in part} <= {key}, path
            assert part == [e for e in whole if group(e) == key], (path, key)
            checked += 1
    assert checked > 200
