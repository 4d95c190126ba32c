"""Discovery: the same files whichever pathspec backend matches the globs (RE2 with `pip install
ctx-lsp[fast]`, picked automatically when installed, or pathspec's own regular expressions), and
virtual environments left out under any name."""

from __future__ import annotations

from pathlib import Path

import pathspec
import pytest

from ctx_lsp.index.discovery import FileFilter, discover

TREE = {
    ".gitignore": "*.py[co]\n/top_only.py\ndocs/_build/\n**/gen/\n[ab]x.py\nlogs/*\n!logs/keep.py\n# comment\n\\#hash.py\n",
    "top_only.py": "", "pkg/top_only.py": "", "ax.py": "", "bx.py": "", "cx.py": "", "#hash.py": "",
    "pkg/__init__.py": "", "pkg/gen/out.py": "", "pkg/deep/gen/x.py": "", "pkg/mod.py": "",
    "docs/_build/conf.py": "", "docs/conf.py": "", "logs/a.py": "", "logs/keep.py": "",
    "pkg/sub/.gitignore": "*.py\n!keep_*.py\n", "pkg/sub/drop.py": "", "pkg/sub/keep_me.py": "",
    "tests/test_x.py": "", "tests/data/big.py": "", "space dir/mod ule.py": "", "uni/café.py": "",
}


@pytest.mark.parametrize("flt", [FileFilter(), FileFilter(include=("pkg/**", "*.py")),
                                 FileFilter(exclude=("tests/**", "**/keep_*.py", "uni"))])
def test_re2_and_pathspec_regexes_list_the_same_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      flt: FileFilter) -> None:
    pytest.importorskip("re2", reason="google-re2 is not installed (pip install ctx-lsp[fast])")
    for rel, text in TREE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    original = pathspec.PathSpec
    listed = {}
    for backend in ("simple", "re2"):
        monkeypatch.setattr(pathspec, "PathSpec", lambda pats, _b=backend: original(pats, backend=_b))
        d = discover(tmp_path, flt)
        listed[backend] = (sorted(d.files), sorted(d.skipped))
    assert listed["re2"] == listed["simple"]
    assert listed["re2"][0]  # the tree is not all ignored: the comparison compares something


def test_a_virtual_environment_is_not_listed_under_any_name_unless_it_is_the_root(tmp_path: Path) -> None:
    for rel in ("app/main.py", "myenv/pyvenv.cfg", "myenv/lib/python3.11/site.py", "tools/old-env/pyvenv.cfg",
                "tools/old-env/bin/x.py", "tools/run.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    assert sorted(discover(tmp_path).files) == ["app/main.py", "tools/run.py"]
    assert sorted(discover(tmp_path / "myenv").files) == ["lib/python3.11/site.py"]  # opened as the root itself
