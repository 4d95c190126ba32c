"""The ctx-lsp language server: lifecycle, settings, background indexing with progress, document sync.

Handlers are thin: they locate the workspace folder of a URI, run one engine call in a worker thread
(`query`) under that folder's lock, and convert the answer with `convert.Positions`. Editor changes
are recorded as pending on the event loop and folded into the graph by the next query (or after a
short debounce), so a query sent after didChange always sees the edit.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import attrs
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError
from pygls.lsp.server import LanguageServer
from pygls.protocol.language_server import lsp_method

from ctx_lsp import __version__
from ctx_lsp.engine import Engine, collect_dropped
from ctx_lsp.index.git_activity import GIT_POLL_MS, GitActivity, GitHold
from ctx_lsp.server.convert import Positions, path_to_uri, rel_in, uri_problem, uri_to_path
from ctx_lsp.server.embedding import schedule_embedding, start_embedding
from ctx_lsp.server.folders import (
    BUFFER,
    CANCELLED,
    DISK,
    FAILED,
    INDEXING,
    PROGRESS_REFUSED,
    PROGRESS_STARTING,
    READY,
    IndexingCancelled,
    Root,
    make_engine,
    source_of,
)
from ctx_lsp.server.jsonrpc import ConformantProtocol
from ctx_lsp.server.options import Options, parse_options
from ctx_lsp.server.params import invalid

log = logging.getLogger("ctx_lsp.server")
RELEASE_TRIES, RELEASE_WAIT_S = 3, 0.5  # collections of a removed folder, while work on it still ends
T = TypeVar("T")

CUSTOM_REQUESTS = ("ctx/getContext", "ctx/contextAtCursor")
INDEX_UPDATED = "ctx/indexUpdated"
UPDATE_NOTIFY_DELAY = 0.5  # seconds: ctx/indexUpdated goes out at once, then at most this often
REFINE_DELAY = 1.0  # seconds without edits before jedi re-refines the changed files
# seconds without changes or requests before a refresh's deferred cache write: off Linux it holds the
# folder's lock (1.7 s after a Django checkout, its lexical snapshot included); on Linux a forked child
# writes, which still takes a core for that long: either way it waits for the user to pause
SAVE_DELAY = 5.0


@attrs.define
class RawRequest:
    """A custom request whose params reach the handler as plain JSON (validated by params.py)."""

    id: Any
    method: str
    params: Any = None
    jsonrpc: str = "2.0"


class CtxProtocol(ConformantProtocol):
    def get_message_type(self, method: str) -> type[Any] | None:  # type: ignore[override]
        if method in CUSTOM_REQUESTS:
            return RawRequest
        return super().get_message_type(method)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams):  # type: ignore[no-untyped-def]
        result = yield from super().lsp_initialize(params)
        # pygls does not list custom methods; advertise them as rust-analyzer does
        result.capabilities.experimental = {
            "ctxRequests": list(CUSTOM_REQUESTS),
            "ctxNotifications": [INDEX_UPDATED],
        }
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args):  # type: ignore[no-untyped-def]
        # pygls 2.1 cancels in-flight requests while iterating the dict their callbacks pop from
        # ("dictionary changed size during iteration" answered to `shutdown`): iterate a copy.
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None


@dataclass
class Ctx:
    """What an engine call sees: the folder, its engine (lock held), positions over one buffer snapshot."""

    root: Root
    engine: Engine
    pos: Positions
    checkpoint: Callable[[], None]

    def uri(self, rel: str) -> str:
        return path_to_uri(self.root.path / rel)

    def abspath(self, rel: str) -> Path:
        return self.root.path / rel


class RequestCancelled(Exception):
    """Raised by a checkpoint when the client cancelled the request."""


def _no_checkpoint() -> None:
    return None


class CtxLanguageServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(name="ctx-lsp", version=__version__, protocol_cls=CtxProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.options = Options()
        self.init_options: Any = None
        self._warned: set[str] = set()  # the settings warnings shown last (apply_settings)
        self.watch_parent: Callable[[int], Any] | None = None  # serve.watch_parent: leave when the client is gone
        self.roots: list[Root] = []
        self.tasks: set[asyncio.Task[Any]] = set()
        self._flush_handles: dict[str, asyncio.TimerHandle] = {}
        self._updated_handle: asyncio.TimerHandle | None = None
        self._last_notified = -UPDATE_NOTIFY_DELAY  # loop time of the last ctx/indexUpdated
        # set once `initialized` has created the folders: requests wait for it rather than see no folders
        self.setup_done = asyncio.Event()
        # True when the client cannot send workspace/didChangeWatchedFiles (no dynamic registration):
        # then each folder is watched here (`watch_folder`), so changes made outside the editor arrive
        self.watch_disk = False
        # fault injection for the robustness tests: a method name whose handler raises
        self.fault = os.environ.get("CTX_LSP_TEST_FAULT", "")
        # slows each retrieval checkpoint so the tests can cancel a request mid-way
        self.checkpoint_delay = float(os.environ.get("CTX_LSP_TEST_CHECKPOINT_DELAY_MS", "0") or 0) / 1000

    protocol: CtxProtocol

    def report_server_error(self, error: Exception, source: Any) -> None:
        # pygls' read loop reports a body it could not parse here (source JsonRpcException), answering nothing
        if source is JsonRpcException and self.protocol.answer_unparsable(error):
            return
        super().report_server_error(error, source)

    # -- small helpers --------------------------------------------------------------------------
    @property
    def encoding(self) -> str:
        enc = self.workspace.position_encoding
        return str(getattr(enc, "value", enc) or "utf-16")

    def spawn(self, coro: Awaitable[T]) -> asyncio.Task[T]:
        """Run a background coroutine; its exception is logged, never lost."""
        task: asyncio.Task[T] = asyncio.ensure_future(coro)
        self.tasks.add(task)

        def done(t: asyncio.Task[T]) -> None:
            self.tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("background task failed", exc_info=t.exception())
                self.log_message(f"ctx-lsp: background task failed: {t.exception()!r}", types.MessageType.Error)

        task.add_done_callback(done)
        return task

    def end_progress(self, token: str, message: str) -> None:
        """End a work-done progress and forget its token: pygls keeps every token's cancel future
        (and the callbacks on it, which hold a folder's whole index) until told otherwise."""
        self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
        self.work_done_progress.tokens.pop(token, None)

    def log_message(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        log.log(logging.ERROR if kind == types.MessageType.Error else logging.INFO, "%s", message)
        try:
            self.window_log_message(types.LogMessageParams(type=kind, message=message))
        except Exception:  # no client yet (before initialize) or the pipe is gone
            pass

    def show_warning(self, message: str) -> None:
        log.warning("%s", message)
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))

    # -- locating files -------------------------------------------------------------------------
    def find(self, uri: str) -> tuple[Root, str] | None:
        """(folder, workspace-relative path) of a URI, innermost folder first; None when outside all."""
        path = uri_to_path(uri)
        if path is None:
            return None
        for candidate in (path, path.resolve()):  # a folder opened through a symlink
            for root in sorted(self.roots, key=lambda r: len(r.path.parts), reverse=True):
                rel = rel_in(root.path, candidate)
                if rel is not None:
                    return root, rel
        return None

    def locate(self, uri: str, field: str = "uri") -> tuple[Root, str]:
        """Like `find` but refuses a URI outside the workspace folders (InvalidParams)."""
        got = self.find(uri)
        if got is None:
            if (problem := uri_problem(uri)) is not None:
                raise invalid(f"field '{field}': {problem}")
            if not self.roots:
                raise invalid(f"field '{field}': no workspace folder is open")
            raise invalid(f"field '{field}': {uri} is outside the workspace folders")
        return got

    def root_of_data(self, data: Any) -> Root | None:
        if isinstance(data, dict):
            for r in self.roots:
                if str(r.path) == data.get("root"):
                    return r
        return None

    def buffers(self) -> dict[Path, str]:
        """A snapshot of the open editor buffers (taken on the event loop)."""
        out: dict[Path, str] = {}
        for uri, doc in self.workspace.text_documents.items():
            p = uri_to_path(uri)
            if p is not None:
                out[p] = doc.source
        return out

    # -- running engine work --------------------------------------------------------------------
    def _take_changes(self, root: Root) -> None:
        """Move the folder's pending changes, buffer text snapshotted now, to its backlog.

        Runs on the event loop, in message order; the backlog is drained in order by whichever worker
        takes the folder's lock next, so every request sent after an edit sees it.
        """
        if root.indexing:
            return  # folded in when indexing ends: never mutate the index mid-build
        if not root.pending and not root.notes:
            return
        # while git writes the tree, changes on disk wait (flush looks again) and the index answers as it
        # was before the checkout, not from a half-written tree; editor buffers go in as always
        hold = root.held_for_git()
        docs = {uri_to_path(u): d for u, d in self.workspace.text_documents.items()}
        changes: list[tuple[str, str, str | None]] = []
        for rel, source in list(root.pending.items()):
            if hold and source == DISK:
                continue
            doc = docs.get(root.path / rel) if source == BUFFER else None
            changes.append((rel, BUFFER, doc.source) if doc is not None else (rel, DISK, None))
            del root.pending[rel]
        notes, root.notes = root.notes, []
        root.enqueue(changes, notes)

    async def query(self, root: Root, fn: Callable[[Ctx], T], checkpoint: Callable[[], None] | None = None) -> T:
        """Run `fn` in a worker thread with the folder's lock held, after folding in pending edits."""
        self._take_changes(root)
        pos = Positions(self.encoding, self.buffers(), root.path)

        def work() -> tuple[int, bool, T]:
            with root.reading() as engine:
                before = root.updates
                applied = 0 if root.indexing else root.drain()  # never mutate the index mid-build
                return applied, root.updates != before, fn(Ctx(root, engine, pos, checkpoint or _no_checkpoint))

        applied, told, result = await asyncio.to_thread(work)
        if applied:
            if not told:  # the index listener already scheduled ctx/indexUpdated for an update it saw:
                # a second one would go out up to UPDATE_NOTIFY_DELAY later, for nothing new
                self.schedule_index_updated()
            self.schedule_refinement(root)
            schedule_embedding(self, root)
        self.save_later(root)
        return result

    def save_later(self, root: Root) -> None:
        """Write the cache a refresh left pending (`WorkspaceIndex.defer_save`) once changes and requests
        pause (each one puts it off again; shutdown writes what is still pending): the request that found
        a checkout, and those that follow it, are answered without waiting for the write."""
        if root.engine.index.pending_save:
            self.debounce("save:" + str(root.path), SAVE_DELAY, lambda: self.spawn(self.save_pending(root)))

    async def save_pending(self, root: Root) -> None:
        def write() -> None:
            with root.reading() as engine:
                if not root.indexing:
                    engine.index.save_pending()

        await asyncio.to_thread(write)

    def schedule_refinement(self, root: Root) -> None:
        """Re-refine changed files once edits pause (jedi is too slow to run on every keystroke)."""
        if not self.options.jedi_refinement:
            return
        self.debounce("refine:" + str(root.path), REFINE_DELAY, lambda: self.start_refinement(root))

    def debounce(self, key: str, delay: float, action: Callable[[], object]) -> None:
        """Run `action` after `delay` seconds without another call for the same key."""
        handle = self._flush_handles.pop(key, None)
        if handle is not None:
            handle.cancel()

        def fire() -> None:
            # forgotten once fired: a fired handle keeps its callback, and with it the folder
            if self._flush_handles.get(key) is handle_now:
                del self._flush_handles[key]
            action()

        handle_now = self._flush_handles[key] = asyncio.get_running_loop().call_later(delay, fire)

    def cancel_debounced(self, root: Root) -> None:
        """Drop a folder's pending debounced work (it is being removed)."""
        for key in (str(root.path), "save:" + str(root.path)):
            handle = self._flush_handles.pop(key, None)
            if handle is not None:
                handle.cancel()

    async def flush(self, root: Root) -> None:
        if root.git is None:  # asks git once where its directory is: a subprocess, off the loop
            root.git = GitHold(await asyncio.to_thread(GitActivity.find, root.path))
        held = root.held_for_git()  # then only buffers and notes have anything to fold in
        if root.notes or root.backlog_size() or any(not held or s == BUFFER for s in root.pending.values()):
            await self.query(root, lambda ctx: None)
        if not root.indexing and root.held_for_git():  # indexing folds them in when it ends
            self.debounce(str(root.path), GIT_POLL_MS / 1000, lambda: self.spawn(self.flush(root)))
        await self.show_git_wait(root)

    async def show_git_wait(self, root: Root) -> None:
        """While changes on disk wait for git, a work-done progress says so (VS Code's status bar,
        Neovim's LspProgress): answers meanwhile come from the graph as it was before the checkout.
        Looked at by every flush (they run again until held changes are applied, and after indexing)
        and whenever the server's own watcher starts or stops waiting."""
        waiting = not root.indexing and root.waits_for_git()
        if waiting and root.git_progress is None:
            window = self.client_capabilities.window
            if window is None or not window.work_done_progress:
                return
            token = f"ctx-lsp-git-{uuid.uuid4().hex[:8]}"
            root.git_progress = PROGRESS_STARTING  # a flush meanwhile neither starts nor ends another
            try:
                await self.work_done_progress.create_async(token)
                self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                    title="ctx-lsp: waiting for git", cancellable=False,
                    message=f"{root.name}: changes on disk go in once git is done writing the tree"))
            except Exception as exc:  # the client refused the token: wait without showing it
                log.warning("progress token refused: %s", exc)
                root.git_progress = PROGRESS_REFUSED
                return
            root.git_progress = token
            waiting = not root.indexing and root.waits_for_git()  # git may be done by now
        if not waiting and root.git_progress not in (None, PROGRESS_STARTING):
            token, root.git_progress = root.git_progress, None
            if token != PROGRESS_REFUSED:
                self.end_progress(token, f"{root.name}: no longer waiting for git")

    def schedule_flush(self, root: Root) -> None:
        self.debounce(str(root.path), self.options.debounce_ms / 1000, lambda: self.spawn(self.flush(root)))

    # -- changes on disk -------------------------------------------------------------------------
    def watch_folder(self, root: Root) -> None:
        """Watch the folder for changes made outside the editor, when the client does not (`watch_disk`)."""
        if not self.watch_disk or root.watcher is not None:
            return
        from ctx_lsp.index.watch import TreeWatcher

        loop = asyncio.get_running_loop()

        def on_change(rels: list[str]) -> None:  # the watcher's thread: hand the batch to the loop
            loop.call_soon_threadsafe(self.disk_changed, root, rels)

        # through root.engine: a re-index (changed settings) replaces the engine; reindex restarts this
        def on_git(_busy: bool) -> None:  # the watcher's thread: the progress is shown from the loop
            loop.call_soon_threadsafe(lambda: self.spawn(self.show_git_wait(root)))

        root.watcher = TreeWatcher(root.path, lambda rel: root.engine.index.accepts(rel), on_change,
                                   ignore=[root.engine.index.cache_dir],
                                   accepts_dir=lambda rel: root.engine.index.accepts_dir(rel), on_git=on_git)
        root.watcher.start()

    def disk_changed(self, root: Root, rels: list[str]) -> None:
        """A settled batch from the folder's watcher: each path not open in the editor (the buffer wins)
        is read again from the disk; a directory is expanded when the batch is applied (Root.apply)."""
        if root not in self.roots:
            return
        opened = {rel_in(root.path, p) for u in self.workspace.text_documents if (p := uri_to_path(u)) is not None}
        for rel in rels:
            if rel not in opened:
                root.pending[rel] = DISK
        self.spawn(self.flush(root))  # already settled by the watcher: no debounce on top

    def stop_watching(self, root: Root) -> None:
        if root.watcher is not None:
            root.watcher.stop(timeout=0)  # on the event loop: ask it to stop, never wait for it here
            root.watcher = None

    # -- ctx/indexUpdated -----------------------------------------------------------------------
    def schedule_index_updated(self) -> None:
        if self._updated_handle is not None:
            return
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._updated_handle = None
            self._last_notified = loop.time()
            self.spawn(self.notify_index_updated())

        # the first update after a quiet spell is told at once; a stream of them at most every 0.5 s
        self._updated_handle = loop.call_later(max(0.0, self._last_notified + UPDATE_NOTIFY_DELAY - loop.time()), fire)

    async def notify_index_updated(self) -> None:
        status = await self.index_status()
        self.protocol.notify(INDEX_UPDATED, status)

    async def index_status(self) -> dict[str, Any]:
        """The ctx.indexStatus object, summed over the workspace folders (docs/protocol.md)."""
        folders: list[dict[str, Any]] = []
        busy = False
        for root in list(self.roots):
            before, was_indexing = root.state, root.indexing
            st = await self.query(root, lambda ctx: {**ctx.engine.status(),
                                                            "refinement": self.refinement_status(ctx.root),
                                                            "dense": ctx.engine.retriever.dense_status()})
            st = dict(st)
            # a folder whose build was running when its counts were taken reports that build, even if it
            # has finished since: "not indexing" must never come with a partial folder's counts
            state = before if was_indexing else root.state
            busy = busy or was_indexing or root.indexing
            st.update({"name": root.name, "uri": root.uri, "state": state, "error": root.error,
                       # the server's own file watcher runs (only for clients that cannot watch files)
                       "watching": bool(root.watcher is not None and root.watcher.state()["watching"]),
                       # changes on disk wait while git writes the tree (a checkout, merge, reset, pull):
                       # the client's reported ones here, or a batch in the server's own watcher
                       "git_busy": root.waits_for_git()})
            folders.append(st)
        edges: dict[str, int] = {}
        for f in folders:
            for k, v in (f.get("edges") or {}).items():
                edges[k] = edges.get(k, 0) + v
        multi = len(folders) > 1
        dirty = [f"{f['name']}/{p}" if multi else p for f in folders for p in f.get("dirty_files", [])]
        refinement = {"done": 0, "total": 0}
        for f in folders:
            r = f.get("refinement")
            if isinstance(r, dict):
                refinement["done"] += int(r.get("done") or 0)
                refinement["total"] += int(r.get("total") or 0)
        updates = [f["last_update"] for f in folders if f.get("last_update")]
        indexing = busy or any(r.indexing for r in self.roots)
        return {
            "roots": [f["root"] for f in folders],
            "files": sum(f.get("files", 0) for f in folders),
            "nodes": sum(f.get("nodes", 0) for f in folders),
            "edges": edges,
            "dirty_files": dirty,
            "stale": indexing or any(r.state in (CANCELLED, FAILED) for r in self.roots),
            "indexing": indexing,
            "refinement": refinement,
            "last_update": max(updates) if updates else None,
            "folders": [{k: f.get(k) for k in ("name", "uri", "root", "state", "error", "files", "nodes", "dense", "watching",
                                                 "git_busy")}
                        for f in folders],
        }

    # -- workspace folders and indexing ---------------------------------------------------------
    def add_root(self, uri: str, name: str | None = None) -> Root | None:
        path = uri_to_path(uri)
        if path is None or not path.is_dir():
            self.log_message(f"ctx-lsp: ignoring workspace folder {uri} (not a local directory)",
                             types.MessageType.Warning)
            return None
        path = path.resolve()
        if any(r.path == path for r in self.roots):
            return None
        root = Root(name or path.name, path, path_to_uri(path), make_engine(self.options, path))
        root.engine.index.listeners.append(self._listener(root))
        self.roots.append(root)
        self._check_cache_dir(root)
        return root

    def _check_cache_dir(self, root: Root) -> None:
        """Say at once when the cache directory cannot be made (a `cacheDir` setting under a file or
        /proc, a read-only mount): the folder is indexed in memory and every start indexes it again."""
        cache = root.engine.index.cache_dir
        try:
            cache.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.show_warning(f"ctx-lsp: cannot use the cache directory {cache}: {exc.strerror or exc}; "
                              f"{root.name} is indexed in memory only (check the cacheDir setting)")

    def _listener(self, root: Root) -> Callable[[set[str]], None]:
        loop = asyncio.get_running_loop()

        def changed(paths: set[str]) -> None:  # called in worker threads after every index update
            root.updates += 1  # under the engine lock: one updater at a time
            loop.call_soon_threadsafe(self.schedule_index_updated)

        return changed

    def start_indexing(self, root: Root) -> asyncio.Task[None]:
        root.task = self.spawn(self._index(root))
        return root.task

    async def _index(self, root: Root) -> None:
        loop = asyncio.get_running_loop()
        root.state = INDEXING
        token: str | None = None
        window = self.client_capabilities.window
        if window is not None and window.work_done_progress:
            token = f"ctx-lsp-index-{uuid.uuid4().hex[:8]}"
            try:
                await self.work_done_progress.create_async(token)
                self.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                    title="ctx-lsp: indexing", message=root.name, percentage=0, cancellable=True))
                fut = self.work_done_progress.tokens.get(token)
                if fut is not None:
                    fut.add_done_callback(lambda f: root.cancel.set() if f.cancelled() else None)
            except Exception as exc:  # the client refused the token: index without progress
                log.warning("progress token refused: %s", exc)
                token = None
        cancel = root.cancel
        engine = root.engine
        progress = _IndexProgress(self, root, token, loop)
        t0 = time.perf_counter()
        try:
            await asyncio.to_thread(_build, engine, progress)
            if engine is root.engine:
                root.state = READY
            message = f"{root.name}: indexed {len(engine.index.facts)} files in {time.perf_counter() - t0:.2f} s"
        except IndexingCancelled:
            root.state = CANCELLED if engine is root.engine else root.state
            message = f"{root.name}: indexing cancelled; answers come from a partial index (run ctx.reindex)"
        except Exception as exc:
            log.exception("indexing %s failed", root.path)
            if engine is root.engine:
                root.state, root.error = FAILED, f"{type(exc).__name__}: {exc}"
            message = f"{root.name}: indexing failed: {exc!r}"
        if token is not None:
            self.end_progress(token, message)
        self.log_message(f"ctx-lsp: {message}",
                         types.MessageType.Warning if root.state in (CANCELLED, FAILED) else types.MessageType.Info)
        if cancel.is_set() and engine is not root.engine:
            return  # superseded by a reindex
        await self.flush(root)
        await self.notify_index_updated()
        if root.state == READY:
            await self.warm_lexical(root)
            self.start_refinement(root)
            start_embedding(self, root)

    async def warm_lexical(self, root: Root) -> None:
        """Start the lexical indexes now (after a cold build the cache writer, a forked child on Linux,
        built its own: ~1.5 s on Django that the first query would pay), not on the first request."""
        def warm() -> None:
            with root.reading() as engine:
                engine.retriever.sync()

        try:
            await asyncio.to_thread(warm)
        except Exception:  # the first query builds them instead
            log.exception("starting the lexical indexes of %s failed", root.path)

    # -- jedi refinement (background, after indexing and after edits) --------------------------------
    def start_refinement(self, root: Root) -> None:
        if not self.options.jedi_refinement or root.state != READY:
            return
        if root.refine_task is not None and not root.refine_task.done():
            root.refine_again = True  # files changed while it ran: one more pass afterwards
            return
        root.refine_task = self.spawn(self._refine(root))

    async def _refine(self, root: Root) -> None:
        from ctx_lsp.index.refine import attach_refiner

        engine = root.engine
        cancel = root.cancel
        if root.refiner is None:
            root.refiner = await asyncio.to_thread(
                lambda: attach_refiner(engine.index, lock=engine.lock, sources=source_of(root)))
        refiner = root.refiner
        while True:
            root.refine_again = False
            opened = [rel for _, rel in (self.find(u) or (None, None) for u in self.workspace.text_documents) if rel]
            result = await asyncio.to_thread(refiner.run, opened, None, cancel.is_set)
            if engine is not root.engine or cancel.is_set():
                return
            if result.get("files_refined"):
                self.schedule_index_updated()
                self.save_later(root)  # the refinement's write, left pending (defer_save)
            if not root.refine_again:
                return

    def refinement_status(self, root: Root) -> dict[str, int] | None:
        refiner = root.refiner
        if refiner is None:
            return None
        st = refiner.status()
        return {"done": int(st.get("done", 0)), "total": int(st.get("total", 0))}

    async def release(self, root: Root, watcher: Any) -> None:
        """Free a removed folder's index once the work it was doing has stopped (its tasks, and
        `watcher`, the folder's TreeWatcher told to stop, or None: its thread holds the folder until it ends)."""
        running = [t for t in (root.task, root.refine_task, root.embed_task) if t is not None and not t.done()]
        if running:
            await asyncio.wait(running)  # ended, cancelled or failed: none holds the index any more
        if watcher is not None:
            await asyncio.to_thread(watcher.stop)  # joins its thread (it was told to stop already)
            del watcher
        self.cancel_debounced(root)  # a flush or a save its watcher or an edit scheduled
        gone, name = weakref.ref(root.engine.index), root.name
        del root
        for _ in range(RELEASE_TRIES - 1):
            if self.free(gone, f"removed folder {name}", quiet=True):
                return
            await asyncio.sleep(RELEASE_WAIT_S)  # a flush or a request on it still running: let it end
        self.free(gone, f"removed folder {name}")

    def free(self, gone: weakref.ref[Any], what: str, quiet: bool = False) -> bool:
        """Collect a dropped index (`collect_dropped`), say whether it is gone (unless `quiet` and it
        is not) and return that."""
        seconds = collect_dropped()
        if gone() is None:
            self.log_message(f"ctx-lsp: freed the index of {what} ({seconds:.2f} s)")
            return True
        if not quiet:  # a request still reading it: frozen again, freed by the next collect_dropped
            self.log_message(f"ctx-lsp: the index of {what} is still in use ({seconds:.2f} s)")
        return False

    async def reindex(self, roots: list[Root] | None = None, *, drop_cache: bool = True) -> None:
        """Rebuild folders from disk (dropping their cache) and re-apply the open buffers."""
        for root in roots or list(self.roots):
            root.cancel.set()  # stops a running indexing and jedi refinement at their next step
            for task in (root.task, root.refine_task, root.embed_task):
                if task is not None and not task.done():
                    try:
                        await task
                    except Exception:
                        pass
            old = root.engine
            with old.lock:
                if drop_cache:
                    old.index.store.path.unlink(missing_ok=True)  # inside the cache directory
            gone = weakref.ref(old.index)
            del old
            root.set_engine(make_engine(self.options, root.path))
            self.free(gone, f"{root.name} before the rebuild")
            root.engine.index.listeners.append(self._listener(root))
            if root.watcher is not None:  # its watches follow the new exclude globs and cache directory
                self.stop_watching(root)
                self.watch_folder(root)
            for uri in self.workspace.text_documents:
                p = uri_to_path(uri)
                rel = rel_in(root.path, p) if p is not None else None
                if rel is not None and root.engine.index.accepts(rel):
                    root.pending[rel] = BUFFER
            await self.start_indexing(root)

    # -- settings -------------------------------------------------------------------------------
    async def pull_configuration(self) -> Any:
        ws = self.client_capabilities.workspace
        if ws is None or not ws.configuration:
            return None
        try:
            got = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="ctx")]))
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", exc)
            return None
        return got[0] if got else None

    def apply_settings(self, *layers: Any) -> Options:
        """Options from the layers (initializationOptions, then the `ctx` section). Each invalid value
        is shown once: a settings change re-reads the unchanged initializationOptions too, and Neovim
        sends one right after `initialized`; a value fixed and broken again is shown again."""
        opts = Options()
        now: list[str] = []
        for layer in layers:
            opts, warnings = parse_options(layer, opts)
            now.extend(w for w in warnings if w not in now)
        for w in now:
            if w not in self._warned:
                self.show_warning(w)
        self._warned = set(now)
        return opts


