"""Retrieval strategies under evaluation: baselines and the engine's ablation rows.

Every strategy maps a question record to a `Result`: returned items in rank order (path and line
span), the tokens of what it returned, and its latency. File-level baselines return whole files, at
most `cap` of them (the largest k), except `full`, which returns every file (the cost ceiling).

Queries: a baseline sees the question text; for a CTX `temporal` question it sees the session's
earlier queries joined to it (a stateless tool's only way to use history), and for questions with a
`path` (implicit trigger) the path's words are appended. Engine rows get the session replayed
through the engine (recorded in its memory, which is emptied before every question) and the path as
the cursor file.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rank_bm25 import BM25Okapi

from benchmark_gen.common import code_tokens, read_text, token_counter
from ctx_lsp.engine import Engine
from ctx_lsp.index.model import EdgeKind
from ctx_lsp.retrieval.engine import ALL_FEATURES

IMP = EdgeKind.IMPORTS.value
CONTAINS = EdgeKind.CONTAINS.value
CHUNK_KINDS = ("class", "function", "method", "test")
HEADER_LINES = 30  # a file's module-level header is a chunk of its own

# (name, label, engine features or None for a baseline)
ENGINE_ROWS: list[tuple[str, str, frozenset[str]]] = [
    ("engine_lexical", "engine: lexical only", frozenset({"lexical"})),
    ("engine_symbols", "engine: + symbol index", frozenset({"lexical", "symbols"})),
    ("engine_edges", "engine: + typed edges", frozenset({"lexical", "symbols", "edges"})),
    ("engine_history_tests", "engine: + history and tests", frozenset({"lexical", "symbols", "edges", "history_tests"})),
    ("engine_hops", "engine: + iterative hops",
     frozenset({"lexical", "symbols", "edges", "history_tests", "hops"})),
    ("engine_full", "engine: full", ALL_FEATURES),
]
BASELINES: list[tuple[str, str]] = [
    ("full", "full context (every file)"),
    ("bm25_files", "BM25 over files"),
    ("bm25_chunks", "BM25 over function/class chunks -> files"),
    ("bm25_chunks_budget", "BM25 chunks packed to the engine's token budget"),
    ("import_bfs", "import-graph BFS from BM25 seeds"),
    ("named_1hop", "named file + 1-hop neighbours"),
]
# the engine's dense generator (extra ctx-lsp[dense]); skipped when the extra is not installed
DENSE_ROWS: list[tuple[str, str, frozenset[str]]] = [
    ("dense", "dense generator only (semantic)", frozenset({"dense", "files"})),
    ("full_dense", "engine: full + dense", ALL_FEATURES | {"dense"}),
]
ALL_NAMES = [b[0] for b in BASELINES] + [r[0] for r in DENSE_ROWS] + [r[0] for r in ENGINE_ROWS]
LABELS = dict(BASELINES) | {r[0]: r[1] for r in DENSE_ROWS + ENGINE_ROWS}
_ROW_FEATURES = {n: f for n, _, f in ENGINE_ROWS + DENSE_ROWS}


@dataclass
class Result:
    items: list[tuple[str, int, int]]
    tokens: int
    ms: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def files(self) -> list[str]:
        seen: set[str] = set()
        out = []
        for p, _, _ in self.items:
            if p not in seen:
                seen.add(p)
                out.append(p)
        return out


class Unavailable(Exception):
    """A strategy that cannot run here (no engine feature switches, no local embedding model)."""


def query_text(q: dict[str, Any]) -> str:
    parts = list(q.get("session") or []) + [q["question"]]
    if q.get("path"):
        parts.append(re.sub(r"[/._]+", " ", q["path"]))
    return "\n".join(parts)


class Corpus:
    """Files, chunks, BM25 models and the file-level graph of one workspace, built once."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.index = engine.index
        self.count_tokens, self.counter_name = token_counter()
        self.paths = sorted(self.index.facts)
        self.text = {p: read_text(self.index.root, p) for p in self.paths}
        self.lines = {p: self.text[p].splitlines() for p in self.paths}
        self.file_tokens = {p: self.count_tokens(self.text[p]) for p in self.paths}
        self.total_tokens = sum(self.file_tokens.values())
        self.file_bm25 = BM25Okapi([code_tokens(self.text[p]) or ["\0"] for p in self.paths])
        self._span_tokens: dict[tuple[str, int, int], int] = {}
        self.chunks: list[tuple[str, int, int]] = []
        docs = []
        g = self.index.graph
        for p in self.paths:
            n_lines = max(len(self.lines[p]), 1)
            self.chunks.append((p, 1, min(HEADER_LINES, n_lines)))
            for n in g.nodes_of_file(p):
                if n.kind in CHUNK_KINDS:
                    self.chunks.append((p, n.start_line, n.end_line))
        for p, s, e in self.chunks:
            docs.append(code_tokens("\n".join(self.lines[p][s - 1:e])) or ["\0"])
        self.chunk_bm25 = BM25Okapi(docs)
        # file adjacency: imports (both directions) and any typed edge between two files' symbols
        self.imports: dict[str, set[str]] = {p: set() for p in self.paths}
        self.neighbours: dict[str, set[str]] = {p: set() for p in self.paths}
        for edge in g.edges():
            if edge.kind == CONTAINS:
                continue
            a, b = edge.src.split("::", 1)[0], edge.dst.split("::", 1)[0]
            if a == b or a not in self.imports or b not in self.imports:
                continue
            self.neighbours[a].add(b)
            self.neighbours[b].add(a)
            if edge.kind == IMP:
                self.imports[a].add(b)
                self.imports[b].add(a)

    def span_tokens(self, p: str, s: int, e: int) -> int:
        if s <= 1 and e >= len(self.lines[p]):
            return self.file_tokens[p]
        key = (p, s, e)
        if key not in self._span_tokens:
            self._span_tokens[key] = self.count_tokens("\n".join(self.lines[p][s - 1:e]))
        return self._span_tokens[key]

    def file_item(self, p: str) -> tuple[str, int, int]:
        return (p, 1, max(len(self.lines[p]), 1))

    def bm25_file_scores(self, query: str) -> dict[str, float]:
        scores = self.file_bm25.get_scores(code_tokens(query))
        return {p: float(s) for p, s in zip(self.paths, scores, strict=True)}

    def ranked_files(self, query: str) -> list[str]:
        scores = self.bm25_file_scores(query)
        return sorted(self.paths, key=lambda p: (-scores[p], p))


