"""Git history in the graph: TOUCHED edges commit -> symbol, bounded change history, history queries.

Two sources, both read with the `git` binary (no library: `git blame` with a few worker threads was
as fast as pygit2's blame on a 77-file, 301-commit repository and is much faster on large files,
see README "History and tests"):

- `git blame --porcelain` of each file's working-tree copy: which commit last touched each line.
  Lines not committed yet are left out.
- one `git log --first-parent -p -U0` over the newest LOG_COMMITS commits: the commits whose diffs
  touched each file, with the touched lines carried forward through every later diff (and the
  uncommitted working-tree diff) into today's line numbers. This is the bounded per-symbol change
  history; it sees commits whose lines were later overwritten, which blame cannot.

Each touched line goes to the innermost symbol whose span holds it; the file node gets an edge from
every commit that touched the file. Commit nodes are put in the graph under the producer key
GIT_KEY; edges under `git:<path>` in `graph.extra_edges`.

Commit node encoding (documented in README): `Node(id="commit:<sha>", kind="commit", path="",
qualname=<12-char short sha>, start_line=0, end_line=0, signature=<subject>,
doc="<ISO-8601 author date> <author name> <<email>>")`; `commit_info(node)` decodes it.

TOUCHED edge: site = (symbol's path, first touched line, 0), resolver "git-blame", extra =
`("blame=N",)` (N lines of the symbol last touched by the commit) or `("diff",)` (the commit's diff
touched the span but blame credits later commits), plus `"newest"` on the newest commit over the
symbol's span (supersedes: the newest commit wins).

State (`index.extra_state["history"]`) is keyed by blob ids: a file whose HEAD blob and working
blob are unchanged is never re-blamed. Without git (no binary, no repository, a shallow clone, no
commits) `History.available` is False, `History.reason` says why, every query returns nothing and
the rest of the index is untouched.
"""

from __future__ import annotations

import bisect
import logging
import re
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctx_lsp.index.model import RESOLVER_GIT, Edge, EdgeKind, Node, NodeKind
from ctx_lsp.sources.git import Commit, Git, GitError, Hunk, commit_id
from ctx_lsp.sources.line_map import Ranges, hunk_ranges, map_ranges

if TYPE_CHECKING:
    from ctx_lsp.index.workspace import WorkspaceIndex

log = logging.getLogger(__name__)

GIT_KEY = "<git>"  # producer key of the commit nodes in graph.file_nodes
EDGE_PREFIX = "git:"  # graph.extra_edges key prefix, one entry per file
STATE_KEY = "history"
STATE_VERSION = 1
LOG_COMMITS = 300  # first-parent commits scanned for the change history
PER_FILE_HISTORY = 60  # newest commits kept per file
SYNC_INLINE_MAX = 32  # more changed files than this are re-blamed at the next query, not in the listener
BLAME_WORKERS = 4  # git processes at once (they spend most time in process start and I/O)
CO_CHANGE_MAX_TOUCHED = 200  # commits touching more nodes than this are left out of co-change counts


# -- results -----------------------------------------------------------------------------------
@dataclass(slots=True)
class Change:
    """One commit that touched a symbol's span."""

    commit: Commit
    lines: int  # lines of the span the commit still owns in blame (0: only its diff touched it)
    first_line: int  # first touched line inside the span (today's numbering)
    source: str  # "blame", "diff" or "blame+diff"
    superseded: bool = False  # an newer commit touched the same span

    def to_dict(self) -> dict[str, Any]:
        return {**self.commit.to_dict(), "lines": self.lines, "first_line": self.first_line,
                "source": self.source, "superseded": self.superseded}


@dataclass(slots=True)
class SyncReport:
    available: bool
    reason: str = ""
    blamed: int = 0
    files: int = 0
    commits: int = 0
    edges: int = 0
    log_commits: int = 0
    seconds: float = 0.0
    deferred: int = 0
    errors: list[str] = field(default_factory=list)


# -- the history producer -----------------------------------------------------------------------
_ATTACHED = "history"  # its key in WorkspaceIndex.attached


def attach_history(index: WorkspaceIndex, sync: bool = True) -> History:
    """The History of an index (created once, listening to its updates); synced unless sync=False."""
    h: History | None = index.attached.get(_ATTACHED)
    if h is None:
        h = index.attached[_ATTACHED] = History(index)
    else:
        index.extra_state[STATE_KEY] = h.state  # the index may have reloaded its extra_state dict
    if sync:
        h.sync()
        if h.unsaved:
            if not index.pending_save:  # else the write the index still owes its owner carries the history
                index.save()
            h.unsaved = False
    return h


