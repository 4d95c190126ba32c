"""jedi refinement: resolve the call sites the static binder left open, and audit a sample of its bindings.

The static pass (bind.py) is fast and never guesses; what it cannot bind it lists in
`FileBinding.unresolved`. This pass asks jedi (`Script.goto`, then `Script.infer` when goto stops
at an assignment) about exactly those sites, one file at a time, after the graph is already
queryable. A target inside the workspace becomes an edge with resolver "jedi"; a target outside it
(stdlib, site-packages, builtins, stubs) is only counted, never mapped to a same-named project symbol.

It also cross-checks a deterministic sample of static call bindings per file and counts how many jedi
confirms or contradicts, so the static resolver's precision is measured, not assumed.

Results are cached per file by content digest in `index.extra_state["jedi"]` (persisted by
`index.save()`), so an unchanged file is never resolved twice, across restarts. When the index reports
changed files (its listeners), their jedi edges are dropped and they are queued again: jedi's answer for
a file depends on the files it imports, and the index's changed set includes files re-bound because a
dependency's interface changed.

Threading: `run` does the slow jedi work without any lock and takes `lock` only for the short sections
that read a file's facts or write its edges; a result computed from content that changed meanwhile is
discarded. jedi itself is not thread-safe, so all jedi work in this process goes through JEDI_LOCK (taken
per file, never while holding `lock`).
"""

from __future__ import annotations

import gc
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from ctx_lsp.index.bind import Binder, FileBinding
from ctx_lsp.index.discovery import read_source
from ctx_lsp.index.facts import CALL, Def, FileFacts, content_digest, decode_source
from ctx_lsp.index.model import RESOLVER_JEDI, Edge, EdgeKind, symbol_id
from ctx_lsp.index.store import edge_from_wire, edge_to_wire
from ctx_lsp.index.workspace import WorkspaceIndex

log = logging.getLogger(__name__)

STATE_KEY = "jedi"
CACHE_VERSION = 4  # bump when the meaning of cached results changes (4: no dynamic parameter inference)
JEDI_LOCK = threading.RLock()  # every jedi call in this process; jedi is not thread-safe

Progress = Callable[[str, int, int], None]
SourceProvider = Callable[[str], "str | None"]  # rel path -> editor buffer text, or None for the disk

_STATIC_CALL_KINDS = (EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value)
_CALLABLE_TYPES = ("class", "function")  # jedi Name.type values an edge can point at directly
_STAT_KEYS = ("sites", "internal", "external", "unresolved", "unresolved_local", "errors", "goto_calls", "infer_calls",
              "sampled", "confirmed", "confirmed_alias", "contradicted", "contradicted_stub", "jedi_external", "jedi_unresolved", "added_edges")
MAX_EXAMPLES_PER_FILE = 3
MAX_TARGETS_PER_SITE = 3  # jedi may return several definitions (conditional defs); keep a few
PARSO_CACHE_CAP = 400  # parsed trees kept in memory during a run before the cache is flushed (django: +170 MB)
GC_EVERY_FILES = 25  # full collections: jedi's per-Script inference state is cyclic garbage


def _kind_for(d: Def) -> str:
    if d.kind == "class":
        return EdgeKind.INSTANTIATES.value
    if d.kind == "variable":
        return EdgeKind.REFERENCES.value
    return EdgeKind.CALLS.value


def _sample_key(path: str, line: int, col: int) -> str:
    # str hash() is salted per process; a content hash keeps the sample identical across runs
    return hashlib.blake2b(f"{path}:{line}:{col}".encode(), digest_size=8).hexdigest()


class _Resolution:
    """What jedi said about one position: workspace targets (node id -> Def) and whether it left the workspace."""

    __slots__ = ("targets", "external", "unmapped", "from_stub")

    def __init__(self) -> None:
        self.targets: dict[str, Def] = {}
        self.external = False
        self.unmapped = False  # landed inside the workspace on something that is not a graph node
        self.from_stub = False  # answered from a stub of the workspace package (stubs may name a base class)


