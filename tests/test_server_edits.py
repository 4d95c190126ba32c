"""End-to-end tests of `ctx-lsp serve` that change the workspace or need a server of their own:
didChange/didClose, watched files, settings, multi-root, indexing cancellation and partial answers,
request cancellation, a failing handler, clean shutdown, and writes only in the cache directory.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from test_server import (
    EMOJI_LINE,
    FIXTURE,
    PROFILES,
    SERVER,
    callers,
    command,
    copy_workspace,
    did_change,
    did_open,
    expected_range,
    initialize,
    prepare_call,
    request,
    units,
    uri,
    wait_indexed,
)


@pytest_lsp.fixture(params=PROFILES, config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest, tmp_path: Path):
    ws = copy_workspace(tmp_path / "ws")
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    await initialize(lsp_client, ws, request.param, tmp_path / "cache")
    await wait_indexed(lsp_client)
    yield
    await lsp_client.shutdown_session()


# -- the graph follows the editor ----------------------------------------------------------------
async def test_did_change_is_reflected_by_the_next_query_and_did_close_reverts(client: LanguageClient) -> None:
    ws, enc = client.ws, client.encoding  # type: ignore[attr-defined]
    u = did_open(client, "shop/service.py")
    # replace the call open_inventory() that follows the emoji by refund(): an incremental edit in client units
    did_change(client, u, 2, expected_range(ws, "shop/service.py", "open_inventory", enc, line=EMOJI_LINE), "refund")
    refund = await prepare_call(client, "shop/service.py", "refund", line=15)
    got = await callers(client, refund)
    line = "    label = \"café 😀 — naïve\"; inv = refund()"
    col = units(line[: line.index("refund")], enc)
    assert got == {"checkout": [types.Range(start=types.Position(line=EMOJI_LINE, character=col),
                                            end=types.Position(line=EMOJI_LINE, character=col + 6))]}
    # append a new function: a query straight after the edit sees it
    n = len((ws / "shop/service.py").read_text(encoding="utf-8").splitlines())
    end = types.Position(line=n, character=0)
    did_change(client, u, 3, types.Range(start=end, end=end), "\n\ndef audit(item):\n    return refund(item)\n")
    got = await callers(client, refund)
    assert set(got) == {"checkout", "audit"}
    st = await command(client, "ctx.indexStatus")
    assert st["dirty_files"] == ["shop/service.py"]
    assert (ws / "shop/service.py").read_text(encoding="utf-8") == (FIXTURE / "shop/service.py").read_text(encoding="utf-8")
    # closing without saving: the graph goes back to the disk content
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=u)))
    item = await prepare_call(client, "shop/service.py", "refund", line=15)
    assert await callers(client, item) == {}
    st = await command(client, "ctx.indexStatus")
    assert st["dirty_files"] == []


async def test_watched_file_changes_update_the_graph(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    (ws / "shop/extra.py").write_text("from shop.service import refund\n\n\ndef bulk(items):\n"
                                      "    return [refund(i) for i in items]\n", encoding="utf-8")
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=uri(ws, "shop/extra.py"), type=types.FileChangeType.Created)]))
    refund = await prepare_call(client, "shop/service.py", "refund", line=15)
    assert set(await callers(client, refund)) == {"bulk"}
    (ws / "shop/extra.py").unlink()
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=uri(ws, "shop/extra.py"), type=types.FileChangeType.Deleted)]))
    assert await callers(client, refund) == {}
    st = await command(client, "ctx.indexStatus")
    assert st["files"] == 4


async def test_index_updated_notification_after_an_edit(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    waiter = client.wait_for_notification("ctx/indexUpdated")
    u = did_open(client, "shop/models.py")
    did_change(client, u, 2, types.Range(start=types.Position(line=0, character=0),
                                         end=types.Position(line=0, character=0)), "import os\n")
    payload = await asyncio.wait_for(waiter, 10)
    assert payload.dirty_files == ["shop/models.py"] and payload.files == 4
    assert uri(ws, "shop/models.py") == u


