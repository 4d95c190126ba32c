"""The daemon's file watcher (ctx_lsp/index/watch.py) on a real directory, with inotify."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ctx_lsp.index.watch import EVERYTHING, TreeWatcher, _use_inotify, relevant


def py_only(rel: str) -> bool:
    return rel.endswith(".py")


def test_relevant_keeps_indexed_files_and_directories_only() -> None:
    assert relevant("pkg/mod.py", py_only)
    assert relevant("pkg", py_only, is_dir=True)  # a directory removed or renamed reports only itself
    assert relevant("my.pkg", py_only, is_dir=True) and not relevant("my.pkg", py_only)
    assert not relevant("pkg/__pycache__", py_only, is_dir=True) and not relevant("build", py_only, is_dir=True)
    assert not relevant("README.md", py_only)
    assert not relevant("pkg/__pycache__/mod.cpython-311.pyc", py_only)
    assert not relevant(".git/index", py_only)
    assert not relevant("node_modules/x/index.py", py_only)
    assert not relevant("pkg/.mod.py.swp", py_only)
    assert not relevant("../outside.py", py_only)


def wait_for(cond: Callable[[], bool], limit: float = 20.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_a_burst_of_changes_is_one_refresh_after_it_settles_and_other_files_start_none(tmp_path: Path) -> None:
    root, cache = tmp_path / "ws", tmp_path / "ws" / ".cache"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "old.py").write_text("OLD = 1\n")
    cache.mkdir()
    calls: list[float] = []
    seen: list[list[str]] = []

    def on_change(rels: list[str]) -> list[str]:
        calls.append(time.monotonic())
        seen.append(rels)
        return ["x"]

    w = TreeWatcher(root, py_only, on_change, ignore=[cache], quiet_ms=300)
    w.start()
    try:
        assert wait_for(lambda: w.state()["watching"])
        (root / "notes.txt").write_text("x")
        (cache / "index.py").write_text("x")  # the cache directory never counts, even inside the root
        (root / "pkg" / "old.py").read_text()  # reading and listing (what discovery does) raise nothing
        os.listdir(root / "pkg")
        time.sleep(1.0)
        assert calls == [] and w.state()["events"] == 0
        t0 = time.monotonic()
        for i in range(20):  # a checkout writing files in a burst
            (root / "pkg" / f"m{i}.py").write_text(f"X = {i}\n")
            time.sleep(0.01)
        assert wait_for(lambda: w.state()["refreshes"] >= 1)
        time.sleep(1.0)
        state = w.state()
        assert state["refreshes"] == 1 and len(calls) == 1, state  # one refresh for the whole burst
        assert calls[0] - t0 >= 0.3  # only once the burst was quiet for quiet_ms
        assert state["last"]["changed"] == 1 and state["events"] >= 20 and not state["pending"]
        assert seen == [[f"pkg/m{i}.py" for i in sorted(range(20), key=str)]]  # the batch's files, once each
        (root / "pkg").rename(root / "lib")  # a directory moved: reported as itself, both names
        assert wait_for(lambda: len(seen) == 2)
        assert set(seen[1]) >= {"pkg", "lib"}, seen[1]
        w.lost()  # the kernel dropped events: the next batch stands for the whole tree
        assert wait_for(lambda: len(seen) == 3) and seen[2] == [EVERYTHING]
    finally:
        w.stop()
    assert not w.state()["watching"]


def kernel_watches() -> int:
    """inotify watches this process holds, as the kernel lists them (/proc/self/fdinfo)."""
    n = 0
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            n += sum(line.startswith("inotify wd:") for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines())
        except OSError:
            pass
    return n


@pytest.mark.skipif(not _use_inotify(), reason="inotify (Linux) only: elsewhere watchdog watches the whole tree")
def test_inotify_watches_only_directories_whose_events_can_count_and_follows_new_and_moved_ones(tmp_path: Path) -> None:
    """inotify watches are a per-user budget shared with the user's editor: none is spent on skipped
    directories, virtual environments or the cache. Directories created or moved later are watched under
    their new names, and one moved away stops being watched."""
    root = tmp_path / "ws"
    for d in ("pkg/sub", "node_modules/a/b/c", ".venv/lib/site", "tools/pyenv/lib", "build/lib", ".cache/x",
              "x.egg-info", "elsewhere"):
        (root / d).mkdir(parents=True)
    (root / "tools" / "pyenv" / "pyvenv.cfg").write_text("home = /usr\n")  # a venv under any name
    (root / "linked").symlink_to(root / "elsewhere")  # not followed
    seen: list[str] = []
    w = TreeWatcher(root, py_only, lambda rels: seen.extend(rels) or [], ignore=[root / ".cache"], quiet_ms=100)
    w.start()
    try:
        assert wait_for(lambda: w.state()["watching"])
        assert w.state()["dirs"] == 5 == kernel_watches()  # ws, pkg, pkg/sub, tools, elsewhere
        for skipped in ("node_modules/a/b/c", ".venv/lib/site", "tools/pyenv/lib", "build/lib", ".cache/x"):
            (root / skipped / "m.py").write_text("X = 1\n")
        time.sleep(0.5)
        assert w.state()["events"] == 0 and seen == []
        (root / "pkg" / "new" / "deeper").mkdir(parents=True)  # a new directory: watched from now on
        assert wait_for(lambda: "pkg/new" in seen)
        (root / "pkg" / "new" / "deeper" / "late.py").write_text("X = 1\n")
        assert wait_for(lambda: "pkg/new/deeper/late.py" in seen)
        assert w.state()["dirs"] == 7
        (root / "pkg" / "sub").rename(root / "pkg" / "moved")  # its events now come under the new name
        assert wait_for(lambda: {"pkg/sub", "pkg/moved"} <= set(seen))
        (root / "pkg" / "moved" / "m.py").write_text("X = 1\n")
        assert wait_for(lambda: "pkg/moved/m.py" in seen)
        assert "pkg/sub/m.py" not in seen
        (root / "pkg" / "new").rename(tmp_path / "outside")  # moved out of the tree: no longer watched
        assert wait_for(lambda: w.state()["dirs"] == 5 == kernel_watches())
        (root / "env2").mkdir()  # a virtual environment made later (`python -m venv env2`) stops counting
        assert wait_for(lambda: w.state()["dirs"] == 6)
        (root / "env2" / "pyvenv.cfg").write_text("home = /usr\n")
        assert wait_for(lambda: w.state()["dirs"] == 5)
        (root / "env2" / "lib" / "site").mkdir(parents=True)
        (root / "env2" / "lib" / "site" / "dep.py").write_text("X = 1\n")
        time.sleep(0.5)
        assert w.state()["dirs"] == 5 == kernel_watches() and not any("dep.py" in r for r in seen)
        (tmp_path / "outside" / "deeper" / "gone.py").write_text("X = 1\n")
        time.sleep(0.5)
        assert not any("gone.py" in r for r in seen)
    finally:
        w.stop()
    assert kernel_watches() == 0  # all given back


@pytest.mark.skipif(not _use_inotify(), reason="inotify (Linux) only")
def test_after_an_overflowed_queue_directories_made_meanwhile_are_watched(tmp_path: Path) -> None:
    """The kernel dropped events, directory creations among them: the tree is walked again for new
    directories, and the owner is told to look at everything."""
    from types import SimpleNamespace

    from inotify_simple import flags

    from ctx_lsp.index.watch import _InotifyTree

    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    seen: list[str] = []
    w = TreeWatcher(root, py_only, lambda rels: seen.extend(rels) or [])
    tree = _InotifyTree(w)
    tree.stop()
    tree._thread.join(5.0)  # its reader is done (its inotify still open): the creation below goes unread
    try:
        (root / "pkg" / "made" / "deep").mkdir(parents=True)
        assert len(tree.wds) == 2
        tree._event(SimpleNamespace(mask=flags.Q_OVERFLOW, wd=-1, cookie=0, name=""))
        assert sorted(os.path.relpath(d, root) for d in tree.wds) == [".", "pkg", "pkg/made", "pkg/made/deep"]
        assert w._batch == {EVERYTHING}
    finally:
        tree.inotify.close()


def test_a_failing_refresh_is_recorded_and_the_watcher_goes_on(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    outcomes = iter([RuntimeError("index locked"), None])

    def on_change(_rels: list[str]) -> list[str]:
        exc = next(outcomes)
        if exc is not None:
            raise exc
        return []

    w = TreeWatcher(root, py_only, on_change)
    w.start()
    try:
        assert wait_for(lambda: w.state()["watching"])
        (root / "a.py").write_text("A = 1\n")
        assert wait_for(lambda: w.state()["error"] is not None)
        assert "index locked" in w.state()["error"] and not w.state()["pending"]
        (root / "b.py").write_text("B = 1\n")
        assert wait_for(lambda: w.state()["refreshes"] == 1)
        assert w.state()["watching"]
    finally:
        w.stop()


def test_a_tree_that_cannot_be_watched_is_reported_and_left_alone(tmp_path: Path) -> None:
    w = TreeWatcher(tmp_path / "gone", py_only, lambda rels: [])  # no such directory: nothing to watch
    w.start()
    assert wait_for(lambda: w.state()["error"] is not None)
    state = w.state()
    assert not state["watching"] and state["refreshes"] == 0, state
    w.stop()


def test_an_in_process_mcp_bridge_re_indexes_changes_on_disk_before_any_tool_call(tmp_path: Path) -> None:
    from ctx_lsp.engine import Engine
    from ctx_lsp.mcp.bridge import Bridge

    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("def a():\n    return 1\n")
    bridge = Bridge(Engine(root, cache_dir=tmp_path / "cache"))
    bridge.warm_up()
    try:
        assert wait_for(lambda: bridge.watcher is not None and bridge.watcher.state()["watching"])
        (root / "pkg" / "b.py").write_text("from pkg.a import a\n\n\ndef b():\n    return a()\n")
        assert wait_for(lambda: bridge.watcher.state()["refreshes"] == 1)
        assert "pkg/b.py" in bridge.engine.index.facts  # no tool call was made
        assert any(e.src == "pkg/b.py::b" and e.dst == "pkg/a.py::a" for e in bridge.engine.index.graph.edges())
    finally:
        if bridge.watcher is not None:
            bridge.watcher.stop()


@pytest.mark.skipif(not _use_inotify(), reason="inotify (Linux) only")
def test_directories_a_gitignore_leaves_out_are_not_watched_until_it_lets_them_in(tmp_path: Path) -> None:
    """A data or run-output folder the project ignores can hold thousands of directories: none gets a
    watch, and nothing made there starts a refresh. Once the `.gitignore` changes, the owner looks at
    the whole tree, and the watches follow what it lets in and leaves out."""
    root = tmp_path / "ws"
    for d in ("pkg/out/x", "data/run1/a", "data/run2"):
        (root / d).mkdir(parents=True)
    (root / ".gitignore").write_text("data/\nlogs/\n")
    (root / "pkg" / ".gitignore").write_text("out\n")  # a nested one applies below its directory
    seen: list[str] = []
    w = TreeWatcher(root, py_only, lambda rels: seen.extend(rels) or [], quiet_ms=100)
    w.start()
    try:
        assert wait_for(lambda: w.state()["watching"])
        assert w.state()["dirs"] == 2 == kernel_watches()  # ws, pkg
        (root / "data" / "run3").mkdir()  # not watched: no event at all
        (root / "data" / "run1" / "m.py").write_text("X = 1\n")
        (root / "pkg" / "out" / "x" / "m.py").write_text("X = 1\n")
        (root / "logs").mkdir()  # made in a watched directory, but left out: no refresh
        (root / "pkg" / "out2").mkdir()  # not left out: reported and watched
        assert wait_for(lambda: "pkg/out2" in seen)
        assert "logs" not in seen and w.state()["dirs"] == 3 == kernel_watches()
        (root / ".gitignore").write_text("logs/\n")  # data/ is indexed from now on
        assert wait_for(lambda: EVERYTHING in seen)
        assert wait_for(lambda: w.state()["dirs"] == 8 == kernel_watches())  # + data, run1, run1/a, run2, run3
        (root / "data" / "run2" / "late.py").write_text("X = 1\n")
        assert wait_for(lambda: "data/run2/late.py" in seen)
        assert not any(r.startswith(("logs", "pkg/out/")) for r in seen)
        (root / ".gitignore").write_text("data/\nlogs/\n")  # left out again: its watches are given back
        assert wait_for(lambda: w.state()["dirs"] == 3 == kernel_watches())
    finally:
        w.stop()
    assert kernel_watches() == 0


def test_a_gitignore_counts_only_where_something_is_indexed(tmp_path: Path) -> None:
    """A `.gitignore` written where files are indexed is a look at the whole tree; one inside a skipped
    or ignored directory (`npm install` writes them by the hundred in node_modules, and watchdog,
    which watches everything, sees them) is nothing."""
    root = tmp_path / "ws"
    for d in ("pkg", "node_modules/left-pad", "data/run1", ".cache"):
        (root / d).mkdir(parents=True)
    (root / ".gitignore").write_text("data/\n")
    w = TreeWatcher(root, py_only, lambda rels: [], ignore=[root / ".cache"])
    real = os.path.realpath(root)
    for rel in ("node_modules/left-pad/.gitignore", "data/run1/.gitignore", ".cache/.gitignore", "pkg/notes.txt"):
        w.offer(os.path.join(real, rel), False)
    assert w._batch == set()
    w.offer(os.path.join(real, "pkg", ".gitignore"), False)
    assert w._batch == {EVERYTHING}
    w._batch.clear()
    w.offer(os.path.join(real, ".gitignore"), False)
    assert w._batch == {EVERYTHING}


@pytest.mark.skipif(not _use_inotify(), reason="inotify (Linux) only")
def test_directories_the_users_exclude_globs_leave_out_are_not_watched(tmp_path: Path) -> None:
    """`--exclude` names folders discovery never lists (a dataset, generated code): the daemon's and the
    MCP bridge's watcher sets no watch there and starts no refresh for what is made there, as for a
    `.gitignore`; a glob that only names files leaves their directories watched."""
    from ctx_lsp.index.discovery import FileFilter
    from ctx_lsp.index.workspace import WorkspaceIndex

    root = tmp_path / "ws"
    for d in ("pkg/gen/v1", "pkg/core", "datasets/a/b", "notes"):
        (root / d).mkdir(parents=True)
    idx = WorkspaceIndex(root, cache_dir=tmp_path / "cache",
                         flt=FileFilter(exclude=("datasets/", "pkg/gen/**", "notes/*.py")))
    assert not idx.accepts_dir("datasets") and not idx.accepts_dir("datasets/a/b")
    assert not idx.accepts_dir("pkg/gen") and not idx.accepts_dir("pkg/gen/v1")
    assert idx.accepts_dir("pkg") and idx.accepts_dir("pkg/core") and idx.accepts_dir("notes")
    assert not idx.accepts_dir("pkg/__pycache__")
    seen: list[str] = []
    w = TreeWatcher(root, idx.accepts, lambda rels: seen.extend(rels) or [], quiet_ms=100,
                    accepts_dir=idx.accepts_dir)
    w.start()
    try:
        assert wait_for(lambda: w.state()["watching"])
        assert w.state()["dirs"] == 4 == kernel_watches()  # ws, pkg, pkg/core, notes
        (root / "datasets" / "c").mkdir()  # made in an unwatched directory: no event at all
        (root / "pkg" / "gen" / "v2").mkdir()  # made where nothing is watched either
        (root / "datasets2").mkdir()  # a sibling the glob does not name: watched and reported
        (root / "notes" / "n.py").write_text("X = 1\n")  # an excluded file: no refresh
        (root / "pkg" / "core" / "m.py").write_text("X = 1\n")
        assert wait_for(lambda: "pkg/core/m.py" in seen and "datasets2" in seen)
        assert not any(r.startswith(("datasets/", "pkg/gen", "notes/")) for r in seen), seen
        assert w.state()["dirs"] == 5 == kernel_watches()
    finally:
        w.stop()
    assert kernel_watches() == 0


def _git(cwd: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_git_dir_is_found_above_the_root_and_through_a_worktree_file(tmp_path: Path) -> None:
    from ctx_lsp.index.git_activity import git_dir

    repo = tmp_path / "repo"
    (repo / "src" / "pkg").mkdir(parents=True)
    _git(repo, "init", "-q")
    assert git_dir(repo / "src" / "pkg") == (repo / ".git").resolve()  # a workspace inside a repository
    (repo / "a.py").write_text("A = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-q", "-m", "one")
    _git(repo, "worktree", "add", "-q", str(tmp_path / "linked"))  # its `.git` is a file pointing back
    assert git_dir(tmp_path / "linked") == (repo / ".git" / "worktrees" / "linked").resolve()
    (tmp_path / "plain").mkdir()
    assert git_dir(tmp_path / "plain") is None


@pytest.mark.skipif(not _use_inotify(), reason="inotify (Linux) only")
def test_a_settled_batch_waits_while_git_writes_the_tree(tmp_path: Path) -> None:
    """A checkout whose writes pause (a large tree, a smudge filter, a slow disk) is refreshed once git
    releases its index lock, not half-written; a lock left behind by a git that died holds a batch
    only `git_wait_ms`."""
    root = tmp_path / "ws"
    root.mkdir()
    _git(root, "init", "-q")
    lock = root / ".git" / "index.lock"
    lock.write_text("")
    batches: list[list[str]] = []
    w = TreeWatcher(root, py_only, lambda rels: batches.append(rels) or [], quiet_ms=100, git_wait_ms=60_000)
    w.start()
    try:
        assert wait_for(lambda: w.state()["watching"])
        (root / "a.py").write_text("A = 1\n")
        assert wait_for(lambda: w.state()["git_busy"])
        (root / "b.py").write_text("B = 1\n")  # git goes on writing
        time.sleep(0.6)  # well past the quiet window and the batch limit's share of it
        assert batches == [] and w.state()["git_busy"]
        lock.unlink()  # git is done
        assert wait_for(lambda: batches == [["a.py", "b.py"]])  # one refresh for the whole checkout
        assert not w.state()["git_busy"]
    finally:
        w.stop()
    slow = TreeWatcher(root, py_only, lambda rels: batches.append(rels) or [], quiet_ms=100, git_wait_ms=2000)
    lock.write_text("")
    slow.start()
    try:
        assert wait_for(lambda: slow.state()["watching"])
        t = time.monotonic()
        (root / "c.py").write_text("C = 1\n")
        assert wait_for(lambda: ["c.py"] in batches)
        assert time.monotonic() - t >= 2.0  # held, then handed over although the lock stayed
        # a lock as old as that was left behind (git refuses to run until it is removed): no hold at all
        os.utime(lock, (time.time() - 3600, time.time() - 3600))
        t = time.monotonic()
        (root / "d.py").write_text("D = 1\n")
        assert wait_for(lambda: ["d.py"] in batches)
        assert time.monotonic() - t < 1.5 and not slow.state()["git_busy"]  # not held for 2 s
    finally:
        slow.stop()


@pytest.mark.skipif(not _use_inotify(), reason="inotify (Linux) only")
def test_a_stream_of_writes_is_cut_into_batches_except_while_git_replays_commits(tmp_path: Path) -> None:
    """A long stream of writes is refreshed every `max_batch_ms` while it lasts; during a rebase (git's
    `rebase-merge` folder exists) each replayed commit rewrites the tree, so the batch goes out once
    the writes pause."""
    root = tmp_path / "ws"
    root.mkdir()
    _git(root, "init", "-q")

    def stream(w: TreeWatcher, batches: list[list[str]], tag: str) -> None:
        w.start()
        try:
            assert wait_for(lambda: w.state()["watching"])
            for i in range(16):  # 1.2 s of writes, 75 ms apart: never quiet for 400 ms
                (root / f"{tag}{i}.py").write_text(f"X = {i}\n")
                time.sleep(0.075)
            # distinct paths: one write's events (create, modify, close) can straddle two batches
            assert wait_for(lambda: len({r for b in batches for r in b}) == 16)
        finally:
            w.stop()

    plain: list[list[str]] = []
    stream(TreeWatcher(root, py_only, lambda rels: plain.append(rels) or [], quiet_ms=400, max_batch_ms=300),
           plain, "a")
    assert len(plain) >= 3, plain  # cut while the writes went on
    (root / ".git" / "rebase-merge").mkdir()
    rebase: list[list[str]] = []
    stream(TreeWatcher(root, py_only, lambda rels: rebase.append(rels) or [], quiet_ms=400, max_batch_ms=300),
           rebase, "b")
    assert len(rebase) == 1, rebase  # one batch, once the replay stopped writing
