"""What git is doing to a work tree, for whoever applies changes on disk to the index.

Why: a `git checkout`, `merge`, `reset` or `pull` writes hundreds of files while it holds the work
tree's index lock, and a rebase rewrites the tree once per commit it replays. A refresh in the middle
indexes a half-written tree and is done again a moment later, on the CPU git needs. The file watcher
(`watch.py`: the daemon, the MCP bridge, the language server's own watcher), the language server's
handling of the client's `workspace/didChangeWatchedFiles` (VS Code, which holds those changes and
answers from the graph as it was) and the request paths that refresh before answering
(`Engine.wait_for_git`: the one-shot CLI, the daemon, the MCP bridge, which wait) ask this module, so
they wait by one rule.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

GIT_POLL_MS = 100  # while git holds its index lock, look again this often
GIT_WAIT_MS = 30_000  # hold changes at most this long for git; a lock this old was left by a git that died
# A request waits less: a checkout writes its files in a second or two, but `git commit` holds the lock
# for as long as its message editor is open, with the tree unchanged, and someone is waiting for the answer
REQUEST_WAIT_S = 5.0
_SEQUENCES = ("rebase-merge", "rebase-apply", "sequencer")
# What git exports to the processes it starts (hooks, the commit message editor, aliases, a rebase's
# `exec`): its exec path to all of them, and its repository-local variables (`git rev-parse
# --local-env-vars`), GIT_INDEX_FILE among them for commit's hooks and editor
_GIT_EXEC = "GIT_EXEC_PATH"
_GIT_LOCAL = ("GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
              "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE",
              "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS", "GIT_REPLACE_REF_BASE", "GIT_PREFIX",
              "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_COMMON_DIR")


def started_by_git(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether git started this process (a hook, `git commit`'s editor, an alias, a rebase's `exec`).
    Such a process never waits for git's index lock: the git that may hold it (`git commit -a` does,
    around its pre-commit hook and editor) is waiting for this process."""
    return _GIT_EXEC in environ or "GIT_INDEX_FILE" in environ


def outliving_git(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """`environ` for a process that outlives the git command that started its parent (the daemon a
    git hook's call starts): without what that command exported, which would point its git calls at
    an index lock long gone. A user's own GIT_DIR (no git around it) is kept."""
    if not started_by_git(environ):
        return dict(environ)
    return {k: v for k, v in environ.items() if k != _GIT_EXEC and k not in _GIT_LOCAL}


def git_dir(root: Path) -> Path | None:
    """The git directory of the work tree holding `root`, as git finds it (`.git` above the root, a
    linked worktree's or a submodule's `.git` file, `$GIT_DIR`); None outside one or without git.
    Runs git: not on an event loop."""
    from ctx_lsp.sources.git import Git, GitError

    try:
        out = Git(str(root)).run("rev-parse", "--absolute-git-dir")
    except GitError:
        return None
    path = out.decode("utf-8", "surrogateescape").strip()
    return Path(path) if path else None


class GitActivity:
    """Git's state for one work tree, read with a few stats (cheap enough for an event loop once
    found). Outside a repository (`git_dir` None) git is never busy."""

    def __init__(self, gd: Path | None, wait_ms: int = GIT_WAIT_MS) -> None:
        self.git_dir = gd
        self.lock = gd / "index.lock" if gd is not None else None
        self.sequences = tuple(gd / n for n in _SEQUENCES) if gd is not None else ()
        self.wait_ms, self.wait_s = wait_ms, wait_ms / 1000

    @classmethod
    def find(cls, root: Path, wait_ms: int = GIT_WAIT_MS) -> GitActivity:
        """Asks git where its directory is (a subprocess: call it off the event loop)."""
        return cls(git_dir(root), wait_ms)

    def writing(self) -> bool:
        """Whether git holds the index lock now: a lock older than `wait_s` was left by a git that
        died (git refuses to run until it is removed), and holds nothing."""
        if self.lock is None:
            return False
        try:
            return time.time() - os.stat(self.lock).st_mtime < self.wait_s
        except OSError:
            return False

    def replaying(self) -> bool:
        """Whether git replays commits (a rebase, a cherry-pick or revert sequence), which writes the
        tree once per commit, with pauses shorter than a watcher's batch limit."""
        return any(os.path.isdir(d) for d in self.sequences)

    def settle(self, on_wait: Callable[[], None] | None = None, limit_s: float = REQUEST_WAIT_S) -> float:
        """Block while git writes the tree, at most `limit_s`; the seconds waited. For a caller about
        to read the disk for an answer (the one-shot CLI, the daemon, the MCP bridge): its answer is
        then about the tree git leaves, not a half-written one. Not a rebase's pauses (`replaying`):
        a rebase stopped on a conflict lasts as long as the user takes. `on_wait`: called once, when
        waiting starts."""
        limit = min(limit_s, self.wait_s)
        t = time.monotonic()
        while self.writing() and time.monotonic() - t < limit:
            if on_wait is not None:
                on_wait()
                on_wait = None
            time.sleep(GIT_POLL_MS / 1000)
        return time.monotonic() - t


class GitHold:
    """How long changes on disk have been held for git: `holds()` is True while git writes the tree,
    for at most the activity's `wait_s` in a row (then they go in regardless)."""

    def __init__(self, activity: GitActivity) -> None:
        self.activity = activity
        self.since: float | None = None

    def holds(self) -> bool:
        if not self.activity.writing():
            self.since = None
            return False
        now = time.monotonic()
        if self.since is None:
            self.since = now
        return now - self.since < self.activity.wait_s
