"""The arguments every command-line adapter shares (`ctx-lsp index|neighbors|context|mcp|daemon|coverage`):
`--root`, `--cache-dir`, `--include`/`--exclude`, `-v`; their checks; and the daemon identity they imply.

Used by the CLI (`ctx_lsp/cli/`), the MCP adapter (`ctx_lsp/mcp/`) and nothing in the core. It lives
beside them, not inside `cli/`: the MCP adapter needs it, and the CLI dispatches to the MCP adapter.
Light on purpose (no index code): it is on the CLI's fast path to a running daemon.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ctx_lsp.index.discovery import FileFilter, InvalidPattern, compile_patterns


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default=None, help="workspace root (default: the nearest directory from the current "
                   "one upwards holding .git, pyproject.toml, setup.py or setup.cfg, else the current directory)")
    p.add_argument("--cache-dir", default=None, help="cache directory (default: per-workspace user cache; env CTX_LSP_CACHE_DIR)")
    p.add_argument("--include", action="append", default=[], help="glob of files to index (repeatable)")
    p.add_argument("--exclude", action="append", default=[], help="glob of files to skip (repeatable)")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug information to stderr")


ROOT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


def project_root(start: Path) -> Path:
    """The nearest directory from `start` upwards that holds a project marker (ROOT_MARKERS), as git
    and editors find a project, so a command run in `src/pkg/` reads the whole project; `start` when
    none does. It never climbs to the user's home directory or above (a dotfiles repository in the
    home directory is not the project) nor to the file system's root."""
    start = start.resolve()
    home = _home()
    for d in (start, *start.parents):
        if d == home or d == Path(d.anchor):
            break
        if any((d / m).exists() for m in ROOT_MARKERS):
            return d
    return start


def _home() -> Path | None:
    # expanduser, not Path.home(): with no $HOME and no password entry it leaves "~" rather than raising
    known = os.path.expanduser("~")
    return Path(known).resolve() if known != "~" else None


def _home_or_above(d: Path) -> bool:
    """The user's home directory, a directory above it, or the file system's root."""
    home = _home()
    return d == Path(d.anchor) or (home is not None and (d == home or d in home.parents))


def workspace_root(args: argparse.Namespace) -> Path:
    """The resolved root: `ROOT` or `--root` as given, else the project the current directory is in
    (project_root); CliError when it is no directory."""
    pos = getattr(args, "root_pos", None)
    if pos is not None and args.root is not None and Path(pos).resolve() != Path(args.root).resolve():
        raise CliError(f"two roots given ({pos} and --root {args.root}): give one")
    raw = pos or args.root
    if raw is None:
        here = project_root(Path.cwd())
        if _home_or_above(here):
            # no project marker from here up: indexing a home directory (every cache and download in
            # it) takes minutes and a gigabyte; a root must be asked for
            raise CliError(f"{here} is not inside a project (no {', '.join(ROOT_MARKERS)} here or above it); "
                           "run it in a project or give --root")
        return here
    root = Path(raw)
    if not root.exists():
        raise CliError(f"root does not exist: {raw}")
    if not root.is_dir():
        raise CliError(f"root is not a directory: {raw}")
    return root.resolve()


def file_filter(args: argparse.Namespace) -> FileFilter:
    """`--include`/`--exclude` as a FileFilter; CliError naming the option for an invalid glob."""
    for option, globs in (("--include", args.include), ("--exclude", args.exclude)):
        try:
            compile_patterns(globs, strict=True)
        except InvalidPattern as exc:
            raise CliError(f"{option}: {exc}") from None
    return FileFilter(include=tuple(args.include), exclude=tuple(args.exclude))


def workspace_cache_dir(args: argparse.Namespace, root: Path) -> Path:
    from ctx_lsp.index.cachedir import default_cache_dir

    path = Path(args.cache_dir).resolve() if args.cache_dir else default_cache_dir(root)
    if path.exists() and not path.is_dir():
        raise CliError(f"the cache directory is not a directory: {path}")
    return path


def usable_cache_dir(args: argparse.Namespace, root: Path) -> Path:
    """workspace_cache_dir, made if missing; CliError when the file system refuses it (a path under
    a file, /proc, a read-only mount) rather than a failed write after the work is done."""
    path = workspace_cache_dir(args, root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(f"cannot use the cache directory {path}: {exc.strerror or exc}") from None
    return path


def daemon_identity(args: argparse.Namespace) -> dict[str, Any]:
    """What a daemon must match to answer for these arguments (see `daemon.client.identity`)."""
    from ctx_lsp.daemon.client import identity

    root = workspace_root(args)
    flt = file_filter(args)  # an invalid glob is exit 2 here, before any daemon is asked or started
    return identity(root, workspace_cache_dir(args, root), flt.include, flt.exclude)
