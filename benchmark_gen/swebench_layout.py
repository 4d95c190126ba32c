"""Trees of a bare git mirror laid out on disk, one per repository, updated in place between commits.

`git archive` fails on mirrors that lack their largest blobs, so a tree is written from
`git ls-tree -r -z` and `git cat-file --batch`, skipping blobs the mirror does not have. Between two
commits only files whose blob id (or mode) changed are rewritten and files no longer present are
deleted, so unchanged files keep their mtimes and the index update after a checkout is incremental.
Only regular blobs are written (modes 100644/100755); symlinks and submodules are skipped. Nothing is
written outside the tree directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

Entry = tuple[str, str]  # (mode, blob id)
REGULAR_MODES = ("100644", "100755")


class GitError(RuntimeError):
    """A git command failed (unknown commit, broken mirror); the message is git's stderr."""


def _git(mirror: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", f"--git-dir={mirror}", *args], capture_output=True)
    if proc.returncode != 0:
        msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {args[0]} failed: {msg[-1] if msg else f'exit {proc.returncode}'}")
    return proc.stdout


def commit_time(mirror: Path, commit: str) -> int:
    """Committer date of `commit` in seconds since the epoch."""
    return int(_git(mirror, "show", "-s", "--format=%ct", commit, "--").decode().strip())


def safe_path(path: str) -> bool:
    """A relative path that stays inside the tree (no `..`, no absolute path, no `.git` component)."""
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and all(p not in ("", ".", "..", ".git") for p in parts)


def ls_tree(mirror: Path, commit: str) -> dict[str, Entry]:
    """Regular blobs of `commit`: path -> (mode, blob id). Symlinks, submodules and unsafe paths are left out."""
    out: dict[str, Entry] = {}
    for rec in _git(mirror, "ls-tree", "-r", "-z", commit).split(b"\0"):
        if not rec:
            continue
        meta, _, raw = rec.partition(b"\t")
        mode, kind, blob = meta.decode().split()
        path = raw.decode("utf-8", "surrogateescape")
        if kind == "blob" and mode in REGULAR_MODES and safe_path(path):
            out[path] = (mode, blob)
    return out


def cat_blobs(mirror: Path, blobs: Iterable[str]) -> Iterator[tuple[str, bytes | None]]:
    """(blob id, content) for each id in order, content None when the mirror lacks the blob."""
    ids = list(blobs)
    if not ids:
        return
    proc = subprocess.Popen(["git", f"--git-dir={mirror}", "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def feed() -> None:  # a writer thread: git's output pipe would fill up while we still write ids
        try:
            for b in ids:
                stdin.write(b.encode() + b"\n")
        except BrokenPipeError:
            pass
        finally:
            try:
                stdin.close()
            except BrokenPipeError:
                pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        for _ in ids:
            header = stdout.readline().decode().split()
            if len(header) < 2:
                raise GitError("git cat-file --batch ended early")
            if header[1] != "blob":  # "<id> missing" (or an id that names no blob)
                yield header[0], None
                continue
            size = int(header[2])
            data = stdout.read(size)
            stdout.read(1)  # the newline after the content
            yield header[0], data
    finally:
        writer.join()
        stdout.close()
        proc.wait()


@dataclass
class LayoutReport:
    commit: str
    entries: dict[str, Entry]  # what the tree now holds (missing blobs excluded)
    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # paths whose blob the mirror lacks
    listed: set[str] = field(default_factory=set)  # every regular file of the commit, missing or not


class TreeLayout:
    """One checked-out tree of a mirror at `tree`, with a manifest of what it holds at `manifest`.

    The manifest is removed while the tree changes and written back after, so an interrupted layout
    is redone from the files on disk next time (every file rewritten, strays deleted).
    """

    def __init__(self, mirror: Path, tree: Path, manifest: Path, gitdir: Path | None = None) -> None:
        self.mirror = mirror
        self.tree = tree
        self.manifest = manifest
        self.gitdir = gitdir  # set: the tree is a git work tree whose HEAD is the laid-out commit

    def _link_history(self, gd: Path, commit: str) -> None:
        """Make the tree a git work tree at `commit`, as a user's checkout is: `tree/.git` names a private
        git directory `gd` that borrows the mirror's objects (alternates) and whose detached HEAD is the
        commit, so `git log` shows that commit's past and nothing after it. Nothing is copied and the
        mirror is not written. No index file: git reads the tree's files as they are."""
        if not (gd / "HEAD").exists():
            gd.mkdir(parents=True, exist_ok=True)
            _git(gd, "init", "-q", "--bare")
            _git(gd, "config", "core.bare", "false")
        (gd / "objects" / "info" / "alternates").write_text(f"{(self.mirror / 'objects').resolve()}\n")
        (gd / "HEAD").write_text(f"{commit}\n")
        (self.tree / ".git").write_text(f"gitdir: {gd.resolve()}\n")

    def _previous(self) -> dict[str, Entry] | None:
        try:
            data = json.loads(self.manifest.read_text())
            return {p: (m, b) for p, (m, b) in data["entries"].items()}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _on_disk(self) -> list[str]:
        out: list[str] = []
        for dirpath, _dirs, files in os.walk(self.tree):
            rel = Path(dirpath).relative_to(self.tree).as_posix()
            out.extend(f if rel == "." else f"{rel}/{f}" for f in files if not (rel == "." and f == ".git"))
        return out

    def checkout(self, commit: str) -> LayoutReport:
        target = ls_tree(self.mirror, commit)
        prev = self._previous()
        self.tree.mkdir(parents=True, exist_ok=True)
        if self.manifest.exists():
            self.manifest.unlink()
        stale = [p for p in (prev if prev is not None else self._on_disk()) if p not in target]
        rep = LayoutReport(commit, {}, listed=set(target))
        for p in sorted(stale):
            self._delete(p)
            rep.deleted.append(p)
        todo = {p: e for p, e in target.items() if prev is None or prev.get(p) != e}
        by_blob: dict[str, list[str]] = {}
        for p, (_, blob) in sorted(todo.items()):
            by_blob.setdefault(blob, []).append(p)
        entries = {p: e for p, e in target.items() if p not in todo}
        for blob, data in cat_blobs(self.mirror, list(by_blob)):
            for p in by_blob[blob]:
                if data is None:
                    self._delete(p)  # an older version of the file must not stay behind
                    rep.missing.append(p)
                    continue
                self._write(p, data, target[p][0] == "100755")
                rep.written.append(p)
                entries[p] = target[p]
        rep.entries = entries
        rep.written.sort()
        rep.missing.sort()
        if self.gitdir is not None:
            self._link_history(self.gitdir, commit)
        self.manifest.write_text(json.dumps({"commit": commit, "entries": entries}, sort_keys=True))
        return rep

    def _inside(self, path: str) -> Path:
        full = self.tree / path
        root = self.tree.resolve()
        if not safe_path(path) or not full.parent.resolve().is_relative_to(root):
            raise GitError(f"refusing to write outside the tree: {path}")
        return full

    def _write(self, path: str, data: bytes, executable: bool) -> None:
        parts = path.split("/")
        cur = self.tree
        for part in parts[:-1]:  # a file may have become a directory since the last commit
            cur = cur / part
            if cur.is_symlink() or (cur.exists() and not cur.is_dir()):
                cur.unlink()
        full = self._inside(path)
        full.parent.mkdir(parents=True, exist_ok=True)
        if full.is_dir() and not full.is_symlink():
            shutil.rmtree(full)
        elif full.is_symlink():
            full.unlink()
        full.write_bytes(data)
        os.chmod(full, 0o755 if executable else 0o644)

    def _delete(self, path: str) -> None:
        full = self.tree / path
        if not safe_path(path):
            return
        if full.is_file() or full.is_symlink():
            full.unlink()
        parent = full.parent
        while parent != self.tree and parent.is_dir() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
