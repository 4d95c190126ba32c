"""`python -m benchmark_gen speed ROOT... [--json]`: how fast the index is, measured honestly.

Per root, with a fresh cache directory:
- cold_queryable_s: a fresh subprocess builds the index from nothing; seconds from its launch (interpreter
  start and imports included, as a user experiences them) until it has answered a graph query. As in
  the CLI, the index is opened by `Engine.open` (the test and history producers attached) and the cache
  is then written by a forked child (WorkspaceIndex.background_save), not before.
- refined_s: seconds from that same launch until jedi refinement of the whole index completed (null with
  --no-refine, or when --refine-budget stopped it first; `refine_complete` says which).
- peak_rss_mb: ru_maxrss of the cold-build process when it became queryable (extraction workers, used
  above a few hundred files, are reported separately as peak_rss_workers_mb).
- warm_start_s: a second fresh subprocess loads the cache; seconds from launch until queryable.
- query_p50_ms / query_p95_ms: deterministic queries through Engine.context in that warm process
  ("who calls <symbol>" and docstring words); null when ctx_lsp.retrieval is not importable.
- first_query_ms: the first of them alone, which also starts the lexical indexes (from the cache's
  snapshot, or built from every file's facts when the cache has none).
- update_p50_ms / update_p95_ms: in that warm process, deterministic single-file edits (append a new
  function to a random file via index.update_file, as an editor buffer), timed until update_file returns
  (it is synchronous: the graph is consistent then, which is checked after the clock stops), each reverted.
  An appended function is a new name nobody reads yet, so it re-binds the edited file alone.
- oneshot_p50_s / oneshot_rss_mb: `ctx-lsp context QUERY` as a hook runs it, a fresh process per query on
  the warm cache, in-process (CTX_LSP_DAEMON=off): median wall seconds and peak RSS (--oneshot-runs, 7).
- oneshot_daemon_p50_s / oneshot_daemon_rss_mb / daemon_rss_mb: the same queries through a daemon started
  once on that cache (`daemon_start_s`: how long `ctx-lsp daemon start` took): the caller's wall and RSS,
  and the daemon's own peak RSS.
- switch_* (with --switch OTHER, another version of the same project): a copy of ROOT indexed cold
  (switch_cold_s), then turned into OTHER as a checkout would (switch_files .py files added, changed or
  removed); switch_update_s: a fresh process opening that cache until queryable; switch_back_s: the
  same after turning the tree back into ROOT (the facts of the versions it held are reused, not
  extracted again); switch_daemon_s: a running daemon's next `ctx-lsp context` call (refresh
  included), made at once after the layout (the daemon runs with --no-watch, so the call does the whole
  update); switch_watch_settle_s: a daemon watching the tree (the default), from the end of the layout
  until its background refresh is done; switch_watch_call_s: the `ctx-lsp context` call made then (what
  a call that comes later than the settle time pays); switch_server_settle_s: the language server over
  stdio (its own watcher, as for Neovim; jedi refinement off) indexes a copy, then from the end of the
  layout until its last ctx/indexUpdated (an editor user's wait for answers that reflect the checkout);
  switch_server_cold_s: that server's own cold index of the copy, from `initialized` until it reports
  the index done and the folder watched (beside switch_cold_s, the CLI's);
  *_ratio: each over switch_cold_s.
  switch_update_phases_s: where that fresh process spent the update (WorkspaceIndex.phases); switch_update_counts: its files extracted (`partial`: of those, built
  from the facts of their kept top-level statements, index/statement_reuse.py), reused and re-bound;
  switch_floor_ratio: the update without its extraction phase, over switch_cold_s (what reusing facts
  below the file could reach at best, loading and re-binding as they are); switch_cold_cpu_s /
  switch_update_cpu_s / switch_cpu_ratio: the CPU seconds (workers included, interpreter start
  included, the forked cache writer not) of the cold process and of that fresh process to queryable,
  and their ratio: how much of a cold index's work the checkout does, whatever the cores make of it;
  switch_daemon_cpu_s / switch_daemon_cpu_ratio: the daemon's own CPU seconds for its call (its
  refresh, the pool workers it reaped; /proc, Linux), over its own cold CPU; switch_daemon_back_s /
  switch_daemon_back_ratio: that daemon's next call after the tree was turned back into ROOT (facts
  and bindings of the tree before the checkout taken back: index/workspace.py _TreeBefore). --switch-runs N repeats the
  whole measure and reports medians (switch_runs: N).
- cold_phases_s / warm_phases_s: where those two processes spent their time (WorkspaceIndex.phases:
  load, discover, decode, install, extract, bind, graph, flow, save, and the coverage/history producers).
- peer_scip_python_* (with --peer scip-python): Sourcegraph's scip-python indexes the same tree after ours, its
  output in a temporary directory: wall seconds, peak RSS, exit status, and the ratios theirs / ours
  (benchmark_gen/peer_scip.py says exactly what each key measures).
- update_rename_p50_ms / update_rename_p95_ms (beyond the contract): the same, but each edit renames a
  random top-level def, an interface change: every file that looked the old name up is re-bound too
  (`update_rename_rebound_p95`: how many files that was).
- update_body_p50_ms / update_body_p95_ms (beyond the contract): the same, but each edit adds a statement
  inside a random def's body (before its last line), as typing in a function does; the edited file's facts
  are then compared with a whole extraction of its text (`update_inconsistent` counts every check that failed).

Timings depend on the machine and its load; nothing here asserts their size.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The --json contract, in order. didchange_p50_ms / didchange_p95_ms (editor didChange -> graph
# consistent, through the real stdio server) belong after update_p95_ms; the server's benchmark adds them
# via EXTRA_MEASURES below without touching the rest.
KEYS = ("root", "files", "lines", "cold_queryable_s", "refined_s", "warm_start_s", "update_p50_ms", "update_p95_ms",
        "peak_rss_mb", "query_p50_ms", "query_p95_ms", "oneshot_p50_s", "oneshot_rss_mb", "oneshot_daemon_p50_s",
        "oneshot_daemon_rss_mb", "daemon_rss_mb")
# name -> callable(root: Path, cache_dir: Path, args) -> dict of extra keys (e.g. didchange_p50_ms).
EXTRA_MEASURES: dict[str, Any] = {}

_PREFIX = "SPEED "


def _log(msg: str) -> None:
    print(f"speed: {msg}", file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return ordered[k]


def _rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    # ru_maxrss is in KiB on Linux (bytes on macOS)
    scale = 1 if sys.platform == "darwin" else 1024
    return round(resource.getrusage(who).ru_maxrss * scale / (1024 * 1024), 1)


def _emit_cpu() -> None:
    """After "queryable" (off the clock): the CPU seconds this process and its pool workers spent to
    get there, interpreter start included. The workers a pool leaves to be reaped later are reaped
    first so that their time counts; the forked cache writer is not waited for, so its time does not."""
    from ctx_lsp.index.forkpool import reap_exited

    reap_exited(10.0)
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    _emit("cpu", cpu_s=me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime)


def _emit(kind: str, **data: Any) -> None:
    print(_PREFIX + json.dumps({"event": kind, **data}), flush=True)


# -- children ------------------------------------------------------------------------------------
def _probe_query(index: Any) -> None:
    """Answer one real graph question so "queryable" means it."""
    g = index.graph
    for n in g.nodes():
        if n.qualname:
            g.in_edges(n.id)
            g.symbols_named(n.name)
            break


def child_cold(root: Path, cache: Path, refine: bool, budget: float | None) -> None:
    from ctx_lsp.engine import Engine

    engine = Engine(root, cache_dir=cache)  # opened as the CLI opens it: producers attached, their sections written
    index = engine.index
    index.background_save = True  # as the CLI does: queryable before the cache is written
    engine.open()
    _probe_query(index)
    lines = sum(f.lines for f in index.facts.values())
    _emit("queryable", files=len(index.facts), lines=lines, rss_mb=_rss_mb(),
          workers_rss_mb=_rss_mb(resource.RUSAGE_CHILDREN), phases=index.phases)
    _emit_cpu()
    if not refine:
        return
    from ctx_lsp.index.refine import refine_index

    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        if time.monotonic() - last[0] > 10 or done >= total:
            last[0] = time.monotonic()
            _log(f"  {stage} {done}/{total}")

    status = refine_index(index, progress=progress, budget_s=budget)
    complete = status["done"] == status["total"]
    # examples of every verdict (contradicted, jedi_external, jedi_unresolved), a few per kind
    examples: dict[str, list[Any]] = {}
    files = (index.extra_state.get("jedi") or {}).get("files", {})
    for path in sorted(files):
        for ex in files[path].get("examples", []):
            bucket = examples.setdefault(ex.get("verdict", "?"), [])
            if len(bucket) < 40:
                bucket.append(ex)
    status = {k: v for k, v in status.items() if k != "contradiction_examples"}
    status["examples"] = examples
    _emit("refined", complete=complete, rss_mb=_rss_mb(), status=status)


def _queries(engine: Any, n: int, rng: random.Random) -> list[str]:
    nodes = sorted((x for x in engine.graph.nodes() if x.qualname and x.kind in ("function", "method", "class")),
                   key=lambda x: x.id)
    if not nodes:
        return []
    out: list[str] = []
    for i in range(n):
        node = rng.choice(nodes)
        if i % 2 == 0 or not node.doc:
            out.append(f"who calls {node.qualname}")
        else:
            out.append(" ".join(node.doc.split()[:8]))
    return out


def _source(root: Path, rel: str) -> str | None:
    """A file's text as an editor holds it, or None when it cannot be read as UTF-8."""
    try:
        return (root / rel).read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None


