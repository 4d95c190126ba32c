"""A checkout back to file versions the index held before takes their facts from the store of
previous versions instead of extracting them again, and the index equals a scratch build."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import write_tree

from ctx_lsp.index.workspace import WorkspaceIndex

A = {
    "pkg/__init__.py": "",
    "pkg/base.py": "class Base:\n    def run(self):\n        return helper()\n\n\ndef helper():\n    return 1\n",
    "pkg/child.py": "from .base import Base\n\n\nclass Child(Base):\n    def run(self):\n        return super().run()\n",
    "pkg/gone_in_b.py": "from .base import helper\n\n\ndef old_api():\n    return helper()\n",
    "main.py": "from pkg.child import Child\n\n\ndef main():\n    return Child().run()\n",
}
B_CHANGES = {
    "pkg/base.py": "class Base:\n    def run(self):\n        return helper() + 1\n\n    def stop(self):\n        pass\n\n\ndef helper():\n    return 2\n",
    "main.py": "from pkg.child import Child\nfrom pkg.new_in_b import fresh\n\n\ndef main():\n    return Child().stop() or fresh()\n",
    "pkg/new_in_b.py": "def fresh():\n    return 3\n",
}


def _to_b(root: Path) -> None:
    write_tree(root, B_CHANGES)
    (root / "pkg/gone_in_b.py").unlink()


def _to_a(root: Path) -> None:
    write_tree(root, {k: A[k] for k in ("pkg/base.py", "main.py", "pkg/gone_in_b.py")})
    (root / "pkg/new_in_b.py").unlink()


def _open(root: Path, cache: Path) -> tuple[WorkspaceIndex, object]:
    ix = WorkspaceIndex(root, cache_dir=cache, workers=1)
    return ix, ix.load_or_build()


def test_a_checkout_back_reuses_the_facts_it_held_and_equals_a_scratch_build(tmp_path: Path) -> None:
    root, cache = tmp_path / "ws", tmp_path / "cache"
    write_tree(root, A)
    _open(root, cache)

    _to_b(root)
    _, to_b = _open(root, cache)
    assert (to_b.extracted, to_b.reused) == (3, 0)  # two changed, one added: nothing held them before

    _to_a(root)
    back, to_a = _open(root, cache)
    assert (to_a.extracted, to_a.reused) == (0, 3)  # two changed back, one re-added
    scratch, _ = _open(root, tmp_path / "scratch")
    assert back.facts == scratch.facts
    assert back.graph.snapshot() == scratch.graph.snapshot()

    # a third version of a file whose other versions are kept is extracted, not mistaken for one
    write_tree(root, {"pkg/base.py": A["pkg/base.py"].replace("return 1", "return 10")})
    third, to_c = _open(root, cache)
    assert (to_c.extracted, to_c.reused) == (1, 0)
    assert third.facts == _open(root, tmp_path / "scratch_c")[0].facts


def test_a_running_index_reuses_them_on_refresh_and_never_keeps_an_editor_buffer(tmp_path: Path) -> None:
    root, cache = tmp_path / "ws", tmp_path / "cache"
    write_tree(root, A)
    ix, _ = _open(root, cache)
    ix.update_file("pkg/child.py", A["pkg/child.py"] + "\n\nBUFFER = 1\n", overlay=True)  # unsaved, never kept

    _to_b(root)
    ix.refresh()
    assert ix.reused == 0
    _to_a(root)
    ix.refresh()
    assert ix.reused == 3
    ix.update_file("pkg/child.py", A["pkg/child.py"])  # the buffer closed: the disk content again
    scratch, _ = _open(root, tmp_path / "scratch")
    assert ix.facts == scratch.facts
    assert ix.graph.snapshot() == scratch.graph.snapshot()
    assert not any(k.startswith("pkg/child.py\0") for k in ix.previous._unpacked())


def test_files_rewritten_with_the_same_content_keep_their_facts(tmp_path: Path) -> None:
    """A copied tree, a `touch`, a formatter that changed nothing: new stats, same bytes. Such files
    are read and hashed but not extracted or re-bound, on a warm start and on a refresh."""
    root, cache = tmp_path / "ws", tmp_path / "cache"
    write_tree(root, A)
    ix, _ = _open(root, cache)
    before = ix.graph.snapshot()

    write_tree(root, A | {"pkg/base.py": B_CHANGES["pkg/base.py"]})  # every file rewritten, one changed
    warm, report = _open(root, cache)
    assert (report.extracted, report.reused, warm.kept) == (1, 0, len(A) - 1)
    assert warm.facts == _open(root, tmp_path / "scratch")[0].facts
    assert warm.graph.snapshot() == _open(root, tmp_path / "scratch2")[0].graph.snapshot()

    write_tree(root, A)  # every file rewritten again, one changed back: a running index
    changed = ix.refresh()
    assert changed == []  # the running index never saw the change: the same bytes as it holds
    assert ix.kept == len(A)
    assert ix.graph.snapshot() == before
    st = ix.state["main.py"]
    assert (st.size, st.mtime_ns) == (lambda s: (s.st_size, s.st_mtime_ns))((root / "main.py").stat())
    assert ix.refresh() == [] and ix.kept == 0  # the new stats were recorded: nothing read again


def _modules(version: int, n: int = 320) -> dict[str, str]:
    """A package of n modules; each version rewrites every function body."""
    out = {"pkg/__init__.py": ""}
    for i in range(n):
        out[f"pkg/m{i}.py"] = (f"from pkg.m{(i + 1) % n} import f{(i + 1) % n}\n\n\n"
                               f"def f{i}(x):\n    return f{(i + 1) % n}(x) + {version} * {i}\n\n\n"
                               f"class C{i}:\n    def run(self):\n        return f{i}({version})\n")
    return out


def test_a_checkout_that_rewrote_most_of_the_code_is_indexed_from_scratch(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """When the new content (in no version the index holds) is most of the workspace, a warm start
    indexes from scratch instead of updating (cheaper), and equals a scratch build: told by the file
    states written beside the cache, without reading the cache, or by the cache's own states when that
    file is missing. A `touch` of every file, which changes no content, stays an update that extracts
    nothing."""
    import os

    from ctx_lsp.index.store import IndexStore

    reads: list[str] = []
    load = IndexStore.load

    def counting(self, root):  # type: ignore[no-untyped-def]
        reads.append(str(root))
        return load(self, root)

    monkeypatch.setattr(IndexStore, "load", counting)
    root, cache = tmp_path / "ws", tmp_path / "cache"
    write_tree(root, _modules(1))
    _open(root, cache)

    write_tree(root, _modules(2))
    reads.clear()
    rebuilt, report = _open(root, cache)
    assert not report.warm and report.extracted == 321 and reads == []
    scratch, _ = _open(root, tmp_path / "scratch")
    assert rebuilt.facts == scratch.facts and rebuilt.graph.snapshot() == scratch.graph.snapshot()

    write_tree(root, _modules(3))
    (cache / "states.msgpack").unlink()
    reads.clear()
    again, report = _open(root, cache)
    assert not report.warm and reads == [str(root)] and again.facts == _open(root, tmp_path / "scratch3")[0].facts

    for path in root.rglob("*.py"):
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    touched, report = _open(root, cache)
    assert report.warm and report.extracted == 0 and touched.facts == again.facts

    # a checkout of a fifth of the code stays an update
    write_tree(root, {k: v for k, v in _modules(4).items() if k.endswith(("1.py", "5.py"))})
    _, report = _open(root, cache)
    assert report.warm and report.extracted == 64


def test_a_running_index_rebinds_everything_after_a_checkout_of_most_files(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh that changes most files re-binds every file instead of comparing old and new
    interfaces (which costs more), and equals a scratch build; a small change still compares them
    and re-binds only what it affects."""
    from ctx_lsp.index import workspace

    compared: list[str] = []
    original = workspace._interface

    def counting(f):  # type: ignore[no-untyped-def]
        compared.append(f.path)
        return original(f)

    monkeypatch.setattr(workspace, "_interface", counting)
    bound: list[int] = []
    bind_many = workspace.WorkspaceIndex._bind_many

    def binding(self, order, *args):  # type: ignore[no-untyped-def]
        bound.append(len(order))
        return bind_many(self, order, *args)

    monkeypatch.setattr(workspace.WorkspaceIndex, "_bind_many", binding)
    root = tmp_path / "ws"
    write_tree(root, _modules(1, n=400))
    ix = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    ix.load_or_build()
    write_tree(root, {k: v for k, v in _modules(2, n=400).items() if not k.endswith("0.py")})  # 360 files
    compared.clear()
    changed = ix.refresh()
    assert len(changed) == 360 and not compared and bound[-1] == 401  # every file, __init__ included
    scratch = WorkspaceIndex(root, cache_dir=tmp_path / "scratch", workers=1)
    scratch.load_or_build()
    assert ix.facts == scratch.facts and ix.graph.snapshot() == scratch.graph.snapshot()
    assert {p: b.edges for p, b in ix.bindings.items()} == {p: b.edges for p, b in scratch.bindings.items()}

    write_tree(root, {"pkg/m7.py": _modules(3, n=400)["pkg/m7.py"]})
    ix.refresh()
    assert "pkg/m7.py" in compared and bound[-1] == 1  # a body edit: its interface is the same


