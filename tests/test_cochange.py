"""Co-change partners from git history (ctx_lsp/sources/cochange.py) and the file ranking's use of them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ctx_lsp.sources.cochange import MAX_FILES, CoChange

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")


def git(root: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@x", GIT_COMMITTER_NAME="a",
               GIT_COMMITTER_EMAIL="a@x", GIT_AUTHOR_DATE="2024-01-01T00:00:00", GIT_COMMITTER_DATE="2024-01-01T00:00:00")
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout.strip()


def commit(root: Path, files: dict[str, str], subject: str) -> str:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root, "add", "-A")
    git(root, "-c", "commit.gpgsign=false", "commit", "-q", "-m", subject)
    return git(root, "rev-parse", "HEAD")


def test_partners_weigh_small_commits_and_skip_sweeping_ones(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, {"pkg/a.py": "A = 1\n", "pkg/b.py": "B = 1\n", "README.md": "x\n"}, "start")
    commit(root, {"pkg/a.py": "A = 2\n", "pkg/b.py": "B = 2\n"}, "a with b")
    commit(root, {"pkg/a.py": "A = 3\n", "pkg/c.py": "C = 1\n", "pkg/d.py": "D = 1\n"}, "a with c and d")
    sweep = {f"pkg/s{i}.py": "S = 1\n" for i in range(MAX_FILES)}
    commit(root, {"pkg/a.py": "A = 4\n", **sweep}, "a sweeping refactor")
    commit(root, {"pkg/a.py": "A = 5\n"}, "a alone")
    cc = CoChange(str(root))
    # b: two two-file commits (1 + 1); c and d: one three-file commit (1/2 each); s*: ignored
    assert cc.partners("pkg/a.py") == {"pkg/b.py": 1.0, "pkg/c.py": 0.25, "pkg/d.py": 0.25}
    assert cc.partners("pkg/c.py") == {"pkg/a.py": 1.0, "pkg/d.py": 1.0}
    assert cc.partners("pkg/s0.py") == {}
    # HEAD moves: the partners follow
    commit(root, {"pkg/c.py": "C = 2\n", "pkg/e.py": "E = 1\n"}, "c with e")
    assert cc.partners("pkg/c.py") == {"pkg/a.py": 0.5, "pkg/d.py": 0.5, "pkg/e.py": 1.0}


def test_paths_are_relative_to_a_workspace_inside_the_repository(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, {"svc/app/a.py": "A = 1\n", "svc/app/b.py": "B = 1\n", "other/x.py": "X = 1\n"}, "start")
    commit(root, {"svc/app/a.py": "A = 2\n", "svc/app/b.py": "B = 2\n", "other/x.py": "X = 2\n"}, "both")
    assert CoChange(str(root / "svc")).partners("app/a.py") == {"app/b.py": 1.0}


def test_no_repository_no_partners(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("A = 1\n")
    assert CoChange(str(tmp_path)).partners("a.py") == {}
