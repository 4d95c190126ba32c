"""MCP tool calls relayed to the workspace's daemon, so a restarted MCP bridge answers at once.

Same four calls as `bridge.Bridge` (the daemon runs them with a Bridge over its warm engine, with
this bridge's own working memory); when the daemon cannot be reached, the calls run in-process on a
local Bridge instead, opened on first need. Never imports pygls or lsprotocol.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctx_lsp.daemon import client as dc

log = logging.getLogger("ctx_lsp.mcp")


class RelayBridge:
    def __init__(self, ident: dict[str, Any], start: bool, local: Callable[[], Any]) -> None:
        self.ident = ident
        self.start = start
        self.session = uuid.uuid4().hex
        self._local_factory = local
        self._local: Any = None
        self._sock: Path | None = None
        self._lock = threading.Lock()
        self._ready = threading.Event()

    def warm_up(self) -> None:
        """Reach (or start) the daemon off the request path; calls wait for it."""

        def run() -> None:
            try:
                self._sock = dc.ensure(self.ident, start=self.start)
            except dc.DaemonUnavailable as exc:
                log.info("no daemon (%s): tools run in-process", exc)
                self._use_local()
            finally:
                self._ready.set()

        threading.Thread(target=run, name="ctx-lsp-mcp-daemon", daemon=True).start()

    def _use_local(self) -> Any:
        with self._lock:
            if self._local is None:
                self._local = self._local_factory()
                self._local.warm_up()
            return self._local

    def _call(self, method: str, *args: Any) -> Any:
        from ctx_lsp.mcp.bridge import ToolFailure

        self._ready.wait()
        if self._sock is not None and self._local is None:
            try:
                return dc.request(self._sock, "mcp", {"method": method, "args": list(args), "session": self.session})
            except dc.DaemonUserError as exc:
                raise ToolFailure(str(exc)) from None
            except dc.DaemonUnavailable as exc:
                log.warning("daemon unavailable (%s): tools run in-process from now on", exc)
        return getattr(self._use_local(), method)(*args)

    def get_context(self, query: str, budget: int, fmt: str, path: str | None = None,
                    line: int | None = None) -> tuple[str, dict[str, Any]]:
        text, pack = self._call("get_context", query, budget, fmt, path, line)
        return text, pack

    def architectural(self, file_path: str, fmt: str) -> str:
        return str(self._call("architectural", file_path, fmt))

    def semantic_search(self, query: str, top_n: int) -> str:
        return str(self._call("semantic_search", query, top_n))

    def relation(self, symbol: str, relation: str) -> str:
        return str(self._call("relation", symbol, relation))
