"""JSON-RPC 2.0 and LSP lifecycle conformance of `ctx-lsp serve`, spoken as raw Content-Length framed
bytes over the real stdio pipe (pytest-lsp's client cannot send malformed JSON or ill-typed params).

Every request must get an answer with its id (a client must never wait forever): InvalidParams for
params lsprotocol cannot structure, InvalidRequest after `shutdown`, ParseError for unparsable JSON;
and `exit` ends the process with 0 after `shutdown`, 1 without.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "server_ws"
SERVER = [sys.executable, "-m", "ctx_lsp", "serve"]
WAIT_S = 20.0  # a reply slower than this counts as "no reply"
PARSE_ERROR, INVALID_REQUEST, INVALID_PARAMS = -32700, -32600, -32602


class RawClient:
    """A minimal LSP client over the server's stdio: frames bytes, reads frames on a thread."""

    def __init__(self, tmp: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> None:
        self.ws = tmp / "ws"
        shutil.copytree(FIXTURE, self.ws)
        self.cache = tmp / "cache"
        self.stderr = (tmp / "server.log").open("wb")
        self.proc = subprocess.Popen([*SERVER, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **(env or {})})
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.ids = itertools.count(1)
        assert self.proc.stdout is not None
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, out: IO[bytes]) -> None:
        while True:
            length = 0
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            self.inbox.put(json.loads(out.read(length)))

    # -- sending -----------------------------------------------------------------------------------
    def send_body(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_body(json.dumps(message).encode("utf-8"))

    def request(self, method: str, params: Any = None, **extra: Any) -> int:
        msg_id = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params, **extra})
        return msg_id

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- receiving ---------------------------------------------------------------------------------
    def next_response(self) -> dict[str, Any]:
        """The next message that is a response (has no method); notifications are skipped."""
        while True:
            try:
                msg = self.inbox.get(timeout=WAIT_S)
            except queue.Empty:
                raise AssertionError(f"no response within {WAIT_S} s") from None
            if msg is None:
                raise AssertionError(f"the server closed its stdout (exit code {self.proc.poll()})")
            if "method" not in msg:
                return msg

    def next_server_request(self, method: str) -> dict[str, Any]:
        """The next request the server sends (skipping other messages)."""
        while True:
            try:
                msg = self.inbox.get(timeout=WAIT_S)
            except queue.Empty:
                raise AssertionError(f"no {method} request within {WAIT_S} s") from None
            assert msg is not None, "the server closed its stdout"
            if msg.get("method") == method and "id" in msg:
                return msg

    def response(self, msg_id: Any) -> dict[str, Any]:
        msg = self.next_response()
        assert msg.get("id") == msg_id, f"expected the answer to request {msg_id!r}, got {msg}"
        return msg

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        return self.response(self.request(method, params))

    def error(self, msg_id: Any, code: int) -> str:
        msg = self.response(msg_id)
        assert "error" in msg, f"expected error {code}, got {msg}"
        assert msg["error"]["code"] == code, msg
        return str(msg["error"]["message"])

    # -- lifecycle ---------------------------------------------------------------------------------
    def initialize(self, capabilities: dict[str, Any] | None = None) -> None:
        got = self.call("initialize", {
            "processId": os.getpid(), "rootUri": self.ws.as_uri(), "capabilities": capabilities or {},
            "workspaceFolders": [{"uri": self.ws.as_uri(), "name": "ws"}],
            "initializationOptions": {"cacheDir": str(self.cache)}})
        assert "result" in got, got
        self.notify("initialized", {})

    def uri(self, rel: str) -> str:
        return (self.ws / rel).as_uri()

    def wait_exit(self) -> int:
        try:
            return self.proc.wait(timeout=WAIT_S)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the server did not exit within {WAIT_S} s") from None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.stderr.close()


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawClient]:
    client = RawClient(tmp_path)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def live(raw: RawClient) -> RawClient:
    """An initialized server."""
    raw.initialize()
    return raw


def assert_alive(c: RawClient) -> None:
    """The server still answers a well-formed request."""
    got = c.call("workspace/executeCommand", {"command": "ctx.indexStatus", "arguments": []})
    assert "result" in got and got["result"]["folders"], got


