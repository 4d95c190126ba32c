"""Damaged state and hostile arguments (issue 20, defects 6, 7, 9, 10, 11, 12), through real processes.

A damaged index cache or episodic memory must be repaired (answers equal a fresh index's, one log line),
a file name that is not UTF-8 must not fail the index, and bad paths or `serve` flags must give a
one-line error with exit status 2 (CLI) or the reason as the tool error (MCP), never a traceback.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
from conftest import FIXTURES, TESTS
from test_mcp import err, mcp_session, ok

from ctx_lsp.index.store import IndexStore

EDGES = FIXTURES / "edges"
RETRIEVAL = FIXTURES / "retrieval_ws"


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctx_lsp", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ, **(env or {})})


def no_traceback(p: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in p.stderr, p.stderr


def answer(p: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for timing in ("seconds", "phases_s"):
        out.pop(timing, None)
    return out


# -- 6: a damaged index cache ----------------------------------------------------------------------
def _body_offset(raw: bytes) -> int:
    """Where the msgpack map starts: after the store's prefix when there is one (see ctx_lsp/store.py)."""
    try:
        msgpack.unpackb(raw, raw=False, strict_map_key=False)
        return 0
    except Exception:
        return raw.index(b"\n") + 5  # MAGIC ends with a newline, then 4 bytes of CRC-32


def _decode(raw: bytes) -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    off = _body_offset(raw)
    outer = msgpack.unpackb(raw[off:], raw=False, strict_map_key=False)
    files = msgpack.unpackb(outer["files"], raw=False, strict_map_key=False)
    return raw[:off], outer, files


def _retyped(mutate: Callable[[dict[str, Any], dict[str, Any]], None]) -> Callable[[bytes], bytes]:
    """A damage that rewrites the cache with valid msgpack whose values have the wrong types, as another
    tool editing the file would: the prefix (if any) is kept as it was."""
    def damage(raw: bytes) -> bytes:
        prefix, outer, files = _decode(raw)
        mutate(outer, files)
        outer["files"] = msgpack.packb(files, use_bin_type=True)
        return prefix + msgpack.packb(outer, use_bin_type=True)
    return damage


def _first(files: dict[str, Any], path: str) -> list[Any]:
    return files[path]


def _set_lines(o: dict[str, Any], f: dict[str, Any]) -> None:  # the case: line count as a string
    _first(f, "main.py")[3][2] = "12"


def _set_def_start(o: dict[str, Any], f: dict[str, Any]) -> None:
    _first(f, "main.py")[3][3][0][2] = "1"


def _set_site_chain(o: dict[str, Any], f: dict[str, Any]) -> None:
    facts = _first(f, "main.py")[3]
    sites = msgpack.unpackb(facts[5], raw=False)  # a file's sites are packed apart (unpacked on first read)
    sites[0][3] = 7
    facts[5] = msgpack.packb(sites, use_bin_type=True)


def _set_import_name(o: dict[str, Any], f: dict[str, Any]) -> None:
    _first(f, "main.py")[3][4][0][3] = {"x": 1}


def _set_edge_line(o: dict[str, Any], f: dict[str, Any]) -> None:
    _first(f, "main.py")[4][1][0][4] = "3"


def _set_deps(o: dict[str, Any], f: dict[str, Any]) -> None:
    _first(f, "main.py")[4][2] = 5


def _set_flow(o: dict[str, Any], f: dict[str, Any]) -> None:
    o["flow"] = [[1, 2, 3, 4, 5, 6, 7, [8]]]


def _set_extra(o: dict[str, Any], f: dict[str, Any]) -> None:
    o["extra"] = {"history": [1, 2]}


RETYPED = {"lines-as-str": _set_lines, "def-start-as-str": _set_def_start, "site-chain-as-int": _set_site_chain,
           "import-module-as-map": _set_import_name, "edge-line-as-str": _set_edge_line, "deps-as-int": _set_deps,
           "flow-edge-of-ints": _set_flow, "extra-state-reshaped": _set_extra}


