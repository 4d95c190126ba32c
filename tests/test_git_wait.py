"""Callers that refresh before answering (the one-shot CLI, the daemon) wait while git writes the work
tree, and answer about the tree git leaves: real subprocesses, a real `git init`, the work tree's
`index.lock` created and removed as git does."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ctx_lsp.index.git_activity import GitActivity, outliving_git, started_by_git

sys.path.insert(0, str(Path(__file__).parent))
from test_daemon import FIXTURE, Ws, pack_of, run, start  # noqa: E402
from test_tree_watch import wait_for  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("git") is None or not hasattr(os, "getuid"), reason="git, Unix sockets")

QUERY = "who calls compute_loyalty_points"
NEW_CODE = "\n\ndef compute_loyalty_points(total):\n    return int(total // 10)\n"


def _repo(tmp_path: Path) -> Ws:
    root = tmp_path / "ws"
    shutil.copytree(FIXTURE, root)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return Ws(root, tmp_path / "cache")


def _has_new_function(pack: dict) -> bool:
    return any(i["symbol"] == "compute_loyalty_points" for i in pack["items"])


def _popen(ws: Ws, mode: str | None, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "CTX_LSP_DAEMON"}
    if mode is not None:
        env["CTX_LSP_DAEMON"] = mode
    return subprocess.Popen([sys.executable, "-m", "ctx_lsp", "context", "--json", *ws.common, *extra, QUERY],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_settle_waits_for_the_lock_and_ignores_one_left_by_a_dead_git(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    git = GitActivity.find(tmp_path)
    lock = tmp_path / ".git" / "index.lock"
    assert git.settle() < 0.05  # no lock: no wait
    lock.write_text("")
    started: list[float] = []
    threading.Timer(0.5, lock.unlink).start()
    t = time.monotonic()
    waited = git.settle(lambda: started.append(time.monotonic() - t))
    assert waited >= 0.45 and not lock.exists()
    assert len(started) == 1 and started[0] < 0.3  # told once, when the wait began
    lock.write_text("")
    hour_ago = time.time() - 3600
    os.utime(lock, (hour_ago, hour_ago))
    assert git.settle() < 0.05  # a lock older than the cap holds nothing
    os.utime(lock)  # a fresh lock that stays (`git commit` with its message editor open)
    waited = git.settle(limit_s=0.5)
    assert 0.45 <= waited < 2.0 and lock.exists()  # a request waits only so long


def test_a_daemon_call_made_while_git_writes_waits_and_answers_about_the_finished_tree(tmp_path: Path) -> None:
    ws = _repo(tmp_path)
    try:
        start(ws)
        lock = ws.root / ".git" / "index.lock"
        lock.write_text("")  # git starts a checkout
        call = _popen(ws, None)
        assert wait_for(lambda: ws.status()[1].get("waiting_for_git") == 1, 30.0), ws.status()
        mod = next(ws.root.glob("shop/*.py"))
        mod.write_text(mod.read_text() + NEW_CODE)  # git goes on writing
        lock.unlink()  # and is done
        out, err = call.communicate(timeout=60)
        pack = pack_of(subprocess.CompletedProcess(call.args, call.returncode, out, err))
        assert _has_new_function(pack)  # the answer is about the tree git left
        _, info = ws.status()
        assert info["waiting_for_git"] == 0 and info["requests"] >= 1
        assert "waited" in (ws.cache / "daemon.log").read_text(encoding="utf-8")
        assert pack == pack_of(run("context", "--json", *ws.common, QUERY, mode="off"))
    finally:
        run("daemon", "stop", *ws.common, timeout=30)


def test_a_one_shot_call_made_while_git_writes_waits_and_answers_about_the_finished_tree(tmp_path: Path) -> None:
    ws = _repo(tmp_path)
    assert run("index", *ws.common, mode="off").returncode == 0  # a warm cache, as a user's would be
    lock = ws.root / ".git" / "index.lock"
    lock.write_text("")
    call = _popen(ws, "off", "-v")
    assert call.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in call.stderr], daemon=True).start()  # type: ignore[union-attr]
    seen = ""
    end = time.monotonic() + 30
    while "waiting for git" not in seen and time.monotonic() < end:
        try:
            seen += lines.get(timeout=1)
        except queue.Empty:
            pass
    assert "waiting for git" in seen
    assert call.poll() is None  # still waiting: nothing answered from the half-written tree
    mod = next(ws.root.glob("shop/*.py"))
    mod.write_text(mod.read_text() + NEW_CODE)
    lock.unlink()
    out = call.stdout.read() if call.stdout else ""
    assert call.wait(timeout=60) == 0
    pack = pack_of(subprocess.CompletedProcess(call.args, 0, out, ""))
    assert _has_new_function(pack)
    # a lock left by a git that died an hour ago holds nothing
    lock.write_text("")
    hour_ago = time.time() - 3600
    os.utime(lock, (hour_ago, hour_ago))
    stale = run("context", "--json", *ws.common, "-v", QUERY, mode="off", timeout=25)
    assert stale.returncode == 0 and "waiting for git" not in stale.stderr


def test_a_process_git_started_is_told_apart_and_a_daemon_it_starts_drops_gits_variables() -> None:
    hook = {"PATH": "/usr/bin", "GIT_EXEC_PATH": "/usr/lib/git-core", "GIT_INDEX_FILE": "/r/.git/index.lock",
            "GIT_PREFIX": "", "GIT_AUTHOR_NAME": "a", "GIT_DIR": "/r/.git"}
    assert started_by_git(hook) and started_by_git({"GIT_INDEX_FILE": "x"})
    assert not started_by_git({"PATH": "/usr/bin", "GIT_DIR": "/home/me/.cfg"})
    assert outliving_git(hook) == {"PATH": "/usr/bin", "GIT_AUTHOR_NAME": "a"}
    mine = {"PATH": "/usr/bin", "GIT_DIR": "/home/me/.cfg"}  # the user's own setting, no git around it
    assert outliving_git(mine) == mine


def _hooked_repo(tmp_path: Path, hook_body: str) -> Ws:
    """A work tree whose pre-commit hook runs `hook_body` (sh), with a change staged for `commit -a`."""
    ws = _repo(tmp_path)
    for k, v in (("user.email", "t@example.com"), ("user.name", "t"), ("commit.gpgsign", "false")):
        subprocess.run(["git", "config", k, v], cwd=ws.root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=ws.root, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "base"], cwd=ws.root, check=True)
    hook = ws.root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\n" + hook_body + "\n", encoding="utf-8")
    hook.chmod(0o755)
    mod = next(ws.root.glob("shop/*.py"))
    mod.write_text(mod.read_text() + NEW_CODE)
    return ws


def test_a_call_from_a_git_hook_does_not_wait_for_the_lock_its_own_git_holds(tmp_path: Path) -> None:
    """`git commit -a` holds index.lock around its pre-commit hook: a ctx-lsp call there must not wait
    for it (it would wait until its cap, on every commit)."""
    out, err = tmp_path / "pack.json", tmp_path / "hook.err"
    cmd = f"{sys.executable} -m ctx_lsp context --json -v --root . --cache-dir {tmp_path / 'cache'} '{QUERY}'"
    ws = _hooked_repo(tmp_path, f"test -f .git/index.lock || exit 3\nCTX_LSP_DAEMON=off {cmd} > {out} 2> {err}")
    commit = subprocess.run(["git", "commit", "-q", "-a", "-m", "loyalty"], cwd=ws.root, capture_output=True,
                            text=True, timeout=120)
    assert commit.returncode == 0, commit.stderr  # 3: git held no lock, and the test would prove nothing
    assert "waiting for git" not in err.read_text()
    assert _has_new_function(pack_of(subprocess.CompletedProcess([], 0, out.read_text(), "")))


def test_a_daemon_started_from_a_git_hook_neither_waits_for_it_nor_keeps_its_variables(tmp_path: Path) -> None:
    out = tmp_path / "pack.json"
    cmd = f"{sys.executable} -m ctx_lsp context --json --root . --cache-dir {tmp_path / 'cache'} '{QUERY}'"
    ws = _hooked_repo(tmp_path, f"CTX_LSP_DAEMON=auto {cmd} > {out}")
    try:
        commit = subprocess.run(["git", "commit", "-q", "-a", "-m", "loyalty"], cwd=ws.root, capture_output=True,
                                text=True, timeout=120)
        assert commit.returncode == 0, commit.stderr
        assert _has_new_function(pack_of(subprocess.CompletedProcess([], 0, out.read_text(), "")))
        code, info = ws.status()
        assert code == 0 and info["requests"] == 1  # the hook's call was the daemon's
        log = (ws.cache / "daemon.log").read_text(encoding="utf-8")
        assert "waited" not in log
        environ = Path(f"/proc/{info['pid']}/environ")
        if environ.exists():
            names = {kv.split(b"=", 1)[0] for kv in environ.read_bytes().split(b"\0") if kv}
            assert not names & {b"GIT_INDEX_FILE", b"GIT_EXEC_PATH", b"GIT_PREFIX"}, names
    finally:
        run("daemon", "stop", *ws.common, timeout=30)
