"""Which files belong to the workspace: Python sources, minus ignored, vendored and oversized ones.

Honours .gitignore files (root and nested), skips virtual environments, node_modules, build output and
site-packages, never follows a symlinked directory (no loops) nor a file link leaving the workspace.
A file whose name is not UTF-8 is skipped with a reason: no editor, URI or JSON answer could name it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pathspec

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", "env", ".env", ".tox", ".nox",
    "build", "dist", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", ".hypothesis",
    ".idea", ".vscode",
})
DEFAULT_MAX_BYTES = 1_000_000


@dataclass
class Discovery:
    files: dict[str, Path] = field(default_factory=dict)  # workspace-relative POSIX path -> absolute path
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (size, mtime_ns) when listed


@dataclass(frozen=True)
class FileFilter:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES

    def spec(self, patterns: tuple[str, ...]) -> pathspec.PathSpec | None:
        return pathspec.PathSpec.from_lines("gitwildmatch", patterns) if patterns else None


def _gitignore(dirpath: str) -> list[str]:
    try:
        with open(os.path.join(dirpath, ".gitignore"), encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return []


def is_binary(head: bytes) -> bool:
    return b"\x00" in head


def discover(root: Path, flt: FileFilter | None = None) -> Discovery:
    """Walk `root` and list the Python files to index, deterministically ordered.

    Works on strings from os.scandir (no Path per entry: this runs on every warm start) and keeps each
    found file's (size, mtime_ns) from the directory entry, so a warm start needs no second stat.
    """
    flt = flt or FileFilter()
    root = root.resolve()
    root_s = str(root)
    cut = len(root_s) + 1
    include = flt.spec(flt.include)
    exclude = flt.spec(flt.exclude)
    out = Discovery()
    # stack of (dir, [(base_rel, spec)]) so nested .gitignore files apply below their directory
    stack: list[tuple[str, list[tuple[str, pathspec.PathSpec]]]] = []
    root_ignore = _gitignore(root_s)
    specs0 = [("", pathspec.PathSpec.from_lines("gitwildmatch", root_ignore))] if root_ignore else []
    stack.append((root_s, specs0))
    found: list[tuple[str, str, tuple[int, int] | None]] = []
    while stack:
        dirpath, specs = stack.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.skipped.append((dirpath[cut:], f"unreadable directory: {exc.strerror}"))
            continue
        for entry in entries:
            rel = entry.path[cut:]
            if os.sep != "/":
                rel = rel.replace(os.sep, "/")
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name in SKIP_DIRS or entry.name.endswith(".egg-info"):
                    continue
                if os.path.exists(os.path.join(entry.path, "pyvenv.cfg")):
                    continue  # a virtual environment under another name
                if _ignored(specs, rel + "/"):
                    continue
                if exclude is not None and exclude.match_file(rel + "/"):
                    continue
                sub_ignore = _gitignore(entry.path)
                sub_specs = specs + ([(rel + "/", pathspec.PathSpec.from_lines("gitwildmatch", sub_ignore))]
                                     if sub_ignore else [])
                stack.append((entry.path, sub_specs))
                continue
            if not entry.name.endswith(".py"):
                if is_link and _is_dir_link(entry) and not _ignored(specs, rel + "/"):
                    out.skipped.append((rel, "symlinked directory not followed"))
                continue
            if is_link:
                try:
                    target = Path(entry.path).resolve(strict=True)
                except (OSError, RuntimeError):
                    out.skipped.append((rel, "broken or looping symlink"))
                    continue
                if target.is_dir():
                    if not _ignored(specs, rel + "/"):
                        out.skipped.append((rel, "symlinked directory not followed"))
                    continue
                if not _inside(root, target):
                    out.skipped.append((rel, "symlink leaves the workspace"))
                    continue
            if _ignored(specs, rel):
                continue
            if include is not None and not include.match_file(rel):
                continue
            if exclude is not None and exclude.match_file(rel):
                continue
            if not is_utf8(rel):
                out.skipped.append((shown(rel), "skipped: file name is not valid UTF-8"))
                continue
            try:
                st = entry.stat()
                stat: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
            except OSError:
                stat = None
            found.append((rel, entry.path, stat))
    for rel, path, stat in sorted(found):
        out.files[rel] = Path(path)
        if stat is not None:
            out.stats[rel] = stat
    return out


def is_utf8(rel: str) -> bool:
    """Whether a path listed by the OS (undecodable bytes come back as surrogate escapes) is valid UTF-8."""
    if rel.isascii():
        return True
    try:
        rel.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def shown(rel: str) -> str:
    """A printable form of a path that may hold surrogate escapes: `caf\\xe9.py` for the bytes `caf\xe9.py`."""
    if is_utf8(rel):
        return rel
    try:
        return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file system listing produces
        return rel.encode("utf-8", "backslashreplace").decode("utf-8")


def _is_dir_link(entry: os.DirEntry) -> bool:  # type: ignore[type-arg]
    try:
        return entry.is_dir()  # follows the link; a loop raises
    except OSError:
        return False


def _ignored(specs: list[tuple[str, pathspec.PathSpec]], rel: str) -> bool:
    for base, spec in specs:
        if base and not rel.startswith(base):
            continue
        if spec.match_file(rel[len(base):]):
            return True
    return False


def _inside(root: Path, path: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def read_source(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[bytes | None, str | None]:
    """Bytes of a candidate source file, or None with the reason it is skipped."""
    try:
        st = path.stat()
        if st.st_size > max_bytes:
            return None, f"skipped: {st.st_size} bytes is over the {max_bytes}-byte limit"
        data = path.read_bytes()
    except FileNotFoundError:
        return None, "skipped: deleted while indexing"
    except OSError as exc:
        return None, f"skipped: unreadable ({exc.strerror})"
    if is_binary(data[:8192]):
        return None, "skipped: binary file"
    return data, None
