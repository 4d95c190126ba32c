"""An update re-binds a file per site group (a function, or a method of a top-level class, with what
is nested in it): groups whose sites, defs, imports and flows only moved, and whose dependency keys the
update did not change, keep their prior results; the rest are evaluated again. Either way the index
equals a build from scratch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from test_incremental import comparable, diff

from ctx_lsp.index import workspace as ws_mod
from ctx_lsp.index.bind import Binder
from ctx_lsp.index.workspace import WorkspaceIndex

UTIL = "def helper(x):\n    return x\n\n\ndef other(x):\n    return x\n"
APP = """from pkg.util import helper, other


class App:
    def run(self):
        return helper(1)

    def stop(self):
        return other(2)


def main():
    return App().run()
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def _scratch(root: Path, cache: Path) -> dict:
    index = WorkspaceIndex(root, cache_dir=cache, workers=1)
    index.load_or_build()
    return comparable(index)


def _record(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, note: Callable[..., object]) -> None:
    """Wrap `owner.name` so that each call is first shown to `note` with its arguments."""
    original = getattr(owner, name)

    def spy(*args: object) -> object:
        note(*args)
        return original(*args)

    monkeypatch.setattr(owner, name, spy)


@pytest.fixture
def looked_up(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The scopes the binder evaluated a name in, in order."""
    scopes: list[str] = []
    _record(monkeypatch, Binder, "lookup", lambda _self, _info, scope, *_: scopes.append(scope))
    return scopes


def test_an_edited_method_is_evaluated_again_and_a_moved_one_keeps_its_edges_moved(
        tmp_path: Path, looked_up: list[str]) -> None:
    root = tmp_path / "ws"
    _write(root, {"pkg/__init__.py": "", "pkg/util.py": UTIL, "pkg/app.py": APP})
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    index.load_or_build()
    before = next(e for e in index.bindings["pkg/app.py"].edges if e.src.endswith("App.run") and e.kind == "CALLS")
    # a new method above `run` moves it and `stop` down three lines; `stop` now calls helper
    edited = APP.replace("class App:\n", "class App:\n    def start(self):\n        return other(0)\n\n")
    edited = edited.replace("return other(2)", "return helper(2)")
    (root / "pkg/app.py").write_text(edited, encoding="utf-8")
    looked_up.clear()
    index.refresh()

    assert "App.stop" in looked_up and "App.start" in looked_up, "changed and new methods are evaluated"
    assert "App.run" not in looked_up and "main" not in looked_up, "unchanged ones keep their results"
    after = next(e for e in index.bindings["pkg/app.py"].edges if e.src.endswith("App.run") and e.kind == "CALLS")
    assert (after.dst, after.line, after.col) == (before.dst, before.line + 3, before.col)
    assert index.graph.has_edge("pkg/app.py::App.stop", "pkg/util.py::helper")
    got, want = comparable(index), _scratch(root, tmp_path / "scratch")
    assert got == want, diff(got, want)


def test_a_changed_name_re_evaluates_only_the_groups_that_read_it(tmp_path: Path, looked_up: list[str]) -> None:
    root = tmp_path / "ws"
    _write(root, {"pkg/__init__.py": "", "pkg/util.py": UTIL, "pkg/app.py": APP})
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    index.load_or_build()
    # `other` becomes a class: its interface changes, `helper`'s does not
    (root / "pkg/util.py").write_text(UTIL.replace("def other(x):\n    return x\n", "class other:\n    pass\n"),
                                      encoding="utf-8")
    looked_up.clear()
    index.refresh()

    assert "App.stop" in looked_up, "it called `other`"
    assert "App.run" not in looked_up and "main" not in looked_up, "they read only `helper` and `App`"
    assert index.graph.has_edge("pkg/app.py::App.stop", "pkg/util.py::other")
    assert any(e.kind == "INSTANTIATES" and e.dst == "pkg/util.py::other" for e in index.bindings["pkg/app.py"].edges)
    got, want = comparable(index), _scratch(root, tmp_path / "scratch")
    assert got == want, diff(got, want)


def test_a_class_that_gains_a_base_re_evaluates_its_methods(tmp_path: Path, looked_up: list[str]) -> None:
    """A method's `self.x()` resolves through its class's bases: a new base changes the class's key."""
    base = "class Base:\n    def go(self):\n        return 1\n\n\n"
    app = "from pkg.base import Base\n\n\nclass App:\n    def run(self):\n        return self.go()\n"
    root = tmp_path / "ws"
    _write(root, {"pkg/__init__.py": "", "pkg/base.py": base, "pkg/app.py": app})
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    index.load_or_build()
    assert not index.graph.has_edge("pkg/app.py::App.run", "pkg/base.py::Base.go")
    (root / "pkg/app.py").write_text(app.replace("class App:", "class App(Base):"), encoding="utf-8")
    looked_up.clear()
    index.refresh()
    assert index.graph.has_edge("pkg/app.py::App.run", "pkg/base.py::Base.go")
    got, want = comparable(index), _scratch(root, tmp_path / "scratch")
    assert got == want, diff(got, want)


# a class defined twice, the second with an `@overload` of a method: extraction files the overload's
# sites under the second class's first `head` (A#2.head), so its flows belong there too (stop 58's fuzzing)
TWICE = """class A:
    def head(self, h):
        self.write(h)


class A:
    def head(self, h):
        self.write(h)

    @overload
    def head(self, n):
        self.head(n)
"""


def test_the_flows_of_a_method_of_a_class_defined_twice_are_scoped_as_its_sites() -> None:
    from ctx_lsp.index.extract import extract

    facts = extract("m.py", TWICE)
    scope_at = {s.line: s.scope for s in facts.sites}
    flows = [f for f in facts.flows if f[1] != "decor"]
    assert {f[2] for f in flows} == {2, 3, 7, 8, 11, 12}
    for f in flows:
        assert f[0] == scope_at.get(f[2], f[0]) and f[0] == ("A.head" if f[2] <= 3 else "A#2.head"), f
    assert [f[5] for f in facts.flows if f[1] == "decor"] == ["A#2.head"]  # the decorated def, named as extracted


@pytest.mark.parametrize("how", ["refresh", "update_file"])
def test_a_base_given_to_the_first_of_two_same_named_classes_equals_a_scratch_build(tmp_path: Path, how: str) -> None:
    """The second class's method group is kept; the first's is evaluated again and reads only its own class."""
    root = tmp_path / "ws"
    _write(root, {"m.py": TWICE, "other.py": "x = 1\n"})  # a second file: else every binding is re-bound
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    index.load_or_build()
    after = TWICE.replace("class A:", "class A(Mixin):", 1)
    (root / "m.py").write_text(after, encoding="utf-8")
    if how == "refresh":
        index.refresh()
    else:
        index.update_file("m.py", after, overlay=True)
    got, want = comparable(index), _scratch(root, tmp_path / "scratch")
    assert got == want, diff(got, want)


def _pooled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str], WorkspaceIndex]:
    """Twelve apps over one util module, indexed by an index whose updates of 8 files or more bind in
    a fork pool."""
    monkeypatch.setattr(ws_mod, "PARALLEL_THRESHOLD", 8)
    files = {"pkg/__init__.py": "", "pkg/util.py": UTIL}
    files |= {f"pkg/app{i}.py": APP.replace("class App", f"class App{i}").replace("App()", f"App{i}()")
              for i in range(12)}
    root = tmp_path / "ws"
    _write(root, files)
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=2)
    index.fork_safe = True  # as the daemon and the server declare: the bind pool forks (see may_fork_workers)
    index.load_or_build()
    if not index.may_fork_workers():
        pytest.skip("this platform cannot fork")
    return root, files, index


