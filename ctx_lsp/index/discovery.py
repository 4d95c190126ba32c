"""Which files belong to the workspace: Python sources, minus ignored, vendored and oversized ones;
and the one way a workspace file is read (`read_source`).

Honours .gitignore files (root and nested; a line git would ignore as invalid is dropped), skips virtual
environments, node_modules, build output and site-packages, takes regular files only (a FIFO named
`x.py` would block the reader), never follows a symlinked directory (no loops) nor a file link leaving
the workspace. A file whose name is not UTF-8 is skipped with a reason: no editor, URI or JSON answer
could name it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pathspec

SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", "env", ".env", ".tox", ".nox",
    "build", "dist", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", ".hypothesis",
    ".idea", ".vscode",
})
DEFAULT_MAX_BYTES = 1_000_000


def skipped_dir_name(name: str) -> bool:
    """A directory name discovery never goes into (and so the index and a file watcher neither)."""
    return name in SKIP_DIRS or name.endswith(".egg-info")

DELETED = "skipped: deleted while indexing"


@cache
def _pattern() -> Callable[[str], Any]:
    """gitignore-style pattern compiler. pathspec is imported here, on first use: `ctx-lsp context`
    through a daemon compiles none, and the import (~13 ms with its RE2 backend) was on its path."""
    import pathspec.util

    try:  # pathspec >= 1.0; its older "gitwildmatch" is deprecated there (a warning per pattern)
        return pathspec.util.lookup_pattern("gitignore")
    except KeyError:
        return pathspec.util.lookup_pattern("gitwildmatch")


class InvalidPattern(ValueError):
    """An include/exclude glob that does not compile; the message names it."""


def compile_patterns(lines: Iterable[str], *, strict: bool) -> pathspec.PathSpec | None:
    """A PathSpec of gitignore-style lines, None when there are none.

    `strict`: an invalid line raises InvalidPattern (a user's --include/--exclude); otherwise it is
    dropped on its own, as git does with a lone `!`, a lone `\\` or `[z-a]` in a .gitignore.
    """
    lines = [line for line in lines if line]
    if not lines:
        return None
    import pathspec

    factory = _pattern()
    patterns = []
    for line in lines:
        try:
            patterns.append(factory(line))
        except Exception as exc:  # GitIgnorePatternError, re.error: both mean "not a pattern"
            if strict:
                raise InvalidPattern(f"invalid glob {line!r} ({getattr(exc, 'msg', None) or exc})") from None
    return pathspec.PathSpec(patterns) if patterns else None


@dataclass
class Discovery:
    # workspace-relative POSIX path -> absolute path (a str: a Path per file cost 7 ms of a Django listing)
    files: dict[str, str] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (size, mtime_ns) when listed


@dataclass(frozen=True)
class FileFilter:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    max_bytes: int = DEFAULT_MAX_BYTES

    def spec(self, patterns: tuple[str, ...]) -> pathspec.PathSpec | None:
        """The compiled globs; raises InvalidPattern for one that does not compile (the CLI and the
        server's settings check them first)."""
        return _strict_spec(patterns)


@lru_cache(maxsize=64)
def _strict_spec(patterns: tuple[str, ...]) -> pathspec.PathSpec | None:
    # compiled once per set of globs: the index and the file watcher ask per file and per directory
    return compile_patterns(patterns, strict=True)


def listing_skips(root: Path, rel: str, is_dir: bool = False) -> bool:
    """Whether `discover` would leave the file `rel` (with `is_dir`: the directory `rel` and all in it)
    out for a reason found on its way down from the root: a `.gitignore` of the root or of a directory
    above it, or a virtual environment above it. For the paths that reach the index one by one (editor
    buffers, watched files, the directories a file watcher watches), so they agree with a listing of
    the tree (the rest of discover's rules are `WorkspaceIndex.accepts`')."""
    parts = rel.split("/")
    specs: list[tuple[str, pathspec.PathSpec]] = []
    for i in range(len(parts)):
        rel_dir = "/".join(parts[:i])
        if i and os.path.exists(os.path.join(root, rel_dir, "pyvenv.cfg")):
            return True
        ignore = _gitignore_cached(root, rel_dir)
        if ignore is not None:
            specs.append((rel_dir + "/" if rel_dir else "", ignore))
        here = "/".join(parts[: i + 1])
        if specs and _ignored(specs, here if i == len(parts) - 1 and not is_dir else here + "/"):
            return True
    return False


# (root, directory) -> (the .gitignore's stat, its patterns): `listing_skips` runs per editor change
_GITIGNORES: dict[tuple[str, str], tuple[tuple[int, int, int], pathspec.PathSpec | None]] = {}


def _gitignore_cached(root: Path, rel_dir: str) -> pathspec.PathSpec | None:
    """`_gitignore`, compiled again only when the file changed (by inode, size and mtime)."""
    try:
        st = os.stat(os.path.join(root, rel_dir, ".gitignore"))
    except OSError:
        return None
    key, mark = (str(root), rel_dir), (st.st_ino, st.st_size, st.st_mtime_ns)
    held = _GITIGNORES.get(key)
    if held is not None and held[0] == mark:
        return held[1]
    spec = _gitignore(root, rel_dir)
    _GITIGNORES[key] = (mark, spec)
    return spec


def _gitignore(root: Path, rel_dir: str) -> pathspec.PathSpec | None:
    """The valid patterns of the .gitignore in `rel_dir` ("" = the root), read like any workspace file."""
    data = read_source(root, os.path.join(rel_dir, ".gitignore")).data
    if data is None:
        return None
    return compile_patterns(data.decode("utf-8", "replace").splitlines(), strict=False)


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
    stack: list[tuple[str, list[tuple[str, pathspec.PathSpec]]]] = [(root_s, [])]
    found: list[tuple[str, str, tuple[int, int] | None]] = []
    while stack:
        dirpath, specs = stack.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.skipped.append((dirpath[cut:], f"unreadable directory: {exc.strerror}"))
            continue
        if dirpath != root_s and any(e.name == "pyvenv.cfg" for e in entries):
            continue  # a virtual environment under another name (seen in its own listing: no stat per directory)
        if any(e.name == ".gitignore" for e in entries):  # its patterns apply to this directory's entries
            rel_dir = dirpath[cut:]
            ignore = _gitignore(root, rel_dir)
            if ignore is not None:
                specs = [*specs, (rel_dir.replace(os.sep, "/") + "/" if rel_dir else "", ignore)]
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
                if skipped_dir_name(entry.name):
                    continue
                if _ignored(specs, rel + "/"):
                    continue
                if exclude is not None and spec_matches(exclude, rel + "/"):
                    continue
                stack.append((entry.path, specs))
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
            if include is not None and not spec_matches(include, rel):
                continue
            if exclude is not None and spec_matches(exclude, rel):
                continue
            if not is_utf8(rel):
                out.skipped.append((shown(rel), "skipped: file name is not valid UTF-8"))
                continue
            try:
                st = entry.stat()  # follows a file link (checked above to stay inside)
                listed: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
            except OSError:
                listed = None
            else:
                if not stat.S_ISREG(st.st_mode):
                    out.skipped.append((rel, NOT_REGULAR))
                    continue
            found.append((rel, entry.path, listed))
    for rel, path, listed in sorted(found):
        out.files[rel] = path
        if listed is not None:
            out.stats[rel] = listed
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
        if spec_matches(spec, rel[len(base):]):
            return True
    return False


def spec_matches(spec: pathspec.PathSpec, rel: str) -> bool:
    """`spec.match_file(rel)` for any listed path: a name that is not valid UTF-8 (surrogate escapes)
    is matched in its printable form (`shown`), since pathspec's re2 backend takes UTF-8 only."""
    return bool(spec.match_file(rel if is_utf8(rel) else shown(rel)))


def _inside(root: Path, path: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


NOT_REGULAR = "skipped: not a regular file"
LEAVES_ROOT = "skipped: its real path leaves the workspace"


@dataclass(frozen=True)
class SourceRead:
    """What `read_source` found: the bytes, or None and the reason; size and mtime of the file read."""

    data: bytes | None
    reason: str | None = None
    size: int = -1
    mtime_ns: int = -1


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# O_NONBLOCK: opening a FIFO swapped in after discovery returns at once (fstat then refuses it)
_FILE_FLAGS = os.O_RDONLY | _CLOEXEC | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
# O_PATH: a directory is only traversed, so one without read permission still works as it does for open()
_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC | _NOFOLLOW
_WALK_BY_FD = os.open in os.supports_dir_fd and bool(_NOFOLLOW) and hasattr(os, "O_DIRECTORY")


def read_source(root: Path, path: str | Path, max_bytes: int = DEFAULT_MAX_BYTES) -> SourceRead:
    """Bytes of one workspace file (`path` relative to `root`, or absolute), or None with the reason it
    is skipped. Every read of a workspace file goes through here.

    Reads only a regular file whose real path is inside `root` (a symlink may point elsewhere inside the
    workspace, never out of it) and not over `max_bytes`. The real path is then opened one directory at
    a time without following links, so a link swapped in after the check is refused, not followed.
    """
    try:
        root_s = os.path.realpath(root)
        real = os.path.realpath(os.path.join(root_s, path))
        rel = os.path.relpath(real, root_s)
    except (OSError, ValueError) as exc:  # a NUL byte, another drive
        return SourceRead(None, f"skipped: invalid path ({exc})")
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return SourceRead(None, LEAVES_ROOT)
    if rel == os.curdir:
        return SourceRead(None, NOT_REGULAR)
    try:
        fd = _open_below(root_s, rel)
    except FileNotFoundError:
        return SourceRead(None, DELETED)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):  # a link appeared on the way
            return SourceRead(None, LEAVES_ROOT)
        return SourceRead(None, f"skipped: unreadable ({exc.strerror})")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return SourceRead(None, NOT_REGULAR)
        if st.st_size > max_bytes:
            return SourceRead(None, too_large(st.st_size, max_bytes))
        chunks: list[bytes] = []
        got = 0
        while got <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        return SourceRead(None, f"skipped: unreadable ({exc.strerror})")
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # grew since fstat
        return SourceRead(None, too_large(len(data), max_bytes))
    if is_binary(data[:8192]):
        return SourceRead(None, "skipped: binary file")
    return SourceRead(data, None, st.st_size, st.st_mtime_ns)


def too_large(size: int, max_bytes: int) -> str:
    return f"skipped: {size} bytes is over the {max_bytes}-byte limit"


def _open_below(root_s: str, rel: str) -> int:
    """A read-only descriptor of `rel` under `root_s`, following no symlink below the root."""
    if not _WALK_BY_FD:  # no openat (Windows): only the last component is protected
        return os.open(os.path.join(root_s, rel), _FILE_FLAGS)
    *dirs, name = rel.split(os.sep)
    dfd = os.open(root_s, _DIR_FLAGS & ~_NOFOLLOW)  # the root itself may be reached through links
    try:
        for part in dirs:
            nxt = os.open(part, _DIR_FLAGS, dir_fd=dfd)
            os.close(dfd)
            dfd = nxt
        return os.open(name, _FILE_FLAGS, dir_fd=dfd)
    finally:
        os.close(dfd)
