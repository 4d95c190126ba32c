"""The Retriever: query -> plan -> seeds -> typed expansion -> scored candidates -> budgeted pack -> hop.

Ablation features (for benchmark_gen): "lexical", "symbols", "edges", "history_tests", "hops", "memory".
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ctx_lsp.extract import is_test_path, split_lines
from ctx_lsp.model import NodeKind
from ctx_lsp.retrieval.expand import edges_for, expand
from ctx_lsp.retrieval.lexical import LexicalIndex
from ctx_lsp.retrieval.memory import EpisodicMemory, WorkingMemory
from ctx_lsp.retrieval.pack import pack
from ctx_lsp.retrieval.plan import EXPLICIT_SYMBOL, IMPLICIT_CONTEXT, Plan, make_plan
from ctx_lsp.retrieval.score import Candidates
from ctx_lsp.retrieval.seeds import (
    history_seeds,
    lexical_seeds,
    memory_seeds,
    soft_seeds,
    subword_seeds,
    symbol_seeds,
    test_seeds,
)
from ctx_lsp.retrieval.text import split_identifier

if TYPE_CHECKING:
    from ctx_lsp.engine import Engine

TEST_PRIOR = 0.6
# operators whose answer is other code than the named target
_RELATIONAL = {"callers", "implementations", "references", "importers", "instantiations", "tests", "history"}
ALL_FEATURES = frozenset({"lexical", "symbols", "edges", "history_tests", "hops", "memory"})
_SYMBOL_KINDS = (NodeKind.CLASS.value, NodeKind.FUNCTION.value, NodeKind.METHOD.value)


class Retriever:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.lexical = LexicalIndex()
        self._dirty: set[str] | None = None  # None = build everything on first use
        self.working = WorkingMemory()
        self.episodic = EpisodicMemory(engine.index.cache_dir / "episodes.jsonl")
        self.stale = False  # set by an adapter while the index is still being built
        self._names_rev = -1
        self._names: list[str] = []
        self._compound: list[str] = []
        self._lines: dict[str, tuple[str, list[str]]] = {}
        engine.index.listeners.append(self._on_change)

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
            for path in sorted(facts):
                self.lexical.set_file(facts[path], path)
            self._dirty = set()
            self._refresh_names()
            return
        if self._dirty:
            for path in sorted(self._dirty):
                self.lexical.set_file(facts.get(path), path)
            self._dirty.clear()

    def _refresh_names(self) -> None:
        g = self.engine.graph
        if self._names_rev != g.revision:
            self._names = sorted(g.by_name)
            self._by_prefix: dict[str, list[str]] = {}
            for name in self._names:
                self._by_prefix.setdefault(name[:2], []).append(name)
            compound: dict[str, tuple[str, ...]] = {}
            for n in g.nodes():
                if n.qualname and n.kind in _SYMBOL_KINDS + ("variable",) and n.name not in compound:
                    subs = tuple(split_identifier(n.name))
                    if len(subs) >= 2:
                        compound[n.name] = subs
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
        text = getattr(ix, "overlay_text", {}).get(path)
        if text is None:
            try:
                text = (ix.root / path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
        lines = split_lines(text)  # line numbers as the index counted them (not str.splitlines)
        if len(self._lines) > 256:
            self._lines.clear()
        self._lines[path] = (digest, lines)
        return lines

    def is_symbol(self, word: str) -> bool:
        """Whether a workspace symbol has exactly this name (case-sensitive)."""
        return any(n.name == word for n in self.engine.graph.symbols_named(word))

    # -- the read path ------------------------------------------------------------------------
    def context(self, query: str, budget: int = 4000, *, path: str | None = None, line: int | None = None,
                checkpoint: Callable[[], None] | None = None, record: bool = True,
                features: frozenset[str] = ALL_FEATURES) -> dict[str, Any]:
        t = {"start": time.perf_counter()}
        check = checkpoint or (lambda: None)
        self.sync()
        t["sync"] = time.perf_counter()
        plan = make_plan(query, self.is_symbol if "symbols" in features else None)
        t["plan"] = time.perf_counter()
        check()
        cands = Candidates()
        resolved: list[str] = []
        if "symbols" in features:
            resolved = symbol_seeds(self, plan, cands)
            if plan.trigger != EXPLICIT_SYMBOL or not resolved:
                prior = self._prior(plan)
                resolved += [r for r in subword_seeds(self, plan, cands)
                             if r not in resolved and (prior is None or prior(r) == 1.0)]
            soft = soft_seeds(self, plan, cands)
            if not resolved and soft and not plan.operators:
                resolved = soft
        if path is not None and path in self.engine.graph:
            at = self.engine.graph.innermost(path, line) if line else self.engine.graph.node(path)
            if at is not None:
                cands.add(at.id, "cursor", 2.5)
                if not resolved:
                    resolved.append(at.id)
        lexical: list[str] = []
        if "lexical" in features:
            lexical = lexical_seeds(self, plan, cands, top=12 if resolved else 16)
            if resolved and plan.trigger == EXPLICIT_SYMBOL:
                for nid in lexical:  # named targets lead; lexical hits only support them
                    for r in cands.pool[nid].reasons:
                        if r.via == "bm25":
                            r.weight *= 0.5
        if "memory" in features:
            mem = memory_seeds(self, plan, cands)
            if plan.temporal and not resolved:
                resolved = mem[:3]
        if "history_tests" in features:
            history_seeds(self, plan, cands, resolved)
            test_seeds(self, plan, cands, resolved)
        t["seed"] = time.perf_counter()
        check()
        hopped: list[str] = []
        hop_target: str | None = None
        if "edges" in features:
            spec = edges_for(plan, "history_tests" in features)
            described = not resolved
            sources = resolved[:6] if resolved else self._best_symbols(cands, lexical, 3)
            if sources:
                expand(self.engine.graph, cands, sources, spec, hops=2 if plan.trigger == IMPLICIT_CONTEXT or
                       "impact" in plan.operators or "implementations" in plan.operators else 1)
            check()
            if "hops" in features and described and plan.operators and plan.operators != ["definition"]:
                # Hop: the question described its target; the best-scoring symbol is now the resolved
                # target, so ask the plan's relation about it with full weight.
                ranked = cands.ranked(self._prior(plan))
                prior = self._prior(plan)
                pool = [c.node_id for c in ranked[:8] if self._is_symbol_node(c.node_id)
                        and (prior is None or prior(c.node_id) == 1.0)]
                kinds = _target_kinds(plan)
                target = next((nid for nid in pool if self.engine.graph.node(nid).kind in kinds), None)  # type: ignore[union-attr]
                target = target or (pool[0] if pool else None)
                if target is not None:
                    hop_target = target
                    cands.add(target, "hop-resolved", ranked[0].score, hops=0)
                    if "history_tests" in features:
                        history_seeds(self, plan, cands, [target])
                        test_seeds(self, plan, cands, [target])
                    hopped = expand(self.engine.graph, cands, [target], spec,
                                    hops=2 if "impact" in plan.operators else 1)
        t["expand"] = time.perf_counter()
        check()
        ranked = cands.ranked(self._prior(plan))
        t["score"] = time.perf_counter()
        relational = bool(set(plan.operators) & _RELATIONAL)
        targets = frozenset(resolved + ([hop_target] if hop_target else [])) if relational else frozenset()
        items = pack(ranked, self.engine.graph, self.source_lines, budget, targets)
        t["pack"] = time.perf_counter()
        out_items = [it.to_json() for it in items]
        result = {
            "query": query,
            "plan": plan.to_json(),
            "budget": budget,
            "tokens": sum(i["tokens"] for i in out_items),
            "stale": self.stale,
            "dirty_files": self.engine.index.dirty_files(),
            "items": out_items,
            "timings_ms": _timings(t),
        }
        if hop_target is not None:
            result["plan"]["hop"] = {"resolved": hop_target, "reached": len(hopped)}
        if record and "memory" in features:
            self.episodic.record(query, plan.trigger, out_items)
            for it in out_items[:3]:
                key = f"{it['path']}::{it['symbol']}" if it["symbol"] else it["path"]
                self.working.touch(key)
        return result

    def _prior(self, plan: Plan) -> Callable[[str], float] | None:
        """Tests matter for test questions; otherwise they rank below the code they exercise."""
        if "tests" in plan.operators:
            return None
        if set(plan.operators) & _RELATIONAL:
            return None  # a test that calls or subclasses the target is part of the answer
        g = self.engine.graph

        def prior(node_id: str) -> float:
            n = g.node(node_id)
            return TEST_PRIOR if n is not None and (n.kind == "test" or is_test_path(n.path)) else 1.0

        return prior

    def _is_symbol_node(self, node_id: str) -> bool:
        n = self.engine.graph.node(node_id)
        return n is not None and n.kind in _SYMBOL_KINDS

    def _best_symbols(self, cands: Candidates, lexical: list[str], n: int) -> list[str]:
        out = [nid for nid in lexical if self._is_symbol_node(nid)][:n]
        if not out:
            out = [c.node_id for c in cands.ranked()[:n]]
        return out

    def context_at(self, path: str, line: int, col: int | None, budget: int = 4000,
                   checkpoint: Callable[[], None] | None = None) -> dict[str, Any]:
        """Definition, callers, callees and tests of the symbol under the cursor."""
        node = self.engine.symbol_at(path, line, col)
        self.sync()
        t = {"start": time.perf_counter()}
        if node is None:
            return {"query": f"{path}:{line}", "plan": {"trigger": EXPLICIT_SYMBOL, "operators": [], "mentions": []},
                    "budget": budget, "tokens": 0, "stale": self.stale, "dirty_files": self.engine.index.dirty_files(),
                    "items": [], "timings_ms": {}, "reason": "no symbol at this position"}
        label = node.qualname or node.path
        plan = Plan(f"context of {label}", EXPLICIT_SYMBOL, ["definition", "callers", "callees", "tests"], [label])
        cands = Candidates()
        cands.add(node.id, "cursor", 3.0)
        spec = edges_for(plan, True)
        expand(self.engine.graph, cands, [node.id], spec, hops=1)
        if checkpoint:
            checkpoint()
        ranked = cands.ranked()
        t["score"] = time.perf_counter()
        items = pack(ranked, self.engine.graph, self.source_lines, budget)
        t["pack"] = time.perf_counter()
        out_items = [it.to_json() for it in items]
        self.working.touch(node.id)
        return {"query": plan.query, "plan": plan.to_json(), "budget": budget,
                "tokens": sum(i["tokens"] for i in out_items), "stale": self.stale,
                "dirty_files": self.engine.index.dirty_files(), "items": out_items, "timings_ms": _timings(t)}

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
