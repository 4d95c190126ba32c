"""`python -m benchmark_gen evaluate FILE.jsonl --root ROOT`: run retrieval strategies on a benchmark.

Scopes: the `relation` lane is the main table (overall, per relation, per phrasing); the CTX lane is
reported per trigger type, the change-impact lane per instruction kind and per gold group (recall of
that group's files only), the RepoBench-R lane per setting (R@1, R@5, MRR over candidate snippets).
`engine_full` is compared with every other row by a paired bootstrap interval of the difference and
a sign-flip permutation p-value, on the relation lane and on the impact lane's hidden group.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmark_gen.common import files_digest, write_atomic
from benchmark_gen.metrics import Bootstrap, percentile, question_metrics
from benchmark_gen.report import render_markdown, render_png
from benchmark_gen.strategies import (
    ALL_NAMES,
    ENGINE_ROWS,
    LABELS,
    REPOBENCH_STRATEGIES,
    Strategies,
    Unavailable,
    rank_candidates,
)
from ctx_lsp.engine import Engine

FILE_LANES = ("relation", "ctx", "impact")
MAIN_METRICS = ("R@1", "R@5", "R@10", "MRR", "ALL@10", "ANY@1", "TES", "SpanR")
PAIRED_METRICS = ("R@10", "MRR")
REFERENCE = "engine_full"


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines or "schema" not in lines[0]:
        raise ValueError(f"{path}: not a benchmark file (no header line)")
    return lines[0], lines[1:]


def _spans(gold: Iterable[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return [(s["path"], int(s["start_line"]), int(s["end_line"])) for s in gold]


def evaluate(bench: Path, root: Path, names: list[str] | None = None, ks: tuple[int, ...] = (1, 5, 10),
             budget: int = 4000, cache_dir: Path | None = None, resamples: int = 1000,
             progress: bool = False) -> dict[str, Any]:
    header, questions = load(bench)
    engine = Engine(root, cache_dir=cache_dir)
    engine.open()
    strat = Strategies(engine, cap=max(ks), budget=budget)
    names = names or list(ALL_NAMES)
    unknown = [n for n in names if n not in ALL_NAMES]
    if unknown:
        raise ValueError(f"unknown strategies: {', '.join(unknown)}; expected {', '.join(ALL_NAMES)}")
    run_names = [n for n in names if strat.available(n)]
    statuses = [{"name": n, "label": LABELS[n], "status": "ok" if strat.available(n) else "unavailable",
                 "reason": strat.unavailable.get(n)} for n in names]
    boot = Bootstrap(resamples, seed=0)
    # -- per-question results -------------------------------------------------------------------
    per_q: list[dict[str, Any]] = []
    file_qs = [q for q in questions if q["lane"] in FILE_LANES]
    for i, q in enumerate(file_qs):
        if progress and i % 50 == 0:
            print(f"  {i}/{len(file_qs)} questions", file=sys.stderr)
        gold = set(q["gold_files"])
        row: dict[str, Any] = {"id": q["id"], "lane": q["lane"], "relation": q["relation"],
                               "phrasing": q["phrasing"], "results": {}}
        for n in run_names:
            try:
                res = strat.run(n, q)
            except Unavailable:
                continue
            ranked = res.files
            m = question_metrics(ranked, gold, ks, len(res.items), res.items, _spans(q["gold"]))
            m["tokens"] = float(res.tokens)
            m["ms"] = res.ms
            groups: dict[str, dict[str, float]] = {}
            for g in sorted(set((q.get("groups") or {}).values())):
                gfiles = {f for f, grp in q["groups"].items() if grp == g}
                groups[g] = question_metrics(ranked, gfiles, ks, len(res.items))
            row["results"][n] = {"m": m, "groups": groups, "files": ranked[: max(ks)]}
        per_q.append(row)
    # -- RepoBench-R -------------------------------------------------------------------------------
    rb_names = [n for n in REPOBENCH_STRATEGIES if not n.startswith("engine_") or n in run_names]
    rb_rows: list[dict[str, Any]] = []
    for q in (q for q in questions if q["lane"] == "repobench"):
        gold_idx = next(i for i, c in enumerate(q["candidates"]) if
                        (c["path"], c["start_line"], c["symbol"]) == (q["gold"][0]["path"], q["gold"][0]["start_line"],
                                                                      q["gold"][0]["symbol"]))
        row = {"id": q["id"], "relation": q["relation"], "results": {}}
        for n in rb_names:
            order = rank_candidates(strat, n, q)
            rank = order.index(gold_idx) + 1
            row["results"][n] = {"R@1": float(rank <= 1), "R@5": float(rank <= 5), "MRR": 1.0 / rank, "rank": rank}
        rb_rows.append(row)
    # -- aggregation ----------------------------------------------------------------------------
    def agg(rows: list[dict[str, Any]], group: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for n in run_names:
            ms_list = [r["results"][n]["m"] for r in rows if n in r["results"]]
            if group is not None:
                ms_list = [r["results"][n]["groups"][group] for r in rows
                           if n in r["results"] and group in r["results"][n]["groups"]]
            if not ms_list:
                continue
            entry: dict[str, Any] = {"n": len(ms_list)}
            for key in ms_list[0]:
                vals = [m[key] for m in ms_list if key in m]
                if key == "ms":
                    entry["latency_p50_ms"] = percentile(vals, 50)
                    entry["latency_p95_ms"] = percentile(vals, 95)
                elif key == "tokens":
                    entry["tokens_mean"] = sum(vals) / len(vals)
                else:
                    mean, lo, hi = boot.ci(vals)
                    entry[key] = {"mean": mean, "lo": lo, "hi": hi}
            out[n] = entry
        return out

    def by(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
        return {v: agg([r for r in rows if r[key] == v]) for v in sorted({r[key] for r in rows})}

    rel_rows = [r for r in per_q if r["lane"] == "relation"]
    ctx_rows = [r for r in per_q if r["lane"] == "ctx"]
    imp_rows = [r for r in per_q if r["lane"] == "impact"]
    results: dict[str, Any] = {
        "relation": {"overall": agg(rel_rows), "by_relation": by(rel_rows, "relation"),
                     "by_phrasing": by(rel_rows, "phrasing")},
        "ctx": {"overall": agg(ctx_rows), "by_trigger": by(ctx_rows, "relation")},
        "impact": {"overall": agg(imp_rows), "by_kind": by(imp_rows, "relation"),
                   "by_group": {g: agg(imp_rows, g) for g in ("semantic", "structural", "hidden")}},
        "repobench": {},
    }
    for setting in sorted({r["relation"] for r in rb_rows}):
        rows = [r for r in rb_rows if r["relation"] == setting]
        results["repobench"][setting] = {}
        for n in rb_names:
            entry: dict[str, Any] = {"n": len(rows)}
            for key in ("R@1", "R@5", "MRR"):
                mean, lo, hi = boot.ci([r["results"][n][key] for r in rows])
                entry[key] = {"mean": mean, "lo": lo, "hi": hi}
            results["repobench"][setting][n] = entry
    # -- paired tests: the full engine against every other row ----------------------------------------
    paired: dict[str, Any] = {}
    if REFERENCE in run_names:
        scopes: dict[str, tuple[list[dict[str, Any]], str | None]] = {
            "relation (all structural relations)": (rel_rows, None),
            "impact: hidden group": (imp_rows, "hidden"),
            "impact: structural group": (imp_rows, "structural"),
            "ctx (all triggers)": (ctx_rows, None),
        }
        for rel in sorted({r["relation"] for r in rel_rows}):
            scopes[f"relation: {rel}"] = ([r for r in rel_rows if r["relation"] == rel], None)
        for scope, (rows, group) in scopes.items():
            paired[scope] = {}
            for other in run_names:
                if other == REFERENCE:
                    continue
                both = [r for r in rows if REFERENCE in r["results"] and other in r["results"]
                        and (group is None or group in r["results"][REFERENCE]["groups"])]
                if not both:
                    continue
                paired[scope][other] = {}
                for metric in PAIRED_METRICS:
                    def val(r: dict[str, Any], n: str, metric: str = metric, group: str | None = group) -> float:
                        res = r["results"][n]
                        return (res["groups"][group] if group else res["m"])[metric]
                    paired[scope][other][metric] = boot.paired([val(r, REFERENCE) for r in both],
                                                               [val(r, other) for r in both])
    digest_now = files_digest(engine.index)
    edges = None
    return {
        "benchmark": {"file": bench.name, "header": header, "files_digest_now": digest_now,
                      "digest_matches": digest_now == header.get("files_digest")},
        "settings": {"k": list(ks), "budget": budget, "bootstrap_resamples": resamples, "bootstrap_seed": 0,
                     "token_counter": strat.corpus.counter_name, "cap": max(ks), "reference": REFERENCE,
                     "engine_rows": [r[0] for r in ENGINE_ROWS]},
        "strategies": statuses,
        "repobench_strategies": rb_names,
        "results": results,
        "paired": paired,
        "edges": edges,
        "per_question": per_q,
        "per_question_repobench": rb_rows,
    }


def run_evaluate(args: argparse.Namespace) -> int:
    bench = Path(args.file)
    root = Path(args.root)
    if not bench.is_file():
        print(f"error: no such benchmark file: {bench}", file=sys.stderr)
        return 2
    if not root.is_dir():
        print(f"error: not a directory: {root}", file=sys.stderr)
        return 2
    try:
        ks = tuple(sorted({int(x) for x in str(args.k).split(",") if x.strip()}))
        names = [s.strip() for s in args.strategies.split(",") if s.strip()] if args.strategies else None
        report = evaluate(bench, root, names, ks, getattr(args, "budget", 4000),
                          Path(args.cache_dir) if getattr(args, "cache_dir", None) else None,
                          getattr(args, "bootstrap", 1000), progress=True)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.edges:
        try:
            report["edges"] = json.loads(Path(args.edges).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"error: cannot read --edges {args.edges}: {exc}", file=sys.stderr)
            return 2
    write_reports(report, args.out, args.json, getattr(args, "png", None))
    return 0


def write_reports(report: dict[str, Any], out: str | None, json_path: str | None, png: str | None) -> None:
    """The markdown (--out, else stdout), JSON (--json) and chart (--png, else next to them) of a
    report, each file written whole or not at all."""
    md = render_markdown(report)
    if out:
        write_atomic(Path(out), md)
    if json_path:
        write_atomic(Path(json_path), json.dumps(report, indent=1, sort_keys=True))
    png = png or next((str(Path(p).with_suffix(".png")) for p in (out, json_path) if p), None)
    if png:
        made = render_png(report, Path(png))
        print(f"chart: {png}" if made else "chart: skipped (matplotlib is not installed)", file=sys.stderr)
    if not out:
        print(md)
