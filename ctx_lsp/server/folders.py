"""One workspace folder as the server sees it: its engine, its indexing state, and the editor
changes not yet folded into its graph.

Threads: the indexing thread holds `engine.lock` for the whole build (Engine.open) and calls
`yield_to_readers` between batches, so requests waiting for the lock are answered from the partial
index meanwhile. Every other access to the engine goes through `reading()`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctx_lsp.engine import Engine
from ctx_lsp.index.discovery import SKIP_DIRS, FileFilter
from ctx_lsp.index.git_activity import GitHold
from ctx_lsp.index.watch import EVERYTHING
from ctx_lsp.server.options import Options

# root states
PENDING, INDEXING, READY, CANCELLED, FAILED = "pending", "indexing", "ready", "cancelled", "failed"
BUFFER, DISK = "buffer", "disk"  # where a pending change takes its text from


class IndexingCancelled(Exception):
    """Raised from the progress callback when the user cancelled indexing."""


# A batch of at least this many files changed on disk is applied as one refresh (see Root.apply)
REFRESH_AT = 16


PROGRESS_STARTING, PROGRESS_REFUSED = "\0starting", "\0refused"


@dataclass
class Root:
    name: str
    path: Path  # absolute, resolved
    uri: str
    engine: Engine
    state: str = PENDING
    error: str | None = None
    # rel -> BUFFER | DISK: changes seen (didOpen/didChange/didSave/didClose/watched files) not yet applied
    pending: dict[str, str] = field(default_factory=dict)
    notes: list[tuple[str, str]] = field(default_factory=list)  # ("open" | "edit", rel) for working memory
    cancel: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task[None] | None = None
    refiner: Any = None  # ctx_lsp.index.refine.Refiner once the first indexing is done (jediRefinement)
    refine_task: asyncio.Task[None] | None = None
    refine_again: bool = False
    embed_task: asyncio.Task[None] | None = None  # the dense generator's embedding (server/embedding.py)
    embed_again: bool = False
    watcher: Any = None  # ctx_lsp.index.watch.TreeWatcher when the server watches the folder itself
    # changes on disk wait while git writes the tree (git_activity.py); None until git was asked where
    # its directory is (off the event loop, before the first flush)
    git: GitHold | None = None
    # the work-done progress shown while they wait: its token, PROGRESS_STARTING while the client is
    # asked for one, PROGRESS_REFUSED when it would not give one (for this wait), None when not waiting
    git_progress: str | None = None
    buffers: dict[str, str] = field(default_factory=dict)  # rel -> text of the buffers folded into the graph
    updates: int = 0  # index updates so far (counted by the server's index listener, in the updating thread)
    _waiting: int = 0
    # changes taken from `pending` (in message order) and not yet applied; drained under the lock
    _backlog: list[tuple[list[tuple[str, str, str | None]], list[tuple[str, str]]]] = field(default_factory=list)
    _count_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._cond = threading.Condition(self.engine.lock)

    def set_engine(self, engine: Engine) -> None:
        """Swap in a fresh engine (ctx.reindex, changed settings); readers of the old one finish on it."""
        if self.refiner is not None:
            self.refiner.detach()
            self.refiner = None
        self.engine = engine
        self._cond = threading.Condition(engine.lock)
        self.cancel = threading.Event()
        self.state, self.error = PENDING, None

    @property
    def indexing(self) -> bool:
        return self.state in (PENDING, INDEXING)

    def waits_for_git(self) -> bool:
        """Whether changes on disk wait for git here: the client's reported ones (`held_for_git`), or
        a settled batch in the server's own watcher."""
        return self.held_for_git() or bool(self.watcher is not None and self.watcher.state().get("git_busy"))

    def held_for_git(self) -> bool:
        """Whether changes on disk pending here wait for git (it holds the index lock: a checkout,
        merge, reset or pull is writing files), so the tree is read once, when git is done."""
        return self.git is not None and DISK in self.pending.values() and self.git.holds()

    # -- locking --------------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[Engine]:
        """Hold the engine lock; while the index is being built, the builder lets us in between batches."""
        with self._count_lock:
            self._waiting += 1
        counted = True
        try:
            with self.engine.lock:
                with self._count_lock:
                    self._waiting -= 1
                counted = False
                try:
                    yield self.engine
                finally:
                    self._cond.notify_all()
        finally:
            if counted:
                with self._count_lock:
                    self._waiting -= 1

    def yield_to_readers(self, max_wait: float = 1.0) -> None:
        """Called by the indexing thread (holding the lock) between batches."""
        deadline = time.monotonic() + max_wait
        while self._waiting > 0 and time.monotonic() < deadline:
            self._cond.wait(0.05)

    # -- applying editor changes ----------------------------------------------------------------
    def enqueue(self, changes: list[tuple[str, str, str | None]], notes: list[tuple[str, str]]) -> None:
        """Queue a batch of changes (event loop)."""
        with self._count_lock:
            self._backlog.append((changes, notes))

    def backlog_size(self) -> int:
        return len(self._backlog)

    def drain(self) -> int:
        """Apply every queued batch in order (worker thread, lock held). Returns files changed."""
        with self._count_lock:
            batches, self._backlog = self._backlog, []
        return sum(self.apply(changes, notes) for changes, notes in batches)

    def apply(self, changes: list[tuple[str, str, str | None]], notes: list[tuple[str, str]]) -> int:
        """Fold (rel, BUFFER|DISK, text) changes into the graph. Returns the number of files changed.

        A DISK change to a path the index does not accept is a directory the watcher reported alone
        (renamed or removed): it stands for the files indexed under it and those on disk there now.
        Many files changed on disk at once (a checkout) are one `refresh`, which extracts and binds
        them together, not one update each; files held as editor overlays are reloaded one by one."""
        ix = self.engine.index
        n = 0
        disk: list[str] = []
        everything = False  # the watcher lost events: only a whole refresh is sure
        for rel, source, text in changes:
            if source == BUFFER and text is not None:
                ix.update_file(rel, text, overlay=True)  # over the size limit: skipped with the reason
                if rel in ix.facts:
                    self.buffers[rel] = text
                else:
                    self.buffers.pop(rel, None)
                n += 1
            elif rel == EVERYTHING:
                everything = True
            elif ix.accepts(rel):
                disk.append(rel)
            else:
                disk.extend(self._files_under(rel))
        disk = list(dict.fromkeys(disk))  # a file and its directory may both be in one batch
        overlays = [rel for rel in disk if (st := ix.state.get(rel)) is not None and st.overlay]
        if everything or len(disk) - len(overlays) >= REFRESH_AT:
            for rel in overlays:
                self.buffers.pop(rel, None)
                ix.reload_file(rel)
            for rel in disk:
                self.buffers.pop(rel, None)
            n += len(overlays) + len(ix.refresh())
        else:
            for rel in disk:
                self.buffers.pop(rel, None)
                ix.reload_file(rel)  # regular files inside the root only (discovery.read_source)
                n += 1
        for kind, rel in notes:
            hook = getattr(self.engine, "note_open" if kind == "open" else "note_edit", None)
            if hook is not None:  # working memory lands with the retrieval engine
                hook(rel)
        return n

    def _files_under(self, rel: str) -> list[str]:
        """The files indexed under directory `rel` and the files the index would take there on disk now."""
        ix = self.engine.index
        prefix = rel.rstrip("/") + "/"
        found = {p for p in ix.facts if p.startswith(prefix)}
        top = self.path / rel
        if top.is_dir() and not top.is_symlink():
            for d, dirs, names in os.walk(top):  # symlinked directories are not followed
                dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
                base = Path(d).relative_to(self.path).as_posix()
                found.update(r for n in names if n.endswith(".py") and ix.accepts(r := f"{base}/{n}"))
        return sorted(found)


