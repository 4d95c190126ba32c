"""Which files belong to the workspace: Python sources, minus ignored, vendored and oversized ones.

Honours .gitignore files (root and nested), skips virtual environments, node_modules, build output and
site-packages, never follows a symlinked directory (no loops) nor a file link leaving the workspace.
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


@dataclass(frozen=True)
class FileFilter:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES

    def spec(self, patterns: tuple[str, ...]) -> pathspec.PathSpec | None:
        return pathspec.PathSpec.from_lines("gitwildmatch", patterns) if patterns else None


def _gitignore(dirpath: Path) -> list[str]:
    f = dirpath / ".gitignore"
    try:
        return f.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []


def is_binary(head: bytes) -> bool:
    return b"\x00" in head


def discover(root: Path, flt: FileFilter | None = None) -> Discovery:
    """Walk `root` and list the Python files to index, deterministically ordered."""
    flt = flt or FileFilter()
    root = root.resolve()
    include = flt.spec(flt.include)
    exclude = flt.spec(flt.exclude)
    out = Discovery()
    # stack of (dir, [(base_rel, spec)]) so nested .gitignore files apply below their directory
    stack: list[tuple[Path, list[tuple[str, pathspec.PathSpec]]]] = []
    root_ignore = _gitignore(root)
    specs0 = [("", pathspec.PathSpec.from_lines("gitwildmatch", root_ignore))] if root_ignore else []
    stack.append((root, specs0))
    found: list[tuple[str, Path]] = []
    while stack:
        dirpath, specs = stack.pop()
        try:
            entries = sorted(os.scandir(dirpath), key=lambda e: e.name)
        except OSError as exc:
            out.skipped.append((_rel(root, dirpath), f"unreadable directory: {exc.strerror}"))
            continue
        for entry in entries:
            rel = _rel(root, Path(entry.path))
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name in SKIP_DIRS or entry.name.endswith(".egg-info"):
                    continue
                if (Path(entry.path) / "pyvenv.cfg").exists():
                    continue  # a virtual environment under another name
                if _ignored(specs, rel + "/"):
                    continue
                if exclude is not None and exclude.match_file(rel + "/"):
                    continue
                sub_ignore = _gitignore(Path(entry.path))
                sub_specs = specs + ([(rel + "/", pathspec.PathSpec.from_lines("gitwildmatch", sub_ignore))]
                                     if sub_ignore else [])
                stack.append((Path(entry.path), sub_specs))
                continue
            if is_link:
                try:
                    target = Path(entry.path).resolve(strict=True)
                except (OSError, RuntimeError):
                    if entry.name.endswith(".py"):
                        out.skipped.append((rel, "broken or looping symlink"))
                    continue
                if target.is_dir():
                    if not _ignored(specs, rel + "/"):
                        out.skipped.append((rel, "symlinked directory not followed"))
                    continue
                if not _inside(root, target):
                    if entry.name.endswith(".py"):
                        out.skipped.append((rel, "symlink leaves the workspace"))
                    continue
            if not entry.name.endswith((".py", ".pyi")) or entry.name.endswith(".pyi"):
                continue
            if _ignored(specs, rel):
                continue
            if include is not None and not include.match_file(rel):
                continue
            if exclude is not None and exclude.match_file(rel):
                continue
            found.append((rel, Path(entry.path)))
    for rel, path in sorted(found):
        out.files[rel] = path
    return out


def _ignored(specs: list[tuple[str, pathspec.PathSpec]], rel: str) -> bool:
    for base, spec in specs:
        if base and not rel.startswith(base):
            continue
        if spec.match_file(rel[len(base):]):
            return True
    return False


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix() if path != root else ""


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
