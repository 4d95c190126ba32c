"""End-to-end tests of `ctx-lsp serve` over stdio with pytest-lsp, under the Neovim and VS Code
capability profiles (utf-8 vs utf-16 positions: the fixture has non-ASCII text before call sites).
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

FIXTURE = Path(__file__).parent / "fixtures" / "server_ws"
SERVER = [sys.executable, "-m", "ctx_lsp", "serve"]
PROFILES = ["neovim", "visual_studio_code"]
EMOJI_LINE = 10  # 0-based line of service.py with "café 😀 — naïve" before the call to open_inventory()


# -- helpers -------------------------------------------------------------------------------------
def copy_workspace(dest: Path) -> Path:
    shutil.copytree(FIXTURE, dest)
    return dest


def units(text: str, encoding: str) -> int:
    """Length of `text` in the client's code units."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def position_of(ws: Path, rel: str, needle: str, encoding: str, line: int | None = None,
                occurrence: int = 0) -> types.Position:
    """The LSP position of `needle` in a workspace file, computed independently of the server."""
    lines = (ws / rel).read_text(encoding="utf-8").splitlines()
    found = [(i, ln.index(needle)) for i, ln in enumerate(lines) if needle in ln and (line is None or i == line)]
    i, col = found[occurrence]
    return types.Position(line=i, character=units(lines[i][:col], encoding))


def uri(ws: Path, rel: str) -> str:
    return (ws / rel).as_uri()


async def initialize(client: LanguageClient, ws: Path, profile: str, cache: Path, *,
                     init: dict[str, Any] | None = None, folders: list[Path] | None = None) -> types.InitializeResult:
    caps = client_capabilities(profile)
    folders = folders or [ws]
    client.registrations = []  # type: ignore[attr-defined]

    client.index_updates = []  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)  # type: ignore[attr-defined]

    @client.feature("ctx/indexUpdated")
    def index_updated(params: Any) -> None:
        client.index_updates.append(params)  # type: ignore[attr-defined]

    result = await client.initialize_session(types.InitializeParams(
        capabilities=caps, root_uri=folders[0].as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=f.as_uri(), name=f.name) for f in folders],
        initialization_options={"cacheDir": str(cache), **(init or {})}))
    client.encoding = str(getattr(result.capabilities.position_encoding, "value",  # type: ignore[attr-defined]
                                  result.capabilities.position_encoding))
    client.ws = ws  # type: ignore[attr-defined]
    return result


async def command(client: LanguageClient, name: str, *arguments: Any) -> Any:
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=list(arguments)))


