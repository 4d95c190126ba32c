"""`python -m benchmark_gen batch ...` on a LocalCluster of 2 worker processes, against the single-process
commands on the same inputs: three fixture repositories (generate, evaluate) and a small swebench data
set of three repositories built from the swebench lane's mirror.

Checked: generate's files are byte-identical; evaluate's and swebench's reports are identical outside
their timing fields (which differ between two single-process runs too) and their markdown is the one
rendered from their JSON; a unit made to fail (a corrupt benchmark file, a data line without its
mirror) is reported with its error while the others complete; a failing unit is retried once (on Dask
and in process); without dask the same outputs come from an in-process run; Ctrl-C leaves no report,
no temporary file and no worker process behind.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from benchmark_gen.batch_runner import Scheduler, Unit, parse_scheduler, run_units

pytest.importorskip("distributed", reason="the batch extra (ctx-lsp[batch]) is not installed")
psutil = pytest.importorskip("psutil")  # a dependency of distributed

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOTS = [FIXTURES / n for n in ("bench_ws", "retrieval_ws", "mcp_ws")]
TIMING_KEYS = {"timings", "ms", "latency_p50_ms", "latency_p95_ms"}
CLUSTER = ["--scheduler", "local:2", "--worker-memory", "1GiB"]
EVALUATE = ["--bootstrap", "50", "--strategies", "engine_full,bm25_files,import_bfs"]


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchmark_gen", *args], capture_output=True, text=True,
                          timeout=240, env=env or _env(), cwd=REPO)


def _env(*front: Path) -> dict[str, str]:
    path = [str(p) for p in front] + [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path))


def untimed(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: untimed(v) for k, v in x.items() if k not in TIMING_KEYS}
    if isinstance(x, list):
        return [untimed(v) for v in x]
    return x


def md_untimed(md: str) -> str:
    """An evaluate report without the latency columns (the last two of the tables that have them)."""
    out, timed = [], False
    for ln in md.splitlines():
        timed = ln.startswith("|") and (timed or "p50 ms" in ln)
        out.append("|".join(ln.split("|")[:-3]) if timed and not ln.startswith("|-") else ln)
    return "\n".join(out)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Benchmarks and evaluation reports of the single-process commands."""
    out = tmp_path_factory.mktemp("single")
    for root in ROOTS:
        r = bench("generate", str(root), "--out", str(out / f"{root.name}.jsonl"), "--per-relation", "4",
                  "--cache-dir", str(out / "cache" / root.name))
        assert r.returncode == 0, r.stderr
        r = bench("evaluate", str(out / f"{root.name}.jsonl"), "--root", str(root), *EVALUATE,
                  "--out", str(out / f"{root.name}.md"), "--json", str(out / f"{root.name}.json"),
                  "--cache-dir", str(out / "cache" / root.name))
        assert r.returncode == 0, r.stderr
    return out


def test_generate_and_evaluate_on_a_local_cluster(single: Path, tmp_path: Path) -> None:
    gen = tmp_path / "gen"
    r = bench("batch", "generate", *map(str, ROOTS), "--out-dir", str(gen), "--per-relation", "4",
              "--cache-dir", str(tmp_path / "cache"), *CLUSTER)
    assert r.returncode == 0, r.stderr
    for root in ROOTS:
        assert (gen / f"{root.name}.jsonl").read_bytes() == (single / f"{root.name}.jsonl").read_bytes()
    progress = [ln for ln in r.stderr.splitlines() if ln.startswith("[")]
    assert len(progress) == 3 and sorted(ln.split()[1] for ln in progress) == sorted(p.name for p in ROOTS)
    assert "local Dask cluster of 2 worker" in r.stderr
    manifest = json.loads((gen / "batch.json").read_text())
    assert [u["name"] for u in manifest["units"]] == sorted(p.name for p in ROOTS)
    assert manifest["failed"] == 0 and all(u["status"] == "ok" for u in manifest["units"])

    # evaluate, one benchmark corrupt: that unit fails with its error, the other two complete
    (gen / "mcp_ws.jsonl").write_text("not a benchmark\n")
    ev = tmp_path / "ev"
    r = bench("batch", "evaluate", *map(str, ROOTS), "--bench-dir", str(gen), "--out-dir", str(ev),
              *EVALUATE, "--cache-dir", str(tmp_path / "cache"), *CLUSTER)
    assert r.returncode == 1, r.stderr
    assert "failed mcp_ws: JSONDecodeError" in r.stdout
    assert any(ln.startswith("[") and "mcp_ws FAILED JSONDecodeError" in ln for ln in r.stderr.splitlines())
    manifest = json.loads((ev / "batch.json").read_text())
    status = {u["name"]: (u["status"], u.get("error", "")) for u in manifest["units"]}
    assert status["mcp_ws"][0] == "failed" and status["mcp_ws"][1].startswith("JSONDecodeError")
    assert status["bench_ws"] == status["retrieval_ws"] == ("ok", "") and manifest["failed"] == 1
    assert not (ev / "mcp_ws.json").exists() and not (ev / "mcp_ws.md").exists()
    for name in ("bench_ws", "retrieval_ws"):
        got = json.loads((ev / f"{name}.json").read_text())
        want = json.loads((single / f"{name}.json").read_text())
        assert untimed(got) == untimed(want)
        assert md_untimed((ev / f"{name}.md").read_text()) == md_untimed((single / f"{name}.md").read_text())
    assert not list(ev.glob(".*.tmp"))


