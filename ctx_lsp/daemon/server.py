"""`ctx-lsp daemon run`: one warm engine for a workspace, answering one-shot callers over a local socket.

The wire and the client live in `ctx_lsp.daemon.client`. Every request that reads the workspace first
brings the index in line with the disk (`Engine.refresh`: size/mtime, then content hash; once git is
done writing the tree, `Engine.wait_for_git`), and starts
from the memory a fresh process would have (working memory empty, episodes as on disk), so an answer
equals the in-process one-shot answer on the same files. Unless started with `--no-watch`, it also
watches the tree (`watch.py`) and refreshes in the background once a batch of changes settles, so the
call after a checkout finds that work done. The daemon exits after `idle_timeout` seconds without a
request, when asked (`ctx-lsp daemon stop`), or when its socket is taken from it.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import socketserver
import threading
import time
from pathlib import Path
from typing import Any

from ctx_lsp import __version__
from ctx_lsp.daemon.client import INFO_NAME, PROTOCOL, build_id, identity, private_dir, socket_path
from ctx_lsp.engine import Engine, TargetNotFound
from ctx_lsp.index.discovery import FileFilter
from ctx_lsp.index.watch import TreeWatcher
from ctx_lsp.index.workspace import prepare_threaded_process

log = logging.getLogger(__name__)

IDLE_TIMEOUT_S = 1800.0
MAX_SESSIONS = 32
MAX_REQUEST_BYTES = 16 << 20  # a pasted issue or log is far below this; more is refused, not read


class UserError(Exception):
    """Answered as {"ok": false, "kind": "user"}: the caller prints it as a one-line error."""


class Daemon:
    """The engine and the request handlers; the socket server only moves bytes."""

    def __init__(self, root: Path, cache_dir: Path, flt: FileFilter, idle_timeout: float, watch: bool = True) -> None:
        self.engine = Engine(root, cache_dir=cache_dir, flt=flt)
        # Updates may fork their workers and cache writer although request threads exist: every engine
        # call runs under engine.lock, stdin is /dev/null and unread, and `run` imports lazy modules first.
        # A checkout then binds on every core, as a fresh process would, instead of on one.
        self.engine.index.fork_safe = True
        self.engine.index.background_save = True
        self.ident = identity(self.engine.root, cache_dir, flt.include, flt.exclude)
        self.idle_timeout = idle_timeout
        self.started = time.time()
        self.last_request = time.monotonic()
        self.requests = 0
        self.git_waits = 0  # requests waiting for git to finish writing the tree now
        self._waits_lock = threading.Lock()
        self.ready = threading.Event()
        self.failed: str | None = None
        self.loading: tuple[str, int, int] | None = None  # (stage, done, total) of the open under way
        self._bridge: Any = None
        self._sessions: dict[str, Any] = {}  # MCP session id -> its WorkingMemory, least recent first
        self.server: socketserver.UnixStreamServer | None = None
        self.watcher: TreeWatcher | None = None
        if watch:
            idx = self.engine.index
            self.watcher = TreeWatcher(self.engine.root, idx.accepts, self._background_refresh, ignore=[cache_dir],
                                       accepts_dir=idx.accepts_dir)

    # -- lifecycle ----------------------------------------------------------------------------
    def warm(self) -> None:
        """Open the index and build the retrieval indexes, so the first request is as fast as the rest."""
        def progress(stage: str, done: int, total: int) -> None:
            self.loading = (stage, done, total)  # one assignment: `info` reads it from request threads

        try:
            self.engine.open(progress)
            with self.engine.lock:
                self.engine.retriever.decode_lexical()
        except Exception as exc:  # reported to callers through hello; they fall back to in-process
            log.exception("opening the index failed")
            self.failed = f"{type(exc).__name__}: {exc}"
        self.ready.set()
        if self.watcher is not None and not self.failed:
            self.watcher.start()  # after the open: a change during it is found by the next refresh

    def _background_refresh(self, _rels: list[str]) -> list[str]:
        """A settled batch of changes on disk: the refresh the next request would make, done now (the
        whole tree, by size and mtime: the batch only says when). Not a request: it neither resets
        the idle clock nor counts as one. Engine.refresh holds the engine lock."""
        return self.engine.refresh()

    def info(self) -> dict[str, Any]:
        return {**self.ident, "version": __version__, "pid": os.getpid(), "ready": self.ready.is_set() and not self.failed,
                "failed": self.failed, "started": round(self.started, 3), "requests": self.requests,
                "idle_timeout": self.idle_timeout, "idle_s": round(time.monotonic() - self.last_request, 1),
                "rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "files": len(self.engine.index.facts) if self.ready.is_set() else None,
                # while the index opens (a cold index takes seconds): how far it is, for a caller waiting
                "progress": (dict(zip(("stage", "done", "total"), self.loading, strict=True))
                             if self.loading is not None and not self.ready.is_set() else None),
                "waiting_for_git": self.git_waits,
                # the last open or refresh (copied: dict() is atomic, and a request thread may be updating):
                # seconds per stage, and the processes its extraction and binding used
                "last_update": ({"phases": {k: round(v, 3) for k, v in dict(self.engine.index.phases).items()},
                                 "workers": dict(self.engine.index.workers_used)} if self.ready.is_set() else None),
                # the file watcher: whether it runs, events seen, background refreshes, one pending now
                "watch": self.watcher.state() if self.watcher is not None else None}

    # -- requests -----------------------------------------------------------------------------
    def handle(self, op: str, params: dict[str, Any]) -> Any:
        if op == "hello":
            return self.info()
        self.last_request = time.monotonic()
        if op == "stop":
            threading.Thread(target=self.shutdown, daemon=True).start()
            return {"stopping": os.getpid()}
        self.ready.wait()
        if self.failed:
            raise RuntimeError(self.failed)
        self.requests += 1
        if op in ("context", "neighbors", "mcp") and not params.get("git_child"):
            self._wait_for_git()  # not for a git hook's call: its git holds the lock until the call ends
        if op == "context":
            return self._context(params)
        if op == "neighbors":
            return self._neighbors(params)
        if op == "mcp":
            return self._mcp(params)
        if op == "refine":
            return self._refine()
        raise UserError(f"unknown daemon request: {op!r}")

    def _wait_for_git(self) -> None:
        """Before the request's refresh, outside the engine lock; `status` shows requests waiting."""
        waited = []

        def started() -> None:
            with self._waits_lock:
                self.git_waits += 1
            waited.append(True)

        try:
            seconds = self.engine.wait_for_git(started)
        finally:
            if waited:
                with self._waits_lock:
                    self.git_waits -= 1
        if waited:
            log.info("a request waited %.2f s for git to finish writing the work tree", seconds)

    def _fresh_session(self) -> None:
        self.engine.refresh()
        self.engine.retriever.fresh_session()

    def _context(self, params: dict[str, Any]) -> Any:
        query, budget = params.get("query"), params.get("budget", 4000)
        if not isinstance(query, str) or not (query.strip() or params.get("at_line")):
            raise UserError("empty query")
        if not isinstance(budget, int) or budget <= 0:
            raise UserError("--budget must be a positive number of tokens")
        with self.engine.lock:
            self._fresh_session()
            try:
                return self.engine.context_for(params)
            except (TargetNotFound, ValueError) as exc:
                raise UserError(str(exc)) from None

    def _neighbors(self, params: dict[str, Any]) -> Any:
        target, cwd = params.get("target"), params.get("cwd")
        if not isinstance(target, str):
            raise UserError("missing target")
        with self.engine.lock:
            self._fresh_session()
            try:
                node_id = self.engine.resolve_target(target, cwd=Path(cwd) if isinstance(cwd, str) else None)
                return {"target": node_id, "items": self.engine.neighbors(node_id, every_site=True),
                        "also": self.engine.same_name_elsewhere(target, node_id)}
            except (TargetNotFound, ValueError) as exc:
                raise UserError(str(exc)) from None

    def _refine(self) -> Any:
        """`ctx-lsp index --refine` while this daemon runs: jedi refines this engine's graph (the lock
        taken per batch, so other calls are answered meanwhile) and the cache is written from it. Done
        in another process, the refinement would reach neither this graph nor, once this daemon writes
        the cache again, the cache."""
        from ctx_lsp.index.refine import refine_index
        from ctx_lsp.index.workspace import summarize

        t0 = time.perf_counter()
        with self.engine.lock:
            self.engine.refresh()
        refinement = refine_index(self.engine.index, lock=self.engine.lock)
        with self.engine.lock:
            summary = summarize(self.engine.index, time.perf_counter() - t0)
        summary["refinement"] = refinement
        return summary

    def _mcp(self, params: dict[str, Any]) -> Any:
        """One MCP tool call, run by a Bridge over this engine (the MCP process only relays it)."""
        from ctx_lsp.mcp.bridge import Bridge, ToolFailure

        if self._bridge is None:
            self._bridge = Bridge(self.engine, wait_for_git=False)  # handle() waited before the lock
        method, args = params.get("method"), params.get("args")
        if method not in ("get_context", "architectural", "semantic_search", "relation") or not isinstance(args, list):
            raise UserError(f"unknown MCP tool call: {method!r}")
        session = str(params.get("session", ""))
        with self.engine.lock:
            r = self.engine.retriever
            r.fresh_session()
            # an MCP session keeps its own working memory across its calls, as an in-process bridge would
            r.working = self._sessions.pop(session, None) or r.working
            try:
                return getattr(self._bridge, method)(*args)
            except ToolFailure as exc:
                raise UserError(str(exc)) from None
            finally:
                self._sessions[session] = r.working
                while len(self._sessions) > MAX_SESSIONS:
                    self._sessions.pop(next(iter(self._sessions)))

    # -- serving ------------------------------------------------------------------------------
    def serve(self) -> int:
        sock = socket_path(Path(self.ident["cache_dir"]))
        private_dir(sock.parent)
        if sock.exists():
            from ctx_lsp.daemon.client import DaemonUnavailable, hello

            try:
                hello(Path(self.ident["cache_dir"]), timeout=2.0)
                log.error("a daemon already serves %s", sock)
                return 1
            except DaemonUnavailable:
                sock.unlink()  # left by a daemon that died
        old = os.umask(0o177)  # the socket is created 0600: only this user may connect
        try:
            self.server = _Server(str(sock), _Handler, daemon=self)
        finally:
            os.umask(old)
        os.chmod(sock, 0o600)
        info_file = Path(self.ident["cache_dir"]) / INFO_NAME
        self._write_info(info_file, sock)
        threading.Thread(target=self.warm, name="ctx-lsp-daemon-open", daemon=True).start()
        threading.Thread(target=self._watch, args=(sock,), name="ctx-lsp-daemon-idle", daemon=True).start()
        log.info("ctx-lsp daemon %s serving %s on %s", __version__, self.engine.root, sock)
        try:
            self.server.serve_forever(poll_interval=0.5)
        finally:
            self.server.server_close()
            for p in (sock, info_file):
                try:
                    if p == sock and not _same_inode(p, self._sock_ino):
                        continue  # a newer daemon owns the path now
                    p.unlink()
                except OSError:
                    pass
        if self.watcher is not None:
            self.watcher.stop()
        log.info("ctx-lsp daemon exiting after %d requests", self.requests)
        return 0

    def _write_info(self, path: Path, sock: Path) -> None:
        self._sock_ino = sock.stat().st_ino
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"pid": os.getpid(), "socket": str(sock), "version": __version__,
                                   "build": build_id(), "protocol": PROTOCOL, "root": self.ident["root"]}) + "\n")
        os.replace(tmp, path)

    def _watch(self, sock: Path) -> None:
        """Exit when idle too long, or when the socket was removed or replaced (another daemon, a cleanup)."""
        while True:
            time.sleep(1.0)
            idle = time.monotonic() - self.last_request
            if idle > self.idle_timeout:
                log.info("idle for %.0f s: exiting", idle)
                break
            if not _same_inode(sock, self._sock_ino):
                log.info("socket %s was removed or replaced: exiting", sock)
                break
        self.shutdown()

    def shutdown(self) -> None:
        if self.server is not None:
            self.server.shutdown()


