"""`python -m benchmark_gen batch generate|evaluate|swebench ...`: the single-process commands over many
repositories, one unit of work per repository, run by `batch_runner` (Dask distributed or in process).

- generate: ROOT... -> OUT_DIR/NAME.jsonl (NAME: the root's directory name), the bytes that
  `generate ROOT --out OUT_DIR/NAME.jsonl` writes with the same options.
- evaluate: ROOT... and BENCH_DIR/NAME.jsonl -> OUT_DIR/NAME.md, NAME.json (NAME.png with
  matplotlib), as `evaluate BENCH_DIR/NAME.jsonl --root ROOT --out OUT_DIR/NAME.md --json OUT_DIR/NAME.json`.
  Both write OUT_DIR/batch.json last: per unit, in name order, its inputs, outputs and status or error.
- swebench: the arguments of `swebench`; one unit per repository, its instances in base-commit date
  order (they share one tree and one index cache, so splitting them would rebuild indexes); the
  report is the one `swebench` writes for the same selection, a failed unit's instances listed
  under `errors`.

Workers compute, the driver writes: a unit returns its records or report and the driver writes them
(atomically) in the single-process command's own format, so outputs do not depend on which worker
ran what or in which order units finished. Run-dependent timing fields differ, as they do between
two single-process runs. Inputs (roots, benchmark files, mirrors) are read by the workers: on a
cluster every worker must reach them under the same path.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmark_gen import batch_runner, swebench
from benchmark_gen.batch_runner import Outcome, Unit
from benchmark_gen.common import write_atomic
from benchmark_gen.evaluate import write_reports
from benchmark_gen.generate import dumps, generate, summary_line
from benchmark_gen.strategies import ALL_NAMES

MANIFEST = "batch.json"


def generate_unit(root: str, per_relation: int, seed: int, cache_dir: str | None) -> list[dict[str, Any]]:
    """The benchmark records of one repository (runs on a worker)."""
    if not Path(root).is_dir():
        raise NotADirectoryError(f"not a directory: {root}")
    return generate(Path(root), per_relation, seed, Path(cache_dir) if cache_dir else None)


def evaluate_unit(bench: str, root: str, names: list[str] | None, ks: tuple[int, ...], budget: int,
                  cache_dir: str | None, resamples: int) -> dict[str, Any]:
    """The evaluation report of one repository's benchmark (runs on a worker)."""
    from benchmark_gen.evaluate import evaluate

    if not Path(bench).is_file():
        raise FileNotFoundError(f"no such benchmark file: {bench}")
    if not Path(root).is_dir():
        raise NotADirectoryError(f"not a directory: {root}")
    return evaluate(Path(bench), Path(root), names, ks, budget, Path(cache_dir) if cache_dir else None, resamples)


