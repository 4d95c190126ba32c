"""A file watcher over a workspace: tell the owner, once a burst of changes to indexed files settles.

Why: changes made outside an editor (a `git checkout`, a `git pull`, an agent writing files) reach the
index only when someone looks. The daemon (`ctx_lsp/daemon/server.py`) refreshes in the background on
each batch, so the call after a checkout answers at warm speed; the language server watches only when
its client cannot (`workspace/didChangeWatchedFiles` without dynamic registration: Neovim on Linux).
The daemon's requests still refresh first (size/mtime, then content), so there a missed or spurious
event costs time, never a wrong answer.

On Linux, inotify (through `inotify_simple`) with a watch on each directory the index may read from:
not the skipped ones (`.git`, `node_modules`, `.venv`, `build`...), virtual environments, those a
`.gitignore` leaves out (data and run-output folders), or the cache directory; a changed `.gitignore`
is a look at the whole tree, and the watches follow what it now lets in and leaves out. inotify
watches are a per-user budget shared with every editor and tool (8,192 on older kernels): a recursive
watch of a tree with a `node_modules` or a virtual environment inside it spends thousands on
directories whose events are dropped anyway, and can leave the user's editor unable to watch.
watchdog sets a watch on every directory of the tree, with no way to leave some out, so it
serves the other platforms (FSEvents on macOS, one handle per tree on Windows). Either way only writes,
creations, deletions and moves are asked for: with opens in the mask every directory the index's own
discovery lists raises an event, which cost each daemon call ~20 ms on Django (watchfiles cannot
leave them out). A settled batch also waits while git holds the work tree's index lock: a checkout
whose writes pause is refreshed once, when git is done. A tree it cannot watch (no inotify watches
left, no inotify) leaves the owner as it was without a watcher: it logs why and goes on.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ctx_lsp.index.discovery import SKIP_DIRS, listing_skips, skipped_dir_name
from ctx_lsp.index.git_activity import GIT_POLL_MS, GIT_WAIT_MS, GitActivity, GitHold

log = logging.getLogger(__name__)

QUIET_MS = 200  # a batch ends once no event came for this long (a checkout writes its files in a burst)
MAX_BATCH_MS = 1600  # ... or after this long, so a stream of writes still refreshes now and then
EVERYTHING = "."  # in a batch: events were lost (the kernel queue overflowed), look at the whole tree
GITIGNORE = ".gitignore"


def relevant(rel: str, accepts: Callable[[str], bool], is_dir: bool = False) -> bool:
    """Whether an event on the workspace-relative path `rel` may change the index: a file the index
    accepts, or a directory outside the skipped ones (renaming or removing one reports only it)."""
    if rel in ("", ".") or rel == ".." or rel.startswith("../"):
        return False
    parts = rel.split("/")
    if any(p in SKIP_DIRS for p in parts[:-1]):
        return False
    if is_dir:
        return not skipped_dir_name(parts[-1])
    return accepts(rel)


class TreeWatcher:
    """Watch `root` in a thread; after each settled batch of relevant events, call `on_change(rels)`
    with the batch's workspace-relative paths (sorted; a directory's path when only it was reported;
    EVERYTHING when events were lost).

    `ignore`: directories whose events never count (the cache directory when it lies inside the root).
    A settled batch waits while git holds the work tree's index lock (`index.lock`: a checkout, merge,
    reset or pull writing files), so a large checkout whose writes pause is refreshed once, when git
    is done, not part-written every MAX_BATCH_MS; after `git_wait_ms` a lock counts as stale. While
    git replays commits (a rebase, a cherry-pick or revert sequence), a stream of writes is not cut
    every MAX_BATCH_MS either, only once it pauses (or after `git_wait_ms`).
    `state()` says what it did, for `ctx-lsp daemon status` and `ctx.indexStatus`.
    """

    def __init__(self, root: Path, accepts: Callable[[str], bool], on_change: Callable[[list[str]], Any],
                 ignore: Iterable[Path] = (), quiet_ms: int = QUIET_MS, max_batch_ms: int = MAX_BATCH_MS,
                 accepts_dir: Callable[[str], bool] | None = None, git_wait_ms: int = GIT_WAIT_MS,
                 on_git: Callable[[bool], Any] | None = None) -> None:
        self.root = Path(os.path.realpath(root))
        self.accepts = accepts
        # git's index lock and the folders of a rebase, cherry-pick or revert replaying commits: found
        # by the watcher's thread when it starts (it asks git: not on the owner's event loop)
        self.git = GitActivity(None, git_wait_ms)
        # whether discovery goes into a directory (WorkspaceIndex.accepts_dir: the user's exclude globs
        # too); by default only what a `.gitignore` or a virtual environment leaves out
        self.accepts_dir = accepts_dir or (lambda rel: not listing_skips(self.root, rel, is_dir=True))
        self.on_change = on_change
        # told (from the watcher's thread, with its lock held: it must only hand over, never block)
        # when a settled batch starts and stops waiting for git
        self.on_git = on_git
        self.ignore = tuple(os.path.realpath(p) + os.sep for p in ignore)
        self.quiet_s, self.max_batch_s = quiet_ms / 1000, max_batch_ms / 1000
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._batch: set[str] = set()  # relevant paths seen since the last hand-over
        self._first = self._last = 0.0  # monotonic times of the batch's first and last event
        # dirs: directories with an inotify watch (None where watchdog watches the whole tree)
        # git_busy: a settled batch waits for git to release its index lock
        self._state: dict[str, Any] = {"watching": False, "error": None, "events": 0, "refreshes": 0,
                                       "pending": False, "last": None, "dirs": None, "git_busy": False}

    def _git_busy(self, busy: bool) -> None:
        """Set `git_busy` (the caller holds `_cond`) and tell `on_git` when it changes."""
        if self._state["git_busy"] != busy:
            self._state["git_busy"] = busy
            if self.on_git is not None:
                try:
                    self.on_git(busy)
                except Exception:  # the owner's display only: never stops the watcher
                    log.exception("on_git failed")

    def state(self) -> dict[str, Any]:
        with self._cond:
            return dict(self._state)

    def _set(self, **kw: Any) -> None:
        with self._cond:
            self._state.update(kw)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ctx-lsp-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- events (the inotify reader's or watchdog's emitter thread) ----------------------------------
    def _ignored(self, real: str) -> bool:
        """Whether the real path `real` is one of the `ignore` directories or inside one."""
        return any(real.startswith(d) or real + os.sep == d for d in self.ignore)

    def skipped_dir(self, path: str, name: str) -> bool:
        """Whether no event under the directory `path` (real) can count: a skipped directory, the cache,
        or one discovery leaves out (a run-output or data folder may hold thousands of directories)."""
        return skipped_dir_name(name) or self._ignored(path) or self._left_out(path)

    def _rel(self, path: str) -> str | None:
        try:
            return Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return None

    def _left_out(self, path: str) -> bool:
        """Whether discovery leaves the directory `path` out (`accepts_dir`: a `.gitignore` or a virtual
        environment above it, an exclude glob of the user's)."""
        rel = self._rel(path)
        return rel is not None and rel != "." and not self.accepts_dir(rel)

    def _unindexed_dir(self, path: str) -> bool:
        """Whether nothing under the directory `path` is indexed: outside the root, a skipped directory
        or in one (`relevant`), or left out by discovery."""
        rel = self._rel(path)
        if rel is None:
            return True
        return rel != "." and (not relevant(rel, self.accepts, is_dir=True) or self._left_out(path))

    def offer(self, path: str, is_dir: bool) -> None:
        """One raw event's path: kept in the batch when it may change the index."""
        if not is_dir and os.path.basename(path) == GITIGNORE:
            # what is indexed may have changed anywhere below it: the owner looks at the whole tree
            # (not for one inside a directory nothing is indexed from: `npm install` writes them by
            # the hundred in node_modules, where watchdog, unlike our inotify tree, sees them)
            folder = os.path.dirname(path)
            if not self._ignored(os.path.realpath(path)) and not self._unindexed_dir(folder):
                self._add(EVERYTHING)
            return
        if not is_dir and not path.endswith(".py"):
            return  # the index reads .py files only; a log written line by line costs nothing here
        if self._ignored(os.path.realpath(path)):
            return
        try:
            rel = Path(path).relative_to(self.root).as_posix()
        except ValueError:
            return
        if relevant(rel, self.accepts, is_dir) and not (is_dir and self._left_out(path)):
            self._add(rel)

    def _add(self, rel: str) -> None:
        now = time.monotonic()
        with self._cond:
            if not self._batch:
                self._first = now
            self._batch.add(rel)
            self._last = now
            self._state["events"] += 1
            self._cond.notify_all()

    def lost(self) -> None:
        """The kernel dropped events: the next batch stands for the whole tree."""
        self._add(EVERYTHING)

    # -- batching (this watcher's thread) ------------------------------------------------------------
    def _run(self) -> None:
        self.git = GitActivity.find(self.root, self.git.wait_ms)
        try:
            observer = _InotifyTree(self) if _use_inotify() else _observe(self)
        except Exception as exc:  # no inotify watches left, no inotify, a vanished root: serve without
            self._set(error=f"{type(exc).__name__}: {exc}")
            log.warning("not watching %s: %s", self.root, exc)
            return
        self._set(watching=True)
        log.info("watching %s for changes", self.root)
        try:
            while (batch := self._next_batch()) is not None:
                self._refresh(batch)
        finally:
            observer.stop()
            observer.join(timeout=5.0)
            self._set(watching=False)

    def _next_batch(self) -> list[str] | None:
        """Wait for events, then until they are quiet for QUIET_MS (or MAX_BATCH_MS passed) and git is
        not writing the tree (up to `git.wait_s`); None once stopped."""
        hold = GitHold(self.git)
        with self._cond:
            while True:
                if self._stop.is_set():
                    self._git_busy(False)
                    return None
                if self._batch:
                    now = time.monotonic()
                    quiet = self._last + self.quiet_s
                    due = min(quiet, self._first + self.max_batch_s)
                    if due <= now < quiet and self.git.replaying():
                        # a stream of writes is cut every max_batch_s, but not while git replays commits:
                        # a rebase rewrites the tree once per commit, and only its end (or a stop for the
                        # user: the writes pause) is worth indexing
                        due = min(quiet, self._first + self.git.wait_s)
                    if now >= due:
                        if hold.holds():
                            self._git_busy(True)
                            self._cond.wait(GIT_POLL_MS / 1000)
                            continue
                        batch, self._batch = sorted(self._batch), set()
                        self._state["pending"] = True
                        self._git_busy(False)
                        return batch
                    self._cond.wait(due - now)
                else:
                    self._cond.wait()

    def _refresh(self, rels: list[str]) -> None:
        t = time.perf_counter()
        try:
            changed = self.on_change(rels)
        except Exception as exc:  # the next request refreshes (and reports) on its own
            log.exception("refresh after changes on disk failed")
            self._set(pending=False, error=f"{type(exc).__name__}: {exc}")
            return
        n = len(changed) if isinstance(changed, list) else None
        with self._cond:
            self._state["refreshes"] += 1
            self._state["pending"] = False
            self._state["last"] = {"at": round(time.time(), 3), "seconds": round(time.perf_counter() - t, 3),
                                   "paths": len(rels), "changed": n}


def _observe(watcher: TreeWatcher) -> Any:
    """A started watchdog observer feeding `watcher`: recursive, asked only for the events that can
    change a file's content or place (not opens or reads: discovery would raise one per directory)."""
    from watchdog import events as ev
    from watchdog.observers import Observer

    wanted = [ev.FileCreatedEvent, ev.FileModifiedEvent, ev.FileDeletedEvent, ev.FileMovedEvent,
              ev.FileClosedEvent, ev.DirCreatedEvent, ev.DirDeletedEvent, ev.DirMovedEvent]
    lost_type = getattr(ev, "EventsLostEvent", None)  # watchdog >= 6 (an overflowed kernel queue)
    if lost_type is not None:
        wanted.append(lost_type)

    class Handler(ev.FileSystemEventHandler):
        def on_any_event(self, event: Any) -> None:
            if lost_type is not None and isinstance(event, lost_type):
                watcher.lost()
                return
            for path in (event.src_path, getattr(event, "dest_path", "")):
                if path:
                    watcher.offer(os.fsdecode(path), bool(event.is_directory))

    observer = Observer()
    observer.daemon = True
    try:
        observer.schedule(Handler(), str(watcher.root), recursive=True, event_filter=wanted)
        observer.start()  # the watches are set when it returns
    except BaseException:
        observer.stop()  # give back the inotify instance and the watches set before the failure
        raise
    return observer


def _use_inotify() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import inotify_simple  # noqa: F401
    except ImportError:  # installed without it (the dependency is Linux-only): watchdog watches everything
        return False
    return True


class _InotifyTree:
    """inotify watches on the directories of `watcher.root` whose events may count, kept in step as
    directories come and go, read in a thread that hands each event's path to `watcher.offer`.

    A directory created or moved in is watched (and reported, for the files written in it before its
    watch was set); one deleted or moved out is reported and its watches dropped; an overflowed queue
    is `watcher.lost()`. Raises OSError when the tree cannot be watched whole (no watches left)."""

    def __init__(self, watcher: TreeWatcher) -> None:
        from inotify_simple import INotify, flags

        self.watcher, self.flags = watcher, flags
        self.mask = (flags.CREATE | flags.DELETE | flags.MODIFY | flags.CLOSE_WRITE | flags.MOVED_FROM
                     | flags.MOVED_TO | flags.ONLYDIR | flags.DONT_FOLLOW | flags.EXCL_UNLINK)
        self.root = str(watcher.root)
        self.paths: dict[int, str] = {}  # watch descriptor -> its directory
        self.wds: dict[str, int] = {}  # directory -> watch descriptor
        self.inotify = INotify()
        try:
            self._add_tree(self.root, initial=True)
        except BaseException:
            self.inotify.close()  # gives back the instance and every watch set before the failure
            raise
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="ctx-lsp-inotify", daemon=True)
        self._thread.start()

    def _add_tree(self, top: str, initial: bool = False) -> None:
        if initial:
            self._add(top, initial)  # os.walk says nothing of a root it cannot list
        for d, dirs, files in os.walk(top):  # symlinked directories are not followed
            if "pyvenv.cfg" in files and d != self.root:
                dirs[:] = []  # a virtual environment: discovery lists nothing in it
                continue
            if not self._add(d, initial):
                dirs[:] = []
                continue
            dirs[:] = [x for x in dirs if not self.watcher.skipped_dir(os.path.join(d, x), x)]
        self.watcher._set(dirs=len(self.wds))

    def _add(self, d: str, initial: bool) -> bool:
        try:
            wd = self.inotify.add_watch(d, self.mask)
        except OSError as exc:
            if d == self.root:
                raise  # a missing or unreadable root: no watcher at all
            if exc.errno not in (errno.ENOSPC, errno.EMFILE):
                return False  # gone meanwhile, not a directory, not readable: nothing to watch there
            msg = f"no inotify watches left at {len(self.wds)} directories (fs.inotify.max_user_watches)"
            if initial:
                raise OSError(exc.errno, msg) from None
            log.warning("%s: %s is not watched", msg, d)
            self.watcher._set(error=msg)
            return False
        old = self.paths.get(wd)
        if old is not None and old != d:
            self.wds.pop(old, None)
        self.paths[wd], self.wds[d] = d, wd
        return True

    def _rescan(self, top: str) -> None:
        """A `.gitignore` in `top` changed: stop watching the directories under it that it now leaves
        out, and watch those it now lets in. (A file being rewritten can be read half-written, empty
        say: the event its last write raises puts the watches right.)"""
        inside = top + os.sep
        for d in [d for d in self.wds if d.startswith(inside)]:
            if d in self.wds and self.watcher.skipped_dir(d, os.path.basename(d)):
                self._drop_tree(d)
        self._add_tree(top)

    def _drop_tree(self, top: str) -> None:
        """Stop watching `top` and the directories under it (deleted or moved: a moved directory's
        watches would go on under its old path)."""
        inside = top + os.sep
        for d in [d for d in self.wds if d == top or d.startswith(inside)]:
            wd = self.wds.pop(d)
            self.paths.pop(wd, None)
            try:
                self.inotify.rm_watch(wd)
            except OSError:  # already gone with its directory
                pass
        self.watcher._set(dirs=len(self.wds))

    def _read(self) -> None:
        try:
            while not self._stop.is_set():
                for event in self.inotify.read(timeout=200):
                    self._event(event)
        except Exception as exc:  # never silently: the owner's state says the watcher stopped
            if not self._stop.is_set():
                log.exception("reading inotify events of %s failed", self.root)
                self.watcher._set(watching=False, error=f"{type(exc).__name__}: {exc}")
                self.watcher.lost()  # the owner looks at the whole tree once more

    def _event(self, event: Any) -> None:
        f = self.flags
        if event.mask & f.Q_OVERFLOW:
            # the creations of directories may be among what was dropped: watch whatever is new, or a
            # directory made in the overflow would go unwatched until the next start
            self._add_tree(self.root)
            self.watcher.lost()
            return
        d = self.paths.get(event.wd)
        if event.mask & f.IGNORED:  # the kernel removed the watch (its directory is gone)
            self.paths.pop(event.wd, None)
            if d is not None and self.wds.get(d) == event.wd:
                del self.wds[d]
            return
        if d is None or not event.name:
            return
        path = os.path.join(d, event.name)
        is_dir = bool(event.mask & f.ISDIR)
        if event.name == "pyvenv.cfg" and d != self.root and event.mask & (f.CREATE | f.MOVED_TO):
            self._drop_tree(d)  # a virtual environment being made: what pip installs there never counts
            return
        if event.name == GITIGNORE and not is_dir:
            self._rescan(d)
        if is_dir:
            if event.mask & (f.DELETE | f.MOVED_FROM):
                self._drop_tree(path)
            elif event.mask & (f.CREATE | f.MOVED_TO) and not self.watcher.skipped_dir(path, event.name):
                self._add_tree(path)
        self.watcher.offer(path, is_dir)

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.inotify.close()
