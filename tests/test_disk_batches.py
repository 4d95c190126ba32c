"""How the language server folds changes seen on disk into a folder's index (server/folders.py
Root.apply): few files one by one, a checkout-sized batch as one refresh, a directory reported alone
as the files under it, lost events as the whole tree. Each ends equal to a scratch build."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctx_lsp.engine import Engine
from ctx_lsp.index.watch import EVERYTHING
from ctx_lsp.index.workspace import WorkspaceIndex
from ctx_lsp.server.folders import DISK, REFRESH_AT, Root


def module(i: int, callee: str = "base") -> str:
    return f"from pkg.core import {callee}\n\n\ndef f{i}(x):\n    return {callee}(x) + {i}\n"


@pytest.fixture
def folder(tmp_path: Path) -> Root:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text("")
    (ws / "pkg" / "core.py").write_text("def base(x):\n    return x\n\n\ndef other(x):\n    return -x\n")
    for i in range(3):
        (ws / "pkg" / f"m{i}.py").write_text(module(i))
    engine = Engine(ws, cache_dir=tmp_path / "cache")
    engine.open()
    return Root("ws", ws, ws.as_uri(), engine)


def calls(root: Root) -> list[tuple[str, str]]:
    return sorted((e.src, e.dst) for e in root.engine.index.graph.edges() if e.kind == "CALLS")


def scratch_calls(root: Root, tmp_path: Path) -> list[tuple[str, str]]:
    ix = WorkspaceIndex(root.path, cache_dir=tmp_path / "scratch")
    ix.load_or_build(save=False)
    return sorted((e.src, e.dst) for e in ix.graph.edges() if e.kind == "CALLS")


def spy(root: Root, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    ix = root.engine.index
    seen = {"refresh": 0, "reload_file": 0}
    for name in seen:
        real = getattr(ix, name)

        def wrapped(*a: object, _real: object = real, _name: str = name) -> object:
            seen[_name] += 1
            return _real(*a)  # type: ignore[operator]

        monkeypatch.setattr(ix, name, wrapped)
    return seen


def test_a_few_files_changed_on_disk_are_reloaded_one_by_one(folder: Root, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    seen = spy(folder, monkeypatch)
    (folder.path / "pkg" / "m1.py").write_text(module(1, "other"))
    (folder.path / "pkg" / "m3.py").write_text(module(3))
    assert folder.apply([("pkg/m1.py", DISK, None), ("pkg/m3.py", DISK, None)], []) == 2
    assert seen == {"refresh": 0, "reload_file": 2}
    assert calls(folder) == scratch_calls(folder, tmp_path)


def test_a_checkout_sized_batch_is_one_refresh(folder: Root, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = spy(folder, monkeypatch)
    rels = []
    for i in range(REFRESH_AT):
        (folder.path / "pkg" / f"n{i}.py").write_text(module(i, "other"))
        rels.append(f"pkg/n{i}.py")
    (folder.path / "pkg" / "m0.py").unlink()
    rels.append("pkg/m0.py")
    assert folder.apply([(r, DISK, None) for r in rels], []) == REFRESH_AT + 1
    assert seen == {"refresh": 1, "reload_file": 0}
    assert calls(folder) == scratch_calls(folder, tmp_path)
    assert any(src == "pkg/n3.py::f3" for src, _ in calls(folder))


def test_a_directory_reported_alone_stands_for_its_files(folder: Root, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    (folder.path / "pkg").rename(folder.path / "lib")  # only the two directories are reported
    seen = spy(folder, monkeypatch)
    assert folder.apply([("pkg", DISK, None), ("lib", DISK, None)], []) == 10  # 5 gone, 5 found
    assert seen["reload_file"] == 10 and seen["refresh"] == 0
    assert sorted(folder.engine.index.facts) == sorted(f"lib/{n}" for n in ("__init__.py", "core.py", "m0.py", "m1.py", "m2.py"))
    assert calls(folder) == scratch_calls(folder, tmp_path)


def test_lost_events_refresh_the_whole_tree(folder: Root, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (folder.path / "pkg" / "m2.py").write_text(module(2, "other"))
    seen = spy(folder, monkeypatch)
    folder.apply([(EVERYTHING, DISK, None)], [])
    assert seen == {"refresh": 1, "reload_file": 0}
    assert calls(folder) == scratch_calls(folder, tmp_path)


def test_files_a_listing_leaves_out_stay_out_when_they_arrive_one_by_one(folder: Root, tmp_path: Path) -> None:
    """A watched or opened file under a .gitignore'd directory or a virtual environment is not indexed
    (it used to be: only a listing read .gitignore), and an edited .gitignore is read again."""
    ws = folder.path
    (ws / ".gitignore").write_text("gen/\n")
    (ws / "gen").mkdir()
    (ws / "gen" / "out.py").write_text(module(7))
    (ws / "tools" / "pyenv").mkdir(parents=True)
    (ws / "tools" / "pyenv" / "pyvenv.cfg").write_text("home = /usr\n")
    (ws / "tools" / "pyenv" / "site.py").write_text(module(8))
    (ws / "pkg" / "m1.py").write_text(module(1, "other"))
    folder.apply([(r, DISK, None) for r in ("gen/out.py", "tools/pyenv/site.py", "pkg/m1.py")], [])
    assert "gen/out.py" not in folder.engine.index.facts and "tools/pyenv/site.py" not in folder.engine.index.facts
    assert calls(folder) == scratch_calls(folder, tmp_path)
    ix = folder.engine.index
    assert ix.accepts("pkg/m2.py")
    (ws / ".gitignore").write_text("gen/\npkg/m2.py\n")
    assert not ix.accepts("pkg/m2.py") and ix.accepts("pkg/m1.py")


def test_a_refresh_under_the_server_leaves_its_cache_write_until_asked(folder: Root, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The language server answers the request that found a checkout before writing the cache
    (`defer_save`; it writes once changes pause, server.save_later): the refresh writes nothing, a
    start from the cache meanwhile redoes the update, and `save_pending` writes it."""
    ix = folder.engine.index
    ix.defer_save = True
    for i in range(REFRESH_AT):
        (folder.path / "pkg" / f"n{i}.py").write_text(module(i, "other"))
    writes = []
    real = ix._write_cache
    monkeypatch.setattr(ix, "_write_cache", lambda: (writes.append(1), real())[1])
    folder.apply([(f"pkg/n{i}.py", DISK, None) for i in range(REFRESH_AT)], [])
    assert "pkg/n3.py" in ix.facts and ix.pending_save and writes == []

    def start() -> int:  # files a start from the cache has to extract
        other = WorkspaceIndex(folder.path, cache_dir=tmp_path / "cache")
        return other.load_or_build(save=False).extracted

    assert start() == REFRESH_AT
    ix.save_pending()
    ix.wait_saved()
    assert writes == [1] and not ix.pending_save and start() == 0
    ix.save_pending()
    assert writes == [1]  # nothing left to write