class Strategies:
    """Runs any strategy by name on a question; engine rows need `features` switches in the retriever."""

    def __init__(self, engine: Engine, cap: int = 10, budget: int = 4000) -> None:
        self.engine = engine
        self.corpus = Corpus(engine)
        self.cap = cap
        self.budget = budget
        self.unavailable: dict[str, str] = {}
        self._check_engine()
        self._check_dense()

    # -- availability ---------------------------------------------------------------------------
    def _check_engine(self) -> None:
        import inspect

        try:
            retriever = self.engine.retriever
            params = inspect.signature(retriever.context).parameters
        except (ImportError, AttributeError) as exc:
            for name, _, _ in ENGINE_ROWS:
                self.unavailable[name] = f"retrieval engine not importable: {exc}"
            return
        if "features" not in params:
            for name, _, _ in ENGINE_ROWS:
                if name != "engine_full":
                    self.unavailable[name] = "Retriever.context has no `features` switch"

    def _check_dense(self) -> None:
        """The dense rows run the engine's dense generator, vectors brought up to date before each query."""
        from ctx_lsp.retrieval.dense import SYNC, DenseOptions, dense_wanted

        reason = None
        if not dense_wanted():
            reason = "skipped: the dense extra is not installed (pip install 'ctx-lsp[dense]')"
        else:
            r = self.engine.retriever
            if r.dense is None:
                r.set_dense(DenseOptions(SYNC))
            if r.dense is None:
                reason = f"skipped: {r.dense_error}"
        if reason:
            for name, _, _ in DENSE_ROWS:
                self.unavailable[name] = reason

    def available(self, name: str) -> bool:
        return name not in self.unavailable

    # -- running -------------------------------------------------------------------------------
    def run(self, name: str, q: dict[str, Any]) -> Result:
        if name in self.unavailable:
            raise Unavailable(self.unavailable[name])
        t0 = time.perf_counter()
        if name in _ROW_FEATURES:
            res = self._engine(name, q)
        else:
            res = getattr(self, "_" + name)(q)
        res.ms = (time.perf_counter() - t0) * 1000
        return res

    def _files_result(self, files: list[str]) -> Result:
        files = files[: self.cap]
        c = self.corpus
        return Result([c.file_item(p) for p in files], sum(c.file_tokens[p] for p in files))

    def _full(self, q: dict[str, Any]) -> Result:
        c = self.corpus
        return Result([c.file_item(p) for p in c.paths], c.total_tokens)

    def _bm25_files(self, q: dict[str, Any]) -> Result:
        return self._files_result(self.corpus.ranked_files(query_text(q)))

    def _files_by_best_chunk(self, scores: Any) -> Result:
        """Files ranked by their best-scoring chunk (one chunk per file), capped at `self.cap`."""
        c = self.corpus
        best: dict[str, tuple[float, int]] = {}
        for i, s in enumerate(scores):
            p = c.chunks[i][0]
            if p not in best or s > best[p][0]:
                best[p] = (float(s), i)
        order = sorted(best, key=lambda p: (-best[p][0], p))[: self.cap]
        items = [c.chunks[best[p][1]] for p in order]
        return Result(items, sum(c.span_tokens(*it) for it in items))

    def _bm25_chunks(self, q: dict[str, Any]) -> Result:
        c = self.corpus
        scores = c.chunk_bm25.get_scores(code_tokens(query_text(q)))
        return self._files_by_best_chunk(scores)

    def _bm25_chunks_budget(self, q: dict[str, Any]) -> Result:
        """The same-cost lexical baseline: best BM25 chunks, greedily packed into the engine's budget."""
        c = self.corpus
        scores = c.chunk_bm25.get_scores(code_tokens(query_text(q)))
        order = sorted(range(len(c.chunks)), key=lambda i: (-float(scores[i]), i))
        items: list[tuple[str, int, int]] = []
        used = 0
        for i in order[:300]:
            if scores[i] <= 0:
                break
            p, s, e = c.chunks[i]
            if any(p == ip and is_ <= e and s <= ie for ip, is_, ie in items):
                continue  # overlaps a chosen chunk (a method of a chosen class, or its class): no text twice
            t = c.span_tokens(p, s, e)
            if used + t <= self.budget:
                items.append((p, s, e))
                used += t
        return Result(items, used)

    def _import_bfs(self, q: dict[str, Any], seeds: int = 3, depth: int = 2) -> Result:
        """CTX-style: BM25 seeds, then BFS over the (undirected) import graph, score 1/(1+d)."""
        c = self.corpus
        scores = c.bm25_file_scores(query_text(q))
        ranked = sorted(c.paths, key=lambda p: (-scores[p], p))
        best: dict[str, float] = {}
        for seed in [p for p in ranked[:seeds] if scores[p] > 0] or ranked[:1]:
            dist = {seed: 0}
            frontier = [seed]
            for d in range(1, depth + 1):
                nxt = []
                for cur in frontier:
                    for nb in sorted(c.imports[cur]):
                        if nb not in dist:
                            dist[nb] = d
                            nxt.append(nb)
                frontier = nxt
            for p, d in dist.items():
                best[p] = max(best.get(p, 0.0), 1.0 / (1 + d))
        order = sorted(best, key=lambda p: (-best[p], -scores[p], p))
        return self._files_result(order)

    def named_files(self, q: dict[str, Any]) -> list[str]:
        """Files the question names: paths, then definitions of the identifiers it quotes or dots."""
        c = self.corpus
        text = query_text(q)
        named = [p for p in c.paths if p in text]
        if q.get("path") in c.text:
            named.insert(0, q["path"])
        if not named:
            g = self.engine.graph
            for ident in re.findall(r"`([^`]+)`", text) + re.findall(r"\b\w+(?:\.\w+)+\b", text):
                short = ident.replace("::", ".").rsplit(".", 1)[-1].strip("()")
                for n in g.symbols_named(short):
                    if n.qualname is not None and n.path in c.text and n.path not in named:
                        named.append(n.path)
        return named

    def _named_1hop(self, q: dict[str, Any]) -> Result:
        """CodeCompass-style: the named file(s), then their 1-hop graph neighbours by BM25."""
        c = self.corpus
        scores = c.bm25_file_scores(query_text(q))
        named = self.named_files(q)
        if not named:
            named = sorted(c.paths, key=lambda p: (-scores[p], p))[:1]
        hood = set()
        for p in named:
            hood |= c.neighbours[p]
        hood -= set(named)
        order = named + sorted(hood, key=lambda p: (-scores[p], p))
        return self._files_result(order)

    # -- the engine ----------------------------------------------------------------------------------
    def reset_memory(self) -> None:
        """Empty the engine's working and episodic memory so questions do not leak into each other."""
        self.engine.retriever.reset_memory()

    def engine_pack(self, name: str, query: str, path: str | None = None, line: int | None = None,
                    session: list[str] | None = None) -> dict[str, Any]:
        feats = _ROW_FEATURES[name]
        r = self.engine.retriever
        self.reset_memory()
        kwargs: dict[str, Any] = {}
        if name != "engine_full" or "features" in self._ctx_params():
            kwargs["features"] = feats
        for earlier in session or []:
            r.context(earlier, self.budget, record=True, **kwargs)
        return r.context(query, self.budget, path=path, line=line, record=False, **kwargs)

    def _ctx_params(self) -> Any:
        import inspect

        return inspect.signature(self.engine.retriever.context).parameters

    def _engine(self, name: str, q: dict[str, Any]) -> Result:
        pack = self.engine_pack(name, q["question"], q.get("path"), q.get("line"), q.get("session"))
        items = []
        for i in pack.get("items", []):
            if i.get("kind") == "commit":
                # commits have no file: named `commit:<short sha>` like the history gold
                items.append((f"commit:{i.get('symbol')}", 0, 0))
            elif i.get("path") in self.corpus.text:
                items.append((i["path"], int(i["start_line"]), int(i["end_line"])))
        return Result(items, int(pack.get("tokens", 0)), extra={"pack": pack})


