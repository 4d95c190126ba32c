"""`python -m benchmark_gen {speed,reuse-check,generate,evaluate,verify-edges,swebench,swebench-merge,swebench-fit,batch} ...`: headless
benchmarks over the core."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmark_gen")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("speed", help="cold/warm/update/query timings per root")
    p.add_argument("roots", nargs="+", metavar="ROOT")
    p.add_argument("--json", action="store_true")
    p.add_argument("--edits", type=int, default=50, help="random single-file edits for update latency")
    p.add_argument("--queries", type=int, default=50, help="queries for query latency")
    p.add_argument("--no-refine", action="store_true", help="skip the jedi refinement timing")
    p.add_argument("--refine-budget", type=float, default=None, help="stop jedi refinement after S seconds")
    p.add_argument("--seed", type=int, default=0, help="seed of the random edits and queries")
    p.add_argument("--switch", default=None, metavar="OTHER",
                   help="another version of the (single) ROOT project: time the update after a checkout to it")
    p.add_argument("--switch-runs", type=int, default=1,
                   help="repeat the checkout measure N times and report medians (each ratio within its own run)")
    p.add_argument("--oneshot-runs", type=int, default=7,
                   help="one-shot `ctx-lsp context` processes per mode (in-process, daemon); 0 skips them")
    p.add_argument("--peer", action="append", choices=("scip-python",), default=None,
                   help="also index each root with this peer indexer and print its time and RSS beside ours (repeatable)")
    p.add_argument("--peer-timeout", type=float, default=900.0, help="kill a peer after S seconds (default 900)")

    p = sub.add_parser("reuse-check", help="a checkout's modified files: statement reuse against whole extraction")
    p.add_argument("old", metavar="OLD", help="the tree before the checkout")
    p.add_argument("new", metavar="NEW", help="the tree after it (another version of the same project)")
    p.add_argument("--bindings", action="store_true",
                   help="also index a copy of OLD, update it to NEW, and compare every binding with a fresh one")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("generate", help="emit a deterministic gold retrieval benchmark (JSONL)")
    p.add_argument("root", metavar="ROOT")
    p.add_argument("--out", required=True)
    p.add_argument("--cache-dir", default=None, help="index cache directory (default: the ctx-lsp cache)")
    _generate_options(p)

    p = sub.add_parser("evaluate", help="evaluate retrieval strategies on a generated benchmark")
    p.add_argument("file", metavar="FILE.jsonl")
    p.add_argument("--root", required=True)
    p.add_argument("--out", default=None, help="markdown report")
    p.add_argument("--json", default=None, help="JSON report")
    p.add_argument("--edges", default=None, help="a verify-edges JSON result to add a graph accuracy section")
    p.add_argument("--cache-dir", default=None, help="index cache directory (default: the ctx-lsp cache)")
    p.add_argument("--png", default=None, help="bar chart path (default: next to --out/--json)")
    _evaluate_options(p)

    p = sub.add_parser("queries", help="hand-written query sets: engine vs a BM25 file baseline")
    p.add_argument("root", metavar="ROOT")
    p.add_argument("--set", required=True, help="name of a set in benchmark_gen/queries (flask, requests)")
    p.add_argument("--budget", type=int, default=4000)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("verify-edges", help="edge precision/recall against pyright and runtime traces")
    p.add_argument("root", metavar="ROOT")
    p.add_argument("--sample", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--trace-cmd", default=None, help="test command to run under the call tracer (dynamic oracle)")
    p.add_argument("--no-pyright", action="store_true", help="skip the pyright (static) oracle")
    p.add_argument("--no-jedi", action="store_true", help="measure the static binder only (skip jedi refinement)")

    p = sub.add_parser("swebench-merge", help="one report from swebench --json files of disjoint runs")
    p.add_argument("files", nargs="+", metavar="RUN.json")
    p.add_argument("--json", default=None, help="the merged report (JSON)")
    p.add_argument("--markdown", default=None, help="the merged markdown report (also printed)")

    from benchmark_gen.swebench_fit import add_parser as add_fit_parser

    add_fit_parser(sub)
    p = sub.add_parser("swebench", help="file/function localization on SWE-bench instances (engine vs BM25)")
    _swebench_options(p)

    p = sub.add_parser("batch", help="generate, evaluate or swebench over many repositories on Dask distributed")
    batch = p.add_subparsers(dest="batch_command", required=True)
    b = _batch_parser(batch, "generate", "one benchmark per repository: OUT_DIR/NAME.jsonl")
    b.add_argument("roots", nargs="+", metavar="ROOT", help="repository roots (@FILE reads them one a line)")
    b.add_argument("--out-dir", required=True)
    b.add_argument("--cache-dir", default=None, help="index caches, one per repository: DIR/NAME")
    _generate_options(b)
    b = _batch_parser(batch, "evaluate", "evaluate BENCH_DIR/NAME.jsonl on each root: OUT_DIR/NAME.md, NAME.json")
    b.add_argument("roots", nargs="+", metavar="ROOT", help="repository roots (@FILE reads them one a line)")
    b.add_argument("--bench-dir", required=True, help="the benchmarks, NAME.jsonl per root (batch generate's OUT_DIR)")
    b.add_argument("--out-dir", required=True)
    b.add_argument("--cache-dir", default=None, help="index caches, one per repository: DIR/NAME")
    _evaluate_options(b)
    b = _batch_parser(batch, "swebench", "the swebench lane, one unit per repository")
    _swebench_options(b)
    return parser


def _generate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--per-relation", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)


def _evaluate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strategies", default=None, help="comma-separated strategy names (default: all)")
    p.add_argument("--k", default="1,5,10")
    p.add_argument("--budget", type=int, default=4000, help="token budget of the engine rows")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the intervals")


def _swebench_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", metavar="DATA.jsonl")
    p.add_argument("--per-repo", type=int, default=None, help="first N instances per repository (instance_id order)")
    p.add_argument("--ids", default=None, help="comma-separated instance ids")
    p.add_argument("--repos", default=None, help="comma-separated repositories (owner/name)")
    p.add_argument("--budget", type=int, default=8000, help="token budget of the engine's pack")
    p.add_argument("--json", default=None, help="per-instance results and aggregates (JSON)")
    p.add_argument("--markdown", default=None, help="the markdown report (also printed to stdout)")
    p.add_argument("--work", default=None, help="trees and index caches (default ~/.cache/ctx-lsp-swebench/work)")
    p.add_argument("--ablate", action="store_true", help="also run the engine once per feature removed")
    p.add_argument("--explain", action="store_true",
                   help="keep each instance's ranking inputs (file evidence classes, wide symbol ranking) in --json")
    p.add_argument("--features", default=None, help="comma-separated engine features (default: all)")
    p.add_argument("--git-history", action="store_true",
                   help="lay each tree out as a git work tree at its base commit (the mirror's history up to it)")
    p.add_argument("--dense", action="store_true",
                   help="also rank with the dense generator (rows 'engine +dense', 'dense only'; needs ctx-lsp[dense])")


def _batch_parser(batch: Any, name: str, help: str) -> argparse.ArgumentParser:
    b: argparse.ArgumentParser = batch.add_parser(name, help=help, fromfile_prefix_chars="@")
    b.add_argument("--scheduler", default="local",
                   help="local (one worker process per core; the default), local:N, tcp://HOST:PORT of a running "
                        "`dask scheduler`, or serial (in this process); without dask installed: serial")
    b.add_argument("--worker-memory", default="auto", help="memory limit of each local worker (e.g. 4GiB)")
    return b


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "speed":
        from benchmark_gen.speed import run_speed

        return run_speed(args)
    if args.command == "reuse-check":
        from benchmark_gen.reuse_check import run_reuse_check

        return run_reuse_check(args)
    if args.command == "generate":
        from benchmark_gen.generate import run_generate

        return run_generate(args)
    if args.command == "evaluate":
        from benchmark_gen.evaluate import run_evaluate

        return run_evaluate(args)
    if args.command == "queries":
        from benchmark_gen.handeval import run_queries

        return run_queries(args)
    if args.command == "verify-edges":
        from benchmark_gen.verify_edges import run_verify_edges

        return run_verify_edges(args)
    if args.command == "swebench-merge":
        from benchmark_gen.swebench import run_merge

        return run_merge(args)
    if args.command == "swebench-fit":
        from benchmark_gen.swebench_fit import run_fit

        return run_fit(args)
    if args.command == "swebench":
        from benchmark_gen.swebench import run_swebench

        return run_swebench(args)
    if args.command == "batch":
        from benchmark_gen.batch import run_batch

        return run_batch(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
