"""Seed generators with small pools: symbol index, lexical BM25, working and episodic memory."""

from __future__ import annotations

import difflib
import math
import re
import time
from typing import TYPE_CHECKING

from ctx_lsp.index.facts import is_test_path
from ctx_lsp.retrieval.memory import SESSION_S, last_subject
from ctx_lsp.retrieval.plan import Plan
from ctx_lsp.retrieval.score import Candidates
from ctx_lsp.retrieval.text import STOPWORDS, stem, terms

if TYPE_CHECKING:
    from ctx_lsp.index.graph import CodeGraph
    from ctx_lsp.index.model import Node
    from ctx_lsp.retrieval.engine import Retriever

W_EXACT = 3.0
W_CI = 2.4
W_FUZZY = 1.4
MAX_TASK_FUZZY = 8
W_BM25 = 2.0
W_WORKING = 0.6
W_EPISODIC = 2.2
SUBWORD_NAMES = 3  # names a query's words may describe at full weight (subword_seeds)


def symbol_seeds(r: Retriever, plan: Plan, cands: Candidates) -> list[str]:
    """Resolve each mention: file paths, qualified names, exact / case-insensitive / fuzzy names."""
    engine = r.engine
    g = engine.graph
    resolved: list[str] = []
    fuzzy = 0
    # a name several symbols share is read as the one the session is about, in a question; task text
    # (a pasted issue) says what it is about itself, and its answer never depends on earlier ones
    recent = set() if plan.task else set(r.working.recent(8))
    subject = None if plan.task else last_subject(r.episodic.episodes, since=time.time() - SESSION_S)
    for m in plan.mentions:
        if m.endswith(".py"):
            hits = [p for p in g.file_nodes if p == m or p.endswith("/" + m)]
            if not hits and m in plan.linked:
                # a linked file with more in front than the workspace has, as a link to a branch whose
                # name holds a slash gives (`2.2.x/django/db/models/query.py`): the longest file it
                # ends in, its package folder included (a traceback's paths are the frames' generator's)
                longer = [p for p in g.file_nodes if "/" in p and m.endswith("/" + p)]
                hits = sorted(longer, key=len, reverse=True)[:1]
            for p in sorted(hits, key=len)[:3]:
                cands.add(p, "symbol-file", W_EXACT)
                resolved.append(p)
            continue
        if "." in m:
            modules = engine.index.ws.modules
            mpath = modules.get(m)
            if mpath is not None and mpath in g:
                cands.add(mpath, "symbol-module", W_EXACT)  # `django.db.models.query`: the module itself
                resolved.append(mpath)
                continue
        found = engine.find_symbols(m)
        exact = [n for n in found if n.name == m.split(".")[-1]]
        if len(exact) > 1 and "." not in m:
            # a bare name: not a def local to a function body (a test's `echo` helper) where the
            # package's code outside one defines it (`click.echo`); among tests' local `cli`s and an
            # example's, the name stays all of them
            scope = engine._scope()
            if any(n.kind in _CALLABLE and not in_function_body(g, n) and not is_test_path(n.path) and scope(n.path) >= 1.0
                   for n in exact):
                exact = [n for n in exact if not in_function_body(g, n)]
        if len(exact) > 1 and (recent or subject is not None):
            # a name several symbols share: the one the session is about first (what the last
            # question named, then what is open or was just shown)
            exact.sort(key=lambda n: (n.id != subject, n.id not in recent and n.path not in recent))
        # in a long task many words happen to be names: one that names a single symbol says more
        # than one that twenty symbols share
        spec = 1.0 / math.sqrt(len(exact or found)) if plan.task and (exact or found) else 1.0
        if exact:
            best = exact[:4]
            for i, n in enumerate(best):
                cands.add(n.id, "symbol-exact", (W_EXACT - 0.2 * i) * spec)
                resolved.append(n.id)
            continue
        if found:
            for i, n in enumerate(found[:4]):
                cands.add(n.id, "symbol-ci", (W_CI - 0.2 * i) * spec)
                resolved.append(n.id)
            continue
        short = m.split(".")[-1]
        fuzzy += 1
        if plan.task and fuzzy > MAX_TASK_FUZZY:
            continue  # a long task names many things that are no symbol; typos are rarer than that
        close = difflib.get_close_matches(short.lower(), r.names_like(short), n=3, cutoff=0.85)
        for name in close:
            for n in g.symbols_named(name)[:2]:
                cands.add(n.id, "symbol-fuzzy", W_FUZZY)
                resolved.append(n.id)
    return resolved


_CALLABLE = ("function", "class", "method")
_FUNCTION_KINDS = frozenset({"function", "method", "test"})  # a def inside one of these is local to it


