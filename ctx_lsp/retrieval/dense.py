"""The dense generator (optional extra `ctx-lsp[dense]`): symbol and file abstractions embedded with
a local model, searched exactly with numpy over unit vectors.

What is embedded: per symbol (class, function, method outside test files) its abstraction, the
qualified name, signature, docstring summary and first lines; per file, its module docstring and
top-level names. Vectors are cached in the cache directory (`dense/<model>.npz`), keyed by model id
and a hash of the abstraction text, so an edit re-embeds only the symbols whose text changed.

Modes (DenseOptions.mode): `background` (the server embeds after indexing and after edits; a
query before the first pass is done runs without this generator and says so in the pack),
`cached` (the CLI's `context` and `ctx-lsp mcp`: used only when `ctx-lsp index --dense` made the
cache, then brought up to date before the query) and `sync` (benchmarks and `index --dense`: brought up to date before
every query).
"""

from __future__ import annotations

import hashlib
import math
import os
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctx_lsp.index.facts import is_test_path
from ctx_lsp.retrieval.dense_options import (  # noqa: F401 - re-exported: the options live beside
    BACKGROUND,
    CACHED,
    SYNC,
    DenseOptions,
    dense_wanted,
    has_vectors,
    one_shot_options,
)
from ctx_lsp.retrieval.embedder import DenseUnavailable, Embedder, ModelSource, resolve_model
from ctx_lsp.retrieval.text import terms

if TYPE_CHECKING:
    from ctx_lsp.retrieval.engine import Retriever
    from ctx_lsp.retrieval.generators import Query

FEATURE = "dense"
OFF, PENDING, READY, UNAVAILABLE, NO_CACHE = "off", "pending", "ready", "unavailable", "no-cache"
SYMBOL_KINDS = ("class", "function", "method")
FIRST_LINES = 6
MAX_CHARS = 400  # ~100-130 word pieces: the abstraction, not the body (the model's cost grows with it)
TOP_NAMES = 60
W_DENSE = 2.0
SEED_TOP = 12
SEED_MARGIN = 0.08  # seeds within this cosine of the best hit
FILE_ROWS = 300  # rows scored for the file feature
QUERY_CACHE = 64
MIN_TERMS = 2  # content words a query needs before its nearest vectors mean anything
FILE_T = 0.05  # the file feature is exp((cos - best) / FILE_T): cosines of MiniLM sit close together


def text_key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def abstractions(r: Retriever, path: str) -> dict[str, str]:
    """node id -> abstraction text, for one file and its symbols (none for test files)."""
    if is_test_path(path):
        return {}
    engine = r.engine
    facts = engine.index.facts.get(path)
    if facts is None:
        return {}
    module = engine.index.ws.canonical.get(path, path[:-3].replace("/", ".") if path.endswith(".py") else path)
    nodes = engine.graph.nodes_of_file(path)
    lines = r.source_lines(path)
    top = [n.qualname for n in nodes if n.qualname and "." not in n.qualname and n.kind != "test"]
    out = {path: _clip(f"{module}\n{facts.doc}\n{', '.join(top[:TOP_NAMES])}")}
    for n in nodes:
        if n.kind not in SYMBOL_KINDS or not n.qualname:
            continue
        body = [ln.strip() for ln in lines[n.start_line - 1:n.start_line - 1 + FIRST_LINES] if ln.strip()]
        out[n.id] = _clip(f"{module}.{n.qualname}\n{n.signature}\n{n.doc}\n" + "\n".join(body))
    return out


def _clip(text: str) -> str:
    return text[:MAX_CHARS]


