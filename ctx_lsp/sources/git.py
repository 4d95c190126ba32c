"""The git backend of history: the `git` binary run in the workspace (blame, first-parent log with
-U0 diffs, blob ids of HEAD and the working tree), commits as graph nodes, and -U0 diff parsing.

No library: `git blame` with a few worker threads was as fast as pygit2's blame on a 77-file,
301-commit repository and much faster on large files (README "History and tests").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from ctx_lsp.index.model import Node, NodeKind

GIT_TIMEOUT = 120.0


ZERO_SHA = "0" * 40


Hunk = tuple[int, int, int, int]  # old_start, old_count, new_start, new_count (a -U0 hunk header)


# -- commits -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    author: str
    email: str
    time: int  # author time, seconds since the epoch
    tz: str  # author time zone as git records it, e.g. "+0100"
    ctime: int  # committer time: the order "newest" uses
    subject: str

    @property
    def node_id(self) -> str:
        return commit_id(self.sha)

    @property
    def date(self) -> str:
        """ISO-8601 author date in the author's own time zone."""
        sign = -1 if self.tz.startswith("-") else 1
        try:
            minutes = int(self.tz[1:3]) * 60 + int(self.tz[3:5])
        except ValueError:
            minutes = 0
        tz = timezone(timedelta(minutes=sign * minutes))
        return datetime.fromtimestamp(self.time, tz).isoformat()

    def to_node(self) -> Node:
        return Node(self.node_id, NodeKind.COMMIT.value, "", self.sha[:12], 0, 0, self.subject,
                    f"{self.date} {self.author} <{self.email}>")

    def to_dict(self) -> dict[str, Any]:
        return {"hash": self.sha, "short": self.sha[:12], "date": self.date, "author": self.author,
                "email": self.email, "subject": self.subject}

    def to_wire(self) -> list[Any]:
        return [self.author, self.email, self.time, self.tz, self.ctime, self.subject]

    @staticmethod
    def from_wire(sha: str, w: list[Any]) -> Commit:
        return Commit(sha, w[0], w[1], int(w[2]), w[3], int(w[4]), w[5])


def commit_id(sha: str) -> str:
    return f"commit:{sha}"


def commit_info(node: Node) -> dict[str, Any]:
    """Hash, date, author and subject of a commit node (the `commit` object of `neighbors --json`)."""
    sha = node.id.partition(":")[2]
    date, _, who = node.doc.partition(" ")
    author, _, email = who.rpartition(" <")
    return {"hash": sha, "date": date, "author": author or who, "email": email.rstrip(">"),
            "subject": node.signature}


# -- diffs -------------------------------------------------------------------------------------
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_diff(lines: list[bytes], i: int) -> tuple[dict[str, list[Hunk]], int]:
    """Parse `diff --git` sections starting at lines[i] (a -U0 patch) until a line starting with NUL.

    Returns ({new path: hunks}, index after the patch). Deleted files are keyed by their old path
    with hunks that remove every line.
    """
    files: dict[str, list[Hunk]] = {}
    cur: list[Hunk] | None = None
    old_path = new_path = ""
    n = len(lines)
    while i < n:
        line = lines[i]
        if line.startswith(b"\0"):
            break
        if line.startswith(b"diff --git "):
            cur = None
            old_path = new_path = ""
        elif line.startswith(b"--- ") and cur is None:
            old_path = _diff_path(line[4:])
        elif line.startswith(b"+++ ") and cur is None:
            new_path = _diff_path(line[4:])
            key = new_path or old_path
            cur = files.setdefault(key, [])
        elif line.startswith(b"@@"):
            m = _HUNK.match(line)
            if m and cur is not None:
                os_, oc = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
                ns, nc = int(m.group(3)), int(m.group(4) if m.group(4) is not None else 1)
                cur.append((os_, oc, ns, nc))
                i += 1 + oc + nc  # skip the hunk body exactly: its lines may look like headers
                # "\ No newline at end of file" markers follow a body
                while i < n and lines[i].startswith(b"\\"):
                    i += 1
                continue
        i += 1
    return files, i


def _diff_path(raw: bytes) -> str:
    s = raw.rstrip(b"\n").decode("utf-8", "surrogateescape")
    if s.startswith('"'):  # git quotes unusual names C-style
        try:
            s = s[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape").encode(
                "latin-1").decode("utf-8", "replace")
        except (UnicodeError, ValueError):
            s = s[1:-1]
    if s == "/dev/null":
        return ""
    return s[2:] if s[:2] in ("a/", "b/") else s


# -- git ---------------------------------------------------------------------------------------
class GitError(RuntimeError):
    pass