async def wait_indexed(client: LanguageClient, timeout: float = 60) -> dict[str, Any]:
    """Poll ctx.indexStatus until no folder is indexing (a wait, not a timing)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        st = await command(client, "ctx.indexStatus", {})
        if not st["indexing"]:
            return st
        assert loop.time() < deadline, f"still indexing after {timeout} s: {st}"
        await asyncio.sleep(0.05)


async def prepare_call(client: LanguageClient, rel: str, needle: str, **kw: Any) -> types.CallHierarchyItem:
    pos = position_of(client.ws, rel, needle, client.encoding, **kw)  # type: ignore[attr-defined]
    items = await client.text_document_prepare_call_hierarchy_async(types.CallHierarchyPrepareParams(
        text_document=types.TextDocumentIdentifier(uri=uri(client.ws, rel)), position=pos))  # type: ignore[attr-defined]
    assert items, f"no call hierarchy item at {needle!r}"
    return items[0]


async def callers(client: LanguageClient, item: types.CallHierarchyItem) -> dict[str, list[types.Range]]:
    calls = await client.call_hierarchy_incoming_calls_async(types.CallHierarchyIncomingCallsParams(item=item))
    return {c.from_.name: list(c.from_ranges) for c in calls or []}


def expected_range(ws: Path, rel: str, needle: str, encoding: str, line: int | None = None) -> types.Range:
    start = position_of(ws, rel, needle, encoding, line=line)
    return types.Range(start=start, end=types.Position(line=start.line, character=start.character + units(needle, encoding)))


def did_open(client: LanguageClient, rel: str) -> str:
    u = uri(client.ws, rel)  # type: ignore[attr-defined]
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=u, language_id="python", version=1, text=(client.ws / rel).read_text(encoding="utf-8"))))  # type: ignore[attr-defined]
    return u


def did_change(client: LanguageClient, u: str, version: int, rng: types.Range, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=u, version=version),
        content_changes=[types.TextDocumentContentChangePartial(range=rng, text=text)]))


async def expect_error(coro: Any, *fragments: str) -> str:
    with pytest.raises(JsonRpcException) as info:
        await coro
    message = str(info.value)
    for f in fragments:
        assert f in message, f"{f!r} not in error {message!r}"
    return message


# -- fixtures ------------------------------------------------------------------------------------
@pytest_lsp.fixture(params=PROFILES, config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest, tmp_path: Path):
    ws = copy_workspace(tmp_path / "ws")
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    lsp_client.cache = tmp_path / "cache"  # type: ignore[attr-defined]
    lsp_client.init_result = await initialize(lsp_client, ws, request.param, tmp_path / "cache")  # type: ignore[attr-defined]
    await wait_indexed(lsp_client)
    yield
    await lsp_client.shutdown_session()


# -- initialize, indexing ------------------------------------------------------------------------
async def test_initialize_advertises_features_and_negotiates_encoding(client: LanguageClient) -> None:
    caps = client.init_result.capabilities  # type: ignore[attr-defined]
    expected = {"neovim": "utf-8", "visual_studio_code": "utf-16"}[client.profile]  # type: ignore[attr-defined]
    assert client.encoding == expected
    assert caps.call_hierarchy_provider and caps.type_hierarchy_provider and caps.workspace_symbol_provider
    assert caps.code_lens_provider is not None
    assert set(caps.execute_command_provider.commands) >= {
        "ctx.getContext", "ctx.contextAtCursor", "ctx.architecturalContext", "ctx.related", "ctx.indexStatus",
        "ctx.reindex"}
    assert caps.experimental["ctxRequests"] == ["ctx/getContext", "ctx/contextAtCursor"]
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental


async def test_indexing_reports_progress_and_status(client: LanguageClient) -> None:
    reports = [r for r in client.progress_reports.values()
               if r and isinstance(r[0], types.WorkDoneProgressBegin) and r[0].title == "ctx-lsp: indexing"]
    assert len(reports) == 1, client.progress_reports
    seq = reports[0]
    assert isinstance(seq[-1], types.WorkDoneProgressEnd) and "indexed 4 files" in (seq[-1].message or "")
    assert seq[0].cancellable is True
    middle = [r for r in seq[1:-1] if isinstance(r, types.WorkDoneProgressReport)]
    assert middle and all(0 <= (r.percentage or 0) <= 100 for r in middle)
    st = await command(client, "ctx.indexStatus")
    assert st["files"] == 4 and st["nodes"] == 15
    assert st["edges"]["CALLS"] == 5 and st["edges"]["INHERITS"] == 2
    assert st["stale"] is False and st["indexing"] is False and st["dirty_files"] == []
    assert st["roots"] == [str(client.ws)] and st["last_update"]  # type: ignore[attr-defined]
    assert len(list(client.cache.glob("ws-*/index.msgpack"))) == 1  # type: ignore[attr-defined]


# -- call and type hierarchy ---------------------------------------------------------------------
async def test_incoming_and_outgoing_calls_with_non_ascii_sites(client: LanguageClient) -> None:
    ws, enc = client.ws, client.encoding  # type: ignore[attr-defined]
    item = await prepare_call(client, "shop/service.py", "open_inventory", line=5)  # the def
    assert item.name == "open_inventory" and item.data["id"] == "shop/service.py::open_inventory"
    assert item.selection_range == expected_range(ws, "shop/service.py", "open_inventory", enc, line=5)
    got = await callers(client, item)
    # the call site follows "café 😀 — naïve" on the same line: its column differs per encoding
    assert got == {"checkout": [expected_range(ws, "shop/service.py", "open_inventory", enc, line=EMOJI_LINE)]}

    checkout = await prepare_call(client, "shop/service.py", "checkout", line=9)
    assert set(await callers(client, checkout)) == {"refund", "test_checkout"}
    out = await client.call_hierarchy_outgoing_calls_async(types.CallHierarchyOutgoingCallsParams(item=checkout))
    targets = {c.to.name: list(c.from_ranges) for c in out}
    assert targets == {
        "open_inventory": [expected_range(ws, "shop/service.py", "open_inventory", enc, line=EMOJI_LINE)],
        "save": [expected_range(ws, "shop/service.py", "save", enc, line=11)],
    }
    # preparing on the call site (after the emoji) names the callee, not the enclosing function
    on_site = await prepare_call(client, "shop/service.py", "open_inventory", line=EMOJI_LINE)
    assert on_site.name == "open_inventory"
    # a class: its incoming calls are instantiations
    inv = await prepare_call(client, "shop/models.py", "Inventory", line=10)
    assert await callers(client, inv) == {
        "open_inventory": [expected_range(ws, "shop/service.py", "Inventory", enc, line=6)]}


async def test_supertypes_and_subtypes(client: LanguageClient) -> None:
    ws, enc = client.ws, client.encoding  # type: ignore[attr-defined]
    pos = position_of(ws, "shop/models.py", "Inventory", enc, line=10)
    items = await client.text_document_prepare_type_hierarchy_async(types.TypeHierarchyPrepareParams(
        text_document=types.TextDocumentIdentifier(uri=uri(ws, "shop/models.py")), position=pos))
    assert [i.name for i in items] == ["Inventory"]
    sup = await client.type_hierarchy_supertypes_async(types.TypeHierarchySupertypesParams(item=items[0]))
    sub = await client.type_hierarchy_subtypes_async(types.TypeHierarchySubtypesParams(item=items[0]))
    assert [i.name for i in sup] == ["Store"] and [i.name for i in sub] == ["CachedInventory"]
    assert sub[0].selection_range == expected_range(ws, "shop/models.py", "CachedInventory", enc, line=21)
    # from a method, the type hierarchy is its class's
    pos = position_of(ws, "shop/models.py", "save", enc, line=24)
    items = await client.text_document_prepare_type_hierarchy_async(types.TypeHierarchyPrepareParams(
        text_document=types.TextDocumentIdentifier(uri=uri(ws, "shop/models.py")), position=pos))
    assert [i.name for i in items] == ["CachedInventory"]
    assert list(await client.type_hierarchy_subtypes_async(types.TypeHierarchySubtypesParams(item=items[0]))) == []


async def test_code_lens_counts_callers_and_tests(client: LanguageClient) -> None:
    ws, enc = client.ws, client.encoding  # type: ignore[attr-defined]
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri(ws, "shop/service.py"))))
    by_line = {lens.range.start.line: lens for lens in lenses}
    assert by_line[5].command.title == "1 caller · 0 tests"  # open_inventory
    assert by_line[9].command.title == "2 callers · 1 test"  # checkout: refund + test_checkout
    assert by_line[15].command.title == "0 callers · 0 tests"  # refund
    lens = by_line[9]
    assert lens.command.command == "ctx.contextAtCursor"
    assert list(lens.command.arguments) == [{"uri": uri(ws, "shop/service.py"), "position": {
        "line": 9, "character": position_of(ws, "shop/service.py", "checkout", enc, line=9).character}}]
    models = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri(ws, "shop/models.py"))))
    titles = {m.range.start.line: m.command.title for m in models}
    assert titles[10] == "1 caller · 0 tests"  # Inventory: instantiated by open_inventory
    assert titles[16] == "2 callers · 0 tests"  # Inventory.save: checkout and CachedInventory.save


async def test_workspace_symbol_exact_substring_and_fuzzy(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    got = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="inventory"))
    names = [s.name for s in got]
    assert names[0] == "Inventory" and set(names) >= {"Inventory", "CachedInventory", "open_inventory"}
    first = got[0]
    assert first.location.uri == uri(ws, "shop/models.py") and first.kind == types.SymbolKind.Class
    fuzzy = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="cchinv"))
    assert [s.name for s in fuzzy] == ["CachedInventory"]
    assert list(await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="zzzz"))) == []


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
