"""Files that change together: the co-change partners of a file, from `git log --name-only`.

A fix that spans files usually spans files that earlier commits changed together (a base class and
its backends, a module and the registry that lists it). The file ranking asks this for the partners
of its leading files (retrieval/engine.py, second pass).

Read from the newest LOG_COMMITS non-merge commits reachable from HEAD, `.py` files under the
workspace root only (`--relative`), commits touching 2..MAX_FILES such files (a sweeping refactor
says nothing about which files belong together); each commit gives each pair 1 / (files - 1), so a
two-file commit binds its pair fully. One `git log` without diffs: ~0.3 s on Django's history, done
on first use and again only when HEAD moves; kept in memory (a query never writes the cache). Without
git, a repository or commits, every file has no partners.
"""

from __future__ import annotations

import threading

from ctx_lsp.sources.git import Git, GitError

LOG_COMMITS = 2000
MAX_FILES = 20


class CoChange:
    def __init__(self, root: str) -> None:
        self.git = Git(root)
        self._head: str | None = None
        self._commits: list[list[str]] = []
        self._by_file: dict[str, list[int]] = {}
        self._lock = threading.Lock()  # the server answers from worker threads

    def partners(self, path: str) -> dict[str, float]:
        """Co-change weight of every file that changed with `path`, relative to its strongest partner
        (1.0); empty without history."""
        with self._lock:
            self._current()
            counts: dict[str, float] = {}
            for i in self._by_file.get(path, ()):
                files = self._commits[i]
                share = 1.0 / (len(files) - 1)
                for other in files:
                    if other != path:
                        counts[other] = counts.get(other, 0.0) + share
        top = max(counts.values(), default=0.0)
        return {p: v / top for p, v in sorted(counts.items())} if top else {}

    def _current(self) -> None:
        head, _reason, _prefix = self.git.probe()
        if head == self._head:
            return
        self._head = head
        self._commits, self._by_file = [], {}
        if head is None:
            return
        try:
            out = self.git.run("log", "--no-merges", "--no-renames", "--relative", "--format=%x00", "--name-only",
                               "-n", str(LOG_COMMITS), "--", "*.py")
        except GitError:
            return
        for block in out.decode("utf-8", "surrogateescape").split("\0"):
            files = sorted({f for f in block.split("\n") if f.endswith(".py")})
            if 2 <= len(files) <= MAX_FILES:
                for f in files:
                    self._by_file.setdefault(f, []).append(len(self._commits))
                self._commits.append(files)
