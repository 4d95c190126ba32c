"""Tests in the graph: COVERS edges test -> symbol from per-test coverage data, or statically.

Dynamic (resolver "coverage-dynamic"): a coverage.py data file recorded with per-test contexts
(`dynamic_context = test_function`, or pytest-cov's `--cov-context=test`) is read once with
`CoverageData.contexts_by_lineno`; every line a test executed goes to the innermost symbol whose
span holds it, giving one edge test -> symbol with site (symbol's path, first covered line, 0) and
extra `("lines=N",)`. Lines of the test itself are not an edge. The edges are persisted in
`index.extra_state["coverage"]` by symbol id, so they survive restarts and re-indexing.

Stale: at import the content digest of every covered file and test file is recorded. An edge whose
covered file or test file no longer has that digest carries `"stale"` in its extra (the coverage is
older than the source it describes). `import` of an existing data file also treats a source file
modified after the data file was written as stale from the start.

Static (resolver "static-test"): tests without dynamic data (all of them when nothing was imported)
get an edge to every symbol they call or instantiate, from the binder's CALLS/INSTANTIATES edges,
and to the functions and methods they refer to without calling them (`assertRaises(E, func, arg)`,
`pytest.raises(E, func)`, a callback, a property read) or pass in their own decorators (`@pytest.mark.parametrize("f",
[pagerank, pytest.param(Solver)])`: functions, methods and classes), from REFERENCES edges: such
values are what the test runs. Test sources are: test functions and methods (kind "test"), methods of
`Test*` classes in test files (setup/teardown), and pytest fixtures (`@pytest.fixture`) in test files
and conftest.py. Site = the call or reference site; extra `("calls",)`, `("instantiates",)` or
`("references",)`. The static edges are written with the cache
(section `static-covers`, stamped with the write that made it): a warm start installs them instead of
walking every test file's edges again (Django: 1,944 test files), and computes again only those of the
test files its update touched or whose calls lead into a test file it changed.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctx_lsp.index.facts import Def, FileFacts, is_test_path, unpack_records
from ctx_lsp.index.model import RESOLVER_COVERAGE, RESOLVER_STATIC_TEST, Edge, EdgeKind, Node, NodeKind

if TYPE_CHECKING:
    from ctx_lsp.index.workspace import WorkspaceIndex

log = logging.getLogger(__name__)

STATE_KEY = "coverage"
STATE_VERSION = 1
DYN_PREFIX = "coverage:"  # graph.extra_edges key per covered file
STATIC_PREFIX = "static-test:"  # graph.extra_edges key per test file
STALE = "stale"
STATIC_SECTION = "static-covers"
STATIC_VERSION = 2  # bump when the static rules change: a section of other rules is recomputed
COVER_KINDS = (EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value)
# what a static COVERS edge can come from (its index is the kind's in the cache's section)
_STATIC_KINDS = (*COVER_KINDS, EdgeKind.REFERENCES.value)
_REFS = EdgeKind.REFERENCES.value
_RUN_BY_REFERENCE = frozenset({NodeKind.FUNCTION.value, NodeKind.METHOD.value})
_CLASS = NodeKind.CLASS.value  # passed in a test's decorators (`parametrize`), a class is run too
# the enums' values as plain strings: an enum member's `.value` costs a descriptor call, and the static
# pass reads them per edge (tens of thousands on a warm start)
_TEST, _COVERS = NodeKind.TEST.value, EdgeKind.COVERS.value
_VIA = {k: (k.lower(),) for k in _STATIC_KINDS}  # a static COVERS edge's extra: the kind it came from
_BY_REFERENCE = _VIA[_REFS]


class CoverageImportError(Exception):
    """The data file is missing, unreadable or has no per-test contexts."""


@dataclass(slots=True)
class ImportReport:
    data_file: str
    contexts: int = 0  # distinct non-empty contexts in the data
    tests: int = 0  # contexts mapped to a test node
    unmapped: list[str] = field(default_factory=list)  # contexts that name no test in the index
    files: int = 0  # covered workspace files
    edges: int = 0
    stale: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"data_file": self.data_file, "contexts": self.contexts, "tests": self.tests,
                "unmapped": len(self.unmapped), "files": self.files, "edges": self.edges, "stale": self.stale,
                "seconds": round(self.seconds, 3)}


@dataclass(slots=True)
class TestHit:
    """A test related to a symbol through a COVERS edge."""

    test: str  # test node id
    covers: str  # the node the edge points at (the symbol, one of its members, or a caller)
    resolver: str  # coverage-dynamic | static-test
    stale: bool
    lines: int  # covered lines (dynamic) or 0
    depth: int = 0  # 0: covers the symbol itself; 1+: covers a caller that many calls away
    site: tuple[str, int, int] = ("", 0, 0)

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "covers": self.covers, "resolver": self.resolver, "stale": self.stale,
                "lines": self.lines, "depth": self.depth,
                "site": {"path": self.site[0], "line": self.site[1], "col": self.site[2]}}


_ATTACHED = "coverage"  # its key in WorkspaceIndex.attached


def attach_coverage(index: WorkspaceIndex) -> TestCoverage:
    """The TestCoverage of an index (created once): persisted dynamic edges and static edges applied,
    kept up to date through the index's listeners."""
    tc: TestCoverage | None = index.attached.get(_ATTACHED)
    if tc is None:
        tc = index.attached[_ATTACHED] = TestCoverage(index)
    elif tc.state is not None:
        index.extra_state[STATE_KEY] = tc.state  # the index may have reloaded its extra_state dict
    return tc


