"""ForkPool: workers forked straight from a process with threads (the language server), whose children
never run code that could wait on a lock another thread held at the fork; and an index built beside
threads binds and extracts on two cores, equal to a build in one process."""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from test_incremental import comparable, diff

from ctx_lsp.index.forkpool import ForkPool, ForkPoolError
from ctx_lsp.index.workspace import WorkspaceIndex

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")


def _square(x: int) -> tuple[int, int, bytes]:
    if x == -1:
        raise ValueError("task -1 failed")
    if x == -2:
        os._exit(3)  # the worker dies
    if x == -3:
        time.sleep(60)  # the worker hangs
    return x * x, os.getpid(), b"x" * 300_000  # results larger than a pipe's default buffer


def _children() -> set[int]:
    task = Path(f"/proc/self/task/{threading.get_native_id()}/children")
    if task.exists():
        return {int(p) for p in task.read_text().split()}
    return set()


def test_results_come_in_task_order_from_every_worker_and_the_children_are_reaped() -> None:
    before = _children()  # (other tests' children may still be about)
    with ForkPool(_square, list(range(40)), 2) as pool:
        got = list(pool.results())
    assert [r[0] for r in got] == [x * x for x in range(40)]
    pids = {r[1] for r in got}
    assert len(pids) == 2 and os.getpid() not in pids
    assert not (_children() - before) & pids


def test_a_caller_that_stops_reading_ends_the_pool_at_once() -> None:
    """As a cancelled indexing does (the progress callback raises between results)."""
    before = _children()
    t = time.monotonic()
    with pytest.raises(KeyError), ForkPool(_square, [1, -3, -3, -3], 2) as pool:
        for _ in pool.results():
            raise KeyError("cancelled")
    assert time.monotonic() - t < 10  # the hung workers were killed, not waited for
    assert not _children() - before


@pytest.mark.parametrize(("bad", "error", "message"), [(-1, ValueError, "task -1 failed"),
                                                      (-2, ForkPoolError, "exit status 3")])
def test_a_failing_task_or_a_dying_worker_is_raised_in_the_parent(bad: int, error: type, message: str) -> None:
    before = _children()
    with pytest.raises(error, match=message), ForkPool(_square, [1, 2, bad, 4, 5], 2) as pool:
        list(pool.results())
    assert not _children() - before


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="watches the worker through /proc")
def test_a_worker_that_dies_between_tasks_is_reported_not_a_broken_pipe() -> None:
    """Handing the next task to a child that has died is an EPIPE; the pool reports the death instead."""
    before = _children()
    with ForkPool(_square, [1, 2, 3, 4, 5], 1) as pool:
        (worker,) = _children() - before
        time.sleep(1.0)  # it answers the two tasks it holds and waits for the next
        os.kill(worker, signal.SIGKILL)
        while Path(f"/proc/{worker}/stat").read_text().split()[2] != "Z":  # a signal is delivered, not awaited
            time.sleep(0.01)
        with pytest.raises(ForkPoolError, match="killed by signal 9"):
            list(pool.results())
    assert not _children() - before


def test_a_hung_worker_is_killed_after_the_stall_time() -> None:
    before = _children()
    t = time.monotonic()
    with pytest.raises(ForkPoolError, match="no worker finished"), ForkPool(_square, [1, -3, 3], 2, stall=1.0) as pool:
        list(pool.results())
    assert time.monotonic() - t < 10
    assert not _children() - before


def test_a_worker_forked_beside_a_thread_reading_stdin_finishes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hazard multiprocessing's fork start brings: its child closes sys.stdin first, which waits on
    the buffer lock a thread blocked reading stdin holds (the language server's wire reader)."""
    r, w = os.pipe()
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(r, "rb")))
    monkeypatch.setattr(sys, "stdin", stdin)
    reader = threading.Thread(target=stdin.buffer.read, args=(1,), daemon=True)
    reader.start()
    time.sleep(0.2)  # the reader is blocked inside read(), holding the buffer's lock
    try:
        with ForkPool(_square, list(range(8)), 2, stall=20.0) as pool:
            assert [x for x, _, _ in pool.results()] == [x * x for x in range(8)]
    finally:
        os.write(w, b"!")
        reader.join(5)
        os.close(w)


