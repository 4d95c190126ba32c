"""Tests in the graph: COVERS edges from a real `ctx-lsp coverage run`, the static fallback, stale flags.

The fixture workspace is a tiny package and its pytest suite; the expected edges are worked out by
hand from the line table below.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctx_lsp.engine import Engine
from ctx_lsp.index.workspace import WorkspaceIndex
from ctx_lsp.sources.coverage_data import attach_coverage

CALC = '''def add(a, b):
    return a + b


def unused():
    return 0


class Calculator:
    def __init__(self):
        self.total = 0

    def push(self, x):
        self.total = add(self.total, x)
        return self
'''
OPS = "def sub(a, b):\n    return a - b\n"
TESTS = '''from pkg.calc import Calculator, add
from pkg.ops import sub


def test_add():
    assert add(1, 2) == 3


def test_sub():
    assert sub(3, 1) == 2


def test_fixture(calc):
    assert calc.push(1).total == 1


class TestCalculator:
    def test_push(self):
        c = Calculator()
        c.push(2)
        assert c.total == 2
'''
CONFTEST = '''import pytest

from pkg.calc import Calculator


@pytest.fixture
def calc():
    return Calculator()
'''

T = "tests/test_calc.py::"
ADD, PUSH, INIT, SUB = ("pkg/calc.py::add", "pkg/calc.py::Calculator.push", "pkg/calc.py::Calculator.__init__",
                        "pkg/ops.py::sub")
# pkg/calc.py lines run inside tests: 2 (add), 11 (__init__), 14-15 (push); pkg/ops.py: 2 (sub).
# The fixture runs before test_fixture starts, so its Calculator() is no test's coverage.
DYNAMIC = {
    (T + "test_add", ADD, 2, ("lines=1",)),
    (T + "test_sub", SUB, 2, ("lines=1",)),
    (T + "test_fixture", PUSH, 14, ("lines=2",)),
    (T + "test_fixture", ADD, 2, ("lines=1",)),
    (T + "TestCalculator.test_push", INIT, 11, ("lines=1",)),
    (T + "TestCalculator.test_push", PUSH, 14, ("lines=2",)),
    (T + "TestCalculator.test_push", ADD, 2, ("lines=1",)),
}


def make_workspace(root: Path) -> None:
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/calc.py").write_text(CALC)
    (root / "pkg/ops.py").write_text(OPS)
    (root / "tests/test_calc.py").write_text(TESTS)
    (root / "tests/conftest.py").write_text(CONFTEST)


def covers(index: WorkspaceIndex, resolver: str) -> set[tuple[str, str, int, tuple[str, ...]]]:
    return {(e.src, e.dst, e.line, e.extra) for e in index.graph.edges() if e.kind == "COVERS"
            and e.resolver == resolver}


def ctx_lsp(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctx_lsp", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "GIT_CEILING_DIRECTORIES": str(cwd or Path.cwd())})


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """One real `ctx-lsp coverage run` of the fixture suite, shared by the tests below."""
    base = tmp_path_factory.mktemp("cov")
    root = base / "ws"
    make_workspace(root)
    cache = base / "cache"
    def listing() -> list[str]:
        # pytest itself may leave __pycache__ or a plugin's dot-directory; the data file must not be here
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                      if "__pycache__" not in p.parts and not (p.is_dir() and p.name.startswith(".")))

    before = listing()
    proc = ctx_lsp("coverage", "run", "--root", str(root), "--cache-dir", str(cache), "--",
                   sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=base)
    assert listing() == before, "ctx-lsp wrote into the workspace"
    return root, cache, proc


def test_coverage_run_exact_edges(ran: tuple[Path, Path, subprocess.CompletedProcess[str]]) -> None:
    root, cache, proc = ran
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "4 tests" in proc.stdout and "7 COVERS edges" in proc.stdout and "0 stale" in proc.stdout
    assert (cache / "coverage/.coverage").is_file()
    engine = Engine(root, cache_dir=cache)
    engine.open()
    assert covers(engine.index, "coverage-dynamic") == DYNAMIC
    # tests with dynamic data have no static edges; the fixture has no dynamic data, so it keeps its own
    assert covers(engine.index, "static-test") == {
        ("tests/conftest.py::calc", "pkg/calc.py::Calculator", 8, ("instantiates",))}
    items = [i for i in engine.neighbors(ADD) if i["edge"] == "COVERS"]
    assert {(i["symbol"], i["resolver"], i["direction"]) for i in items} == {
        ("test_add", "coverage-dynamic", "in"), ("test_fixture", "coverage-dynamic", "in"),
        ("TestCalculator.test_push", "coverage-dynamic", "in")}
    tc = attach_coverage(engine.index)
    assert [h.test for h in tc.tests_for("pkg/calc.py::Calculator")] == [
        T + "TestCalculator.test_push", T + "test_fixture", "tests/conftest.py::calc"]
    assert [h.test for h in tc.tests_for("pkg/calc.py::unused")] == []
    assert [n for n, _e in tc.exercised_by(T + "TestCalculator.test_push")] == [ADD, INIT, PUSH]
    assert [n for n, _e in tc.exercised_by(T + "TestCalculator")] == [ADD, INIT, PUSH]
    # after changing add: its tests, then tests of its callers (push is called by both tests already)
    run = tc.tests_to_run(ADD)
    assert [(h.test, h.depth) for h in run] == [
        (T + "TestCalculator.test_push", 0), (T + "test_add", 0), (T + "test_fixture", 0)]
    assert [(h.test, h.depth, h.covers) for h in tc.tests_to_run("pkg/ops.py::sub")] == [(T + "test_sub", 0, SUB)]


def test_stale_coverage_is_flagged(ran: tuple[Path, Path, subprocess.CompletedProcess[str]],
                                   tmp_path: Path) -> None:
    root, cache, _ = ran
    ws = tmp_path / "ws"
    make_workspace(ws)
    # import the recorded data into a copy: paths in the data are the original root's, so import
    # from the original root, then edit a covered file there through a fresh index on another cache
    proc = ctx_lsp("coverage", "import", "--root", str(root), "--cache-dir", str(tmp_path / "c2"),
                   str(cache / "coverage/.coverage"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "7 COVERS edges" in proc.stdout and "0 stale" in proc.stdout
    engine = Engine(root, cache_dir=tmp_path / "c2")
    engine.open()
    assert covers(engine.index, "coverage-dynamic") == DYNAMIC
    ops = root / "pkg/ops.py"
    original = ops.read_text()
    try:
        ops.write_text(OPS.replace("a - b", "a + -b"))
        engine.refresh()
        got = covers(engine.index, "coverage-dynamic")
        stale = {(s, d) for s, d, _line, extra in got if "stale" in extra}
        assert stale == {(T + "test_sub", SUB)}  # only coverage of the edited file is older than its source
        assert len(got) == len(DYNAMIC)
        # survives a restart: the persisted coverage is re-applied with the same flags
        engine.index.save()
        again = Engine(root, cache_dir=tmp_path / "c2")
        again.open()
        assert covers(again.index, "coverage-dynamic") == got
    finally:
        ops.write_text(original)


def test_static_fallback_without_coverage(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    make_workspace(root)
    (root / "tests/test_calc.py").write_text(TESTS + '''

def test_nested():
    def helper():
        return add(2, 2)
    assert helper() == 4
''')
    engine = Engine(root, cache_dir=tmp_path / "cache")
    engine.open()
    assert covers(engine.index, "coverage-dynamic") == set()
    got = {(s, d, extra) for s, d, _line, extra in covers(engine.index, "static-test")}
    assert got == {
        (T + "test_add", ADD, ("calls",)),
        (T + "test_sub", SUB, ("calls",)),
        (T + "test_nested", ADD, ("calls",)),  # a call in a function nested in the test is the test's
        (T + "TestCalculator.test_push", "pkg/calc.py::Calculator", ("instantiates",)),
        (T + "TestCalculator.test_push", PUSH, ("calls",)),
        ("tests/conftest.py::calc", "pkg/calc.py::Calculator", ("instantiates",)),
    }
    tc = attach_coverage(engine.index)
    # changing add: test_add directly, then the tests of its caller push (one call away)
    assert [(h.test, h.depth) for h in tc.tests_to_run(ADD)] == [
        (T + "test_add", 0), (T + "test_nested", 0), (T + "TestCalculator.test_push", 1)]
    # an edit to a test file updates its static edges
    engine.index.update_file("tests/test_calc.py", TESTS.replace("assert sub(3, 1) == 2", "assert add(3, 1) == 4"))
    got = {(s, d) for s, d, _line, _extra in covers(engine.index, "static-test")}
    assert (T + "test_sub", ADD) in got and (T + "test_sub", SUB) not in got


PASSED_IN = '''import pytest
from pkg.calc import Calculator, add, unused
from pkg import ops

LIMIT = 3


@pytest.mark.parametrize("func", [add, pytest.param(ops.sub, id="sub")])
def test_binary(func):
    assert func(LIMIT, 1) in (2, 4)


@pytest.mark.parametrize("cls", [Calculator])
def test_make(cls):
    assert cls().total == 0


def test_raises():
    with pytest.raises(TypeError):
        add(1)
    pytest.raises(TypeError, unused, 1)


def test_checks():
    c = make()
    assert isinstance(c, Calculator)


def make():
    return None
'''


def test_static_edges_take_functions_a_test_runs_by_reference_and_values_its_decorators_pass(
        tmp_path: Path) -> None:
    """A function passed to `pytest.raises(E, f)` or a value of `@pytest.mark.parametrize` is run by
    the test without a call site of its own: each is a static COVERS edge (`references`). A class
    the test only checks against is not, nor a constant; and a warm start restores the same edges."""
    root = tmp_path / "ws"
    make_workspace(root)
    (root / "tests/test_passed.py").write_text(PASSED_IN)
    P = "tests/test_passed.py::"

    def edges(cache: Path) -> tuple[Engine, set[tuple[str, str, tuple[str, ...]]]]:
        engine = Engine(root, cache_dir=cache)
        engine.open()
        engine.index.wait_saved()
        return engine, {(s, d, extra) for s, d, _line, extra in covers(engine.index, "static-test") if s.startswith(P)}

    engine, got = edges(tmp_path / "cache")
    assert got == {
        (P + "test_binary", ADD, ("references",)),
        (P + "test_binary", SUB, ("references",)),
        (P + "test_make", "pkg/calc.py::Calculator", ("references",)),
        (P + "test_raises", ADD, ("calls",)),
        (P + "test_raises", "pkg/calc.py::unused", ("references",)),
        (P + "test_checks", P + "make", ("calls",)),
    }
    assert [h.test for h in attach_coverage(engine.index).tests_for(SUB)] == [T + "test_sub", P + "test_binary"]
    again, restored = edges(tmp_path / "cache")
    assert attach_coverage(again.index).restored and restored == got  # from the cache's section


def test_import_errors(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    make_workspace(root)
    proc = ctx_lsp("coverage", "import", "--root", str(root), "--cache-dir", str(tmp_path / "c"), cwd=tmp_path)
    assert proc.returncode == 2 and "no coverage data file" in proc.stderr
    # a data file without per-test contexts
    data = tmp_path / "plain.coverage"
    (tmp_path / "script.py").write_text("x = 1\n")
    subprocess.run([sys.executable, "-m", "coverage", "run", f"--data-file={data}", "script.py"], check=True,
                   cwd=tmp_path, capture_output=True)
    proc = ctx_lsp("coverage", "import", "--root", str(root), "--cache-dir", str(tmp_path / "c"), str(data),
                   cwd=tmp_path)
    assert proc.returncode == 2 and "no per-test contexts" in proc.stderr
    proc = ctx_lsp("coverage", "run", "--root", str(root), "--cache-dir", str(tmp_path / "c"), cwd=tmp_path)
    assert proc.returncode == 2 and "no COMMAND" in proc.stderr


def test_neighbors_json_lists_covers(ran: tuple[Path, Path, subprocess.CompletedProcess[str]]) -> None:
    root, cache, _ = ran
    proc = ctx_lsp("neighbors", "--json", "--root", str(root), "--cache-dir", str(cache), "pkg/ops.py::sub",
                   cwd=root.parent)
    assert proc.returncode == 0, proc.stderr
    items = [i for i in json.loads(proc.stdout)["neighbors"] if i["edge"] == "COVERS"]
    assert items == [{"path": "tests/test_calc.py", "symbol": "test_sub", "kind": "test", "edge": "COVERS",
                      "direction": "in", "site": {"path": "pkg/ops.py", "line": 2}, "resolver": "coverage-dynamic",
                      "names": ["lines=1"]}]


def test_static_edges_are_restored_only_for_the_graph_they_were_written_with(tmp_path: Path) -> None:
    """A warm start installs the cached static edges (after a change, with the changed test file's
    computed again); a cache that a process without the coverage producer wrote computes them all
    again. Either way they equal a build from scratch."""
    import time as _time

    from ctx_lsp.sources.coverage_data import STATIC_SECTION

    root, cache = tmp_path / "ws", tmp_path / "cache"
    make_workspace(root)

    def open_engine(cache_dir: Path = cache) -> tuple[Engine, set[tuple[str, str, int, tuple[str, ...]]]]:
        engine = Engine(root, cache_dir=cache_dir)
        engine.open()
        engine.index.wait_saved()
        return engine, covers(engine.index, "static-test")

    def scratch() -> set[tuple[str, str, int, tuple[str, ...]]]:
        return open_engine(tmp_path / f"scratch{_time.monotonic_ns()}")[1]

    first, built = open_engine()
    assert built and not attach_coverage(first.index).restored
    again, restored = open_engine()
    assert attach_coverage(again.index).restored and restored == built
    # a changed test file: its edges computed again, and equal to a scratch build
    (root / "tests/test_calc.py").write_text(TESTS.replace("assert sub(3, 1) == 2", "assert add(3, 1) == 4"))
    changed, edges = open_engine()
    assert attach_coverage(changed.index).restored and edges == scratch() and edges != built
    # a process that has no coverage producer writes the cache: the section it carries is not trusted
    (root / "tests/test_calc.py").write_text(TESTS)
    bare = WorkspaceIndex(root, cache_dir=cache)
    bare.load_or_build()
    bare.wait_saved()
    assert STATIC_SECTION in bare.loaded_sections  # carried as read, with the stamp of the write before
    after, edges = open_engine()
    assert not attach_coverage(after.index).restored and edges == scratch() == built
    # and the next write (after that engine's open) holds a section it can use again
    (root / "pkg/ops.py").write_text(OPS + "\n")
    open_engine()
    last, edges = open_engine()
    assert attach_coverage(last.index).restored and edges == scratch()


def test_a_warm_start_computes_again_only_the_static_edges_of_test_files_its_changes_reach(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After changes on disk a warm start takes the cached static edges and computes again only those
    of the test files it touched and of those whose calls lead into a changed test file (only a test
    file holds tests, and whether a callee is one is its own file's business); the result equals a
    build from scratch."""
    import time as _time

    from ctx_lsp.sources.coverage_data import TestCoverage

    root, cache = tmp_path / "ws", tmp_path / "cache"
    make_workspace(root)
    (root / "tests/__init__.py").write_text("")
    (root / "tests/support.py").write_text("def check(x):\n    return x\n")
    (root / "tests/test_ops.py").write_text("from pkg.ops import sub\nfrom tests.support import check\n\n\n"
                                            "def test_sub_only():\n    assert check(sub(2, 1)) == 1\n")
    (root / "tests/test_plain.py").write_text("def helper():\n    return 1\n\n\ndef test_plain():\n    assert helper() == 1\n")
    computed: list[str] = []
    original = TestCoverage._static_edges

    def spy(self: TestCoverage, path: str, facts: object) -> object:
        computed.append(path)
        return original(self, path, facts)  # type: ignore[arg-type]

    monkeypatch.setattr(TestCoverage, "_static_edges", spy)

    def open_engine(cache_dir: Path = cache, warm: bool = True) -> set[tuple[str, str, int, tuple[str, ...]]]:
        computed.clear()
        engine = Engine(root, cache_dir=cache_dir)
        engine.open()
        engine.index.wait_saved()
        assert attach_coverage(engine.index).restored == warm
        return covers(engine.index, "static-test")

    def scratch() -> set[tuple[str, str, int, tuple[str, ...]]]:
        return open_engine(tmp_path / f"scratch{_time.monotonic_ns()}", warm=False)

    built = open_engine(warm=False)
    assert len(computed) == 6 and ("tests/test_ops.py::test_sub_only", "tests/support.py::check") in \
        {e[:2] for e in built}
    # a body edit in pkg/ops.py re-binds nothing else, and a code file holds no tests: nothing computed
    (root / "pkg/ops.py").write_text(OPS.replace("return a - b", "return -(b - a)"))
    edges = open_engine()
    assert computed == [] and edges == scratch() == built
    # a body edit in a test file that another test file calls: both
    (root / "tests/support.py").write_text("def check(x):\n    return +x\n")
    edges = open_engine()
    assert sorted(computed) == ["tests/support.py", "tests/test_ops.py"] and edges == scratch() == built
    # a test file that calls nothing changed: only itself
    (root / "tests/test_plain.py").write_text("def helper():\n    return 2\n\n\ndef test_plain():\n    assert helper() == 2\n")
    edges = open_engine()
    assert computed == ["tests/test_plain.py"] and edges == scratch() == built
    # nothing changed: nothing computed
    assert open_engine() == built and computed == []