class Git:
    """Runs git in the workspace root; paths in and out are root-relative."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.exe = shutil.which("git")
        # never take the index lock or write the index: other tools (and the user) own the repo
        self.env = dict(os.environ, GIT_OPTIONAL_LOCKS="0", LC_ALL="C", GIT_PAGER="cat", GIT_TERMINAL_PROMPT="0")

    def run(self, *args: str, stdin: bytes | None = None, ok: tuple[int, ...] = (0,)) -> bytes:
        if self.exe is None:
            raise GitError("git binary not found")
        # without input, stdin is /dev/null, never inherited: in the language server fd 0 is the LSP
        # wire, and a child that read from it would take bytes of the client's next message
        feed: dict[str, Any] = {"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}
        try:
            p = subprocess.run([self.exe, "-c", "core.quotepath=false", *args], cwd=self.root, env=self.env,
                               capture_output=True, timeout=GIT_TIMEOUT, **feed)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GitError(f"git {args[0]}: {exc}") from exc
        if p.returncode not in ok:
            raise GitError(f"git {args[0]}: {p.stderr.decode('utf-8', 'replace').strip()[:300]}")
        return p.stdout

    def probe(self) -> tuple[str | None, str, str]:
        """(HEAD sha or None, reason when unavailable, path prefix of the root inside the repo)."""
        if self.exe is None:
            return None, "git binary not found", ""
        try:
            out = self.run("rev-parse", "--is-inside-work-tree", "--is-shallow-repository", "--show-prefix")
        except GitError:
            return None, "not a git repository", ""
        parts = out.decode("utf-8", "surrogateescape").split("\n")
        if parts[0].strip() != "true":
            return None, "not inside a git work tree", ""
        if len(parts) > 1 and parts[1].strip() == "true":
            return None, "shallow clone: history is incomplete", ""
        prefix = parts[2].strip() if len(parts) > 2 else ""
        try:
            head = self.run("rev-parse", "--verify", "-q", "HEAD^{commit}").decode().strip()
        except GitError:
            return None, "repository has no commits", prefix
        return head, "", prefix

    def file_keys(self, paths: set[str], prefix: str) -> tuple[dict[str, str], set[str]]:
        """({path: blob key}, dirty paths) for tracked paths; the key is the HEAD blob, or
        `<HEAD blob>:<working blob>` when the working copy differs from HEAD."""
        head_blobs: dict[str, str] = {}
        for rec in self.run("ls-tree", "-r", "-z", "--full-name", "HEAD").split(b"\0"):
            if not rec:
                continue
            meta, _, path = rec.partition(b"\t")
            p = path.decode("utf-8", "surrogateescape")
            if prefix:
                if not p.startswith(prefix):
                    continue
                p = p[len(prefix):]
            if p in paths:
                head_blobs[p] = meta.split()[2].decode()
        dirty = {p for p in self.run("diff", "--name-only", "-z", "--no-renames", "--relative", "HEAD", "--")
                 .decode("utf-8", "surrogateescape").split("\0") if p in head_blobs}
        keys = dict(head_blobs)
        if dirty:
            order = sorted(dirty)
            blobs = self.run("hash-object", "--no-filters", "--stdin-paths",
                             stdin="".join(p + "\n" for p in order).encode("utf-8", "surrogateescape"))
            for p, b in zip(order, blobs.decode().split(), strict=False):
                keys[p] = f"{head_blobs[p]}:{b}"
        return keys, dirty

    def blame(self, path: str) -> tuple[list[list[Any]], dict[str, Commit]]:
        """Runs [[start, end, sha], ...] of the working-tree file (uncommitted lines left out)."""
        out = self.run("blame", "--porcelain", "--", path)
        runs: list[list[Any]] = []
        commits: dict[str, Commit] = {}
        meta: dict[str, dict[str, str]] = {}
        sha = ""
        for line in out.split(b"\n"):
            if not line:
                continue
            if line.startswith(b"\t"):
                continue
            head = line.split(b" ", 4)
            if len(head[0]) == 40 and len(head) >= 3 and head[1].isdigit() and head[2].isdigit():
                sha = head[0].decode()
                final = int(head[2])
                if sha == ZERO_SHA:
                    continue
                if runs and runs[-1][2] == sha and runs[-1][1] == final - 1:
                    runs[-1][1] = final
                else:
                    runs.append([final, final, sha])
                continue
            key, _, value = line.partition(b" ")
            if sha and sha != ZERO_SHA:
                meta.setdefault(sha, {})[key.decode("ascii", "replace")] = value.decode("utf-8", "replace")
        for s, m in meta.items():
            commits[s] = Commit(s, m.get("author", ""), m.get("author-mail", "").strip("<>"),
                                int(m.get("author-time", "0") or 0), m.get("author-tz", "+0000"),
                                int(m.get("committer-time", "0") or 0), m.get("summary", ""))
        return runs, commits

    def log(self, limit: int) -> tuple[list[tuple[Commit, dict[str, list[Hunk]]]], bool]:
        """The newest `limit` first-parent commits touching *.py files, newest first, each with its
        hunks per root-relative path; and whether the log reached the first commit."""
        fmt = "%x00%H%x1f%an%x1f%ae%x1f%at%x1f%ai%x1f%ct%x1f%s"
        out = self.run("log", "--first-parent", "-p", "-U0", "--no-renames", "--no-color", "--no-ext-diff",
                       "--relative", f"--format={fmt}", "-n", str(limit), "--", "*.py")
        lines = out.split(b"\n")
        result: list[tuple[Commit, dict[str, list[Hunk]]]] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.startswith(b"\0"):
                i += 1
                continue
            f = line[1:].decode("utf-8", "replace").split("\x1f")
            if len(f) < 7:
                i += 1
                continue
            tz = f[4].rsplit(" ", 1)[-1] if " " in f[4] else "+0000"
            c = Commit(f[0], f[1], f[2], int(f[3]), tz, int(f[5]), "\x1f".join(f[6:]))
            files, i = parse_diff(lines, i + 1)
            result.append((c, files))
        return result, len(result) < limit

    def worktree_diff(self, paths: list[str]) -> dict[str, list[Hunk]]:
        if not paths:
            return {}
        out = self.run("diff", "-U0", "--no-renames", "--no-color", "--no-ext-diff", "--relative", "HEAD",
                       "--", *paths)
        return parse_diff(out.split(b"\n"), 0)[0]