class DenseIndex:
    """The vectors of one workspace for one model, kept in step with the index."""

    def __init__(self, r: Retriever, source: ModelSource, options: DenseOptions, cache_dir: Path,
                 models_dir: Path) -> None:
        self.r = r
        self.options = options
        self.source = source
        self.embedder = Embedder(source, models_dir)
        self.path = cache_dir / "dense" / f"{source.slug}.npz"
        self._texts: dict[str, dict[str, str]] = {}  # path -> node id -> text
        self._dirty: set[str] | None = None  # None: every file
        self._vectors: dict[str, Any] = {}  # text key -> unit vector (float32)
        self._cache_loaded = False
        self._snapshot: tuple[list[str], Any] | None = None  # (node ids, (n, d) matrix) the queries see
        self._lock = threading.Lock()
        self.state = PENDING
        self.done = 0
        self.total = 0
        self.error: str | None = None
        self.last: dict[str, float] = {}
        self._queries: dict[str, Any] = {}  # query text -> vector: a question asked again (ablation rows, hops)
        r.engine.index.listeners.append(self._on_change)

    def _on_change(self, paths: set[str]) -> None:
        if self._dirty is not None:
            self._dirty.update(paths)

    # -- upkeep -----------------------------------------------------------------------------
    def _collect(self) -> None:
        """Re-read the abstractions of changed files (the caller holds the engine lock)."""
        facts = self.r.engine.index.facts
        if self._dirty is None:
            self._texts = {p: abstractions(self.r, p) for p in sorted(facts)}
        else:
            for p in sorted(self._dirty):
                if p in facts:
                    self._texts[p] = abstractions(self.r, p)
                else:
                    self._texts.pop(p, None)
        self._dirty = set()

    def has_cache(self) -> bool:
        return self.path.is_file()

    def update(self, progress: Callable[[int, int], None] | None = None,
               should_stop: Callable[[], bool] | None = None, lock: Any = None) -> bool:
        """Embed what is missing and publish the vectors; False when stopped early. `lock` (the
        engine's) is held while abstractions are read, not while the model runs."""
        with self._lock:
            t0 = time.perf_counter()
            with lock if lock is not None else nullcontext():
                self._collect()
                texts = {nid: t for per in self._texts.values() for nid, t in per.items()}
            self._load_cache()
            todo = sorted({text_key(t): t for t in texts.values() if text_key(t) not in self._vectors}.items())
            self.total = len({text_key(t) for t in texts.values()})
            self.done = self.total - len(todo)
            if todo:
                def report(done: int, total: int) -> None:
                    self.done = self.total - total + done
                    if progress is not None:
                        progress(self.done, self.total)

                try:
                    vecs = self.embedder.encode([t for _, t in todo], report, should_stop)
                except DenseUnavailable as exc:
                    self.state, self.error = UNAVAILABLE, str(exc)
                    raise
                for (key, _), v in zip(todo, vecs, strict=False):
                    self._vectors[key] = v
                if len(vecs) < len(todo):
                    return False
            t1 = time.perf_counter()
            self._publish(texts)
            if todo or not self.path.is_file():
                self._save(texts)
            self.state = READY
            self.last = {"embedded": len(todo), "embed_s": round(t1 - t0, 3), "vectors": len(texts)}
            return True

    def _publish(self, texts: dict[str, str]) -> None:
        import numpy as np

        ids = sorted(texts)
        if ids:
            matrix = np.stack([self._vectors[text_key(texts[i])] for i in ids]).astype(np.float32)
        else:
            matrix = np.zeros((0, 1), dtype=np.float32)
        self._snapshot = (ids, matrix)

    def _load_cache(self) -> None:
        if self._cache_loaded:
            return
        self._cache_loaded = True
        if not self.path.is_file():
            return
        import numpy as np

        try:
            with np.load(self.path, allow_pickle=False) as data:
                if str(data["model_id"]) != self.source.model_id:
                    return
                keys, vecs = data["keys"], data["vectors"].astype(np.float32)
        except (OSError, ValueError, KeyError):
            return  # a broken cache is rebuilt
        self._vectors.update(zip((str(k) for k in keys), vecs, strict=True))

    def _save(self, texts: dict[str, str]) -> None:
        """Only the vectors of current abstractions (old ones would pile up), as float16."""
        import numpy as np

        keys = sorted({text_key(t) for t in texts.values()})
        self._vectors = {k: self._vectors[k] for k in keys}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp.npz")
        vecs = np.stack([self._vectors[k] for k in keys]).astype(np.float16) if keys else np.zeros((0, 1), np.float16)
        np.savez(tmp, model_id=np.array(self.source.model_id), keys=np.array(keys, dtype="U24"), vectors=vecs)
        os.replace(tmp, self.path)

    # -- the read path -----------------------------------------------------------------------
    def prepare(self) -> None:
        """Before a query: `sync` and a warm `cached` index are brought up to date (the engine lock is
        held by the caller); `background` is the server's to update."""
        if self.state == UNAVAILABLE or self.options.mode == BACKGROUND:
            return
        if self.options.mode == CACHED and not self.has_cache() and self._snapshot is None:
            self.state = NO_CACHE
            return
        try:
            self.update()
        except DenseUnavailable:
            pass

    def usable(self) -> bool:
        return self._snapshot is not None and self.state != UNAVAILABLE

    def search(self, text: str, top: int) -> list[tuple[str, float]]:
        """(node id, cosine), best first, over the published vectors (exact)."""
        import numpy as np

        snap = self._snapshot
        if snap is None or not snap[0]:
            return []
        ids, matrix = snap
        qv = self._queries.get(text)
        if qv is None:
            qv = self.embedder.encode([text])[0]
            if len(self._queries) >= QUERY_CACHE:
                self._queries.pop(next(iter(self._queries)))
            self._queries[text] = qv
        sims = matrix @ qv
        top = min(top, len(ids))
        idx = np.argpartition(-sims, top - 1)[:top]
        order = sorted(idx.tolist(), key=lambda i: (-float(sims[i]), ids[i]))
        return [(ids[i], float(sims[i])) for i in order]

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "model": self.source.model_id, "done": self.done,
                               "total": self.total}
        if self.error:
            out["reason"] = self.error
        elif self.state == NO_CACHE:
            out["reason"] = "no vectors yet: run `ctx-lsp index --dense` once"
        return out


