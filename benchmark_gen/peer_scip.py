"""`python -m benchmark_gen speed --peer scip-python`: Sourcegraph's scip-python indexes the same tree in the same run.

The indexer comes from the npm project next to this file (`npm ci --prefix benchmark_gen/scip`); nothing is
downloaded at run time. It is run as a user would, one `node` process from launch to exit:
`scip-python index --cwd ROOT --output TMP/index.scip --project-name NAME --project-version 0 --environment TMP/env.json`.
scip-python chdirs into --cwd and resolves a relative --output against it, so --output is always an absolute path in a
temporary directory; `--environment` names a JSON list of installed packages, and `[]` keeps it from calling pip.
The tree's files (path, size, mtime) are compared before and after, so a peer that writes into it is reported.

Keys added to the row (all prefixed `peer_scip_python_`):
- cold_s: wall seconds from launch to exit; rss_mb: the peak RSS of the largest single process of its tree (ru_maxrss
  of the waited child, which Linux takes over the child and its waited-for descendants); cpu_s: user + system seconds
  (useful on a shared machine, where wall time depends on the load); index_mb: the size of the index it wrote.
- status: the exit status (0 is success), "timeout" (killed after --peer-timeout seconds), or "not installed".
- index_written: scip-python reported its whole index written (its last status line); a run that exits non-zero
  after that went to its end and still compares.
- time_ratio / rss_ratio: theirs over ours (cold_queryable_s; the larger of peak_rss_mb and peak_rss_workers_mb, the
  same largest-single-process measure); null unless status is 0 or the index was written.
- note: why a run failed or the tree changed (absent when all went well).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

SCIP_DIR = Path(__file__).resolve().parent / "scip"
SCIP_ENTRY = SCIP_DIR / "node_modules" / "@sourcegraph" / "scip-python" / "index.js"
PREFIX = "peer_scip_python_"
KEYS = tuple(PREFIX + k for k in ("cold_s", "rss_mb", "status", "time_ratio", "rss_ratio"))
PEERS = ("scip-python",)
# scip-python's last status line (sic), printed once the whole index is on disk
WROTE_INDEX = b"Sucessfully wrote SCIP index"


def _tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file under root, by relative path; symlinks are not followed."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return out


def _changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    return [f"+{p}" for p in added] + [f"-{p}" for p in removed] + [f"~{p}" for p in changed]


def _mb(maxrss: int) -> float:
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is KiB on Linux, bytes on macOS
    return round(maxrss * scale / (1024 * 1024), 1)


def _run_timed(cmd: list[str], cwd: Path, log: IO[bytes], timeout_s: float) -> tuple[float, int | str, resource.struct_rusage]:
    """(wall seconds, exit status or "timeout", rusage of the waited child) of one process, killed with its
    session after timeout_s."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # the whole session: node and anything it spawned

    timer = threading.Timer(timeout_s, kill)
    timer.start()
    try:
        _, wstatus, usage = os.wait4(proc.pid, 0)  # not proc.wait(): wait4 also gives the child's rusage
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(wstatus)
    return wall, "timeout" if timed_out.is_set() else proc.returncode, usage


def _failure_summary(log: bytes, limit: int = 300) -> str:
    """Why a run failed, from its log: the fatal error when there is one, else the first lines that name an
    error, else the last lines; shortened to `limit` characters."""
    lines = [ln.strip() for ln in log.decode(errors="replace").splitlines() if ln.strip()]
    fatal = next((i for i, ln in enumerate(lines) if "fatal error" in ln.lower()), None)
    errors = [ln for ln in lines if "error" in ln.lower()]
    if fatal is not None:  # scip-python's own message, then the exception (skip the "please file an issue" line)
        picked = [ln for ln in lines[fatal:fatal + 4] if "create an issue" not in ln.lower()]
    else:
        picked = errors[:2] if errors else lines[-3:]
    return " / ".join(picked)[:limit] or "no output"