# -- RepoBench-R: ranking a question's candidate snippets -----------------------------------------
def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def rank_candidates(strategies: Strategies, name: str, q: dict[str, Any]) -> list[int]:
    """Candidate indices, best first, for the RepoBench-R lane."""
    c = strategies.corpus
    cands = q["candidates"]
    texts = ["\n".join(c.lines.get(s["path"], [])[s["start_line"] - 1:s["end_line"]]) for s in cands]
    toks = [code_tokens(t) or ["\0"] for t in texts]
    qtok = code_tokens(q["question"])
    bm = BM25Okapi(toks).get_scores(qtok)
    lexical = sorted(range(len(cands)), key=lambda i: (-float(bm[i]), i))
    if name == "random":
        from benchmark_gen.common import stable_hash

        return sorted(range(len(cands)), key=lambda i: (stable_hash("random", q["id"], i), i))
    if name == "jaccard":
        qs = set(qtok)
        return sorted(range(len(cands)), key=lambda i: (-_jaccard(qs, set(toks[i])), i))
    if name == "bm25":
        return lexical
    if name == "import_prior":
        imported = c.imports.get(q["path"], set())
        return sorted(range(len(cands)), key=lambda i: (cands[i]["path"] not in imported, lexical.index(i)))
    if name in _ROW_FEATURES:
        pack = strategies.engine_pack(name, q["question"], q.get("path"), max(1, q["line"] - 1))
        order: list[int] = []
        for it in pack.get("items", []):
            # an excerpt points at the stretches it shows, not at the whole span it was cut from
            spans = it.get("shown") or [(it["start_line"], it["end_line"])]
            for i, s in enumerate(cands):
                if i not in order and it["path"] == s["path"] and any(
                        a <= s["end_line"] and s["start_line"] <= b for a, b in spans):
                    order.append(i)
        return order + [i for i in lexical if i not in order]
    raise KeyError(name)


REPOBENCH_STRATEGIES = ["random", "jaccard", "bm25", "import_prior"] + [r[0] for r in ENGINE_ROWS]
Runner = Callable[[dict[str, Any]], Result]