def make_dense(r: Retriever, options: DenseOptions | None) -> tuple[DenseIndex | None, str | None]:
    """The dense index of a retriever, or (None, why not) when the options ask for one and it cannot be had."""
    if options is None:
        return None, None
    try:
        source = resolve_model(options.model_dir or None)
    except DenseUnavailable as exc:
        return None, str(exc)
    cache_dir = r.engine.index.cache_dir
    return DenseIndex(r, source, options, cache_dir, models_dir(cache_dir)), None


def models_dir(cache_dir: Path) -> Path:
    """Where the default model is unpacked: beside the per-workspace caches when the workspace uses
    the default location (one copy for all), else inside the workspace's own cache directory."""
    from ctx_lsp.index.store import default_cache_dir

    base = default_cache_dir(Path.cwd()).parent
    return base / "models" if cache_dir.parent == base else cache_dir / "models"


class Dense:
    """Symbols and files nearest the query in the embedding space: finds code that shares no word
    with the question."""

    name = FEATURE

    def applies(self, q: Query) -> bool:
        d = q.retriever.dense
        if d is None:
            if q.retriever.dense_error:
                q.notes.append(f"dense: not used ({q.retriever.dense_error})")
            return False
        if q.plan.temporal or len(terms(q.plan.query)) < MIN_TERMS:
            # session questions and follow-ups ("And who calls it?") are memory's: nearest vectors of
            # a text with no content words only crowd out what the session was about
            return False
        d.prepare()
        if not d.usable():
            st = d.status()
            why = st.get("reason") or f"embedding {st['done']}/{st['total']}"
            q.notes.append(f"dense: not used ({why}); this answer is without it")
            return False
        return True

    def seed(self, q: Query) -> None:
        d = q.retriever.dense
        assert d is not None
        hits = d.search(q.plan.query, FILE_ROWS)
        g = q.retriever.engine.graph
        hits = [(nid, cos) for nid, cos in hits if nid in g]
        symbols = [(nid, cos) for nid, cos in hits if "::" in nid]
        # a question that names its targets gets support from dense hits, not rivals (as lexical hits)
        weight = W_DENSE * (0.5 if q.resolved and not q.plan.task else 1.0)
        if symbols:
            best = symbols[0][1]
            for nid, cos in symbols[:SEED_TOP]:
                if cos < best - SEED_MARGIN:
                    break
                q.cands.add(nid, FEATURE, weight * cos / best if best > 0 else 0.0, value=cos)
        files: dict[str, float] = {}
        for nid, cos in hits:
            p = nid.split("::", 1)[0]
            files[p] = max(files.get(p, -1.0), cos)
        if files:
            top = max(files.values())
            q.dense_files = {p: math.exp((c - top) / FILE_T) for p, c in files.items()}
        q.notes.append(f"dense: {len(hits)} rows, best cosine {hits[0][1]:.3f}" if hits else "dense: no rows")
