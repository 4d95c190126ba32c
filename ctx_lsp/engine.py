"""The one engine behind the CLI, the language server and the MCP bridge.

Adapters translate their protocol to these calls and back; nothing here knows LSP or MCP.
Paths are workspace-relative POSIX strings; lines are 1-based; columns are 0-based code points.
"""

from __future__ import annotations

import difflib
import errno
import gc
import logging
import os
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctx_lsp.index.discovery import FileFilter
from ctx_lsp.index.edge_words import EDGE_WORDS
from ctx_lsp.index.facts import is_test_path, split_lines
from ctx_lsp.index.git_activity import GitActivity, started_by_git
from ctx_lsp.index.model import RESOLVER_IMPORT, Edge, EdgeKind, Node, NodeKind
from ctx_lsp.index.workspace import BuildReport, Progress, WorkspaceIndex
from ctx_lsp.retrieval.text import identifier_form

if TYPE_CHECKING:
    from ctx_lsp.retrieval.dense_options import DenseOptions

Checkpoint = Callable[[], None]  # called between retrieval stages; may raise to cancel

HISTORY_EAGER_FILES = 500  # above this many files, git history syncs on the first history question
RELATIONS = ("callers", "callees", "implementations", "references", "importers", "tests", "history")
TEST_DEPTH = 3  # tests that reach a symbol through at most this many calls count as its (static) tests
MRO_CLASSES = 3  # classes of one name whose bases `Class.member` is looked up through
MRO_LIMIT = 64  # ancestors visited per class (deep framework hierarchies end well before)


CALL_SITE_FILES = 400  # files whose calling scopes `call_sites` binds again: well under 0.5 s


class TargetNotFound(LookupError):
    """A file or symbol that is not in the index."""


NAME_MAX = 255  # bytes in one path component (Linux, macOS and Windows file systems alike)


def path_problem(text: str) -> str | None:
    """Why `text` cannot name a file, in a few words (NUL byte, a component too long); None when it can."""
    if "\0" in text:
        return "the path contains a NUL byte"
    for part in text.replace("\\", "/").split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX:
            return f"a path component is longer than {NAME_MAX} bytes ({os.strerror(errno.ENAMETOOLONG)})"
    return None


def _word_at(text: str, col: int) -> str:
    """The identifier the 0-based code point `col` of `text` is on (or just after), else ""."""
    for m in _IDENT.finditer(text):
        if m.start() <= col <= m.end():
            return m.group()
    return ""


_IDENT = re.compile(r"[^\W\d]\w*")


def _short_name(node_id: str) -> str:
    return node_id.rsplit(".", 1)[-1].rsplit(":", 1)[-1]


_PATH_LINE = re.compile(r"^(.+\.py):(-?\d+)$")


def _exists(p: Path) -> bool:
    """Path.exists, with the errors a path can raise (a component too long, an unreadable directory)
    turned into a one-line TargetNotFound."""
    try:
        return p.exists()
    except (OSError, ValueError) as exc:
        raise TargetNotFound(f"cannot use the path {p}: {getattr(exc, 'strerror', None) or exc}") from None


def collect_dropped() -> float:
    """Free the memory of engines no longer referenced; returns the seconds it took. Call it after
    dropping an engine (a folder removed, an index rebuilt). A build freezes what it made
    (`gc.freeze`: full collections skip those objects, which they would otherwise scan again and
    again), and an index is full of reference cycles (its listeners, its producers), so a dropped one
    stays in memory until its objects are unfrozen and collected: ~400 MB per Django index."""
    t = time.perf_counter()
    gc.unfreeze()
    gc.collect()
    gc.freeze()  # what is still alive: frozen again, as it was
    return time.perf_counter() - t


