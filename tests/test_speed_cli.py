"""`python -m benchmark_gen speed`: runs end to end on a tiny workspace and reports every key (never timing sizes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark_gen.speed import KEYS, markdown, percentile

MODULE = '''\
"""Tiny module for the speed benchmark."""


class Store:
    """Keeps values by key."""

    def put(self, key, value):
        self.data = {key: value}
        return self.check(key)

    def check(self, key):
        return key in self.data


def build():
    """Create a store and fill it."""
    store = Store()
    store.put("a", 1)
    return store
'''


def test_speed_json_on_a_tiny_workspace(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "store.py").write_text(MODULE)
    (root / "pkg" / "use.py").write_text("from pkg.store import build\n\n\ndef main():\n    return build()\n")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}

    proc = subprocess.run(
        [sys.executable, "-m", "benchmark_gen", "speed", str(root), "--json", "--no-refine", "--edits", "5",
         "--queries", "5", "--oneshot-runs", "3"],
        capture_output=True, text=True, timeout=240, cwd=Path(__file__).resolve().parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert isinstance(rows, list) and len(rows) == 1
    row = rows[0]
    for key in KEYS:
        assert key in row, key
    assert row["root"] == str(root.resolve())
    assert row["files"] == 3
    assert row["lines"] == len(MODULE.splitlines()) + 5
    assert row["refined_s"] is None  # --no-refine
    for key in ("cold_queryable_s", "warm_start_s", "update_p50_ms", "update_p95_ms", "peak_rss_mb"):
        assert isinstance(row[key], (int, float)) and row[key] > 0, key
    assert row["update_p95_ms"] >= row["update_p50_ms"]
    assert row["update_inconsistent"] == 0  # every edit showed up in the graph and every revert removed it
    try:
        import ctx_lsp.retrieval  # noqa: F401
    except ImportError:
        assert row["query_p50_ms"] is None and row["query_p95_ms"] is None
    else:
        assert row["query_p50_ms"] > 0 and row["query_p95_ms"] >= row["query_p50_ms"]
    for key in ("oneshot_p50_s", "oneshot_rss_mb", "oneshot_daemon_p50_s", "oneshot_daemon_rss_mb", "daemon_rss_mb"):
        assert isinstance(row[key], (int, float)) and row[key] > 0, key
    # a caller served by the daemon never loads the index itself
    assert row["oneshot_daemon_rss_mb"] < row["oneshot_rss_mb"]
    # the workspace itself is untouched (edits are editor buffers, the cache is a temporary directory)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert "speed:" in proc.stderr  # progress goes to stderr


def test_percentile_and_markdown() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 95) == 95.0
    assert percentile([5.0], 95) == 5.0
    row = dict.fromkeys(KEYS, 1.5)
    row.update(root="/x/flask", files=3, refined_s=None)
    table = markdown([row]).splitlines()
    assert table[0].startswith("| root | files | lines |")
    assert table[2].startswith("| flask | 3 |") and "| null |" in table[2]


def test_switch_lays_out_the_other_version_and_times_the_update(tmp_path: Path) -> None:
    from benchmark_gen.speed import _sync_tree, measure_switch

    a, b = tmp_path / "a", tmp_path / "b"
    kept = "\n\ndef keep():\n    return 0\n"
    for root, body in ((a, "def build():\n    return 1\n" + kept), (b, "def build():\n    return 2\n" + kept)):
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "__init__.py").write_text("")
        (root / "pkg" / "store.py").write_text(body)
        (root / "README").write_text("same\n")
    (a / "pkg" / "old.py").write_text("X = 1\n")
    (b / "pkg" / "new.py").write_text("from pkg.store import build\n\n\ndef main():\n    return build()\n")
    tree = tmp_path / "tree"
    import shutil

    shutil.copytree(a, tree)
    unchanged = (tree / "pkg" / "__init__.py").stat().st_mtime_ns
    assert _sync_tree(tree, b) == 3  # store.py changed, new.py added, old.py removed
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()) == \
        sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    assert (tree / "pkg" / "store.py").read_text() == (b / "pkg" / "store.py").read_text()
    assert (tree / "pkg" / "__init__.py").stat().st_mtime_ns == unchanged  # a checkout leaves it alone

    row = measure_switch(a, b)
    assert row["switch_files"] == 3
    for key in ("switch_cold_s", "switch_update_s", "switch_daemon_s", "switch_ratio", "switch_daemon_ratio",
                "switch_daemon_back_s", "switch_daemon_back_ratio",
                "switch_watch_call_s", "switch_watch_call_ratio"):
        assert isinstance(row[key], float) and row[key] > 0, key
    # the watching daemon refreshed in the background once the layout settled (it has to see the changes)
    assert isinstance(row["switch_watch_settle_s"], float) and 0 <= row["switch_watch_settle_s"] < 60
    # the language server watching the folder itself took the checkout in without a request (it checks
    # that it then holds the second version's files)
    assert isinstance(row["switch_server_settle_s"], float) and 0 < row["switch_server_settle_s"] < 60
    assert row["switch_server_settle_ratio"] > 0
    assert isinstance(row["switch_server_cold_s"], float) and 0 < row["switch_server_cold_s"] < 60
    # where the update went: the two changed or added files were extracted and bound again
    phases = row["switch_update_phases_s"]
    assert phases["extract"] > 0 and "bind" in phases
    assert 0 <= row["switch_floor_ratio"] < row["switch_ratio"]
    # CPU seconds beside the wall times (on a tree this small both processes are mostly interpreter start)
    assert row["switch_update_cpu_s"] > 0 and row["switch_cold_cpu_s"] > 0
    assert row["switch_cpu_ratio"] == pytest.approx(row["switch_update_cpu_s"] / row["switch_cold_cpu_s"], abs=0.02)
    if sys.platform.startswith("linux"):  # the daemon's CPU, read from /proc in clock ticks: its refresh alone
        assert 0 <= row["switch_daemon_cpu_s"] < row["switch_cold_cpu_s"] and row["switch_daemon_cpu_ratio"] >= 0
    # store.py and new.py extracted, store.py from its kept statement (`keep`), both re-bound
    counts = row["switch_update_counts"]
    assert counts["extracted"] == 2 and counts["partial"] == 1 and counts["rebound"] >= 2
    assert (a / "pkg" / "old.py").exists() and not (a / "pkg" / "new.py").exists()  # ROOT itself untouched

def test_speed_peer_scip_python_on_the_same_tree(tmp_path: Path) -> None:
    """`--peer scip-python` indexes the same tree in the same run, beside our cold build, and leaves it untouched."""
    from benchmark_gen.peer_scip import KEYS as PEER_KEYS
    from benchmark_gen.peer_scip import SCIP_ENTRY

    if not SCIP_ENTRY.exists():
        pytest.skip(f"scip-python is not installed ({SCIP_ENTRY} missing): run `npm ci --prefix benchmark_gen/scip`")
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "store.py").write_text(MODULE)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}

    proc = subprocess.run(
        [sys.executable, "-m", "benchmark_gen", "speed", str(root), "--json", "--no-refine", "--edits", "2",
         "--queries", "2", "--oneshot-runs", "0", "--peer", "scip-python"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)[0]
    for key in ("cold_queryable_s", "peak_rss_mb", "warm_start_s", *PEER_KEYS):
        assert key in row, key
    assert row["peer_scip_python_status"] == 0, row.get("peer_scip_python_note")
    assert "peer_scip_python_note" not in row  # no failure, no change to the tree
    assert row["peer_scip_python_cold_s"] > 0 and row["peer_scip_python_rss_mb"] > 0
    assert row["peer_scip_python_index_mb"] > 0  # it really wrote an index, into its temporary directory
    assert row["peer_scip_python_index_written"] is True
    assert row["peer_scip_python_time_ratio"] == round(row["peer_scip_python_cold_s"] / row["cold_queryable_s"], 2)
    assert row["peer_scip_python_rss_ratio"] > 0
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    assert not any(tmp_path.glob("*.scip"))  # nor in the caller's cwd


def test_a_peer_that_cannot_run_keeps_the_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmark_gen.peer_scip as peer

    monkeypatch.setattr(peer, "SCIP_ENTRY", tmp_path / "absent" / "index.js")
    row = {"cold_queryable_s": 1.0, "peak_rss_mb": 50.0}
    out = peer.measure_peers(tmp_path, row, ["scip-python"], 10.0)
    assert out["peer_scip_python_status"] == "not installed"
    assert "npm ci --prefix benchmark_gen/scip" in out["peer_scip_python_note"]
    assert out["peer_scip_python_time_ratio"] is None and out["peer_scip_python_rss_ratio"] is None
    table = markdown([{**dict.fromkeys(KEYS, 1.0), "root": "/x/ws", **out}])
    assert "| peer_scip_python_cold_s |" in table.splitlines()[0] and "not installed" in table.splitlines()[2]
    assert "peer_scip_python_note: scip-python not run" in table
    assert "| false |" in markdown([{**dict.fromkeys(KEYS, 1.0), "root": "/x/ws", "peer_scip_python_index_written": False}])


def test_a_peer_past_its_timeout_is_killed_and_reported(tmp_path: Path) -> None:
    import benchmark_gen.peer_scip as peer

    if not peer.SCIP_ENTRY.exists():
        pytest.skip(f"scip-python is not installed ({peer.SCIP_ENTRY} missing): run `npm ci --prefix benchmark_gen/scip`")
    (tmp_path / "a.py").write_text("x = 1\n")
    out = peer.measure_peers(tmp_path, {"cold_queryable_s": 1.0, "peak_rss_mb": 50.0}, ["scip-python"], 0.2)
    assert out["peer_scip_python_status"] == "timeout"
    assert "--peer-timeout" in out["peer_scip_python_note"]
    assert out["peer_scip_python_time_ratio"] is None
    assert out["peer_scip_python_cold_s"] < 30  # killed, not waited for


def test_a_peer_that_exits_non_zero_is_reported_with_its_status(tmp_path: Path) -> None:
    import benchmark_gen.peer_scip as peer

    if not peer.SCIP_ENTRY.exists():
        pytest.skip(f"scip-python is not installed ({peer.SCIP_ENTRY} missing): run `npm ci --prefix benchmark_gen/scip`")
    # a root that does not exist: scip-python cannot chdir into it and exits with an error
    out = peer.measure_peers(tmp_path / "gone", {"cold_queryable_s": 1.0, "peak_rss_mb": 50.0}, ["scip-python"], 120.0)
    status = out["peer_scip_python_status"]
    assert isinstance(status, int) and status != 0, out
    assert out["peer_scip_python_note"].startswith(f"scip-python exited with status {status}: ")
    assert out["peer_scip_python_index_written"] is False  # it stopped before writing: no ratio
    assert out["peer_scip_python_cold_s"] > 0
    assert out["peer_scip_python_time_ratio"] is None and out["peer_scip_python_rss_ratio"] is None


def test_the_tree_check_sees_added_changed_and_removed_files(tmp_path: Path) -> None:
    from benchmark_gen.peer_scip import _changes, _tree_state

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("a = 1\n")
    (tmp_path / "b.py").write_text("b = 1\n")
    before = _tree_state(tmp_path)
    assert _changes(before, _tree_state(tmp_path)) == []
    (tmp_path / "index.scip").write_bytes(b"x")
    (tmp_path / "pkg" / "a.py").write_text("a = 22\n")
    (tmp_path / "b.py").unlink()
    assert _changes(before, _tree_state(tmp_path)) == ["+index.scip", "-b.py", "~pkg/a.py"]


def test_the_failure_summary_names_the_fatal_error_first() -> None:
    from benchmark_gen.peer_scip import _failure_summary

    log = (b"(1) An internal error occurred while type checking file x.py: Error: Debug Failure.\n"
           b"Experienced Fatal Error While Indexing:\nPlease create an issue at github.com/sourcegraph/scip-python:\n"
           b"RangeError: Invalid string length\n    at f (a.js:1)\n    at g (a.js:2)\n")
    assert _failure_summary(log) == ("Experienced Fatal Error While Indexing: / RangeError: Invalid string length"
                                     " / at f (a.js:1)")
    assert _failure_summary(b"ok\nError: boom\nbye\n") == "Error: boom"
    assert _failure_summary(b"a\nb\nc\nd\n") == "b / c / d"
    assert _failure_summary(b"") == "no output"


def test_repeated_switch_measures_report_medians() -> None:
    from benchmark_gen.speed import median_switch

    rows = [{"switch_files": 3, "switch_cold_s": c, "switch_ratio": r, "switch_update_phases_s": {"extract": e},
             "switch_update_counts": {"extracted": 2}} for c, r, e in ((9.0, 0.5, 1.0), (8.0, 0.7, 3.0), (10.0, 0.6, 2.0))]
    got = median_switch(rows)
    assert got["switch_runs"] == 3 and got["switch_files"] == 3
    assert got["switch_cold_s"] == 9.0 and got["switch_ratio"] == 0.6
    assert got["switch_update_phases_s"] == {"extract": 2.0} and got["switch_update_counts"] == {"extracted": 2}


def test_a_request_the_server_never_answers_fails_the_run_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    """speed's language-server measures wait for each answer at most REQUEST_TIMEOUT_S: a lost answer
    (one run of the benchmark sat 26 minutes on one) fails the run with the request named."""
    import asyncio

    from benchmark_gen import lsp_latency

    monkeypatch.setattr(lsp_latency, "REQUEST_TIMEOUT_S", 0.2)

    async def never() -> None:
        await asyncio.Event().wait()

    with pytest.raises(TimeoutError, match="did not answer ctx.indexStatus within"):
        asyncio.run(lsp_latency._answer(never(), "ctx.indexStatus"))


def test_a_failed_server_run_stops_its_server_instead_of_waiting_for_it(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """pygls's `stop` waits for the server to exit, which it does only after `exit`: a run that failed
    before (here the checkout's layout raises) once waited for ever. The server is killed instead."""
    import threading

    from benchmark_gen import lsp_latency

    monkeypatch.setattr(lsp_latency, "EXIT_TIMEOUT_S", 0.5, raising=False)
    tree = tmp_path / "ws"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "m.py").write_text("def f():\n    return 1\n", encoding="utf-8")

    def layout() -> None:
        raise RuntimeError("the layout failed")

    outcome: list[BaseException | dict] = []

    def run() -> None:
        try:
            outcome.append(lsp_latency.checkout_settle(tree, tmp_path / "cache", layout, quiet_s=0.1))
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            outcome.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the benchmark still waits for the server it did not stop"
    assert isinstance(outcome[0], RuntimeError) and "the layout failed" in str(outcome[0])
