"""`ctx-lsp daemon`: a warm engine per workspace for one-shot callers, driven through real subprocesses.

Every test starts its own daemon on a copy of tests/fixtures/mcp_ws with its own cache directory and
stops it at the end (the daemon also exits on its own when idle).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctx_lsp.daemon.client import socket_path

sys.path.insert(0, str(Path(__file__).parent))
from test_mcp import FIXTURE, mcp_session, text  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="Unix sockets")


def run(*args: str, mode: str | None = None, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CTX_LSP_DAEMON"}
    if mode is not None:
        env["CTX_LSP_DAEMON"] = mode
    return subprocess.run([sys.executable, "-m", "ctx_lsp", *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd)


def pack_of(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stderr
    pack = json.loads(proc.stdout)
    pack.pop("timings_ms")  # the only field that may differ between two runs on the same files
    return pack


class Ws:
    def __init__(self, root: Path, cache: Path) -> None:
        self.root, self.cache = root, cache

    @property
    def common(self) -> tuple[str, ...]:
        return ("--root", str(self.root), "--cache-dir", str(self.cache))

    def status(self) -> tuple[int, dict]:
        p = run("daemon", "status", "--json", *self.common)
        return p.returncode, json.loads(p.stdout)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Ws]:
    import shutil

    root = tmp_path / "ws"
    shutil.copytree(FIXTURE, root)
    w = Ws(root, tmp_path / "cache")
    yield w
    run("daemon", "stop", *w.common, timeout=30)


def start(ws: Ws, *extra: str) -> dict:
    p = run("daemon", "start", *ws.common, "--idle-timeout", "120", *extra)
    assert p.returncode == 0, p.stderr
    code, info = ws.status()
    assert code == 0 and info["ready"], info
    filtered = any(a in ("--include", "--exclude") for a in extra)
    assert info["usable"] == (not filtered), info  # status is asked without the extra filter
    return info


def test_daemon_answers_one_shot_calls_like_the_in_process_engine(ws: Ws) -> None:
    info = start(ws)
    sock = socket_path(ws.cache.resolve())
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600  # only this user may connect
    for query in ("who calls apply_discount", "How is the order total computed with discounts?"):
        served = pack_of(run("context", "--json", *ws.common, query))
        alone = pack_of(run("context", "--json", *ws.common, query, mode="off"))
        assert served == alone
    # a place: with a question, and alone (the symbol at that line); its path is the caller's
    for extra in (("--at", "checkout.py:20", "how is the discount chosen"), ("--at", "checkout.py:20")):
        served = pack_of(run("context", "--json", *ws.common, *extra, cwd=ws.root / "shop"))
        alone = pack_of(run("context", "--json", *ws.common, *extra, cwd=ws.root / "shop", mode="off"))
        assert served == alone and served["items"]
    assert served["items"][0]["symbol"] == "price_order"
    _, after = ws.status()
    assert after["requests"] == info["requests"] + 4  # every served answer came from the daemon
    assert after["pid"] == info["pid"]


def test_daemon_sees_edits_made_on_disk_between_calls(ws: Ws) -> None:
    start(ws)
    q = "who calls compute_loyalty_points"
    before = pack_of(run("context", "--json", *ws.common, q))
    assert not any(i["symbol"] == "compute_loyalty_points" for i in before["items"])
    mod = next(ws.root.glob("shop/*.py"))
    mod.write_text(mod.read_text() + "\n\ndef compute_loyalty_points(total):\n    return int(total // 10)\n")
    after = pack_of(run("context", "--json", *ws.common, q))
    assert any(i["symbol"] == "compute_loyalty_points" for i in after["items"])
    assert after == pack_of(run("context", "--json", *ws.common, q, mode="off"))


def chain_modules(root: Path, n: int, name: str) -> None:
    """n modules in 7 packages, each function calling the next module's."""
    for i in range(n):
        (root / f"pkg{i % 7}").mkdir(parents=True, exist_ok=True)
        j = (i + 1) % n
        (root / f"pkg{i % 7}" / f"m{i}.py").write_text(
            f"from pkg{j % 7}.m{j} import {name}{j}\n\n\ndef {name}{i}(x):\n    return {name}{j}(x) + {i}\n")