def cursor(c: RawClient, uri: str, line: int, character: int = 0) -> dict[str, Any]:
    return {"command": "ctx.contextAtCursor",
            "arguments": [{"uri": uri, "position": {"line": line, "character": character}}]}


# -- 13: params lsprotocol cannot structure ---------------------------------------------------------
@pytest.mark.parametrize(("method", "params", "field"), [
    ("textDocument/prepareCallHierarchy", {"position": {"line": -1, "character": 0}}, "position.line"),
    ("textDocument/prepareCallHierarchy", {"position": {"line": 2**31, "character": 0}}, "position.line"),
    ("textDocument/prepareCallHierarchy", {"position": {"line": 0, "character": "a"}}, "position.character"),
    ("textDocument/codeLens", "abc", None),
    ("textDocument/codeLens", {}, "textDocument"),
    ("workspace/executeCommand", None, None),
], ids=["line=-1", "line=2^31", "character=str", "codeLens-str", "codeLens-empty", "executeCommand-null"])
def test_params_failing_type_validation_get_invalid_params(live: RawClient, method: str, params: Any,
                                                           field: str | None) -> None:
    if isinstance(params, dict) and "position" in params:
        params = {"textDocument": {"uri": live.uri("shop/service.py")}, **params}
    message = live.error(live.request(method, params), INVALID_PARAMS)
    if field is not None:
        assert field in message, message
    assert_alive(live)


def test_a_client_error_is_logged_in_one_line_without_a_traceback(tmp_path: Path) -> None:
    """Bad params are the client's mistake, answered as an error: the server's log file says so in one
    INFO line, not at ERROR with a traceback as if the server had failed; stderr (which editors file as
    errors) gets nothing of it."""
    for args in ((), ("--log-file", str(tmp_path / "file.log"))):
        live = RawClient(tmp_path / str(len(args)), args=args)
        try:
            live.initialize()
            live.error(live.request("workspace/executeCommand", cursor(live, live.uri("shop/service.py"), 2**31)),
                       INVALID_PARAMS)
            live.request("shutdown")
            live.notify("exit")
            assert live.wait_exit() == 0
        finally:
            live.close()
        stderr = (live.ws.parent / "server.log").read_text(encoding="utf-8", errors="replace")
        assert "Traceback" not in stderr and " ERROR " not in stderr and " INFO " not in stderr, stderr
    log = (tmp_path / "file.log").read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in log and " ERROR " not in log, log
    assert sum("answered as an error" in line and " INFO " in line for line in log.splitlines()) == 1, log


def test_invalid_params_keep_a_string_id(live: RawClient) -> None:
    live.send({"jsonrpc": "2.0", "id": "req-7", "method": "textDocument/codeLens", "params": {}})
    live.error("req-7", INVALID_PARAMS)


def test_notification_with_bad_params_is_not_answered(live: RawClient) -> None:
    live.notify("textDocument/didOpen", {"textDocument": "abc"})
    assert_alive(live)  # the next response is the status, not an answer to the notification


def test_unreadable_client_response_does_not_hang_the_server(raw: RawClient) -> None:
    """The server's own request gets an answer it cannot structure: it must not wait for it forever."""
    raw.initialize({"workspace": {"configuration": True}})
    pull = raw.next_server_request("workspace/configuration")
    raw.send({"jsonrpc": "2.0", "id": pull["id"], "result": 5})  # must be a list
    assert_alive(raw)  # requests wait for setup, which waits for the configuration answer


# -- 14: requests after shutdown ----------------------------------------------------------------
def test_requests_after_shutdown_get_invalid_request_then_exit_0(live: RawClient) -> None:
    got = live.call("shutdown")
    assert got.get("result", "missing") is None, got
    message = live.error(live.request("textDocument/codeLens", {"textDocument": {"uri": live.uri("shop/service.py")}}),
                         INVALID_REQUEST)
    assert "shutdown" in message, message
    live.error(live.request("workspace/executeCommand", {"command": "ctx.indexStatus", "arguments": []}),
               INVALID_REQUEST)
    live.error(live.request("shutdown"), INVALID_REQUEST)
    live.notify("exit")
    assert live.wait_exit() == 0