def history_for(index: WorkspaceIndex) -> History | None:
    """The attached History of an index, or None."""
    return index.attached.get(_ATTACHED)


class History:
    """TOUCHED edges and history queries for one WorkspaceIndex.

    Call with the index's owner lock held (Engine.lock) when other threads use the index.
    """

    def __init__(self, index: WorkspaceIndex) -> None:
        self.index = index
        self.git = Git(str(index.root))
        st = index.extra_state.get(STATE_KEY)
        if not isinstance(st, dict) or st.get("v") != STATE_VERSION:
            st = {"v": STATE_VERSION, "head": None, "reason": "not synced yet", "commits": {}, "files": {},
                  "log": {"head": None, "complete": False, "files": {}}}
        self.state: dict[str, Any] = st
        self.commits: dict[str, Commit] = {s: Commit.from_wire(s, w) for s, w in st["commits"].items()}
        self.pending: set[str] = set()
        self._bm25: Any = None
        self._bm25_key: tuple[int, int] | None = None
        self._checked_head_at = 0.0
        self.unsaved = False
        if st.get("head"):
            self._apply(set(index.facts))
            self._set_commit_nodes()
        index.listeners.append(self._on_change)

    # -- status ---------------------------------------------------------------------------------
    @property
    def available(self) -> bool:
        return bool(self.state.get("head"))

    @property
    def reason(self) -> str:
        """Why history is unavailable ("" when it is available)."""
        return "" if self.available else str(self.state.get("reason") or "unavailable")

    def status(self) -> dict[str, Any]:
        if not self.available:
            return {"available": False, "reason": self.reason}
        return {"available": True, "head": self.state["head"], "files": len(self.state["files"]),
                "commits": len(self.commits), "log_complete": self.state["log"]["complete"],
                "pending": len(self.pending)}

    # -- syncing --------------------------------------------------------------------------------
    def sync(self, paths: Iterable[str] | None = None) -> SyncReport:
        """Bring history in line with HEAD and the working tree: re-blame files whose blob changed,
        re-read the change history when HEAD moved. `paths` limits the re-blame to those files."""
        t0 = time.perf_counter()
        head, reason, prefix = self.git.probe()
        self._checked_head_at = time.monotonic()
        if head is None:
            self._clear(reason)
            return SyncReport(False, reason, seconds=time.perf_counter() - t0)
        report = SyncReport(True)
        facts = self.index.facts
        wanted = set(facts) if paths is None else {p for p in paths if p in facts}
        wanted |= {p for p in self.pending if p in facts}
        try:
            keys, dirty = self.git.file_keys(set(facts), prefix)
        except GitError as exc:
            self._clear(str(exc))
            return SyncReport(False, str(exc), seconds=time.perf_counter() - t0)
        files: dict[str, Any] = self.state["files"]
        head_moved = self.state.get("head") != head
        if head_moved:
            wanted = set(facts)
        # files no longer tracked (or gone) lose their history
        changed: set[str] = {p for p in list(files) if p not in keys or p not in facts}
        for p in changed:
            files.pop(p, None)
        todo = sorted(p for p in wanted if p in keys and (p not in files or files[p]["key"] != keys[p]))
        results: dict[str, Any] = {}
        if todo:
            with ThreadPoolExecutor(min(BLAME_WORKERS, len(todo))) as pool:
                for p, res in zip(todo, pool.map(self._blame_one, todo), strict=True):
                    results[p] = res
        work = self._safe_worktree_diff([p for p in todo if p in dirty], report)
        for p in todo:
            res = results[p]
            if isinstance(res, str):
                report.errors.append(f"{p}: {res}")
                files.pop(p, None)
            else:
                runs, commits = res
                self._remember(commits)
                files[p] = {"key": keys[p], "blame": runs,
                            "work": [list(h) for h in work.get(p, [])] if p in dirty else []}
            changed.add(p)
        report.blamed = len(todo)
        if paths is not None:
            # a file the index just re-read gets its edges again even when its blame is current: a
            # sync for another file of the same checkout may have blamed it before its new facts were in
            changed |= {p for p in paths if p in facts and p in files}
        lg = self.state["log"]
        if lg.get("head") != head:
            try:
                entries, complete = self.git.log(LOG_COMMITS)
            except GitError as exc:
                report.errors.append(str(exc))
                entries, complete = [], False
            lg.update(head=head, complete=complete, files=self._log_files(entries))
            changed |= set(facts)
            report.log_commits = len(entries)
        self.state["head"] = head
        self.state["reason"] = ""
        self.pending -= wanted
        self._apply(changed)
        self._set_commit_nodes()
        self._prune_commits()
        report.files = len(files)
        report.commits = len(self.commits)
        report.edges = sum(len(v) for k, v in self.index.graph.extra_edges.items() if k.startswith(EDGE_PREFIX))
        report.seconds = time.perf_counter() - t0
        if changed:
            self._persist()
        return report

    def _blame_one(self, path: str) -> tuple[list[list[Any]], dict[str, Commit]] | str:
        try:
            return self.git.blame(path)
        except GitError as exc:
            return str(exc)

    def _safe_worktree_diff(self, paths: list[str], report: SyncReport) -> dict[str, list[Hunk]]:
        try:
            return self.git.worktree_diff(paths)
        except GitError as exc:
            report.errors.append(str(exc))
            return {}

    def _remember(self, commits: dict[str, Commit]) -> None:
        for s, c in commits.items():
            if s not in self.commits:
                self.commits[s] = c

    def _log_files(self, entries: list[tuple[Commit, dict[str, list[Hunk]]]]) -> dict[str, list[list[Any]]]:
        """Per file, up to PER_FILE_HISTORY newest commits with the lines they touched, carried to
        HEAD's numbering through every newer diff (newest first)."""
        later: dict[str, list[list[Hunk]]] = {}  # path -> hunks of newer commits, newest first
        out: dict[str, list[list[Any]]] = {}
        for c, files in entries:
            for path, hunks in files.items():
                hunks = sorted(hunks)
                newer = later.setdefault(path, [])
                hist = out.setdefault(path, [])
                if len(hist) < PER_FILE_HISTORY:
                    added, dels = hunk_ranges(hunks)
                    for h in reversed(newer):
                        added = map_ranges(added, h, keep_replaced=True)
                    kept_dels: Ranges = []
                    for a, b in dels:
                        pa, pb = [(a, a)], [(b, b)]
                        for h in reversed(newer):
                            pa, pb = map_ranges(pa, h, True), map_ranges(pb, h, True)
                        if pa and pb:
                            kept_dels.append((pa[0][0], pb[0][0]))
                    if added or kept_dels:
                        self._remember({c.sha: c})
                        hist.append([c.sha, [list(r) for r in added], [list(r) for r in kept_dels]])
                newer.append(hunks)
        return {p: h for p, h in out.items() if h}

    def _on_change(self, paths: set[str]) -> None:
        """Index listener: re-blame saved files now (a few) or at the next query (many)."""
        if not self.available:
            return
        st = self.index.state
        saved = set()
        for p in paths:
            if p not in self.index.facts:
                if p in self.state["files"]:
                    del self.state["files"][p]
                self.index.graph.set_edges(EDGE_PREFIX + p, [], store=self.index.graph.extra_edges)
                self.index.graph.extra_edges.pop(EDGE_PREFIX + p, None)
                continue
            fs = st.get(p)
            if fs is not None and fs.overlay:
                continue  # an unsaved buffer: blame the disk copy once it is saved
            saved.add(p)
        if not saved:
            return
        if len(saved) <= SYNC_INLINE_MAX:
            try:
                self.sync(saved)
            except Exception:  # history never breaks indexing
                log.exception("history update failed")
        else:
            self.pending |= saved

    def ensure_current(self, max_age: float = 1.0) -> None:
        """Sync when files are pending or HEAD may have moved (checked at most every max_age s)."""
        if self.pending or time.monotonic() - self._checked_head_at > max_age:
            head, _reason, _prefix = self.git.probe()
            self._checked_head_at = time.monotonic()
            if self.pending or head != self.state.get("head"):
                self.sync(set(self.pending))

    # -- graph ----------------------------------------------------------------------------------
    def _clear(self, reason: str) -> None:
        g = self.index.graph
        for key in [k for k in g.extra_edges if k.startswith(EDGE_PREFIX)]:
            g.set_edges(key, [], store=g.extra_edges)
            del g.extra_edges[key]
        if GIT_KEY in g.file_nodes:
            g.set_file(GIT_KEY, [])
            del g.file_nodes[GIT_KEY]
        had = bool(self.state.get("head"))
        self.state.update(head=None, reason=reason, commits={}, files={},
                          log={"head": None, "complete": False, "files": {}})
        self.commits = {}
        self.index.extra_state[STATE_KEY] = self.state
        if had:  # drop the old history from the cache too
            self._persist()

    def _line_owners(self, path: str) -> tuple[list[str], list[Node]]:
        """Innermost node id per line (index 0 unused) of one file, and the file's nodes."""
        nodes = self.index.graph.nodes_of_file(path)
        facts = self.index.facts.get(path)
        n_lines = max([facts.lines if facts else 0] + [n.end_line for n in nodes] + [1])
        owner = [path] * (n_lines + 2)
        for n in sorted((n for n in nodes if n.qualname is not None),
                        key=lambda n: -(n.end_line - n.start_line)):
            for ln in range(max(n.start_line, 1), min(n.end_line, n_lines) + 1):
                owner[ln] = n.id
        return owner, nodes

    def file_touches(self, path: str) -> dict[str, list[Any]]:
        """{sha: [blame lines, first line, diff ranges]} of one file in today's numbering."""
        fst = self.state["files"].get(path)
        out: dict[str, list[Any]] = {}
        if fst is None:
            return out
        for s, e, sha in fst["blame"]:
            rec = out.setdefault(sha, [0, s, []])
            rec[0] += e - s + 1
            rec[1] = min(rec[1], s)
        work = [tuple(h) for h in fst.get("work", [])]
        for sha, added, dels in self.state["log"]["files"].get(path, []):
            rngs = [tuple(r) for r in added]
            pts = [tuple(r) for r in dels]
            if work:
                rngs = map_ranges(rngs, work, True)  # type: ignore[arg-type]
                pts = [(a[0][0], b[0][0]) for a, b in
                       ((map_ranges([(x, x)], work, True), map_ranges([(y, y)], work, True)) for x, y in pts)
                       if a and b]
            rec = out.setdefault(sha, [0, 0, []])
            rec[2].extend(("add", a, b) for a, b in rngs)
            rec[2].extend(("del", a, b) for a, b in pts)
        return out

    def _apply(self, paths: Iterable[str]) -> None:
        g = self.index.graph
        for path in paths:
            key = EDGE_PREFIX + path
            if path not in self.index.facts or path not in self.state["files"]:
                if key in g.extra_edges:
                    g.set_edges(key, [], store=g.extra_edges)
                    del g.extra_edges[key]
                continue
            g.set_edges(key, self._edges_of(path), store=g.extra_edges)

    def _edges_of(self, path: str) -> list[Edge]:
        owner, _nodes = self._line_owners(path)
        last = len(owner) - 2
        # (sha, node) -> [blame lines, first line, diff-touched]
        acc: dict[tuple[str, str], list[Any]] = {}

        def hit(sha: str, node: str, line: int, blame: int, file_too: bool = True) -> None:
            rec = acc.setdefault((sha, node), [0, line, False])
            rec[0] += blame
            rec[1] = min(rec[1], line)
            if not blame:
                rec[2] = True
            if file_too and node != path:
                hit(sha, path, line, blame, False)

        # contiguous runs of one owner, so a blamed or touched range costs one hit per owner it spans
        segs: list[tuple[int, int, str]] = []
        for ln in range(1, last + 1):
            if segs and segs[-1][2] == owner[ln]:
                segs[-1] = (segs[-1][0], ln, owner[ln])
            else:
                segs.append((ln, ln, owner[ln]))
        starts = [sg[0] for sg in segs]

        def hit_range(sha: str, a: int, b: int, blame: bool) -> None:
            a, b = max(a, 1), min(b, last)
            i = max(bisect.bisect_right(starts, a) - 1, 0)
            while i < len(segs) and segs[i][0] <= b:
                lo, hi = max(a, segs[i][0]), min(b, segs[i][1])
                if lo <= hi:
                    hit(sha, segs[i][2], lo, (hi - lo + 1) if blame else 0)
                i += 1

        fst = self.state["files"][path]
        for s, e, sha in fst["blame"]:
            hit_range(sha, s, e, True)
        for sha, (_n, _first, touches) in self.file_touches(path).items():
            for kind, a, b in touches:
                if kind == "add":
                    hit_range(sha, a, b, False)
                elif 1 <= a <= last and 1 <= b <= last and owner[a] == owner[b]:
                    hit(sha, owner[a], a, 0)  # a deletion inside one symbol touched that symbol
                elif 1 <= a <= last:
                    hit(sha, path, a, 0)
        newest: dict[str, tuple[int, int, str]] = {}
        for (sha, node) in acc:
            c = self.commits.get(sha)
            if c is None:
                continue
            k = (c.ctime, c.time, sha)
            if node not in newest or k > newest[node]:
                newest[node] = k
        edges: list[Edge] = []
        for (sha, node), (blame, first, _diff) in sorted(acc.items()):
            if sha not in self.commits:
                continue
            extra: tuple[str, ...] = (f"blame={blame}",) if blame else ("diff",)
            if newest.get(node, (0, 0, ""))[2] == sha:
                extra += ("newest",)
            edges.append(Edge(commit_id(sha), node, EdgeKind.TOUCHED.value, path, first, 0, RESOLVER_GIT, extra))
        return edges

    def _set_commit_nodes(self) -> None:
        g = self.index.graph
        used = {e.src for k, es in g.extra_edges.items() if k.startswith(EDGE_PREFIX) for e in es}
        nodes = [c.to_node() for c in sorted(self.commits.values(), key=lambda c: (c.ctime, c.sha))
                 if c.node_id in used]
        g.set_file(GIT_KEY, nodes)
        g.relink()  # incremental: links the edges that waited for a commit node

    def _prune_commits(self) -> None:
        used: set[str] = set()
        for fst in self.state["files"].values():
            used.update(r[2] for r in fst["blame"])
        for hist in self.state["log"]["files"].values():
            used.update(h[0] for h in hist)
        self.commits = {s: c for s, c in self.commits.items() if s in used}

    def _persist(self) -> None:
        """Put the state where the index persists it; the next index.save() writes it (attach_history
        saves right away; re-blames after edits ride along with the owner's next save)."""
        self.state["commits"] = {s: c.to_wire() for s, c in self.commits.items()}
        self.index.extra_state[STATE_KEY] = self.state
        self.unsaved = True

    # -- queries --------------------------------------------------------------------------------
    def _span(self, node_id: str) -> tuple[str, int, int] | None:
        n = self.index.graph.node(node_id)
        if n is None or n.kind == NodeKind.COMMIT.value:
            return None
        if n.qualname is None:
            return n.path, 1, 1 << 30
        return n.path, n.start_line, n.end_line

    def changes(self, node_id: str) -> list[Change]:
        """Every known commit that touched a file's or symbol's span (children included), newest
        first; all but the newest are marked superseded. Empty when history is unavailable."""
        self.ensure_current()
        span = self._span(node_id)
        if span is None or not self.available:
            return []
        path, lo, hi = span
        out: list[Change] = []
        for sha, (_n, _f, touches) in self.file_touches(path).items():
            c = self.commits.get(sha)
            if c is None:
                continue
            lines = 0
            first = 0
            for s, e, bsha in self.state["files"].get(path, {}).get("blame", []):
                if bsha == sha and s <= hi and e >= lo:
                    lines += min(e, hi) - max(s, lo) + 1
                    first = max(s, lo) if not first else min(first, max(s, lo))
            diff = False
            for kind, a, b in touches:
                inside = (a <= hi and b >= lo) if kind == "add" else (lo <= a and b <= hi)
                if inside:
                    diff = True
                    first = max(a, lo) if not first else min(first, max(a, lo))
            if not lines and not diff:
                continue
            source = "blame+diff" if lines and diff else ("blame" if lines else "diff")
            out.append(Change(c, lines, first, source))
        out.sort(key=lambda ch: (ch.commit.ctime, ch.commit.time, ch.commit.sha), reverse=True)
        for ch in out[1:]:
            ch.superseded = True
        return out

    def recent_changes(self, node_id: str, n: int = 5) -> list[Change]:
        """"What changed in X recently": the n newest commits that touched X's span."""
        return self.changes(node_id)[:n]

    def introduced_by(self, node_id: str) -> Commit | None:
        """"Which commit introduced Y": the oldest commit in Y's blame or change history.

        Exact when the change history reached the first commit (status()["log_complete"]) or
        when blame still credits the introducing commit with some of Y's lines; otherwise the
        oldest commit known within the LOG_COMMITS bound.
        """
        ch = self.changes(node_id)
        return ch[-1].commit if ch else None

    def newest_commit(self, node_id: str) -> Commit | None:
        """Supersedes: the newest commit over X's span, the one whose version of X is current."""
        ch = self.changes(node_id)
        return ch[0].commit if ch else None

    def co_changed(self, node_id: str, n: int = 10) -> list[tuple[str, int, list[str]]]:
        """"Code that usually changes together with X": [(node id, commits shared, shas)], most
        shared first. For a symbol: other symbols (not X's own members or containers); for a file:
        other files."""
        g = self.index.graph
        node = g.node(node_id)
        if node is None:
            return []
        shas = [ch.commit.sha for ch in self.changes(node_id)]
        is_file = node.qualname is None
        counts: dict[str, list[str]] = {}
        weight: dict[str, float] = {}
        for sha in shas:
            touched = g.out_edges(commit_id(sha), [EdgeKind.TOUCHED.value])
            if len(touched) > CO_CHANGE_MAX_TOUCHED:
                continue  # an import, a reformat or a mass rename says nothing about coupling
            seen: set[str] = set()
            for e in touched:
                other = g.node(e.dst)
                if other is None or other.id == node_id or other.id in seen:
                    continue
                if is_file != (other.qualname is None):
                    continue
                if not is_file and other.path == node.path and (
                        _nested(other.qualname, node.qualname) or _nested(node.qualname, other.qualname)):
                    continue
                seen.add(other.id)
                counts.setdefault(other.id, []).append(sha)
                # ties go to pairs that changed together in small commits (stronger coupling)
                weight[other.id] = weight.get(other.id, 0.0) + 1.0 / len(touched)
        ranked = sorted(counts.items(), key=lambda kv: (-len(kv[1]), -weight[kv[0]], kv[0]))
        return [(k, len(v), v) for k, v in ranked[:n]]

    def search_commits(self, query: str, n: int = 10) -> list[tuple[Commit, float]]:
        """Commits whose subjects match a query, BM25-ranked (only commits sharing a query term)."""
        self.ensure_current()
        terms = _tokens(query)
        if not terms or not self.commits:
            return []
        key = (len(self.commits), hash(tuple(sorted(self.commits))))
        if self._bm25 is None or self._bm25_key != key:
            from rank_bm25 import BM25Plus

            docs = sorted(self.commits.values(), key=lambda c: c.sha)
            toks = [_tokens(c.subject) or ["\0"] for c in docs]
            self._bm25 = (BM25Plus(toks), docs, [set(t) for t in toks])
            self._bm25_key = key
        bm25, docs, sets = self._bm25
        scores = bm25.get_scores(terms)
        q = set(terms)
        hits = [(docs[i], float(s)) for i, s in enumerate(scores) if sets[i] & q]
        hits.sort(key=lambda h: (-h[1], -h[0].ctime, h[0].sha))
        return hits[:n]

    def search(self, query: str, n: int = 10) -> list[tuple[str, float, str]]:
        """History as a retrieval generator: commits matching the query -> the symbols they touched.

        Returns [(node id, score, sha)], best first; a symbol touched by several matching commits
        keeps its best score. File nodes are left out (their symbols carry the signal)."""
        g = self.index.graph
        best: dict[str, tuple[float, str, int]] = {}
        for c, score in self.search_commits(query, n=max(n, 10)):
            for e in g.out_edges(c.node_id, [EdgeKind.TOUCHED.value]):
                target = g.node(e.dst)
                if target is None or target.qualname is None:
                    continue
                owned = next((int(x[6:]) for x in e.extra if x.startswith("blame=")), 0)
                if e.dst not in best or (score, owned) > best[e.dst][::2]:
                    best[e.dst] = (score, c.sha, owned)
        # within one commit, symbols whose lines it still owns the most come first
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], -kv[1][2], kv[0]))
        return [(k, s, sha) for k, (s, sha, _owned) in ranked[:n]]


def _nested(inner: str | None, outer: str | None) -> bool:
    return bool(inner and outer and (inner == outer or inner.startswith(outer + ".")))


_WORD = re.compile(r"[A-Za-z0-9]+")


def _tokens(text: str) -> list[str]:
    out: list[str] = []
    for w in _WORD.findall(text):
        parts = re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", w) or [w]
        out.extend(p.lower() for p in parts)
        if len(parts) > 1:
            out.append(w.lower())
    return out