class Engine:
    """A workspace index plus retrieval and memory, with a lock so adapters can share it."""

    def __init__(self, root: Path, cache_dir: Path | None = None, flt: FileFilter | None = None,
                 jedi: bool = False, dense: DenseOptions | None = None) -> None:
        self.index = WorkspaceIndex(root, cache_dir=cache_dir, flt=flt)
        self.dense_options = dense  # None: no dense generator (ctx_lsp/retrieval/dense.py)
        self.root = self.index.root
        self.jedi_enabled = jedi
        self.lock = threading.RLock()
        self.opened = False
        self.open_report: BuildReport | None = None  # what the last open did (a warm start re-reads only changes)
        self._retriever: Any = None
        self._git: GitActivity | None = None  # found on the first wait_for_git
        self._aliases: tuple[tuple[int, float], dict[str, str]] | None = None  # see module_alias
        self._scope_memo: Any = None  # retrieval.files.ScopeMemo, made on first use (see scope_memo)
        # the lexical indexes are written with the cache, so a fresh process need not rebuild them
        self.index.save_sections["lexical"] = lambda: self.retriever.lexical_snapshot()

    # -- lifecycle ----------------------------------------------------------------------------
    def open(self, progress: Progress | None = None) -> BuildReport:
        with self.lock:
            report = self.index.load_or_build(progress, save=False)
            self.open_report = report
            self._attach_cached_refinement()
            self._attach_producers()
            self.index.save_pending()  # after the producers: their sections (static COVERS) are in the write
            self.opened = True
            return report

    def _attach_cached_refinement(self) -> None:
        """The jedi edges a refinement cached for this cache's files (`ctx-lsp index --refine`, or the
        language server sharing the cache): in the graph of every process that opens it, so one-shot
        answers equal the server's on the same files. No jedi runs here."""
        from ctx_lsp.index.refine import STATE_KEY, attach_refiner

        state = self.index.extra_state.get(STATE_KEY)
        if isinstance(state, dict) and state.get("files"):
            attach_refiner(self.index, lock=self.lock)

    def _attach_producers(self) -> None:
        """COVERS (ctx_lsp.sources.coverage_data) and TOUCHED (ctx_lsp.sources.history) producers: they re-apply their
        persisted edges and follow index updates. Neither may fail an open (no git is normal)."""
        from ctx_lsp.sources.coverage_data import attach_coverage
        from ctx_lsp.sources.history import attach_history

        # Blaming every file of a large repository costs minutes on its first open: there history
        # syncs on the first history question instead (results are cached by blob id either way).
        eager = len(self.index.facts) <= HISTORY_EAGER_FILES
        for attach, kwargs in ((attach_coverage, {}), (attach_history, {"sync": eager})):
            t = time.perf_counter()
            try:
                attach(self.index, **kwargs)  # type: ignore[operator]
                self.index.phases[attach.__name__.removeprefix("attach_")] = time.perf_counter() - t
            except Exception:
                import logging

                logging.getLogger(__name__).exception("%s failed", attach.__name__)

    def ensure_history(self) -> None:
        """Bring git history up to date before a history question (lazy on large repositories)."""
        from ctx_lsp.sources.history import history_for

        h = history_for(self.index)
        if h is not None:
            with self.lock:
                try:
                    h.ensure_current()
                except Exception:
                    import logging

                    logging.getLogger(__name__).exception("history sync failed")

    def wait_for_git(self, on_wait: Callable[[], None] | None = None) -> float:
        """Before a request reads the disk (the one-shot CLI, the daemon, the MCP bridge): wait while
        git writes the work tree, at most git_activity.REQUEST_WAIT_S, so the answer is about the tree
        a checkout leaves and not a half-written one. Not under the lock (other callers go on). The
        language server never blocks on git: it answers from the graph as it was (GitHold). A
        process git started (a hook) never waits: its git may hold the lock until it exits. Returns
        the seconds waited; `on_wait` is called once if it waits."""
        if started_by_git():
            return 0.0
        if self._git is None:
            self._git = GitActivity.find(self.root)  # one `git rev-parse` (~1 ms), then stats only
        return self._git.settle(on_wait)

    def refresh(self) -> list[str]:
        """Re-read files changed on disk (by size/mtime, then content hash)."""
        with self.lock:
            if not self.opened:
                self.open()
                return []
            return self.index.refresh()

    @property
    def graph(self):  # type: ignore[no-untyped-def]
        return self.index.graph

    # -- targets ----------------------------------------------------------------------------
    def resolve_target(self, target: str, cwd: Path | None = None) -> str:
        """A node id for a file path (absolute or workspace-relative) or a (qualified) symbol name.

        A relative path names a file under the root when there is one, else under `cwd` (default: this
        process's). Raises TargetNotFound with a one-line message; ValueError for a path outside the root.
        """
        g = self.index.graph
        t = target.strip()
        if not t:
            raise TargetNotFound("empty target")
        if "::" in t:
            path, _, qual = t.partition("::")
            t = f"{path}::{identifier_form(qual)}"  # a file name is as the file system has it; a name as Python reads it
            if t in g:
                return t
            raise TargetNotFound(f"unknown symbol: {t}{self._did_you_mean(t)}")
        at = _PATH_LINE.match(t)
        if at is not None:  # `pkg/mod.py:120`, as tracebacks, linters and `context --at` give it
            rel = self.resolve_target(at.group(1), cwd)
            line = int(at.group(2))
            if not 1 <= line <= self.index.facts[rel].lines:
                raise TargetNotFound(f"{rel} has no line {line}")
            node = self.symbol_at(rel, line)
            return node.id if node is not None else rel
        if t.endswith(".py") or "/" in t or Path(t).is_absolute() or self._is_dir(t, cwd):
            problem = path_problem(t)
            if problem:
                raise TargetNotFound(f"not a usable path: {problem}")
            p = Path(t)
            if not p.is_absolute():
                try:
                    if (rel := self.index.rel(p)) in g:  # an indexed file: no need to ask the file system
                        return rel
                except ValueError:
                    pass
                # relative to the root when it names a file there, else to the current directory
                here = (cwd or Path.cwd()) / p
                if not _exists(self.root / p) and not _exists(here):
                    raise TargetNotFound(f"no such file under the workspace root or the current directory: {t}")
                p = self.root / p if _exists(self.root / p) else here
            rel = self.index.rel(p)
            if rel in g:
                return rel
            if p.is_dir():
                raise TargetNotFound(f"{t} is a directory; pass a Python file inside it")
            raise TargetNotFound(f"file not in the index: {rel}")
        t = identifier_form(t)  # neither a path nor PATH::NAME: a module or symbol name
        module = self.index.ws.modules.get(t)
        if module is not None and module in g and "." in t:
            return module  # a dotted module name (`requests.adapters`), as imports write it: its file
        candidates = self.find_symbols(t)
        if not candidates and module is not None and module in g:
            return module  # a top-level module or package no symbol is named like (`requests`)
        if not candidates:
            commit = self._commit_named(t)
            if commit is not None:
                return commit
            if "." in t and not t.endswith(".") and _exists(self.root / t):  # README.md, setup.cfg
                raise TargetNotFound(f"not an indexed Python file: {t}")
            raise TargetNotFound(f"unknown symbol: {t}{self._did_you_mean(t)}")
        return candidates[0].id

    def _did_you_mean(self, target: str) -> str:
        close = self.suggest_symbols(target)
        return f"; did you mean: {', '.join(close)}?" if close else ""

    def _is_dir(self, name: str, cwd: Path | None) -> bool:
        """Whether a bare name (`docs`) is a directory under the root or the current directory and
        no module or symbol: then it is a path, answered as one."""
        if name in self.index.ws.modules or self.index.graph.symbols_named(name.rpartition(".")[2]):
            return False
        try:
            return (self.root / name).is_dir() or ((cwd or Path.cwd()) / name).is_dir()
        except (OSError, ValueError):
            return False

    def _commit_named(self, text: str) -> str | None:
        """The commit node a hash names: in full, or any unique prefix of 7 or more hex digits (`git log
        --oneline` prints 7); a prefix several commits share raises TargetNotFound naming them."""
        t = text.lower().removeprefix("commit:")
        if not (7 <= len(t) <= 40) or any(c not in "0123456789abcdef" for c in t):
            return None
        g = self.index.graph
        if len(t) >= 12:  # a commit node's name is its 12-digit short hash
            ids = [i for i in g.by_name.get(t[:12], ()) if i.startswith("commit:" + t)]
        else:
            ids = sorted(i for name, held in g.by_name.items() if len(name) == 12 and name.startswith(t)
                         for i in held if i.startswith("commit:"))
        if len(ids) > 1:
            raise TargetNotFound(f"ambiguous commit {text}: {', '.join(i[7:19] for i in ids[:5])}")
        return ids[0] if ids else None

    def call_sites(self, node_id: str, direction: str = "in") -> list[Edge]:
        """Every call (CALLS, INSTANTIATES) into `node_id` ("in") or out of it ("out"), one edge per
        site. The graph keeps one edge per (caller, callee, kind), at its first site; the calling
        scopes' site groups are bound again here with every site kept, in memory only (the graph and
        the cache are unchanged). Edges only the graph has (jedi, callback flow) are kept as they are;
        past CALL_SITE_FILES files, the rest keep their first sites."""
        from ctx_lsp.index.bind import Binder

        g = self.index.graph
        kinds = (EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value)
        base = g.in_edges(node_id, kinds) if direction == "in" else g.out_edges(node_id, kinds)
        found = {(e.src, e.dst, e.kind, e.path, e.line, e.col): e for e in base}
        binder = Binder(self.index.ws)
        binder.every_site = True
        # only the site groups of the calling scopes are evaluated again (a hub's callers are a few
        # functions in each of many large files)
        scopes: dict[str, set[str]] = {}
        for e in base:
            scopes.setdefault(e.path, set()).add(e.src.partition("::")[2])
        for path in sorted(p for p in scopes if p in self.index.facts)[:CALL_SITE_FILES]:
            try:
                edges = binder.bind_scopes(path, scopes[path]).edges
            except Exception:  # the graph's first sites still answer
                logging.getLogger(__name__).exception("binding %s for its call sites failed", path)
                continue
            for e in edges:
                if e.kind in kinds and (e.dst if direction == "in" else e.src) == node_id:
                    found.setdefault((e.src, e.dst, e.kind, e.path, e.line, e.col), e)
        return sorted(found.values(), key=lambda e: (e.path, e.line, e.col, e.src, e.dst, e.kind))

    def same_name_elsewhere(self, target: str, chosen: str) -> list[str]:
        """Other symbols a bare or dotted name `target` (not a path, not PATH::NAME) names as well as
        `chosen`: defs of its name in other files or other classes (`process_response`, which eight
        unrelated middlewares define), best first, as the MCP tools list them."""
        node = self.index.graph.node(chosen)
        t = target.strip()
        if node is None or node.qualname is None or "::" in t or "/" in t or t.endswith(".py"):
            return []
        return [n.id for n in self.find_symbols(t) if n.id != chosen and n.name == node.name]

    def find_symbols(self, name: str) -> list[Node]:
        """Symbols matching a qualified name (`Class.method`, `pkg.mod.func`) or a short name, best first."""
        g = self.index.graph
        name = identifier_form(name)
        parts = name.replace("::", ".").split(".")
        short = parts[-1]
        hits = [n for n in g.symbols_named(short) if n.qualname is not None]
        if len(parts) > 1:
            dotted = name.replace("::", ".")

            def full(n: Node) -> str:
                mod = self.index.ws.canonical.get(n.path, n.path)
                return f"{mod}.{n.qualname}"

            exact = [n for n in hits if n.qualname == dotted or full(n) == dotted or full(n).endswith("." + dotted)]
            hits = exact or self._inherited(".".join(parts[:-1]), short) or self._exported(parts)
            module = self.module_alias(parts[0]) if not hits else None
            if module is not None:  # `nx.shortest_path`, as the project's own code imports networkx
                return self.find_symbols(".".join([module, *parts[1:]]))
        kind_rank = {"class": 0, "function": 1, "method": 2, "test": 3, "variable": 4}
        scope = self._scope()

        def overrides(n: Node) -> tuple[bool, int]:
            # a method name many classes define means the definition the others override first
            if n.kind != "method" or len(hits) < 2:
                return False, 0
            return bool(g.out_edges(n.id, ("OVERRIDES",))), -len(g.in_edges(n.id, ("OVERRIDES",)))

        def kind(n: Node) -> float:
            # a def nested in a function (a closure, a local helper) after every method of the name
            nested = n.kind == "function" and "." in (n.qualname or "")
            return 2.5 if nested else kind_rank.get(n.kind, 5)

        # package code before examples, docs and scripts (retrieval's scope prior), then by kind; tests
        # after the code they test
        return sorted(hits, key=lambda n: (n.qualname != short and n.qualname != name, -scope(n.path), kind(n),
                                           is_test_path(n.path), *overrides(n), n.path, n.qualname or ""))

    @property
    def scope_memo(self) -> Any:
        """The paths' scope without a task's names (retrieval.files.ScopeMemo), shared by name lookup
        and the retriever."""
        if self._scope_memo is None:
            from ctx_lsp.retrieval.files import ScopeMemo

            self._scope_memo = ScopeMemo()
        return self._scope_memo

    def _scope(self) -> Callable[[str], float]:
        """A path's scope prior, no path named: package code 1.0, examples, docs and scripts less."""
        from ctx_lsp.retrieval.files import scope_prior

        return scope_prior(self.index.ws, lambda _path: False, self.scope_memo)

    def module_alias(self, name: str) -> str | None:
        """The workspace module `name` stands for where the project's code imports it under that
        name (`import networkx as nx`, `from django.db import models as m`): the module most of its
        imports give the name, if any. Worked out once per index update."""
        stamp = (id(self.index.facts), self.index.last_update)
        if self._aliases is None or self._aliases[0] != stamp:
            counts: dict[str, dict[str, int]] = {}
            for f in self.index.facts.values():
                for imp in f.imports:
                    if imp.asname is None or imp.level:
                        continue
                    dotted = imp.module if imp.name is None else f"{imp.module}.{imp.name}"
                    per = counts.setdefault(imp.asname, {})
                    per[dotted] = per.get(dotted, 0) + 1
            best = {a: max(sorted(per), key=per.__getitem__) for a, per in counts.items()}
            self._aliases = (stamp, best)
        module = self._aliases[1].get(name)
        return module if module is not None and module != name and module in self.index.ws.modules else None

    def _inherited(self, owner: str, member: str) -> list[Node]:
        """`Class.member` where the class does not define `member` itself: the member its nearest
        base class defines, so `TemplateView.get_context_data` names `ContextMixin.get_context_data`."""
        out: list[Node] = []
        for cls in [n for n in self.find_symbols(owner) if n.kind == "class"][:MRO_CLASSES]:
            out += [n for n in self._member(cls.id, member) if n not in out]
        return out

    def _member(self, owner_id: str, member: str) -> list[Node]:
        """`member` of a class or function as Python finds it: its own, else on the nearest bases
        (INHERITS edges, breadth first: the MRO of single inheritance)."""
        g = self.index.graph
        seen, level = {owner_id}, [owner_id]
        while level and len(seen) <= MRO_LIMIT:
            found = [n for c in level if (n := g.node(f"{c}.{member}")) is not None]
            if found:
                return found
            level = [e.dst for c in level for e in g.out_edges(c, ("INHERITS",)) if e.dst not in seen]
            seen.update(level)
        return []

    def _exported(self, parts: list[str]) -> list[Node]:
        """`pkg.mod.Name[.member]` where `pkg.mod` re-exports Name (`django.db.models.Q`, defined in
        `query_utils`): resolved by the binder's module lookup (re-exports, `__init__`, `__all__`)."""
        from ctx_lsp.index.modules import ModuleScope

        ws, g = self.index.ws, self.index.graph
        for k in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:k])
            if module not in ws.modules:
                continue
            value = ModuleScope(ws).module_attr(module, parts[k], 0)
            node = g.node(value[1]) if value is not None and value[0] == "sym" else None
            found = [node] if node is not None else []
            for member in parts[k + 1:]:
                found = self._member(found[0].id, member) if found else []
            return found
        return []

    def suggest_symbols(self, name: str, n: int = 3) -> list[str]:
        """Qualified names close to an unknown `name` (for a "did you mean" hint)."""
        t = name.strip()
        names = sorted({x.qualname for x in self.index.graph.nodes() if x.qualname})
        short = sorted({q.rsplit(".", 1)[-1] for q in names})
        return difflib.get_close_matches(t, names, n=n, cutoff=0.6) or \
            difflib.get_close_matches(t.rsplit(".", 1)[-1], short, n=n, cutoff=0.6)

    def symbol_at(self, path: str, line: int, col: int | None = None) -> Node | None:
        """The innermost symbol at a position (1-based line), preferring a name the cursor is on."""
        g = self.index.graph
        if col is not None:
            facts = self.index.facts.get(path)
            if facts is not None:
                lines = split_lines(self.index.text_of(path))
                text = lines[line - 1] if 0 < line <= len(lines) else ""
                word = _word_at(text, col)
                # on a call/reference site: the symbol it names, the one spelled under the cursor first
                # (an import's edges all sit at its statement: _imported_at reads those)
                statements = {(i.line, i.col) for i in facts.imports}
                hits: list[Node] = []
                for e in self.index.graph.file_edges.get(path, []):
                    short = _short_name(e.dst)
                    if e.line == line and e.kind in ("CALLS", "INSTANTIATES", "REFERENCES") and \
                            (e.line, e.col) not in statements and e.col <= col <= e.col + len(short):
                        n = g.node(e.dst)
                        if n is not None:
                            if short == word:
                                return n
                            hits.append(n)
                if hits:
                    return hits[0]
                imported = self._imported_at(path, facts, lines, line, word) if word else None
                if imported is not None:
                    return imported
        return g.innermost(path, line)

    def _imported_at(self, path: str, facts: Any, lines: list[str], line: int, word: str) -> Node | None:
        """The project symbol an import statement names at the cursor: its edges are sited at the
        statement (`from pkg import a, b` is one site for both, and a parenthesised list runs on below
        it), so the word under the cursor says which."""
        g = self.index.graph
        for imp in facts.imports:
            if imp.line > line or (imp.asname or imp.name) != word:
                continue
            # the cursor is in this statement: on its first line, or on lines that continue it
            if any(not lines[k - 1].startswith((" ", "\t", ")")) for k in range(imp.line + 1, line + 1)):
                continue
            # the graph keeps one edge per (source, target): a name imported twice is sited at the first
            named = [e for e in g.file_edges.get(path, []) if e.kind == "REFERENCES" and _short_name(e.dst) == imp.name
                     and e.resolver == RESOLVER_IMPORT]
            named.sort(key=lambda e: e.line != imp.line)
            for e in named:
                return g.node(e.dst)
        return None

    # -- neighbourhoods -----------------------------------------------------------------------
    def neighbors(self, node_id: str, every_site: bool = False) -> list[dict[str, Any]]:
        """Typed 1-hop neighbourhood in both directions (the `neighbors --json` items).

        For a file, edges of the file node and of every symbol it defines are included, except the
        file's own CONTAINS edges to its symbols. `every_site` (a symbol only): each CALLS and
        INSTANTIATES neighbour also gets `sites`, every call site of that pair (`call_sites`), not
        only the first one the graph keeps.
        """
        g = self.index.graph
        node = g.node(node_id)
        if node is None:
            raise TargetNotFound(f"not in the index: {node_id}")
        members = [node_id]
        if node.qualname is None:
            members = [n.id for n in g.nodes_of_file(node.path)]
        member_set = set(members)
        out: list[dict[str, Any]] = []
        seen: set[tuple[str, str, str, str]] = set()
        for m in members:
            for e in g.out_edges(m):
                if e.dst in member_set and node.qualname is None:
                    continue
                self._add_neighbor(out, seen, e, e.dst, "out", m)
            for e in g.in_edges(m):
                if e.src in member_set and node.qualname is None:
                    continue
                self._add_neighbor(out, seen, e, e.src, "in", m)
        out.sort(key=lambda d: (d["edge"], d["direction"], d["path"], d["symbol"] or "", d["site"]["line"]))
        if every_site and node.qualname is not None and node.kind != NodeKind.COMMIT.value:
            sites: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
            for direction in ("in", "out"):
                for e in self.call_sites(node_id, direction):
                    other = e.src if direction == "in" else e.dst
                    sites.setdefault((e.kind, direction, other), []).append(
                        {"path": e.path, "line": e.line, "col": e.col})
            for item in out:
                got = sites.get((item["edge"], item["direction"], item["id"]))
                if got:
                    item["sites"] = got
        return out

    def _add_neighbor(self, out: list[dict[str, Any]], seen: set[tuple[str, str, str, str]], e: Edge, other: str,
                      direction: str, member: str) -> None:
        key = (e.kind, direction, other, member)
        if key in seen:
            return
        seen.add(key)
        n = self.index.graph.node(other)
        if n is None:
            return
        item: dict[str, Any] = {
            "id": n.id, "path": n.path, "symbol": n.qualname, "kind": n.kind, "line": n.start_line, "edge": e.kind,
            "direction": direction, "site": {"path": e.path, "line": e.line, "col": e.col},
            "resolver": e.resolver, "from_symbol": self.index.graph.node(member).qualname if member in self.index.graph else None,  # type: ignore[union-attr]
        }
        if e.extra:
            item["names"] = list(e.extra)
        if n.kind == "commit":
            from ctx_lsp.sources.git import commit_info

            item["commit"] = commit_info(n)  # hash, date, author, email, subject
        out.append(item)

    def architectural(self, path: str) -> dict[str, Any]:
        """A file's neighbourhood grouped by (edge kind, direction)."""
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for item in self.neighbors(path):
            groups.setdefault((item["edge"], item["direction"]), []).append(item)
        return {
            "path": path,
            "groups": [{"edge": k[0], "direction": k[1], "neighbors": v} for k, v in sorted(groups.items())],
        }

    def related(self, node_id: str, relation: str, every_site: bool = False) -> list[dict[str, Any]]:
        """Nodes in one relation to a symbol, each with a reason: callers, callees, implementations, ...
        `every_site`: callers once per call site (`call_sites`), not once per caller at its first call."""
        if relation not in RELATIONS:
            raise ValueError(f"unknown relation {relation!r}; expected one of {', '.join(RELATIONS)}")
        if relation == "history":
            self.ensure_history()
        g = self.index.graph
        node = g.node(node_id)
        if node is None:
            raise TargetNotFound(f"not in the index: {node_id}")
        spec: dict[str, tuple[str, tuple[str, ...]]] = {
            "callers": ("in", (EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value)),
            "callees": ("out", (EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value)),
            "implementations": ("in", (EdgeKind.INHERITS.value, EdgeKind.OVERRIDES.value)),
            "references": ("in", (EdgeKind.REFERENCES.value, EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value)),
            "importers": ("in", (EdgeKind.IMPORTS.value,)),
            "tests": ("in", (EdgeKind.COVERS.value,)),
            "history": ("in", (EdgeKind.TOUCHED.value,)),
        }
        direction, kinds = spec[relation]
        arrow = "<-" if direction == "in" else "->"

        def item(n: Node, e: Edge) -> dict[str, Any]:
            # what n is to the edge's other end (the symbol itself, or for implementations the class
            # between): "calls Repo.save at ...", "called by Repo.save at ...", "subclass of Base at ..."
            end = g.node(e.dst if direction == "in" else e.src) or node
            return {"node": n, "edge": e, "reason": f"{EDGE_WORDS.get(e.kind + arrow, e.kind + arrow)} "
                                                    f"{end.qualname or end.path} at {e.path}:{e.line} ({e.resolver})"}

        if relation == "callers" and every_site:
            return [item(n, e) for e in self.call_sites(node_id, "in") if (n := g.node(e.src)) is not None]
        if relation == "importers" and node.qualname is not None:
            return self._name_importers(node)
        ids = [node_id]
        out: list[dict[str, Any]] = []
        frontier = list(ids)
        seen_nodes: set[str] = set()
        depth = 0
        while frontier and depth < (4 if relation == "implementations" else 1):
            nxt: list[str] = []
            for cur in frontier:
                edges = g.in_edges(cur, kinds) if direction == "in" else g.out_edges(cur, kinds)
                for e in edges:
                    other = e.src if direction == "in" else e.dst
                    if other in seen_nodes:
                        continue
                    seen_nodes.add(other)
                    n = g.node(other)
                    if n is None:
                        continue
                    out.append(item(n, e))
                    nxt.append(other)
            frontier = nxt
            depth += 1
        return out

    def _name_importers(self, node: Node) -> list[dict[str, Any]]:
        """The import statements that bring a symbol's name in: from its module, then from a module that
        re-exports it (`from flask import url_for`, through flask/__init__.py), each once per file; the
        importers of the rest of its module are not its importers."""
        g = self.index.graph
        name = node.qualname.split(".")[0] if node.qualname else ""
        out: list[dict[str, Any]] = []
        seen: set[str] = {node.path}
        frontier = [node.path]
        # a file's IMPORTS edge stands at its first import of the module; the import of the name
        # itself is the file's reference to it (the binder's, at that statement's line)
        at: dict[str, Edge] = {}
        for e in g.in_edges(node.id, (EdgeKind.REFERENCES.value,)):
            if g.node(e.src) is not None and "::" not in e.src and (e.src not in at or e.line < at[e.src].line):
                at[e.src] = e
        for _ in range(2):  # the module, then its re-exporters (as benchmark_gen's gold reads it)
            nxt: list[str] = []
            for mod in frontier:
                for e in sorted(g.in_edges(mod, (EdgeKind.IMPORTS.value,)), key=lambda e: (e.src, e.line)):
                    n = g.node(e.src)
                    if name not in e.extra or e.src in seen or n is None:
                        continue
                    seen.add(e.src)
                    e = at.get(e.src, e)
                    via = "" if mod == node.path else f" through {mod}"
                    out.append({"node": n, "edge": e,
                                "reason": f"imports {name}{via} at {e.path}:{e.line} ({e.resolver})"})
                    nxt.append(e.src)
            frontier = nxt
        return out

    def tests_for(self, node_id: str, depth: int = TEST_DEPTH) -> list[dict[str, Any]]:
        """Tests of a symbol, each `{node, location, reason}`: COVERS edges (per-test coverage, static
        test mapping) first, then tests that call it directly or through up to `depth` calls (static,
        from CALLS/INSTANTIATES edges; a class counts as reached when any of its methods is)."""
        g = self.index.graph
        node = g.node(node_id)
        if node is None:
            raise TargetNotFound(f"not in the index: {node_id}")
        found: dict[str, dict[str, Any]] = {}
        for it in self.related(node_id, "tests"):
            cov: Node = it["node"]
            found.setdefault(cov.id, {"node": cov, "location": f"{cov.path}:{cov.start_line}", "reason": it["reason"]})
        # chain: the symbols between a test and the target, nearest to the test last
        starts: list[tuple[str, list[str]]] = [(node_id, [])]
        if node.kind == "class":
            starts += [(n.id, [n.qualname]) for n in g.nodes_of_file(node.path)
                       if n.qualname and n.qualname.startswith(f"{node.qualname}.")]
        queue: deque[tuple[str, list[str]]] = deque(starts)
        seen = {s for s, _ in starts}
        while queue:
            cur, chain = queue.popleft()
            if len(chain) >= depth:
                continue
            for it in self.related(cur, "callers"):
                n = it["node"]
                if n.id in seen:
                    continue
                seen.add(n.id)
                if n.kind != "test":
                    queue.append((n.id, [*chain, n.qualname or n.id]))
                    continue
                if n.id not in found:
                    e = it["edge"]
                    reason = (f"static: calls it directly at {e.path}:{e.line}" if not chain else
                              f"static: reaches it via {' -> '.join(reversed(chain))} (call at {e.path}:{e.line})")
                    found[n.id] = {"node": n, "location": f"{n.path}:{n.start_line}", "reason": reason}
        return list(found.values())

    # -- retrieval ------------------------------------------------------------------------------
    @property
    def retriever(self):  # type: ignore[no-untyped-def]
        if self._retriever is None:
            from ctx_lsp.retrieval.engine import Retriever

            self._retriever = Retriever(self)
        return self._retriever

    def context(self, query: str, budget: int = 4000, *, path: str | None = None, line: int | None = None,
                checkpoint: Checkpoint | None = None, record: bool = True) -> dict[str, Any]:
        """A ContextPack (dict, see docs/protocol.md) for a question or task."""
        with self.lock:
            return self.retriever.context(query, budget, path=path, line=line, checkpoint=checkpoint, record=record)

    def context_for(self, params: dict[str, Any]) -> dict[str, Any]:
        """`ctx-lsp context` (in process and in the daemon): `query`, `budget`, and optionally `at_path`
        and `at_line` (1-based) with the caller's `cwd`; a path and line without a query ask about the
        symbol there (`context_at`). TargetNotFound or ValueError for a place that is not indexed."""
        query, budget = params.get("query") or "", params.get("budget", 4000)
        at_path, at_line, cwd = params.get("at_path"), params.get("at_line"), params.get("cwd")
        if not isinstance(query, str) or not isinstance(budget, int) or budget <= 0:
            raise ValueError("a query and a positive budget are needed")
        rel = None
        if isinstance(at_path, str):
            rel = self.resolve_target(at_path if at_path.endswith(".py") or "/" in at_path else f"./{at_path}",
                                      cwd=Path(cwd) if isinstance(cwd, str) else None)
            if "::" in rel:
                raise TargetNotFound(f"--at takes a file, not a symbol: {at_path}")
        line = at_line if isinstance(at_line, int) and at_line >= 1 else None
        if rel is not None:
            self.check_place(rel, line)
        if not query.strip():
            if rel is None or line is None:
                raise ValueError("empty query")
            return self.context_at(rel, line, None, budget)
        return self.context(query, budget, path=rel, line=line)

    def check_place(self, rel: str, line: int | None) -> None:
        """TargetNotFound unless `rel` is an indexed file and `line` (1-based) one of its lines: where a
        caller says it is working (`context --at`, the MCP tool's `path`/`line`) is never ignored silently."""
        facts = self.index.facts.get(rel)
        if facts is None:
            raise TargetNotFound(f"not an indexed Python file: {rel}")
        if line is not None and line > max(facts.lines, 1):
            raise TargetNotFound(f"line {line} is past the end of {rel} ({facts.lines} lines)")

    def context_at(self, path: str, line: int, col: int | None = None, budget: int = 4000,
                   checkpoint: Checkpoint | None = None) -> dict[str, Any]:
        """A ContextPack for the symbol under the cursor: definition, callers, callees, tests."""
        with self.lock:
            return self.retriever.context_at(path, line, col, budget, checkpoint=checkpoint)

    def note_open(self, path: str) -> None:
        """Working memory: a file the user opened (fed by the server)."""
        self.retriever.working.touch(path)

    def note_edit(self, path: str) -> None:
        """Working memory: a file the user edited (fed by the server)."""
        self.retriever.working.touch(path, edited=True)

    def set_stale(self, stale: bool) -> None:
        """Mark answers as coming from a partial index (while the server is still indexing)."""
        self.retriever.stale = stale

    def status(self) -> dict[str, Any]:
        ix = self.index
        return {
            "root": str(ix.root),
            "files": len(ix.facts),
            "nodes": ix.graph.number_of_nodes(),
            "edges": ix.graph.edge_counts(),
            "dirty_files": ix.dirty_files(),
            "resolution": ix.resolution_counts(),
            "last_update": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ix.last_update)) if ix.last_update else None,
        }