def test_django_style_test_suite_is_tests(tmp_path: Path) -> None:
    """Django lays its suite out as tests/<app>/tests.py beside test-only models: all of it is test code,
    so its test methods are tests with static COVERS edges, and a `testing/` package's subpackages stay code."""
    from ctx_lsp.index.facts import is_test_path

    assert is_test_path("tests/queries/tests.py") and is_test_path("tests/queries/models.py")
    assert is_test_path("django/contrib/admin/tests.py") and is_test_path("pkg/sub/tests/helpers/util.py")
    assert not is_test_path("numpy/testing/_private/utils.py") and not is_test_path("pkg/contest.py")
    root = tmp_path / "ws"
    make_workspace(root)
    (root / "tests/queries").mkdir(parents=True)
    (root / "tests/queries/models.py").write_text("class Item:\n    pass\n")
    (root / "tests/queries/tests.py").write_text(
        "from pkg.calc import add\n\n\nclass AddTests:\n    def test_add(self):\n        assert add(1, 2) == 3\n")
    engine = Engine(root, cache_dir=tmp_path / "cache")
    engine.open()
    node = engine.graph.node("tests/queries/tests.py::AddTests.test_add")
    assert node is not None and node.kind == "test"
    got = {(s, d) for s, d, _line, _extra in covers(engine.index, "static-test")}
    assert ("tests/queries/tests.py::AddTests.test_add", ADD) in got
