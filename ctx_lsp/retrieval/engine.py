"""The Retriever: query -> plan -> seeds -> typed expansion -> scored candidates -> budgeted pack -> hop.

Ablation features (for benchmark_gen): "lexical", "symbols", "edges", "history_tests", "hops", "memory".
"""

from __future__ import annotations

import gc
import logging
import math
import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctx_lsp.index.facts import FileFacts, is_test_path, split_lines, unpack_records
from ctx_lsp.index.model import NodeKind
from ctx_lsp.retrieval.evidence import (
    TaskEvidence,
    cap_text,
    extract_evidence,
    issue_title,
    without_traceback_chrome,
)
from ctx_lsp.retrieval.excerpt import LineFocus
from ctx_lsp.retrieval.expand import edges_for, expand, is_test_node
from ctx_lsp.retrieval.files import (
    FileLexicalIndex,
    add_features,
    file_features,
    rank_files,
    scope_prior,
)
from ctx_lsp.retrieval.generators import Query, default_generators
from ctx_lsp.retrieval.lexical import LexicalIndex
from ctx_lsp.retrieval.literals import LiteralIndex
from ctx_lsp.retrieval.memory import EpisodicMemory, WorkingMemory
from ctx_lsp.retrieval.pack import pack
from ctx_lsp.retrieval.plan import EXPLICIT_SYMBOL, IMPLICIT_CONTEXT, Plan, make_plan
from ctx_lsp.retrieval.score import Candidate, Candidates
from ctx_lsp.retrieval.seeds import history_seeds, in_function_body, test_seeds
from ctx_lsp.retrieval.symbols import rank_symbols
from ctx_lsp.retrieval.text import composed, identifier_form, split_identifier, terms

if TYPE_CHECKING:
    from ctx_lsp.engine import Engine

log = logging.getLogger(__name__)

TEST_PRIOR = 0.6
# operators whose answer is other code than the named target
CURSOR_TESTS = 15  # the cursor pack's tests (tests_for), at most
W_CURSOR_TEST = 0.4  # a test covering the cursor's symbol or calling it
W_CURSOR_REACHED = 0.3  # a test reaching it through its callers
_ANSWERED_RELATIONS = ("callers", "callees", "implementations", "references", "importers")
_RELATIONAL = {"callers", "implementations", "references", "importers", "instantiations", "tests", "history"}
# the generators' names, and the stages that can be switched off: edges (typed expansion), hops, scope
# (the scope prior of files), files (the fused file ranking of task text)
ALL_FEATURES = frozenset({"lexical", "symbols", "edges", "history_tests", "hops", "memory",
                          "snippets", "traceback", "literals", "scope", "files"})
# generators that run only when set up: "dense" (the `dense` extra; ctx_lsp/retrieval/dense.py)
OPTIONAL_FEATURES = frozenset({"dense"})
FILE_TOP = 20
LEXICAL_SECTION = "lexical"  # the cache section of the lexical indexes' snapshot
LEXICAL_VERSION = 1
LEXICAL_FILES = 100
NEAR_TOP = 3
IN_FILE_TOP = 10  # leading files that get an item even when only their text matched
REL_FLOOR = 0.3  # a candidate outside the ranked files keeps this share of its score
EXPLAIN_SYMBOLS = 300  # symbols an `explain` pack lists with their parts
_PROJECT_PARENTS = frozenset({"", "src", "lib", "python"})  # where a project's own packages sit
_SYMBOL_KINDS = (NodeKind.CLASS.value, NodeKind.FUNCTION.value, NodeKind.METHOD.value)