def coverage_for(index: WorkspaceIndex) -> TestCoverage | None:
    return index.attached.get(_ATTACHED)


def is_test_source(node: Node, decorators: Callable[[], list[tuple[str, ...]] | None], in_test_file: bool) -> bool:
    """Whether a node can be the source of a COVERS edge (pytest conventions). `decorators` gives the
    node's decorators, asked only when they decide (reading them builds the file's defs)."""
    if node.kind == _TEST:
        return True
    if not in_test_file or node.qualname is None or node.kind not in ("function", "method"):
        return False
    if node.kind == "method" and node.qualname.split(".")[0].startswith("Test"):
        return True
    return any(chain and chain[-1].rstrip("()") == "fixture" for chain in decorators() or ())


_UNSEEN = ("", "")  # source_of's cache miss (a tuple, as its hits are)


class TestCoverage:
    """COVERS edges and test queries for one WorkspaceIndex (hold the owner's lock across threads)."""

    def __init__(self, index: WorkspaceIndex) -> None:
        self.index = index
        st = index.extra_state.get(STATE_KEY)
        if not isinstance(st, dict) or st.get("v") != STATE_VERSION:
            st = None
        self.state: dict[str, Any] | None = st
        self._by_test_path: dict[str, set[str]] = {}
        self._dyn_tests: set[str] = set()
        self._reindex()
        self._apply_dynamic(None)
        packed = index.loaded_sections.pop(STATIC_SECTION, None)
        update = index.loaded_update
        self.restored = update is not None and self._restore_static(packed, *update)
        if not self.restored:
            self._apply_static(None)
        index.save_sections[STATIC_SECTION] = self._static_section
        index.listeners.append(self._on_change)

    # -- import ---------------------------------------------------------------------------------
    def import_file(self, data_file: Path, stale_after: float | None = None) -> ImportReport:
        """Import a coverage.py data file that has per-test contexts; replaces earlier imports.

        `stale_after`: a source file modified after this time is stale from the start (defaults
        to the data file's mtime; pass the run's start time for a fresh run)."""
        import coverage

        t0 = time.perf_counter()
        report = ImportReport(str(data_file))
        if not data_file.is_file():
            raise CoverageImportError(f"no coverage data file: {data_file}")
        if stale_after is None:
            stale_after = data_file.stat().st_mtime
        data = coverage.CoverageData(basename=str(data_file))
        try:
            data.read()
            contexts = {c for c in data.measured_contexts() if c}
        except Exception as exc:  # coverage raises its own DataError/sqlite errors on bad files
            raise CoverageImportError(f"cannot read {data_file}: {exc}") from exc
        if not contexts:
            raise CoverageImportError(
                f"{data_file} has no per-test contexts; record it with `ctx-lsp coverage run` or "
                "`dynamic_context = test_function` in the coverage configuration")
        report.contexts = len(contexts)
        tests = {c: self.test_for_context(c) for c in sorted(contexts)}
        report.unmapped = [c for c, t in tests.items() if t is None]
        report.tests = len({t for t in tests.values() if t is not None})
        files: dict[str, Any] = {}
        facts = self.index.facts
        root = self.index.root
        for fname in sorted(data.measured_files()):
            p = Path(fname)
            try:
                rel = self.index.rel(p if p.is_absolute() else root / p)
            except ValueError:
                continue
            if rel not in facts:
                continue
            owner = line_owners(self.index, rel)
            acc: dict[tuple[str, str], list[int]] = {}
            for line, ctxs in data.contexts_by_lineno(fname).items():
                if not 0 < line < len(owner):
                    continue
                target = owner[line]
                for c in ctxs:
                    t = tests.get(c)
                    if t is None or t == target or _nested_id(target, t):
                        continue
                    rec = acc.setdefault((t, target), [line, 0])
                    rec[0] = min(rec[0], line)
                    rec[1] += 1
            if not acc:
                continue
            try:
                fresh = (root / rel).stat().st_mtime <= stale_after
            except OSError:
                fresh = False
            files[rel] = {"digest": facts[rel].digest if fresh else "",
                          "edges": [[t, s, first, n] for (t, s), (first, n) in sorted(acc.items())]}
        test_paths = {t.partition("::")[0] for t in tests.values() if t is not None}
        self.state = {
            "v": STATE_VERSION, "source": str(data_file), "time": stale_after, "imported": time.time(),
            "files": files,
            "tests": {p: facts[p].digest for p in sorted(test_paths) if p in facts},
            "contexts": report.contexts, "unmapped": report.unmapped[:100],
        }
        self.index.extra_state[STATE_KEY] = self.state
        self._reindex()
        for key in [k for k in self.index.graph.extra_edges if k.startswith(DYN_PREFIX)]:
            self._set(key, [])
        self._apply_dynamic(None)
        self._apply_static(None)  # tests with dynamic data drop their static edges
        report.files = len(files)
        for key, edges in self.index.graph.extra_edges.items():
            if key.startswith(DYN_PREFIX):
                report.edges += len(edges)
                report.stale += sum(STALE in e.extra for e in edges)
        report.seconds = time.perf_counter() - t0
        return report

    def test_for_context(self, context: str) -> str | None:
        """The test node a coverage context names, or None.

        Understands coverage.py's test_function contexts (`module.Class.test_name`, where the module
        name depends on how pytest imported the file) and pytest-cov's `path::Class::test[param]|run`.
        """
        g = self.index.graph
        if "::" in context:
            path, _, rest = context.partition("::")
            rest = re.sub(r"\[.*$", "", rest.split("|", 1)[0])
            nid = f"{path}::{rest.replace('::', '.')}"
            return nid if nid in g else None
        parts = context.split(".")
        cands = [n for n in g.symbols_named(parts[-1]) if n.qualname is not None and n.kind != "commit"]
        best: tuple[int, str] | None = None
        for n in cands:
            qual_parts = n.qualname.split(".")  # type: ignore[union-attr]
            if parts[-len(qual_parts):] != qual_parts or len(parts) <= len(qual_parts):
                continue
            module = parts[: len(parts) - len(qual_parts)]
            dotted = _module_of(n.path).split(".")
            if dotted[-len(module):] != module:
                continue
            score = len(module) + len(qual_parts)
            if best is None or score > best[0] or (score == best[0] and n.id < best[1]):
                best = (score, n.id)
        return best[1] if best else None

    # -- graph ----------------------------------------------------------------------------------
    def _set(self, key: str, edges: list[Edge]) -> None:
        g = self.index.graph
        g.set_edges(key, edges, store=g.extra_edges)
        if not edges:
            g.extra_edges.pop(key, None)

    def _reindex(self) -> None:
        self._by_test_path = {}
        self._dyn_tests = set()
        if self.state is None:
            return
        for covered, rec in self.state["files"].items():
            for t, _s, _f, _n in rec["edges"]:
                self._dyn_tests.add(t)
                self._by_test_path.setdefault(t.partition("::")[0], set()).add(covered)

    def _apply_dynamic(self, covered: Iterable[str] | None) -> None:
        if self.state is None:
            return
        files = self.state["files"]
        facts = self.index.facts
        test_digests = self.state["tests"]
        todo = files.keys() if covered is None else [p for p in covered if p in files]
        for path in todo:
            rec = files[path]
            f = facts.get(path)
            file_stale = f is None or not rec["digest"] or f.digest != rec["digest"]
            edges = []
            for t, s, first, n in rec["edges"]:
                tpath = t.partition("::")[0]
                tf = facts.get(tpath)
                stale = file_stale or tf is None or tf.digest != test_digests.get(tpath)
                extra = (f"lines={n}", STALE) if stale else (f"lines={n}",)
                edges.append(Edge(t, s, EdgeKind.COVERS.value, path, first, 0, RESOLVER_COVERAGE, extra))
            self._set(DYN_PREFIX + path, edges)

    def _apply_static(self, paths: Iterable[str] | None) -> None:
        g = self.index.graph
        facts = self.index.facts
        todo = facts.keys() if paths is None else list(paths)
        for path in todo:
            f = facts.get(path)
            if f is None or not f.is_test_file:
                if STATIC_PREFIX + path in g.extra_edges:
                    self._set(STATIC_PREFIX + path, [])
                continue
            self._set(STATIC_PREFIX + path, self._static_edges(path, f))

    def _static_section(self) -> list[Any]:
        """The static edges as of the graph being written, stamped with that write."""
        g = self.index.graph
        vias: dict[tuple[str, ...], int] = {_VIA[k]: i for i, k in enumerate(_STATIC_KINDS)}  # extra -> kind index
        files = []
        for key, es in sorted(g.extra_edges.items()):
            if key.startswith(STATIC_PREFIX):
                path = key[len(STATIC_PREFIX):]
                files.append([path, [[e.src, e.dst, e.line, e.col, vias[e.extra]]
                                     + ([e.path] if e.path != path else []) for e in es]])
        return [STATIC_VERSION, self.index.writing_stamp, files]

    def _restore_static(self, packed: Any, changed: frozenset[str] = frozenset(),
                        touched: frozenset[str] = frozenset()) -> bool:
        """Install the static edges the cache holds, when they were written with the very graph this
        warm start loaded (same stamp), then compute again those its update may have changed; False:
        compute them all. A test file's static edges follow from its own binding and nodes, and from
        whether each symbol it calls is a test, which only that symbol's own file decides, and only a
        test file holds tests: so they hold for a test file the update did not touch (`touched`:
        changed or re-bound) whose calls lead into no test file it changed (`changed`: facts new or
        gone)."""
        if not isinstance(packed, bytes):
            return False
        try:
            version, stamp, files = unpack_records(packed)
            if version != STATIC_VERSION or not stamp or stamp != self.index.loaded_stamp:
                return False
            edges = {STATIC_PREFIX + path: [Edge(row[0], row[1], _COVERS, row[5] if len(row) > 5 else path, row[2],
                                                 row[3], RESOLVER_STATIC_TEST, _VIA[_STATIC_KINDS[row[4]]])
                                            for row in rows]
                     for path, rows in files if path not in touched}
        except Exception:  # a damaged section is recomputed, never trusted
            log.warning("static test edges in the cache unreadable; recomputing them")
            return False
        todo = set(touched)
        changed_tests = {p for p in changed if is_test_path(p)}
        if changed_tests:
            file_edges = self.index.graph.file_edges
            for path, f in self.index.facts.items():
                if f.is_test_file and path not in todo and any(
                        e.dst.partition("::")[0] in changed_tests for e in file_edges.get(path, ())):
                    todo.add(path)
                    edges.pop(STATIC_PREFIX + path, None)
        for key, es in edges.items():
            self._set(key, es)
        self._apply_static(sorted(todo))
        return True

    def _static_edges(self, path: str, facts: FileFacts) -> list[Edge]:
        g = self.index.graph
        table: dict[str, Def] | None = None

        def def_of(qual: str) -> Def | None:
            nonlocal table
            if table is None:  # most test files never ask, and keep their defs unbuilt
                table = {d.qual: d for d in facts.defs}
            return table.get(qual)

        def decorators(qual: str) -> list[tuple[str, ...]] | None:
            d = def_of(qual)
            return d.decorators if d is not None else None

        def runs(n: Node | None, test_id: str, line: int) -> bool:
            """Whether a test referring to `n` at `line` runs it: a function or method (a callback,
            `pytest.raises(E, f)`, a property), or a class its decorators pass (above its `def` line)."""
            if n is None:
                return False
            if n.kind in _RUN_BY_REFERENCE:
                return True
            d = def_of(test_id.partition("::")[2])
            return n.kind == _CLASS and d is not None and line < d.line

        # caller id -> (the test source it belongs to, that id + "."), or None: not a test's, or a
        # test with dynamic coverage (its static edges give way)
        sources: dict[str, tuple[str, str] | None] = {}

        def source_of(node_id: str) -> tuple[str, str] | None:
            # a call inside a function nested in a test (click tests define commands there)
            # belongs to the test
            found = None
            if "::" in node_id:
                qual = node_id.partition("::")[2]
                while qual:
                    n = g.node(f"{path}::{qual}")
                    if n is not None and is_test_source(n, partial(decorators, qual), True):
                        if n.id not in self._dyn_tests:
                            found = (n.id, n.id + ".")
                        break
                    qual = qual.rpartition(".")[0]
            sources[node_id] = found
            return found

        edges: dict[tuple[str, str], Edge] = {}
        node = g.node
        for e in g.file_edges.get(path, ()):
            kind = e[2]
            if kind not in _STATIC_KINDS:
                continue
            got = sources.get(e[0], _UNSEEN)
            if got is _UNSEEN:
                got = source_of(e[0])
            if got is None:
                continue
            src, inner = got
            dst = e[1]
            # not the test itself nor a function nested in it; a symbol, not a file; not another test
            if dst == src or dst.startswith(inner) or "::" not in dst:
                continue
            n = node(dst)  # None: defined in a file not indexed yet; the graph links it later
            if n is not None and n.kind == _TEST:
                continue
            if kind == _REFS and not runs(n, src, e.line):
                continue  # a value the test holds, checks or raises, not one it runs
            key = (src, dst)
            had = edges.get(key)
            if had is None or (had.extra == _BY_REFERENCE and kind != _REFS):  # a call site names it best
                edges[key] = Edge(src, dst, _COVERS, e.path, e.line, e.col, RESOLVER_STATIC_TEST, _VIA[kind])
        return sorted(edges.values(), key=lambda x: (x.src, x.dst))

    def _on_change(self, paths: set[str]) -> None:
        try:
            covered = set(paths)
            for p in paths:
                covered |= self._by_test_path.get(p, set())
            self._apply_dynamic(covered)
            self._apply_static(paths)
        except Exception:  # coverage never breaks indexing
            log.exception("coverage update failed")

    def status(self) -> dict[str, Any]:
        g = self.index.graph
        dyn = [e for k, es in g.extra_edges.items() if k.startswith(DYN_PREFIX) for e in es]
        static = sum(len(es) for k, es in g.extra_edges.items() if k.startswith(STATIC_PREFIX))
        out: dict[str, Any] = {"dynamic_edges": len(dyn), "stale_edges": sum(STALE in e.extra for e in dyn),
                               "static_edges": static}
        if self.state is not None:
            out.update(source=self.state["source"], tests=len(self._dyn_tests),
                       unmapped_contexts=len(self.state["unmapped"]))
        return out

    # -- queries --------------------------------------------------------------------------------
    def _members(self, node_id: str) -> list[str]:
        g = self.index.graph
        n = g.node(node_id)
        if n is None:
            return []
        if n.qualname is None:
            return [m.id for m in g.nodes_of_file(n.path)]
        return [m.id for m in g.nodes_of_file(n.path)
                if m.qualname is not None and (m.qualname == n.qualname or m.qualname.startswith(n.qualname + "."))]

    def tests_for(self, node_id: str) -> list[TestHit]:
        """"Which tests cover X": tests with a COVERS edge to X or to a symbol inside X, dynamic
        evidence first, then by covered lines; fresh before stale."""
        g = self.index.graph
        best: dict[str, TestHit] = {}
        for m in self._members(node_id):
            for e in g.in_edges(m, [EdgeKind.COVERS.value]):
                hit = _hit(e, 0)
                if e.src not in best or _rank(hit) < _rank(best[e.src]):
                    best[e.src] = hit
        return sorted(best.values(), key=lambda h: (_rank(h), h.test))

    def tests_to_run(self, node_id: str, depth: int = 1) -> list[TestHit]:
        """"Which tests should I run after changing X": tests covering X, then tests covering its
        callers (CALLS/INSTANTIATES in-edges, up to `depth` calls away; a test calling X directly
        counts too); each test once, nearest first. Dynamic coverage of X already includes tests
        that reach X through callers, so depth 1 is the default."""
        g = self.index.graph
        out: dict[str, TestHit] = {h.test: h for h in self.tests_for(node_id)}
        frontier = set(self._members(node_id))
        seen = set(frontier)
        for d in range(1, depth + 1):
            nxt: set[str] = set()
            for cur in frontier:
                for e in g.in_edges(cur, COVER_KINDS):
                    src = g.node(e.src)
                    if src is None or e.src in seen:
                        continue
                    seen.add(e.src)
                    if src.kind == NodeKind.TEST.value:
                        out.setdefault(e.src, TestHit(e.src, cur, RESOLVER_STATIC_TEST, False, 0, d,
                                                      (e.path, e.line, e.col)))
                        continue
                    nxt.add(e.src)
                    for ce in g.in_edges(e.src, [EdgeKind.COVERS.value]):
                        if ce.src not in out:
                            out[ce.src] = _hit(ce, d)
            frontier = nxt
        return sorted(out.values(), key=lambda h: (h.depth, _rank(h), h.test))

    def exercised_by(self, test_id: str) -> list[tuple[str, Edge]]:
        """"What does this test exercise": [(node id, COVERS edge)] of a test (or of every test
        in a test class or file), by path and line."""
        g = self.index.graph
        out: dict[str, Edge] = {}
        for m in self._members(test_id) or [test_id]:
            for e in g.out_edges(m, [EdgeKind.COVERS.value]):
                if e.dst not in out or (out[e.dst].resolver != RESOLVER_COVERAGE and e.resolver == RESOLVER_COVERAGE):
                    out[e.dst] = e
        return sorted(out.items(), key=lambda kv: (kv[1].path, kv[1].line, kv[0]))


