"""`ctx-lsp mcp`: which bridge serves (the workspace's daemon through a relay, or one in-process), then
the MCP tools of `bridge.py` on stdio until the client closes the connection."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from ctx_lsp.engine import Engine
from ctx_lsp.mcp.bridge import Bridge, build_server
from ctx_lsp.workspace_args import (
    daemon_identity,
    file_filter,
    usable_cache_dir,
    workspace_cache_dir,
    workspace_root,
)

log = logging.getLogger("ctx_lsp.mcp")


def _dense(args: argparse.Namespace) -> Any:
    """The dense generator's options, as `ctx-lsp context` sets them (None: without it)."""
    from ctx_lsp.retrieval.dense_options import one_shot_options

    cache_dir = workspace_cache_dir(args, workspace_root(args))
    return one_shot_options(cache_dir, getattr(args, "dense_model", None), getattr(args, "no_dense", False))


def _engine(args: argparse.Namespace, dense: Any = None) -> Engine:
    root = workspace_root(args)  # CliError for a missing root is reported by the CLI (exit 2)
    engine = Engine(root, cache_dir=usable_cache_dir(args, root), flt=file_filter(args), dense=dense)
    # its writes come from a forked child where one may fork (Linux: see WorkspaceIndex.save), so a
    # tool call never waits on the engine lock for the write after a background refresh
    engine.index.background_save = True
    return engine


def _relay(args: argparse.Namespace) -> Any:
    """A RelayBridge to the workspace's daemon per $CTX_LSP_DAEMON, or None to work in-process."""
    from ctx_lsp.daemon import client as dc
    from ctx_lsp.mcp.relay import RelayBridge

    mode = dc.policy()
    if mode == "off":
        return None
    ident = daemon_identity(args)
    if mode != "auto":
        try:
            if not dc.matches(dc.hello(Path(ident["cache_dir"])), ident):
                return None
        except dc.DaemonUnavailable:
            return None
    return RelayBridge(ident, start=mode == "auto", local=lambda: Bridge(_engine(args)))


def run_mcp(args: argparse.Namespace) -> int:
    """Serve the MCP tools on stdio until the client closes the connection."""
    dense = _dense(args)
    # the daemon runs without the dense generator: with it, the bridge works in process
    bridge = (None if dense is not None else _relay(args)) or Bridge(_engine(args, dense))
    app = build_server(bridge)
    log.info("ctx-lsp mcp serving %s%s", bridge.root if isinstance(bridge, Bridge) else bridge.ident["root"],
             "" if isinstance(bridge, Bridge) else " through its daemon")
    bridge.warm_up()
    app.run("stdio")
    return 0