class Retriever:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.lexical = LexicalIndex()
        self.file_lexical = FileLexicalIndex()
        self._literals: LiteralIndex | None = None  # built on the first task that quotes a message
        self.generators = default_generators()
        from ctx_lsp.retrieval.dense import make_dense

        # None without the extra (or when not asked for); dense_error says why when it was asked for
        self.dense, self.dense_error = make_dense(self, getattr(engine, "dense_options", None))
        self._folders: dict[str, list[str]] = {}
        self._folders_rev = -1
        self._project: tuple[object, frozenset[str]] = (None, frozenset())
        self._dirty: set[str] | None = None  # None = build everything on first use
        self._applied: dict[str, str] = {}  # path -> digest of the facts the lexical indexes hold
        self.lexical_loaded = False  # the lexical indexes started from the cache's snapshot
        self.working = WorkingMemory()
        self.episodic = EpisodicMemory(engine.index.cache_dir / "episodes.jsonl")
        self.stale = False  # set by an adapter while the index is still being built
        self._names_rev = -1
        self._names: list[str] = []
        self._compound: list[str] = []
        self._split_names: dict[str, tuple[str, ...]] = {}
        self._lines: dict[str, tuple[str, list[str]]] = {}
        engine.index.listeners.append(self._on_change)
        engine.index.while_binding.append(self._set_changed)

    def fresh_session(self) -> None:
        """The memory a fresh process would start with: no working memory, the episodes on disk.
        A long-lived process answering one-shot callers (the daemon) starts each request from here."""
        self.working = WorkingMemory()
        self.episodic = EpisodicMemory(self.engine.index.cache_dir / "episodes.jsonl")

    def set_dense(self, options: Any) -> None:
        """Set the dense generator up after the fact (benchmarks); `options` is a DenseOptions."""
        from ctx_lsp.retrieval.dense import make_dense

        self.engine.dense_options = options
        self.dense, self.dense_error = make_dense(self, options)

    def default_features(self) -> frozenset[str]:
        return ALL_FEATURES | {"dense"} if self.dense is not None or self.dense_error else ALL_FEATURES

    def dense_status(self) -> dict[str, Any]:
        """The dense generator's state for the pack and the status calls (docs/protocol.md)."""
        if self.dense is not None:
            return self.dense.status()
        if self.dense_error:
            return {"state": "unavailable", "reason": self.dense_error}
        return {"state": "off"}

    def reset_memory(self) -> None:
        """Forget working and episodic memory (in memory only; the persisted log is kept)."""
        self.working = WorkingMemory()
        self.episodic = EpisodicMemory(None)

    # -- index upkeep -------------------------------------------------------------------------
    def _on_change(self, paths: set[str]) -> None:
        if self._dirty is not None:
            self._dirty.update(paths)
        for p in paths:
            self._lines.pop(p, None)

    def sync(self) -> None:
        facts = self.engine.index.facts
        if self._dirty is None:
            packed = self.engine.index.loaded_sections.pop(LEXICAL_SECTION, None)
            todo = self._load_lexical(packed, facts) if packed is not None else None
            self.lexical_loaded = todo is not None
            if todo is None:
                self.lexical, self.file_lexical, self._applied = LexicalIndex(), FileLexicalIndex(), {}
                todo = sorted(facts)
            for path in todo:
                self._set_lexical(facts.get(path), path)
            self._dirty = set()
            self._refresh_names()
            gc.freeze()  # the lexical indexes live as long as the process: full collections need not scan them
            return
        if self._dirty:
            for path in sorted(self._dirty):
                self._catch_up(path)
                if self._literals is not None:
                    self._literals.set_file(facts.get(path), path)
            self._dirty.clear()

    def _set_changed(self, paths: list[str]) -> None:
        """Bring the live lexical indexes to the new facts of `paths` while a large update binds (in the
        index's thread beside the bind pool, under the engine lock the update holds); the next sync
        then finds them applied. Not before the indexes start: their first sync reads the facts."""
        if self._dirty is None:
            return
        for path in paths:
            self._catch_up(path)

    def _catch_up(self, path: str) -> None:
        """Set `path` in the lexical indexes unless they hold its current facts already: files only
        re-bound (a checkout re-binds their dependents too) hold the same facts, and those set beside
        the bind pool (`_set_changed`) are applied before the sync that follows; gone is None."""
        f = self.engine.index.facts.get(path)
        if self._applied.get(path) != (f.digest if f is not None else None):
            self._set_lexical(f, path)

    def _set_lexical(self, f: FileFacts | None, path: str) -> None:
        self.lexical.set_file(f, path)
        self.file_lexical.set_file(f, path)
        if f is None:
            self._applied.pop(path, None)
        else:
            self._applied[path] = f.digest

    def _load_lexical(self, packed: bytes, facts: dict[str, FileFacts]) -> list[str] | None:
        """Start both lexical indexes from a snapshot of the cache (`lexical_snapshot`, packed); the
        paths still to set (changed, new or gone since it was written), or None when it is unusable."""
        try:
            snap = unpack_records(packed)
            if not isinstance(snap, dict) or snap.get("v") != LEXICAL_VERSION:
                return None
            digests: dict[str, str] = snap["digests"]
            same = {p for p, d in digests.items() if (f := facts.get(p)) is not None and f.digest == d and f.chunk_terms}
            stale = set(digests) - same
            self.lexical.load(snap["chunks"], facts, same, stale)
            self.file_lexical.load(snap["files"], facts, same, stale)
            self._applied = {p: digests[p] for p in same}
            split = snap["split"]
            if isinstance(split, dict):
                self._split_names = {k: tuple(v) for k, v in split.items()}
        except Exception:  # any shape or decoding error: rebuild from the facts
            log.warning("lexical snapshot unusable, rebuilding the lexical indexes")
            return None
        return sorted(stale | (facts.keys() - same))

    def decode_lexical(self) -> None:
        """Start the lexical indexes and decode all their postings now, so no later query pays for a
        term's first read (the daemon, before it reports ready)."""
        self.sync()
        self.lexical.postings.decode_all()
        self.file_lexical.postings.decode_all()

    def lexical_snapshot(self) -> dict[str, Any]:
        """Both lexical indexes as of the current facts, for the cache (WorkspaceIndex.save_sections):
        the next process starts from it instead of indexing every file again."""
        self.sync()
        return {"v": LEXICAL_VERSION, "digests": dict(sorted(self._applied.items())),
                "chunks": self.lexical.snapshot(), "files": self.file_lexical.snapshot(),
                "split": {k: list(v) for k, v in sorted(self._split_names.items())}}

    def literal_index(self) -> LiteralIndex:
        if self._literals is None:
            index = LiteralIndex()
            facts = self.engine.index.facts
            for path in sorted(facts):
                index.set_file(facts[path], path)
            self._literals = index
        return self._literals

    def file_paths(self) -> list[str]:
        return sorted(self.engine.index.facts)

    def _refresh_names(self) -> None:
        g = self.engine.graph
        if self._names_rev != g.revision:
            self._names = sorted(g.by_name)
            self._by_prefix: dict[str, list[str]] = {}
            for name in self._names:
                self._by_prefix.setdefault(name[:2], []).append(name)
            compound: dict[str, tuple[str, ...]] = {}
            split = self._split_names  # kept across revisions: an edit changes few names, splitting all costs ~1 s
            kinds = _SYMBOL_KINDS + ("variable",)
            for n in g.nodes():
                qual = n[3]  # tuple indexing: ~60k nodes per refresh on Django
                if not qual or n[1] not in kinds:
                    continue
                name = qual.rpartition(".")[2]
                if name not in compound:
                    subs = split.get(name)
                    if subs is None:
                        subs = split[name] = tuple(split_identifier(name))
                    if len(subs) >= 2:
                        compound[name] = subs
            if len(split) > 2 * len(self._names) + 1000:  # names that left the workspace
                self._split_names = {k: v for k, v in split.items() if k in g.by_name}
            self._compound = sorted(compound)
            # sub-word -> compound names containing it, so a query only checks names sharing a word
            self._by_subword: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
            for name in self._compound:
                subs = compound[name]
                for sw in set(subs):
                    self._by_subword.setdefault(sw, []).append((name, subs))
            self._names_rev = g.revision

    def names_like(self, word: str) -> list[str]:
        """Candidate names for fuzzy matching: same first two letters (typos rarely hit those)."""
        self._refresh_names()
        return self._by_prefix.get(word[:2].lower(), [])

    def compound_names_with(self, subword: str) -> list[tuple[str, tuple[str, ...]]]:
        self._refresh_names()
        return self._by_subword.get(subword, [])

    def source_lines(self, path: str) -> list[str]:
        """Lines of a file as the index sees it: the editor buffer when one is open, else the disk."""
        ix = self.engine.index
        facts = ix.facts.get(path)
        digest = facts.digest if facts else ""
        hit = self._lines.get(path)
        if hit is not None and hit[0] == digest:
            return hit[1]
        # regular files inside the root only (discovery.read_source); line numbers as the index counted
        # them (not str.splitlines)
        lines = split_lines(ix.text_of(path))
        if len(self._lines) > 256:
            self._lines.clear()
        self._lines[path] = (digest, lines)
        return lines

    def is_symbol(self, word: str) -> bool:
        """Whether a workspace symbol has exactly this name (case-sensitive), other than one defined
        inside a function: a plain word of prose ("Content", "Handler") is not a name of a class a
        test defines in its body."""
        g = self.engine.graph
        word = identifier_form(word)
        return any(n.name == word and not in_function_body(g, n) for n in g.symbols_named(word))

    # -- the read path ------------------------------------------------------------------------
    def context(self, query: str, budget: int = 4000, *, path: str | None = None, line: int | None = None,
                checkpoint: Callable[[], None] | None = None, record: bool = True,
                features: frozenset[str] | None = None, explain: bool = False) -> dict[str, Any]:
        """plan -> generators -> expand -> score -> rank files -> pack -> hop, as one straight line.
        `features` default: every generator set up (the dense one only when it is). `explain` adds the
        ranking's raw inputs (`explain`: every file's evidence classes and prior, the wide symbol
        ranking with its parts), for fitting the fusion offline (benchmark_gen swebench --explain)."""
        if features is None:
            features = self.default_features()
        t = {"start": time.perf_counter()}
        check = checkpoint or (lambda: None)
        asked = len(query)
        query = composed(cap_text(query))
        self.sync()
        t["sync"] = time.perf_counter()
        is_symbol = self.is_symbol if "symbols" in features else None
        plan = make_plan(query, is_symbol)
        if plan.task:
            evidence = extract_evidence(query)
        else:
            # a question keeps the messages and error codes it quotes ("where does the error "..."
            # come from?"): they are looked up among the code's string literals, as in task text
            found = extract_evidence(query)
            evidence = TaskEvidence(query, messages=found.messages, codes=found.codes)
        if plan.task:
            # names in code blocks are bound by the snippet generator; mentions come from the prose
            prose = make_plan(evidence.prose, is_symbol)
            # the project's own name ("Sphinx version", "a Django bug") is not the class named like it
            project = self._project_names()
            plan.mentions = [m for m in prose.mentions if m.lower() not in project]
            plan.soft = [s for s in prose.soft if s[0].lower() not in project]
            if evidence.search.strip():
                plan.query = evidence.search  # lexical search reads the issue without its template and markup
        if path is None and plan.place is not None:
            # "what does parse.py:91 do": that place is the question's cursor, as an editor's would be
            path, line = self._place_of(plan.place)
        t["plan"] = time.perf_counter()
        check()
        q = Query(self, plan, evidence, Candidates(), features, path, line, explain=explain)
        for gen in self.generators:
            if (gen.name in features or gen.name == "cursor") and gen.applies(q):
                gen.seed(q)
        t["seed"] = time.perf_counter()
        check()
        hopped, hop_target = self._expand(q)
        t["expand"] = time.perf_counter()
        check()
        if plan.task:  # the file ranking orders task text's items (scope included)
            ranked = q.cands.ranked(self.prior(plan, features))
        else:  # a question: at equal evidence package code before examples, docs and scripts
            scope = self.engine._scope()
            ranked = q.cands.ranked(self.prior(plan, features), tie=_scope_tie(scope))
        files: list[dict[str, Any]] = []
        if plan.task and "files" in features:
            ranked, files = self._rank_files(q, ranked)
        t["score"] = time.perf_counter()
        relational = bool(set(plan.operators) & _RELATIONAL)
        targets = frozenset(q.resolved + ([hop_target] if hop_target else [])) if relational else frozenset()
        focus = (LineFocus.of(without_traceback_chrome(plan.query), self.lexical.idf, self.lexical.df, self.lexical.n)
                 if plan.task and "lexical" in features else None)
        chunks = self.lexical if plan.task and "lexical" in features else None
        symbols: list[dict[str, Any]] | None = None
        if files:  # task text: the symbol ranking leads the pack's spare budget too
            symbols = rank_symbols(self.engine.graph, ranked, files, chunks, plan.query, self.prior(plan, features))
        items = pack(ranked, self.engine.graph, self.source_lines, budget, targets, focus,
                     [(f["path"], f["score"]) for f in files],
                     [(f"{s['path']}::{s['symbol']}", s["score"]) for s in symbols or ()])
        t["pack"] = time.perf_counter()
        out_items = [it.to_json() for it in items]
        if not files:
            files = _files_of(out_items)
        if symbols is None:
            symbols = rank_symbols(self.engine.graph, ranked, files, chunks, plan.query, self.prior(plan, features))
        t["symbols"] = time.perf_counter()
        result = {
            "query": query,
            "plan": plan.to_json(),
            "budget": budget,
            "tokens": sum(i["tokens"] for i in out_items),
            "stale": self.stale,
            "dirty_files": self.engine.index.dirty_files(),
            "files": files,
            "symbols": symbols,
            "items": out_items,
            "timings_ms": _timings(t),
        }
        if len(query) < asked:
            result["plan"]["truncated"] = {"chars": asked, "kept": len(query)}
        if plan.task:
            result["plan"]["evidence"] = evidence.to_json()
        if q.notes and (plan.task or any(n.startswith("dense") for n in q.notes)):
            result["plan"]["generators"] = q.notes
        if "dense" in features:
            result["dense"] = self.dense_status()
        if explain:
            wide = rank_symbols(self.engine.graph, ranked, files, chunks, plan.query, self.prior(plan, features),
                                top=EXPLAIN_SYMBOLS, parts=True)
            result["explain"] = {"files": q.file_features, "symbols": wide}
        if hop_target is not None:
            result["plan"]["hop"] = {"resolved": hop_target, "reached": len(hopped)}
        unknown = [] if plan.task else [m for m in plan.mentions if not self._names_something(m)]
        notes = [f"no symbol, module or file named {m} is indexed; the items are the closest matches by text"
                 for m in unknown]
        if not plan.task:
            notes += self._empty_relations(plan, q.resolved[:1])
        if notes:  # a question about a name the index lacks, or a relation it has none of
            result["notes"] = notes
        if record and "memory" in features and out_items:  # an empty answer is nothing looked at
            # task text is about what its pack leads with; the names it mentions on the way are no targets
            self.episodic.record(query, plan.trigger, out_items,
                                 targets=q.resolved[:3] if plan.operators and not plan.task else None)
            for it in out_items[:3]:
                key = f"{it['path']}::{it['symbol']}" if it["symbol"] else it["path"]
                self.working.touch(key)
        return result

    def _expand(self, q: Query) -> tuple[list[str], str | None]:
        """Typed expansion from the resolved targets (or the best lexical symbols), then the hop."""
        plan, cands, features = q.plan, q.cands, q.features
        if "edges" not in features:
            return [], None
        spec = edges_for(plan, "history_tests" in features)
        described = not q.resolved
        sources = list(dict.fromkeys(q.grounded[:8] + q.resolved[:6])) if plan.task else q.resolved[:6]
        sources = sources or self._best_symbols(cands, q.lexical, 3)
        scope = scope_prior(self.engine.index.ws, _named_paths(q), self.engine.scope_memo) \
            if "scope" in features else None
        if sources:
            expand(self.engine.graph, cands, sources, spec, hops=2 if plan.trigger == IMPLICIT_CONTEXT or
                   "impact" in plan.operators or "implementations" in plan.operators else 1, scope=scope)
        if not ("hops" in features and described and plan.operators and plan.operators != ["definition"]):
            return [], None
        # Hop: the question described its target; the best-scoring symbol is now the resolved
        # target, so ask the plan's relation about it with full weight.
        prior = self.prior(plan, features)
        ranked = cands.ranked(prior)
        # what only working memory brought (the last answer, the open files) is no described target: a
        # session would answer "who calls frobnicate_widget" with the callers of the last question's symbol
        pool = [c.node_id for c in ranked[:8] if self._is_symbol_node(c.node_id) and prior(c.node_id) == 1.0
                and not c.memory_only]
        kinds = _target_kinds(plan)
        target = next((nid for nid in pool if self.engine.graph.node(nid).kind in kinds), None)  # type: ignore[union-attr]
        target = target or (pool[0] if pool else None)
        if target is None:
            return [], None
        cands.add(target, "hop-resolved", ranked[0].score, hops=0)
        if "history_tests" in features:
            history_seeds(self, plan, cands, [target])
            test_seeds(self, plan, cands, [target])
        hopped = expand(self.engine.graph, cands, [target], spec, hops=2 if "impact" in plan.operators else 1,
                        scope=scope)
        return hopped, target

    def _rank_files(self, q: Query, ranked: list[Candidate]) -> tuple[list[Candidate], list[dict[str, Any]]]:
        """Rank files (files.py) and order the candidates by their file's rank, so items follow it."""
        named = _named_paths(q)
        scope = scope_prior(self.engine.index.ws, named, self.engine.scope_memo) if "scope" in q.features else _no_prior
        test_prior = self.prior(q.plan, q.features)

        seen: dict[str, float] = {}  # both passes of rank_files ask for the same thousand files

        def file_prior(p: str) -> float:
            v = seen.get(p)
            if v is None:
                v = seen[p] = scope(p) * test_prior(p)
            return v

        extra: dict[str, dict[str, float]] = {}
        lexical: list[tuple[str, float]] = []
        if "lexical" in q.features:
            lexical = self.file_lexical.search(q.plan.query, top=LEXICAL_FILES)
            extra["identifier"] = self.file_lexical.identifier_matches(q.plan.query)
            extra["path"] = self.file_lexical.path_matches(q.plan.query)
            extra["rare"] = self.file_lexical.rare_matches(q.plan.query)
            title = issue_title(q.plan.query)
            if 0 < len(title) < len(q.plan.query.strip()):
                extra["title-bm25"] = dict(self.file_lexical.search(title, top=LEXICAL_FILES, joined=False))
                extra["title-symbol"] = self._title_symbols(title, q.features)
            if q.evidence.prose.strip() and q.evidence.prose != q.evidence.text.strip():  # as written, not as searched
                extra["prose-bm25"] = dict(self.file_lexical.search(q.evidence.prose, top=LEXICAL_FILES, joined=False))
            chunks: dict[str, float] = {}
            hits = q.chunk_hits if q.chunk_hits is not None else self.lexical.search(q.plan.query, top=200)
            for node_id, score in hits:
                p = node_id.split("::", 1)[0]
                chunks[p] = max(chunks.get(p, 0.0), score)
            extra["chunk-bm25"] = chunks
            extra["file-bm25-rank"] = {p: 1.0 / (1 + i / 3) for i, (p, _) in enumerate(lexical)}
        if q.dense_files:
            extra["dense-file"] = q.dense_files
        feats = file_features(ranked, lexical, extra)
        files = rank_files(feats, file_prior, top=FILE_TOP)
        if not files:
            return ranked, files
        if "edges" in q.features:
            # fixes span files: what the leading files import or are imported by, and their folder
            g = self.engine.graph
            near: dict[str, float] = {}
            folder: dict[str, float] = {}
            for i, f in enumerate(files[:NEAR_TOP]):
                w = 1.0 / (1 + i)
                for e in g.out_edges(f["path"], ("IMPORTS",)) + g.in_edges(f["path"], ("IMPORTS",)):
                    other = e.dst if e.src == f["path"] else e.src
                    if other != f["path"]:
                        near[other] = max(near.get(other, 0.0), w)
                parent = f["path"].rpartition("/")[0]
                for other in self._files_in(parent):
                    if other != f["path"]:
                        folder[other] = max(folder.get(other, 0.0), w)
            add_features(feats, {"imports-near-top": near, "folder-of-top": folder})
            files = rank_files(feats, file_prior, top=FILE_TOP)  # the features once, scored twice
        rel = {f["path"]: f["score"] / (files[0]["score"] or 1.0) for f in files}
        if q.explain:
            q.file_features = {p: {**{k: v for k, v in f.items() if not k.startswith("_")}, "prior": file_prior(p)}
                               for p, f in feats.items()}
        return self._order_by_files(q, ranked, files, rel), files

    def _order_by_files(self, q: Query, ranked: list[Candidate], files: list[dict[str, Any]],
                        rel: dict[str, float]) -> list[Candidate]:
        """Items follow the file ranking: a candidate's score is scaled by its file's share of the
        best file's score. A leading file no generator reached still shows its best lexical chunk.
        (Ordering by file first, then by rank inside the file, lost 4.5 points of function Acc@5 on
        the django dev split: the best candidates of the second file often beat the first file's rest.)"""
        for c in ranked:
            c.score *= REL_FLOOR + (1 - REL_FLOOR) * rel.get(c.node_id.split("::", 1)[0], 0.0)
        have = {c.node_id.split("::", 1)[0] for c in ranked}
        top = max((c.score for c in ranked), default=1.0)
        for f in files[:IN_FILE_TOP]:
            if f["path"] in have:
                continue
            chunks = self.lexical.best_chunks(q.plan.query, f["path"], 1)
            node_id = chunks[0] if chunks else f["path"]
            if node_id in self.engine.graph:
                c = q.cands.add(node_id, "file-rank", rel[f["path"]])  # says the file's share; scored below
                c.score = 0.5 * top * rel[f["path"]]
                ranked.append(c)
        ranked.sort(key=lambda c: (-c.score, c.hops, c.node_id))
        return ranked

    def _files_in(self, folder: str) -> list[str]:
        if self._folders_rev != self.engine.graph.revision:
            self._folders = {}
            for p in self.engine.index.facts:
                self._folders.setdefault(p.rpartition("/")[0], []).append(p)
            self._folders_rev = self.engine.graph.revision
        return self._folders.get(folder, [])

    def _project_names(self) -> frozenset[str]:
        """The workspace's own package names, lower-cased: packages at the top or under `src/`, `lib/`
        (`sphinx`, `matplotlib`, `_pytest` and `pytest`), test packages left out. In an issue's prose
        they name the project."""
        ws = self.engine.index.ws
        if self._project[0] is not ws:
            names = {d.rpartition("/")[2].lower() for d in ws.package_dirs
                     if d.rpartition("/")[0] in _PROJECT_PARENTS and not is_test_path(d + "/__init__.py")}
            self._project = (ws, frozenset(n for n in names if n))
        return self._project[1]

    def _title_symbols(self, title: str, features: frozenset[str]) -> dict[str, float]:
        """Files of the symbols an issue's title names (its one-line summary names what is broken)."""
        if "symbols" not in features:
            return {}
        out: dict[str, float] = {}
        project = self._project_names()
        for m in make_plan(title, self.is_symbol).mentions:
            if m.endswith(".py") or m.lower() in project:
                continue
            found = [n for n in self.engine.find_symbols(m) if n.name == m.split(".")[-1]]
            for n in found[:4]:
                out[n.path] = max(out.get(n.path, 0.0), 1.0 / math.sqrt(len(found)))
        return out

    def prior(self, plan: Plan, features: frozenset[str] = ALL_FEATURES) -> Callable[[str], float]:
        """Tests matter for test and relation questions; otherwise they rank below the code they exercise."""
        if "tests" in plan.operators or set(plan.operators) & _RELATIONAL:
            return _no_prior  # a test that calls or subclasses the target is part of the answer
        g = self.engine.graph

        def prior(node_id: str) -> float:
            n = g.node(node_id)
            if n is None:
                return TEST_PRIOR if is_test_path(node_id.split("::", 1)[0]) else 1.0
            return TEST_PRIOR if n.kind == "test" or is_test_path(n.path) else 1.0

        return prior

    def _is_symbol_node(self, node_id: str) -> bool:
        n = self.engine.graph.node(node_id)
        return n is not None and n.kind in _SYMBOL_KINDS

    def _best_symbols(self, cands: Candidates, lexical: list[str], n: int) -> list[str]:
        out = [nid for nid in lexical if self._is_symbol_node(nid)][:n]
        if not out:  # not what working memory alone brought: the question is not about the last answer
            out = [c.node_id for c in cands.ranked() if not c.memory_only][:n]
        return out

    def _place_of(self, place: tuple[str, int]) -> tuple[str | None, int | None]:
        """The indexed file a question's `path.py:LINE` names (the path itself, else the shortest path
        ending in it) and the line, if the file has it; else (None, None)."""
        named, line = place
        facts = self.engine.index.facts
        hits = sorted((p for p in facts if p == named or p.endswith("/" + named)), key=lambda p: (len(p), p))
        if not hits or line > facts[hits[0]].lines:
            return None, None
        return hits[0], line

    def _empty_relations(self, plan: Plan, targets: list[str]) -> list[str]:
        """"who calls X" where the index has no caller of X: an empty relation is an answer too (what is
        packed then is X and the text nearest the question, none of it a caller)."""
        out: list[str] = []
        for target in targets:
            node = self.engine.graph.node(target)
            if node is None or node.qualname is None:
                continue
            for op in plan.operators:
                if op not in _ANSWERED_RELATIONS or self.engine.related(target, op):
                    continue
                name = node.qualname.rsplit(".", 1)[-1]
                # other code that holds the name: calls the binder could not resolve (a receiver of
                # unknown type), or uses by name; the whole name's term (`get_debug_flag`), not a
                # word of it (`get`), when it has several
                term = terms(name, keep_stopwords=True)[:1]
                others = sorted({c for t in term for c in self.lexical.postings.get(t) or ()
                                 if c != target and not target.startswith(c + ".")})
                more = (f"; {len(others)} other symbol{' names' if len(others) == 1 else 's name'} `{name}` "
                        "(calls it could not resolve, or uses by name)" if others else
                        f", and no other code names `{name}`")
                out.append(f"the index has no {op} of {node.qualname} ({node.path}){more}")
        return out

    def _names_something(self, mention: str) -> bool:
        """Whether a question's mention names an indexed symbol, module, file or commit."""
        g = self.engine.graph
        if "/" in mention or mention.endswith(".py") or mention in g:
            return True  # a path: the file seeds say what they make of it
        if mention in self.engine.index.ws.modules or self.engine.find_symbols(mention):
            return True
        if "." in mention and self.engine.find_symbols(mention.rpartition(".")[2]):
            return True  # `self.send`, `adapter.send`: a receiver the question names, and a known method
        try:
            return self.engine._commit_named(mention) is not None
        except LookupError:  # a prefix several commits share: it names something
            return True

    def context_at(self, path: str, line: int, col: int | None, budget: int = 4000,
                   checkpoint: Callable[[], None] | None = None) -> dict[str, Any]:
        """Definition, callers, callees and tests of the symbol under the cursor."""
        node = self.engine.symbol_at(path, line, col)
        self.sync()
        t = {"start": time.perf_counter()}
        if node is None:
            return {"query": f"{path}:{line}", "plan": {"trigger": EXPLICIT_SYMBOL, "operators": [], "mentions": []},
                    "budget": budget, "tokens": 0, "stale": self.stale, "dirty_files": self.engine.index.dirty_files(),
                    "files": [], "symbols": [], "items": [], "timings_ms": {}, "reason": "no symbol at this position"}
        label = node.qualname or node.path
        plan = Plan(f"context of {label}", EXPLICIT_SYMBOL, ["definition", "callers", "callees", "tests"], [label])
        cands = Candidates()
        cands.add(node.id, "cursor", 3.0)
        spec = edges_for(plan, True)
        scope = self.engine._scope()
        expand(self.engine.graph, cands, [node.id], spec, hops=1, scope=scope)
        # its tests as the code lens counts them: covering it, or calling it directly or through its
        # callers (a helper's tests are those of the functions that use it)
        for i, hit in enumerate(self.engine.tests_for(node.id)[:CURSOR_TESTS]):
            how = str(hit["reason"])
            weight = (W_CURSOR_REACHED if how.startswith("static: reaches") else W_CURSOR_TEST) / (1 + 0.02 * i)
            cands.add(hit["node"].id, "tests (static)" if how.startswith("static") else "tests", weight,
                      source=node.id, hops=1)
        if checkpoint:
            checkpoint()
        # the symbol asked about leads, then the code around it (callers, callees; package code before
        # examples and scripts at equal scores), then its tests (a test that both calls and covers it
        # would otherwise outscore the code being edited)
        g = self.engine.graph
        ranked = sorted(cands.ranked(tie=_scope_tie(scope)), key=lambda c: (c.node_id != node.id, is_test_node(g, c.node_id)))
        t["score"] = time.perf_counter()
        items = pack(ranked, self.engine.graph, self.source_lines, budget)
        t["pack"] = time.perf_counter()
        out_items = [it.to_json() for it in items]
        self.working.touch(node.id)
        return {"query": plan.query, "plan": plan.to_json(), "budget": budget,
                "tokens": sum(i["tokens"] for i in out_items), "stale": self.stale,
                "dirty_files": self.engine.index.dirty_files(), "files": _files_of(out_items),
                "symbols": rank_symbols(self.engine.graph, ranked, [], None, plan.query, _no_prior),
                "items": out_items, "timings_ms": _timings(t)}

    def bm25_files(self, query: str, top_n: int = 10) -> list[dict[str, Any]]:
        """Files ranked by their best BM25 chunk (for semantic_search tools)."""
        self.sync()
        best: dict[str, tuple[float, str]] = {}
        for node_id, score in self.lexical.search(query, top=max(50, top_n * 5)):
            path = node_id.split("::", 1)[0]
            if path not in best or score > best[path][0]:
                best[path] = (score, node_id)
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top_n]
        return [{"path": p, "score": round(s, 4), "best_chunk": nid} for p, (s, nid) in ranked]


