"""The workspace index: discovery, extraction, binding and the graph, kept up to date incrementally.

One code path builds from scratch and applies changes (`_apply`), which is what makes an
incrementally updated graph equal a graph built from scratch on the same contents:
re-extract the changed files, then re-bind them and every file whose recorded module lookups touch a
module whose interface (names, kinds, bases, imports, types) or module-name mapping changed.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ctx_lsp.index.bind import Binder, FileBinding, PriorBinding
from ctx_lsp.index.discovery import DELETED, FileFilter, discover, read_source, too_large
from ctx_lsp.index.extract import extract
from ctx_lsp.index.facts import FileFacts, content_digest, decode_source, pack_records, unpack_records
from ctx_lsp.index.flow import FLOW_KEY, Values, call_sites, emit_edges, flow_values, without_positions
from ctx_lsp.index.forkpool import ForkPool, ForkPoolError, fork_quiet, reap_exited
from ctx_lsp.index.graph import CodeGraph
from ctx_lsp.index.model import Edge, EdgeKind, Node, NodeKind
from ctx_lsp.index.modules import PATH_DEP, Workspace, changed_names, interface_digests, name_dep
from ctx_lsp.index.previous import SECTION as PREVIOUS_SECTION
from ctx_lsp.index.previous import PreviousFacts
from ctx_lsp.index.splice import splice
from ctx_lsp.index.statement_reuse import reuse_statements
from ctx_lsp.index.store import (
    IndexStore,
    binding_from_wire,
    binding_to_wire,
    default_cache_dir,
    edge_to_wire,
    facts_from_wire,
    facts_to_wire,
)

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]  # (stage, done, total)
PARALLEL_THRESHOLD = 300  # below this many files a process pool costs more than it saves
# ... unless they are big: a checkout's changed files are the project's large, busy ones (Django: 275
# changed files held 43% of the bytes), and 1 MB parses in ~0.4 s against ~0.05 s to start a pool
PARALLEL_BYTES = 1_000_000
# a warm start whose new content (in no version the index holds) is more than this share of the
# workspace's bytes, in at least PARALLEL_THRESHOLD files, indexes from scratch instead. Django
# checkouts to one commit, as an update against a cold index of the result, in one run: four months
# apart (43% of the bytes new) 0.5x, one year (77%) 0.9x, three years (99.8%) 1.25x
COLD_FRACTION = 0.9


def prepare_threaded_process(*lazy_modules: str) -> None:
    """Make the indexer's process pools safe in a multi-threaded process (the server, the daemon).

    A forked child inherits locks held by other threads at fork time (a module's import lock while a
    thread imports it lazily, logging locks, ...) and can hang on them. Pools created without an
    explicit context start from a clean forkserver instead (used where ForkPool is not: off Linux).
    The modules request threads would import lazily are imported now, and so is parso: the
    extraction's fallback parser, which jedi refinement imports on its own thread.
    """
    import importlib
    import multiprocessing

    try:
        multiprocessing.set_start_method("forkserver")
        # each worker forks from a server that imported the indexer once, not importing it itself
        multiprocessing.set_forkserver_preload([__name__])
    except (RuntimeError, ValueError):  # already set, or not available on this platform
        pass
    for name in (*lazy_modules, "parso"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def may_start_processes() -> bool:
    """False inside a daemonic process (a Dask worker, a multiprocessing pool's worker), which may not
    have children: there the index extracts and binds in process rather than failing."""
    import multiprocessing

    return not multiprocessing.current_process().daemon


@dataclass
class FileState:
    size: int
    mtime_ns: int
    digest: str
    overlay: bool = False  # content came from an editor buffer, not the disk


# an update changing at least this many files (a checkout, a pull; not an editor's edit) keeps what the
# tree was before it (_TreeBefore), for a checkout back
TREE_BEFORE_FILES = 8
TREE_BEFORE_EDITS = 256  # files that smaller updates after it may re-bind before it is dropped


class _TreeBefore:
    """The tree before the last update that changed many files: every file's content digest, and the
    bindings that update and the small ones after it replaced (of each file re-bound or removed since,
    the first). A file's binding is a function of every file's facts, and facts of (path, content):
    when a later update brings every file back to these digests (a branch switched and back, a stash
    popped), these bindings are the ones a build would make, and nothing needs binding again.

    As read from the cache its bindings stay packed (`blobs`, `packed_paths`) until a checkout back
    needs them: an editor's first edit after a start must not decode them."""

    __slots__ = ("digests", "bindings", "limit", "blobs", "packed_paths")

    def __init__(self, digests: dict[str, str], bindings: dict[str, FileBinding], limit: int,
                 blobs: tuple[bytes, ...] = (), packed_paths: frozenset[str] = frozenset()) -> None:
        self.digests, self.bindings, self.limit = digests, bindings, limit
        self.blobs, self.packed_paths = blobs, packed_paths  # earlier blobs first; their paths

    def holds(self, path: str) -> bool:
        return path in self.packed_paths or path in self.bindings

    def keep_first(self, replaced: dict[str, FileBinding]) -> None:
        """Add the bindings a small update replaced, of files none replaced before it."""
        for p, b in replaced.items():
            if p not in self.packed_paths:
                self.bindings.setdefault(p, b)

    def size(self) -> int:
        return len(self.packed_paths) + len(self.bindings)

    def all_bindings(self) -> dict[str, FileBinding]:
        out: dict[str, FileBinding] = {}
        for blob in self.blobs:
            for p, w in unpack_records(blob).items():
                if p not in out:
                    out[p] = binding_from_wire(w)
        for p, b in self.bindings.items():
            out.setdefault(p, b)
        return out

    def pack(self) -> bytes:
        blobs = list(self.blobs)
        if self.bindings:
            blobs.append(pack_records({p: binding_to_wire(b) for p, b in self.bindings.items()}))
        return pack_records([self.digests, self.limit, sorted(self.packed_paths | self.bindings.keys()), blobs])


TREE_BEFORE_SECTION = "tree-before"  # the cache section that holds it, for a fresh process's checkout back


def _unpack_tree_before(raw: bytes | None) -> _TreeBefore | None:
    """The section as written by _TreeBefore.pack, its bindings left packed; None for none or anything
    else (it only saves time)."""
    if not raw:
        return None
    try:
        digests, limit, paths, blobs = unpack_records(raw)
        if not (isinstance(digests, dict) and isinstance(limit, int) and all(isinstance(b, bytes) for b in blobs)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in digests.items())
                and all(isinstance(p, str) for p in paths)):
            return None
        return _TreeBefore(dict(digests), {}, limit, tuple(blobs), frozenset(paths))
    except Exception:
        log.warning("the cache's tree before its last checkout is unreadable; a checkout back binds again")
        return None


@dataclass
class BuildReport:
    files: int = 0
    extracted: int = 0
    rebound: int = 0
    reused: int = 0  # files whose facts a checkout back to them took from WorkspaceIndex.previous
    partial: int = 0  # of `extracted`, files that kept their unchanged top-level statements' facts (statement_reuse.py)
    restored: int = 0  # bindings taken back from the tree before the last checkout (_TreeBefore), not bound
    # of the files that came or went since the cache: those the filters (include, exclude, size limit)
    # the cache was written with left out and these let in, and those these leave out that it held
    let_in: int = 0
    left_out: int = 0
    seconds: float = 0.0
    warm: bool = False
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds per stage (see WorkspaceIndex.phases)


@contextmanager
def _quiet_gc() -> Iterator[None]:
    """No cyclic GC while a batch of updates allocates, and what it built frozen afterwards: with a
    large index in memory every full collection scans millions of long-lived objects (a checkout's
    update ran 4x slower with it). Objects freed by reference counting are freed as usual."""
    if not gc.isenabled():  # already inside a quiet section (a build)
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.freeze()


@contextmanager
def _timed(phases: dict[str, float], name: str) -> Iterator[None]:
    t = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - t


_CALLS, _OVERRIDES = EdgeKind.CALLS.value, EdgeKind.OVERRIDES.value


def _flow_input(b: FileBinding) -> tuple[list[tuple], frozenset[tuple[str, str]], tuple[tuple[str, str], ...]]:
    """What flow.py reads of one binding: its constraints, its CALLS pairs, its OVERRIDES pairs."""
    calls = frozenset((e.src, e.dst) for e in b.edges if e.kind == _CALLS)
    return b.flows, calls, tuple((e.src, e.dst) for e in b.edges if e.kind == _OVERRIDES)