def _pick(rng: random.Random, defs: list[tuple[str, Any]], root: Path) -> tuple[str, Any, str, list[str]] | None:
    """A random (path, def) with its file's text and lines, or None when the file cannot be read."""
    rel, d = rng.choice(defs)
    original = _source(root, rel)
    return None if original is None else (rel, d, original, original.split("\n"))


def child_warm(root: Path, cache: Path, edits: int, queries: int, seed: int) -> None:
    from ctx_lsp.engine import Engine

    engine = Engine(root, cache_dir=cache)
    engine.index.background_save = True  # as the CLI opens: answers before the cache is rewritten
    report = engine.open()
    _probe_query(engine.index)
    _emit("queryable", warm=report.warm, rss_mb=_rss_mb(), phases=engine.index.phases,
          counts={"extracted": report.extracted, "partial": report.partial, "reused": report.reused,
                  "rebound": report.rebound})
    _emit_cpu()

    rng = random.Random(seed)
    q_ms: list[float] | None = []
    try:
        import ctx_lsp.retrieval  # noqa: F401
    except ImportError:
        q_ms = None
    asked = _queries(engine, queries, rng)
    if q_ms is not None:
        for q in asked:
            t = time.perf_counter()
            engine.context(q, 4000, record=False)
            q_ms.append((time.perf_counter() - t) * 1000)
    _emit("queries", ms=q_ms, queries=asked)

    index = engine.index
    paths = sorted(p for p in index.facts if index.facts[p].errors == [])
    u_ms: list[float] = []
    inconsistent = 0
    for i in range(edits if paths else 0):
        rel = rng.choice(paths)
        original = _source(root, rel)
        if original is None:
            continue
        name = f"_speed_probe_{seed}_{i}"
        edited = original.rstrip("\n") + f"\n\n\ndef {name}(value):\n    return value\n"
        t = time.perf_counter()
        with engine.lock:
            index.update_file(rel, edited, overlay=True)
        u_ms.append((time.perf_counter() - t) * 1000)
        if engine.graph.node(f"{rel}::{name}") is None:
            inconsistent += 1
        with engine.lock:
            index.update_file(rel, original, overlay=False)  # revert: the disk content again
        if engine.graph.node(f"{rel}::{name}") is not None:
            inconsistent += 1
    _emit("updates", ms=u_ms, inconsistent=inconsistent)

    r_ms: list[float] = []
    rebound: list[float] = []
    tops = [(p, d) for p in paths for d in index.facts[p].defs if "." not in d.qual and d.kind != "variable"]
    for _ in range(edits if tops else 0):
        picked = _pick(rng, tops, root)
        if picked is None:
            continue
        rel, d, original, lines = picked
        header = lines[d.line - 1]
        at = header.find(d.qual, d.col)
        if at < 0:
            continue
        new = f"{d.qual}_renamed"
        lines[d.line - 1] = header[:at] + new + header[at + len(d.qual):]
        t = time.perf_counter()
        with engine.lock:
            n = index.update_file(rel, "\n".join(lines), overlay=True)
        r_ms.append((time.perf_counter() - t) * 1000)
        rebound.append(float(n))
        if engine.graph.node(f"{rel}::{new}") is None:
            inconsistent += 1
        with engine.lock:
            index.update_file(rel, original, overlay=False)
    _emit("renames", ms=r_ms, rebound=rebound, inconsistent=inconsistent)

    import ast

    from ctx_lsp.index.extract import extract

    b_ms: list[float] = []
    defs = [(p, d) for p in paths for d in index.facts[p].defs if d.kind != "variable" and d.end > d.line]
    tries = 0
    while len(b_ms) < (edits if defs else 0) and tries < 5 * edits:
        tries += 1
        picked = _pick(rng, defs, root)
        if picked is None:
            continue
        rel, d, original, lines = picked
        last = lines[d.end - 1]
        lines.insert(d.end - 1, last[: len(last) - len(last.lstrip())] + f"_speed_probe_{seed} = len(str(value))")
        edited = "\n".join(lines)
        try:
            ast.parse(edited)  # the def's last line continued a statement: another def
        except SyntaxError:
            continue
        t = time.perf_counter()
        with engine.lock:
            index.update_file(rel, edited, overlay=True)
        b_ms.append((time.perf_counter() - t) * 1000)
        if index.facts[rel] != extract(rel, edited, index.facts[rel].digest):
            inconsistent += 1  # spliced facts must equal a whole extraction
        with engine.lock:
            index.update_file(rel, original, overlay=False)
    _emit("bodies", ms=b_ms, inconsistent=inconsistent)


