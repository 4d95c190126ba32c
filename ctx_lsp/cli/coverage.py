"""`ctx-lsp coverage run|import`: record per-test coverage with coverage.py and import it as COVERS edges.

`run` writes a coverage configuration into `<cache>/coverage/coveragerc` (data file
`<cache>/coverage/.coverage`, `dynamic_context = test_function`, `parallel = True`, `source = ROOT`,
and `patch = subprocess` on coverage >= 7.10) and runs COMMAND in ROOT:

- `python ... ARGS` (any python executable) becomes `python -m coverage run --rcfile RC ARGS`;
- `pytest ARGS` / `py.test ARGS` becomes `<this python> -m coverage run --rcfile RC -m pytest ARGS`;
- anything else (make, tox, a shell script) runs unchanged with COVERAGE_PROCESS_START=RC, which
  coverage's startup hook honours in every Python process that has coverage installed.

The parallel data files are combined in the cache directory and imported; nothing is written into
ROOT by ctx-lsp (the command itself may write, e.g. pytest's cache: pass `-p no:cacheprovider`).
The exit status is COMMAND's (failing tests still import their coverage), 2 when no data came out.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ctx_lsp.index.workspace import WorkspaceIndex
from ctx_lsp.sources.coverage_data import (
    CoverageImportError,
    ImportReport,
    attach_coverage,
    default_data_file,
)
from ctx_lsp.workspace_args import CliError, file_filter, workspace_cache_dir, workspace_root


def write_rcfile(cov_dir: Path, root: Path) -> Path:
    """The coverage configuration `run` uses; returns its path."""
    import coverage

    cov_dir.mkdir(parents=True, exist_ok=True)
    lines = [
        "[run]",
        f"data_file = {cov_dir / '.coverage'}",
        "parallel = True",
        "dynamic_context = test_function",
        f"source = {root}",
    ]
    if coverage.version_info >= (7, 10):
        lines.append("patch = subprocess")  # measure the command's Python subprocesses too
    rc = cov_dir / "coveragerc"
    rc.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rc


def wrap_command(cmd: list[str], rc: Path) -> tuple[list[str], dict[str, str]]:
    """The command line and extra environment that run `cmd` under coverage (see module doc)."""
    exe = os.path.basename(cmd[0]).lower()
    if exe.startswith("python") or os.path.abspath(cmd[0]) == os.path.abspath(sys.executable):
        return [cmd[0], "-m", "coverage", "run", f"--rcfile={rc}", *cmd[1:]], {}
    if exe in ("pytest", "py.test"):
        return [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", *cmd[1:]], {}
    return list(cmd), {"COVERAGE_PROCESS_START": str(rc)}


def _open_index(args: argparse.Namespace, root: Path, cache: Path) -> WorkspaceIndex:
    index = WorkspaceIndex(root, cache_dir=cache, flt=file_filter(args))
    index.load_or_build()
    return index


def _import(index: WorkspaceIndex, data_file: Path, stale_after: float | None) -> ImportReport:
    tc = attach_coverage(index)
    try:
        report = tc.import_file(data_file, stale_after=stale_after)
    except CoverageImportError as exc:
        raise CliError(str(exc)) from None
    index.save()
    return report


def _print(report: ImportReport, extra: str = "") -> None:
    print(f"imported {report.data_file}: {report.tests} tests ({report.contexts} contexts, "
          f"{len(report.unmapped)} unmapped), {report.edges} COVERS edges over {report.files} files, "
          f"{report.stale} stale, in {report.seconds:.2f} s{extra}")
    if report.unmapped:
        print(f"  unmapped contexts (first 5): {', '.join(report.unmapped[:5])}", file=sys.stderr)
    if not report.files:
        print("  no measured file is an indexed file under ROOT (was the data recorded elsewhere, or did "
              "the tests import an installed copy of the package?)", file=sys.stderr)


def cmd_run(args: argparse.Namespace) -> int:
    cmd = list(args.cmd or [])
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise CliError("no COMMAND given: ctx-lsp coverage run [--root ROOT] -- COMMAND...")
    root = workspace_root(args)
    cache = workspace_cache_dir(args, root)
    cov_dir = cache / "coverage"
    if cov_dir.exists():
        for old in cov_dir.glob(".coverage*"):
            old.unlink()
    rc = write_rcfile(cov_dir, root)
    argv, env_extra = wrap_command(cmd, rc)
    if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
        raise CliError(f"command not found: {argv[0]}")
    started = time.time()
    t0 = time.perf_counter()
    try:
        status = subprocess.run(argv, cwd=root, env={**os.environ, **env_extra}).returncode
    except OSError as exc:
        raise CliError(f"cannot run {argv[0]}: {exc}") from None
    run_seconds = time.perf_counter() - t0
    import coverage

    parts = [str(p) for p in cov_dir.glob(".coverage.*")]
    data_file = cov_dir / ".coverage"
    if parts:
        cov = coverage.Coverage(data_file=str(data_file), config_file=str(rc))
        cov.combine(data_paths=parts, keep=False)
        cov.save()
    if not data_file.is_file():
        raise CliError(f"the command (exit status {status}) produced no coverage data; "
                       "does its Python have coverage installed?")
    index = _open_index(args, root, cache)
    report = _import(index, data_file, stale_after=started)
    _print(report, f" (command {run_seconds:.1f} s, exit status {status})")
    return status


def cmd_import(args: argparse.Namespace) -> int:
    root = workspace_root(args)
    cache = workspace_cache_dir(args, root)
    if args.file:
        data_file = Path(args.file)
        if not data_file.is_absolute():
            data_file = Path.cwd() / data_file
    else:
        found = default_data_file(root, cache)
        if found is None:
            raise CliError(f"no coverage data file: give FILE, or create {root / '.coverage'}")
        data_file = found
    index = _open_index(args, root, cache)
    _print(_import(index, data_file, stale_after=None))
    return 0


def run_coverage_command(args: argparse.Namespace) -> int:
    if args.coverage_command == "run":
        return cmd_run(args)
    if args.coverage_command == "import":
        return cmd_import(args)
    raise CliError(f"unknown coverage command: {args.coverage_command}")