def _no_prior(node_id: str) -> float:
    return 1.0


def _scope_tie(scope: Callable[[str], float]) -> Callable[[str], float]:
    """Candidates.ranked's tie-break: at equal scores package code before examples, docs and scripts."""
    return lambda node_id: -scope(node_id.partition("::")[0])


def _named_paths(q: Query) -> Callable[[str], bool]:
    """Whether the task names a path (or its folder) itself: then the scope prior does not apply."""
    ev = q.evidence
    named = [p.lstrip("./") for p in ev.paths] + [d.replace(".", "/") for d in ev.dotted]
    named += [f.path for f in ev.frames]
    suffixes: set[str] = set()
    for n in named:
        parts = [x for x in n.split("/") if x]
        suffixes.update("/".join(parts[i:]) for i in range(len(parts)))

    def is_named(path: str) -> bool:
        stem = path[:-3] if path.endswith(".py") else path
        folder = path.rpartition("/")[0]
        return path in suffixes or stem in suffixes or (bool(folder) and folder in suffixes)

    return is_named


def _files_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Files of a pack in the order its items rank them (questions that are not tasks)."""
    out: dict[str, dict[str, Any]] = {}
    for it in items:
        if it["kind"] == "commit" or it["path"] in out:
            continue
        ref = f"{it['path']}::{it['symbol']}" if it["symbol"] else it["path"]
        out[it["path"]] = {"path": it["path"], "score": it["score"],
                           "reasons": [{"via": "items", "from": ref, "weight": it["score"]}]}
    return list(out.values())


def _target_kinds(plan: Plan) -> tuple[str, ...]:
    """The kinds a described target likely has, from the words and the relation asked about."""
    hinted = tuple(h for _, h, role in plan.soft if h and role == "target")
    if hinted:
        return hinted
    if re.search(r"\b(?:method|methods|override|overrid)", plan.query, re.I):
        return ("method",)
    if re.search(r"\bclass(?:es)?\b", plan.query, re.I) or {"implementations", "instantiations"} & set(plan.operators):
        return ("class",)
    if re.search(r"\bfunctions?\b", plan.query, re.I):
        return ("function", "method")
    return _SYMBOL_KINDS


def _timings(t: dict[str, float]) -> dict[str, float]:
    keys = list(t)
    out = {}
    for a, b in zip(keys, keys[1:], strict=False):
        out[b] = round((t[b] - t[a]) * 1000, 3)
    out["total"] = round((t[keys[-1]] - t[keys[0]]) * 1000, 3)
    return out