# -- parent ----------------------------------------------------------------------------------------
def _run_cli(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one `python -m ctx_lsp ...` process; its output is discarded."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "ctx_lsp", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"ctx-lsp {args[0]} failed ({proc.returncode}): {err.strip()[-300:]}")
    scale = 1 if sys.platform == "darwin" else 1024
    return wall, round(usage.ru_maxrss * scale / (1024 * 1024), 1)


def measure_oneshot(root: Path, cache: Path, queries: list[str], runs: int) -> dict[str, Any]:
    """`ctx-lsp context` as a hook or script runs it: a fresh process per query on a warm cache, in-process
    (CTX_LSP_DAEMON=off) and through a daemon started once; the medians side by side in one run."""
    if not queries or runs <= 0:
        return {}
    base = {k: v for k, v in os.environ.items() if k not in ("CTX_LSP_CACHE_DIR", "CTX_LSP_DAEMON")}
    common = ["--root", str(root), "--cache-dir", str(cache)]
    picked = [queries[i % len(queries)] for i in range(runs)]
    out: dict[str, Any] = {}
    walls, rss = zip(*(_run_cli(["context", *common, q], {**base, "CTX_LSP_DAEMON": "off"}) for q in picked), strict=True)
    out["oneshot_p50_s"] = round(statistics.median(walls), 3)
    out["oneshot_rss_mb"] = max(rss)
    env = {**base, "CTX_LSP_DAEMON": "use"}
    out["daemon_start_s"] = round(_run_cli(["daemon", "start", *common, "--idle-timeout", "600"], env)[0], 3)
    try:
        walls, rss = zip(*(_run_cli(["context", *common, q], env) for q in picked), strict=True)
        out["oneshot_daemon_p50_s"] = round(statistics.median(walls), 3)
        out["oneshot_daemon_p95_s"] = round(percentile(list(walls), 95) or 0.0, 3)
        out["oneshot_daemon_rss_mb"] = max(rss)  # the caller's process; the daemon's own is daemon_rss_mb
        status = subprocess.run([sys.executable, "-m", "ctx_lsp", "daemon", "status", "--json", *common],
                                capture_output=True, text=True, env=env, timeout=60)
        info = json.loads(status.stdout)
        if info.get("requests") != runs:
            _log(f"  warning: the daemon served {info.get('requests')} of {runs} one-shot calls")
        out["daemon_rss_mb"] = info.get("rss_mb")
    finally:
        subprocess.run([sys.executable, "-m", "ctx_lsp", "daemon", "stop", *common], capture_output=True, env=env,
                       timeout=60)
    return out


def _spawn(args: list[str]) -> tuple[float, subprocess.Popen[str]]:
    env = dict(os.environ)
    env.pop("CTX_LSP_CACHE_DIR", None)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "benchmark_gen.speed", *args], stdout=subprocess.PIPE,
                            stderr=None, text=True, env=env)
    return t0, proc