def _hit(e: Edge, depth: int) -> TestHit:
    lines = 0
    for x in e.extra:
        if x.startswith("lines="):
            lines = int(x[6:])
    return TestHit(e.src, e.dst, e.resolver, STALE in e.extra, lines, depth, (e.path, e.line, e.col))


def _rank(h: TestHit) -> tuple[int, int, int]:
    return (h.resolver != RESOLVER_COVERAGE, h.stale, -h.lines)


def _nested_id(inner: str, outer: str) -> bool:
    """Whether node id `inner` is `outer` or a symbol nested in it (a test's own inner functions)."""
    return inner.startswith(outer + ".") if "::" in outer else False


def _module_of(path: str) -> str:
    mod = path[:-3] if path.endswith(".py") else path
    mod = mod.replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


def line_owners(index: WorkspaceIndex, path: str) -> list[str]:
    """Innermost node id for each line of a file (index 0 unused; lines outside symbols -> file)."""
    g = index.graph
    nodes = g.nodes_of_file(path)
    f = index.facts.get(path)
    n_lines = max([f.lines if f else 0] + [n.end_line for n in nodes] + [1])
    owner = [path] * (n_lines + 1)
    for n in sorted((n for n in nodes if n.qualname is not None), key=lambda n: -(n.end_line - n.start_line)):
        for ln in range(max(n.start_line, 1), min(n.end_line, n_lines) + 1):
            owner[ln] = n.id
    return owner


def default_data_file(root: Path, cache_dir: Path) -> Path | None:
    """The data file `coverage import` reads when none is given: ROOT/.coverage, else the last run's."""
    for cand in (root / ".coverage", cache_dir / "coverage" / ".coverage"):
        if cand.is_file():
            return cand
    env = os.environ.get("COVERAGE_FILE")
    if env and Path(env).is_file():
        return Path(env)
    return None
