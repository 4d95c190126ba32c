"""Persistence: the versioned msgpack cache, rejected caches, warm starts and the cache location."""

from __future__ import annotations

import logging
import os
import zlib
from pathlib import Path

import msgpack
import pytest
from conftest import write_tree

from ctx_lsp.index import store as store_mod
from ctx_lsp.index.store import CACHE_ENV, MAGIC, default_cache_dir
from ctx_lsp.index.workspace import WorkspaceIndex

FILES = {
    "pkg/__init__.py": "from .a import A\n",
    "pkg/a.py": "class A:\n    def run(self):\n        return helper()\n\n\ndef helper():\n    return 1\n",
    "pkg/b.py": "from .a import A\n\n\nclass B(A):\n    def run(self):\n        return super().run()\n",
    "main.py": "from pkg.b import B\n\n\ndef main():\n    B().run()\n",
}


@pytest.fixture
def ws(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "ws"
    write_tree(root, FILES)
    return root, tmp_path / "cache"


def built(root: Path, cache: Path) -> WorkspaceIndex:
    idx = WorkspaceIndex(root, cache_dir=cache, workers=1)
    idx.load_or_build()
    return idx


def cache_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_warm_start_reads_nothing_then_only_the_touched_file(ws: tuple[Path, Path]) -> None:
    root, cache = ws
    cold = built(root, cache)
    assert (cache / "index.msgpack").is_file()
    warm = WorkspaceIndex(root, cache_dir=cache, workers=1)
    report = warm.load_or_build()
    assert report.warm and report.extracted == 0 and report.rebound == 0
    assert warm.graph.snapshot() == cold.graph.snapshot()
    assert warm.facts == cold.facts, "facts survive the cache round trip exactly (tuples stay tuples)"
    assert {p: (b.edges, b.deps, b.internal, b.external, b.unresolved) for p, b in warm.bindings.items()} == \
        {p: (b.edges, b.deps, b.internal, b.external, b.unresolved) for p, b in cold.bindings.items()}

    p = root / "pkg/a.py"
    st = p.stat()
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # touched, content unchanged
    touched = WorkspaceIndex(root, cache_dir=cache, workers=1)
    report = touched.load_or_build()
    assert report.warm and report.extracted == 0 and report.rebound == 0 and touched.kept == 1  # read, not parsed

    p.write_text(FILES["pkg/a.py"].replace("return 1", "return 2"))  # body-only edit
    again = WorkspaceIndex(root, cache_dir=cache, workers=1)
    report = again.load_or_build()
    assert report.warm and report.extracted == 1 and report.rebound == 1
    assert again.graph.snapshot() == built(root, cache.parent / "fresh").graph.snapshot()


def test_a_loaded_binding_holds_each_distinct_string_of_its_edges_once(ws: tuple[Path, Path]) -> None:
    """The cache stores a binding's edges as rows into its string table: loaded, they equal the bound
    ones, and edges that share an id, kind, path or resolver share one string object."""
    root, cache = ws
    cold = built(root, cache)
    warm = WorkspaceIndex(root, cache_dir=cache, workers=1)
    warm.load_or_build()
    edges = warm.bindings["pkg/b.py"].edges
    assert edges == cold.bindings["pkg/b.py"].edges and len(edges) >= 3
    for field in ("src", "kind", "path", "resolver"):
        values = [getattr(e, field) for e in edges]
        assert len({id(v) for v in values}) == len(set(values)), field
    srcs = [e.src for e in edges if e.src == "pkg/b.py::B.run"]
    assert len(srcs) >= 2 and all(s is srcs[0] for s in srcs)


def test_a_warm_start_unpacks_defs_sites_flows_terms_and_dependencies_only_when_they_are_read(
        ws: tuple[Path, Path]) -> None:
    root, cache = ws
    cold = built(root, cache)
    warm = WorkspaceIndex(root, cache_dir=cache, workers=1)
    warm.load_or_build()
    assert all(f.packed_sites is not None for f in warm.facts.values()), "nothing read them yet"
    assert all(f.packed_flows is not None for f in warm.facts.values())
    assert all(f.packed_terms is not None for f in warm.facts.values())
    assert all(f.def_rows is not None for f in warm.facts.values()), "the graph's nodes came from the rows"
    assert warm.graph.snapshot() == cold.graph.snapshot()
    assert all(b.packed is not None for b in warm.bindings.values())
    assert warm.bindings == cold.bindings, "equal once read"
    assert all(b.packed is None for b in warm.bindings.values())
    assert {p: f.flows for p, f in warm.facts.items()} == {p: f.flows for p, f in cold.facts.items()}
    assert all(f.packed_flows is None for f in warm.facts.values())
    a = warm.facts["pkg/a.py"]
    assert a.sites == cold.facts["pkg/a.py"].sites and a.sites, "unpacked on first read, equal to the cold ones"
    assert a.packed_sites is None and warm.facts["pkg/b.py"].packed_sites is not None

    b_facts = warm.facts["pkg/b.py"]
    assert b_facts.defs == cold.facts["pkg/b.py"].defs and b_facts.defs and b_facts.def_rows is None
    assert b_facts.terms == cold.facts["pkg/b.py"].terms and b_facts.packed_terms is None
    assert warm.facts["main.py"].def_rows is not None

    warm.save()  # packed sites are written as they are, read ones packed again
    again = WorkspaceIndex(root, cache_dir=cache, workers=1)
    assert again.load_or_build().warm
    assert again.facts == cold.facts

    (root / "pkg/a.py").write_text(FILES["pkg/a.py"].replace("return helper()", "return helper() + other()"))
    assert again.update_file("pkg/a.py", (root / "pkg/a.py").read_text()) >= 1  # a re-bind reads sites
    assert again.graph.snapshot() == built(root, cache.parent / "fresh").graph.snapshot()


def test_a_warm_start_builds_the_module_tables_only_when_they_are_read(ws: tuple[Path, Path]) -> None:
    """The module tables are built on first read, equal to the ones a cold build made; an edit before
    and after that read binds as a scratch build would."""
    root, cache = ws
    cold = built(root, cache)
    warm = WorkspaceIndex(root, cache_dir=cache, workers=1)
    warm.load_or_build()
    assert len(warm.ws.info) == 0 and "pkg/b.py" in warm.ws.info, "nothing read them yet; every file answers"
    text = FILES["pkg/a.py"].replace("return helper()", "return helper() + other()")
    (root / "pkg/a.py").write_text(text)
    assert warm.update_file("pkg/a.py", text) >= 1  # the re-bind reads them
    assert 0 < len(warm.ws.info) < len(warm.facts), "the re-bind built the tables it read, not every one"
    assert warm.ws.info["pkg/a.py"].facts is warm.facts["pkg/a.py"]
    assert warm.ws.info["pkg/b.py"].top == cold.ws.info["pkg/b.py"].top
    assert warm.ws.info["pkg/b.py"].bound == cold.ws.info["pkg/b.py"].bound
    assert warm.graph.snapshot() == built(root, cache.parent / "fresh").graph.snapshot()
    (root / "pkg/a.py").write_text(FILES["pkg/a.py"])
    warm.update_file("pkg/a.py", FILES["pkg/a.py"])  # the built tables are updated in place
    assert warm.graph.snapshot() == cold.graph.snapshot()


def test_warm_start_sees_added_and_removed_files(ws: tuple[Path, Path]) -> None:
    root, cache = ws
    built(root, cache)
    (root / "pkg/b.py").unlink()
    write_tree(root, {"pkg/c.py": "from .a import helper\n\n\ndef c():\n    return helper()\n"})
    warm = WorkspaceIndex(root, cache_dir=cache, workers=1)
    report = warm.load_or_build()
    assert report.warm and report.extracted == 1
    assert "pkg/b.py" not in warm.facts and "pkg/c.py::c" in warm.graph
    assert warm.graph.snapshot() == built(root, cache.parent / "fresh").graph.snapshot()


def _rejected(root: Path, cache: Path, caplog: pytest.LogCaptureFixture) -> WorkspaceIndex:
    """Open with a damaged cache: exactly one warning, a cold rebuild equal to a fresh one, a good cache after."""
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        idx = WorkspaceIndex(root, cache_dir=cache, workers=1)
        report = idx.load_or_build()
    warnings = cache_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert "rebuilding" in warnings[0]
    assert not report.warm and report.extracted == len(FILES)
    assert idx.graph.snapshot() == built(root, cache.parent / "fresh").graph.snapshot()
    assert WorkspaceIndex(root, cache_dir=cache, workers=1).load_or_build().warm, "the rebuilt cache is valid"
    return idx


def test_cache_from_another_version_is_discarded(ws: tuple[Path, Path], caplog: pytest.LogCaptureFixture,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    root, cache = ws
    built(root, cache)
    monkeypatch.setattr(store_mod, "SCHEMA", store_mod.SCHEMA + 1)
    _rejected(root, cache, caplog)
    monkeypatch.setattr(store_mod, "__version__", "0.0.0-other")
    _rejected(root, cache, caplog)


def test_truncated_cache_is_discarded(ws: tuple[Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    root, cache = ws
    built(root, cache)
    f = cache / "index.msgpack"
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    _rejected(root, cache, caplog)
    f.write_bytes(b"")
    _rejected(root, cache, caplog)


def test_corrupt_cache_is_discarded(ws: tuple[Path, Path], caplog: pytest.LogCaptureFixture) -> None:
    root, cache = ws
    built(root, cache)
    f = cache / "index.msgpack"
    f.write_bytes(b"\xc1\xff garbage \x00" * 50)
    _rejected(root, cache, caplog)


def _sealed(data: dict) -> bytes:  # type: ignore[type-arg]
    """A cache file holding `data` with a matching checksum, as the store writes it."""
    body = msgpack.packb(data, use_bin_type=True)
    return MAGIC + zlib.crc32(body).to_bytes(4, "big") + body


def test_well_formed_msgpack_with_a_broken_entry_is_discarded(ws: tuple[Path, Path],
                                                              caplog: pytest.LogCaptureFixture) -> None:
    """Behind the checksum, the payload's shape is checked too (a writer's bug must not crash the start)."""
    root, cache = ws
    built(root, cache)
    f = cache / "index.msgpack"
    data = msgpack.unpackb(f.read_bytes()[len(MAGIC) + 4:], raw=False, strict_map_key=False)
    files = msgpack.unpackb(data["files"], raw=False, strict_map_key=False)  # the per-file payload blob
    files["pkg/a.py"][3] = files["pkg/a.py"][3][:2]  # facts cut short: header and version are fine
    data["files"] = msgpack.packb(files, use_bin_type=True)
    f.write_bytes(_sealed(data))
    _rejected(root, cache, caplog)
    for payload in (["not", "a", "map"], {"pkg/a.py": "not an entry"}, b"\xc1 not msgpack"):
        data["files"] = payload if isinstance(payload, bytes) else msgpack.packb(payload, use_bin_type=True)
        f.write_bytes(_sealed(data))
        _rejected(root, cache, caplog)


def test_a_valid_cache_rewritten_without_its_checksum_is_discarded(ws: tuple[Path, Path],
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    root, cache = ws
    built(root, cache)
    f = cache / "index.msgpack"
    raw = f.read_bytes()
    f.write_bytes(raw[len(MAGIC) + 4:])  # the same map, no prefix: an older format
    _rejected(root, cache, caplog)
    built(root, cache)
    raw = bytearray(f.read_bytes())
    raw[len(MAGIC)] ^= 0xFF  # the checksum itself damaged
    f.write_bytes(bytes(raw))
    _rejected(root, cache, caplog)


def test_cache_of_another_workspace_is_discarded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_tree(a, FILES)
    write_tree(b, FILES)
    built(a, tmp_path / "cache")
    _rejected(b, tmp_path / "cache", caplog)


def test_default_cache_dir_is_keyed_by_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    a, b = tmp_path / "one" / "proj", tmp_path / "two" / "proj"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    da, db = default_cache_dir(a), default_cache_dir(b)
    assert da != db and da.name.startswith("proj-") and db.name.startswith("proj-")
    assert default_cache_dir(tmp_path / "one" / ".." / "one" / "proj") == da  # the same place, however spelled
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "envcache"))
    assert default_cache_dir(a).parent == tmp_path / "envcache"
    assert default_cache_dir(a).name == da.name
    idx = WorkspaceIndex(a)
    assert idx.cache_dir == tmp_path / "envcache" / da.name
    explicit = WorkspaceIndex(a, cache_dir=tmp_path / "explicit")
    assert explicit.cache_dir == tmp_path / "explicit"


def test_nothing_is_written_outside_the_cache_dir(ws: tuple[Path, Path]) -> None:
    root, cache = ws
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    idx = built(root, cache)
    idx.update_file("pkg/a.py", FILES["pkg/a.py"] + "\n\ndef more():\n    pass\n")
    idx.save()
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert sorted(p.name for p in cache.iterdir()) == ["index.msgpack", "states.msgpack"]


_BACKGROUND_SCRIPT = """
import os, sys, time
from pathlib import Path
from ctx_lsp.index.workspace import WorkspaceIndex

root, cache, fail_child = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "fail"
parent = os.getpid()
if fail_child:  # the forked writer dies; the parent must notice and write the cache itself
    real = WorkspaceIndex._write_cache
    def flaky(self):
        if os.getpid() != parent:
            raise RuntimeError("disk on fire")
        real(self)
    WorkspaceIndex._write_cache = flaky
idx = WorkspaceIndex(root, cache_dir=cache, workers=1)
idx.background_save = True
idx.load_or_build()
print("forked" if idx._saver else "inline", flush=True)
idx.update_file("pkg/a.py", "def helper():\\n    return 2\\n")
idx.save(background=True)  # waits for the first write, then writes again: never two at once
print("answered", flush=True)
"""


@pytest.mark.parametrize("child", ["ok", "fail"])
def test_a_background_save_answers_first_and_the_process_exits_with_its_cache_written(
        ws: tuple[Path, Path], child: str) -> None:
    import subprocess
    import sys

    root, cache = ws
    out = subprocess.run([sys.executable, "-c", _BACKGROUND_SCRIPT, str(root), str(cache), child],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["forked", "answered"]  # the child never repeats the parent's output
    if child == "fail":
        assert "writing it in process" in out.stderr
    # the cache holds the last state, complete: a fresh index starts warm and reads nothing
    warm = WorkspaceIndex(root, cache_dir=cache, workers=1)
    report = warm.load_or_build()
    assert report.warm and report.extracted == 0
    assert [n.qualname for n in warm.graph.nodes() if n.path == "pkg/a.py" and n.qualname] == ["helper"]
    assert not list(cache.glob("*.tmp*"))


_DROPPED_SCRIPT = """
import os, sys, time
from pathlib import Path
from ctx_lsp.index.workspace import WorkspaceIndex

parent = os.getpid()
real = WorkspaceIndex._write_cache
def slow(self, **kwargs):
    if os.getpid() != parent:
        time.sleep(1.0)  # a writer still busy when the process is about to exit
    real(self, **kwargs)
WorkspaceIndex._write_cache = slow

def build():  # the index is dropped when this returns, as in the CLI's commands
    idx = WorkspaceIndex(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]), workers=1)
    idx.background_save = True
    idx.load_or_build()
    return idx._saver is not None
forked = build()
import gc
gc.unfreeze()
gc.collect()  # the index is gone now, whatever cycles held it
print("forked" if forked else "inline", flush=True)
"""


def test_the_process_waits_for_its_cache_writer_even_after_dropping_the_index(ws: tuple[Path, Path]) -> None:
    import subprocess
    import sys

    root, cache = ws
    log = cache.parent / "dropped.log"
    with open(log, "w") as fh:  # not a pipe: a pipe's reader would wait for the writer too, hiding an orphan
        code = subprocess.run([sys.executable, "-c", _DROPPED_SCRIPT, str(root), str(cache)],
                              stdout=fh, stderr=subprocess.STDOUT, timeout=60).returncode
    assert code == 0 and log.read_text().split() == ["forked"], log.read_text()
    assert (cache / "index.msgpack").is_file()  # written before the process exited, not after
    assert WorkspaceIndex(root, cache_dir=cache, workers=1).load_or_build().warm
