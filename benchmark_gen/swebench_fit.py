"""`python -m benchmark_gen swebench-fit REPORT.json...`: refit the file ranking's fusion weights offline.

A `swebench --explain` report keeps, per instance, every candidate file's evidence classes and prior
(the inputs of `ctx_lsp.retrieval.files.rank_files`). This command re-scores those inputs under other
weights without running the engine: coordinate ascent (RankLib's method: one weight at a time over a
grid of multipliers, kept when the objective grows) on mean(Acc@1, Acc@5, Acc@10) + MRR, with test
files removed as the lane does. It prints the current weights' scores, the fitted weights, and a
leave-one-repository-out estimate (fit on the other repositories, score on the held-out one), which
is the honest figure for repositories the weights never saw.

Gold files and functions in test files count as misses, as in the lane, so the re-score with the
engine's own weights gives the lane's Acc@k and function Acc@k exactly (MRR also counts gold files
ranked past the pack's 20). The offline score is exact for one pass of `rank_files`; the engine's second pass (the files the
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
            gold = inst["gold_files"]  # a gold test file cannot rank (test files are out): a miss, as in the lane
            files = sorted(p for p in ex["files"] if not is_swe_test_path(p, inst["repo"]))
            x = np.array([[ex["files"][p].get(c, 0.0) for c in classes] for p in files], dtype=float).reshape(-1, len(classes))
            prior = np.array([ex["files"][p].get("prior", 1.0) for p in files], dtype=float)
            out.append(Instance(inst["instance_id"], inst["repo"], x, prior, np.array([p in gold for p in files]), len(gold)))
    return out


def gold_worst_and_best(scores: np.ndarray, gold: np.ndarray) -> tuple[np.ndarray, int | None, int | None]:
    """Ranks of the gold rows under `scores` (best first, ties by row: rows are sorted by path or id, as
    the engine breaks ties), and (worst, best) gold rank; worst None when a gold row is missing."""
    import numpy as np

    order = np.lexsort((np.arange(len(scores)), -scores))
    ranks = np.empty(len(scores), dtype=int)
    ranks[order] = np.arange(1, len(scores) + 1)
    g = ranks[gold]
    return g, (int(g.max()) if g.size else None), (int(g.min()) if g.size else None)


def metrics(insts: list[Instance], w: np.ndarray) -> dict[str, float]:
    acc = {1: 0, 3: 0, 5: 0, 10: 0}
    mrr = 0.0
    for it in insts:
        g, worst, best = gold_worst_and_best((it.x @ w) * it.prior, it.gold)
        if best is not None:
            mrr += 1.0 / best
        complete = g.size == it.n_gold and worst is not None
        for k in acc:
            acc[k] += complete and worst <= k  # type: ignore[operator]
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
    # leave-one-repository-out: each repository scored with the weights fitted without it
    acc = {"acc@1": 0.0, "acc@3": 0.0, "acc@5": 0.0, "acc@10": 0.0, "mrr": 0.0}
    for repo in repos:
        part = [i for i in insts if i.repo == repo]
        m = metrics(part, fit([i for i in insts if i.repo != repo], w0, fixed))
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
    print_symbol_grid([Path(p) for p in args.reports])
    return 0


def add_parser(sub: Any) -> None:
    p = sub.add_parser("swebench-fit", help="refit the file ranking's fusion weights (and try the symbol ranking's "
                                            "length factor) from swebench --explain reports")
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
            gold = set(inst.get("gold_functions", []))  # those in test files count as misses, as in the lane
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
    """Function Acc@5/@10 of the symbol ranking re-scored: (candidate + w_chunk * chunk match) times
    (1 + w_length * ln(lines)), a class counting at most `class_lines` lines (symbols.rank_symbols)."""
    import numpy as np

    acc = {5: 0, 10: 0}
    for it in insts:
        lines = np.where(it.is_class, np.minimum(it.lines, class_lines), it.lines)
        g, worst, _ = gold_worst_and_best((it.cand + w_chunk * it.chunk) * (1 + w_length * np.log(np.maximum(1.0, lines))),
                                          it.gold)
        complete = g.size == it.n_gold and worst is not None
        for k in acc:
            acc[k] += complete and worst <= k  # type: ignore[operator]
    n = max(1, len(insts))
    return {"fn_acc@5": acc[5] / n, "fn_acc@10": acc[10] / n, "n": len(insts)}


def print_symbol_grid(paths: list[Path]) -> None:
    """The symbol ranking's length factor and chunk weight around the engine's, re-scored."""
    from ctx_lsp.retrieval.symbols import CLASS_LINES, W_CHUNK, W_LENGTH

    insts = load_symbols(paths)
    if not insts:
        return
    print("\n| symbols: W_CHUNK | W_LENGTH | n | fn Acc@5 | fn Acc@10 |\n|---:|---:|---:|---:|---:|")
    for wc in sorted({W_CHUNK * m for m in (0.5, 1.0, 2.0)}):
        for wl in sorted({W_LENGTH * m for m in (0.0, 0.5, 1.0, 2.0, 3.0)}):
            m = symbol_metrics(insts, wc, wl, CLASS_LINES)
            mark = " (current)" if (wc, wl) == (W_CHUNK, W_LENGTH) else ""
            print(f"| {wc:g}{mark} | {wl:g} | {m['n']} | {100 * m['fn_acc@5']:.1f} | {100 * m['fn_acc@10']:.1f} |")