def _same_inode(path: Path, ino: int) -> bool:
    try:
        return path.stat().st_ino == ino
    except OSError:
        return False


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, address: str, handler: type[socketserver.BaseRequestHandler], daemon: Daemon) -> None:
        self.ctx_daemon = daemon
        super().__init__(address, handler)


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        daemon: Daemon = self.server.ctx_daemon  # type: ignore[attr-defined]
        raw = self.rfile.readline(MAX_REQUEST_BYTES + 1)
        try:
            if len(raw) > MAX_REQUEST_BYTES:
                raise UserError(f"request larger than {MAX_REQUEST_BYTES >> 20} MB")
            try:
                req = json.loads(raw)
            except ValueError:
                raise UserError("malformed request (one JSON object per line)") from None
            if not isinstance(req, dict) or not isinstance(req.get("op"), str):
                raise UserError("malformed request: no op")
            params = req.get("params") or {}
            if not isinstance(params, dict):
                raise UserError("malformed request: params must be an object")
            reply: dict[str, Any] = {"ok": True, "result": daemon.handle(req["op"], params)}
        except UserError as exc:
            reply = {"ok": False, "kind": "user", "error": str(exc)}
        except Exception as exc:  # the caller falls back to in-process; the daemon keeps serving
            log.exception("request failed")
            reply = {"ok": False, "kind": "internal", "error": f"{type(exc).__name__}: {exc}"}
        try:
            self.wfile.write((json.dumps(reply) + "\n").encode())
        except OSError:
            pass  # the caller went away


def run(root: Path, cache_dir: Path, flt: FileFilter, idle_timeout: float = IDLE_TIMEOUT_S, watch: bool = True) -> int:
    # force: the CLI configured the root logger for its own stderr (warnings) before it got here
    logging.basicConfig(level=logging.INFO, format="%(asctime)s ctx-lsp daemon: %(message)s", force=True)
    # the pools refresh starts run beside the request threads; those import these lazily
    prepare_threaded_process("ctx_lsp.mcp.bridge", "ctx_lsp.retrieval.engine", "ctx_lsp.retrieval.render",
                             "inotify_simple", "watchdog.observers", "watchdog.events")
    return Daemon(root, cache_dir, flt, idle_timeout, watch).serve()
