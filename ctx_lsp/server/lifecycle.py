"""Lifecycle and synchronisation handlers: initialize, settings, workspace folders, document sync,
watched files, shutdown."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types

from ctx_lsp.server.convert import uri_to_path
from ctx_lsp.server.folders import BUFFER, DISK, Root
from ctx_lsp.server.server import CtxLanguageServer

log = logging.getLogger("ctx_lsp.server")
SHUTDOWN_GRACE_S = 2.0  # how long shutdown waits for background work to notice it should stop


def register(server: CtxLanguageServer) -> None:
    @server.feature(types.INITIALIZE)
    def initialize(ls: CtxLanguageServer, params: types.InitializeParams) -> None:
        ls.init_options = params.initialization_options  # validated with the `ctx` settings on initialized
        if params.process_id is not None and params.process_id > 0 and ls.watch_parent is not None:
            ls.watch_parent(params.process_id)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: CtxLanguageServer, params: types.InitializedParams) -> None:
        try:
            await _setup(ls)
        finally:
            ls.setup_done.set()

    async def _setup(ls: CtxLanguageServer) -> None:
        ls.options = ls.apply_settings(ls.init_options, await ls.pull_configuration())
        folders = list(ls.workspace.folders.values())
        if folders:
            for f in folders:
                ls.add_root(f.uri, f.name)
        elif ls.workspace.root_uri:
            ls.add_root(ls.workspace.root_uri)
        if not ls.roots:
            ls.log_message("ctx-lsp: no workspace folder: nothing to index", types.MessageType.Warning)
        await _register_dynamic(ls)
        for root in ls.roots:
            ls.watch_folder(root)
            ls.start_indexing(root)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: CtxLanguageServer, params: types.DidChangeConfigurationParams) -> None:
        config = await ls.pull_configuration()
        if config is None and isinstance(params.settings, dict):
            config = params.settings.get("ctx")  # push-style clients
        before = ls.options
        ls.options = ls.apply_settings(ls.init_options, config)
        if ls.options.index_key() != before.index_key() and ls.roots:
            ls.log_message("ctx-lsp: indexing settings changed: re-indexing")
            await ls.reindex(drop_cache=False)

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def did_change_folders(ls: CtxLanguageServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        for f in params.event.removed or []:
            p = uri_to_path(f.uri)
            for r in [r for r in ls.roots if p is not None and r.path == p.resolve()]:
                r.cancel.set()
                watcher = r.watcher
                ls.stop_watching(r)
                ls.roots.remove(r)
                ls.spawn(ls.release(r, watcher))  # its memory, once its work has stopped
        for f in params.event.added or []:
            root = ls.add_root(f.uri, f.name)
            if root is not None:
                ls.watch_folder(root)
                ls.start_indexing(root)

    def note(ls: CtxLanguageServer, uri: str, source: str, memory: str | None) -> None:
        got = ls.find(uri)
        if got is None:
            return  # outside the workspace folders: not ours to index
        root, rel = got
        if not root.engine.index.accepts(rel):
            return
        root.pending[rel] = source
        if memory is not None:
            root.notes.append((memory, rel))
        ls.schedule_flush(root)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: CtxLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        note(ls, params.text_document.uri, BUFFER, "open")

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: CtxLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        note(ls, params.text_document.uri, BUFFER, "edit")

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: CtxLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        note(ls, params.text_document.uri, DISK, None)  # saved: the disk is the truth again

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: CtxLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        note(ls, params.text_document.uri, DISK, None)  # unsaved edits are dropped: back to the disk

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(ls: CtxLanguageServer, params: types.DidChangeWatchedFilesParams) -> None:
        open_docs = set(ls.workspace.text_documents)
        indexed_dirs: dict[int, set[str]] = {}  # per root (by id), every directory holding an indexed file
        for change in params.changes:
            if change.uri in open_docs:
                continue  # the editor buffer wins over the disk while the file is open
            got = ls.find(change.uri)
            if got is None:
                continue
            root, rel = got
            if root.engine.index.accepts(rel):
                note(ls, change.uri, DISK, None)
            elif _a_directory(root, rel, change.type, indexed_dirs):
                # a folder removed, renamed or made (editors report it alone, not each file in it):
                # it stands for the files indexed under it and those on disk there now (Root.apply)
                root.pending[rel] = DISK
                ls.schedule_flush(root)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: CtxLanguageServer, *args: Any) -> None:
        for root in ls.roots:
            root.cancel.set()  # indexing and jedi refinement stop at their next file or batch
            ls.stop_watching(root)
        tasks = [t for r in ls.roots for t in (r.task, r.refine_task, r.embed_task) if t is not None and not t.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE_S)
        for root in ls.roots:  # a refresh's write still waiting for changes to pause
            if root.engine.index.pending_save and not root.indexing:
                try:
                    await ls.save_pending(root)
                except Exception:  # the next start redoes the update from the disk instead
                    log.exception("writing the cache of %s at shutdown failed", root.path)
        for root in ls.roots:  # a forked write still running is finished (or redone) before the exit
            try:
                await asyncio.to_thread(_wait_saved, root)
            except Exception:
                log.exception("writing the cache of %s at shutdown failed", root.path)


def _a_directory(root: Root, rel: str, kind: types.FileChangeType | int, indexed_dirs: dict[int, set[str]]) -> bool:
    """Whether a watched path that is no Python file the index takes is a directory that matters: one
    gone that held indexed files, or one now on disk that discovery would list."""
    if kind == types.FileChangeType.Deleted:
        dirs = indexed_dirs.get(id(root))
        if dirs is None:
            dirs = indexed_dirs[id(root)] = set()
            for path in root.engine.index.facts:
                parts = path.split("/")[:-1]
                dirs.update("/".join(parts[: i + 1]) for i in range(len(parts)))
        return rel in dirs
    try:
        return (root.path / rel).is_dir() and root.engine.index.accepts_dir(rel)
    except OSError:
        return False


def _wait_saved(root: Root) -> None:
    with root.reading() as engine:  # a failed child's write is redone in process: under the lock
        engine.index.wait_saved()


async def _register_dynamic(ls: CtxLanguageServer) -> None:
    """File watchers for **/*.py and configuration change notifications, where the client allows it.
    A client that cannot watch files for us (Neovim on Linux) gets the server's own watcher instead."""
    ws = ls.client_capabilities.workspace
    regs: list[types.Registration] = []
    ls.watch_disk = not (ws is not None and ws.did_change_watched_files is not None
                         and ws.did_change_watched_files.dynamic_registration)
    if not ls.watch_disk:
        regs.append(types.Registration(
            id="ctx-lsp-watch-py", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(
                # and folders made or removed: editors report a folder's removal or rename once,
                # for the folder, which `**/*.py` does not match
                watchers=[types.FileSystemWatcher(glob_pattern="**/*.py"),
                          types.FileSystemWatcher(glob_pattern="**/*",
                                                  kind=types.WatchKind.Create | types.WatchKind.Delete)])))
    if ws is not None and ws.did_change_configuration is not None and ws.did_change_configuration.dynamic_registration:
        regs.append(types.Registration(id="ctx-lsp-config", method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                                       register_options=types.DidChangeConfigurationRegistrationOptions(section="ctx")))
    if not regs:
        return
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations=regs))
    except Exception as exc:
        log.warning("client/registerCapability failed: %s", exc)
