"""`python -m benchmark_gen swebench-fit REPORT.json...`: refit the file ranking's fusion weights offline.

A `swebench --explain` report keeps, per instance, every candidate file's evidence classes and prior
(the inputs of `ctx_lsp.retrieval.files.rank_files`). This command re-scores those inputs under other
weights without running the engine: coordinate ascent (RankLib's method: one weight at a time over a
grid of multipliers, kept when the objective grows) on mean(Acc@1, Acc@5, Acc@10) + MRR, with test
files removed as the lane does. It prints the current weights' scores, the fitted weights, and a
leave-one-repository-out estimate (fit on the other repositories, score on the held-out one), which
is the honest figure for repositories the weights never saw.

The offline score is exact for one pass of `rank_files`; the engine's second pass (the files the
leading three import, and their folders) is replayed from the report's values, which the first
pass's order produced, so a fitted change must still be confirmed by a real `swebench` run.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy (and rank_bm25 through swebench_baselines) load only when a fit runs: the
    # benchmark_gen command line stays light, and so the RSS its children inherit at exec
    import numpy as np

GRID = (0.0, 0.25, 0.5, 0.75, 1.5, 2.0, 4.0)  # multipliers tried per weight and round
ABSOLUTE = (0.1, 0.25, 0.5, 1.0, 2.0)  # values tried too (a weight at 0 has no multiple)


@dataclass
class Instance:
    iid: str
    repo: str
    x: np.ndarray  # files x classes
    prior: np.ndarray
    gold: np.ndarray  # bool per file
    n_gold: int  # gold files, including those no evidence reached


def load(paths: list[Path], classes: list[str]) -> list[Instance]:
    import numpy as np

    from benchmark_gen.swebench_baselines import is_swe_test_path

    out = []
    for path in paths:
        rep = json.loads(path.read_text(encoding="utf-8"))
        for inst in rep["instances"]:
            ex = inst.get("explain")
            if not ex:
                continue
            gold = [g for g in inst["gold_files"] if not is_swe_test_path(g, inst["repo"])]
            if not gold:
                continue
            files = sorted(p for p in ex["files"] if not is_swe_test_path(p, inst["repo"]))
            x = np.array([[ex["files"][p].get(c, 0.0) for c in classes] for p in files], dtype=float).reshape(-1, len(classes))
            prior = np.array([ex["files"][p].get("prior", 1.0) for p in files], dtype=float)
            out.append(Instance(inst["instance_id"], inst["repo"], x, prior, np.array([p in gold for p in files]), len(gold)))
    return out


def metrics(insts: list[Instance], w: np.ndarray) -> dict[str, float]:
    import numpy as np

    acc = {1: 0, 3: 0, 5: 0, 10: 0}
    mrr = 0.0
    for it in insts:
        s = (it.x @ w) * it.prior
        order = np.lexsort((np.arange(len(s)), -s))  # score desc, ties by path (files are sorted)
        ranks = np.empty(len(s), dtype=int)
        ranks[order] = np.arange(1, len(s) + 1)
        gold_ranks = ranks[it.gold]
        if gold_ranks.size:
            mrr += 1.0 / gold_ranks.min()
        worst = gold_ranks.max() if gold_ranks.size == it.n_gold and gold_ranks.size else None
        for k in acc:
            acc[k] += worst is not None and worst <= k
    n = max(1, len(insts))
    return {**{f"acc@{k}": v / n for k, v in acc.items()}, "mrr": mrr / n, "n": len(insts)}


def objective(m: dict[str, float]) -> float:
    return (m["acc@1"] + m["acc@5"] + m["acc@10"]) / 3 + m["mrr"]


def fit(insts: list[Instance], w0: np.ndarray, fixed: set[int], rounds: int = 4) -> np.ndarray:
    w = w0.copy()
    best = objective(metrics(insts, w))
    for _ in range(rounds):
        improved = False
        for j in range(len(w)):
            if j in fixed:
                continue
            for value in sorted({w[j] * m for m in GRID} | set(ABSOLUTE)):
                trial = w.copy()
                trial[j] = value
                o = objective(metrics(insts, trial))
                if o > best + 1e-9:
                    best, w, improved = o, trial, True
        if not improved:
            break
    return w


def _row(name: str, m: dict[str, float]) -> str:
    return (f"| {name} | {m['n']} | {100 * m['acc@1']:.1f} | {100 * m['acc@3']:.1f} | {100 * m['acc@5']:.1f} | "
            f"{100 * m['acc@10']:.1f} | {m['mrr']:.3f} |")


def run_fit(args: argparse.Namespace) -> int:
    import numpy as np

    from ctx_lsp.retrieval.files import WEIGHTS

    classes = sorted(WEIGHTS)
    insts = load([Path(p) for p in args.reports], classes)
    if not insts:
        print("swebench-fit: no instance with explain data (run swebench with --explain)", file=sys.stderr)
        return 2
    w0 = np.array([WEIGHTS[c] for c in classes])
    fixed = {classes.index("file-bm25")}  # the scale: one weight stays put
    print("| weights | n | Acc@1 | Acc@3 | Acc@5 | Acc@10 | MRR |\n|---|---:|---:|---:|---:|---:|---:|")
    print(_row("current", metrics(insts, w0)))
    w = fit(insts, w0, fixed)
    print(_row("fitted (in-sample)", metrics(insts, w)))
    repos = sorted({i.repo for i in insts})
    held: list[Instance] = []
    lo_w: dict[str, np.ndarray] = {}
    for repo in repos:
        lo_w[repo] = fit([i for i in insts if i.repo != repo], w0, fixed)
        held += [i for i in insts if i.repo == repo]
    # leave-one-repository-out: each repository scored with the weights fitted without it
    acc = {"acc@1": 0.0, "acc@3": 0.0, "acc@5": 0.0, "acc@10": 0.0, "mrr": 0.0}
    for repo in repos:
        part = [i for i in insts if i.repo == repo]
        m = metrics(part, lo_w[repo])
        for k in acc:
            acc[k] += m[k] * len(part)
    print(_row("leave-one-repository-out", {**{k: v / len(insts) for k, v in acc.items()}, "n": len(insts)}))
    print()
    print("| class | current | fitted |\n|---|---:|---:|")
    for c, a, b in zip(classes, w0, w, strict=True):
        print(f"| {c} | {a:g} | {b:g} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"classes": classes, "current": w0.tolist(), "fitted": w.tolist()},
                                              indent=1) + "\n", encoding="utf-8")
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("swebench-fit", help="refit the file ranking's fusion weights from swebench --explain reports")
    p.add_argument("reports", nargs="+", metavar="REPORT.json")
    p.add_argument("--json", default=None, help="write the current and fitted weights")


# -- the symbol ranking (ctx_lsp.retrieval.symbols.rank_symbols), re-scored from its parts ------------
@dataclass
class SymbolInstance:
    iid: str
    repo: str
    cand: np.ndarray
    chunk: np.ndarray  # chunk match relative to the best in the leading files, times share and prior
    lines: np.ndarray
    is_class: np.ndarray
    gold: np.ndarray
    n_gold: int


def load_symbols(paths: list[Path]) -> list[SymbolInstance]:
    import numpy as np

    from benchmark_gen.swebench_baselines import is_swe_test_path

    out = []
    for path in paths:
        rep = json.loads(path.read_text(encoding="utf-8"))
        for inst in rep["instances"]:
            ex = inst.get("explain")
            gold = {g for g in inst.get("gold_functions", []) if not is_swe_test_path(g.split("::", 1)[0], inst["repo"])}
            if not ex or not gold:
                continue
            rows = [s for s in ex["symbols"] if not is_swe_test_path(s["path"], inst["repo"])]
            rows.sort(key=lambda s: f"{s['path']}::{s['symbol']}")
            parts = [s["parts"] for s in rows]
            out.append(SymbolInstance(
                inst["instance_id"], inst["repo"],
                np.array([p.get("cand", 0.0) for p in parts]),
                np.array([p.get("chunk", 0.0) * p.get("share", 0.0) * p.get("prior", 1.0) for p in parts]),
                np.array([p["lines"] for p in parts], dtype=float),
                np.array([s["kind"] == "class" for s in rows]),
                np.array([f"{s['path']}::{s['symbol']}" in gold for s in rows]), len(gold)))
    return out


def symbol_metrics(insts: list[SymbolInstance], w_chunk: float, w_length: float, class_lines: float) -> dict[str, float]:
    import numpy as np

    acc = {5: 0, 10: 0}
    for it in insts:
        lines = np.where(it.is_class, np.minimum(it.lines, class_lines), it.lines)
        s = (it.cand + w_chunk * it.chunk) * (1 + w_length * np.log(np.maximum(1.0, lines)))
        order = np.lexsort((np.arange(len(s)), -s))
        ranks = np.empty(len(s), dtype=int)
        ranks[order] = np.arange(1, len(s) + 1)
        g = ranks[it.gold]
        worst = g.max() if g.size == it.n_gold and g.size else None
        for k in acc:
            acc[k] += worst is not None and worst <= k
    n = max(1, len(insts))
    return {"fn_acc@5": acc[5] / n, "fn_acc@10": acc[10] / n, "n": len(insts)}