# the facts the index held before an update, for extraction to reuse statements from
# (statement_reuse.py): set around an update's extraction, inherited by forked workers
_OLD_FACTS: dict[str, FileFacts] = {}
# whether the update's workers work out the old and new interface digests (not when it re-binds all)
_WANT_INTERFACES = True


def _rebinds_all(changed: int, files: int) -> bool:
    """Whether an update changing this many of `files` files re-binds every file instead of working out
    which ones the change affects: comparing two interfaces per changed file costs more than binding
    the rest (a Django checkout three years apart: 2.6 s of interface digests, about 1.2 ms each and
    two per changed file, against ~1.5 ms to bind a file), and re-binding a file the change did not
    affect gives the binding it had."""
    return changed >= PARALLEL_THRESHOLD and 2 * changed >= files


Extracted = tuple[str, FileFacts | None, str | None, int, int, bool, dict[str, str] | None]
# (path, facts, skip reason, size, mtime, partial, the old facts' interface digests when there were old facts)


def _interface(f: FileFacts) -> dict[str, str]:
    """The interface digests an update compares (modules.interface_digests), computed once per facts."""
    if f.interface is None:
        f.interface = interface_digests(f)
    return f.interface


def _extract_one(root: str, rel: str, max_bytes: int) -> Extracted:
    """One file read and extracted; `partial`: its kept statements' facts came from the old ones."""
    read = read_source(Path(root), rel, max_bytes)
    data, size, mtime = read.data, read.size, read.mtime_ns
    if data is None:
        return rel, None, read.reason, size, mtime, False, None
    text, decode_error = decode_source(data)
    digest = content_digest(data)
    old = _OLD_FACTS.get(rel)
    reused = _reuse_guarded(old, text, digest) if old is not None and decode_error is None else None
    facts, reason = (reused, None) if reused is not None else _extract_guarded(rel, text, digest)
    if facts is None:
        return rel, None, reason, size, mtime, False, None
    if decode_error:
        facts.errors.insert(0, decode_error)
    if old is None or not _WANT_INTERFACES:
        return rel, facts, None, size, mtime, reused is not None, None
    # an update compares the old and new interfaces: worked out here, in parallel, not in the parent
    _interface(facts)
    return rel, facts, None, size, mtime, reused is not None, _interface(old)


def _extract_guarded(rel: str, text: str, digest: str | None = None) -> tuple[FileFacts | None, str | None]:
    """extract() behind the per-file boundary: a file too deep or too large for the walks over its
    tree is skipped with a reason instead of failing the whole index."""
    try:
        return extract(rel, text, digest), None
    except (RecursionError, MemoryError) as exc:
        log.warning("could not index %s: %s", rel, type(exc).__name__)
        return None, f"skipped: could not be indexed ({type(exc).__name__}: nested too deeply or too large)"


def _reuse_guarded(old: FileFacts, text: str, digest: str) -> FileFacts | None:
    """reuse_statements behind the per-file boundary: any failure only costs the reuse."""
    try:
        return reuse_statements(old, text, digest)
    except Exception:
        log.exception("reusing the statements of %s failed; extracting it whole", old.path)
        return None


def _bind_guarded(binder: Binder, path: str, prior: PriorBinding | None = None, pack: bool = True) -> FileBinding:
    """`pack`: hold the binding's keys and groups packed (see FileBinding.pack); an edit's few
    bindings skip it (a rename re-binds a dozen files, and packing them was ~8 ms of its p95)."""
    try:
        b = binder.bind_file(path, prior)
        if pack:
            b.pack()
        return b
    except RecursionError:  # the binder bounds its depth; this is the per-file backstop
        log.warning("could not bind %s: nested too deeply; its edges are left out", path)
        return FileBinding(path)


_Packed = tuple[str, bytes | None, str | None, int, int, bool, dict[str, str] | None, dict[str, str] | None,
                tuple[str, dict[str, int]] | None]


# a pool worker's share: the files to extract and, for a worker that did not inherit the update's old
# facts (one started from a forkserver, as in the language server), those facts packed as the cache
# holds them and whether to work out interfaces (_OLD_FACTS, _WANT_INTERFACES in a forked worker)
_Job = tuple[list[tuple[str, str, int]], dict[str, bytes] | None, bool]


def _extract_chunk(job: _Job) -> list[_Packed]:
    """A pool worker's share, each file's facts as the cache's packed wire: unpickling whole facts
    (every site, def and term as objects) was ~0.5 s of the parent's time on a Django checkout, while
    facts_from_wire leaves their packed fields packed until something reads them."""
    global _OLD_FACTS, _WANT_INTERFACES
    items, sent, want = job
    if sent is not None:
        _OLD_FACTS = {rel: facts_from_wire(unpack_records(b)) for rel, b in sent.items()}
        _WANT_INTERFACES = want
    try:
        out: list[_Packed] = []
        for rel, facts, reason, size, mtime, partial, old_iface in map(lambda it: _extract_one(*it), items):
            wire = pack_records(facts_to_wire(facts)) if facts is not None else None
            out.append((rel, wire, reason, size, mtime, partial, facts.interface if facts is not None else None,
                        old_iface, facts.moved if facts is not None else None))
        return out
    finally:
        if sent is not None:  # a forkserver worker lives on: nothing of this update stays in it
            _OLD_FACTS, _WANT_INTERFACES = {}, True


def _from_chunk(part: list[_Packed]) -> list[Extracted]:
    out: list[Extracted] = []
    for rel, wire, reason, size, mtime, partial, iface, old_iface, moved in part:
        facts = facts_from_wire(unpack_records(wire)) if wire is not None else None
        if facts is not None:
            facts.interface = iface
            facts.moved = moved
        out.append((rel, facts, reason, size, mtime, partial, old_iface))
    return out


_FORK_WS: Workspace | None = None
_FORK_PRIORS: dict[str, PriorBinding] = {}


def _bind_chunk(paths: list[str]) -> list[FileBinding]:
    """A pool worker's share, pickled with each binding's keys and site groups packed (`FileBinding.__reduce__`).
    Not the cache's msgpack wire: decoding that gives every edge its own copies of its strings
    (+40 MB on a Django cold build), where a pickle keeps the ones they share."""
    assert _FORK_WS is not None
    binder = Binder(_FORK_WS)
    return [_bind_guarded(binder, p, _FORK_PRIORS.get(p)) for p in paths]


def _decode_cache(cached: dict[str, Any]) -> tuple[dict[str, FileFacts], dict[str, FileBinding],
                                                 dict[str, FileState], dict[str, Any], list[Edge] | None] | None:
    """The cached facts, bindings and file states, or None when any entry is malformed.

    The store checks the header (schema, version, root); this checks the payload, so a cache that is
    well-formed msgpack but damaged inside is rebuilt instead of crashing the start.
    """
    try:
        facts: dict[str, FileFacts] = {}
        binds: dict[str, FileBinding] = {}
        states: dict[str, FileState] = {}
        files = cached.pop("files")
        items = list(files.items())
        files.clear()
        for i, (rel, (size, mtime, digest, fw, bw)) in enumerate(items):
            facts[rel] = facts_from_wire(fw)
            if bw is not None:
                binds[rel] = binding_from_wire(bw)
            states[rel] = FileState(int(size), int(mtime), str(digest))
            items[i] = None  # type: ignore[call-overload]  # free each wire entry once decoded (peak memory)
        extra = cached.get("extra") or {}
        if not isinstance(extra, dict):
            return None
        flow = cached.get("flow")
        return facts, binds, states, extra, [Edge._make((*e[:7], tuple(e[7]))) for e in flow] if flow is not None else None
    except Exception:  # any shape error in the payload means: rebuild
        return None


def _stat_changed(found: Any, held: dict[str, Any]) -> list[str]:
    """The files found whose (size, mtime_ns) is not the one `held` records (new files included)."""
    return [rel for rel in found.files if rel not in found.stats or tuple(held.get(rel, ())[:2]) != found.stats[rel]]


def _filter_key(flt: FileFilter) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    return tuple(flt.include), tuple(flt.exclude), int(flt.max_bytes)


def _cached_filter(value: Any) -> tuple[tuple[str, ...], tuple[str, ...], int] | None:
    """The filters a cache was written with; None when it does not say (older caches) or is malformed."""
    try:
        inc, exc, most = value
        return tuple(map(str, inc)), tuple(map(str, exc)), int(most)
    except Exception:
        return None