def test_an_empty_store_of_previous_versions_is_none() -> None:
    """A cache written by a cold build holds an empty store: loaded, it is falsy, so a warm start does
    not read every file whose stat changed to look for versions it cannot hold."""
    from ctx_lsp.index.facts import pack_records
    from ctx_lsp.index.previous import PreviousFacts

    store = PreviousFacts()
    store.load(pack_records({}))
    assert not store and not store.holds("a.py", "d")
    store.load(pack_records({"a.py\0d": b"x"}))
    assert store and store.holds("a.py", "d") and not store.holds("a.py", "e")


# -- the bindings of the tree before the last checkout ---------------------------------------------
# ten modules over one base: version B changes the base's interface and every module, removes one and
# adds one (12 files: a checkout, not an edit), so re-binding is needed both ways
WIDE_A = {"pkg/__init__.py": "", "pkg/base.py": "def helper():\n    return 1\n\n\nclass Base:\n    def run(self):\n        return helper()\n"}
WIDE_A |= {f"pkg/m{i}.py": f"from pkg.base import Base, helper\n\n\nclass M{i}(Base):\n    def go(self):\n        return self.run() + helper()\n"
           for i in range(10)}
WIDE_A["pkg/gone.py"] = "from pkg.m0 import M0\n\n\ndef old():\n    return M0().go()\n"
WIDE_A["pkg/user.py"] = "from pkg.m5 import M5\n\n\ndef use():\n    return M5().go()\n"  # the same in B
WIDE_B = {"pkg/base.py": "def helper2():\n    return 2\n\n\nclass Base:\n    def run(self):\n        return helper2()\n\n    def stop(self):\n        return None\n"}
WIDE_B |= {f"pkg/m{i}.py": f"from pkg.base import Base, helper2\n\n\nclass M{i}(Base):\n    def go(self):\n        return self.stop() or helper2()\n"
           for i in range(10)}
