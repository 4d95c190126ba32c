"""Shared test helpers: fixture paths, a tmp-cached index, corpora lookup. Kept deliberately small."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ctx_lsp.index.workspace import WorkspaceIndex

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
CORPORA_GET = TESTS.parents[0].parent / "shared/corpora/get"


def build_index(root: Path, cache_dir: Path, **kwargs) -> WorkspaceIndex:  # type: ignore[no-untyped-def]
    """A fully built index of `root` whose cache lives in `cache_dir` (never the user cache)."""
    index = WorkspaceIndex(root, cache_dir=cache_dir, **kwargs)
    index.load_or_build()
    return index


def write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    """Write {relative path: text or bytes} under root, creating directories."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")


def open_engine(root: Path, files: dict[str, str | bytes], cache_dir: Path):  # type: ignore[no-untyped-def]
    """An engine opened on `files` written under `root`, its cache in `cache_dir`."""
    from ctx_lsp.engine import Engine

    write_tree(root, files)
    e = Engine(root, cache_dir=cache_dir)
    e.open()
    return e


def corpus_dir(name: str) -> Path:
    """The pinned corpus directory of `name`, or skip the test with the reason."""
    if not CORPORA_GET.exists():
        pytest.skip(f"corpora script missing: {CORPORA_GET}")
    try:
        out = subprocess.run([str(CORPORA_GET), name], capture_output=True, text=True, timeout=300, check=True).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        pytest.skip(f"corpus {name} unavailable: {exc}")
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[0] == name:
            return Path(parts[1])
    pytest.skip(f"corpus {name} not listed by {CORPORA_GET}")


# Fixture workspaces hold their own test_*.py and conftest.py files: they are data, never collected.
collect_ignore_glob = ["fixtures/*"]
