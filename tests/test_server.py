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


def plain(value: Any) -> Any:
    """A raw custom-request result (pygls `Object` namedtuples) as plain JSON values."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


async def send_raw(client: LanguageClient, method: str, params: Any, msg_id: str | None = None) -> Any:
    return plain(await client.protocol.send_request_async(method, params, msg_id=msg_id))


# -- fixtures ------------------------------------------------------------------------------------
# One server per profile for the tests that do not change the workspace (starting one costs ~3 s);
# tests that edit get their own server in test_server_edits.py.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(scope="module", params=PROFILES, config=ClientServerConfig(server_command=SERVER))
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("server")
    ws = copy_workspace(tmp / "ws")
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    lsp_client.cache = tmp / "cache"  # type: ignore[attr-defined]
    lsp_client.init_result = await initialize(lsp_client, ws, request.param, tmp / "cache")  # type: ignore[attr-defined]
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
    # the build's cache write (a forked child on Linux) follows the index by a moment
    for _ in range(100):
        if list(client.cache.glob("ws-*/index.msgpack")):  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.1)
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
    # the tests ctx.related and ctx.symbolRelations list: covering it, or reaching it through calls
    assert by_line[5].command.title == "1 caller · 1 test"  # open_inventory: test_checkout via checkout
    assert by_line[9].command.title == "2 callers · 1 test"  # checkout: refund + test_checkout
    assert by_line[15].command.title == "0 callers · 0 tests"  # refund
    at = {"uri": uri(ws, "shop/service.py"),
          "position": {"line": 5, "character": position_of(ws, "shop/service.py", "open_inventory", enc, line=5).character}}
    related = await command(client, "ctx.related", {**at, "relation": "tests"})
    named = await command(client, "ctx.symbolRelations", {"symbol": "open_inventory", "relation": "tests"})
    assert [loc["symbol"] for loc in related["locations"]] == [loc["symbol"] for loc in named["locations"]] == [
        "test_checkout"]
    assert "reaches it via checkout" in related["locations"][0]["reason"]
    lens = by_line[9]
    assert lens.command.command == "ctx.contextAtCursor"
    assert list(lens.command.arguments) == [{"uri": uri(ws, "shop/service.py"), "position": {
        "line": 9, "character": position_of(ws, "shop/service.py", "checkout", enc, line=9).character}}]
    models = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri(ws, "shop/models.py"))))
    titles = {m.range.start.line: m.command.title for m in models}
    assert titles[10] == "1 caller · 1 test"  # Inventory: instantiated by open_inventory (test_checkout)
    assert titles[16] == "2 callers · 1 test"  # Inventory.save: checkout and CachedInventory.save


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
    # a dotted query: the last part is the name, the rest its container (class, then module path)
    dotted = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="Inventory.save"))
    assert [(s.container_name, s.name) for s in dotted][:2] == [("Inventory", "save"), ("CachedInventory", "save")]
    assert "Store" not in {s.container_name for s in dotted}
    by_module = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="models.Store.sav"))
    assert [(s.container_name, s.name) for s in by_module] == [("Store", "save")]


# -- context commands --------------------------------------------------------------------------------
async def test_get_context_command_and_request(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    pack = await command(client, "ctx.getContext", {"query": "who calls checkout", "budget": 800})
    assert pack["budget"] == 800 and 0 < pack["tokens"] <= 800 and pack["stale"] is False
    symbols = [i["symbol"] for i in pack["items"]]
    assert "checkout" in symbols and "refund" in symbols
    for item in pack["items"]:
        assert item["uri"] == uri(ws, item["path"])
    # the cancellable request answers the same params with the same pack
    raw = await send_raw(client, "ctx/getContext", {"query": "who calls checkout", "budget": 800})
    assert [i["symbol"] for i in raw["items"]] == symbols
    # anchored at a position in a file
    pos = position_of(ws, "shop/service.py", "checkout", client.encoding, line=9)  # type: ignore[attr-defined]
    anchored = await command(client, "ctx.getContext", {"query": "what does this do", "uri": uri(ws, "shop/service.py"),
                                                        "position": {"line": pos.line, "character": pos.character}})
    assert anchored["items"] and anchored["tokens"] <= 4000


async def test_context_at_cursor_after_non_ascii_text(client: LanguageClient) -> None:
    ws, enc = client.ws, client.encoding  # type: ignore[attr-defined]
    # the cursor just after the last letter of the call open_inventory(), behind "café 😀 — naïve":
    # read as code points in the wrong encoding it would fall past the name
    start = position_of(ws, "shop/service.py", "open_inventory", enc, line=EMOJI_LINE)
    end = {"line": EMOJI_LINE, "character": start.character + units("open_inventory", enc)}
    args = {"uri": uri(ws, "shop/service.py"), "position": end, "budget": 600}
    for pack in (await command(client, "ctx.contextAtCursor", args), await send_raw(client, "ctx/contextAtCursor", args)):
        cursor = [i["symbol"] for i in pack["items"] if any(r["via"] == "cursor" for r in i["reasons"])]
        assert cursor == ["open_inventory"], pack["items"]
        assert pack["tokens"] <= 600
    # the lens command argument is a valid contextAtCursor params object
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri(ws, "shop/service.py"))))
    lens = next(le for le in lenses if le.range.start.line == 9)
    pack = await command(client, lens.command.command, *lens.command.arguments)
    assert "checkout" in [i["symbol"] for i in pack["items"]]
    # a position below the file's last line is said so, not answered for the whole file
    lines = len((ws / "shop/service.py").read_text(encoding="utf-8").splitlines())
    below = await command(client, "ctx.contextAtCursor", {"uri": uri(ws, "shop/service.py"),
                                                          "position": {"line": lines + 5, "character": 0}})
    assert below["items"] == [] and below["reason"] == f"line {lines + 6} is past the end of shop/service.py ({lines} lines)"
    # a question is still answered, anchored to the file: at the end (the cursor after the last newline,
    # Ctrl+End) with nothing to say, below that with a note
    for cursor, notes in ((lines, None), (lines + 5, [f"line {lines + 6} is past the end of shop/service.py "
                                                      f"({lines} lines): the question is anchored to the file only"])):
        asked = await command(client, "ctx.getContext", {"query": "who calls open_inventory", "uri": uri(ws, "shop/service.py"),
                                                         "position": {"line": cursor, "character": 0}})
        assert "checkout" in [i["symbol"] for i in asked["items"]] and asked.get("notes") == notes, asked


async def test_architectural_context_and_related(client: LanguageClient) -> None:
    ws, enc = client.ws, client.encoding  # type: ignore[attr-defined]
    arch = await command(client, "ctx.architecturalContext", {"uri": uri(ws, "shop/service.py")})
    assert arch["path"] == "shop/service.py" and arch["uri"] == uri(ws, "shop/service.py")
    groups = {(g["edge"], g["direction"]): g["neighbors"] for g in arch["groups"]}
    imports = groups[("IMPORTS", "out")]
    assert [n["path"] for n in imports] == ["shop/models.py"] and imports[0]["uri"] == uri(ws, "shop/models.py")
    assert imports[0]["site"] == {"path": "shop/service.py", "line": 3, "col": 0, "uri": uri(ws, "shop/service.py")}
    assert {n["from_symbol"] for n in groups[("CALLS", "in")]} == {"checkout"}
    pos = position_of(ws, "shop/service.py", "checkout", enc, line=9)
    rel = await command(client, "ctx.related", {"uri": uri(ws, "shop/service.py"), "relation": "callers",
                                                "position": {"line": pos.line, "character": pos.character}})
    assert rel["symbol"] == "shop/service.py::checkout" and rel["reason"] is None
    locs = {loc["symbol"]: loc for loc in rel["locations"]}
    assert set(locs) == {"refund", "test_checkout"}
    site = expected_range(ws, "tests/test_service.py", "checkout", enc, line=4)
    assert locs["test_checkout"]["uri"] == uri(ws, "tests/test_service.py")
    assert locs["test_checkout"]["range"] == {"start": {"line": site.start.line, "character": site.start.character},
                                              "end": {"line": site.end.line, "character": site.end.character}}
    assert locs["refund"]["reason"].startswith("calls checkout at shop/service.py:")
    callees = await command(client, "ctx.related", {"uri": uri(ws, "shop/service.py"), "relation": "callees",
                                                    "position": {"line": pos.line, "character": pos.character}})
    assert {loc["symbol"] for loc in callees["locations"]} == {"open_inventory", "Inventory.save"}
    # a callee is what the symbol calls: said from the callee's side
    assert all(loc["reason"].startswith("called by checkout at ") for loc in callees["locations"])


# -- robustness ------------------------------------------------------------------------------------
async def test_malformed_params_are_invalid_params_naming_the_field(client: LanguageClient) -> None:
    from pygls.exceptions import JsonRpcInvalidParams

    ws = client.ws  # type: ignore[attr-defined]
    u = uri(ws, "shop/service.py")
    cases = [
        ("ctx.getContext", [{}], "'query'"),
        ("ctx.getContext", [{"query": "x", "budget": -1}], "'budget'"),
        ("ctx.getContext", [{"query": "x", "position": {"line": 1, "character": 0}}], "'position' needs 'uri'"),
        ("ctx.getContext", ["who calls checkout"], "params object"),
        ("ctx.getContext", [{"query": "a"}, {"query": "b"}], "one params object"),
        ("ctx.contextAtCursor", [{"uri": 5, "position": {"line": 0, "character": 0}}], "'uri'"),
        ("ctx.contextAtCursor", [{"uri": u}], "'position'"),
        ("ctx.related", [{"uri": u, "position": {"line": "a", "character": 0}, "relation": "callers"}],
         "'position.line'"),
        ("ctx.related", [{"uri": u, "position": {"line": 0, "character": -1}, "relation": "callers"}],
         "'position.character'"),
        ("ctx.related", [{"uri": u, "position": {"line": 0, "character": 0}, "relation": "friends"}], "'relation'"),
        ("ctx.architecturalContext", [{}], "'uri'"),
        ("ctx.getContext", [{"query": "x", "budget": 10**20}], "'budget' must be at most 200000"),
    ]
    for name, arguments, fragment in cases:
        with pytest.raises(JsonRpcInvalidParams) as info:
            await command(client, name, *arguments)
        assert fragment in str(info.value), (name, arguments, str(info.value))
    with pytest.raises(JsonRpcInvalidParams, match="'query'"):
        await client.protocol.send_request_async("ctx/getContext", {"budget": 10})
    # the server still serves
    assert (await command(client, "ctx.indexStatus"))["files"] == 4


async def test_unknown_symbol_or_file_is_an_empty_result_with_a_reason(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    blank = {"line": 3, "character": 0}  # an empty line between the import and the first def
    rel = await command(client, "ctx.related", {"uri": uri(ws, "shop/service.py"), "position": blank,
                                                "relation": "callers"})
    assert rel == {"symbol": None, "relation": "callers", "locations": [], "reason": "no symbol at shop/service.py:4:0"}
    arch = await command(client, "ctx.architecturalContext", {"uri": uri(ws, "docs/missing.py")})
    assert arch["groups"] == [] and arch["reason"] == "file not in the index: docs/missing.py"
    pack = await command(client, "ctx.contextAtCursor", {"uri": uri(ws, "docs/missing.py"), "position": blank})
    assert pack["items"] == [] and "not in the index" in pack["reason"]
    items = await client.text_document_prepare_call_hierarchy_async(types.CallHierarchyPrepareParams(
        text_document=types.TextDocumentIdentifier(uri=uri(ws, "shop/service.py")), position=types.Position(line=3, character=0)))
    assert items is None


async def test_uri_outside_the_workspace_is_refused(client: LanguageClient) -> None:
    from pygls.exceptions import JsonRpcInvalidParams

    outside = Path("/etc/hosts").as_uri()
    for name, arg in [("ctx.architecturalContext", {"uri": outside}),
                      ("ctx.getContext", {"query": "x", "uri": outside}),
                      ("ctx.contextAtCursor", {"uri": outside, "position": {"line": 0, "character": 0}}),
                      ("ctx.related", {"uri": outside, "position": {"line": 0, "character": 0}, "relation": "tests"})]:
        with pytest.raises(JsonRpcInvalidParams, match="outside the workspace"):
            await command(client, name, arg)
    with pytest.raises(JsonRpcInvalidParams, match="outside the workspace"):
        await client.text_document_prepare_call_hierarchy_async(types.CallHierarchyPrepareParams(
            text_document=types.TextDocumentIdentifier(uri=outside), position=types.Position(line=0, character=0)))
    # lenses are requested for every open file: no error, just none
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=outside)))
    assert list(lenses) == []
