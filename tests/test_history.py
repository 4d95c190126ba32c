"""History in the graph: TOUCHED edges from git blame and the bounded change history.

A fixture repository is built with fixed authors and dates; the expected edges are worked out by
hand from the commits below (see the line table in `test_touched_edges_exact`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ctx_lsp.engine import Engine
from ctx_lsp.index.workspace import WorkspaceIndex
from ctx_lsp.sources.history import attach_history
from ctx_lsp.sources.line_map import map_ranges

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")

V1 = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
V2 = V1.replace("    return a - b\n", "    return a + (-b)\n")
CLASS = ("\n\nclass Calculator:\n    def total(self, xs):\n        out = 0\n        for x in xs:\n"
         "            out = add(out, x)\n        return out\n")
V3 = V2 + CLASS
V4 = V3.replace("        for x in xs:\n            out = add(out, x)\n",
                "        for item in xs:\n            out = add(out, item)\n")
V5 = V4.replace("    return a + b\n", "    return float(a) + b\n").replace("out = 0\n", "out = 0.0\n")
V6 = V5.replace("    return a + (-b)\n", "    return a - b\n")

COMMITS = [  # (author, email, date, subject, calc.py content)
    ("Alice", "alice@example.com", "2021-01-01T10:00:00+00:00", "Add calculator", V1),
    ("Bob", "bob@example.com", "2021-02-01T12:00:00+01:00", "Fix sub sign handling", V2),
    ("Alice", "alice@example.com", "2021-03-01T09:00:00+00:00", "Add Calculator class", V3),
    ("Carol", "carol@example.com", "2021-04-01T09:00:00+00:00", "Rename loop variable in total", V4),
    ("Bob", "bob@example.com", "2021-05-01T09:00:00+00:00", "Make add and total accept floats", V5),
    ("Carol", "carol@example.com", "2021-06-01T09:00:00+00:00", "Simplify sub", V6),
]


def git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}).stdout


def commit(root: Path, author: str, email: str, date: str, subject: str) -> str:
    env = {"GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
           "GIT_COMMITTER_NAME": author, "GIT_COMMITTER_EMAIL": email, "GIT_COMMITTER_DATE": date}
    git(root, "add", "-A")
    git(root, "-c", "commit.gpgsign=false", "commit", "-q", "-m", subject, env=env)
    return git(root, "rev-parse", "HEAD").strip()


def make_repo(root: Path) -> list[str]:
    (root / "pkg").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    shas = []
    for i, (author, email, date, subject, text) in enumerate(COMMITS):
        if i == 0:
            (root / "pkg/__init__.py").write_text("")
        (root / "pkg/calc.py").write_text(text)
        shas.append(commit(root, author, email, date, subject))
    return shas


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # never find an enclosing repository
    root = tmp_path / "repo"
    root.mkdir()
    return root, make_repo(root)


def touched(index: WorkspaceIndex) -> set[tuple[str, str, int, tuple[str, ...]]]:
    return {(e.src.removeprefix("commit:"), e.dst, e.line, e.extra) for e in index.graph.edges()
            if e.kind == "TOUCHED"}


def test_touched_edges_exact(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, (c1, c2, c3, c4, c5, c6) = repo
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache")
    index.load_or_build()
    h = attach_history(index)
    assert h.available and h.reason == ""
    # Today's pkg/calc.py and the commit blame credits each line to:
    #  1 def add(a, b):              c1     add [1-2]
    #  2     return float(a) + b      c5
    #  3-4 (blank)                    c1     file
    #  5 def sub(a, b):              c1     sub [5-6]
    #  6     return a - b             c6     (c2 rewrote it before: a "diff" edge)
    #  7-8 (blank)                    c3     file
    #  9 class Calculator:           c3     Calculator [9-14]
    # 10     def total(self, xs):     c3     Calculator.total [10-14]
    # 11         out = 0.0            c5
    # 12-13      for item ... add()   c4
    # 14         return out           c3
    f, add, sub, cls, total = ("pkg/calc.py", "pkg/calc.py::add", "pkg/calc.py::sub",
                               "pkg/calc.py::Calculator", "pkg/calc.py::Calculator.total")
    assert touched(index) == {
        (c1, add, 1, ("blame=1",)), (c1, sub, 5, ("blame=1",)), (c1, f, 1, ("blame=4",)),
        (c2, sub, 6, ("diff",)), (c2, f, 6, ("diff",)),
        (c3, cls, 9, ("blame=1", "newest")), (c3, total, 10, ("blame=2",)), (c3, f, 7, ("blame=5",)),
        (c4, total, 12, ("blame=2",)), (c4, f, 12, ("blame=2",)),
        (c5, add, 2, ("blame=1", "newest")), (c5, total, 11, ("blame=1", "newest")), (c5, f, 2, ("blame=2",)),
        (c6, sub, 6, ("blame=1", "newest")), (c6, f, 6, ("blame=1", "newest")),
    }
    assert all(e.resolver == "git-blame" and e.path == f and e.col == 0
               for e in index.graph.edges() if e.kind == "TOUCHED")
    node = index.graph.node(f"commit:{c2}")
    assert node is not None and node.kind == "commit" and node.qualname == c2[:12]
    assert node.signature == "Fix sub sign handling"
    assert node.doc == "2021-02-01T12:00:00+01:00 Bob <bob@example.com>"

    # queries
    assert [ch.commit.sha for ch in h.recent_changes(sub, 5)] == [c6, c2, c1]
    changes = h.recent_changes(sub, 5)
    assert [ch.source for ch in changes] == ["blame+diff", "diff", "blame+diff"]
    assert [ch.superseded for ch in changes] == [False, True, True]
    assert h.newest_commit(total).sha == c5  # type: ignore[union-attr]
    assert h.introduced_by(total).sha == c3  # type: ignore[union-attr]
    assert h.introduced_by(add).sha == c1  # type: ignore[union-attr]
    assert [ch.commit.sha for ch in h.recent_changes(cls, 10)] == [c5, c4, c3]  # members count
    co = {nid: n for nid, n, _ in h.co_changed(add)}
    assert co == {sub: 1, total: 1}  # c1 (with sub) and c5 (with total)
    assert h.search_commits("sign handling")[0][0].sha == c2
    assert [nid for nid, _s, sha in h.search("loop variable") if sha == c4] == [total]


def test_neighbors_json_shows_commits(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, shas = repo
    out = subprocess.run([sys.executable, "-m", "ctx_lsp", "neighbors", "--json", "--root", str(root),
                          "--cache-dir", str(tmp_path / "cache"), "pkg/calc.py::sub"],
                         capture_output=True, text=True, check=True)
    items = [i for i in json.loads(out.stdout)["neighbors"] if i["edge"] == "TOUCHED"]
    commits = {i["commit"]["hash"]: i["commit"] for i in items}
    assert set(commits) == {shas[0], shas[1], shas[5]}
    assert commits[shas[5]] == {"hash": shas[5], "date": "2021-06-01T09:00:00+00:00", "author": "Carol",
                                "email": "carol@example.com", "subject": "Simplify sub"}
    assert all(i["kind"] == "commit" and i["direction"] == "in" and i["resolver"] == "git-blame" for i in items)
    # a commit is a target by the 7-digit hash `git log --oneline` prints, as by its full one
    by_hash = {}
    for name in (shas[5][:7], shas[5], f"commit:{shas[5]}"):
        got = subprocess.run([sys.executable, "-m", "ctx_lsp", "neighbors", "--json", "--root", str(root),
                              "--cache-dir", str(tmp_path / "cache"), name], capture_output=True, text=True)
        assert got.returncode == 0, got.stderr
        by_hash[name] = json.loads(got.stdout)
    assert {d["target"] for d in by_hash.values()} == {f"commit:{shas[5]}"}
    assert ("TOUCHED", "pkg/calc.py", "sub") in {(i["edge"], i["path"], i["symbol"]) for i in by_hash[shas[5]]["neighbors"]}
    text = subprocess.run([sys.executable, "-m", "ctx_lsp", "neighbors", "--root", str(root),
                           "--cache-dir", str(tmp_path / "cache"), shas[5][:7]], capture_output=True, text=True)
    assert "[" not in text.stdout  # a commit's edges are its own: no symbol of a file in brackets


def test_incremental_save_and_head_move(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, shas = repo
    (root / "pkg/other.py").write_text("def other():\n    return 1\n")
    commit(root, "Dan", "dan@example.com", "2021-07-01T09:00:00+00:00", "Add other")
    engine = Engine(root, cache_dir=tmp_path / "cache")
    engine.open()
    from ctx_lsp.sources.history import history_for

    h = history_for(engine.index)
    assert h is not None
    calc = root / "pkg/calc.py"
    # an uncommitted line at the top: the file is re-blamed on save, the new line has no commit and
    # every older line keeps its commit under today's numbering
    calc.write_text("import math\n" + calc.read_text())
    engine.index.update_file("pkg/calc.py", calc.read_text())
    assert (shas[0], "pkg/calc.py::add", 2, ("blame=1",)) in touched(engine.index)
    assert (shas[5], "pkg/calc.py::sub", 7, ("blame=1", "newest")) in touched(engine.index)
    assert h.state["files"]["pkg/other.py"]["key"].count(":") == 0  # untouched file: HEAD blob key
    assert ":" in h.state["files"]["pkg/calc.py"]["key"]  # dirty file: HEAD blob + working blob
    # a re-sync with nothing changed blames nothing
    assert h.sync().blamed == 0
    # HEAD moves: queries notice (HEAD is checked at most once a second; max_age=0 forces it)
    c7 = commit(root, "Eve", "eve@example.com", "2021-08-01T09:00:00+00:00", "Import math in calc")
    h.ensure_current(max_age=0)
    assert h.recent_changes("pkg/calc.py", 1)[0].commit.sha == c7
    assert h.state["files"]["pkg/calc.py"]["key"].count(":") == 0
    # a warm start reuses the persisted state (keyed by blob) and blames nothing
    engine2 = Engine(root, cache_dir=tmp_path / "cache")
    engine2.open()
    h2 = history_for(engine2.index)
    assert h2 is not None and h2.sync().blamed == 0
    assert touched(engine2.index) == touched(engine.index)


def test_without_git_history_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    root = tmp_path / "plain"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/calc.py").write_text(V6)
    engine = Engine(root, cache_dir=tmp_path / "cache")
    engine.open()
    from ctx_lsp.sources.history import history_for

    h = history_for(engine.index)
    assert h is not None and not h.available and h.reason == "not a git repository"
    assert h.recent_changes("pkg/calc.py::add") == [] and h.introduced_by("pkg/calc.py::add") is None
    assert engine.graph.edge_counts()["TOUCHED"] == 0
    assert engine.related("pkg/calc.py::add", "history") == []
    assert [i["symbol"] for i in engine.neighbors("pkg/calc.py") if i["edge"] == "CALLS"] == []  # still works
    # no git binary at all
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    idx = WorkspaceIndex(root, cache_dir=tmp_path / "cache2")
    idx.load_or_build()
    assert attach_history(idx).reason == "git binary not found"


def test_shallow_clone_is_unavailable(repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    root, _ = repo
    clone = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{root}", str(clone))
    idx = WorkspaceIndex(clone, cache_dir=tmp_path / "cache")
    idx.load_or_build()
    h = attach_history(idx)
    assert not h.available and "shallow" in h.reason
    assert idx.graph.edge_counts()["TOUCHED"] == 0


def test_map_ranges() -> None:
    # insert 2 lines after line 3; replace line 10 by 3 lines; delete lines 20-21
    hunks = [(3, 0, 4, 2), (10, 1, 12, 3), (20, 2, 23, 0)]
    assert map_ranges([(1, 3)], hunks) == [(1, 3)]
    assert map_ranges([(4, 9)], hunks) == [(6, 11)]
    assert map_ranges([(9, 11)], hunks) == [(11, 11), (15, 15)]
    assert map_ranges([(9, 11)], hunks, keep_replaced=True) == [(11, 12), (15, 15)]
    assert map_ranges([(19, 22)], hunks) == [(23, 23), (24, 24)]  # +2 +2 shift, then -2
    assert map_ranges([(20, 21)], hunks, keep_replaced=True) == []


def test_git_never_reads_the_stdin_it_would_inherit(tmp_path: Path) -> None:
    """In the language server fd 0 is the LSP wire: a git child run without input gets /dev/null, so it
    cannot take bytes of the client's next message. Here the caller's stdin holds bytes; `git
    hash-object --stdin` run through `Git` must hash nothing, and the bytes must still be there."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    probe = ("import sys; from ctx_lsp.sources.git import Git; "
             f"print(Git({str(tmp_path)!r}).run('hash-object', '--stdin').decode().strip()); "
             "print(sys.stdin.read())")
    out = subprocess.run([sys.executable, "-c", probe], input=b"the client's next message", capture_output=True,
                         check=True).stdout.decode().splitlines()
    empty = subprocess.run(["git", "hash-object", "--stdin"], input=b"", capture_output=True, check=True,
                           cwd=tmp_path).stdout.decode().strip()
    assert out == [empty, "the client's next message"]


