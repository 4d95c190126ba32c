"""Scores, aggregates and the markdown report of the SWE-bench lane, all computed from per-instance ranks.

Each instance result holds, per ranking row, `file_ranks` (gold file -> 1-based rank, None when not
ranked) and, for rows that rank functions, `function_ranks` (same for `path::Qual.name`). File
Acc@k: every gold file is in the top k; MRR: 1 / rank of the best-ranked gold file; hit@k: some gold
file is in the top k. Function Acc@k only over instances with at least one gold function.
Run-dependent figures (seconds, milliseconds, warm caches, files written) live under `timings`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from benchmark_gen.metrics import Bootstrap, percentile
from benchmark_gen.swebench_delivery import aggregate as delivery_rows

FILE_KS = (1, 3, 5, 10)
HIT_KS = (1, 5, 10)
FN_KS = (5, 10)
HEADLINE = "engine"
DENSE_ROW = "engine +dense"  # `swebench --dense`
ROW_LABELS = {
    "engine": "engine (test files removed)",
    "engine_as_is": "engine (as is)",
    "bm25_files": "BM25 over files",
    "bm25_functions": "BM25 over functions",
}


def label(row: str) -> str:
    return ROW_LABELS.get(row, row)


def all_within(ranks: dict[str, int | None], k: int) -> float:
    return 1.0 if ranks and all(r is not None and r <= k for r in ranks.values()) else 0.0


def any_within(ranks: dict[str, int | None], k: int) -> float:
    return 1.0 if any(r is not None and r <= k for r in ranks.values()) else 0.0


def rr(ranks: dict[str, int | None]) -> float:
    found = [r for r in ranks.values() if r is not None]
    return 1.0 / min(found) if found else 0.0


def row_scores(rec: dict[str, Any]) -> dict[str, float]:
    """File and function scores of one instance under one ranking row."""
    fr = rec["file_ranks"]
    out = {f"acc@{k}": all_within(fr, k) for k in FILE_KS}
    out |= {f"hit@{k}": any_within(fr, k) for k in HIT_KS}
    out["mrr"] = rr(fr)
    fn = rec.get("function_ranks")
    if fn:
        out |= {f"fn_acc@{k}": all_within(fn, k) for k in FN_KS}
    return out


def aggregate_rows(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean scores per ranking row over instances; `n`, and `fn_n` instances with gold functions."""
    rows: dict[str, list[dict[str, float]]] = {}
    for res in results:
        for row, rec in res["rankings"].items():
            rows.setdefault(row, []).append(row_scores(rec))
    out: dict[str, dict[str, float]] = {}
    for row, scores in rows.items():
        agg: dict[str, float] = {"n": len(scores)}
        for key in [f"acc@{k}" for k in FILE_KS] + [f"hit@{k}" for k in HIT_KS] + ["mrr"]:
            agg[key] = sum(s[key] for s in scores) / len(scores)
        fn = [s for s in scores if "fn_acc@10" in s]
        if any("function_ranks" in res["rankings"].get(row, {}) for res in results):
            agg["fn_n"] = len(fn)
            for k in FN_KS:
                agg[f"fn_acc@{k}"] = sum(s[f"fn_acc@{k}"] for s in fn) / len(fn) if fn else 0.0
        out[row] = agg
    return out


def _median(xs: Sequence[float]) -> float | None:
    return float(statistics.median(xs)) if xs else None