def test_pooled_binding_keeps_groups_and_equals_a_scratch_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, files, index = _pooled(tmp_path, monkeypatch)
    (root / "pkg/util.py").write_text(UTIL.replace("def other(x):\n    return x\n", "class other:\n    pass\n"),
                                      encoding="utf-8")
    for i in range(0, 12, 2):  # and half the apps move their methods down a line
        text = files[f"pkg/app{i}.py"].replace("class App", "# moved\nclass App")
        (root / f"pkg/app{i}.py").write_text(text, encoding="utf-8")
    index.refresh()
    assert index.workers_used.get("bind") == 2
    got, want = comparable(index), _scratch(root, tmp_path / "scratch")
    assert got == want, diff(got, want)


def test_a_failure_keeping_groups_binds_the_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        looked_up: list[str]) -> None:
    from ctx_lsp.index import bind

    root = tmp_path / "ws"
    _write(root, {"pkg/__init__.py": "", "pkg/util.py": UTIL, "pkg/app.py": APP})
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    index.load_or_build()

    def broken(*args: object) -> int:
        raise ValueError("a bug in keeping groups")

    monkeypatch.setattr(bind, "_by_group", broken)
    (root / "pkg/app.py").write_text(APP.replace("return other(2)", "return helper(2)"), encoding="utf-8")
    looked_up.clear()
    index.refresh()
    assert "App.run" in looked_up, "every group evaluated"
    got, want = comparable(index), _scratch(root, tmp_path / "scratch")
    assert got == want, diff(got, want)


