"""The pack's symbol ranking (retrieval/symbols.py): for task text, longer functions rank above
shorter ones with the same evidence; short questions keep their order."""

from __future__ import annotations

from ctx_lsp.index.graph import CodeGraph
from ctx_lsp.index.model import Node
from ctx_lsp.retrieval.lexical import LexicalIndex
from ctx_lsp.retrieval.score import Candidate, Reason
from ctx_lsp.retrieval.symbols import rank_symbols

PATH = "pkg/mod.py"


def graph_and_candidates() -> tuple[CodeGraph, list[Candidate]]:
    g = CodeGraph()
    g.set_file(PATH, [Node(PATH, "file", PATH, None, 1, 200),
                      Node(f"{PATH}::a_short", "function", PATH, "a_short", 1, 3),
                      Node(f"{PATH}::b_long", "function", PATH, "b_long", 10, 90),
                      Node(f"{PATH}::Big", "class", PATH, "Big", 100, 200)])
    ranked = [Candidate(f"{PATH}::{q}", reasons=[Reason("bm25", None, 1.0)], score=1.0) for q in ("a_short", "b_long", "Big")]
    return g, ranked


def test_task_text_puts_the_longer_function_first() -> None:
    g, ranked = graph_and_candidates()
    files = [{"path": PATH, "score": 1.0, "reasons": []}]
    got = [s["symbol"] for s in rank_symbols(g, ranked, files, LexicalIndex(), "task text", lambda _n: 1.0)]
    # b_long: 81 lines; Big: a class counts at most 50 lines (its own text); a_short: 3 lines
    assert got == ["b_long", "Big", "a_short"]
    scores = {s["symbol"]: s["score"] for s in rank_symbols(g, ranked, files, LexicalIndex(), "t", lambda _n: 1.0)}
    assert scores["a_short"] < scores["Big"] < scores["b_long"] < 1.0 + 0.1 * 5  # bounded: ln(81) < 5


def test_short_questions_keep_the_candidate_order() -> None:
    g, ranked = graph_and_candidates()
    got = [s["symbol"] for s in rank_symbols(g, ranked, [], None, "where is a_short", lambda _n: 1.0)]
    assert got == ["Big", "a_short", "b_long"]  # equal scores: by node id

