"""benchmark_gen evaluate: strategies on the fixture workspace, and the CI run of generate + evaluate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmark_gen.generate import generate
from benchmark_gen.strategies import ALL_NAMES, BASELINES, REPOBENCH_STRATEGIES, Strategies, rank_candidates
from ctx_lsp.engine import Engine

WS = Path(__file__).resolve().parent / "fixtures" / "bench_ws"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def strategies(tmp_path_factory: pytest.TempPathFactory) -> Strategies:
    engine = Engine(WS, cache_dir=tmp_path_factory.mktemp("cache"))
    engine.open()
    return Strategies(engine, cap=10, budget=4000)


def q(question: str, **extra: Any) -> dict[str, Any]:
    return {"id": "t", "question": question, **extra}


def test_lexical_baselines_rank_the_file_that_mentions_the_name(strategies: Strategies) -> None:
    for name in ("bm25_files", "bm25_chunks", "bm25_chunks_budget", "import_bfs"):
        res = strategies.run(name, q("Which code invokes `apply_tax`?"))
        assert res.files[0] == "shop/pricing.py", name
        assert res.tokens > 0 and len(res.items) <= 10
    budgeted = strategies.run("bm25_chunks_budget", q("Which code invokes `apply_tax`?"))
    assert budgeted.tokens <= 4000
    # packed chunks never repeat lines (a method and its class are not both packed)
    for i, (p, s, e) in enumerate(budgeted.items):
        assert not any(p == p2 and s <= e2 and s2 <= e for p2, s2, e2 in budgeted.items[i + 1:])


def test_full_context_returns_every_file(strategies: Strategies) -> None:
    res = strategies.run("full", q("anything"))
    assert res.files == sorted(strategies.corpus.paths)
    assert res.tokens == strategies.corpus.total_tokens


def test_import_bfs_reaches_import_neighbours(strategies: Strategies) -> None:
    res = strategies.run("import_bfs", q("takings batches"))
    # seed reports.py (the only file saying "takings"); service.py is one import hop, models/pricing two
    assert res.files[0] == "shop/reports.py"
    assert {"shop/service.py", "shop/models.py", "shop/pricing.py"} <= set(res.files)
    assert res.files.index("shop/service.py") < res.files.index("shop/models.py")


def test_named_file_then_one_hop(strategies: Strategies) -> None:
    res = strategies.run("named_1hop", q("Which files import `Order` in `shop/models.py`?"))
    assert res.files[0] == "shop/models.py"
    assert {"shop/pricing.py", "shop/service.py"} <= set(res.files[1:])
    assert "shop/reports.py" not in res.files  # two hops from models.py
    # without a path, a quoted symbol names its defining file
    assert strategies.run("named_1hop", q("Who calls `compute_price`?")).files[0] == "shop/pricing.py"


def test_engine_rows_run_with_feature_switches(strategies: Strategies) -> None:
    names = [n for n in ALL_NAMES if n.startswith("engine_")]
    assert all(strategies.available(n) for n in names), strategies.unavailable
    full = strategies.run("engine_full", q("Which code invokes `shop.pricing.apply_tax`?"))
    assert "shop/pricing.py" in full.files and full.tokens <= 4000
    assert not strategies.available("dense") or strategies.engine.retriever.dense is not None


def test_temporal_session_is_replayed_only_for_the_engine(strategies: Strategies) -> None:
    question = q("And who calls it?", session=["Show me `compute_price` in `shop/pricing.py`",
                                                "What does `compute_price` call?"])
    # the lexical baseline sees the session text joined to the question
    joined = strategies.run("bm25_files", question).files
    assert "shop/pricing.py" in joined[:2]
    assert strategies.run("bm25_files", q(question["question"])).files != joined
    # memory carries the session for the full engine; memory is emptied before every question
    strategies.run("engine_full", question)
    assert strategies.engine.retriever.episodic.episodes == [] or all(
        "compute_price" in e["query"] for e in strategies.engine.retriever.episodic.episodes)


def test_repobench_ranking_puts_every_candidate_once(strategies: Strategies) -> None:
    rec = next(r for r in generate(WS, per_relation=5, cache_dir=strategies.engine.index.cache_dir)[1:]
               if r["lane"] == "repobench")
    for name in REPOBENCH_STRATEGIES:
        order = rank_candidates(strategies, name, rec)
        assert sorted(order) == list(range(len(rec["candidates"]))), name


def test_ci_generate_and_evaluate_via_the_cli(tmp_path: Path) -> None:
    """The CI run: `python -m benchmark_gen generate` then `evaluate` on the fixture workspace."""
    bench = tmp_path / "bench.jsonl"
    cache = tmp_path / "cache"
    gen = subprocess.run([sys.executable, "-m", "benchmark_gen", "generate", str(WS), "--out", str(bench),
                          "--per-relation", "4", "--seed", "1", "--cache-dir", str(cache)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert gen.returncode == 0, gen.stderr
    header = json.loads(bench.read_text().splitlines()[0])
    assert header["counts"]["questions"] > 20
    md, js, png = tmp_path / "r.md", tmp_path / "r.json", tmp_path / "r.png"
    ev = subprocess.run([sys.executable, "-m", "benchmark_gen", "evaluate", str(bench), "--root", str(WS),
                         "--k", "1,5,10", "--out", str(md), "--json", str(js), "--png", str(png),
                         "--cache-dir", str(cache), "--bootstrap", "200"],
                        capture_output=True, text=True, cwd=REPO, timeout=300)
    assert ev.returncode == 0, ev.stderr
    report = json.loads(js.read_text())
    overall = report["results"]["relation"]["overall"]
    # every file of the 6-file fixture fits in the top 10, so full context finds every gold file
    assert overall["full"]["ALL@10"]["mean"] == 1.0
    from ctx_lsp.retrieval.tokens import count_tokens

    assert overall["full"]["tokens_mean"] == sum(count_tokens(p.read_text()) for p in WS.rglob("*.py"))
    # no baseline returns more text than the whole workspace
    assert all(e["tokens_mean"] <= overall["full"]["tokens_mean"] for n, e in overall.items()
               if n in dict(BASELINES))
    for name, entry in overall.items():
        assert entry["n"] == sum(1 for r in report["per_question"] if r["lane"] == "relation")
        for key in ("R@1", "R@5", "R@10", "MRR"):
            assert 0.0 <= entry[key]["lo"] <= entry[key]["mean"] <= entry[key]["hi"] <= 1.0, (name, key)
    assert [s["name"] for s in report["strategies"]] == ALL_NAMES
    statuses = {s["name"]: s["status"] for s in report["strategies"]}
    assert statuses["engine_full"] == "ok"
    assert "relation (all structural relations)" in report["paired"]
    assert report["results"]["repobench"]
    text = md.read_text()
    assert "## Relation lane" in text and "engine: full" in text and "Paired tests" in text
    pytest.importorskip("matplotlib")
    assert png.stat().st_size > 1000
    # bad input is one line on stderr and status 2
    bad = subprocess.run([sys.executable, "-m", "benchmark_gen", "evaluate", str(bench), "--root", str(WS),
                          "--strategies", "nope", "--cache-dir", str(cache)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert bad.returncode == 2 and "unknown strategies" in bad.stderr