def _build(engine: Engine, progress: Any) -> None:
    """Open the engine; its answers say `stale` until the build is complete."""
    mark = getattr(engine, "set_stale", None)
    if mark is not None:
        mark(True)
    engine.open(progress)
    if mark is not None:
        mark(False)


class _IndexProgress:
    """The progress callback the indexing thread calls between batches."""

    STAGES = {"loading cache": (0, 5), "parsing": (5, 60), "binding": (65, 35)}

    def __init__(self, ls: CtxLanguageServer, root: Root, token: str | None, loop: asyncio.AbstractEventLoop) -> None:
        self.ls, self.root, self.token, self.loop = ls, root, token, loop
        self.cancel = root.cancel
        self.last = 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.cancel.is_set():
            raise IndexingCancelled()
        now = time.monotonic()
        if self.token is not None and (now - self.last >= 0.1 or done >= total):
            self.last = now
            base, span = self.STAGES.get(stage, (0, 100))
            pct = int(base + span * (done / total if total else 1))
            report = types.WorkDoneProgressReport(message=f"{self.root.name}: {stage} {done}/{total}",
                                                  percentage=min(pct, 100), cancellable=True)
            self.loop.call_soon_threadsafe(self.ls.work_done_progress.report, self.token, report)
        self.root.yield_to_readers()