def swebench_unit(instances: list[dict[str, Any]], work: str, budget: int, features: frozenset[str],
                  ablate: list[str], dense: bool = False, git_history: bool = False,
                  explain: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(results, errors) of one repository's instances (runs on a worker; per-instance lines dropped,
    the driver prints one line per repository)."""
    return swebench.evaluate(instances, Path(work), budget, features, ablate, log=io.StringIO(), dense=dense,
                              explain=explain, git_history=git_history)


def run_batch(args: argparse.Namespace) -> int:
    try:
        sched = batch_runner.resolve(batch_runner.parse_scheduler(args.scheduler), sys.stderr)
    except ValueError as exc:
        print(f"batch: {exc}", file=sys.stderr)
        return 2
    print(f"batch {args.batch_command}: running on {sched.describe()}", file=sys.stderr, flush=True)
    try:
        if args.batch_command == "generate":
            return _generate(args, sched)
        if args.batch_command == "evaluate":
            return _evaluate(args, sched)
        return _swebench(args, sched)
    except batch_runner.SchedulerUnreachable as exc:
        print(f"batch: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("batch: interrupted; the futures are cancelled, no output is half-written", file=sys.stderr)
        return 130


def _names(roots: list[str]) -> dict[str, str] | None:
    """{unit name: root}; None (after a message) when two roots share a directory name."""
    named: dict[str, list[str]] = {}
    for r in roots:
        name = Path(r).name or Path(r).resolve().name
        named.setdefault(name, []).append(r)
    clash = {n: rs for n, rs in named.items() if len(rs) > 1 or not n}
    if clash:
        for n, rs in sorted(clash.items()):
            print(f"batch: roots {', '.join(rs)} share the output name {n!r}; give each a distinct directory name",
                  file=sys.stderr)
        return None
    return {n: rs[0] for n, rs in named.items()}


def _cache(args: argparse.Namespace, name: str) -> str | None:
    return str(Path(args.cache_dir) / name) if args.cache_dir else None


def _write_manifest(out_dir: Path, command: str, outcomes: list[Outcome], inputs: dict[str, dict[str, Any]]) -> int:
    units = []
    for o in outcomes:
        entry: dict[str, Any] = {"name": o.key, **inputs[o.key], "status": "ok" if o.ok else "failed"}
        if o.ok:
            entry["outputs"] = o.value
        else:
            entry["error"] = o.error
            print(f"failed {o.key}: {o.error}")
        units.append(entry)
    failed = sum(not o.ok for o in outcomes)
    write_atomic(out_dir / MANIFEST, json.dumps({"command": command, "units": units, "failed": failed},
                                                indent=1, sort_keys=True) + "\n")
    print(f"batch {command}: {len(outcomes) - failed} of {len(outcomes)} units done; manifest {out_dir / MANIFEST}")
    return 1 if failed else 0


def _generate(args: argparse.Namespace, sched: batch_runner.Scheduler) -> int:
    named = _names(args.roots)
    if named is None:
        return 2
    out_dir = Path(args.out_dir)
    units = [Unit(n, generate_unit, (r, args.per_relation, args.seed, _cache(args, n))) for n, r in named.items()]
    lines: dict[str, str] = {}

    def finish(name: str, records: list[dict[str, Any]]) -> list[str]:
        out = out_dir / f"{name}.jsonl"
        write_atomic(out, dumps(records))
        lines[name] = summary_line(records[0], out)
        return [str(out)]

    outcomes = batch_runner.run_units(units, sched, finish, worker_memory=args.worker_memory)
    for name in sorted(lines):
        print(lines[name])
    return _write_manifest(out_dir, "generate", outcomes, {n: {"root": r} for n, r in named.items()})


def _evaluate(args: argparse.Namespace, sched: batch_runner.Scheduler) -> int:
    named = _names(args.roots)
    if named is None:
        return 2
    try:
        ks = tuple(sorted({int(x) for x in str(args.k).split(",") if x.strip()}))
    except ValueError:
        print(f"batch evaluate: --k {args.k!r}: expected comma-separated integers", file=sys.stderr)
        return 2
    names = [s.strip() for s in args.strategies.split(",") if s.strip()] if args.strategies else None
    unknown = [n for n in names or [] if n not in ALL_NAMES]
    if unknown:
        print(f"batch evaluate: unknown strategies: {', '.join(unknown)}; expected {', '.join(ALL_NAMES)}",
              file=sys.stderr)
        return 2
    bench_dir, out_dir = Path(args.bench_dir), Path(args.out_dir)
    benches = {n: str(bench_dir / f"{n}.jsonl") for n in named}
    units = [Unit(n, evaluate_unit, (benches[n], r, names, ks, args.budget, _cache(args, n), args.bootstrap))
             for n, r in named.items()]

    def finish(name: str, report: dict[str, Any]) -> list[str]:
        md, js = out_dir / f"{name}.md", out_dir / f"{name}.json"
        write_reports(report, str(md), str(js), None)
        return [str(md), str(js)]

    outcomes = batch_runner.run_units(units, sched, finish, worker_memory=args.worker_memory)
    for o in outcomes:
        if o.ok:
            print(f"wrote {', '.join(o.value)}")
    return _write_manifest(out_dir, "evaluate", outcomes,
                           {n: {"root": r, "benchmark": benches[n]} for n, r in named.items()})


def _swebench(args: argparse.Namespace, sched: batch_runner.Scheduler) -> int:
    sel = swebench.selection(args, prog="batch swebench")
    if sel is None:
        return 2
    t0 = time.perf_counter()
    by_repo: dict[str, list[dict[str, Any]]] = {}
    for inst in sel.instances:
        by_repo.setdefault(inst["repo"], []).append(inst)
    units = [Unit(repo, swebench_unit, (insts, str(sel.work), sel.budget, sel.features, sel.ablate, sel.dense,
                                          sel.git_history, sel.explain),
                  len(insts))
             for repo, insts in by_repo.items()]
    outcomes = batch_runner.run_units(units, sched, log=sys.stderr, worker_memory=args.worker_memory,
                                      describe=lambda v: f"{len(v[0])} instances, {len(v[1])} skipped")
    results: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for o in outcomes:  # repository order, as the single-process run visits them
        if o.ok:
            results += o.value[0]
            errors += o.value[1]
        else:
            errors += [{"instance_id": i["instance_id"], "repo": i["repo"], "error": f"batch unit failed: {o.error}"}
                       for i in by_repo[o.key]]
    errors.sort(key=lambda e: str(e["instance_id"]))
    return swebench.finish(args, sel, results, errors, time.perf_counter() - t0)