def run_scip_python(root: Path, timeout_s: float) -> dict[str, Any]:
    """Index `root` with scip-python into a temporary directory; the peer's keys (without the ratios)."""
    node = shutil.which("node")
    if not SCIP_ENTRY.exists() or node is None:
        missing = f"{SCIP_ENTRY} (run `npm ci --prefix benchmark_gen/scip`)" if node else "`node` on PATH"
        return {PREFIX + "cold_s": None, PREFIX + "rss_mb": None, PREFIX + "status": "not installed",
                PREFIX + "note": f"scip-python not run: missing {missing}"}
    work = Path(tempfile.mkdtemp(prefix="ctx-lsp-scip-"))
    try:
        env_file = work / "environment.json"
        env_file.write_text("[]\n")
        out_file = work / "index.scip"
        log_file = work / "scip-python.log"
        cmd = [node, str(SCIP_ENTRY), "index", "--cwd", str(root), "--output", str(out_file),
               "--project-name", root.name or "root", "--project-version", "0", "--environment", str(env_file)]
        before = _tree_state(root)
        with open(log_file, "wb") as log:
            # our own cwd is the scratch directory too: nothing relative can land in the tree or the repository
            wall, status, usage = _run_timed(cmd, work, log, timeout_s)
        log_text = log_file.read_bytes()
        rec: dict[str, Any] = {PREFIX + "cold_s": round(wall, 3), PREFIX + "rss_mb": _mb(usage.ru_maxrss),
                               PREFIX + "status": status,
                               PREFIX + "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
                               PREFIX + "index_mb": round(out_file.stat().st_size / (1024 * 1024), 3)
                               if out_file.exists() else None,
                               PREFIX + "index_written": status != "timeout" and WROTE_INDEX in log_text}
        notes: list[str] = []
        if status == "timeout":
            notes.append(f"killed after {timeout_s:g} s (--peer-timeout)")
        elif status != 0:
            notes.append(f"scip-python exited with status {status}"
                         f"{' after writing its index' if rec[PREFIX + 'index_written'] else ''}: "
                         f"{_failure_summary(log_text)}")
        changed = _changes(before, _tree_state(root))
        if changed:
            notes.append(f"scip-python changed the tree: {', '.join(changed[:5])}"
                         + (f" and {len(changed) - 5} more" if len(changed) > 5 else ""))
        if notes:
            rec[PREFIX + "note"] = "; ".join(notes)
        return rec
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure_peers(root: Path, row: dict[str, Any], peers: list[str], timeout_s: float) -> dict[str, Any]:
    """The peers' keys for one root, with the ratios to our own cold build in `row`; never raises."""
    out: dict[str, Any] = {}
    if "scip-python" not in peers:
        return out
    try:
        out.update(run_scip_python(root, timeout_s))
    except Exception as exc:  # a failing peer never loses the rest of the row
        out.update({PREFIX + "cold_s": None, PREFIX + "rss_mb": None, PREFIX + "status": "error",
                    PREFIX + "note": f"{type(exc).__name__}: {exc}"})
    ours_s = row.get("cold_queryable_s")
    ours_mb = max(row.get("peak_rss_mb") or 0.0, row.get("peak_rss_workers_mb") or 0.0)
    # a run that went to its end compares; one that stopped early (timeout, crash before the index) does not
    ok = out.get(PREFIX + "status") == 0 or out.get(PREFIX + "index_written") is True
    theirs_s, theirs_mb = out.get(PREFIX + "cold_s"), out.get(PREFIX + "rss_mb")
    ratios = {PREFIX + "time_ratio": round(theirs_s / ours_s, 2) if ok and theirs_s and ours_s else None,
              PREFIX + "rss_ratio": round(theirs_mb / ours_mb, 2) if ok and theirs_mb and ours_mb else None}
    # the contract's keys first (cold_s, rss_mb, status, the ratios), then the context (cpu_s, index_mb, note)
    return {k: {**out, **ratios}.get(k) for k in KEYS} | {k: v for k, v in out.items() if k not in KEYS}


if __name__ == "__main__":  # by hand: python -m benchmark_gen.peer_scip ROOT
    print(json.dumps(run_scip_python(Path(sys.argv[1]).resolve(), 900.0), indent=2))