def timing_summary(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    t = [r["timings"] for r in results]
    first = [x["index_s"] for x in t if x["index_kind"] == "open"]
    return {
        "open_s": first[0] if len(first) == 1 else _median(first),
        "update_s_median": _median([x["index_s"] for x in t if x["index_kind"] == "refresh"]),
        "query_ms_median": _median([x["query_ms"] for x in t]),
        "query_ms_p95": percentile([x["query_ms"] for x in t], 95) if t else None,
        "warm_query_ms_median": _median([x["warm_query_ms"] for x in t if "warm_query_ms" in x]),
        "warm_query_ms_p95": percentile([x["warm_query_ms"] for x in t if "warm_query_ms" in x], 95)
        if any("warm_query_ms" in x for x in t) else None,
        "baseline_update_s_median": _median([x["baseline_update_s"] for x in t]),
        "baseline_query_ms_median": _median([x["baseline_query_ms"] for x in t]),
        "layout_s_median": _median([x["layout_s"] for x in t]),
    }


def aggregate(results: Sequence[dict[str, Any]], resamples: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Aggregates per repository and overall, the paired bootstrap of engine - BM25-files Acc@5, and
    (apart) the timing summaries."""
    repos = sorted({r["repo"] for r in results})
    by_repo = {repo: [r for r in results if r["repo"] == repo] for repo in repos}
    out: dict[str, Any] = {
        "overall": aggregate_rows(results),
        "repos": {repo: aggregate_rows(rs) for repo, rs in by_repo.items()},
        "tokens_median": {repo: _median([r["tokens"] for r in rs]) for repo, rs in by_repo.items()},
    }
    out["tokens_median"]["overall"] = _median([r["tokens"] for r in results])
    eng = [row_scores(r["rankings"][HEADLINE])["acc@5"] for r in results]
    bm = [row_scores(r["rankings"]["bm25_files"])["acc@5"] for r in results]
    out["bootstrap_acc5_engine_minus_bm25_files"] = Bootstrap(resamples, seed).paired(eng, bm)
    if results and all(DENSE_ROW in r["rankings"] for r in results):
        for k in (1, 5):
            with_dense = [row_scores(r["rankings"][DENSE_ROW])[f"acc@{k}"] for r in results]
            without = [row_scores(r["rankings"][HEADLINE])[f"acc@{k}"] for r in results]
            out[f"bootstrap_acc{k}_dense_minus_engine"] = Bootstrap(resamples, seed).paired(with_dense, without)
    if any("delivery" in r for r in results):
        out["delivery"] = {repo: delivery_rows(rs) for repo, rs in by_repo.items()}
        out["delivery"]["overall"] = delivery_rows(results)
    out["timings"] = {repo: timing_summary(rs) for repo, rs in by_repo.items()}
    out["timings"]["overall"] = timing_summary(results)
    return out


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _num(x: float | None, fmt: str = "{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def markdown(agg: dict[str, Any], errors: Sequence[dict[str, Any]], config: dict[str, Any]) -> str:
    lines = [
        "# SWE-bench localization (dev split)",
        "",
        f"Budget {config['budget']} tokens; engine features: {', '.join(config['features'])}. "
        "Engine rows have test files removed from the ranking (the published protocol); "
        "Acc@k = all gold files in the top k, in %.",
        "",
        "| repo | n | engine @1 | @5 | @10 | BM25-files @1 | @5 | @10 | BM25-functions @1 | @5 | @10 "
        "| engine MRR | engine fn Acc@10 (n) | open s | update s (median) | query ms (median) | tokens (median) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    scopes = [(repo, agg["repos"][repo]) for repo in sorted(agg["repos"])] + [("**overall**", agg["overall"])]
    for name, rows in scopes:
        key = "overall" if name == "**overall**" else name
        e, bf, bc = rows[HEADLINE], rows["bm25_files"], rows["bm25_functions"]
        t = agg["timings"][key]
        cells = [name, str(int(e["n"]))]
        for r in (e, bf, bc):
            cells += [_pct(r["acc@1"]), _pct(r["acc@5"]), _pct(r["acc@10"])]
        cells += [f"{e['mrr']:.3f}", f"{_pct(e.get('fn_acc@10'))} ({int(e.get('fn_n', 0))})",
                  _num(t["open_s"]), _num(t["update_s_median"]), _num(t["query_ms_median"], "{:.0f}"),
                  _num(agg["tokens_median"][key], "{:.0f}")]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Overall, every row", "",
              "| row | n | Acc@1 | Acc@3 | Acc@5 | Acc@10 | MRR | hit@1 | hit@5 | hit@10 | fn Acc@5 | fn Acc@10 | fn n |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row, r in agg["overall"].items():
        fn = [_pct(r.get("fn_acc@5")), _pct(r.get("fn_acc@10")), str(int(r["fn_n"]))] if "fn_n" in r else ["–"] * 3
        lines.append("| " + " | ".join([label(row), str(int(r["n"]))]
                                       + [_pct(r[f"acc@{k}"]) for k in FILE_KS] + [f"{r['mrr']:.3f}"]
                                       + [_pct(r[f"hit@{k}"]) for k in HIT_KS] + fn) + " |")
    b = agg["bootstrap_acc5_engine_minus_bm25_files"]
    lines += ["", f"Engine − BM25-files Acc@5 (paired bootstrap, 95% CI, seed 0): {100 * b['diff']:+.1f} "
              f"[{100 * b['lo']:+.1f}, {100 * b['hi']:+.1f}] points, p = {b['p']:.3f}, {b['verdict']} (n = {b['n']})."]
    for k in (1, 5):
        d = agg.get(f"bootstrap_acc{k}_dense_minus_engine")
        if d is not None:
            lines += ["", f"Engine +dense − engine Acc@{k} (paired bootstrap, 95% CI, seed 0): {100 * d['diff']:+.1f} "
                      f"[{100 * d['lo']:+.1f}, {100 * d['hi']:+.1f}] points, p = {d['p']:.3f}, {d['verdict']} (n = {d['n']})."]
    if "delivery" in agg:
        lines += ["", "## What the packs show (gold lines of non-test files shown verbatim, same budget)", "",
                  "| repo | n | engine line recall | complete | any | tokens (median) "
                  "| BM25 chunks line recall | complete | any | tokens (median) |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for key in sorted(k for k in agg["delivery"] if k != "overall") + ["overall"]:
            d = agg["delivery"][key]
            if "engine" not in d:
                continue
            cells = [key, str(int(d["engine"]["n"]))]
            for row in ("engine", "bm25_chunks"):
                r = d.get(row, {})
                cells += [_pct(r.get("line_recall")), _pct(r.get("complete")), _pct(r.get("any")),
                          _num(r.get("tokens_median"), "{:.0f}")]
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Timings", "",
              "| repo | open s (first visit) | update s (median) | query ms after update (median) | (p95) "
              "| warm query ms (median) | (p95) | baseline corpus s (median) | baseline query ms (median) "
              "| layout s (median) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for key in sorted(k for k in agg["timings"] if k != "overall") + ["overall"]:
        t = agg["timings"][key]
        lines.append("| " + " | ".join([key, _num(t["open_s"]), _num(t["update_s_median"]),
                                         _num(t["query_ms_median"], "{:.0f}"), _num(t["query_ms_p95"], "{:.0f}"),
                                         _num(t["warm_query_ms_median"], "{:.0f}"),
                                         _num(t["warm_query_ms_p95"], "{:.0f}"),
                                         _num(t["baseline_update_s_median"]),
                                         _num(t["baseline_query_ms_median"], "{:.0f}"),
                                         _num(t["layout_s_median"])]) + " |")
    if errors:
        lines += ["", "## Skipped instances", ""]
        lines += [f"- `{e['instance_id']}` ({e['repo']}): {e['error']}" for e in errors]
    return "\n".join(lines) + "\n"