class Refiner:
    """Refines one WorkspaceIndex with jedi. Create it after the index is loaded; call `run` in a worker."""

    def __init__(self, index: WorkspaceIndex, *, sample_per_file: int = 5, lock: AbstractContextManager | None = None,
                 sources: SourceProvider | None = None, attach: bool = True) -> None:
        self.index = index
        self.sample_per_file = sample_per_file
        self.parso_cache_cap = PARSO_CACHE_CAP
        self.lock: AbstractContextManager = lock if lock is not None else nullcontext()
        self.sources = sources
        self._mu = threading.Lock()  # guards the fields below (listener vs worker)
        self._generation: dict[str, int] = {}  # bumped when a file is invalidated
        self.running = False
        self.counters = {"goto_calls": 0, "infer_calls": 0, "files_refined": 0, "files_stale": 0,
                         "file_errors": 0, "invalidated": 0}
        self.last_run: dict[str, Any] = {}
        self._project: Any = None
        self._tops: tuple[int, set[str]] | None = None
        with self.lock:
            self._install_cached()
        if attach:
            index.listeners.append(self._on_change)

    def detach(self) -> None:
        try:
            self.index.listeners.remove(self._on_change)
        except ValueError:
            pass

    # -- cache ---------------------------------------------------------------------------------
    @property
    def cache(self) -> dict[str, dict[str, Any]]:
        state = self.index.extra_state.get(STATE_KEY)
        if not isinstance(state, dict) or state.get("v") != CACHE_VERSION or not isinstance(state.get("files"), dict):
            state = {"v": CACHE_VERSION, "files": {}}
            self.index.extra_state[STATE_KEY] = state
        return state["files"]

    def _valid(self, path: str, entry: dict[str, Any] | None) -> bool:
        facts = self.index.facts.get(path)
        return entry is not None and facts is not None and entry.get("digest") == facts.digest

    def _install_cached(self) -> None:
        """Put cached jedi edges of unchanged files into the graph (warm start); forget the rest."""
        cache = self.cache
        graph = self.index.graph
        with self._mu:
            self._install_locked(cache, graph)

    def _install_locked(self, cache: dict[str, dict[str, Any]], graph: Any) -> None:
        for path in list(cache):
            if self._valid(path, cache[path]):
                edges = [edge_from_wire(w) for w in cache[path].get("edges", [])]
                graph.set_edges(f"{STATE_KEY}:{path}", edges, store=graph.extra_edges)
            else:
                del cache[path]
                if f"{STATE_KEY}:{path}" in graph.extra_edges:
                    graph.set_edges(f"{STATE_KEY}:{path}", [], store=graph.extra_edges)
                    graph.extra_edges.pop(f"{STATE_KEY}:{path}", None)

    def _on_change(self, paths: set[str]) -> None:
        """Index listener (called with the index's caller holding its lock): drop and re-queue these files."""
        graph = self.index.graph
        cache = self.cache
        with self._mu:
            for path in paths:
                self._generation[path] = self._generation.get(path, 0) + 1
                if cache.pop(path, None) is not None:
                    self.counters["invalidated"] += 1
                key = f"{STATE_KEY}:{path}"
                if key in graph.extra_edges:
                    graph.set_edges(key, [], store=graph.extra_edges)
                    graph.extra_edges.pop(key, None)

    # -- what needs work -----------------------------------------------------------------------
    def _has_work(self, path: str) -> bool:
        b = self.index.bindings.get(path)
        if b is None:
            return False
        if b.unresolved:
            return True
        return self.sample_per_file > 0 and any(e.kind in _STATIC_CALL_KINDS and e.path == path for e in b.edges)

    def _work_paths(self) -> list[str]:
        # list() copies atomically under the GIL: safe even if another thread updates the index meanwhile
        return [p for p in sorted(list(self.index.bindings)) if self._has_work(p)]

    def pending(self, priority_paths: Iterable[str] = ()) -> list[str]:
        """Files to refine, open files first, then non-test files, then tests."""
        cache = self.cache
        todo = [p for p in self._work_paths() if not self._valid(p, cache.get(p))]
        prio = {p: i for i, p in enumerate(priority_paths)}
        facts = self.index.facts
        return sorted(todo, key=lambda p: (prio.get(p, len(prio)), facts[p].is_test_file if p in facts else True, p))

    # -- status --------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        with self._mu:
            cache = dict(self.cache)
            work = self._work_paths()
        totals = dict.fromkeys(_STAT_KEYS, 0)
        done = 0
        for p in work:
            entry = cache.get(p)
            if not self._valid(p, entry):
                continue
            done += 1
            for k, v in entry.get("stats", {}).items():  # type: ignore[union-attr]
                if k in totals:
                    totals[k] += v
        examples: list[dict[str, Any]] = []
        for p in sorted(cache):
            examples.extend(x for x in cache[p].get("examples", []) if x.get("verdict") == "contradicted")
            if len(examples) >= 20:
                break
        out: dict[str, Any] = {"done": done, "total": len(work), "running": self.running}
        out.update(totals)
        out["goto_calls"] = self.counters["goto_calls"]  # made by this process (cached files cost none)
        out["infer_calls"] = self.counters["infer_calls"]
        out["cached_goto_calls"] = totals["goto_calls"]
        out["files_refined"] = self.counters["files_refined"]
        out["files_stale"] = self.counters["files_stale"]
        out["file_errors"] = self.counters["file_errors"]
        out["contradiction_examples"] = examples[:20]
        out["last_run"] = dict(self.last_run)
        return out

    # -- the run -------------------------------------------------------------------------------
    def run(self, priority_paths: Iterable[str] = (), progress: Progress | None = None,
            should_stop: Callable[[], bool] = lambda: False, budget_s: float | None = None,
            lock: AbstractContextManager | None = None, save: bool = True) -> dict[str, Any]:
        """Refine every file that needs it (or until `should_stop()` / `budget_s`). Returns `status()`.

        Never raises because of a file's content: problems are counted per site and per file.
        """
        if lock is not None:
            self.lock = lock
        t0 = time.perf_counter()
        priority = list(priority_paths)
        self.running = True
        refined = 0
        stopped = ""
        try:
            with self.lock:
                self._install_cached()
                todo = self.pending(priority)
                total = len(self._work_paths())
            done = total - len(todo)
            if not todo:
                return self._finish(t0, refined, stopped)
            with _jedi_tuning(self.index.cache_dir):
                with JEDI_LOCK:
                    self._project = self._make_project()
                start_gen = dict(self._generation)
                while todo:
                    for path in todo:
                        if should_stop():
                            stopped = "cancelled"
                            break
                        if budget_s is not None and time.perf_counter() - t0 > budget_s:
                            stopped = "budget"
                            break
                        if self._refine_path(path, should_stop):
                            refined += 1
                        done += 1
                        if progress:
                            progress("jedi", min(done, total), total)
                        _trim_parso_cache(self.parso_cache_cap)
                        if done % GC_EVERY_FILES == 0:
                            # with the raised gen-0 threshold, per-file garbage that reached gen 2 would
                            # otherwise wait for a rare full collection; the index's graph is frozen (cheap)
                            gc.collect()
                    if stopped:
                        break
                    with self.lock:
                        with self._mu:
                            # only files invalidated while we worked; one we could not read waits for a later run
                            changed = {p for p, g in self._generation.items() if start_gen.get(p, 0) != g}
                            start_gen = dict(self._generation)
                        todo = [p for p in self.pending(priority) if p in changed]
                    total += len(todo)
            if save and refined:
                with self.lock:
                    self.index.save_soon()
            return self._finish(t0, refined, stopped)
        finally:
            self._project = None
            self.running = False

    def _finish(self, t0: float, refined: int, stopped: str) -> dict[str, Any]:
        self.running = False
        self.last_run = {"seconds": round(time.perf_counter() - t0, 3), "files": refined, "stopped": stopped or None}
        return self.status()

    def _make_project(self) -> Any:
        """One jedi Project per run; workspace source roots come before site-packages on its sys.path.

        Without that, `import requests` inside the requests sdist (a src/ layout) resolves to an installed
        copy and every such call would look external.
        """
        import jedi

        roots = _source_roots(self.index)
        root = str(self.index.root)
        try:
            env = jedi.get_default_environment()
            base = list(env.get_sys_path())
            return jedi.Project(root, sys_path=roots + [p for p in base if p not in roots], environment_path=None)
        except Exception:  # no usable environment details: fall back to jedi's own defaults
            log.debug("jedi environment sys.path unavailable", exc_info=True)
            return jedi.Project(root, added_sys_path=roots)

    def _read(self, path: str, digest: str) -> str | None:
        """The text the facts were extracted from, or None when it is no longer available."""
        if self.sources is not None:
            text = self.sources(path)
            if text is not None:
                return text if content_digest(text.encode("utf-8", "surrogatepass")) == digest else None
        data = read_source(self.index.root, path, self.index.filter.max_bytes).data
        if data is None:
            return None
        if content_digest(data) != digest:
            return None  # an unsaved editor buffer or a change not yet indexed: try again later
        return decode_source(data)[0]

    def _refine_path(self, path: str, should_stop: Callable[[], bool]) -> bool:
        with self.lock:
            facts = self.index.facts.get(path)
            binding = self.index.bindings.get(path)
            with self._mu:
                gen = self._generation.get(path, 0)
        if facts is None or binding is None:
            return False
        text = self._read(path, facts.digest)
        if text is None:  # the facts came from a buffer we cannot see, or the disk changed: next run
            self.counters["files_stale"] += 1
            return False
        try:
            with JEDI_LOCK:  # never held together with self.lock: no lock-order inversion with the server
                entry = self._refine_text(path, facts, binding, text, should_stop)
        except Exception as exc:  # a jedi failure on a whole file (Script construction etc.)
            log.debug("jedi failed on %s: %s", path, exc, exc_info=True)
            self.counters["file_errors"] += 1
            entry = {"edges": [], "stats": dict.fromkeys(_STAT_KEYS, 0), "examples": [],
                     "error": f"{type(exc).__name__}: {exc}"[:200]}
            entry["stats"]["errors"] = 1
        if entry is None:  # stopped midway: nothing cached
            return False
        entry["digest"] = facts.digest
        edges = [edge_from_wire(w) for w in entry["edges"]]
        with self.lock:
            current = self.index.facts.get(path)
            with self._mu:
                if current is None or current.digest != facts.digest or self._generation.get(path, 0) != gen:
                    self.counters["files_stale"] += 1
                    return False
                self.cache[path] = entry
            self.index.graph.set_edges(f"{STATE_KEY}:{path}", edges, store=self.index.graph.extra_edges)
        self.counters["files_refined"] += 1
        return True

    # -- one file --------------------------------------------------------------------------------
    def _refine_text(self, path: str, facts: FileFacts, binding: FileBinding, text: str,
                     should_stop: Callable[[], bool]) -> dict[str, Any] | None:
        import jedi

        stats = dict.fromkeys(_STAT_KEYS, 0)
        examples: list[dict[str, Any]] = []
        abs_path = str(self.index.root / path)
        script = jedi.Script(text, path=abs_path, project=self._project)
        existing = {e.key() for e in binding.edges}
        lines = text.splitlines()
        chains = {(st.line, st.col): st.chain for st in facts.sites}
        new_edges: dict[tuple[str, str, str], Edge] = {}

        def src_of(scope: str) -> str:
            return symbol_id(path, scope) if scope else path

        for i in binding.unresolved:
            if should_stop():
                return None
            if not 0 <= i < len(facts.sites):
                continue
            site = facts.sites[i]
            if site.kind != CALL or site.chain[-1].endswith("()"):
                continue  # `f(a)(b)`: jedi's goto names f, not the function f returned
            stats["sites"] += 1
            try:
                res = self._resolve(script, site.line, _name_col(lines, site.line, site.col, site.chain), stats)
            except Exception:  # jedi raising on one position must not lose the file
                stats["errors"] += 1
                continue
            if res.targets:
                stats["internal"] += 1
                src = src_of(site.scope)
                # jedi's inferred values are a set: sorted, the few kept are the same on every run
                for dst, d in sorted(res.targets.items())[:MAX_TARGETS_PER_SITE]:
                    key = (src, dst, _kind_for(d))
                    if key in existing or key in new_edges or src == dst:
                        continue  # the static pass already has that edge; one edge per key in the graph
                    new_edges[key] = Edge(src, dst, key[2], path, site.line, site.col, RESOLVER_JEDI)
            elif res.external:
                stats["external"] += 1
            else:
                stats["unresolved"] += 1
                if res.unmapped:  # jedi stopped at a parameter or local it could not infer a callable for
                    stats["unresolved_local"] += 1

        for e in self._sample(path, binding):
            if should_stop():
                return None
            stats["sampled"] += 1
            try:
                col = _name_col(lines, e.line, e.col, chains.get((e.line, e.col), ()))
                res = self._resolve(script, e.line, col, stats)
            except Exception:
                stats["errors"] += 1
                stats["jedi_unresolved"] += 1
                continue
            if e.dst in res.targets:
                stats["confirmed"] += 1
                continue
            if any(Binder(self.index.ws).returned_def(t) == e.dst for t in res.targets) or self._wrapper_of(res, e.dst):
                # `@app.route("/")`: jedi names the factory; the static edge is the def it returns. A
                # decorated def: jedi names the def; the static edge is the wrapper that runs for it
                stats["confirmed"] += 1
                continue
            if res.targets and self._alias_of(res, e.dst):
                # jedi stops at an alias (`register = registry.register`); static followed it to its value
                stats["confirmed"] += 1
                stats["confirmed_alias"] += 1
                continue
            if res.targets and all(d.kind == "variable" for d in res.targets.values()):
                # jedi stops at the variable holding the callee (`local = Local()`, then `local(x)`,
                # which runs `Local.__call__`): a name, not a call target, so no verdict either way
                verdict = "jedi_unresolved"
            else:
                verdict = "contradicted" if res.targets else ("jedi_external" if res.external else "jedi_unresolved")
            stats[verdict] += 1
            if verdict == "contradicted" and res.from_stub:
                stats["contradicted_stub"] += 1
            if sum(1 for x in examples if x["verdict"] == verdict) < MAX_EXAMPLES_PER_FILE:
                line_text = lines[e.line - 1] if 0 < e.line <= len(lines) else ""
                examples.append({"verdict": verdict, "path": path, "line": e.line, "col": e.col, "static": e.dst,
                                 "static_resolver": e.resolver, "jedi": sorted(res.targets)[:3],
                                 "code": line_text.strip()[:160]})

        edges = sorted(new_edges.values(), key=lambda x: (x.line, x.col, x.dst, x.kind))
        stats["added_edges"] = len(edges)
        return {"edges": [edge_to_wire(x) for x in edges], "stats": stats, "examples": examples}

    def _wrapper_of(self, res: _Resolution, dst: str) -> bool:
        """Whether `dst` is the wrapper a decorator of one of jedi's targets returns."""
        try:
            binder = Binder(self.index.ws)
            return any(dst in binder.wrappers(node_id) for node_id in res.targets)
        except Exception:  # read without the index lock; a concurrent update may get in the way: no verdict
            log.debug("wrapper check failed", exc_info=True)
        return False

    def _alias_of(self, res: _Resolution, dst: str) -> bool:
        """Whether one of jedi's targets is a variable whose assigned value the static binder resolves to `dst`."""
        try:
            binder = Binder(self.index.ws)
            for node_id, d in res.targets.items():
                if d.kind == "variable" and binder.deref_variable(("sym", node_id), 0) == ("sym", dst):
                    return True
        except Exception:  # read without the index lock; a concurrent update may get in the way: no verdict
            log.debug("alias check failed", exc_info=True)
        return False

    def _sample(self, path: str, binding: FileBinding) -> list[Edge]:
        if self.sample_per_file <= 0:
            return []
        static = [e for e in binding.edges if e.kind in _STATIC_CALL_KINDS and e.path == path]
        static.sort(key=lambda e: _sample_key(path, e.line, e.col))
        return static[: self.sample_per_file]

    def _resolve(self, script: Any, line: int, col: int, stats: dict[str, int]) -> _Resolution:
        """goto (following imports); when it stops at an assignment or parameter, infer the value too."""
        res = _Resolution()
        stats["goto_calls"] += 1
        self.counters["goto_calls"] += 1
        names = script.goto(line, col, follow_imports=True)
        need_infer = False
        for n in names:
            if n.type in _CALLABLE_TYPES:
                self._map(n, res)
            elif n.type in ("statement", "param", "instance"):
                need_infer = True
                self._map(n, res, variables_only=True)
            elif n.type == "property":
                self._map(n, res)
        if need_infer:
            stats["infer_calls"] += 1
            self.counters["infer_calls"] += 1
            inferred = [n for n in script.infer(line, col) if n.type in _CALLABLE_TYPES]
            if inferred:
                # the value wins over the variable that holds it (`make = Factory; make()` calls Factory)
                variables = {k: v for k, v in res.targets.items() if v.kind == "variable"}
                for k in variables:
                    del res.targets[k]
                for n in inferred:
                    self._map(n, res)
        return res

    def _map(self, name: Any, res: _Resolution, variables_only: bool = False) -> None:
        """Map a jedi Name to a graph node of the workspace, or mark the resolution external."""
        module_path = name.module_path
        if module_path is None or name.in_builtin_module():
            res.external = True
            return
        if str(module_path).endswith(".pyi") and self._map_stub(name, res, variables_only):
            return
        try:
            rel = self.index.rel(Path(module_path))
        except ValueError:
            res.external = True
            return
        facts = self.index.facts.get(rel)
        if facts is None:  # under the root but not indexed (a venv, a stub, a skipped file): not ours
            res.external = True
            return
        d = _def_at(facts, name.line, name.name)
        if d is None or (variables_only and d.kind != "variable"):
            res.unmapped = True
            return
        res.targets[symbol_id(rel, d.qual)] = d


    def _map_stub(self, name: Any, res: _Resolution, variables_only: bool) -> bool:
        """A stub jedi bundles for a package the workspace *is* (django-stubs inside django): map by full name.

        jedi prefers its bundled stubs over the workspace's own source for such packages, so without this
        every call into the project would look external. Only packages whose top-level `__init__.py` is in
        the workspace qualify (never stdlib stubs), and the target is found by its module-qualified name,
        never by a short name. Returns False when the stub is not about the workspace.
        """
        full = name.full_name or ""
        parts = full.split(".")
        if len(parts) < 2 or parts[0] not in self._top_packages():
            return False
        ws = self.index.ws
        res.from_stub = True
        for k in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:k])
            path = ws.modules.get(module)
            if path is None or ws.canonical.get(path) != module:
                continue
            # stub full names follow the public path (`django.db.models.CharField`): resolve the rest the way the
            # static binder does, through re-exports and class members
            try:
                binder = Binder(ws)
                value = binder.module_attr(module, parts[k], 0)
                for seg in parts[k + 1:]:
                    value = binder.attr(value, seg, 0)
            except Exception:  # read without the index lock; a concurrent update may get in the way
                value = None
            if value is not None and value[0] == "sym":
                tpath, _, tqual = value[1].partition("::")
                facts = self.index.facts.get(tpath)
                d = next((x for x in facts.defs if x.qual == tqual), None) if facts is not None else None
                if d is not None and not (variables_only and d.kind != "variable"):
                    res.targets[value[1]] = d
                    return True
            break
        res.unmapped = True  # a workspace package, but not a symbol we have: neither ours nor external
        return True

    def _top_packages(self) -> set[str]:
        ws = self.index.ws
        key = id(ws)
        if self._tops is None or self._tops[0] != key:
            tops = {ws.canonical[p] for p in ws.canonical if p.endswith("__init__.py") and "." not in ws.canonical[p]}
            self._tops = (key, tops)
        return self._tops[1]