def in_function_body(g: CodeGraph, n: Node) -> bool:
    """Whether `n` is defined inside a function, method or test (a closure, a test's local helper)."""
    parent = n.qualname.rpartition(".")[0] if n.qualname else ""
    outer = g.node(f"{n.path}::{parent}") if parent else None
    return outer is not None and outer.kind in _FUNCTION_KINDS


W_SOFT = 2.2
W_CONTAINER = 1.0


def soft_seeds(r: Retriever, plan: Plan, cands: Candidates) -> list[str]:
    """Lower-case words phrased like names ("the session class", "who calls send"): matched
    case-insensitively, preferring the hinted kind; a container ("the method of the X class") only
    leads towards its members."""
    out: list[str] = []
    for word, hint, role in plan.soft:
        found = r.engine.find_symbols(word)
        if not found and role == "target" and not plan.task:
            # "who calls mull": a typo of a name a short question targets, matched as mentions are
            for name in difflib.get_close_matches(word, r.names_like(word), n=3, cutoff=0.85):
                for n in r.engine.graph.symbols_named(name)[:2]:
                    cands.add(n.id, "symbol-fuzzy", W_FUZZY)
                    out.append(n.id)
            continue
        if hint is not None:
            kinds = {"method": ("method", "function"), "function": ("function", "method")}.get(hint, (hint,))
            found = [n for n in found if n.kind in kinds] or found
        for i, n in enumerate(found[:3]):
            if role == "container":
                cands.add(n.id, "symbol-container", W_CONTAINER)
                for e in r.engine.graph.out_edges(n.id, ("CONTAINS",)):
                    cands.add(e.dst, "member-of-described", W_CONTAINER * 0.3, source=n.id, hops=1)
            else:
                cands.add(n.id, "symbol-soft", W_SOFT - 0.2 * i)
                out.append(n.id)
    return out


def describe_text(plan: Plan) -> str:
    """The part of the query that describes things: no operator words, no stopwords."""
    return " ".join([plan.query] + plan.concepts)


def lexical_seeds(r: Retriever, plan: Plan, cands: Candidates, top: int = 12,
                  hits: list[tuple[str, float]] | None = None) -> list[str]:
    """The best BM25 chunks as seeds; `hits` when the search already ran (task text ranks files
    from the same search)."""
    hits = r.lexical.search(describe_text(plan), top=top) if hits is None else hits[:top]
    if not hits:
        return []
    best = hits[0][1]
    out = []
    for node_id, score in hits:
        if score < 0.25 * best:
            break
        cands.add(node_id, "bm25", W_BM25 * score / best)
        out.append(node_id)
    return out


def subword_seeds(r: Retriever, plan: Plan, cands: Candidates) -> list[str]:
    """Names whose identifier sub-words are all in the query: "retry count" -> `retry_count`, `RetryCount`."""
    raw = [w.lower() for w in re.findall(r"[A-Za-z]+", plan.query)]
    words = {w for w in raw if w not in STOPWORDS} | {stem(w) for w in raw if w not in STOPWORDS}
    if len(words) < 2:
        return []
    matched: list[tuple[int, str]] = []
    seen: set[str] = set()
    for w in sorted(words):
        for name, subs in r.compound_names_with(w):
            if name in seen:
                continue
            seen.add(name)
            if all(s in words or stem(s) in words for s in subs):
                matched.append((len(set(subs)), name))
    # the names that use most of the query's words first; when many names are made of its common
    # words ("field", "model", "alias"), none of them is what the words describe more than the rest
    matched.sort(key=lambda m: (-m[0], m[1]))
    weight = W_CI * min(1.0, math.sqrt(SUBWORD_NAMES / len(matched))) if matched else 0.0
    out: list[str] = []
    for _, name in matched[:8]:
        for n in r.engine.graph.symbols_named(name)[:3]:
            cands.add(n.id, "symbol-subwords", weight)
            out.append(n.id)
    return out[:8]


def memory_seeds(r: Retriever, plan: Plan, cands: Candidates) -> list[str]:
    out: list[str] = []
    g = r.engine.graph
    if plan.temporal:
        words = set(terms(plan.query)) - {"earlier", "befor", "previous", "previously", "look", "ask", "time", "last"}
        scored: list[tuple[float, int, dict]] = []
        for i, ep in enumerate(r.episodic.episodes):
            if not ep["items"]:
                continue  # an empty answer (recorded by older versions) recalls nothing
            overlap = len(words & set(terms(ep["query"] + " " + " ".join(str(it.get("symbol") or "") for it in ep["items"]))))
            scored.append((overlap, i, ep))
        scored.sort(key=lambda x: (-x[0], -x[1]))
        picked = [ep for s, _, ep in scored[:2] if s > 0] or [ep for _, _, ep in scored[:1]]
        for rank, ep in enumerate(picked):
            for j, it in enumerate(ep["items"][:5]):
                node_id = f"{it['path']}::{it['symbol']}" if it.get("symbol") else it["path"]
                if node_id in g:
                    cands.add(node_id, "episodic-memory", W_EPISODIC / (1 + rank) - 0.1 * j)
                    out.append(node_id)
        for j, key in enumerate(r.working.recent(5)):
            if key in g:
                cands.add(key, "working-memory", W_EPISODIC * 0.6 / (1 + j))
                out.append(key)
        return out
    if plan.task:
        # task text (a pasted issue) is read on its own: the same text on the same files gives the
        # same pack in a session as in a one-shot run
        return out
    # otherwise working memory only nudges: a small prior for what the user has open
    for j, key in enumerate(r.working.recent(8)):
        if key in g:
            cands.add(key, "working-memory", W_WORKING / (1 + j))
    return out