def test_without_dask_the_units_run_in_process(single: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "no_dask"
    blocker.mkdir()
    (blocker / "distributed.py").write_text("raise ImportError('dask distributed is blocked by the test')\n")
    gen = tmp_path / "gen"
    r = bench("batch", "generate", *map(str, ROOTS), "--out-dir", str(gen), "--per-relation", "4",
              "--cache-dir", str(tmp_path / "cache"), *CLUSTER, env=_env(blocker))
    assert r.returncode == 0, r.stderr
    assert "Dask distributed is not installed" in r.stderr and "this process, one unit after another" in r.stderr
    for root in ROOTS:
        assert (gen / f"{root.name}.jsonl").read_bytes() == (single / f"{root.name}.jsonl").read_bytes()
    r = bench("batch", "generate", str(ROOTS[0]), "--out-dir", str(gen), "--scheduler", "tcp://127.0.0.1:1",
              env=_env(blocker))
    assert r.returncode == 2 and "needs Dask distributed" in r.stderr


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path: Path) -> None:
    env = dict(_env(), DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="1s")
    r = bench("batch", "generate", str(ROOTS[0]), "--out-dir", str(tmp_path), "--scheduler", "tcp://127.0.0.1:9",
              env=env)
    assert r.returncode == 2 and "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not list(tmp_path.iterdir())