def _name_col(lines: list[str], line: int, col: int, chain: tuple[str, ...]) -> int:
    """The column of the called name itself, where jedi's goto must look.

    A site's column is normally its last segment's; for a call of a call (`app.ensure_sync(f)(**kw)`) it is
    the start of the expression, where goto would name `app`. Find the segment's name on the line instead.
    """
    if not chain or not 0 < line <= len(lines):
        return col
    name = chain[-1][:-2] if chain[-1].endswith("()") else chain[-1]
    text = lines[line - 1]
    if not name or text.startswith(name, col):
        return col
    i = text.find(name, col)
    while i >= 0:
        before = text[i - 1] if i > 0 else " "
        after = text[i + len(name)] if i + len(name) < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return i
        i = text.find(name, i + 1)
    return col


def _def_at(facts: FileFacts, line: int | None, name: str) -> Def | None:
    """The def a jedi name at `line` denotes: the def on that line, else the same-named def of its scope.

    extract keeps the first of several same-named definitions (conditional defs, re-assignments), so a
    later one maps to that node by qualified name.
    """
    if line is None:
        return None
    for d in facts.defs:
        if d.line == line and d.qual.rsplit(".", 1)[-1] == name:
            return d
    scope = ""
    span = None
    for d in facts.defs:
        if d.kind != "variable" and d.start <= line <= d.end and d.line != line:
            if span is None or d.end - d.start <= span:
                scope, span = d.qual, d.end - d.start
    qual = f"{scope}.{name}" if scope else name
    for d in facts.defs:
        if d.qual == qual:
            return d
    return None