W_HISTORY = 1.6
W_TESTS = 2.0
W_COCHANGE = 1.4

_CO_CHANGE = re.compile(r"\bchanges? together\b|\bco-?chang|\busually change|\bchanged (?:along|together) with\b", re.I)
_INTRODUCED = re.compile(r"\bintroduc|\bfirst added\b|\bwhich commit added\b", re.I)
_RUN_AFTER = re.compile(r"\brun after\b|\bshould i run\b|\bto run after\b|\bafter changing\b", re.I)
_EXERCISE = re.compile(r"\bexercis|\bwhat does (?:this|the) test\b|\bcovered by (?:this|the) test\b", re.I)


def history_seeds(r: Retriever, plan: Plan, cands: Candidates, resolved: list[str]) -> list[str]:
    """The history generator: commit subjects (BM25) -> the symbols they touched, and for a named
    target its recent commits, the commit that introduced it, and code that changes with it."""
    from ctx_lsp.sources.history import history_for

    if "history" not in plan.operators:
        return []
    r.engine.ensure_history()
    h = history_for(r.engine.index)
    if h is None or not h.available:
        return []
    out: list[str] = []
    if not resolved:
        for node_id, score, sha in h.search(plan.query, n=8):
            cands.add(node_id, "history", W_HISTORY * min(1.0, score / 5.0), source=f"commit:{sha}")
            out.append(node_id)
    for target in resolved[:3]:
        if _CO_CHANGE.search(plan.query):
            for node_id, shared, _shas in h.co_changed(target, n=8):
                cands.add(node_id, "co-change", W_COCHANGE * min(1.0, shared / 3), source=target, hops=1)
                out.append(node_id)
        if _INTRODUCED.search(plan.query):
            c = h.introduced_by(target)
            if c is not None and c.node_id in r.engine.graph:
                cands.add(c.node_id, "introduced", W_HISTORY * 1.5, source=target, hops=1)
        for i, ch in enumerate(h.recent_changes(target, 5)):
            if ch.commit.node_id in r.engine.graph:
                w = W_HISTORY * (1.0 if not ch.superseded else 0.6) / (1 + 0.3 * i)  # newest wins
                cands.add(ch.commit.node_id, "recent-change", w, source=target, hops=1)
    return out


TEST_REACH = 2  # calls between a symbol no test covers and the callers whose tests count (engine.TEST_DEPTH less the test's own)


def test_seeds(r: Retriever, plan: Plan, cands: Candidates, resolved: list[str]) -> list[str]:
    """The tests generator: tests covering a target (dynamic coverage first), tests to run after
    changing it (covering its callers too), and what a named test exercises."""
    from ctx_lsp.sources.coverage_data import coverage_for

    cov = coverage_for(r.engine.index)
    if cov is None or "tests" not in plan.operators:
        return []
    out: list[str] = []
    for target in resolved[:3]:
        node = r.engine.graph.node(target)
        if node is None:
            continue
        if node.kind == "test" or _EXERCISE.search(plan.query):
            for i, (node_id, e) in enumerate(cov.exercised_by(target)[:15]):
                cands.add(node_id, f"exercised ({e.resolver})", W_TESTS / (1 + 0.05 * i), source=target, hops=1)
                out.append(node_id)
            continue
        hits = cov.tests_to_run(target, depth=1) if _RUN_AFTER.search(plan.query) else cov.tests_for(target)
        if not hits:  # no test covers it (a private helper): the tests that reach it through its callers
            hits = cov.tests_to_run(target, depth=TEST_REACH)
        for i, hit in enumerate(hits[:15]):
            w = W_TESTS * (0.6 if hit.stale else 1.0) / (1 + 0.5 * hit.depth + 0.02 * i)
            cands.add(hit.test, f"tests ({hit.resolver}{', stale' if hit.stale else ''})", w, source=target, hops=1)
            out.append(hit.test)
    return out