WIDE_B["pkg/new.py"] = "from pkg.m1 import M1\n\n\ndef fresh():\n    return M1().go()\n"


def _lay_out(root: Path, files: dict[str, str], absent: tuple[str, ...]) -> None:
    write_tree(root, files)
    for rel in absent:
        (root / rel).unlink(missing_ok=True)


def _to_wide_a(root: Path) -> None:
    _lay_out(root, {k: v for k, v in WIDE_A.items() if k in WIDE_B or k == "pkg/gone.py"}, ("pkg/new.py",))


def _to_wide_b(root: Path) -> None:
    _lay_out(root, WIDE_B, ("pkg/gone.py",))


def _checked_out_to_b(tmp_path: Path) -> tuple[Path, WorkspaceIndex]:
    """A running index of WIDE_A, after a checkout to WIDE_B."""
    root = tmp_path / "ws"
    write_tree(root, WIDE_A)
    ix = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    ix.load_or_build()
    _to_wide_b(root)
    ix.refresh()
    return root, ix


def _same_as_scratch(ix: WorkspaceIndex, root: Path, cache: Path) -> None:
    from test_incremental import comparable, diff

    got, want = comparable(ix), comparable(_open(root, cache)[0])
    assert got == want, diff(got, want)


@pytest.mark.parametrize("pooled", [False, True])
def test_a_checkout_back_takes_back_the_bindings_the_checkout_replaced(tmp_path: Path, pooled: bool,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Switching between two branches binds once per direction at most: on the way back every file is
    as it was before the last checkout, so the bindings it replaced are taken back, and the index
    equals a scratch build each time (pooled: as bound by forked workers, the bindings held packed)."""
    from ctx_lsp.index import workspace as ws_mod

    root = tmp_path / "ws"
    write_tree(root, WIDE_A)
    ix = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=2 if pooled else 1)
    if pooled:
        monkeypatch.setattr(ws_mod, "PARALLEL_THRESHOLD", 4)
        ix.fork_safe = True
    ix.load_or_build()
    assert ix.graph.has_edge("pkg/m3.py::M3.go", "pkg/base.py::helper")

    _to_wide_b(root)
    ix.refresh()
    assert ix.restored == 0  # a first checkout binds
    assert ix.graph.has_edge("pkg/m3.py::M3.go", "pkg/base.py::Base.stop")
    _same_as_scratch(ix, root, tmp_path / "scratch_b")

    for n, (lay_out, version) in enumerate([(_to_wide_a, "a"), (_to_wide_b, "b"), (_to_wide_a, "a")]):
        lay_out(root)
        ix.refresh()
        assert ix.restored >= 12, version  # the changed files and the base's dependents: none bound again
        assert ix.graph.has_edge("pkg/m3.py::M3.go", "pkg/base.py::helper") == (version == "a")
        _same_as_scratch(ix, root, tmp_path / f"scratch_{n}")


def test_edits_between_checkouts_keep_the_tree_to_go_back_to_and_another_version_binds(tmp_path: Path) -> None:
    """Small updates after a checkout (an editor's edits, the first file of a checkout back that an
    editor reloads before the watcher's batch) keep what the tree was before it, with the bindings
    they replace of files the checkout left alone; only a tree that is then exactly as it was takes
    its bindings back."""
    root, ix = _checked_out_to_b(tmp_path)
    assert ix.graph.has_edge("pkg/user.py::use", "pkg/m5.py::M5.go")
    ix.update_file("pkg/m5.py", WIDE_B["pkg/m5.py"] + "\n\nEXTRA = 1\n")
    # M5.go renamed: user.py, which the checkout left alone, is bound again by an edit
    ix.update_file("pkg/m5.py", WIDE_B["pkg/m5.py"].replace("def go(", "def go_b("))
    assert not ix.graph.has_edge("pkg/user.py::use", "pkg/m5.py::M5.go")
    ix.update_file("pkg/base.py", WIDE_B["pkg/base.py"] + "\n\ndef helper():\n    return 0\n")
    _to_wide_a(root)
    ix.update_file("pkg/base.py", WIDE_A["pkg/base.py"])  # an editor reloads the file git rewrote
    assert ix.restored == 0
    ix.refresh()  # the rest of the checkout back: every file as before the checkout
    assert ix.restored >= 10
    assert ix.graph.has_edge("pkg/user.py::use", "pkg/m5.py::M5.go")  # its binding from before the checkout
    _same_as_scratch(ix, root, tmp_path / "scratch_1")

    # on to B, then back to A but for one file: not the tree before the last checkout
    _to_wide_b(root)
    ix.refresh()
    _to_wide_a(root)
    _lay_out(root, {"pkg/m7.py": WIDE_A["pkg/m7.py"].replace("helper()", "helper() + 7")}, ())
    ix.refresh()
    assert ix.restored == 0
    _same_as_scratch(ix, root, tmp_path / "scratch_2")


def test_edits_that_re_bind_too_many_other_files_drop_the_tree_to_go_back_to(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The bindings it keeps are bounded: past TREE_BEFORE_EDITS files re-bound by smaller updates, a
    checkout back binds as a first checkout does."""
    from ctx_lsp.index import workspace as ws_mod

    monkeypatch.setattr(ws_mod, "TREE_BEFORE_EDITS", 0)
    root, ix = _checked_out_to_b(tmp_path)
    ix.update_file("pkg/m5.py", WIDE_B["pkg/m5.py"] + "\n\nEXTRA = 1\n")  # re-binds m5 only: kept
    assert ix._tree_before is not None
    ix.update_file("pkg/m5.py", WIDE_B["pkg/m5.py"].replace("def go(", "def go_b("))  # user.py too: dropped
    assert ix._tree_before is None
    _to_wide_a(root)
    ix.refresh()
    assert ix.restored == 0
    _same_as_scratch(ix, root, tmp_path / "scratch")


def test_a_fresh_process_takes_back_the_bindings_the_cache_kept(tmp_path: Path) -> None:
    """The tree before the last checkout is written with the cache: a fresh process opening it after a
    checkout back (the CLI without a daemon) takes the bindings back too, and equals a scratch build."""
    root, cache = tmp_path / "ws", tmp_path / "cache"
    write_tree(root, WIDE_A)
    _open(root, cache)
    _to_wide_b(root)
    at_b, _ = _open(root, cache)
    assert at_b.restored == 0
    at_b.wait_saved()
    for n, (lay_out, version) in enumerate([(_to_wide_a, "a"), (_to_wide_b, "b")]):
        lay_out(root)
        ix, report = _open(root, cache)
        assert report.warm and ix.restored >= 12, version
        _same_as_scratch(ix, root, tmp_path / f"scratch_{n}")
        ix.wait_saved()

    # a fresh process at B edits first: the kept bindings are not decoded for that, and still taken back
    _to_wide_a(root)
    _open(root, cache)[0].wait_saved()  # at A, with the cache
    _to_wide_b(root)
    _open(root, cache)[0].wait_saved()  # a checkout to B: the cache keeps A, packed
    ix, report = _open(root, cache)  # a fresh process at B, nothing to update
    assert report.warm and ix._tree_before is None
    ix.update_file("pkg/m5.py", WIDE_B["pkg/m5.py"].replace("def go(", "def go_b("))  # an edit: re-binds user.py too
    assert ix._tree_before is not None and ix._tree_before.blobs and "pkg/user.py" in ix._tree_before.bindings
    _to_wide_a(root)
    ix.refresh()  # every file as before the last checkout, the edited one included
    assert ix.restored >= 12
    assert ix.graph.has_edge("pkg/user.py::use", "pkg/m5.py::M5.go")
    _same_as_scratch(ix, root, tmp_path / "scratch_edit")

    # an unreadable section only costs the binding
    from ctx_lsp.index import workspace as ws_mod

    assert ws_mod._unpack_tree_before(b"\x93\x01\x02") is None
    assert ws_mod._unpack_tree_before(b"not msgpack at all") is None