def _source_roots(index: WorkspaceIndex) -> list[str]:
    """Directories that hold the workspace's top-level packages (e.g. `src`), most used first."""
    counts: dict[str, int] = {}
    for path, module in index.ws.canonical.items():
        parts = module.split(".")
        is_pkg = path.endswith("/__init__.py") or len(parts) > 1
        if not is_pkg:
            continue
        depth = len(parts) if not path.endswith("/__init__.py") else len(parts) + 1
        segs = path.split("/")
        base = segs[: max(len(segs) - depth, 0)]
        d = str(index.root.joinpath(*base)) if base else str(index.root)
        counts[d] = counts.get(d, 0) + 1
    return [d for d, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


class _jedi_tuning:
    """Process-wide jedi/parso/GC settings for the duration of a run (see shared jedi-facts).

    - jedi pickles parsed trees into its cache directory: point it into ours (nothing outside it).
    - parso's in-memory cache evicts almost everything on every insert once it holds 600 trees (its
      `last_used` starts at the file's mtime), so big repos re-parse shared modules for every file; lift
      the trigger and flush the cache ourselves (`_trim_parso_cache`) to bound memory.
    - the cyclic GC costs 22-33% of jedi time; raise the gen-0 threshold while we run.
    """

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir

    def __enter__(self) -> _jedi_tuning:
        import jedi
        import parso.cache

        jdir = self.cache_dir / "jedi"
        try:
            jdir.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass
        jedi.settings.cache_directory = str(jdir)
        # no dynamic parameter inference (jedi searching other modules for calls to guess what a
        # parameter holds): it makes a file's answer depend on its callers, which the per-file cache
        # never re-checks, and the search's own bounds on object-ordered sets made runs on the same
        # tree differ (marshmallow: 27 or 28 edges)
        self.dynamic = (jedi.settings.dynamic_params, jedi.settings.dynamic_params_for_other_modules)
        jedi.settings.dynamic_params = jedi.settings.dynamic_params_for_other_modules = False
        self.trigger = parso.cache._CACHED_SIZE_TRIGGER
        parso.cache._CACHED_SIZE_TRIGGER = 10**9
        self.threshold = gc.get_threshold()
        gc.set_threshold(50000, 20, 100)
        return self

    def __exit__(self, *exc: object) -> None:
        import jedi
        import parso.cache

        parso.cache._CACHED_SIZE_TRIGGER = self.trigger
        jedi.settings.dynamic_params, jedi.settings.dynamic_params_for_other_modules = self.dynamic
        gc.set_threshold(*self.threshold)
        parso.cache.parser_cache.clear()  # the trees are not needed after the run; free the memory


def _trim_parso_cache(cap: int = PARSO_CACHE_CAP) -> None:
    import parso.cache

    if sum(len(v) for v in parso.cache.parser_cache.values()) > cap:
        parso.cache.parser_cache.clear()


_ATTACHED = "refiner"  # its key in WorkspaceIndex.attached


def attach_refiner(index: WorkspaceIndex, lock: AbstractContextManager | None = None,
                   sources: SourceProvider | None = None) -> Refiner:
    """The one Refiner of an index, made on first use: it puts the cached jedi edges of unchanged
    files into the graph (any process that opens the cache, refining or not, so the CLI answers as
    the server that refined the same files) and follows the index's updates. The files the warm
    start itself updated (before anyone listened) lose theirs: one re-bound because a file it
    imports changed has the same digest but maybe another answer."""
    refiner: Refiner | None = index.attached.get(_ATTACHED)
    if refiner is None:
        refiner = index.attached[_ATTACHED] = Refiner(index, lock=lock)
        if index.loaded_update is not None and index.loaded_update[1]:
            refiner._on_change(set(index.loaded_update[1]))
    if lock is not None:
        refiner.lock = lock
    if sources is not None:
        refiner.sources = sources
    return refiner


def refine_index(index: WorkspaceIndex, progress: Progress | None = None, budget_s: float | None = None,
                 sample_per_file: int = 5, lock: AbstractContextManager | None = None) -> dict[str, Any]:
    """One-shot helper for the CLI and benchmarks: refine, save, report."""
    refiner = attach_refiner(index, lock)
    refiner.sample_per_file = sample_per_file
    return refiner.run(progress=progress, budget_s=budget_s)
