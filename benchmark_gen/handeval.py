"""Hand-written query sets (benchmark_gen/queries/*.json) against the engine and a BM25 file baseline.

`python -m benchmark_gen queries ROOT --set flask [--json]`: recall@5, recall@10, tokens delivered and
TES = recall@10 / ln(1 + items returned), per query group (keyword, structural, hidden, temporal).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from rank_bm25 import BM25Okapi

from ctx_lsp.engine import Engine
from ctx_lsp.retrieval.text import terms
from ctx_lsp.retrieval.tokens import count_tokens

QUERY_DIR = Path(__file__).parent / "queries"


def _recall(ranked: list[str], expect: list[str], k: int) -> float:
    return len(set(ranked[:k]) & set(expect)) / len(expect)


def _files_of(pack: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(i["path"] for i in pack["items"] if i["path"]))


class Bm25Files:
    def __init__(self, engine: Engine) -> None:
        self.paths = sorted(engine.index.facts)
        self.texts = {p: (engine.root / p).read_text(encoding="utf-8", errors="replace") for p in self.paths}
        self.bm25 = BM25Okapi([terms(self.texts[p] + " " + p) or ["_"] for p in self.paths])

    def rank(self, query: str, k: int = 10) -> list[str]:
        scores = self.bm25.get_scores(terms(query))
        order = sorted(range(len(self.paths)), key=lambda i: (-scores[i], self.paths[i]))
        return [self.paths[i] for i in order[:k]]


def run_set(root: Path, name: str, budget: int = 4000) -> dict[str, Any]:
    spec = json.loads((QUERY_DIR / f"{name}.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(root, cache_dir=Path(tmp))
        engine.open()
        base = Bm25Files(engine)
        rows = []
        for q in spec["queries"]:
            if q.get("after"):
                engine.context(q["after"], budget)
            t0 = time.perf_counter()
            pack = engine.context(q["q"], budget)
            ms = (time.perf_counter() - t0) * 1000
            files = _files_of(pack)
            bfiles = base.rank(q["q"], 10)
            btokens = sum(count_tokens(base.texts[p]) for p in bfiles[:5])
            rows.append({
                "q": q["q"], "group": q["group"], "expect": q["expect"], "trigger": pack["plan"]["trigger"],
                "operators": pack["plan"]["operators"],
                "engine": {"r5": _recall(files, q["expect"], 5), "r10": _recall(files, q["expect"], 10),
                           "tokens": pack["tokens"], "items": len(pack["items"]), "files": files[:10], "ms": ms},
                "bm25": {"r5": _recall(bfiles, q["expect"], 5), "r10": _recall(bfiles, q["expect"], 10),
                         "tokens": btokens, "items": 5, "files": bfiles},
            })
    return {"set": name, "rows": rows, "summary": summarize(rows)}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    groups = sorted({r["group"] for r in rows}) + ["all"]
    out: dict[str, Any] = {}
    for g in groups:
        sel = [r for r in rows if g == "all" or r["group"] == g]
        entry: dict[str, Any] = {"n": len(sel)}
        for s in ("engine", "bm25"):
            r10 = statistics.mean(r[s]["r10"] for r in sel)
            entry[s] = {
                "recall@5": round(statistics.mean(r[s]["r5"] for r in sel), 3),
                "recall@10": round(r10, 3),
                "tokens": round(statistics.mean(r[s]["tokens"] for r in sel)),
                "TES": round(statistics.mean(r[s]["r10"] / math.log(1 + max(r[s]["items"], 1)) for r in sel), 3),
            }
        out[g] = entry
    return out


def to_markdown(result: dict[str, Any]) -> str:
    lines = [f"### {result['set']}", "", "| group | n | engine R@5 | engine R@10 | engine tokens | engine TES | BM25 R@5 | BM25 R@10 | BM25 tokens (top-5 files) | BM25 TES |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for g, e in result["summary"].items():
        a, b = e["engine"], e["bm25"]
        lines.append(f"| {g} | {e['n']} | {a['recall@5']} | {a['recall@10']} | {a['tokens']} | {a['TES']} | {b['recall@5']} | {b['recall@10']} | {b['tokens']} | {b['TES']} |")
    misses = [r for r in result["rows"] if r["engine"]["r10"] < 1]
    if misses:
        lines += ["", "Engine misses (recall@10 < 1):"]
        for r in misses:
            lines.append(f"- {r['q']!r} ({r['trigger']}, {r['operators']}): expected {r['expect']}, got {r['engine']['files'][:5]}")
    return "\n".join(lines) + "\n"


def run_queries(args: argparse.Namespace) -> int:
    result = run_set(Path(args.root), args.set, args.budget)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(to_markdown(result))
    return 0
