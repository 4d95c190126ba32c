"""`ctx-lsp serve`: the language server built (its handlers registered) and run on stdio or TCP."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from typing import BinaryIO, NoReturn

from pygls.exceptions import (
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
    JsonRpcRequestCancelled,
)

from ctx_lsp.index.workspace import prepare_threaded_process
from ctx_lsp.server.server import CtxLanguageServer


def build_server() -> CtxLanguageServer:
    from ctx_lsp.server import commands, graph_lookup, lifecycle, navigation

    server = CtxLanguageServer()
    lifecycle.register(server)
    navigation.register(server)
    commands.register(server)
    graph_lookup.register(server)
    return server


def _setup_logging(args: argparse.Namespace) -> None:
    # stdout is the wire in stdio mode: logs go to stderr or --log-file, never to stdout
    handler: logging.Handler
    if getattr(args, "log_file", None):
        handler = logging.FileHandler(args.log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    verbose = bool(getattr(args, "verbose", False))
    # On stderr, warnings and worse only: editors file a server's stderr as errors (Neovim's LSP log
    # marks every line [ERROR]); what happens is also sent to the client as window/logMessage at its
    # own level. A --log-file gets the INFO lines too
    quiet = logging.INFO if getattr(args, "log_file", None) else logging.WARNING
    root.setLevel(logging.DEBUG if verbose else quiet)
    logging.getLogger("pygls").setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.getLogger("pygls.protocol.json_rpc").addFilter(_client_errors_in_one_line)


def _client_errors_in_one_line(record: logging.LogRecord) -> bool:
    """A request the client got wrong (bad params, an unknown method) is answered with its error; pygls
    also logs it at ERROR with a traceback, as if the server had failed. Keep one INFO line of it."""
    exc = record.exc_info[1] if record.exc_info else None
    if isinstance(exc, (JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcMethodNotFound, JsonRpcRequestCancelled)):
        record.msg, record.args = "%s (answered as an error: %s)", (record.getMessage(), exc)
        record.levelno, record.levelname = logging.INFO, "INFO"
        record.exc_info, record.exc_text = None, None
        return logging.getLogger().isEnabledFor(logging.INFO)
    return True


def _private_wire() -> tuple[BinaryIO, BinaryIO]:
    """The stdio wire on private duplicates of fds 0 and 1; fd 0 becomes /dev/null and fd 1 stderr.

    Why: a forked worker (the indexer's binding pool) closes `sys.stdin` on start and would block
    forever on its buffer lock, held by the thread reading LSP messages; and a stray print from any
    library would corrupt the wire.
    """
    wire_in = os.fdopen(os.dup(0), "rb")
    wire_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    return wire_in, wire_out


class _EndsAtEof:
    """The LSP wire in: when the client closes it (it exited, or was killed, without `exit`) the
    server leaves at once, as on `exit`. Else pygls' loop would end and then wait for the index
    build running in its executor (seconds on a large tree) with the workers forked for it."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw

    def readline(self) -> bytes:
        return self._ended(self.raw.readline())

    def read(self, n: int = -1) -> bytes:
        return self._ended(self.raw.read(n))

    @staticmethod
    def _ended(data: bytes) -> bytes:
        if not data:
            logging.getLogger("ctx_lsp.server").info("the client closed the connection: leaving")
            _leave(0)
        return data


def watch_parent(pid: int, interval: float = 2.0) -> threading.Thread:
    """Leave when the client process that started us (initialize's `processId`) is gone, as LSP
    asks: a client killed with its pipes held open by another process never closes them."""

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            return False
        try:  # a zombie (exited, not reaped yet) is gone too
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
        except (OSError, IndexError):
            return False

    def run() -> None:
        if gone():  # not a process we can see (the client runs in another pid namespace): no watch
            logging.getLogger("ctx_lsp.server").info("the client's processId %d is not visible here: not watched", pid)
            return
        while not gone():
            time.sleep(interval)
        logging.getLogger("ctx_lsp.server").info("the client process %d is gone: leaving", pid)
        _leave(1)

    t = threading.Thread(target=run, name="ctx-lsp-parent-watch", daemon=True)
    t.start()
    return t


def run_server(args: argparse.Namespace) -> int:
    """`ctx-lsp serve`: stdio by default, `--tcp --host --port` otherwise."""
    _setup_logging(args)
    if hasattr(signal, "SIGUSR1"):  # `kill -USR1 <pid>` dumps every thread's stack to the log stream
        stream = logging.getLogger().handlers[0]
        faulthandler.register(signal.SIGUSR1, file=getattr(stream, "stream", sys.stderr), all_threads=True)
    prepare_threaded_process("ctx_lsp.retrieval.engine")
    server = build_server()
    server.protocol.exit_now = _leave  # `exit`: 0 after `shutdown`, else 1 (LSP), without waiting for workers
    server.watch_parent = watch_parent
    code = 0
    try:
        if getattr(args, "tcp", False):
            server.start_tcp(args.host, args.port)
        else:
            wire_in, wire_out = _private_wire()
            server.start_io(_EndsAtEof(wire_in), wire_out)  # type: ignore[arg-type]
    except SystemExit as exc:  # pygls' own way to end on `exit`, if it ever gets there
        code = exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        code = 130
    _leave(code)


def _leave(code: int) -> NoReturn:
    logging.shutdown()
    # A worker thread may still be inside one jedi call; the index and its cache are consistent on disk
    # (writes are atomic renames), so leave now rather than wait for it at interpreter exit.
    os._exit(code)