def _events(t0: float, proc: subprocess.Popen[str]) -> list[tuple[float, dict[str, Any]]]:
    """Child events with the seconds since launch at which each arrived."""
    out: list[tuple[float, dict[str, Any]]] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(_PREFIX):
            out.append((time.perf_counter() - t0, json.loads(line[len(_PREFIX):])))
    proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed with status {proc.returncode}")
    return out


def _ms(values: list[float] | None, q: float) -> float | None:
    p = percentile(values or [], q)
    return None if p is None else round(p, 2)


def _sync_tree(tree: Path, other: Path) -> int:
    """Make `tree` hold exactly `other`'s files, the way a checkout does: changed and new files are
    written (with a new mtime), removed ones deleted, unchanged ones left alone. Returns how many .py
    files were added, changed or removed.

    As git does, what to change is worked out first and then written in one burst: comparing the trees
    reads every file of both, and writes spread over that time would reach a watching daemon or server
    as several batches, which no `git checkout` makes."""
    wanted: set[str] = set()
    writes: list[tuple[Path, bytes]] = []
    for dirpath, dirnames, filenames in os.walk(other):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            src = Path(dirpath) / name
            rel = src.relative_to(other).as_posix()
            wanted.add(rel)
            dst = tree / rel
            data = src.read_bytes()
            if not (dst.is_file() and dst.read_bytes() == data):
                writes.append((dst, data))
    removes: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            path = Path(dirpath) / name
            if path.relative_to(tree).as_posix() not in wanted:
                removes.append(path)
    for dst, data in writes:
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(data)
    for path in removes:
        path.unlink()
    return sum(p.name.endswith(".py") for p, _ in writes) + sum(p.name.endswith(".py") for p in removes)