# -- handler wrapper ------------------------------------------------------------------------------
def guarded(method: str) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[T]]]:
    """An unexpected exception in a handler is logged and answered as an error; the server keeps serving."""

    def deco(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(fn)
        async def wrapper(ls: CtxLanguageServer, *args: Any) -> T:
            try:
                await ls.setup_done.wait()
                if ls.fault == method:
                    raise RuntimeError(f"injected fault in {method} (CTX_LSP_TEST_FAULT)")
                return await fn(ls, *args)
            except (JsonRpcException, asyncio.CancelledError):
                raise
            except RequestCancelled:
                raise asyncio.CancelledError() from None
            except Exception as exc:
                log.exception("%s failed", method)
                ls.log_message(f"ctx-lsp: {method} failed: {type(exc).__name__}: {exc}", types.MessageType.Error)
                raise JsonRpcInternalError(message=f"{method} failed: {type(exc).__name__}: {exc}") from exc

        return wrapper

    return deco


def make_checkpoint(ls: CtxLanguageServer, cancelled: threading.Event, method: str) -> Callable[[], None]:
    """The retrieval checkpoint of one request: raises once the request was cancelled."""
    loop = asyncio.get_running_loop()
    stages = [0]

    def checkpoint() -> None:
        if ls.checkpoint_delay:
            time.sleep(ls.checkpoint_delay)
        if cancelled.is_set():
            message = f"ctx-lsp: {method} cancelled; retrieval stopped after {stages[0]} stage(s)"
            loop.call_soon_threadsafe(ls.log_message, message)
            raise RequestCancelled()
        stages[0] += 1

    return checkpoint