def _cached_states(cached: dict[str, Any]) -> dict[str, FileState] | None:
    """The file states of a loaded cache (what a warm start compares with the disk), or None when
    malformed; read before the facts are decoded, so a mostly new tree need not decode them."""
    try:
        return {rel: FileState(int(e[0]), int(e[1]), str(e[2])) for rel, e in cached["files"].items()}
    except Exception:
        return None


def _modules_by_path(ws: Workspace) -> dict[str, list[str]]:
    """The module names each file is known by (the inverse of `ws.modules`)."""
    out: dict[str, list[str]] = {}
    for name, path in ws.modules.items():
        out.setdefault(path, []).append(name)
    return out


# cache writers in flight: pid -> the index that started it (weakly: the index may be dropped first)
_WRITERS: dict[int, weakref.ref[WorkspaceIndex]] = {}


@atexit.register
def _wait_for_cache_writes() -> None:
    """A process exits only once its cache is written (`ctx-lsp index` promises a cache), also when the
    index that started the write is gone by then."""
    for pid, ref in list(_WRITERS.items()):
        index = ref()
        if index is not None and index._saver == pid:
            index.wait_saved()  # retries in process if the writer failed
            continue
        _WRITERS.pop(pid, None)
        if _reap(pid) != 0:
            log.warning("the background cache write failed; the next start rebuilds what it lacks")


def _reap(pid: int) -> int:
    """Wait for a cache writer; its exit code (0 when it was reaped elsewhere)."""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return 0
    return os.waitstatus_to_exitcode(status)


def nodes_of(facts: FileFacts) -> list[Node]:
    """The graph nodes one file defines: the file itself, then its symbols in source order."""
    path = facts.path
    nodes = [Node(path, NodeKind.FILE.value, path, None, 1, max(facts.lines, 1), "", facts.doc)]
    # f"{path}::{qual}" is model.symbol_id, inlined: ~60k calls per Django warm start
    nodes.extend(Node(f"{path}::{r[0]}", r[1], path, r[0], r[2], r[3], r[6], r[7]) for r in facts.node_rows())
    return nodes


T = TypeVar("T")