def _flips(seed: int, count: int) -> Callable[[bytes], bytes]:
    """Flip random bytes until the cache is still valid msgpack, outer map and inner payload alike."""
    def damage(raw: bytes) -> bytes:
        rng = random.Random(seed)
        off = _body_offset(raw)
        for _ in range(10_000):
            buf = bytearray(raw)
            for _ in range(count):
                i = rng.randrange(off, len(buf))
                buf[i] ^= 1 << rng.randrange(8)
            try:
                _decode(bytes(buf))
            except Exception:
                continue
            if bytes(buf) != raw:
                return bytes(buf)
        raise AssertionError("no valid-msgpack mutation found")
    return damage


DAMAGES: dict[str, Callable[[bytes], bytes]] = {
    **{name: _retyped(fn) for name, fn in RETYPED.items()},
    **{f"flips-{seed}x{n}": _flips(seed, n) for seed, n in ((1, 1), (2, 1), (3, 1), (4, 2), (5, 3))},
    "truncated": lambda raw: raw[: len(raw) // 2],
}


@pytest.fixture(scope="module")
def damaged_world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A workspace whose cache was written, then one file edited (so the warm start re-binds it, the
    path where a damaged binding used to crash), and the answers of a fresh index of the edited tree."""
    base = tmp_path_factory.mktemp("damaged")
    ws = base / "ws"
    shutil.copytree(EDGES, ws)
    built = base / "built"
    assert run("index", "--root", str(ws), "--cache-dir", str(built), cwd=base).returncode == 0
    with (ws / "main.py").open("a", encoding="utf-8") as f:
        f.write("\n\ndef added_later():\n    return local_override()\n")
    fresh_dir = base / "fresh"
    fresh = answer(run("index", "--json", "--root", str(ws), "--cache-dir", str(fresh_dir), cwd=base))
    return {"base": base, "ws": ws, "raw": (built / "index.msgpack").read_bytes(), "fresh": fresh,
            "fresh_files": IndexStore(fresh_dir).load(ws)["files"]}  # type: ignore[index]


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_cache_is_discarded_and_answers_equal_a_fresh_index(damaged_world: dict[str, Any], damage: str) -> None:
    w = damaged_world
    cache = w["base"] / f"case-{damage}"
    cache.mkdir()
    damaged = DAMAGES[damage](w["raw"])
    assert damaged != w["raw"]
    (cache / "index.msgpack").write_bytes(damaged)
    p = run("index", "--json", "--root", str(w["ws"]), "--cache-dir", str(cache), cwd=w["base"])
    no_traceback(p)
    assert answer(p) == w["fresh"]
    # the one log line the docs promise, and a repaired cache that holds what a fresh index holds
    lines = [line for line in p.stderr.splitlines() if "cache" in line]
    assert len(lines) == 1 and "cache corrupt, rebuilding" in lines[0], p.stderr
    assert IndexStore(cache).load(w["ws"])["files"] == w["fresh_files"]  # type: ignore[index]
    again = run("index", "--json", "--root", str(w["ws"]), "--cache-dir", str(cache), cwd=w["base"])
    assert answer(again) == w["fresh"] and "cache" not in again.stderr, again.stderr


# -- 7: damaged episodic memory ----------------------------------------------------------------------
def test_damaged_episodic_memory_keeps_the_good_episodes_and_is_rewritten(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(RETRIEVAL, ws)
    cache = tmp_path / "cache"
    common = ("--root", str(ws), "--cache-dir", str(cache))
    assert run("context", "--json", *common, "what implements BaseRepository", cwd=tmp_path).returncode == 0
    log = cache / "episodes.jsonl"
    good = log.read_bytes()
    assert good.count(b"\n") == 1
    with log.open("ab") as f:
        f.write(b"\xff\xfe\x00 not json\n")
        f.write(b'{"t": 1}\n[1, 2]\n"text"\n{"query": "q", "items": [1]}\n{"query": 5, "items": []}\n')
        f.write(b"[" * 100_000 + b"\n")
        f.write(good[: len(good) // 2])  # a write cut short: no newline
    p = run("context", "--json", *common, "the class we looked at before", cwd=tmp_path)
    no_traceback(p)
    assert p.returncode == 0, p.stderr
    pack = json.loads(p.stdout)
    assert pack["plan"]["trigger"] == "TEMPORAL_HISTORY"
    assert any(r["via"] == "episodic-memory" for i in pack["items"] for r in i["reasons"]), pack["items"]
    assert "BaseRepository" in [i["symbol"] for i in pack["items"]][:3]
    warnings = [line for line in p.stderr.splitlines() if "episodic memory" in line]
    assert len(warnings) == 1 and "dropped 8 bad lines" in warnings[0], p.stderr
    # rewritten: the good episode, then this run's own, nothing else
    lines = log.read_bytes().splitlines()
    assert lines[0] == good.rstrip(b"\n") and len(lines) == 2
    assert [json.loads(line)["query"] for line in lines] == ["what implements BaseRepository",
                                                             "the class we looked at before"]
    third = run("context", "--json", *common, "the class we looked at before", cwd=tmp_path)
    assert third.returncode == 0 and "episodic memory" not in third.stderr, third.stderr
    assert len(log.read_bytes().splitlines()) == 3


# -- 9: a file name that is not UTF-8 -----------------------------------------------------------------
def test_non_utf8_file_name_is_skipped_with_a_reason_and_never_fails_the_index(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(EDGES, ws)
    name = os.fsdecode(b"caf\xe9.py")
    (ws / name).write_text("from main import local_override\n\ndef cafe():\n    return local_override()\n")
    (ws / os.fsdecode(b"d\xe9j\xe0")).mkdir()
    (ws / os.fsdecode(b"d\xe9j\xe0") / "vu.py").write_text("def vu():\n    pass\n")
    # with .gitignore patterns (and --exclude globs below) to match such names against: pathspec's re2
    # backend (the `fast` extra) takes UTF-8 only, and every command failed with a traceback there
    (ws / ".gitignore").write_text("*.pyc\nbuild/\n")
    (ws / os.fsdecode(b"d\xe9j\xe0") / ".gitignore").write_text("ignored_*.py\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(ws)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):  # history sees the name too
        subprocess.run([*git, *args], check=True, capture_output=True)
    cache = tmp_path / "cache"
    strict = {"PYTHONIOENCODING": "utf-8:strict"}  # a terminal that cannot print lone surrogates
    for _ in range(2):  # a cold build, then a warm start from the cache it wrote
        p = run("index", "--json", "--root", str(ws), "--cache-dir", str(cache), cwd=tmp_path, env=strict)
        no_traceback(p)
        out = answer(p)
        reasons = {e["path"]: e["message"] for e in out["errors"]}
        assert reasons["caf\\xe9.py"] == "skipped: file name is not valid UTF-8"
        assert reasons["d\\xe9j\\xe0/vu.py"] == "skipped: file name is not valid UTF-8"
        assert out["files"] == sum(1 for _ in EDGES.rglob("*.py"))
    text = run("index", "--root", str(ws), "--cache-dir", str(cache), cwd=tmp_path, env=strict)
    assert text.returncode == 0, text.stderr
    nb = run("neighbors", "main.py", "--root", str(ws), "--cache-dir", str(cache), cwd=tmp_path, env=strict)
    assert nb.returncode == 0 and "Traceback" not in nb.stderr, nb.stderr
    excluded = run("index", "--json", "--root", str(ws), "--cache-dir", str(tmp_path / "cache2"), "--exclude", "build/",
                   "--include", "*.py", cwd=tmp_path, env=strict)
    no_traceback(excluded)
    assert "caf\\xe9.py" in {e["path"] for e in answer(excluded)["errors"]}


# -- 10: paths the file system refuses -----------------------------------------------------------------
@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("paths")
    ws = base / "ws"
    shutil.copytree(EDGES, ws)
    assert run("index", "--root", str(ws), "--cache-dir", str(base / "cache"), cwd=base).returncode == 0
    return ws, base / "cache"


@pytest.mark.parametrize("target", ["a" * 300 + ".py", "app/" + "b" * 256 + "/x.py", "/" + "c" * 4100 + ".py"],
                         ids=["long-name", "long-directory", "long-absolute"])
def test_neighbors_of_an_unusable_path_is_a_one_line_error(indexed: tuple[Path, Path], target: str) -> None:
    ws, cache = indexed
    p = run("neighbors", target, "--root", str(ws), "--cache-dir", str(cache), cwd=ws)
    no_traceback(p)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("ctx-lsp: error: "), p.stderr
    assert "longer than 255 bytes" in p.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory: EACCES cannot happen")
def test_neighbors_of_a_file_under_an_unreadable_directory_is_a_one_line_error(indexed: tuple[Path, Path]) -> None:
    ws, cache = indexed
    locked = ws / "locked"
    (locked / "sub").mkdir(parents=True)
    locked.chmod(0)
    try:
        p = run("neighbors", "locked/sub/x.py", "--root", str(ws), "--cache-dir", str(cache), cwd=ws.parent)
    finally:
        locked.chmod(0o755)
    no_traceback(p)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr


def test_neighbors_of_an_indexed_file_still_works(indexed: tuple[Path, Path]) -> None:
    ws, cache = indexed
    p = run("neighbors", "--json", "main.py", "--root", str(ws), "--cache-dir", str(cache), cwd=ws.parent)
    assert p.returncode == 0 and json.loads(p.stdout)["target"] == "main.py", p.stderr


# -- 11: bad `serve` flags ------------------------------------------------------------------------------
def _busy_port() -> tuple[socket.socket, str]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s, str(s.getsockname()[1])


@pytest.mark.parametrize("flags, says", [
    (["--log-file", "/no/such/dir/x.log"], "no such directory: /no/such/dir"),
    (["--log-file", str(TESTS)], "is a directory"),
    (["--tcp", "--port", "99999"], "port must be 0-65535"),
    (["--tcp", "--port", "-1"], "port must be 0-65535"),
    (["--tcp", "--port", "http"], "not a port number"),
    (["--tcp", "--port", "BUSY"], "address already in use"),
])
def test_bad_serve_flags_exit_2_with_a_message(tmp_path: Path, flags: list[str], says: str) -> None:
    sock = None
    if "BUSY" in flags:
        sock, port = _busy_port()
        flags = [port if f == "BUSY" else f for f in flags]
    try:
        p = subprocess.run([sys.executable, "-m", "ctx_lsp", "serve", *flags], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL)
    finally:
        if sock is not None:
            sock.close()
    no_traceback(p)
    assert p.returncode == 2, p.stderr
    assert says in p.stderr, p.stderr


# -- 12: MCP paths with a NUL byte or an overlong name --------------------------------------------------
async def test_mcp_gives_the_reason_for_unusable_paths(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURES / "mcp_ws", ws)
    long = "a" * 300 + ".py"
    async with mcp_session(ws, tmp_path / "cache", tmp_path / "err.log") as s:
        cases = [
            ("get_architectural_context", {"file_path": "x\0y.py"}, "NUL byte"),
            ("get_architectural_context", {"file_path": long}, "longer than 255 bytes"),
            ("get_architectural_context", {"file_path": "file:///tmp/" + "b" * 300 + ".py"}, "longer than 255 bytes"),
            ("get_context", {"query": "what is here", "path": "x\0y.py"}, "NUL byte"),
            ("get_context", {"query": "what is here", "path": long}, "longer than 255 bytes"),
            ("find_callers", {"symbol": "x\0y.py::f"}, "NUL byte"),
            ("symbol_history", {"symbol": long}, "longer than 255 bytes"),
        ]
        for tool, args, reason in cases:
            body = await err(s, tool, args)
            assert reason in body, f"{tool}({args!r}): {body}"
        # and the server still answers
        assert await ok(s, "semantic_search", {"query": "config", "top_n": 3})