# -- swebench ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def swe(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Three repositories (one mirror under three names, so each gets its own tree and cache), their
    instances listed out of order; `broken.jsonl` adds a repository whose lines lack the mirror."""
    from test_swebench_lane import (
        CHECKS,
        CHECKS_FIXED,
        DISCOUNTS,
        DISCOUNTS_FIXED,
        FILES_V1,
        FILES_V2,
        FILES_V3,
        ISSUE_CODE,
        ISSUE_TRACEBACK,
        _commit,
        _git,
        _patch,
    )

    root = tmp_path_factory.mktemp("swe")
    src = root / "src"
    src.mkdir()
    _git(src, "init", "-q", "-b", "main")
    c1 = _commit(src, dict(FILES_V1), "2020-01-01T10:00:00+00:00")
    _commit(src, dict(FILES_V2), "2020-02-01T10:00:00+00:00")  # a middle commit the instances skip
    c3 = _commit(src, dict(FILES_V3), "2020-03-01T10:00:00+00:00")
    mirror = root / "shop.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(mirror)], check=True)
    issues = [(c3, ISSUE_CODE, _patch("shop/checks.py", CHECKS, CHECKS_FIXED)),
              (c1, ISSUE_TRACEBACK, _patch("shop/pricing/discounts.py", DISCOUNTS, DISCOUNTS_FIXED))]
    lines = []
    for repo in ("zeta/shop", "acme/shop", "mid/shop"):
        for n, (commit, text, patch) in enumerate(issues):
            lines.append({"instance_id": f"{repo.replace('/', '__')}-{300 - n}", "repo": repo, "mirror": str(mirror),
                          "base_commit": commit, "problem_statement": text, "patch": patch})
    lines.append({"instance_id": "acme__shop-999", "repo": "acme/shop", "mirror": str(mirror),
                  "base_commit": "0123456789abcdef0123456789abcdef01234567", "problem_statement": "x", "patch": ""})
    data = root / "data.jsonl"
    data.write_text("".join(json.dumps(x) + "\n" for x in lines))
    broken = root / "broken.jsonl"
    no_mirror = [{k: v for k, v in x.items() if k != "mirror"} | {"repo": "bad/shop", "instance_id": f"bad__shop-{i}"}
                 for i, x in enumerate(lines[:2])]
    broken.write_text(data.read_text() + "".join(json.dumps(x) + "\n" for x in no_mirror))
    return {"root": root, "data": data, "broken": broken}


def _swe_run(swe: dict[str, Any], name: str, data: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    root = swe["root"]
    r = bench(*extra, str(data), "--work", str(root / f"work-{name}"), "--json", str(root / f"{name}.json"),
              "--markdown", str(root / f"{name}.md"))
    assert r.returncode == 0, r.stderr
    rep = json.loads((root / f"{name}.json").read_text())
    assert (root / f"{name}.md").read_text() == r.stdout
    return r, rep


def swe_md_untimed(md: str) -> str:
    """A swebench report without its timing columns and table (as in test_swebench_lane)."""
    head, rest = md.split("## Overall", 1)
    table = [ln.rsplit("|", 5)[0] for ln in head.splitlines() if ln.startswith("|")]
    return "\n".join(table) + rest.split("## Timings")[0] + rest.split("## Skipped")[-1]


def test_swebench_on_a_local_cluster(swe: dict[str, Any]) -> None:
    r1, single = _swe_run(swe, "single", swe["data"], "swebench", "--explain")
    r, batch = _swe_run(swe, "batch", swe["data"], "batch", "swebench", "--explain", *CLUSTER)
    assert untimed(batch) == untimed(single)
    # --explain reaches the workers: each instance keeps its ranking's inputs, as in one process
    assert all(i.get("explain") for i in batch["instances"]), [sorted(i) for i in batch["instances"]]
    assert swe_md_untimed(r.stdout) == swe_md_untimed(r1.stdout) and "acme__shop-999" in r.stdout
    assert [i["instance_id"] for i in batch["instances"]] == [  # repository order, each in base-commit date order
        "acme__shop-299", "acme__shop-300", "mid__shop-299", "mid__shop-300", "zeta__shop-299", "zeta__shop-300"]
    assert [e["instance_id"] for e in batch["errors"]] == ["acme__shop-999"]
    progress = [ln for ln in r.stderr.splitlines() if ln.startswith("[")]
    assert sorted(ln.split()[1] for ln in progress) == ["acme/shop", "mid/shop", "zeta/shop"]  # one line per repository

    # a repository whose unit fails (its lines lack the mirror): its instances are reported, the rest complete
    r, part = _swe_run(swe, "broken", swe["broken"], "batch", "swebench", "--explain", *CLUSTER)
    assert any("bad/shop FAILED KeyError" in ln for ln in r.stderr.splitlines())
    assert untimed(part["instances"]) == untimed(single["instances"])
    assert untimed(part["aggregates"]) == untimed(single["aggregates"])
    bad = [e for e in part["errors"] if e["repo"] == "bad/shop"]
    assert [e["instance_id"] for e in bad] == ["bad__shop-0", "bad__shop-1"]
    assert all(e["error"].startswith("batch unit failed: KeyError") for e in bad)
    assert [e for e in part["errors"] if e["repo"] != "bad/shop"] == single["errors"]


def test_ctrl_c_cancels_and_writes_nothing(swe: dict[str, Any]) -> None:
    root = swe["root"]
    out, md = root / "cancelled.json", root / "cancelled.md"
    cmd = [sys.executable, "-m", "benchmark_gen", "batch", "swebench", str(swe["data"]), "--work",
           str(root / "work-cancelled"), "--json", str(out), "--markdown", str(md), *CLUSTER]
    # SIGINT as a terminal delivers it: an earlier test in this process may leave it ignored, and an
    # ignored signal stays ignored across exec (Python then installs no KeyboardInterrupt handler)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=REPO,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stderr is not None
    children: list[Any] = []
    # interrupted once the units are submitted: they are running or queued then. (Waiting for the first
    # finished unit raced: the three small units can all finish before the signal lands.)
    for line in proc.stderr:
        children = children or psutil.Process(proc.pid).children(recursive=True)
        if line.startswith("batch: 3 units submitted"):
            break
    children = psutil.Process(proc.pid).children(recursive=True) or children
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert not out.exists() and not md.exists() and not list(root.glob(".cancelled*"))
    assert children  # the worker processes were running; none outlives the batch
    deadline = time.time() + 20
    while time.time() < deadline and any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children):
        time.sleep(0.2)
    assert not [c.pid for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]


# -- the runner --------------------------------------------------------------------------------------
def flaky(marker: str) -> str:
    """Fails on its first call, succeeds on the second (the marker file remembers across processes)."""
    p = Path(marker)
    if not p.exists():
        p.write_text("failed once")
        raise RuntimeError("first attempt fails")
    return "second attempt"


def always_fails(_: str) -> str:
    raise RuntimeError("this unit always fails")


def index_summary(root: str, cache: str) -> tuple[int, int, int]:
    """(files, nodes, edges) of a fresh index of `root` built with a 2-process pool where allowed."""
    from ctx_lsp.index.workspace import WorkspaceIndex

    index = WorkspaceIndex(Path(root), cache_dir=Path(cache), workers=2)
    index.load_or_build()
    return len(index.facts), len(list(index.graph.nodes())), sum(len(es) for es in index.graph.file_edges.values())


def test_a_large_workspace_indexes_inside_a_dask_worker(tmp_path: Path) -> None:
    """Dask workers are daemonic and may not start processes: the index's pools must step aside."""
    from ctx_lsp.index.workspace import PARALLEL_THRESHOLD

    root = tmp_path / "big"
    for i in range(PARALLEL_THRESHOLD):
        (root / f"pkg{i % 7}").mkdir(parents=True, exist_ok=True)
        (root / f"pkg{i % 7}" / f"m{i}.py").write_text(
            f"from pkg{(i + 1) % 7}.m{(i + 1) % (PARALLEL_THRESHOLD)} import f{(i + 1) % (PARALLEL_THRESHOLD)}\n\n\n"
            f"def f{i}(x):\n    return f{(i + 1) % (PARALLEL_THRESHOLD)}(x) + {i}\n")
    here = index_summary(str(root), str(tmp_path / "c1"))
    [o] = run_units([Unit("big", index_summary, (str(root), str(tmp_path / "c2")))], parse_scheduler("local:1"),
                    log=io.StringIO(), worker_memory="1GiB")
    assert o.error is None and o.value == here and here[0] == PARALLEL_THRESHOLD