def _balanced(items: list[T], weight: Callable[[T], int], count: int, least: int) -> list[list[T]]:
    """About `count` chunks of about equal weight (each at least `least` items unless one is heavy),
    heaviest items first: a pool hands chunks out in order, so the last ones handed out are light
    and the workers finish together (a checkout changes a few very large test modules)."""
    weights = [weight(it) for it in items]
    ordered = sorted(range(len(items)), key=lambda i: -weights[i])
    target = max(1, sum(weights) // max(1, count))
    least = min(least, max(1, len(items) // max(1, count)))
    chunks: list[list[T]] = []
    cur: list[T] = []
    held = 0
    for i in ordered:
        cur.append(items[i])
        held += weights[i]
        if (held >= target and len(cur) >= least) or held >= 2 * target:
            chunks.append(cur)
            cur, held = [], 0
    if cur:
        chunks.append(cur)
    return chunks


def _file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _bytes_at_least(files: dict[str, str], paths: list[str], limit: int) -> bool:
    """Whether `paths` hold at least `limit` bytes (stat only, stopping once reached)."""
    total = 0
    for rel in paths:
        try:
            total += os.stat(files[rel]).st_size
        except (OSError, KeyError):
            continue
        if total >= limit:
            return True
    return False


class WorkspaceIndex:
    """The persistent, incrementally updated code graph of one workspace root."""

    def __init__(self, root: Path, cache_dir: Path | None = None, flt: FileFilter | None = None,
                 workers: int | None = None) -> None:
        self.root = root.resolve()
        self.cache_dir = cache_dir if cache_dir is not None else default_cache_dir(self.root)
        self.filter = flt or FileFilter()
        self.workers = workers if workers is not None else min(2, os.cpu_count() or 1)
        self.store = IndexStore(self.cache_dir)
        self.graph = CodeGraph()
        self.facts: dict[str, FileFacts] = {}
        self.bindings: dict[str, FileBinding] = {}
        self.state: dict[str, FileState] = {}
        self.skipped: dict[str, str] = {}
        self.ws = Workspace({})
        self.last_update = 0.0
        self.listeners: list[Callable[[set[str]], None]] = []  # called with changed paths after updates
        # work for the parent while a bind pool binds (it only waits there, and the workers leave a
        # core partly idle): each is called with the paths whose facts the update changed (new or
        # gone), in a thread joined before the bind returns; the facts are already the new ones
        self.while_binding: list[Callable[[list[str]], None]] = []
        # per path: what the callback-flow pass reads of its binding (see _update_flow)
        self._flow_inputs: dict[str, tuple[list[tuple], frozenset[tuple[str, str]], tuple[tuple[str, str], ...]]] = {}
        self._flow_values: Values | None = None  # the last full flow pass's propagated values
        self.extra_state: dict[str, Any] = {}  # other producers' persisted state (history, coverage)
        # the producers following this index (coverage, history, the jedi refiner), by name: held here,
        # not in a module-level weak-keyed table, whose values (each holding its index) would keep
        # every index ever made alive
        self.attached: dict[str, Any] = {}
        # derived indexes written with the cache: name -> a function returning the section as of the
        # current facts (called at each write, in the writer), and the sections the last warm start
        # read, packed (facts.unpack_records: the owner decodes it when it first needs it, not the
        # open), for their owners to take (the Retriever's lexical indexes)
        self.save_sections: dict[str, Callable[[], Any]] = {}
        self.loaded_sections: dict[str, Any] = {}
        # each cache write gets a fresh stamp (`writing_stamp` while its sections are made): a section
        # derived from the whole graph is valid for the write that made it, and `loaded_stamp` says
        # which write the last warm start read
        self.writing_stamp = ""
        self.loaded_stamp = ""
        # the files that start's update changed (facts new or gone) and all it touched (those and the
        # ones re-bound), for a section that can be brought up to date from them; None: no warm start
        self.loaded_update: tuple[frozenset[str], frozenset[str]] | None = None
        self.last_paths: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())  # the same, last update
        self.pending_save = False
        # facts of file versions replaced by checkouts, for a checkout back to them (previous.py)
        self.previous = PreviousFacts()
        self.save_sections[PREVIOUS_SECTION] = self.previous.section
        self.reused = 0  # files the last extraction took from `previous` instead of extracting
        self.kept = 0  # files the last extraction kept as they were (stat changed, content not)
        self.partial = 0  # files the last extraction built partly from their kept statements' facts
        self._tree_before: _TreeBefore | None = None  # see _TreeBefore; only the last large update's
        self._tree_before_packed: bytes | None = None  # as the cache held it, unpacked when an update needs it
        self.save_sections[TREE_BEFORE_SECTION] = self._tree_before_section
        self.restored = 0  # bindings the last update took back from _tree_before instead of binding
        self.overlay_text: dict[str, str] = {}  # editor buffers (unsaved text), by path
        self._clean_overlays: dict[str, tuple[tuple[str, int, int], bool]] = {}  # see _same_as_disk
        # True: a build or refresh writes the cache from a forked child while this process goes on to
        # answer (where `may_fork_workers`: the CLI, speed's children, the daemon, and on Linux the
        # server and the MCP bridge; others write inline)
        self.background_save = False
        # True: a refresh leaves its cache write to the owner (`pending_save`, then `save_pending`), which
        # answers first: the language server, whose write (forked on Linux, else inline: ~1.7 s on Django)
        # would otherwise hold the request that found a checkout. Until written, a restart redoes the update.
        self.defer_save = False
        # True: the owner guarantees that while this index updates, no other thread holds a lock a
        # forked child could need (the daemon: every engine call runs under one lock, nothing reads
        # stdin, lazy imports are done up front), so updates may fork although threads exist, off Linux too
        self.fork_safe = False
        self._saver: int | None = None  # pid of the child writing the cache
        # wall seconds per stage of the last load_or_build or refresh (load, discover, decode, install,
        # extract, bind, graph, flow, save; Engine.open adds its producers): where a build's time goes
        self.phases: dict[str, float] = {}
        # processes the last extraction and binding ran on (1: in this process): how an update used the cores
        self.workers_used: dict[str, int] = {}

    def _filter_moves(self, before: tuple[tuple[str, ...], tuple[str, ...], int],
                      changes: dict[str, FileFacts | None], files: dict[str, str]) -> tuple[int, int]:
        """(let in, left out): of `changes`, the files new to the index that the filters `before` left
        out, and the files gone from it that are still on disk, now left out."""
        old = FileFilter(*before)
        inc, exc = old.spec(old.include), old.spec(old.exclude)
        let_in = sum(1 for rel, f in changes.items() if f is not None and rel not in self.facts and (
            (inc is not None and not inc.match_file(rel)) or (exc is not None and exc.match_file(rel))
            or _file_size(files.get(rel, "")) > before[2]))
        left_out = sum(1 for rel, f in changes.items() if f is None and (self.root / rel).is_file())
        return let_in, left_out

    # -- building ----------------------------------------------------------------------------
    def load_or_build(self, progress: Progress | None = None, save: bool = True) -> BuildReport:
        """Warm start from the cache when it is valid, re-reading only files whose stat changed.
        `save` False: leave a needed cache write to the caller (`save_pending`), so producers it
        attaches first (Engine.open) are in the write."""
        t0 = time.perf_counter()
        report = BuildReport()
        self.phases = report.phases
        self.workers_used = {}
        ph = report.phases
        gc_was = gc.isenabled()
        gc.disable()  # building millions of small objects: the cyclic GC only costs time here
        try:
            with _timed(ph, "discover"):
                found = discover(self.root, self.filter)
            with _timed(ph, "load"):
                hint = self.store.load_states(self.root)
                decided = hint is not None and not hint[1]  # else the cache's own states decide, below
                if hint is not None and decided and self._mostly_new(
                        _stat_changed(found, hint[0]), {r: FileState(*st) for r, st in hint[0].items()}, found.stats):
                    # a checkout that rewrote most of the code (see COLD_FRACTION): not even read
                    log.info("most of the code is new since the cache was written: indexing from scratch")
                    cached = None
                else:
                    cached = self.store.load(self.root)
            for rel, reason in found.skipped:
                self.skipped[rel] = reason
            report.files = len(found.files)
            todo = list(found.files)
            # Warm: install the cached (mutually consistent) facts and bindings, then apply what
            # changed on disk since as ordinary updates.
            if cached is not None and progress:
                progress("loading cache", 0, len(found.files))
            changed: list[str] = []
            cached_filter: tuple[tuple[str, ...], tuple[str, ...], int] | None = None
            tree_before: bytes | None = None
            with _timed(ph, "decode"):
                held = _cached_states(cached) if cached is not None else None
                if cached is not None and held is not None:
                    sections = cached.get("sections")
                    self.loaded_stamp = str(cached.get("stamp") or "")
                    cached_filter = _cached_filter(cached.get("filter"))
                    self.loaded_sections = {k: v for k, v in sections.items() if isinstance(v, bytes)} \
                        if isinstance(sections, dict) else {}
                    self.previous.load(self.loaded_sections.pop(PREVIOUS_SECTION, None))
                    tree_before = self.loaded_sections.pop(TREE_BEFORE_SECTION, None)
                    changed = _stat_changed(found, {rel: (st.size, st.mtime_ns) for rel, st in held.items()})
                    if not decided and self._mostly_new(changed, held, found.stats):
                        # a checkout that rewrote most of the code: updating the index would cost more
                        # than building it (re-extracting, comparing interfaces, re-binding nearly all)
                        log.info("most of the code is new since the cache was written: indexing from scratch")
                        cached = None
                        self.loaded_sections, self.loaded_stamp = {}, ""
                decoded = _decode_cache(cached) if cached is not None else None
            self.loaded_update = None
            if cached is not None and decoded is None:
                log.warning("cache corrupt, rebuilding: %s", self.store.path)
                self.loaded_sections, self.loaded_stamp = {}, ""
                self.previous.load(None)
            del cached
            if decoded is not None:
                facts, binds, states, extra, flow = decoded
                self.state.update(states)
                self.extra_state = extra
                with _timed(ph, "install"):
                    self._install(facts, binds, flow)
                    self._tree_before_packed = tree_before  # written with these very bindings
                report.warm = True
                todo = changed
                del facts, binds, states, extra, flow
            del decoded
            with _timed(ph, "extract"):
                fresh = self._extract_many(todo, found.files, progress)
            report.extracted, report.reused = len(fresh) - self.reused - self.kept, self.reused
            report.partial = self.partial
            changes: dict[str, FileFacts | None] = {
                rel: f for rel, f in fresh.items() if rel not in self.facts or self.facts[rel].digest != f.digest
            }
            changes.update({rel: None for rel in self.facts if rel not in found.files})
            if cached_filter is not None and cached_filter != _filter_key(self.filter):
                report.let_in, report.left_out = self._filter_moves(cached_filter, changes, found.files)
            self.last_paths = (frozenset(), frozenset())
            report.rebound = self._apply(changes, progress, remember=True)
            report.restored = self.restored
            self.loaded_update = self.last_paths if report.warm else None
            # a warm start that found nothing changed has nothing new to write
            self.pending_save = not report.warm or bool(todo) or bool(changes)
            if save:
                self.save_pending()
        finally:
            if gc_was:
                gc.enable()
            gc.freeze()  # long-lived graph objects need not be scanned again
        report.seconds = time.perf_counter() - t0
        self.last_update = time.time()
        return report

    def _tree_before_section(self) -> bytes:
        """The cache section of _TreeBefore: as read when no update unpacked it, else packed now."""
        if self._tree_before_packed is not None:
            return self._tree_before_packed
        return self._tree_before.pack() if self._tree_before is not None else b""

    def _install(self, facts: dict[str, FileFacts], bindings: dict[str, FileBinding],
                 flow: list[Edge] | None = None) -> None:
        self.facts = dict(facts)
        self.bindings = {p: b for p, b in bindings.items() if p in facts}
        self._tree_before, self._tree_before_packed = None, None
        self.ws = Workspace(self.facts)
        # every node exists before any edge is added, so no relink pass is needed
        self.graph.bulk_load({p: nodes_of(f) for p, f in self.facts.items()},
                             {p: b.edges for p, b in self.bindings.items()})
        self._flow_inputs.clear()
        self._flow_values = None
        if flow is None:
            self._update_flow()
        else:  # saved with these very bindings; per-file inputs are read lazily on the first update
            self.graph.set_edges(FLOW_KEY, flow, store=self.graph.extra_edges)
        self.graph.relink()

    def _remember_flow_inputs(self, paths: Iterable[str]) -> None:
        """Record what the flow pass reads of these paths' current bindings, before they change."""
        for p in paths:
            b = self.bindings.get(p)
            if p not in self._flow_inputs and b is not None:
                self._flow_inputs[p] = _flow_input(b)

    def _update_flow(self, changed: Iterable[str] | None = None) -> None:
        """Recompute the callback-flow CALLS edges (flow.py) from every binding's constraints.

        `changed`: the paths just re-bound or removed; when none of them changed its constraints,
        CALLS or OVERRIDES edges, the flow edges cannot have changed and the pass is skipped. When
        they changed only where calls are (lines moved by an edit), the propagated values of the last
        pass stand and only the edges are placed again (0.2 s of a sympy edit otherwise)."""
        inputs = self._flow_inputs
        dirty = changed is None
        moved_only = changed is not None and self._flow_values is not None
        differ: list[str] = []
        for p in (self.bindings if changed is None else changed):
            b = self.bindings.get(p)
            new = _flow_input(b) if b is not None else None
            old = inputs.get(p)
            if old != new:
                dirty = True
                differ.append(p)
                if moved_only and (old is None or new is None or old[2] != new[2]
                                   or without_positions(old[0]) != without_positions(new[0])):
                    moved_only = False
                if new is None:
                    inputs.pop(p, None)
                else:
                    inputs[p] = new
        if not dirty:
            return
        if moved_only and self._flow_values is not None and FLOW_KEY in self.graph.extra_edges:
            # A flow edge is sited at its call, in its caller's file, and which call sites an edge
            # depends on that file's calls alone: the other files' edges stand as they are.
            moved = set(differ)
            items = [(p, inputs[p][0]) for p in sorted(moved) if p in inputs and inputs[p][0]]
            theirs: set[tuple[str, str]] = set().union(*(inputs[p][1] for p in moved if p in inputs))
            fresh = emit_edges(call_sites(items), self._flow_values, theirs)
            kept = [e for e in self.graph.extra_edges[FLOW_KEY] if e.path not in moved]
            self.graph.set_edges(FLOW_KEY, sorted(kept + fresh, key=lambda e: (e.src, e.dst)),
                                 store=self.graph.extra_edges)
            return
        for p, b in self.bindings.items():
            if p not in inputs:
                inputs[p] = _flow_input(b)
        for p in [p for p in inputs if p not in self.bindings]:
            del inputs[p]
        existing: set[tuple[str, str]] = set()
        overrides: list[tuple[str, str]] = []
        for _flows, calls, overs in inputs.values():
            existing |= calls
            overrides.extend(overs)
        items = [(p, inputs[p][0]) for p in sorted(inputs) if inputs[p][0]]
        self._flow_values = flow_values(items, sorted(overrides))
        edges = emit_edges(call_sites(items), self._flow_values, existing)
        self.graph.set_edges(FLOW_KEY, edges, store=self.graph.extra_edges)

    def _replaced(self, changes: dict[str, FileFacts | None]) -> list[FileFacts]:
        """The facts `changes` replaces or removes: the disk versions a warm start or a refresh (which
        leave editor buffers alone) keeps in `previous`, for a checkout back to them."""
        return [old for rel, f in changes.items()
                if (old := self.facts.get(rel)) is not None and (f is None or f.digest != old.digest)]

    def _mostly_new(self, changed: list[str], states: dict[str, FileState],
                    stats: dict[str, tuple[int, int]]) -> bool:
        """Whether files whose content no version the index holds (the cache's, or `previous`) make up
        more than COLD_FRACTION of the workspace's bytes, in more than PARALLEL_THRESHOLD files (fewer
        are updated in well under a second either way). Reads the files whose stat changed (a `touch`
        or a branch switched back changes no content) until the answer is known."""
        limit = COLD_FRACTION * sum(size for size, _ in stats.values())
        if len(changed) < PARALLEL_THRESHOLD or sum(stats[rel][0] if rel in stats else 0 for rel in changed) <= limit:
            return False  # even if every one of them were new
        new = 0
        for rel in changed:
            read = read_source(self.root, rel, self.filter.max_bytes)
            if read.data is None:
                continue
            digest = content_digest(read.data)
            held = states.get(rel)
            if (held is not None and held.digest == digest) or self.previous.holds(rel, digest):
                continue
            new += len(read.data)
            if new > limit:
                return True
        return False

    def _reuse_known(self, todo: list[str], out: dict[str, FileFacts]) -> list[str]:
        """Files whose stat changed but whose content the index already holds (a `touch`, a copied
        tree, a formatter that rewrote nothing) keep their facts; versions it held before come from
        `previous`; the rest, to extract. Extraction depends on the path and content only, so a
        reused entry equals a fresh extraction."""
        self.reused = self.kept = 0
        if not todo or not (self.previous or any(rel in self.facts for rel in todo)):
            return todo
        rest: list[str] = []
        for rel in todo:
            current = self.facts.get(rel)
            if current is None and not self.previous:
                rest.append(rel)
                continue
            read = read_source(self.root, rel, self.filter.max_bytes)
            if read.data is None:
                rest.append(rel)
                continue
            digest = content_digest(read.data)
            if current is not None and current.digest == digest:
                f: FileFacts | None = current
                self.kept += 1
            else:
                f = self.previous.take(rel, digest)
                if f is not None:
                    self.reused += 1
            if f is None:
                rest.append(rel)
                continue
            self.skipped.pop(rel, None)
            out[rel] = f
            self.state[rel] = FileState(read.size, read.mtime_ns, f.digest)
        return rest

    def _extract_many(self, todo: list[str], files: dict[str, str], progress: Progress | None) -> dict[str, FileFacts]:
        global _OLD_FACTS, _WANT_INTERFACES
        out: dict[str, FileFacts] = {}
        todo = self._reuse_known(todo, out)
        _OLD_FACTS = self.facts  # a changed file's kept statements keep their facts (statement_reuse.py)
        _WANT_INTERFACES = not _rebinds_all(len(todo), len(self.facts))
        try:
            self._extract_into(todo, files, progress, out)
        finally:
            _OLD_FACTS, _WANT_INTERFACES = {}, True
        return out

    def _extract_into(self, todo: list[str], files: dict[str, str], progress: Progress | None,
                      out: dict[str, FileFacts]) -> None:
        root = str(self.root)
        items = [(root, rel, self.filter.max_bytes) for rel in todo]
        total = len(items)
        results: list[Extracted] = []
        pooled = False
        if self.workers > 1 and total >= 2 * self.workers and may_start_processes() and (
                total >= PARALLEL_THRESHOLD or _bytes_at_least(files, todo, PARALLEL_BYTES)):
            chunks = _balanced(items, lambda it: _file_size(files.get(it[1], "")), self.workers * 8,
                               1 if total < PARALLEL_THRESHOLD else 16)
            if self.may_fork_workers():
                # forked workers inherit the update's old facts (_OLD_FACTS) and the indexer: nothing to send
                try:
                    with ForkPool(_extract_chunk, [(c, None, _WANT_INTERFACES) for c in chunks], self.workers,
                                  reap_later=True) as fpool:
                        for part in fpool.results():
                            results.extend(_from_chunk(part))
                            if progress:
                                progress("parsing", len(results), total)
                    pooled = True
                except ForkPoolError as exc:
                    log.warning("extracting in this process instead: %s", exc)
                    results = []
            else:
                # the process's default start method (prepare_threaded_process sets forkserver): each job
                # carries its files' old facts, which such a worker cannot inherit
                jobs: list[_Job] = [(c, self._old_facts_for(c), _WANT_INTERFACES) for c in chunks]
                with ProcessPoolExecutor(self.workers) as pool:
                    for part in pool.map(_extract_chunk, jobs):
                        results.extend(_from_chunk(part))
                        if progress:
                            progress("parsing", len(results), total)
                pooled = True
        self.workers_used["extract"] = self.workers if pooled else 1
        if not pooled:
            for i, it in enumerate(items):
                results.append(_extract_one(*it))
                if progress and (i % 50 == 0 or i == total - 1):
                    progress("parsing", i + 1, total)
        if pooled:  # in the order asked (chunks went largest first): the index's order never depends on sizes
            at = {rel: i for i, rel in enumerate(todo)}
            results.sort(key=lambda r: at[r[0]])
        self.partial = sum(r[5] for r in results)
        for rel, facts, reason, size, mtime, _, old_iface in results:
            held = self.facts.get(rel)
            if old_iface is not None and held is not None and held.interface is None:
                held.interface = old_iface  # the worker read these very facts (inherited at the fork)
            if facts is None:
                self.skipped[rel] = reason or "skipped"
                continue
            self.skipped.pop(rel, None)
            out[rel] = facts
            self.state[rel] = FileState(size, mtime, facts.digest)

    @staticmethod
    def _old_facts_for(items: list[tuple[str, str, int]]) -> dict[str, bytes]:
        """The old facts of a chunk's files, packed as the cache holds them, for a worker that cannot
        inherit them: without them a changed file is extracted whole (a Django checkout's extraction
        in the language server: 2.4 s, against 1.2 s keeping its unchanged statements' facts)."""
        out = {}
        for _, rel, _ in items:
            old = _OLD_FACTS.get(rel)
            if old is not None:
                out[rel] = pack_records(facts_to_wire(old))
        return out

    # -- incremental updates -------------------------------------------------------------
    def _apply(self, changed: dict[str, FileFacts | None], progress: Progress | None = None,
               remember: bool = False) -> int:
        """Apply new facts (None = removed) and re-bind what they affect. Returns files re-bound.
        `remember`: keep the versions replaced in `previous` (see _replaced)."""
        self.restored = 0
        if not changed:
            return 0
        with _quiet_gc():
            return self._apply_changes(changed, progress, self._replaced(changed) if remember else [])

    def _apply_changes(self, changed: dict[str, FileFacts | None], progress: Progress | None,
                       replaced: list[FileFacts]) -> int:
        old_ws = self.ws
        # what the tree was before the last large update, and whether this one brings it back
        last, self._tree_before = self._tree_before, None
        if last is None and self._tree_before_packed is not None:
            last = _unpack_tree_before(self._tree_before_packed)
        self._tree_before_packed = None
        before = {p: f.digest for p, f in self.facts.items()} if len(changed) >= TREE_BEFORE_FILES else None
        back: dict[str, FileBinding] | None = None
        if last is not None and all(
                (f.digest if f is not None else None) == last.digests.get(p) for p, f in changed.items()):
            after = dict(before) if before is not None else {p: f.digest for p, f in self.facts.items()}
            for p, f in changed.items():
                if f is None:
                    after.pop(p, None)
                else:
                    after[p] = f.digest
            if after == last.digests and all(last.holds(p) for p, f in changed.items() if f is not None):
                back = last.all_bindings()
        replaced_bindings: dict[str, FileBinding] = {}  # what this update replaces, for a checkout back
        rebind_all = back is None and bool(self.bindings) and _rebinds_all(len(changed), len(self.facts))
        old_iface = {} if rebind_all or back is not None else {
            p: _interface(self.facts[p]) for p in changed if p in self.facts}
        self._remember_flow_inputs(p for p, f in changed.items() if f is None)
        bound_from = {p: self.facts[p] for p in changed if p in self.facts}  # what the old bindings read
        added_or_removed = any((p in self.facts) != (f is not None) for p, f in changed.items())
        for p, f in changed.items():
            if f is None:
                self.facts.pop(p, None)
                gone = self.bindings.pop(p, None)
                if gone is not None:
                    replaced_bindings[p] = gone
            else:
                self.facts[p] = f
        if added_or_removed or old_ws.facts is not self.facts:
            self.ws = Workspace(self.facts, previous=old_ws)
        else:  # same files, same module names: only the changed files' tables are stale
            for p in changed:
                self.ws.info.forget(p)
            self.ws._class_cache.clear()
        ws = self.ws
        rebind = {p for p, f in changed.items() if f is not None}
        # Only files bound before and not re-bound anyway can be affected; a cold build has none, and
        # working out the changed keys would be pure cost there.
        priors: dict[str, PriorBinding] = {}
        if back is not None:
            # every file is as it was before the last update: the bindings that update replaced are
            # right again, and every other file's binding has not changed since
            rebind = {p for p in back if p in self.facts}
        elif rebind_all:
            rebind |= set(self.facts)
        elif any(p not in rebind for p in self.bindings) or any(p not in rebind for p in ws.canonical):
            keys = self._changed_keys(changed, old_iface, old_ws)
            rebind |= self._affected(changed, keys)
            # each re-bound file keeps the site groups of its old binding that the change cannot reach
            frozen = frozenset(keys)
            for p in rebind:
                b = self.bindings.get(p)
                if b is not None and old_ws.canonical.get(p) == ws.canonical.get(p):
                    priors[p] = PriorBinding(b, bound_from.get(p, self.facts[p]), frozen)
        order = sorted(rebind)

        def place_nodes() -> None:
            # nodes before edges, so edges into new nodes can be linked (binding reads the module
            # tables, not the graph); and what the flow pass reads of the old bindings, before they go
            for p in sorted(changed):
                f = changed[p]
                if f is None:
                    self.graph.remove_file(p)
                    self.state.pop(p, None)
                else:
                    self.graph.set_file(p, nodes_of(f))
            self._remember_flow_inputs(order)
            # packing the replaced versions (0.1 s on a Django checkout) runs here, beside the bind
            # pool: nothing else reads them once the new facts are in
            for old in replaced:
                self.previous.remember(old)

        ph = self.phases
        with _timed(ph, "bind"):
            if back is not None:
                place_nodes()  # as before an in-process binding (`while_binding` only runs beside a pool)
                results = [back[p] for p in order]
            else:
                results = self._bind_many(order, progress, priors, sorted(changed), place_nodes)
        self.restored = len(results) if back is not None else 0
        with _timed(ph, "graph"):
            for b in results:
                held = self.bindings.get(b.path)
                if held is not None:
                    replaced_bindings[b.path] = held
                self.bindings[b.path] = b
                self.graph.set_edges(b.path, b.edges)
        if before:  # (a build from nothing has no tree before it)
            self._tree_before = _TreeBefore(before, replaced_bindings, len(replaced_bindings) + TREE_BEFORE_EDITS)
        elif last is not None and back is None:
            # a small update (an editor's buffer, the first files of a checkout back) keeps it: the
            # bindings it replaced are, for files no update since replaced, the ones of that tree
            last.keep_first(replaced_bindings)
            if last.size() <= last.limit:  # else a day of edits would keep a second index's bindings
                self._tree_before = last
        with _timed(ph, "flow"):
            self._update_flow(set(order) | {p for p, f in changed.items() if f is None})
        with _timed(ph, "graph"):
            self.graph.relink()
        self.last_update = time.time()
        reap_exited(0.1)  # the update's workers have ended by now (else soon): no zombie waits for the next pool
        touched = set(changed) | rebind
        self.last_paths = (frozenset(changed), frozenset(touched))
        for listener in list(self.listeners):
            try:
                listener(touched)
            except Exception:  # a listener never breaks the index
                log.exception("index listener failed")
        return len(rebind) if back is None else 0  # files bound: none when their bindings came back

    def _changed_keys(self, changed: dict[str, FileFacts | None], old_iface: dict[str, dict[str, str]],
                      old_ws: Workspace) -> set[str]:
        """The dependency keys (see modules.name_dep) whose meaning `changed` changed."""
        ws = self.ws
        new_iface = {p: _interface(f) for p, f in changed.items() if f is not None}
        # dependency keys whose meaning changed: top-level names of changed files (see modules.name_dep),
        # whole files found by path (conftest.py), and module names whose mapping changed
        names: set[str] = set()
        for p, f in changed.items():
            diff = changed_names(old_iface.get(p, {}), new_iface.get(p, {}))
            if diff or f is None or p not in old_iface:
                names.add(PATH_DEP + p)
            names.update(name_dep(p, top) for top in diff)
        if ws is not old_ws:
            for n in set(old_ws.modules) | set(ws.modules):
                if old_ws.modules.get(n) != ws.modules.get(n):
                    names.add(n)
            names.update(old_ws.prefixes ^ ws.prefixes)
            old_by_path, new_by_path = _modules_by_path(old_ws), _modules_by_path(ws)
            for p in ws.canonical:
                if old_ws.canonical.get(p) != ws.canonical.get(p):
                    # its relative imports now resolve differently: for dependents this is an interface change
                    names.add("\0canonical:" + p)
                    names.update(old_by_path.get(p, ()))
                    names.update(new_by_path.get(p, ()))
                    tops = set(old_iface[p]) if p in old_iface else set()
                    if p in self.facts:
                        tops.update(new_iface[p] if p in new_iface else _interface(self.facts[p]))
                    names.update(name_dep(p, top) for top in tops)
        return names

    def _affected(self, changed: dict[str, FileFacts | None], names: set[str]) -> set[str]:
        """Files whose bindings read a dependency key in `names` (see _changed_keys)."""
        ws = self.ws
        out: set[str] = set()
        if names:
            for p, b in self.bindings.items():
                if p not in changed and not b.deps.isdisjoint(names):
                    out.add(p)
            for p in ws.canonical:
                if "\0canonical:" + p in names:
                    out.add(p)
        return out

    def may_fork_workers(self) -> bool:
        """Whether extraction, binding and the cache writer may fork (forkpool.ForkPool): in a
        single-threaded process, where the owner declared `fork_safe`, and on Linux beside other threads
        too, since such a child runs only the indexer's own code on what it inherited (glibc's allocator
        is fork-safe; macOS's system libraries are not). A fork while another thread holds a lock the
        child needs could deadlock it: those children take none."""
        return (hasattr(os, "fork") and may_start_processes()
                and (threading.active_count() == 1 or self.fork_safe or sys.platform == "linux"))

    def _bind_many(self, order: list[str], progress: Progress | None,
                   priors: dict[str, PriorBinding] | None = None, changed: list[str] | None = None,
                   first: Callable[[], None] | None = None) -> list[FileBinding]:
        """Bind `order` (in a fork pool when large). `first`: the update's own work that needs no
        binding, run beside the pool (with `while_binding`), else before binding in process."""
        global _FORK_WS, _FORK_PRIORS
        priors = priors or {}
        total = len(order)
        # Forked workers share the module table copy-on-write; where none can be forked, bind in process
        # (spawned workers would need the whole module table pickled to them)
        if self.workers > 1 and total >= PARALLEL_THRESHOLD and self.may_fork_workers():
            if total > len(self.facts) // 2:
                # binding most files reads nearly every table: built here once, forked workers
                # inherit them copy-on-write; fewer files build the few they read in the workers
                self.ws.info.build_all()
            _FORK_WS, _FORK_PRIORS = self.ws, priors
            try:
                chunks = _balanced(order, lambda p: self.facts[p].lines, self.workers * 6, 32)
                out: list[FileBinding] = []
                failed: list[BaseException] = []
                try:
                    with ForkPool(_bind_chunk, chunks, self.workers, reap_later=True) as pool:  # the workers are forked now
                        beside = self._start_while_binding(changed or [], first, failed)
                        first = None  # it runs beside the pool
                        try:
                            for part in pool.results():
                                out.extend(part)
                                # a progress call may let readers in (the language server answers
                                # between batches): never while the update's own work beside the pool
                                # still writes the graph and the lexical indexes
                                if progress and (beside is None or not beside.is_alive()):
                                    progress("binding", len(out), total)
                        finally:
                            if beside is not None:
                                beside.join()
                    if failed:
                        raise failed[0]
                    at = {p: i for i, p in enumerate(order)}
                    out.sort(key=lambda b: at[b.path])  # in the order asked, as bound in process
                    if progress:
                        progress("binding", len(out), total)  # all in, and nothing runs beside any more
                    self.workers_used["bind"] = self.workers
                    return out
                except ForkPoolError as exc:
                    if failed:
                        raise failed[0] from exc
                    log.warning("binding in this process instead: %s", exc)
            finally:
                _FORK_WS, _FORK_PRIORS = None, {}
        if first is not None:
            first()
        binder = Binder(self.ws)
        self.workers_used["bind"] = 1
        out = []
        for i, p in enumerate(order):
            out.append(_bind_guarded(binder, p, priors.get(p), pack=total >= PARALLEL_THRESHOLD))
            if progress and (i % 100 == 0 or i == total - 1):
                progress("binding", i + 1, total)
        return out

    def _start_while_binding(self, changed: list[str], first: Callable[[], None] | None,
                             failed: list[BaseException]) -> threading.Thread | None:
        """Run `first` (the update's own work: a failure goes to `failed`, for the caller to raise),
        then the `while_binding` work, in a thread started only once the bind workers are forked (a
        fork beside a running thread can inherit a held lock); None when there is nothing to run."""
        hooks = list(self.while_binding) if changed else []
        if first is None and not hooks:
            return None

        def run() -> None:
            if first is not None:
                try:
                    first()
                except BaseException as exc:  # raised in the update's own thread once joined
                    failed.append(exc)
                    return
            for work in hooks:
                try:
                    work(changed)
                except Exception:  # never breaks the update: the owner catches up on its next read
                    log.exception("work beside the bind pool failed")

        thread = threading.Thread(target=run, name="ctx-lsp-while-binding", daemon=True)
        thread.start()
        return thread

    def rel(self, path: Path | str) -> str:
        """Workspace-relative POSIX path of `path`; raises ValueError when it is outside the root."""
        p = Path(path)
        if not p.is_absolute():
            p = self.root / p
        p = Path(os.path.normpath(p))
        try:
            return p.relative_to(self.root).as_posix()
        except ValueError:
            raise ValueError(f"{path} is outside the workspace root {self.root}") from None

    def accepts(self, rel: str) -> bool:
        """Whether a workspace-relative path would be indexed (filters and skip rules)."""
        if not rel.endswith(".py"):
            return False
        from ctx_lsp.index.discovery import is_utf8, listing_skips, skipped_dir_name

        if not is_utf8(rel):
            return False
        parts = rel.split("/")
        if any(map(skipped_dir_name, parts[:-1])):
            return False
        inc = self.filter.spec(self.filter.include)
        exc = self.filter.spec(self.filter.exclude)
        if inc is not None and not inc.match_file(rel):
            return False
        if exc is not None and exc.match_file(rel):
            return False
        return not listing_skips(self.root, rel)  # .gitignore and virtual environments, as discover

    def accepts_dir(self, rel: str) -> bool:
        """Whether discovery goes into the workspace-relative directory `rel` (for a file watcher: no
        watch where nothing is listed): no part of it a skipped directory, and neither it nor a
        directory above it left out by an exclude glob, a `.gitignore` or a virtual environment."""
        from ctx_lsp.index.discovery import listing_skips, skipped_dir_name, spec_matches

        parts = rel.split("/")
        if any(map(skipped_dir_name, parts)):
            return False
        exc = self.filter.spec(self.filter.exclude)
        # discovery tests each directory on its way down, as "dir/" (a glob may name a parent only)
        if exc is not None and any(spec_matches(exc, "/".join(parts[: i + 1]) + "/") for i in range(len(parts))):
            return False
        return not listing_skips(self.root, rel, is_dir=True)

    def update_file(self, rel: str, text: str, overlay: bool = False,
                    disk_stat: tuple[int, int] | None = None) -> int:
        """Set one file's content (an editor buffer or the disk). Returns the number of files re-bound.

        `disk_stat`: (size, mtime_ns) of the file the text was read from. Text over the size limit, or
        too deeply nested to index, drops the file with its reason, as discovery would."""
        if len(text) > self.filter.max_bytes:  # more code points than bytes allowed: no need to encode
            return self._skip_file(rel, too_large(len(text.encode("utf-8", "surrogatepass")), self.filter.max_bytes))
        data = text.encode("utf-8", "surrogatepass")
        if len(data) > self.filter.max_bytes:
            return self._skip_file(rel, too_large(len(data), self.filter.max_bytes))
        digest = content_digest(data)
        old = self.facts.get(rel)
        st = self.state.get(rel)
        if old is not None and old.digest == digest and st is not None and st.overlay == overlay:
            return 0
        facts = None
        if old is not None and old.digest != digest and old.tops and not old.errors:
            # an edit whose old text is at hand re-extracts the statements it touched; otherwise (a
            # file changed on disk), or when that is most of the file (an edit inside a class that
            # spans it: a test case), the statements and methods whose text it kept keep their facts
            before = self._old_text(rel, old)
            facts = self._splice(rel, old, before, text, digest) if before is not None else None
            if facts is None:
                facts = _reuse_guarded(old, text, digest)
        reason = None
        if facts is None:
            facts, reason = _extract_guarded(rel, text, digest)
        if facts is None:
            return self._skip_file(rel, reason or "skipped")
        self.skipped.pop(rel, None)
        size, mtime = disk_stat if disk_stat is not None else (len(data), -1)
        if not overlay and disk_stat is None:
            try:
                s = (self.root / rel).stat()
                size, mtime = s.st_size, s.st_mtime_ns
            except OSError:
                pass
        self.state[rel] = FileState(size, mtime, digest, overlay)
        # the retrieval engine packs spans from what the index saw: keep unsaved buffers' text
        if overlay:
            self.overlay_text[rel] = text
        else:
            self.overlay_text.pop(rel, None)
        if old is not None and old.digest == digest:
            return 0
        return self._apply({rel: facts})

    def _old_text(self, rel: str, old: FileFacts) -> str | None:
        """The text `old` was made from, when it is at hand: the editor buffer the index last saw, or
        the disk's bytes if they still match (an edit); None after the disk changed (a checkout)."""
        st = self.state.get(rel)
        if st is not None and st.overlay and st.digest == old.digest and rel in self.overlay_text:
            return self.overlay_text[rel]
        read = read_source(self.root, rel, self.filter.max_bytes)
        if read.data is None or content_digest(read.data) != old.digest:
            return None
        before, decode_error = decode_source(read.data)
        return None if decode_error else before

    def _splice(self, rel: str, old: FileFacts, before: str, text: str, digest: str) -> FileFacts | None:
        """The new facts spliced from the old ones (index/splice.py) and the text they were made from."""
        if not old.tops or old.errors:
            return None
        try:
            return splice(old, before, text, digest)
        except Exception:  # a splice never costs an edit: extract the whole file instead
            log.exception("splicing the facts of %s failed; extracting it whole", rel)
            return None

    def remove_file(self, rel: str) -> int:
        if rel not in self.facts:
            return 0
        return self._apply({rel: None})

    def _skip_file(self, rel: str, reason: str) -> int:
        """Drop one file from the index and remember why (reported by `errors`)."""
        self.skipped[rel] = reason
        self.overlay_text.pop(rel, None)
        self.state.pop(rel, None)
        return self.remove_file(rel)

    def reload_file(self, rel: str) -> int:
        """Index one file as it is on disk now (saved, closed, changed on disk), read through
        `read_source`; a file that is gone, refused or not accepted leaves the index. Returns files re-bound."""
        read = read_source(self.root, rel, self.filter.max_bytes)
        if read.data is None or not self.accepts(rel):
            if read.data is None and read.reason != DELETED:
                return self._skip_file(rel, read.reason or "skipped")
            self.skipped.pop(rel, None)
            self.overlay_text.pop(rel, None)
            return self.remove_file(rel)
        return self.update_file(rel, decode_source(read.data)[0], overlay=False, disk_stat=(read.size, read.mtime_ns))

    def disk_text(self, rel: str) -> str | None:
        """The disk text of one workspace file (read through `read_source`), None when it is refused."""
        data = read_source(self.root, rel, self.filter.max_bytes).data
        return decode_source(data)[0] if data is not None else None

    def text_of(self, rel: str) -> str:
        """A file's text as the index sees it: the editor buffer when one is open, else the disk ("" when
        the disk refuses it)."""
        overlay = self.overlay_text.get(rel)
        return overlay if overlay is not None else (self.disk_text(rel) or "")

    def rename_file(self, old: str, new: str, text: str | None = None) -> int:
        """A file moved from `old` to `new`: `old` leaves the index, and `new` is indexed as any file
        there would be (`reload_file`; from `text`, its content, when given): a name or folder the
        index does not take, or the size limit, keeps it out. Returns the number of files re-bound."""
        for table in (self.skipped, self.overlay_text, self.state):
            table.pop(old, None)
        n = self.remove_file(old)
        if text is None:
            return n + self.reload_file(new)
        if not self.accepts(new):
            for table in (self.skipped, self.overlay_text, self.state):
                table.pop(new, None)
            return n + self.remove_file(new)
        return n + self.update_file(new, text)

    def refresh(self) -> list[str]:
        """Bring the index in line with the disk (files whose size or mtime changed, added, removed).

        Files held as editor overlays are left alone. Returns the changed paths.
        """
        with _quiet_gc():
            return self._refresh()

    def _refresh(self) -> list[str]:
        self.phases, self.workers_used = {}, {}
        with _timed(self.phases, "discover"):
            found = discover(self.root, self.filter)
        changed: dict[str, FileFacts | None] = {}
        for rel, reason in found.skipped:
            self.skipped[rel] = reason
        todo: list[str] = []
        for rel in found.files:
            st = self.state.get(rel)
            if st is not None and st.overlay:
                continue
            listed = found.stats.get(rel)
            if st is None or listed is None or (st.size, st.mtime_ns) != listed:
                todo.append(rel)
        with _timed(self.phases, "extract"):
            fresh = self._extract_many(todo, found.files, None)
        for rel, f in fresh.items():
            old = self.facts.get(rel)
            if old is None or old.digest != f.digest:
                changed[rel] = f
        for rel in list(self.facts):
            st = self.state.get(rel)
            if rel not in found.files and not (st is not None and st.overlay):
                changed[rel] = None
        self._apply(changed, remember=True)
        if (changed or todo) and self.defer_save:
            self.pending_save = True
        elif changed or todo:
            with _timed(self.phases, "save"):
                self.save(background=self.background_save)
        return sorted(changed)

    # -- persistence and status ------------------------------------------------------------
    def save(self, background: bool = False) -> None:
        """Write the cache. `background`: from a forked child, so the caller need not wait for the
        ~0.7-1.7 s a Django-sized cache takes to pack and write; only where `may_fork_workers`, else
        inline. Writes never overlap: each waits for the last; a failed child's write is redone here then.

        Beside other threads (the language server, on Linux) the child is kept as a ForkPool child
        is: it packs and writes what it inherited, logs nothing and never flushes a standard stream."""
        self.pending_save = False  # any write is the one a refresh or a start left pending
        self.wait_saved()
        if background and self.may_fork_workers():
            sys.stdout.flush()
            sys.stderr.flush()  # the child must not write the parent's buffered output a second time
            pid = fork_quiet()
            if pid == 0:
                code = 0
                try:
                    self._write_cache(raising=True)
                except BaseException:
                    log.exception("writing the cache failed")
                    code = 1
                finally:
                    os._exit(code)  # no atexit handlers, no buffers flushed: the parent owns those
            self._saver = pid
            _WRITERS[pid] = weakref.ref(self)
            return
        self._write_cache()

    def save_soon(self) -> None:
        """A write after work the owner did not ask to wait for (jedi refinement): left pending for the
        owner with `defer_save`, else made now."""
        if self.defer_save:
            self.pending_save = True
        else:
            self.save()

    def save_pending(self) -> None:
        """The cache write the last load_or_build (or, with `defer_save`, refresh) left to its caller, if any."""
        if self.pending_save:
            self.pending_save = False
            with _timed(self.phases, "save"):
                self.save(background=self.background_save)

    def wait_saved(self) -> None:
        """Wait for a background cache write; if it failed, write the cache here instead."""
        pid, self._saver = self._saver, None
        if pid is None:
            return
        _WRITERS.pop(pid, None)
        code = _reap(pid)
        if code != 0:
            log.warning("the background cache write exited with status %s; writing it in process", code)
            self._write_cache()

    def _write_cache(self, raising: bool = False) -> None:
        """`raising`: an OSError is raised (a forked writer's exit status reports it), else logged."""
        # an unsaved buffer is never persisted as if it were the disk
        rels = [rel for rel in self.facts if (st := self.state.get(rel)) is not None and not st.overlay]

        def entries() -> Iterator[tuple[str, list[Any]]]:
            for rel in rels:
                st, b = self.state[rel], self.bindings.get(rel)
                yield rel, [st.size, st.mtime_ns, st.digest, facts_to_wire(self.facts[rel]),
                            binding_to_wire(b) if b else None]

        try:
            flow = [edge_to_wire(e) for e in self.graph.extra_edges.get(FLOW_KEY, [])]
            # a section nobody here owns is written back as read: each describes the file versions it
            # holds (the lexical one by digest), so an older one is still correct to start from
            sections = dict(self.loaded_sections)
            self.writing_stamp = os.urandom(8).hex()
            for name, make in sorted(self.save_sections.items()):
                try:
                    value = make()
                    sections[name] = value if isinstance(value, bytes) else pack_records(value)
                except Exception:  # a derived index is rebuilt without its section; the cache is still written
                    log.exception("cache section %s failed", name)
            self.store.save(self.root, entries(), len(rels),
                            {"extra": self.extra_state, "flow": flow, "sections": sections,
                             "stamp": self.writing_stamp, "filter": list(_filter_key(self.filter))})
            self.store.save_states(self.root, {rel: (self.state[rel].size, self.state[rel].mtime_ns,
                                                     self.state[rel].digest) for rel in rels},
                                   bool(self.previous))
        except OSError as exc:
            if raising:
                raise
            log.warning("could not write the cache %s: %s", self.store.path, exc)

    def errors(self) -> list[dict[str, str]]:
        out = [{"path": p, "message": m} for p, f in sorted(self.facts.items()) for m in f.errors]
        out.extend({"path": p, "message": r} for p, r in sorted(self.skipped.items()))
        return out

    def resolution_counts(self) -> dict[str, int]:
        internal = sum(b.internal for b in self.bindings.values())
        external = sum(b.external for b in self.bindings.values())
        unresolved = sum(len(b.unresolved) for b in self.bindings.values())
        return {"internal": internal, "external": external, "unresolved": unresolved}

    def dirty_files(self) -> list[str]:
        """Files whose editor buffer differs from the disk: an open buffer nobody edited is not dirty.
        Every overlay's text is in overlay_text: no scan of all file states (2 ms per query on Django);
        each buffer's disk copy is read again only when its stat or the buffer changed."""
        for gone in self._clean_overlays.keys() - self.overlay_text.keys():  # buffers closed since
            del self._clean_overlays[gone]
        out = []
        for p in self.overlay_text:
            st = self.state.get(p)
            if st is not None and st.overlay and not self._same_as_disk(p, st.digest):
                out.append(p)
        return sorted(out)

    def _same_as_disk(self, rel: str, digest: str) -> bool:
        try:
            found = os.stat(self.root / rel)
        except OSError:
            return False  # only in the editor: a new file, or one removed on disk
        key = (digest, found.st_size, found.st_mtime_ns)
        held = self._clean_overlays.get(rel)
        if held is not None and held[0] == key:
            return held[1]
        read = read_source(self.root, rel, self.filter.max_bytes)
        same = read.data is not None and content_digest(read.data) == digest
        self._clean_overlays[rel] = (key, same)
        return same


@dataclass
class IndexSummary:
    root: str
    files: int
    nodes: int
    edges: dict[str, int] = field(default_factory=dict)
    unresolved_sites: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0


def summarize(index: WorkspaceIndex, seconds: float) -> dict[str, Any]:
    """The `ctx-lsp index --json` object (a documented contract)."""
    return {
        "root": str(index.root),
        "files": len(index.facts),
        "nodes": index.graph.number_of_nodes(),
        "edges": index.graph.edge_counts(),
        "unresolved_sites": index.resolution_counts()["unresolved"],
        "resolution": index.resolution_counts(),
        "errors": index.errors(),
        "seconds": round(seconds, 3),
        "phases_s": {k: round(v, 3) for k, v in index.phases.items()},
    }
