"""`ctx-lsp serve` over raw stdio when the client goes away without `exit`: it closed the connection
(killed, crashed) while a large workspace is still being indexed, or the process named in
initialize's `processId` is gone while something else holds the pipes open."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="forked workers and /proc")

SERVER = [sys.executable, "-m", "ctx_lsp", "serve"]


def send(pipe: IO[bytes], msg: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **msg}).encode()
    pipe.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    pipe.flush()


def read(pipe: IO[bytes]) -> dict[str, Any]:
    length = 0
    while (line := pipe.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(pipe.read(length))


def start(ws: Path, cache: Path, process_id: int | None) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "CTX_LSP_CACHE_DIR": str(cache)})
    assert proc.stdin is not None and proc.stdout is not None
    send(proc.stdin, {"id": 1, "method": "initialize", "params": {
        "processId": process_id, "rootUri": ws.as_uri(), "workspaceFolders": [{"uri": ws.as_uri(), "name": "ws"}],
        "capabilities": {"window": {"workDoneProgress": True}}, "initializationOptions": {"jediRefinement": False}}})
    while read(proc.stdout).get("id") != 1:
        pass
    send(proc.stdin, {"method": "initialized", "params": {}})
    return proc


def test_a_client_that_closes_the_connection_mid_indexing_ends_the_server_at_once(tmp_path: Path) -> None:
    """Not after the build finishes (pygls' loop would wait for it in its executor)."""
    ws = tmp_path / "ws"
    body = "".join(f"\n\ndef f{j}(x):\n    return g{j}(x) + f{max(j - 1, 0)}(x)\n" for j in range(60))
    for i in range(1500):
        d = ws / f"pkg{i // 100}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"m{i}.py").write_text(f"from pkg0.m0 import f0 as g0\n{body}")
    proc = start(ws, tmp_path / "cache", None)
    assert proc.stdin is not None and proc.stdout is not None
    while True:  # the build has begun
        msg = read(proc.stdout)
        if msg.get("method") == "$/progress" and msg["params"]["value"].get("kind") == "begin":
            break
        if msg.get("method") == "window/workDoneProgress/create":
            send(proc.stdin, {"id": msg["id"], "result": None})
    t = time.monotonic()
    proc.stdin.close()
    proc.wait(timeout=60)
    left = time.monotonic() - t
    alone = subprocess.run([sys.executable, "-m", "ctx_lsp", "index", "--json", "--root", str(ws), "--cache-dir",
                            str(tmp_path / "c2")], capture_output=True, timeout=300)
    build = json.loads(alone.stdout)["seconds"]  # what waiting for the build would have cost
    assert left < build / 2, f"the server took {left:.1f} s to leave; the build takes {build:.1f} s"
    assert proc.returncode == 0


def test_the_server_leaves_when_the_process_named_in_initialize_is_gone(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "a.py").write_text("def f():\n    return 1\n")
    parent = subprocess.Popen(["sleep", "120"])
    proc = start(ws, tmp_path / "cache", parent.pid)
    time.sleep(0.5)
    assert proc.poll() is None  # the client is alive: so is the server
    parent.kill()
    parent.wait()
    proc.wait(timeout=15)  # within its poll interval (2 s), though the pipes stay open here
    assert proc.returncode == 1
    assert proc.stdin is not None
    proc.stdin.close()
