"""Seed generators as one pipeline: each is an object with a name (also the ablation feature that
turns it off), a test of whether it applies to a query, and a `seed` step that adds candidates with
reasons. `Retriever.context` runs them in order; a new generator is one class added to GENERATORS.

The query state they share is a `Query`: the plan, the task evidence, the candidate pool, the
resolved targets (what the question names) and the lexical hits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ctx_lsp.retrieval.evidence import TaskEvidence
from ctx_lsp.retrieval.memory import last_subject
from ctx_lsp.retrieval.plan import EXPLICIT_SYMBOL, Plan
from ctx_lsp.retrieval.score import Candidates
from ctx_lsp.retrieval.seeds import (
    W_EXACT,
    history_seeds,
    lexical_seeds,
    memory_seeds,
    soft_seeds,
    subword_seeds,
    symbol_seeds,
    test_seeds,
)
from ctx_lsp.retrieval.text import STOPWORDS

if TYPE_CHECKING:
    from ctx_lsp.retrieval.engine import Retriever

TASK_CHUNKS = 200  # chunk BM25 hits kept for task text: seeds and the file ranking's chunk-bm25


@dataclass
class Query:
    retriever: Retriever
    plan: Plan
    evidence: TaskEvidence
    cands: Candidates
    features: frozenset[str]
    path: str | None = None
    line: int | None = None
    resolved: list[str] = field(default_factory=list)  # what the question names: expansion sources
    lexical: list[str] = field(default_factory=list)  # chunk BM25 hits, best first
    grounded: list[str] = field(default_factory=list)  # evidence targets (snippets, frames, literals)
    notes: list[str] = field(default_factory=list)  # which generators ran and what they found
    chunk_hits: list[tuple[str, float]] | None = None  # task text: the chunk BM25 ranking, best first
    dense_files: dict[str, float] = field(default_factory=dict)  # the dense generator's file scores
    explain: bool = False  # keep the ranking's inputs (file_features) for the pack's `explain`
    file_features: dict[str, dict[str, float]] = field(default_factory=dict)  # the file ranking's inputs

    def prior(self, node_id: str) -> float:
        return self.retriever.prior(self.plan, self.features)(node_id)


class Generator(Protocol):
    name: str

    def applies(self, q: Query) -> bool: ...

    def seed(self, q: Query) -> None: ...


class SymbolIndex:
    """Names in the query: exact, case-insensitive, sub-word and fuzzy matches, soft mentions."""

    name = "symbols"

    def applies(self, q: Query) -> bool:
        return True

    def seed(self, q: Query) -> None:
        r, plan, cands = q.retriever, q.plan, q.cands
        resolved = symbol_seeds(r, plan, cands)
        if plan.trigger != EXPLICIT_SYMBOL or not resolved:
            prior = r.prior(plan, q.features)
            resolved += [x for x in subword_seeds(r, plan, cands) if x not in resolved and prior(x) == 1.0]
        soft = soft_seeds(r, plan, cands)
        if not resolved and soft and not plan.operators:
            resolved = soft
        q.resolved.extend(x for x in resolved if x not in q.resolved)


class Cursor:
    """The editor position a question was asked at."""

    name = "cursor"

    def applies(self, q: Query) -> bool:
        return q.path is not None and q.path in q.retriever.engine.graph

    def seed(self, q: Query) -> None:
        g = q.retriever.engine.graph
        at = g.innermost(q.path, q.line) if q.line else g.node(q.path)  # type: ignore[arg-type]
        if at is not None:
            q.cands.add(at.id, "cursor", 2.5)
            if not q.resolved:
                q.resolved.append(at.id)


class Lexical:
    """BM25 over symbol chunks; when the question names its targets, lexical hits only support them."""

    name = "lexical"

    def applies(self, q: Query) -> bool:
        return True

    def seed(self, q: Query) -> None:
        if q.plan.task:
            q.chunk_hits = q.retriever.lexical.search(q.plan.query, top=TASK_CHUNKS)
            q.lexical = lexical_seeds(q.retriever, q.plan, q.cands, top=24, hits=q.chunk_hits)
        else:
            q.lexical = lexical_seeds(q.retriever, q.plan, q.cands, top=12 if q.resolved else 16)
        if q.resolved and q.plan.trigger == EXPLICIT_SYMBOL and not q.plan.task:
            for nid in q.lexical:
                for reason in q.cands.pool[nid].reasons:
                    if reason.via == "bm25":
                        reason.weight *= 0.5


class Memory:
    """Working memory (open and edited files) nudges; episodic memory answers session questions."""

    name = "memory"

    def applies(self, q: Query) -> bool:
        return True

    def seed(self, q: Query) -> None:
        mem = memory_seeds(q.retriever, q.plan, q.cands)
        if q.plan.temporal and not q.resolved:
            q.resolved.extend(mem[:3])
        elif is_follow_up(q.plan) and not q.resolved:
            # "and who calls it?": the relation asked of what the last answer was about
            subject = last_subject(q.retriever.episodic.episodes)
            if subject is not None and subject in q.retriever.engine.graph:
                q.cands.add(subject, "follow-up", W_EXACT)
                q.resolved.append(subject)


_ANAPHORS = frozenset({"it", "its", "this", "that", "them", "these", "those", "same"})
# words a relation question is made of; any other word describes a target ("the function that merges
# settings"), and then the question is not a follow-up
_RELATION_WORDS = frozenset("""
call calls called caller callers callee callees test tests tested testing cover covers covered import imports
imported importer importers use uses used user users break breaks broke change changes changed changing impact
impacts affect affects affected depend depends dependency dependencies subclass subclasses subclassed implement
implements implemented implementation implementations override overrides overridden instantiate instantiates
instantiated create creates created reference references referenced refer refers define defined definition
definitions history show who what which where and also then now else instead""".split())


def is_follow_up(plan: Plan) -> bool:
    """A short question asking a relation of something it names only by a pronoun ("who calls it?",
    "and its tests"), which refers to what the previous question was about."""
    if not plan.operators or plan.mentions or plan.task or plan.temporal or plan.place is not None:
        return False
    words = set(re.findall(r"[a-z]+", plan.query.lower()))
    return bool(words & _ANAPHORS) and words <= _ANAPHORS | _RELATION_WORDS | STOPWORDS


class HistoryAndTests:
    """Commits (TOUCHED) and covering tests (COVERS) of the named targets, for history and test questions."""

    name = "history_tests"

    def applies(self, q: Query) -> bool:
        return bool({"history", "tests"} & set(q.plan.operators))

    def seed(self, q: Query) -> None:
        history_seeds(q.retriever, q.plan, q.cands, q.resolved)
        test_seeds(q.retriever, q.plan, q.cands, q.resolved)


def default_generators() -> list[Generator]:
    from ctx_lsp.retrieval.dense import Dense
    from ctx_lsp.retrieval.task_generators import Literals, Snippets, Traceback

    return [SymbolIndex(), Cursor(), Snippets(), Traceback(), Literals(), Lexical(), Dense(), Memory(),
            HistoryAndTests()]