def test_a_checkout_read_file_by_file_gives_each_files_new_symbols_their_commits(
        repo: tuple[Path, list[str]], tmp_path: Path) -> None:
    """An editor's watcher reports a checkout's files one event each: the first re-read finds HEAD moved
    and blames every file, some before their new facts are in. Each later re-read must still link
    its file's new symbols to the commits that made them."""
    root, _ = repo
    (root / "pkg/other.py").write_text("def other():\n    return 1\n")
    commit(root, "Dan", "dan@example.com", "2021-07-01T09:00:00+00:00", "Add other")
    git(root, "checkout", "-q", "-b", "feature")
    (root / "pkg/other.py").write_text("def other():\n    return 2\n")
    (root / "pkg/calc.py").write_text((root / "pkg/calc.py").read_text() + "\n\ndef mul(a, b):\n    return a * b\n")
    feature = commit(root, "Eve", "eve@example.com", "2021-08-01T09:00:00+00:00", "Add mul")
    git(root, "checkout", "-q", "main")
    engine = Engine(root, cache_dir=tmp_path / "cache")
    engine.open()
    git(root, "checkout", "-q", "feature")
    for rel in ("pkg/other.py", "pkg/calc.py"):  # other.py's re-read blames calc.py with its old facts
        engine.index.reload_file(rel)
    assert (feature, "pkg/calc.py::mul") in {t[:2] for t in touched(engine.index)}
    fresh = Engine(root, cache_dir=tmp_path / "fresh")
    fresh.open()
    assert touched(engine.index) == touched(fresh.index)