def _queryable(events: list[tuple[float, dict[str, Any]]]) -> tuple[float, dict[str, Any]]:
    """Seconds from launch to the child's "queryable" event, and that event."""
    for t, e in events:
        if e.get("event") == "queryable":
            return t, e
    raise RuntimeError("benchmark subprocess never became queryable")


def _cpu(events: list[tuple[float, dict[str, Any]]]) -> float | None:
    """The CPU seconds a child reported after becoming queryable (see _emit_cpu)."""
    return next((e["cpu_s"] for _, e in events if e.get("event") == "cpu"), None)


def _process_cpu(cache: Path) -> float | None:
    """CPU seconds so far of the daemon serving `cache` and of the children it reaped (its pool
    workers), from /proc (Linux); None where that cannot be read."""
    try:
        info = next(cache.rglob("daemon.json"))
        pid = int(json.loads(info.read_text())["pid"])
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    except (StopIteration, OSError, ValueError, KeyError):
        return None


def measure_switch(root: Path, other: Path) -> dict[str, Any]:
    """A checkout that changes many files (a branch switch, a pull): a copy of ROOT indexed cold, then
    turned into OTHER (another version of the same project); the update timed two ways, each beside that
    copy's own cold index: a fresh process opening the cache (`switch_update_s`), a running daemon
    answering its next request (`switch_daemon_s`, refresh included), and a daemon watching the tree
    (`switch_watch_settle_s` until its background refresh is done, then `switch_watch_call_s`)."""
    tmp = Path(tempfile.mkdtemp(prefix="ctx-lsp-switch-"))
    try:
        out: dict[str, Any] = {}
        for how in ("process", "daemon", "watch", "server"):
            tree, cache = tmp / how / "tree", tmp / how / "cache"
            shutil.copytree(root, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
            if how == "server":  # the language server indexes the copy itself, then watches the checkout
                from functools import partial

                from benchmark_gen.lsp_latency import checkout_settle
                from ctx_lsp.index.discovery import discover

                got = checkout_settle(tree, cache, partial(_sync_tree, tree, other))
                expected = len(discover(tree).files)
                if got["files"] != expected:
                    raise RuntimeError(f"the server holds {got['files']} files after the checkout, not {expected}")
                out["switch_server_settle_s"] = round(got["settle_s"], 3)
                out["switch_server_settle_ratio"] = round(got["settle_s"] / out["switch_cold_s"], 3)
                out["switch_server_cold_s"] = round(got["indexed_s"], 3)
                continue
            cold_events = _events(*_spawn(["cold", str(tree), str(cache)]))
            t_cold, _ = _queryable(cold_events)
            out.setdefault("switch_cold_s", round(t_cold, 3))
            cpu_cold = _cpu(cold_events)
            if how == "process":
                out["switch_files"] = _sync_tree(tree, other)
                args = ["warm", str(tree), str(cache), "--edits", "0", "--queries", "0"]
                upd_events = _events(*_spawn(args))
                t_upd, event = _queryable(upd_events)
                phases = dict(event.get("phases") or {})
                out["switch_update_s"] = round(t_upd, 3)
                out["switch_ratio"] = round(t_upd / t_cold, 3)
                # the same two processes' CPU seconds (workers included): how much of a cold index's
                # work the update does, whatever the cores make of it
                cpu_upd = _cpu(upd_events)
                if cpu_cold and cpu_upd is not None:
                    out["switch_cold_cpu_s"] = round(cpu_cold, 3)
                    out["switch_update_cpu_s"] = round(cpu_upd, 3)
                    out["switch_cpu_ratio"] = round(cpu_upd / cpu_cold, 3)
                out["switch_update_phases_s"] = {k: round(v, 3) for k, v in phases.items()}
                # files extracted (`partial` of them from their kept statements) and re-bound
                out["switch_update_counts"] = dict(event.get("counts") or {})
                # the update with its extraction taken out: the floor that reusing facts below the
                # file could reach, with loading and re-binding as they are
                out["switch_floor_ratio"] = round(max(0.0, t_upd - phases.get("extract", 0.0)) / t_cold, 3)
                _sync_tree(tree, root)  # and back, as after reviewing a branch
                t_back, _ = _queryable(_events(*_spawn(args)))
                out["switch_back_s"] = round(t_back, 3)
                out["switch_back_ratio"] = round(t_back / t_cold, 3)
                continue
            env = {k: v for k, v in os.environ.items() if k not in ("CTX_LSP_CACHE_DIR", "CTX_LSP_DAEMON")}
            common = ["--root", str(tree), "--cache-dir", str(cache)]
            _run_cli(["daemon", "start", *common, "--idle-timeout", "600", *(["--no-watch"] if how == "daemon" else [])],
                     env)
            try:
                if how == "daemon":
                    _sync_tree(tree, other)
                    before = _process_cpu(cache)
                    t_d, _ = _run_cli(["context", *common, "who calls main"], env)
                    after = _process_cpu(cache)
                    out["switch_daemon_s"] = round(t_d, 3)
                    out["switch_daemon_ratio"] = round(t_d / t_cold, 3)
                    if before is not None and after is not None and cpu_cold:
                        # the daemon's CPU for that call (its refresh and the workers it reaped by then)
                        out["switch_daemon_cpu_s"] = round(after - before, 3)
                        out["switch_daemon_cpu_ratio"] = round((after - before) / cpu_cold, 3)
                    _sync_tree(tree, root)  # and back, as after reviewing a branch: the same daemon's next call
                    t_b, _ = _run_cli(["context", *common, "who calls main"], env)
                    out["switch_daemon_back_s"] = round(t_b, 3)
                    out["switch_daemon_back_ratio"] = round(t_b / t_cold, 3)
                    continue
                settle = _watched_checkout(tree, other, cache)
                out["switch_watch_settle_s"] = round(settle, 3)
                out["switch_watch_settle_ratio"] = round(settle / t_cold, 3)
                t_w, _ = _run_cli(["context", *common, "who calls main"], env)
                out["switch_watch_call_s"] = round(t_w, 3)
                out["switch_watch_call_ratio"] = round(t_w / t_cold, 3)
            finally:
                _run_cli(["daemon", "stop", *common], env)
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _watched_checkout(tree: Path, other: Path, cache: Path, quiet_s: float = 1.0, limit_s: float = 300.0) -> float:
    """Lay `other` out in `tree` under a daemon watching it; seconds from the end of the layout until the
    daemon's background refreshes are done (the last one ended, none pending, then `quiet_s` of calm)."""
    from ctx_lsp.daemon.client import hello

    def watch() -> dict[str, Any]:
        state = hello(cache.resolve()).get("watch")
        if not state or not state.get("watching"):
            raise RuntimeError(f"the daemon is not watching {tree}: {state}")
        return state

    deadline = time.monotonic() + 60.0
    while not (hello(cache.resolve()).get("watch") or {}).get("watching") and time.monotonic() < deadline:
        time.sleep(0.05)  # the watches are set a moment after the daemon is ready
    before = watch()["refreshes"]
    _sync_tree(tree, other)
    t_end, deadline = time.time(), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(0.05)  # a socket round trip per poll: no process competing with the refresh
        state = watch()
        last = state.get("last") or {}
        if state["refreshes"] > before and not state["pending"] and time.time() - last.get("at", 0.0) >= quiet_s:
            return max(0.0, last["at"] - t_end)
    raise RuntimeError(f"the daemon's background refresh did not settle within {limit_s:.0f} s")


def median_switch(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Repeated checkout measures as one: the median of every number (each ratio is taken within its
    own run, against that run's cold index), phase by phase; counts and file totals from the first
    run (the same in every run); `switch_runs`: how many."""
    out: dict[str, Any] = {"switch_runs": len(rows)}
    for key, first in rows[0].items():
        if isinstance(first, float):
            out[key] = round(statistics.median(r[key] for r in rows), 3)
        elif key == "switch_update_phases_s":
            out[key] = {k: round(statistics.median(r[key].get(k, 0.0) for r in rows), 3) for k in first}
        else:
            out[key] = first
    return out


def measure_root(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    cache = Path(tempfile.mkdtemp(prefix="ctx-lsp-speed-"))
    try:
        _log(f"{root}: cold build{'' if args.no_refine else ' + jedi refinement'} (fresh subprocess, empty cache)")
        cold_args = ["cold", str(root), str(cache)]
        if not args.no_refine:
            cold_args.append("--refine")
            if args.refine_budget is not None:
                cold_args += ["--refine-budget", str(args.refine_budget)]
        events = dict((e["event"], (t, e)) for t, e in _events(*_spawn(cold_args)))
        t_q, q = events["queryable"]
        rec: dict[str, Any] = {"root": str(root), "files": q["files"], "lines": q["lines"],
                               "cold_queryable_s": round(t_q, 3), "refined_s": None}
        refine_status = None
        if "refined" in events:
            t_r, r = events["refined"]
            refine_status = r["status"]
            if r["complete"]:
                rec["refined_s"] = round(t_r, 3)
            _log(f"  refinement {'complete' if r['complete'] else 'stopped by budget'} at {t_r:.1f} s")
        _log(f"{root}: warm start, {args.queries} queries, {args.edits} edits (fresh subprocess)")
        warm_args = ["warm", str(root), str(cache), "--edits", str(args.edits), "--queries", str(args.queries),
                     "--seed", str(args.seed)]
        wev = {e["event"]: (t, e) for t, e in _events(*_spawn(warm_args))}
        t_w, w = wev["queryable"]
        if not w.get("warm"):
            _log("  warning: the warm subprocess did not load the cache")
        rec["warm_start_s"] = round(t_w, 3)
        upd = wev["updates"][1]
        rec["update_p50_ms"] = _ms(upd["ms"], 50)
        rec["update_p95_ms"] = _ms(upd["ms"], 95)
        rec["peak_rss_mb"] = q["rss_mb"]
        qms = wev["queries"][1]["ms"]
        rec["query_p50_ms"] = _ms(qms, 50)
        rec["query_p95_ms"] = _ms(qms, 95)
        rec["first_query_ms"] = round(qms[0], 1) if qms else None
        oneshot_runs = getattr(args, "oneshot_runs", 7)
        if oneshot_runs:
            _log(f"{root}: one-shot `ctx-lsp context` x{oneshot_runs}, in-process and through a daemon")
            rec.update(measure_oneshot(root, cache, wev["queries"][1].get("queries") or [], oneshot_runs))
        if getattr(args, "switch", None):
            other = Path(args.switch).resolve()
            _log(f"{root}: a checkout to {other} (copy indexed cold, then switched), fresh process and daemon")
            runs = max(1, getattr(args, "switch_runs", 1))
            rec.update(median_switch([measure_switch(root, other) for _ in range(runs)]))
        for name, fn in EXTRA_MEASURES.items():
            try:
                rec.update(fn(root, cache, args))
            except Exception as exc:  # an optional measure never loses the rest of the row
                _log(f"  {name} failed: {exc}")
        # context beyond the contract: useful when reading the numbers
        rec["peak_rss_workers_mb"] = q["workers_rss_mb"]
        rec["warm_rss_mb"] = w["rss_mb"]
        rec["cold_phases_s"] = {k: round(v, 3) for k, v in (q.get("phases") or {}).items()}
        rec["warm_phases_s"] = {k: round(v, 3) for k, v in (w.get("phases") or {}).items()}
        ren = wev["renames"][1]
        rec["update_rename_p50_ms"] = _ms(ren["ms"], 50)
        rec["update_rename_p95_ms"] = _ms(ren["ms"], 95)
        rec["update_rename_rebound_p95"] = _ms(ren["rebound"], 95)
        body = wev["bodies"][1]
        rec["update_body_p50_ms"] = _ms(body["ms"], 50)
        rec["update_body_p95_ms"] = _ms(body["ms"], 95)
        rec["update_inconsistent"] = body["inconsistent"]
        rec["refine_complete"] = None if refine_status is None else refine_status["done"] == refine_status["total"]
        if refine_status is not None:
            rec["refinement"] = refine_status
            rec["refine_rss_mb"] = events["refined"][1]["rss_mb"]
        if getattr(args, "peer", None):
            from benchmark_gen.peer_scip import measure_peers

            _log(f"{root}: peers {', '.join(args.peer)} on the same tree (output to a temporary directory)")
            rec.update(measure_peers(root, rec, args.peer, getattr(args, "peer_timeout", 900.0)))
        return rec
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _fmt(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):  # before int: a bool is an int
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:,.3f}" if v < 10 else f"{v:,.1f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def markdown(rows: list[dict[str, Any]]) -> str:
    keys = list(KEYS)
    for r in rows:  # optional measures (the server's didchange_*, --peer's peer_*) get a column when present
        keys += [k for k in r if k.startswith(("didchange_", "peer_")) and not k.endswith("_note") and k not in keys]
    head = "| " + " | ".join(keys) + " |"
    sep = "|" + "|".join("---" for _ in keys) + "|"
    body = ["| " + " | ".join(_fmt(Path(r[k]).name if k == "root" else r.get(k)) for k in keys) + " |" for r in rows]
    notes = [f"- {Path(r['root']).name}, {k}: {v}" for r in rows for k, v in r.items() if k.endswith("_note") and v]
    return "\n".join([head, sep, *body, *([""] + notes if notes else [])])


def run_speed(args: argparse.Namespace) -> int:
    for attr, default in (("seed", 0), ("refine_budget", None)):
        if not hasattr(args, attr):
            setattr(args, attr, default)
    rows: list[dict[str, Any]] = []
    for raw in args.roots:
        root = Path(raw).resolve()
        if not root.is_dir():
            print(f"speed: error: not a directory: {raw}", file=sys.stderr)
            return 2
        rows.append(measure_root(root, args))
    if args.json:
        print(json.dumps(rows, indent=2))  # one object per root, always a list
    else:
        print(markdown(rows))
    return 0


def _child_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark_gen.speed")
    p.add_argument("mode", choices=("cold", "warm"))
    p.add_argument("root")
    p.add_argument("cache")
    p.add_argument("--refine", action="store_true")
    p.add_argument("--refine-budget", type=float, default=None)
    p.add_argument("--edits", type=int, default=50)
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.mode == "cold":
        child_cold(Path(a.root), Path(a.cache), a.refine, a.refine_budget)
    else:
        child_warm(Path(a.root), Path(a.cache), a.edits, a.queries, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
