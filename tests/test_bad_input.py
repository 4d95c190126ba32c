"""Bad input never breaks indexing: each case is indexed as far as it can be, or skipped with a reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import build_index, write_tree

from ctx_lsp.index import workspace as index_mod
from ctx_lsp.index.discovery import Discovery, FileFilter, discover, read_source
from ctx_lsp.index.extract import extract


def errors_of(idx, path: str) -> list[str]:  # type: ignore[no-untyped-def]
    return [e["message"] for e in idx.errors() if e["path"] == path]


def out_targets(idx, src: str, kind: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {e.dst for e in idx.graph.out_edges(src, [kind])}


def test_syntax_error_indexes_the_rest_and_reports(tmp_path: Path) -> None:
    write_tree(tmp_path / "ws", {
        "lib.py": "def target():\n    return 1\n",
        "broken.py": (
            "from lib import target\n\n"
            "def good():\n    return target()\n\n"
            "def bad(:\n    return target(\n\n"
            "class After:\n    def m(self):\n        return good()\n"
        ),
    })
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    msgs = errors_of(idx, "broken.py")
    assert msgs and msgs[0].startswith("syntax error at line 6"), msgs
    assert {"broken.py::good", "broken.py::After", "broken.py::After.m"} <= {n.id for n in idx.graph.nodes_of_file("broken.py")}
    assert out_targets(idx, "broken.py::good", "CALLS") == {"lib.py::target"}
    assert out_targets(idx, "broken.py::After.m", "CALLS") == {"broken.py::good"}


@pytest.mark.parametrize("src", [
    "def f(:\n",  # nothing recoverable by repair
    "(((((\n",
    "class A(\n    def m(self):\n        pass\n",
    "\tdef f():\n  pass\n",
    "x = [" + "(" * 500 + "\n",
    "".join("    " * i + "if x:\n" for i in range(120)) + "    " * 120 + "pass\n",  # too many indentation levels
    "\x00\x00",
    "é = 'unterminated\n",
], ids=lambda s: repr(s[:20]))
def test_extract_never_raises(src: str) -> None:
    facts = extract("m.py", src)
    assert facts.errors, "a broken file reports why"


def test_deep_nesting_is_reported_not_raised() -> None:
    facts = extract("m.py", "x = " + "f(" * 3000 + ")" * 3000 + "\n")
    assert facts.errors


def test_non_utf8_is_decoded_with_replacement_and_reported(tmp_path: Path) -> None:
    write_tree(tmp_path / "ws", {"latin.py": b"# caf\xe9\ndef f():\n    return 'na\xefve'\n"})
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    assert "latin.py::f" in idx.graph
    msgs = errors_of(idx, "latin.py")
    assert any("non-UTF-8" in m and "replacement" in m for m in msgs), msgs


def test_a_coding_cookie_is_honoured_as_python_reads_the_file(tmp_path: Path) -> None:
    # PEP 263: a latin-1 file that declares it is valid Python, not a syntax error of U+FFFD
    write_tree(tmp_path / "ws", {
        "old.py": b"# -*- coding: latin-1 -*-\ndef caf\xe9():\n    return 'na\xefve'\n\ndef g():\n    return caf\xe9()\n",
        "bad_cookie.py": b"# -*- coding: no-such-codec -*-\ndef h():\n    return '\xff'\n",
    })
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    assert errors_of(idx, "old.py") == []
    assert out_targets(idx, "old.py::g", "CALLS") == {"old.py::caf\u00e9"}
    assert idx.disk_text("old.py") is not None and "na\u00efve" in (idx.disk_text("old.py") or "")
    # a cookie Python does not know: read as UTF-8 with replacement, and said so
    assert "bad_cookie.py::h" in idx.graph
    assert any("non-UTF-8" in m for m in errors_of(idx, "bad_cookie.py"))


def test_binary_and_oversized_files_are_skipped_with_a_reason(tmp_path: Path) -> None:
    write_tree(tmp_path / "ws", {
        "ok.py": "def f():\n    pass\n",
        "blob.py": b"\x00\x01\x02binary\x00" * 10,
        "huge.py": "x = 1\n" * 200,
    })
    idx = build_index(tmp_path / "ws", tmp_path / "cache", flt=FileFilter(max_bytes=1000))
    assert set(idx.facts) == {"ok.py"}
    assert any("binary" in m for m in errors_of(idx, "blob.py"))
    assert any("over the 1000-byte limit" in m for m in errors_of(idx, "huge.py"))


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlink_loops_and_links_leaving_the_workspace_are_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    write_tree(root, {"pkg/__init__.py": "", "pkg/mod.py": "def f():\n    pass\n"})
    write_tree(outside, {"secret.py": "def leaked():\n    pass\n", "sub/other.py": "def also():\n    pass\n"})
    os.symlink(root / "pkg", root / "pkg" / "loop")  # a directory loop
    os.symlink(root, root / "self")  # the root inside itself
    os.symlink(outside / "secret.py", root / "pkg" / "secret.py")  # a file leaving the workspace
    os.symlink(outside / "sub", root / "outdir")  # a directory leaving the workspace
    os.symlink(root / "missing.py", root / "dangling.py")
    os.symlink(root / "loopb.py", root / "loopa.py")
    os.symlink(root / "loopa.py", root / "loopb.py")
    os.symlink(root / "pkg" / "mod.py", root / "alias.py")  # a file link inside the workspace: fine
    found = discover(root)
    assert sorted(found.files) == ["alias.py", "pkg/__init__.py", "pkg/mod.py"]
    reasons = dict(found.skipped)
    assert reasons["pkg/secret.py"] == "symlink leaves the workspace"
    assert reasons["dangling.py"] == reasons["loopa.py"] == "broken or looping symlink"
    assert "not followed" in reasons["pkg/loop"]
    idx = build_index(root, tmp_path / "cache")
    assert not any("leaked" in n.id or "also" in n.id for n in idx.graph.nodes())


def test_file_deleted_while_indexing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    write_tree(root, {"a.py": "def f():\n    pass\n", "gone.py": "def g():\n    pass\n"})
    assert read_source(root, "nothere.py").reason == "skipped: deleted while indexing"
    real = discover(root)

    def racing_discover(r: Path, flt: FileFilter | None = None) -> Discovery:
        (root / "gone.py").unlink(missing_ok=True)  # deleted between discovery and reading
        return real

    monkeypatch.setattr(index_mod, "discover", racing_discover)
    idx = build_index(root, tmp_path / "cache")
    assert set(idx.facts) == {"a.py"}
    assert errors_of(idx, "gone.py") == ["skipped: deleted while indexing"]


def test_empty_files(tmp_path: Path) -> None:
    write_tree(tmp_path / "ws", {"pkg/__init__.py": "", "pkg/empty.py": "", "pkg/blank.py": "\n\n   \n",
                                 "use.py": "from pkg import empty\nimport pkg.blank\n"})
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    assert idx.errors() == []
    for p in ("pkg/__init__.py", "pkg/empty.py", "pkg/blank.py"):
        node = idx.graph.node(p)
        assert node is not None and node.kind == "file" and node.start_line == 1
    assert out_targets(idx, "use.py", "IMPORTS") == {"pkg/__init__.py", "pkg/empty.py", "pkg/blank.py"}


def test_namespace_packages(tmp_path: Path) -> None:
    write_tree(tmp_path / "ws", {
        "ns/inner/impl.py": "class Thing:\n    def go(self):\n        pass\n",
        "ns/inner/use.py": "from ns.inner.impl import Thing\nfrom . import impl\n\n"
                           "def run():\n    Thing().go()\n    impl.Thing()\n",
        "client.py": "import ns.inner.impl as m\n\ndef c():\n    return m.Thing()\n",
    })
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    assert out_targets(idx, "ns/inner/use.py::run", "CALLS") == {"ns/inner/impl.py::Thing.go"}
    assert out_targets(idx, "ns/inner/use.py::run", "INSTANTIATES") == {"ns/inner/impl.py::Thing"}
    assert out_targets(idx, "client.py::c", "INSTANTIATES") == {"ns/inner/impl.py::Thing"}
    assert idx.resolution_counts()["unresolved"] == 0


def test_guarded_imports(tmp_path: Path) -> None:
    write_tree(tmp_path / "ws", {
        "fast.py": "def dumps(x):\n    return x\n",
        "types_only.py": "class Model:\n    def save(self):\n        pass\n",
        "user.py": (
            "from typing import TYPE_CHECKING\n"
            "try:\n    from fast import dumps\nexcept ImportError:\n    from json import dumps\n"
            "if TYPE_CHECKING:\n    from types_only import Model\n\n"
            "def go(m: 'Model'):\n    m.save()\n    return dumps(m)\n"
        ),
    })
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    guards = {i.name: i.guarded for i in idx.facts["user.py"].imports}
    assert guards == {"TYPE_CHECKING": "", "dumps": "try", "Model": "type_checking"}
    assert out_targets(idx, "user.py::go", "CALLS") == {"types_only.py::Model.save", "fast.py::dumps"}
    assert out_targets(idx, "user.py", "IMPORTS") == {"fast.py", "types_only.py"}


def test_star_imports(tmp_path: Path) -> None:
    write_tree(tmp_path / "ws", {
        "pkg/__init__.py": "from .core import *\nfrom .extra import *\n",
        "pkg/core.py": "__all__ = ['public']\n\ndef public():\n    pass\n\ndef hidden():\n    pass\n",
        "pkg/extra.py": "def more():\n    pass\n\ndef _private():\n    pass\n",
        "app.py": (
            "from pkg import *\nfrom os.path import *\n\n"
            "def go():\n    public()\n    more()\n    hidden()\n    _private()\n    join('a', 'b')\n"
        ),
    })
    idx = build_index(tmp_path / "ws", tmp_path / "cache")
    assert out_targets(idx, "app.py::go", "CALLS") == {"pkg/core.py::public", "pkg/extra.py::more"}
    facts = idx.facts["app.py"]
    unresolved = {facts.sites[i].chain for i in idx.bindings["app.py"].unresolved}
    # hidden/_private are not exported; join may come from the external star import: unknown, not wrong
    assert unresolved == {("hidden",), ("_private",), ("join",)}