# -- 15: malformed positions and URIs in the ctx commands -----------------------------------------
@pytest.mark.parametrize("method", ["workspace/executeCommand", "ctx/contextAtCursor"])
def test_out_of_range_line_is_invalid_params(live: RawClient, method: str) -> None:
    cmd = cursor(live, live.uri("shop/service.py"), 2**31)
    params = cmd if method == "workspace/executeCommand" else cmd["arguments"][0]
    message = live.error(live.request(method, params), INVALID_PARAMS)
    assert "position.line" in message, message
    assert_alive(live)


def test_uri_with_nul_byte_is_invalid_params(live: RawClient) -> None:
    bad = live.ws.as_uri() + "/shop/serv%00ice.py"
    message = live.error(live.request("workspace/executeCommand", cursor(live, bad, 1)), INVALID_PARAMS)
    assert "'uri'" in message and "NUL" in message, message
    got = live.call("workspace/executeCommand", {"command": "ctx.architecturalContext", "arguments": [{"uri": bad}]})
    assert got.get("error", {}).get("code") == INVALID_PARAMS, got
    got = live.call("textDocument/prepareCallHierarchy",
                    {"textDocument": {"uri": bad}, "position": {"line": 0, "character": 0}})
    assert got.get("error", {}).get("code") == INVALID_PARAMS and "textDocument.uri" in got["error"]["message"], got
    # lenses are asked for every open file: a bad URI gets none, not an error
    got = live.call("textDocument/codeLens", {"textDocument": {"uri": bad}})
    assert got.get("result") == [], got
    live.notify("textDocument/didOpen", {"textDocument": {"uri": bad, "languageId": "python", "version": 1,
                                                          "text": "def f():\n    pass\n"}})
    assert_alive(live)


# -- 16: exit codes -----------------------------------------------------------------------------------
def test_exit_without_shutdown_exits_1(live: RawClient) -> None:
    live.notify("exit")
    assert live.wait_exit() == 1


def test_exit_before_initialize_exits_1(raw: RawClient) -> None:
    raw.notify("exit")
    assert raw.wait_exit() == 1


def test_exit_does_not_wait_for_a_busy_worker_thread(tmp_path: Path) -> None:
    """A retrieval stuck in its worker thread (each checkpoint sleeps 60 s) must not delay `exit`."""
    c = RawClient(tmp_path, env={"CTX_LSP_TEST_CHECKPOINT_DELAY_MS": "60000"})
    try:
        c.initialize()
        c.request("ctx/getContext", {"query": "who calls checkout"})
        time.sleep(1.0)  # let the request reach its first checkpoint
        c.notify("exit")
        assert c.wait_exit() == 1
    finally:
        c.close()


def test_shutdown_then_exit_exits_0(live: RawClient) -> None:
    assert_alive(live)
    assert "result" in live.call("shutdown")
    live.notify("exit")
    assert live.wait_exit() == 0


# -- 17: unparsable JSON and invalid requests ---------------------------------------------------------
@pytest.mark.parametrize("body", [b'{"jsonrpc": "2.0", "id": 1, "method": ', b"not json", b"\xff\xfe{}"],
                         ids=["truncated", "text", "not-utf8"])
def test_unparsable_json_gets_parse_error(live: RawClient, body: bytes) -> None:
    live.send_body(body)
    msg = live.next_response()
    assert msg.get("id", "missing") is None and msg.get("error", {}).get("code") == PARSE_ERROR, msg
    assert_alive(live)


@pytest.mark.parametrize("message", [
    [],
    "hello",
    {"id": 5, "method": "workspace/symbol", "params": {"query": "x"}},  # no "jsonrpc"
    {"jsonrpc": "2.0", "id": {"a": 1}, "method": "workspace/symbol", "params": {"query": "x"}},
    {"jsonrpc": "2.0", "id": 6, "method": 7},
], ids=["batch-empty", "string", "no-jsonrpc", "object-id", "method-int"])
def test_invalid_request_gets_invalid_request(live: RawClient, message: Any) -> None:
    live.send_body(json.dumps(message).encode())
    msg = live.next_response()
    expected_id = message.get("id") if isinstance(message, dict) and isinstance(message.get("id"), int) else None
    assert msg.get("id", "missing") == expected_id and msg.get("error", {}).get("code") == INVALID_REQUEST, msg
    assert_alive(live)
