"""A file watcher over a workspace: tell the owner, once a burst of changes to indexed files settles.

Why: changes made outside an editor (a `git checkout`, a `git pull`, an agent writing files) reach the
index only when someone looks. The daemon (`ctx_lsp/daemon/server.py`) refreshes in the background on
each batch, so the call after a checkout answers at warm speed; the language server watches only when
its client cannot (`workspace/didChangeWatchedFiles` without dynamic registration: Neovim on Linux).
The daemon's requests still refresh first (size/mtime, then content), so there a missed or spurious
event costs time, never a wrong answer.

inotify/FSEvents through `watchfiles` (Rust `notify`). A tree it cannot watch (no inotify watches left,
a file system without events) leaves the owner as it was without a watcher: it logs why and goes on.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ctx_lsp.index.discovery import SKIP_DIRS

log = logging.getLogger(__name__)
logging.getLogger("watchfiles").setLevel(logging.WARNING)  # it logs every batch at INFO

QUIET_MS = 200  # a batch ends once no event came for this long (a checkout writes its files in a burst)
MAX_BATCH_MS = 1600  # ... or after this long, so a stream of writes still refreshes now and then
TICK_MS = 250  # how often the watcher thread wakes when nothing happens (to learn it watches, to stop)


def relevant(rel: str, accepts: Callable[[str], bool]) -> bool:
    """Whether an event on the workspace-relative path `rel` may change the index: a file the index
    accepts, or what may be a directory (renaming or removing one reports only the directory)."""
    if rel in ("", ".") or rel.startswith("../"):
        return False
    parts = rel.split("/")
    if any(p in SKIP_DIRS for p in parts[:-1]):
        return False
    name = parts[-1]
    if accepts(rel):
        return True
    return "." not in name and name not in SKIP_DIRS


class TreeWatcher:
    """Watch `root` in a thread; after each settled batch of relevant events, call `on_change(rels)`
    with the batch's workspace-relative paths (sorted; a directory's path when only it was reported).

    `ignore`: directories whose events never count (the cache directory when it lies inside the root).
    `state()` says what it did, for `ctx-lsp daemon status`; "watching" turns true once the watches
    are set (a change before that is found by the next request's own refresh).
    """

    def __init__(self, root: Path, accepts: Callable[[str], bool], on_change: Callable[[list[str]], Any],
                 ignore: Iterable[Path] = (), quiet_ms: int = QUIET_MS, max_batch_ms: int = MAX_BATCH_MS) -> None:
        self.root = root
        self.accepts = accepts
        self.on_change = on_change
        self.ignore = tuple(os.path.realpath(p) + os.sep for p in ignore)
        self.quiet_ms, self.max_batch_ms = quiet_ms, max_batch_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._state: dict[str, Any] = {"watching": False, "error": None, "events": 0, "refreshes": 0,
                                       "pending": False, "last": None}

    def state(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._state)

    def _set(self, **kw: Any) -> None:
        with self._lock:
            self._state.update(kw)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ctx-lsp-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _rel(self, path: str) -> str | None:
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return None

    def _keep(self, path: str) -> bool:
        real = os.path.realpath(path)
        if any(real.startswith(d) or real + os.sep == d for d in self.ignore):
            return False
        rel = self._rel(path)
        return rel is not None and relevant(rel, self.accepts)

    def _run(self) -> None:
        try:
            import watchfiles
        except ImportError as exc:  # a broken install: run as without a watcher
            self._set(error=f"watchfiles unavailable: {exc}")
            log.warning("not watching %s: %s", self.root, exc)
            return
        root = str(self.root)
        try:
            # The filter runs on every raw event; a batch of only irrelevant ones is never yielded. The
            # empty batch yielded when nothing happened for TICK_MS is how we learn the watches are set.
            batches = watchfiles.watch(root, watch_filter=lambda _change, path: self._keep(path),
                                       debounce=self.max_batch_ms, step=self.quiet_ms, stop_event=self._stop,
                                       raise_interrupt=False, rust_timeout=TICK_MS, yield_on_timeout=True)
            for batch in batches:
                if not batch:
                    if not self._state["watching"]:
                        self._set(watching=True)
                        log.info("watching %s for changes", root)
                    continue
                self._set(watching=True, pending=True, events=self.state()["events"] + len(batch))
                self._refresh(sorted({r for _, path in batch if (r := self._rel(path)) is not None}), len(batch))
        except Exception as exc:  # no inotify watches left, a vanished root, ...: serve without watching
            self._set(watching=False, pending=False, error=f"{type(exc).__name__}: {exc}")
            log.warning("stopped watching %s: %s", root, exc)
            return
        self._set(watching=False)

    def _refresh(self, rels: list[str], events: int) -> None:
        t = time.perf_counter()
        try:
            changed = self.on_change(rels)
        except Exception as exc:  # the next request refreshes (and reports) on its own
            log.exception("background refresh failed")
            self._set(pending=False, error=f"{type(exc).__name__}: {exc}")
            return
        n = len(changed) if isinstance(changed, list) else None
        with self._lock:
            self._state["refreshes"] += 1
            self._state["pending"] = False
            self._state["last"] = {"at": round(time.time(), 3), "seconds": round(time.perf_counter() - t, 3),
                                   "events": events, "changed": n}