@pytest.mark.parametrize("spec", ["serial", "local:2"])
def test_a_failing_unit_is_retried_once(spec: str, tmp_path: Path) -> None:
    units = [Unit("b-flaky", flaky, (str(tmp_path / "marker"),)), Unit("a-fails", always_fails, ("x",)),
             Unit("c-ok", str.upper, ("fine",))]
    log = io.StringIO()
    sched = parse_scheduler(spec)
    outcomes = run_units(units, sched, log=log, worker_memory="1GiB")
    assert [(o.key, o.value, o.error) for o in outcomes] == [
        ("a-fails", None, "RuntimeError: this unit always fails"),
        ("b-flaky", "second attempt", None),
        ("c-ok", "FINE", None),
    ]
    assert len([ln for ln in log.getvalue().splitlines() if ln.startswith("[")]) == 3


def test_scheduler_specs() -> None:
    assert parse_scheduler("local:3") == Scheduler("local", 3)
    assert parse_scheduler("tcp://10.0.0.5:8786") == Scheduler("remote", address="tcp://10.0.0.5:8786")
    assert parse_scheduler(None).kind == "local" and parse_scheduler("serial").kind == "serial"
    for bad in ("local:0", "local:x", "cluster", "tcp://"):
        with pytest.raises(ValueError):
            parse_scheduler(bad)
