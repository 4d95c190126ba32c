"""The callback-flow pass after an edit (workspace._update_flow): an edit that only moves calls (lines
inserted above them) places the flow edges again from the last pass's propagated values; any other
change of the constraints propagates again. Either way the graph equals a scratch build."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import FIXTURES

import ctx_lsp.index.workspace as ws_mod
from ctx_lsp.index.flow import FLOW_KEY
from ctx_lsp.index.workspace import WorkspaceIndex


def _flow_edges(index: WorkspaceIndex) -> list:
    return sorted(index.graph.extra_edges.get(FLOW_KEY, []))


def test_moved_calls_reuse_the_propagation_and_equal_scratch(tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "ws"
    shutil.copytree(FIXTURES / "edges", root)
    index = WorkspaceIndex(root, cache_dir=tmp_path / "c1")
    index.load_or_build(save=False)
    before = _flow_edges(index)
    assert any(e.path == "app/registry.py" for e in before)  # the fixture's dispatching calls
    passes: list[int] = []
    real = ws_mod.flow_values
    monkeypatch.setattr(ws_mod, "flow_values", lambda *a: passes.append(1) or real(*a))
    text = (root / "app/registry.py").read_text()
    index.update_file("app/registry.py", text, overlay=True)  # the same text: nothing to do
    moved = "# a comment moves every line below it\n\n" + text
    index.update_file("app/registry.py", moved, overlay=True)
    assert passes == []  # only positions changed: the values of the last pass stand
    after = _flow_edges(index)
    assert [e.line for e in after if e.path == "app/registry.py"] == \
        [e.line + 2 for e in before if e.path == "app/registry.py"]
    (root / "app/registry.py").write_text(moved)
    scratch = WorkspaceIndex(root, cache_dir=tmp_path / "c2")
    scratch.load_or_build(save=False)
    assert after == _flow_edges(scratch)
    assert sorted(index.graph.edges()) == sorted(scratch.graph.edges())
    # a new registration changes the constraints themselves: propagated again, still equal to scratch
    extra = moved + "\n\ndef late_hook():\n    pass\n\n\ndef wire_late():\n    registry.hook(late_hook)\n"
    passes.clear()  # the scratch build above made one
    index.update_file("app/registry.py", extra, overlay=True)
    assert passes == [1]
    assert any(e.dst == "app/registry.py::late_hook" for e in _flow_edges(index))
    (root / "app/registry.py").write_text(extra)
    scratch = WorkspaceIndex(root, cache_dir=tmp_path / "c3")
    scratch.load_or_build(save=False)
    assert sorted(index.graph.edges()) == sorted(scratch.graph.edges())