def test_a_checkout_through_the_daemon_binds_in_worker_processes_and_answers_as_a_fresh_process(
        tmp_path: Path) -> None:
    """A branch switch changes every file under a running daemon: its refresh forks the same worker pools
    a fresh process would (it used to bind on one core, slower than a cold index), and answers the same."""
    from ctx_lsp.index.workspace import PARALLEL_THRESHOLD

    root = tmp_path / "big"
    chain_modules(root, PARALLEL_THRESHOLD, "f")
    w = Ws(root, tmp_path / "cache")
    try:
        start(w, "--no-watch")  # the call itself makes the update (a watcher would start it on its own)
        chain_modules(root, PARALLEL_THRESHOLD, "g")  # the checkout: every module's names change
        q = "who calls g7"
        served = pack_of(run("context", "--json", *w.common, q))
        _, info = w.status()
        n = min(2, os.cpu_count() or 1)
        assert info["last_update"]["workers"] == {"extract": n, "bind": n}, info["last_update"]
        assert any(i["symbol"] == "g6" for i in served["items"]), served["items"]
        assert served == pack_of(run("context", "--json", *w.common, q, mode="off"))
    finally:
        run("daemon", "stop", *w.common, timeout=30)


def settled(ws: Ws, refreshes: int, limit: float = 60.0) -> dict:
    """The daemon's state once its watcher made more than `refreshes` background refreshes, none pending."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        _, info = ws.status()
        watch = info["watch"]
        if watch["refreshes"] > refreshes and not watch["pending"]:
            return info
        time.sleep(0.1)
    raise AssertionError(f"no background refresh within {limit} s: {info}")


def test_a_watching_daemon_re_indexes_changed_files_in_the_background_before_the_next_call(ws: Ws) -> None:
    start(ws)
    deadline = time.monotonic() + 30
    while not (info := ws.status()[1])["watch"]["watching"] and time.monotonic() < deadline:
        time.sleep(0.1)  # the watches are set a moment after the daemon is ready
    assert info["watch"]["watching"] and info["watch"]["refreshes"] == 0, info["watch"]
    q = "who calls compute_loyalty_points"
    mod = next(ws.root.glob("shop/*.py"))
    mod.write_text(mod.read_text() + "\n\ndef compute_loyalty_points(total):\n    return int(total // 10)\n")
    info = settled(ws, 0)
    assert info["watch"]["last"]["changed"] == 1, info["watch"]
    phases = info["last_update"]["phases"]
    assert "bind" in phases and "decode" not in phases, phases  # a refresh (not the open) bound the file
    assert info["requests"] == 0 and info["idle_s"] > 0  # and it is not a request: the idle clock runs on
    served = pack_of(run("context", "--json", *ws.common, q))
    assert any(i["symbol"] == "compute_loyalty_points" for i in served["items"])
    _, after = ws.status()
    # the call's own refresh found nothing left to do: it discovered the tree and bound nothing
    assert "bind" not in after["last_update"]["phases"], after["last_update"]
    assert served == pack_of(run("context", "--json", *ws.common, q, mode="off"))

    # files the index does not read start no refresh; a new module in a new package does
    refreshes = after["watch"]["refreshes"]
    (ws.root / "NOTES.txt").write_text("notes\n")
    (ws.root / "shop" / "__pycache__").mkdir(exist_ok=True)
    (ws.root / "shop" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    time.sleep(1.5)
    _, quiet = ws.status()
    assert quiet["watch"]["refreshes"] == refreshes and quiet["watch"]["events"] == after["watch"]["events"]
    (ws.root / "loyalty").mkdir()
    (ws.root / "loyalty" / "tiers.py").write_text("from shop import *\n\n\ndef tier_of(points):\n    return points // 100\n")
    info = settled(ws, refreshes)
    assert info["watch"]["last"]["changed"] == 1 and info["files"] == quiet["files"] + 1, info


def test_a_daemon_started_with_no_watch_leaves_the_update_to_the_next_call(ws: Ws) -> None:
    info = start(ws, "--no-watch")
    assert info["watch"] is None
    assert "not watching the tree" in run("daemon", "status", *ws.common).stdout
    mod = next(ws.root.glob("shop/*.py"))
    mod.write_text(mod.read_text() + "\n\ndef compute_loyalty_points(total):\n    return int(total // 10)\n")
    time.sleep(1.0)
    _, idle = ws.status()
    assert idle["last_update"] == info["last_update"]  # nothing happened in the background: still the open's
    pack_of(run("context", "--json", *ws.common, "who calls compute_loyalty_points"))
    _, after = ws.status()
    phases = after["last_update"]["phases"]
    assert "bind" in phases and "decode" not in phases, phases  # the call's refresh bound the file


def test_neighbors_through_the_daemon_resolves_paths_from_the_callers_directory(ws: Ws) -> None:
    start(ws)
    mod = next(ws.root.glob("shop/*.py"))
    served = run("neighbors", "--json", "--cache-dir", str(ws.cache), "--root", str(ws.root), mod.name, cwd=mod.parent)
    alone = run("neighbors", "--json", "--cache-dir", str(ws.cache), "--root", str(ws.root), mod.name, cwd=mod.parent,
                mode="off")
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout) == json.loads(alone.stdout)
    assert json.loads(served.stdout)["target"] == f"shop/{mod.name}"
    bad = run("neighbors", *ws.common, "no_such_symbol_anywhere")
    assert bad.returncode == 2
    assert bad.stderr.strip() == "ctx-lsp: error: unknown symbol: no_such_symbol_anywhere"


def test_neighbors_through_the_daemon_notes_a_name_other_files_define_too(ws: Ws) -> None:
    (ws.root / "twin_a.py").write_text("def twin():\n    return 1\n")
    (ws.root / "twin_b.py").write_text("def twin():\n    return 2\n")
    start(ws)
    served = run("neighbors", *ws.common, "twin")
    alone = run("neighbors", *ws.common, "twin", mode="off")
    assert served.returncode == 0 and served.stdout == alone.stdout
    assert served.stderr == alone.stderr == "ctx-lsp: note: twin also names twin_b.py::twin; give PATH::NAME to choose\n"
    assert ws.status()[1]["requests"] == 1  # the first answer came from the daemon


def test_auto_mode_starts_a_daemon_and_a_dead_one_is_replaced(ws: Ws) -> None:
    code, _ = ws.status()
    assert code == 1  # none yet
    alone = pack_of(run("context", "--json", *ws.common, "who calls apply_discount", mode="off"))
    assert ws.status()[0] == 1  # off and in-process calls never start one
    first = pack_of(run("context", "--json", *ws.common, "who calls apply_discount", mode="auto"))
    assert first == alone
    code, info = ws.status()
    assert code == 0 and info["ready"]
    os.kill(info["pid"], signal.SIGKILL)  # leaves a stale socket behind
    time.sleep(0.2)
    assert socket_path(ws.cache.resolve()).exists()
    # a caller that only uses running daemons falls back to in-process work, silently
    fallback = run("context", "--json", *ws.common, "who calls apply_discount")
    assert pack_of(fallback) == alone and fallback.stderr == ""
    # auto mode starts a fresh daemon in place of the dead one
    assert pack_of(run("context", "--json", *ws.common, "who calls apply_discount", mode="auto")) == alone
    code, again = ws.status()
    assert code == 0 and again["pid"] != info["pid"]


def test_a_module_at_the_workspace_root_does_not_shadow_the_daemons_own_imports(ws: Ws) -> None:
    # the daemon runs in the workspace root: a project's own json.py must not replace the standard one
    (ws.root / "json.py").write_text("raise SystemExit('a project module named json')\n")
    start(ws)
    p = run("context", "--json", *ws.common, "who calls apply_discount")
    assert p.returncode == 0, p.stderr
    assert run("daemon", "status", "--json", *ws.common).returncode == 0
    assert json.loads(run("daemon", "status", "--json", *ws.common).stdout)["requests"] == 1


def test_a_daemon_that_dies_while_starting_is_reported_at_once_with_its_log(ws: Ws, tmp_path: Path) -> None:
    # a broken installation: the spawned interpreter fails before the daemon listens
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'ModuleNotFoundError: no ctx_lsp here' >&2\nexit 3\n")
    fake.chmod(0o755)
    code = ("import sys; from pathlib import Path; from ctx_lsp.daemon import client as c; "
            f"sys.executable = {str(fake)!r}; "
            f"ident = c.identity(Path({str(ws.root)!r}), Path({str(ws.cache)!r}), (), ()); "
            "c.ensure(ident, start=True, wait_s=30)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    # reported as soon as it exits, not as a daemon still loading when the wait runs out
    assert "DaemonRefused: it exited with status 3: ModuleNotFoundError: no ctx_lsp here" in p.stderr, p.stderr
    # a caller that starts daemons on demand (the agent hook) answers in process at once instead
    cli = ("import os, sys; from ctx_lsp.cli import main; "
           f"sys.executable = {str(fake)!r}; os.environ['CTX_LSP_DAEMON'] = 'auto'; "
           f"sys.exit(main(['context', '--json', '--root', {str(ws.root)!r}, '--cache-dir', {str(ws.cache)!r}, "
           "'who calls apply_discount']))")
    p = subprocess.run([sys.executable, "-c", cli], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert pack_of(p) == pack_of(run("context", "--json", *ws.common, "who calls apply_discount", mode="off"))


def test_a_daemon_with_another_file_filter_is_not_used(ws: Ws) -> None:
    start(ws, "--exclude", "shop/**")
    code, info = ws.status()
    assert code == 0 and not info["usable"]  # it indexes other files than this caller asks for
    p = run("context", "--json", *ws.common, "who calls apply_discount")
    assert pack_of(p) == pack_of(run("context", "--json", *ws.common, "who calls apply_discount", mode="off"))
    _, after = ws.status()
    assert after["requests"] == 0


def test_stop_and_idle_exit_remove_the_socket(ws: Ws) -> None:
    start(ws)
    sock = socket_path(ws.cache.resolve())
    assert run("daemon", "stop", *ws.common).stdout.strip() == "ctx-lsp daemon stopped"
    assert not sock.exists() and ws.status()[0] == 1
    assert run("daemon", "stop", *ws.common).stdout.strip() == "no ctx-lsp daemon was running"
    p = run("daemon", "start", *ws.common, "--idle-timeout", "1")
    assert p.returncode == 0, p.stderr
    deadline = time.monotonic() + 20
    while sock.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not sock.exists()
    assert run("daemon", "start", *ws.common, "--idle-timeout", "0").returncode == 2  # a clear argument error


def test_bad_requests_are_answered_and_the_daemon_keeps_serving(ws: Ws) -> None:
    import socket as so

    start(ws)
    sock = socket_path(ws.cache.resolve())
    for raw in (b"not json\n", b"[1, 2]\n", b'{"op": "context", "params": {"query": ""}}\n', b'{"op": "rm -rf"}\n'):
        with so.socket(so.AF_UNIX, so.SOCK_STREAM) as s:
            s.connect(str(sock))
            s.sendall(raw)
            s.shutdown(so.SHUT_WR)
            reply = json.loads(s.makefile("rb").read())
        assert reply["ok"] is False and reply["kind"] == "user" and reply["error"], (raw, reply)
    assert pack_of(run("context", "--json", *ws.common, "who calls apply_discount"))["items"]


@pytest.mark.anyio
async def test_mcp_bridge_relays_tool_calls_to_a_running_daemon(ws: Ws, tmp_path: Path) -> None:
    start(ws)
    async with mcp_session(ws.root, ws.cache, tmp_path / "mcp.err") as session:
        res = await session.call_tool("find_callers", {"symbol": "apply_discount"})
        assert not res.is_error, text(res)
        relayed = text(res)
        bad = await session.call_tool("find_callers", {"symbol": "no_such_symbol_anywhere"})
        assert bad.is_error and "no_such_symbol_anywhere" in text(bad)
    _, info = ws.status()
    assert info["requests"] == 2  # both calls ran in the daemon
    run("daemon", "stop", *ws.common)
    async with mcp_session(ws.root, ws.cache, tmp_path / "mcp2.err") as session:
        res = await session.call_tool("find_callers", {"symbol": "apply_discount"})
        assert text(res) == relayed  # the in-process bridge gives the same answer


def test_a_daemon_opening_its_index_says_how_far_it_is_and_a_waiting_caller_shows_it(
        ws: Ws, monkeypatch: pytest.MonkeyPatch) -> None:
    # a cold index takes seconds on a large project: `daemon start` and an auto-started call wait
    # for it, and on a terminal they show its stages, as an in-process call does
    from ctx_lsp.daemon import client as dc
    from ctx_lsp.daemon.server import Daemon
    from ctx_lsp.index.discovery import FileFilter

    d = Daemon(ws.root, ws.cache, FileFilter(), 60.0, watch=False)
    seen: list[object] = []
    real_open = d.engine.open

    def open_reporting(progress=None):  # type: ignore[no-untyped-def]
        report = real_open(progress)
        seen.append(d.info()["progress"])  # still opening: not ready yet
        return report

    monkeypatch.setattr(d.engine, "open", open_reporting)
    d.warm()
    files = len(d.engine.index.facts)
    assert seen == [{"stage": "binding", "done": files, "total": files}]
    assert d.info()["ready"] and d.info()["progress"] is None

    # the caller's side: each new (stage, done, total) it hears once, then the ready daemon's socket
    answers = iter([{"ready": False, "progress": {"stage": "parsing", "done": 1, "total": 4}},
                    {"ready": False, "progress": {"stage": "parsing", "done": 1, "total": 4}},
                    {"ready": False, "progress": {"stage": "binding", "done": 4, "total": 4}},
                    {"ready": True}])
    ident = dc.identity(ws.root.resolve(), ws.cache.resolve(), (), ())
    monkeypatch.setattr(dc, "hello", lambda cache_dir, timeout=5.0: {**ident, **next(answers)})
    heard: list[tuple[str, int, int]] = []
    assert dc.ensure(ident, start=False, progress=lambda *p: heard.append(p)) == dc.socket_path(ws.cache.resolve())
    assert heard == [("parsing", 1, 4), ("binding", 4, 4)]


@pytest.mark.skipif(sys.platform != "linux", reason="the peer's pid comes from SO_PEERCRED")
def test_a_stopped_daemon_is_reported_as_not_responding_and_stop_kills_it(ws: Ws) -> None:
    """A daemon that takes connections but answers nothing (SIGSTOP, or stuck) is not "not running":
    status names its pid, stop kills it, and calls fall back to working in process."""
    info = start(ws)
    pid = info["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        p = run("daemon", "status", *ws.common)
        assert p.returncode == 1
        assert p.stdout.startswith(f"a ctx-lsp daemon is running but not responding: the daemon (pid {pid}) did not answer")
        assert run("daemon", "status", "--json", *ws.common).stdout.strip() == json.dumps(
            {"running": True, "responding": False, "pid": pid})
        # a call (as the hook makes, starting a daemon when none answers) works in process after one
        # short hello: it neither waits on the stuck daemon nor starts a second one beside it
        t = time.monotonic()
        alone = run("context", "--json", *ws.common, "who calls tax_for", mode="off")
        plain = time.monotonic() - t
        t = time.monotonic()
        asked = run("context", "--json", *ws.common, "who calls tax_for", mode="auto")
        took = time.monotonic() - t
        assert pack_of(asked) == pack_of(alone)
        assert took < plain + 4.0, f"{took:.1f} s against {plain:.1f} s in process"
        p = run("daemon", "stop", *ws.common)
        assert p.stdout.strip() == "the ctx-lsp daemon did not answer (stopped or stuck): killed it"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            stat_file = Path(f"/proc/{pid}/stat")
            if not stat_file.exists() or stat_file.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break  # gone, or a zombie its adopting init has not reaped yet
            time.sleep(0.1)
        else:
            raise AssertionError(f"daemon {pid} still alive")
        assert not socket_path(ws.cache.resolve()).exists()
        assert run("daemon", "stop", *ws.common).stdout.strip() == "no ctx-lsp daemon was running"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_index_refine_while_a_daemon_runs_refines_the_daemons_graph_and_the_cache(ws: Ws) -> None:
    """Refined in another process, the jedi edges would reach neither the daemon's answers nor (after
    its next write) the cache: `index --refine` asks the running daemon to refine."""

    # a call through a loop variable: the static binder leaves it open, jedi resolves it
    (ws.root / "shop" / "loops.py").write_text(
        "def helper():\n    return 1\n\n\ndef run():\n    for f in [helper]:\n        f()\n")

    def jedi_edges(mode: str | None) -> list:
        p = run("neighbors", "--json", *ws.common, "shop/loops.py::helper", mode=mode)
        assert p.returncode == 0, p.stderr
        return sorted((n["path"], n["symbol"], n["edge"]) for n in json.loads(p.stdout)["neighbors"]
                      if n["resolver"] == "jedi")

    start(ws)
    assert jedi_edges(None) == []
    p = run("index", "--json", "--refine", *ws.common)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["refinement"]["added_edges"] >= 1
    assert "refined in the running daemon" in p.stderr
    through_daemon = jedi_edges(None)
    assert through_daemon and through_daemon == jedi_edges("off")
    assert run("daemon", "stop", *ws.common, timeout=30).returncode == 0
    assert jedi_edges("off") == through_daemon  # the daemon's cache write kept them
