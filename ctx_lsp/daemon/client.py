"""The one-shot side of the daemon: find a warm `ctx-lsp daemon` for a workspace, start one, ask it.

One-shot callers (the CLI, the agent hook, a restarted MCP bridge) pay for loading the index on every
run; a daemon keeps one engine warm per workspace, the way dmypy serves mypy. This module must stay
light (no index code): it is imported on the CLI's fast path.

Wire: a Unix stream socket, one request per connection, one JSON object per line each way:
  -> {"op": ..., "params": {...}}
  <- {"ok": true, "result": ...} | {"ok": false, "kind": "user" | "internal", "error": "one line"}
The socket is `daemon.sock` in the workspace's cache directory (mode 0600; a per-user runtime
directory with mode 0700 when that path is too long for a socket), beside `daemon.json` (pid, root,
version) and `daemon.log`.

Policy (`$CTX_LSP_DAEMON`): unset or `use`: use a daemon that is already running, else work in-process
(nothing changes for users who never start one); `auto`: start one when none is running;
`off`: never use one. Any failure to reach or start a daemon falls back to in-process work silently
(logged at debug level).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctx_lsp import __version__

log = logging.getLogger(__name__)

PROTOCOL = 1
POLICY_ENV = "CTX_LSP_DAEMON"
POLICIES = ("use", "auto", "off")
SOCKET_NAME = "daemon.sock"
INFO_NAME = "daemon.json"
LOG_NAME = "daemon.log"
LOCK_NAME = "daemon.lock"
START_TIMEOUT_S = 300.0  # a cold index of a large workspace takes a while before the daemon is ready
_MAX_SUN_PATH = 100  # AF_UNIX paths are limited to ~108 bytes; keep a margin


class DaemonUnavailable(Exception):
    """No usable daemon (none running, another version, it died mid-request): work in-process."""


class DaemonRefused(DaemonUnavailable):
    """The daemon that answers can never serve this caller (another one took the socket, or it failed
    to open the index): waiting longer would not help."""


class DaemonNotResponding(DaemonUnavailable):
    """A daemon accepted the connection but sent no answer in time (stopped with SIGSTOP, or stuck):
    `pid` is the process listening on the socket, when the system says (Linux: SO_PEERCRED)."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


def _peer_pid(s: socket.socket) -> int | None:
    """The pid of the process holding the other end of a connected Unix socket (Linux only)."""
    cred = getattr(socket, "SO_PEERCRED", None)
    if cred is None:
        return None
    try:
        pid, uid, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, cred, struct.calcsize("3i")))
    except OSError:
        return None
    return pid if pid > 0 and uid == os.getuid() else None


class DaemonUserError(Exception):
    """The daemon answered with an error for the user (unknown symbol, bad argument): one line."""


def policy() -> str:
    raw = os.environ.get(POLICY_ENV, "use").strip().lower() or "use"
    return raw if raw in POLICIES else "use"


