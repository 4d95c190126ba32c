"""`python -m benchmark_gen verify-edges ROOT`: how true is the graph? Edge precision and recall
measured against two oracles that share none of our code.

- Static: pyright's language server (`benchmark_gen/oracle_pyright.py`). For a deterministic sample of
  our edges per (kind, resolver) it answers `textDocument/definition` at the edge's site; for a sample
  of functions/methods its call hierarchy's outgoing calls are compared with our CALLS/INSTANTIATES.
- Dynamic: the project's test suite run under a call tracer (`benchmark_gen/oracle_trace.py`); every
  executed caller -> callee pair between workspace functions that the graph lacks is a missed edge.

ROOT is copied to a temporary directory first (tests write files; pyright and the index cache must not
touch the original). The report names no temporary path and no time, so two runs give the same text.

This module runs the command; the work is in `verify_sampling.py` (samples, intervals, the workspace
view), `verify_precision.py` (edges judged against pyright), `verify_recall.py` (static and dynamic
recall, miss classes) and `verify_report.py` (summary and markdown).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmark_gen.oracle_pyright import PyrightOracle, langserver_path
from benchmark_gen.oracle_trace import run_traced
from benchmark_gen.verify_precision import Judge, Verdict
from benchmark_gen.verify_recall import dynamic_recall, static_recall
from benchmark_gen.verify_report import render_markdown, summarize_precision
from benchmark_gen.verify_sampling import CHECKED_KINDS, Workspace, sample_edges
from ctx_lsp.index.bind import Binder
from ctx_lsp.index.model import Edge
from ctx_lsp.index.workspace import WorkspaceIndex

COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "node_modules", ".tox", ".nox", ".venv", "venv",
                                     ".mypy_cache", ".pytest_cache", ".ruff_cache", "*.pyc")


# -- running ------------------------------------------------------------------------------------
async def run_static(ws: Workspace, samples: dict[tuple[str, str], list[Edge]], n_symbols: int, seed: int,
                     progress: Any = None) -> tuple[list[Verdict], dict[str, Any]]:
    async with PyrightOracle(ws.root) as oracle:
        judge = Judge(ws, oracle)
        edges = [e for key in sorted(samples) for e in samples[key]]
        verdicts: list[Verdict] = []
        batch = 64
        for i in range(0, len(edges), batch):
            verdicts.extend(await asyncio.gather(*(judge.judge(e) for e in edges[i:i + batch])))
            if progress:
                progress(f"pyright definitions {min(i + batch, len(edges))}/{len(edges)}")
        recall = await static_recall(judge, ws, n_symbols, seed)
    return verdicts, recall


def copy_workspace(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=COPY_IGNORE, symlinks=True)
    return dst


def pyright_version() -> str:
    pkg = Path(__file__).resolve().parent / "pyright" / "node_modules" / "pyright" / "package.json"
    try:
        return str(json.loads(pkg.read_text(encoding="utf-8")).get("version", "?"))
    except (OSError, ValueError):
        return "?"


def verify(root: Path, sample: int = 50, seed: int = 0, trace_cmd: str | None = None,
           static: bool = True, progress: Any = None, work: Path | None = None, jedi: bool = False) -> dict[str, Any]:
    """The whole measurement for one root; returns the JSON-able result."""
    root = root.resolve()
    with tempfile.TemporaryDirectory(prefix="ctx-verify-") as tmp_s:
        tmp = work if work is not None else Path(tmp_s)
        ws_root = copy_workspace(root, tmp / "ws" / root.name)
        index = WorkspaceIndex(ws_root, cache_dir=tmp / "cache")
        index.load_or_build()
        if jedi:
            if progress:
                progress("jedi refinement")
            from ctx_lsp.index.refine import refine_index

            stats = refine_index(index)
            del stats  # the edges are in the graph now, under resolver "jedi"
        ws = Workspace(ws_root, index)
        edges = sorted((e for e in index.graph.edges() if e.kind in CHECKED_KINDS),
                       key=lambda e: (e.kind, e.resolver, e.src, e.dst, e.path, e.line, e.col))
        population = Counter((e.kind, e.resolver) for e in edges)
        result: dict[str, Any] = {
            "root": root.name, "seed": seed, "sample": sample, "files": len(index.facts),
            "edges": {f"{k}/{r}": n for (k, r), n in sorted(population.items())},
            "pyright": pyright_version() if static else None, "jedi": jedi,
        }
        if static:
            samples = sample_edges(edges, index.facts, sample, seed)
            verdicts, recall = asyncio.run(run_static(ws, samples, sample, seed, progress))
            result["precision"] = summarize_precision(verdicts, dict(population))
            result["static_recall"] = recall
            result["verdicts"] = [asdict(v) for v in verdicts]
        if trace_cmd:
            if progress:
                progress(f"tracing: {trace_cmd}")
            run = run_traced(ws_root, trace_cmd, tmp / "trace")
            dyn = dynamic_recall(ws, run.calls, Binder(index.ws))
            dyn["command"] = " ".join(run.command)
            dyn["returncode"] = run.returncode
            dyn["traced_pairs"] = len(run.calls)
            result["dynamic_recall"] = dyn
        return result


def run_verify_edges(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if not root.is_dir():
        print(f"verify-edges: not a directory: {root}", file=sys.stderr)
        return 2
    static = not getattr(args, "no_pyright", False)
    if static and langserver_path() is None:
        print("verify-edges: pyright is not installed; run `npm ci --prefix benchmark_gen/pyright` "
              "(or pass --no-pyright for the dynamic oracle only)", file=sys.stderr)
        return 2

    def progress(msg: str) -> None:
        print(f"verify-edges: {msg}", file=sys.stderr, flush=True)

    result = verify(root, sample=args.sample, seed=args.seed, trace_cmd=args.trace_cmd, static=static,
                    progress=progress, jedi=not getattr(args, "no_jedi", False))
    text = render_markdown(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if not args.out:
        sys.stdout.write(text)
    return 0
