"""`ctx.neighbourhood` and `ctx.symbolRelations` (the look-ups by name behind the VS Code
language-model tools and the graph view) over real stdio with pytest-lsp."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pytest_lsp import ClientServerConfig, LanguageClient
from test_server import command, copy_workspace, initialize, position_of, uri, wait_indexed

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(scope="module", config=ClientServerConfig(server_command=[sys.executable, "-m", "ctx_lsp", "serve"]))
async def client(lsp_client: LanguageClient, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("lookup")
    ws = copy_workspace(tmp / "ws")
    lsp_client.init_result = await initialize(lsp_client, ws, "visual_studio_code", tmp / "cache")  # type: ignore[attr-defined]
    await wait_indexed(lsp_client)
    yield
    await lsp_client.shutdown_session()


def edges_of(graph: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(e["source"], e["target"], e["kind"]) for e in graph["edges"]}


async def test_neighbourhood_of_a_file_is_a_graph(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    graph = await command(client, "ctx.neighbourhood", {"target": "shop/service.py"})
    assert graph["center"]["id"] == "shop/service.py" and graph["center"]["kind"] == "file"
    assert graph["center"]["uri"] == uri(ws, "shop/service.py") and graph["reason"] is None
    ids = {n["id"] for n in graph["nodes"]}
    assert {"shop/models.py", "shop/models.py::Inventory", "tests/test_service.py::test_checkout"} <= ids
    es = edges_of(graph)
    assert ("shop/service.py", "shop/models.py", "IMPORTS") in es
    assert ("tests/test_service.py::test_checkout", "shop/service.py", "CALLS") in es
    # every edge joins drawn nodes; the file's own CONTAINS edges are not drawn
    assert all(e["source"] in ids and e["target"] in ids for e in graph["edges"])
    assert not any(k == "CONTAINS" and s == "shop/service.py" for s, _, k in es)
    imp = next(e for e in graph["edges"] if e["kind"] == "IMPORTS" and e["source"] == "shop/service.py")
    assert imp["site"] == {"path": "shop/service.py", "line": 3, "uri": uri(ws, "shop/service.py")}
    # the same by uri (the graph view's way in)
    by_uri = await command(client, "ctx.neighbourhood", {"uri": uri(ws, "shop/service.py")})
    assert edges_of(by_uri) == es


async def test_neighbourhood_of_a_symbol_by_name_and_at_a_position(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    graph = await command(client, "ctx.neighbourhood", {"target": "checkout"})
    assert graph["center"]["id"] == "shop/service.py::checkout"
    es = edges_of(graph)
    assert ("shop/service.py::refund", "shop/service.py::checkout", "CALLS") in es
    assert ("shop/service.py::checkout", "shop/service.py::open_inventory", "CALLS") in es
    pos = position_of(ws, "shop/service.py", "checkout", "utf-16", line=9)
    at = await command(client, "ctx.neighbourhood", {"uri": uri(ws, "shop/service.py"),
                                                     "position": {"line": pos.line, "character": pos.character}})
    assert at["center"]["id"] == "shop/service.py::checkout" and edges_of(at) == es
    small = await command(client, "ctx.neighbourhood", {"target": "shop/service.py", "limit": 1})
    assert len(small["nodes"]) == 2 and small["truncated"] > 0


async def test_neighbourhood_of_an_unknown_target_is_a_reason(client: LanguageClient) -> None:
    graph = await command(client, "ctx.neighbourhood", {"target": "chekout"})
    assert graph["center"] is None and graph["nodes"] == []
    assert graph["reason"].startswith("unknown symbol: chekout") and "did you mean: checkout" in graph["reason"]
    missing = await command(client, "ctx.neighbourhood", {"target": "shop/nothing.py"})
    assert missing["reason"] == "file not in the index: shop/nothing.py"
    outside = await command(client, "ctx.neighbourhood", {"target": "../../etc/passwd.py"})
    assert outside["center"] is None and "outside the workspace folder" in outside["reason"]


async def test_symbol_relations_by_name(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    callers = await command(client, "ctx.symbolRelations", {"symbol": "checkout", "relation": "callers"})
    assert callers["symbol"] == "shop/service.py::checkout" and callers["reason"] is None
    locs = {loc["symbol"]: loc for loc in callers["locations"]}
    assert set(locs) == {"refund", "test_checkout"}
    assert locs["test_checkout"] == {"path": "tests/test_service.py", "line": 5, "uri": uri(ws, "tests/test_service.py"),
                                     "symbol": "test_checkout", "kind": "test",
                                     "reason": locs["test_checkout"]["reason"]}
    # Inventory.save has no test that calls it directly: the static walk finds the test through checkout
    tests = await command(client, "ctx.symbolRelations", {"symbol": "Inventory.save", "relation": "tests"})
    assert [loc["symbol"] for loc in tests["locations"]] == ["test_checkout"]
    assert "via checkout" in tests["locations"][0]["reason"]
    # a short name shared by several symbols: the best one, the others as candidates
    save = await command(client, "ctx.symbolRelations", {"symbol": "save", "relation": "callers"})
    assert save["symbol"] in {"shop/models.py::Store.save", "shop/models.py::Inventory.save",
                              "shop/models.py::CachedInventory.save"}
    assert len(save["candidates"]) == 2


async def test_symbol_relations_bad_input(client: LanguageClient) -> None:
    unknown = await command(client, "ctx.symbolRelations", {"symbol": "nosuchthing", "relation": "callers"})
    assert unknown["symbol"] is None and unknown["reason"].startswith("unknown symbol: nosuchthing")
    a_file = await command(client, "ctx.symbolRelations", {"symbol": "shop/models.py", "relation": "callers"})
    assert "is a file" in a_file["reason"]
    cases = [
        ("ctx.symbolRelations", {"relation": "callers"}, "'symbol'"),
        ("ctx.symbolRelations", {"symbol": "checkout", "relation": "friends"}, "'relation'"),
        ("ctx.neighbourhood", {}, "'target'"),
        ("ctx.neighbourhood", {"target": "checkout", "limit": 0}, "'limit'"),
        ("ctx.neighbourhood", {"target": "checkout", "uri": "file:///etc/hosts"}, "outside the workspace"),
    ]
    for name, params, fragment in cases:
        with pytest.raises(JsonRpcInvalidParams) as info:
            await command(client, name, params)
        assert fragment in str(info.value), (name, params, str(info.value))
    # the server keeps serving
    assert (await command(client, "ctx.indexStatus"))["files"] == 4


async def test_commands_are_advertised(client: LanguageClient) -> None:
    caps: types.ServerCapabilities = client.init_result.capabilities  # type: ignore[attr-defined]
    assert caps.execute_command_provider is not None
    assert {"ctx.neighbourhood", "ctx.symbolRelations"} <= set(caps.execute_command_provider.commands)