def build_id() -> str:
    """Identifies the code a daemon runs: the package version plus each module's size and mtime. A
    daemon started before a reinstall or an edit of a development checkout is not used."""
    h = hashlib.sha1(__version__.encode())
    pkg = Path(__file__).parent.parent  # ctx_lsp/, every module of the package
    for dirpath, dirnames, filenames in os.walk(pkg):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                st = os.stat(os.path.join(dirpath, name))
                h.update(f"{os.path.relpath(os.path.join(dirpath, name), pkg)}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()[:16]


def identity(root: Path, cache_dir: Path, include: Sequence[str], exclude: Sequence[str]) -> dict[str, Any]:
    """What a daemon must match to answer for a caller: same code, same workspace, same file filter."""
    return {"protocol": PROTOCOL, "build": build_id(), "root": str(root), "cache_dir": str(cache_dir),
            "include": list(include), "exclude": list(exclude)}


def socket_path(cache_dir: Path) -> Path:
    """Where the daemon of this cache directory listens (a function of the cache directory alone)."""
    direct = cache_dir / SOCKET_NAME
    if len(os.fsencode(str(direct))) <= _MAX_SUN_PATH:
        return direct
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    key = hashlib.sha1(str(cache_dir).encode()).hexdigest()[:20]
    return Path(base) / f"ctx-lsp-{os.getuid()}" / f"{key}.sock"


def private_dir(path: Path) -> None:
    """Create `path` for this user only, and refuse one that someone else owns or can write."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise DaemonUnavailable(f"{path} is not private to this user")


def request(sock_path: Path, op: str, params: dict[str, Any] | None = None, timeout: float | None = 600.0) -> Any:
    """One request. Raises DaemonUnavailable (no daemon, or it failed) or DaemonUserError."""
    try:
        st = sock_path.stat()
    except OSError:
        raise DaemonUnavailable("no daemon socket") from None
    if st.st_uid != os.getuid():  # never talk to a socket another user planted
        raise DaemonUnavailable(f"{sock_path} belongs to another user")
    data = (json.dumps({"op": op, "params": params or {}}) + "\n").encode()
    peer: int | None = None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(sock_path))
            peer = _peer_pid(s)
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
    except TimeoutError:
        who = f"pid {peer}" if peer else "its process"
        raise DaemonNotResponding(f"the daemon ({who}) did not answer within {timeout:g} s", peer) from None
    except OSError as exc:
        raise DaemonUnavailable(f"daemon unreachable: {exc}") from None
    try:
        reply = json.loads(b"".join(chunks))
    except ValueError:
        raise DaemonUnavailable("daemon sent no answer") from None
    if not isinstance(reply, dict):
        raise DaemonUnavailable("daemon sent a malformed answer")
    if reply.get("ok"):
        return reply.get("result")
    if reply.get("kind") == "user":
        raise DaemonUserError(str(reply.get("error", "error")))
    raise DaemonUnavailable(f"daemon failed: {reply.get('error')}")


HELLO_TIMEOUT_S = 2.0  # a caller's first hello: how long a daemon that took the connection may take to answer


def hello(cache_dir: Path, timeout: float = 5.0) -> dict[str, Any]:
    info = request(socket_path(cache_dir), "hello", timeout=timeout)
    if not isinstance(info, dict):
        raise DaemonUnavailable("malformed hello")
    return info


def matches(info: dict[str, Any], ident: dict[str, Any]) -> bool:
    return all(info.get(k) == v for k, v in ident.items())


def _spawn(ident: dict[str, Any], idle_timeout: float | None, watch: bool = True) -> subprocess.Popen[bytes]:
    cache_dir = Path(ident["cache_dir"])
    cache_dir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "ctx_lsp", "daemon", "run", "--root", ident["root"], "--cache-dir", ident["cache_dir"]]
    for g in ident["include"]:
        cmd += ["--include", g]
    for g in ident["exclude"]:
        cmd += ["--exclude", g]
    if idle_timeout is not None:
        cmd += ["--idle-timeout", str(idle_timeout)]
    if not watch:
        cmd.append("--no-watch")
    with open(cache_dir / LOG_NAME, "ab") as logf:
        # a call from a git hook may start it: it must not keep the variables that git command set
        from ctx_lsp.index.git_activity import outliving_git  # os and time only: the fast path stays light

        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, start_new_session=True,
                                close_fds=True, cwd=ident["root"], env=outliving_git())


def _died(proc: subprocess.Popen[bytes] | None, cache_dir: Path) -> str | None:
    """Why the daemon this caller spawned is gone (its exit status and the last line of its log), or
    None while it runs: a daemon that cannot even start must not be waited for until the timeout."""
    if proc is None or proc.poll() is None:
        return None
    try:
        lines = (cache_dir / LOG_NAME).read_text(errors="replace").strip().splitlines()
    except OSError:
        lines = []
    last = lines[-1].strip() if lines else "no output"
    return f"it exited with status {proc.returncode}: {last}"


def ensure(ident: dict[str, Any], start: bool, idle_timeout: float | None = None,
           wait_s: float = START_TIMEOUT_S, notify: Any = None, watch: bool = True,
           progress: Any = None) -> Path:
    """The socket of a ready daemon matching `ident`; starts one when `start` and none answers.
    `progress(stage, done, total)` hears how far the daemon's index is while the caller waits.

    A daemon of another build or filter for the same cache is asked to stop first (when starting).
    Raises DaemonUnavailable when there is none (and `start` is false) or it did not come up.
    """
    cache_dir = Path(ident["cache_dir"])
    sock = socket_path(cache_dir)
    try:
        # a live daemon answers hello from its socket thread at once, busy or not
        info = hello(cache_dir, timeout=HELLO_TIMEOUT_S)
    except DaemonNotResponding as exc:
        # it holds the socket but answers nothing (stopped, stuck): starting another cannot take the
        # socket, and waiting for it would stall the caller (a hook, before every prompt)
        raise DaemonUnavailable(f"{exc}; working in process") from None
    except DaemonUnavailable:
        info = None
    if info is not None and matches(info, ident):
        if info.get("ready"):
            return sock
    elif info is not None:
        if not start:
            raise DaemonUnavailable("the running daemon serves another build or file filter")
        try:
            request(sock, "stop", timeout=5.0)
        except (DaemonUnavailable, DaemonUserError):
            pass
        _wait_gone(sock, 10.0)
        info = None
    proc = None
    if info is None:
        if not start:
            raise DaemonUnavailable("no daemon running")
        proc = _start_locked(ident, idle_timeout, watch)
        if notify is not None:
            notify("starting the ctx-lsp daemon (the index loads once; later calls reuse it)")
    deadline = time.monotonic() + wait_s
    heard: tuple[str, int, int] | None = None
    while time.monotonic() < deadline:
        try:
            info = hello(cache_dir)
        except DaemonUnavailable:  # not listening yet
            if (why := _died(proc, cache_dir)) is not None:
                raise DaemonRefused(why) from None
            time.sleep(0.05)
            continue
        if not matches(info, ident):
            raise DaemonRefused("another daemon took the socket")
        if info.get("ready"):
            return sock
        if info.get("failed"):
            raise DaemonRefused(f"daemon failed to open the index: {info['failed']}")
        loading = info.get("progress")
        if progress is not None and isinstance(loading, dict):
            now = (str(loading.get("stage")), int(loading.get("done") or 0), int(loading.get("total") or 0))
            if now != heard:  # polled every 50 ms: a stage that has not moved is not said again
                heard = now
                progress(*now)
        time.sleep(0.05)
    raise DaemonUnavailable("daemon did not become ready in time")


def _start_locked(ident: dict[str, Any], idle_timeout: float | None,
                  watch: bool = True) -> subprocess.Popen[bytes] | None:
    """Spawn a daemon unless another caller is starting one right now (an exclusive lock file); the
    process spawned, or None when another caller's daemon is coming up."""
    import fcntl

    cache_dir = Path(ident["cache_dir"])
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / LOCK_NAME, "a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return None  # another caller is starting it; wait for its socket like everyone else
        try:
            hello(cache_dir, timeout=2.0)
            return None  # came up meanwhile
        except DaemonUnavailable:
            pass
        proc = _spawn(ident, idle_timeout, watch)
        # hold the lock until the socket exists, so a concurrent caller does not spawn a second one
        deadline = time.monotonic() + 30.0
        sock = socket_path(cache_dir)
        while time.monotonic() < deadline and not sock.exists() and proc.poll() is None:
            time.sleep(0.02)
        return proc


def _wait_gone(sock: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and sock.exists():
        time.sleep(0.05)


def stop(cache_dir: Path) -> str | None:
    """Ask the daemon of this cache directory to exit: how it ended ("stopped", or "killed" for one
    that accepted the request but did not answer, stopped or stuck), or None when none was running."""
    sock = socket_path(cache_dir)
    try:
        request(sock, "stop", timeout=10.0)
    except DaemonNotResponding as exc:
        if exc.pid is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.kill(exc.pid, signal.SIGKILL)  # a stopped process takes no other signal
        with contextlib.suppress(OSError):
            sock.unlink()  # a killed daemon cannot remove its socket
        return "killed"
    except (DaemonUnavailable, DaemonUserError):
        return None
    _wait_gone(sock, 10.0)
    return "stopped"