LINUX_FORKS = pytest.mark.skipif(sys.platform != "linux", reason="a process with threads forks its workers on Linux only")


@pytest.fixture
def small_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pools for a workspace of a few files (the thresholds keep small workspaces in process)."""
    from ctx_lsp.index import workspace as ws_mod

    monkeypatch.setattr(ws_mod, "PARALLEL_THRESHOLD", 8)
    monkeypatch.setattr(ws_mod, "PARALLEL_BYTES", 0)


@LINUX_FORKS
def test_an_index_built_beside_threads_uses_both_cores_and_equals_one_built_in_process(
        tmp_path: Path, small_pools: None) -> None:
    root = tmp_path / "ws"
    files = {"pkg/__init__.py": "", "pkg/util.py": "class Base:\n    def run(self):\n        return 1\n"}
    files |= {f"pkg/m{i}.py": f"from pkg.util import Base\n\n\nclass C{i}(Base):\n    def go(self):\n"
                              f"        return self.run() + {i}\n\n\ndef make{i}():\n    return C{i}().go()\n"
              for i in range(16)}
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    stop = threading.Event()
    beside = threading.Thread(target=stop.wait, daemon=True)  # as in the server: another thread runs
    beside.start()
    try:
        pooled = WorkspaceIndex(root, cache_dir=tmp_path / "pooled", workers=2)
        assert threading.active_count() > 1 and pooled.may_fork_workers()
        pooled.load_or_build()
        assert pooled.workers_used == {"extract": 2, "bind": 2}
        for i in range(0, 16, 2):  # a checkout: half the modules change
            (root / f"pkg/m{i}.py").write_text(files[f"pkg/m{i}.py"].replace("+ ", "- "), encoding="utf-8")
        pooled.refresh()
        assert pooled.workers_used == {"extract": 2, "bind": 2}
    finally:
        stop.set()
    alone = WorkspaceIndex(root, cache_dir=tmp_path / "alone", workers=1)
    alone.load_or_build()
    assert pooled.graph.has_edge("pkg/m0.py::C0.go", "pkg/util.py::Base.run")
    got, want = comparable(pooled), comparable(alone)
    assert got == want, diff(got, want)


@LINUX_FORKS
def test_no_progress_call_lets_readers_in_while_work_beside_the_bind_pool_writes(tmp_path: Path, small_pools: None) -> None:
    # the language server answers requests from its progress callback: a request there read the graph
    # while the thread beside the bind pool was placing nodes ("dictionary changed size during iteration")
    root = tmp_path / "ws"
    for i in range(24):
        (root / "pkg").mkdir(parents=True, exist_ok=True)
        (root / f"pkg/m{i}.py").write_text(f"def f{i}():\n    return {i}\n", encoding="utf-8")
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=2)
    index.fork_safe = True
    beside_busy: list[bool] = []
    index.while_binding.append(lambda changed: time.sleep(0.5))  # slow work beside the pool

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "binding":
            beside_busy.append(any(t.name == "ctx-lsp-while-binding" and t.is_alive() for t in threading.enumerate()))

    index.load_or_build(progress)
    assert index.workers_used.get("bind") == 2, index.workers_used
    assert beside_busy and not any(beside_busy), beside_busy


@pytest.mark.skipif(sys.platform != "linux", reason="a process with threads forks its workers on Linux only")
def test_binding_falls_back_to_this_process_when_the_workers_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    from ctx_lsp.index import workspace as ws_mod

    monkeypatch.setattr(ws_mod, "PARALLEL_THRESHOLD", 8)
    root = tmp_path / "ws"
    for i in range(12):
        (root / "pkg").mkdir(parents=True, exist_ok=True)
        (root / f"pkg/m{i}.py").write_text(f"def f{i}():\n    return f{(i + 1) % 12}\n", encoding="utf-8")
    (root / "pkg/__init__.py").write_text("", encoding="utf-8")
    real = ws_mod._bind_chunk

    def dies(paths: list[str]) -> list:
        if os.getpid() != parent:
            os._exit(9)
        return real(paths)

    parent = os.getpid()
    monkeypatch.setattr(ws_mod, "_bind_chunk", dies)
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=2)
    index.load_or_build()
    assert index.workers_used["bind"] == 1 and "binding in this process instead" in caplog.text
    alone = WorkspaceIndex(root, cache_dir=tmp_path / "alone", workers=1)
    alone.load_or_build()
    assert comparable(index) == comparable(alone)


@pytest.mark.skipif(sys.platform != "linux", reason="a process with threads forks its writer on Linux only")
def test_a_cache_write_beside_threads_is_forked_and_a_failed_one_redone_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The language server's writes (1.7 s in process after a Django checkout, holding the folder's
    lock) come from a forked child; one that fails is redone in process when the next write waits."""
    from ctx_lsp.index.store import IndexStore

    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/__init__.py").write_text("", encoding="utf-8")
    (root / "pkg/a.py").write_text("def f():\n    return 1\n", encoding="utf-8")
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True).start()
    try:
        index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=2)
        index.background_save = True
        index.load_or_build()
        assert index._saver is not None  # a child writes
        index.wait_saved()
        assert WorkspaceIndex(root, cache_dir=tmp_path / "cache").load_or_build(save=False).extracted == 0

        parent, real = os.getpid(), IndexStore.save

        def fails_in_child(self: IndexStore, *args: object, **kwargs: object) -> None:
            if os.getpid() != parent:
                raise OSError("disk full")
            real(self, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(IndexStore, "save", fails_in_child)
        (root / "pkg/b.py").write_text("from pkg.a import f\n\n\ndef g():\n    return f()\n", encoding="utf-8")
        index.refresh()
        assert index._saver is not None
        index.wait_saved()  # the child's status says it failed: written here instead
        assert "writing it in process" in caplog.text
    finally:
        stop.set()
    again = WorkspaceIndex(root, cache_dir=tmp_path / "cache")
    assert again.load_or_build(save=False).extracted == 0 and "pkg/b.py" in again.facts


def test_a_pool_that_reaps_later_leaves_its_exited_children_to_the_next_pool() -> None:
    """An indexer's update need not wait for its workers to exit (`reap_later`): a later pool reaps them."""
    from ctx_lsp.index import forkpool

    before = _children()
    with ForkPool(_square, list(range(6)), 2, reap_later=True) as pool:
        got = list(pool.results())
    pids = {r[1] for r in got}
    assert all(p in forkpool._EXITING or p not in _children() for p in pids)  # handed over, not waited for
    deadline = time.monotonic() + 10
    while pids & _children() and time.monotonic() < deadline:
        with ForkPool(_square, [1], 1) as again:  # a later pool reaps what has exited
            list(again.results())
        time.sleep(0.05)
    assert not pids & _children(), "the earlier pool's children were reaped"
    assert not pids & forkpool._EXITING
    assert not _children() - before


def test_an_index_update_leaves_no_exited_worker_unreaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its pools reap later (`reap_later`); the update itself reaps them before it returns, so a
    server or daemon idle after a build has no zombie children."""
    from ctx_lsp.index import forkpool
    from ctx_lsp.index import workspace as ws_mod

    monkeypatch.setattr(ws_mod, "PARALLEL_THRESHOLD", 8)
    monkeypatch.setattr(ws_mod, "PARALLEL_BYTES", 0)
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    for i in range(20):
        (root / "pkg" / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    before = _children()
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=2)
    index.fork_safe = True
    index.load_or_build(save=False)
    assert index.workers_used == {"extract": 2, "bind": 2}
    assert not forkpool._EXITING
    assert not _children() - before