def source_of(root: Root) -> Any:
    """The jedi refiner's view of the editor buffers: rel -> text, None for the disk."""
    return lambda rel: root.buffers.get(rel)


def cache_dir_for(options: Options, folder: Path) -> Path | None:
    """Per-folder cache directory under the `cacheDir` setting (None = the default per-user cache)."""
    if not options.cache_dir:
        return None
    key = hashlib.sha1(os.fsencode(folder)).hexdigest()[:12]  # a name that is not UTF-8 hashes too
    return Path(options.cache_dir).expanduser() / f"{os.fsencode(folder.name).decode('utf-8', 'replace')}-{key}"


def make_engine(options: Options, folder: Path) -> Engine:
    flt = FileFilter(include=options.include, exclude=options.exclude)
    dense = None
    if options.dense:
        from ctx_lsp.retrieval.dense_options import BACKGROUND, DenseOptions

        dense = DenseOptions(BACKGROUND, options.dense_model)
    engine = Engine(folder, cache_dir=cache_dir_for(options, folder), flt=flt, jedi=options.jedi_refinement,
                    dense=dense)
    engine.index.defer_save = True  # a refresh's cache write waits until its requests are answered (save_later)
    engine.index.background_save = True  # and is made by a forked child where one may fork (Linux)
    return engine