def test_groups_that_statement_reuse_copied_are_kept_without_comparing_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout rewrites a file but keeps most of a class's methods: statement reuse copies their
    facts, says so (FileFacts.moved), and the binder keeps those groups without comparing them item by
    item; only the edited method is compared (and found changed). The index equals a scratch build."""
    from ctx_lsp.index import bind as bind_mod

    methods = "".join(f"    def m{i}(self):\n        return helper({i}) + other({i})\n\n" for i in range(6))
    app = f"from pkg.util import helper, other\n\n\nclass App:\n{methods}\n\ndef main():\n    return App().m0()\n"
    root = tmp_path / "ws"
    _write(root, {"pkg/__init__.py": "", "pkg/util.py": UTIL, "pkg/app.py": app})
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    index.load_or_build()
    compared: list[str] = []
    _record(monkeypatch, bind_mod, "_shift", lambda *args: compared.append(args[-1]))
    # lines added above the class move every method; m3's body changes
    edited = app.replace("class App:", "X = 1\nY = 2\n\n\nclass App:").replace("helper(3)", "other(3)")
    (root / "pkg/app.py").write_text(edited, encoding="utf-8")
    index.refresh()
    facts = index.facts["pkg/app.py"]
    assert facts.moved is not None and sorted(facts.moved[1]) == ["App.m0", "App.m1", "App.m2", "App.m4", "App.m5", "main"]
    assert set(facts.moved[1].values()) == {4}
    assert compared == ["App.m3"]
    got, want = comparable(index), _scratch(root, tmp_path / "scratch")
    assert got == want, diff(got, want)


def test_a_pooled_update_places_nodes_beside_the_workers_and_its_failure_is_raised(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pooled update places the changed files' nodes in a thread beside the bind workers; the graph
    equals a scratch build, and a failure there is raised by the update, not lost in the thread."""
    import threading

    from ctx_lsp.index.graph import CodeGraph

    root, files, index = _pooled(tmp_path, monkeypatch)
    placed: list[str] = []
    _record(monkeypatch, CodeGraph, "set_file", lambda *_: placed.append(threading.current_thread().name))
    (root / "pkg/util.py").write_text(UTIL + "\n\ndef third(x):\n    return x\n", encoding="utf-8")
    for i in range(12):  # every app now calls the new function: all re-bound, in the pool
        (root / f"pkg/app{i}.py").write_text(files[f"pkg/app{i}.py"].replace("from pkg.util import helper, other",
                                                                             "from pkg.util import helper, other, third"),
                                             encoding="utf-8")
    index.refresh()
    assert index.workers_used.get("bind") == 2 and placed and set(placed) == {"ctx-lsp-while-binding"}
    got, want = comparable(index), _scratch(root, tmp_path / "scratch")
    assert got == want, diff(got, want)

    def broken(self: CodeGraph, path: str, nodes: list) -> None:  # type: ignore[type-arg]
        raise RuntimeError("placing nodes failed")

    monkeypatch.setattr(CodeGraph, "set_file", broken)
    for i in range(12):
        (root / f"pkg/app{i}.py").write_text(files[f"pkg/app{i}.py"] + "\n# again\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="placing nodes failed"):
        index.refresh()


def test_chunks_go_heaviest_first_with_about_equal_weight() -> None:
    """A checkout changes a few very large files: handed out first, the workers finish together."""
    items = [f"f{i}" for i in range(40)]
    weight = {f"f{i}": (1000 if i in (7, 30) else 10 + i) for i in range(40)}
    chunks = ws_mod._balanced(items, weight.__getitem__, 8, 4)
    assert sorted(x for c in chunks for x in c) == sorted(items)  # every item once
    assert chunks[0][0] in ("f7", "f30") and chunks[1][0] in ("f7", "f30")  # the heavy ones first, alone
    target = sum(weight.values()) // 8
    sums = [sum(weight[x] for x in c) for c in chunks]
    assert all(target <= s < target + 50 for s in sums[2:-1]) and sums[-1] < target + 50  # light ones even
    assert all(len(c) >= 4 for c in chunks[2:-1])


def test_a_pooled_build_holds_files_and_bindings_in_the_order_an_in_process_build_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pools take the largest files first; what the index holds never depends on that order."""
    monkeypatch.setattr(ws_mod, "PARALLEL_THRESHOLD", 8)
    monkeypatch.setattr(ws_mod, "PARALLEL_BYTES", 0)
    files = {"pkg/__init__.py": "", "pkg/util.py": UTIL}
    files |= {f"pkg/app{i}.py": APP + "".join(f"\n\ndef f{j}():\n    return helper({j})\n" for j in range(i * 7 % 23))
              for i in range(14)}
    root = tmp_path / "ws"
    _write(root, files)
    pooled = WorkspaceIndex(root, cache_dir=tmp_path / "c1", workers=2)
    pooled.fork_safe = True
    if not pooled.may_fork_workers():
        pytest.skip("this platform cannot fork")
    pooled.load_or_build()
    alone = WorkspaceIndex(root, cache_dir=tmp_path / "c2", workers=1)
    alone.load_or_build()
    assert pooled.workers_used == {"extract": 2, "bind": 2}
    assert list(pooled.facts) == list(alone.facts)
    assert list(pooled.bindings) == list(alone.bindings)
    for i in range(14):  # a checkout of every app, in the pools again
        (root / f"pkg/app{i}.py").write_text(files[f"pkg/app{i}.py"] + "\n\ndef extra():\n    return other(1)\n",
                                            encoding="utf-8")
    pooled.refresh()
    alone.refresh()
    assert pooled.workers_used == {"extract": 2, "bind": 2}
    assert list(pooled.facts) == list(alone.facts)
    assert list(pooled.bindings) == list(alone.bindings)
    got, want = comparable(pooled), comparable(alone)
    assert got == want, diff(got, want)
