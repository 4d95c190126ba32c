"""End-to-end tests of `ctx-lsp serve` that change the workspace or need a server of their own:
didChange/didClose, watched files, settings, multi-root, indexing cancellation and partial answers,
request cancellation, a failing handler, clean shutdown, and writes only in the cache directory.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
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
    send_raw,
    units,
    uri,
    wait_indexed,
)

from ctx_lsp.server.server import UPDATE_NOTIFY_DELAY


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
    assert (await command(client, "ctx.indexStatus"))["dirty_files"] == []  # opened, not edited: as on disk
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


async def test_call_hierarchy_lists_every_call_of_a_caller_not_only_its_first(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    u = did_open(client, "shop/service.py")
    n = len((ws / "shop/service.py").read_text(encoding="utf-8").splitlines())
    end = types.Position(line=n, character=0)
    did_change(client, u, 2, types.Range(start=end, end=end),
               "\n\ndef audit(item):\n    refund(item)\n    if item:\n        return refund(item)\n")
    refund = await prepare_call(client, "shop/service.py", "refund", line=15)
    got = await callers(client, refund)
    first, second = n + 3, n + 5  # 0-based lines of the two calls
    assert got["audit"] == [types.Range(start=types.Position(line=first, character=4), end=types.Position(line=first, character=10)),
                            types.Range(start=types.Position(line=second, character=15), end=types.Position(line=second, character=21))]
    items = await client.text_document_prepare_call_hierarchy_async(types.CallHierarchyPrepareParams(
        text_document=types.TextDocumentIdentifier(uri=u), position=types.Position(line=n + 2, character=4)))
    assert items and items[0].name == "audit"  # the def is only in the buffer: no position on disk to find
    audit = items[0]
    out = await client.call_hierarchy_outgoing_calls_async(types.CallHierarchyOutgoingCallsParams(item=audit))
    assert {c.to.name: len(c.from_ranges) for c in out} == {"refund": 2}
    named = await command(client, "ctx.symbolRelations", {"symbol": "refund", "relation": "callers"})
    assert sorted(loc["line"] for loc in named["locations"] if loc["symbol"] == "audit") == [first + 1, second + 1]
    # the graph itself keeps one edge per caller and callee: the query bound the file in memory only
    graph = await command(client, "ctx.neighbourhood", {"target": "shop/service.py::audit"})
    assert [(e["target"], e["site"]["line"]) for e in graph["edges"] if e["kind"] == "CALLS"] == [
        ("shop/service.py::refund", first + 1)]


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
    # a folder made, then removed: editors report the folder alone, not each file in it
    (ws / "shop/sub").mkdir()
    (ws / "shop/sub/more.py").write_text("from shop.service import refund\n\n\ndef again(i):\n"
                                         "    return refund(i)\n", encoding="utf-8")
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=uri(ws, "shop/sub"), type=types.FileChangeType.Created)]))
    assert set(await callers(client, refund)) == {"again"}
    (ws / "shop/sub/more.py").unlink()
    (ws / "shop/sub").rmdir()
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=uri(ws, "shop/sub"), type=types.FileChangeType.Deleted)]))
    assert await callers(client, refund) == {}
    assert (await command(client, "ctx.indexStatus"))["files"] == 4


async def eventually(check: Any, limit: float = 30.0) -> Any:
    """Poll the async `check` until it returns something truthy (changes on disk arrive by themselves)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        got = await check()
        if got or loop.time() > deadline:
            return got
        await asyncio.sleep(0.1)


async def test_a_client_that_cannot_watch_files_gets_changes_made_outside_the_editor(client: LanguageClient) -> None:
    """Neovim on Linux has no dynamic didChangeWatchedFiles: the server watches the folder itself. A file
    written by another program, a burst of new modules (a checkout), a renamed and a removed package
    all reach the graph with no notification from the client. VS Code watches for us: no own watcher."""
    ws = client.ws  # type: ignore[attr-defined]
    own = client.profile == "neovim"  # type: ignore[attr-defined]

    async def status() -> dict:
        return await command(client, "ctx.indexStatus")

    if not own:
        assert (await status())["folders"][0]["watching"] is False
        return
    await poll_status(client, lambda s: s["folders"][0]["watching"] is True)
    refund = await prepare_call(client, "shop/service.py", "refund", line=15)
    (ws / "shop/extra.py").write_text("from shop.service import refund\n\n\ndef bulk(items):\n"
                                      "    return [refund(i) for i in items]\n", encoding="utf-8")

    async def bulk_calls() -> bool:
        return set(await callers(client, refund)) == {"bulk"}

    assert await eventually(bulk_calls)
    # a checkout: 20 modules in a new package at once (one refresh), then the package renamed, then removed
    (ws / "loyalty").mkdir()
    for i in range(20):
        (ws / "loyalty" / f"tier{i}.py").write_text(f"from shop.service import refund\n\n\ndef tier{i}(x):\n"
                                                    f"    return refund(x)\n", encoding="utf-8")

    await poll_status(client, lambda s: s["files"] == 25)
    assert len(await callers(client, refund)) == 21
    (ws / "loyalty").rename(ws / "tiers")  # inotify reports the directory alone

    async def moved() -> bool:
        hits = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="tier7"))
        return any(h.location.uri.endswith("/tiers/tier7.py") for h in hits or [])  # type: ignore[union-attr]

    assert await eventually(moved)
    assert (await status())["files"] == 25
    (ws / "few").mkdir()
    for i in range(2):  # below the batch size: reloaded file by file, the directory expanded
        (ws / "few" / f"m{i}.py").write_text(f"def few{i}():\n    return {i}\n", encoding="utf-8")
    await poll_status(client, lambda s: s["files"] == 27)
    (ws / "few").rename(ws / "some")

    async def few_moved() -> bool:
        hits = await client.workspace_symbol_async(types.WorkspaceSymbolParams(query="few1"))
        return [h.location.uri.rsplit("/", 2)[-2] for h in hits or []] == ["some"]  # type: ignore[union-attr]

    assert await eventually(few_moved)
    assert (await status())["files"] == 27
    import shutil

    shutil.rmtree(ws / "tiers")
    shutil.rmtree(ws / "some")
    await poll_status(client, lambda s: s["files"] == 5)
    assert set(await callers(client, refund)) == {"bulk"}


async def test_index_updated_notification_after_an_edit(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    seen = len(client.index_updates)  # type: ignore[attr-defined]
    u = did_open(client, "shop/models.py")
    did_change(client, u, 2, types.Range(start=types.Position(line=0, character=0),
                                         end=types.Position(line=0, character=0)), "import os\n")
    # no request follows: the debounced fold-in alone must update the graph and notify
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while True:
        fresh = [p for p in client.index_updates[seen:] if list(p.dirty_files) == ["shop/models.py"]]  # type: ignore[attr-defined]
        if fresh:
            break
        assert loop.time() < deadline, client.index_updates[seen:]  # type: ignore[attr-defined]
        await asyncio.sleep(0.05)
    assert fresh[0].files == 4 and uri(ws, "shop/models.py") == u





async def test_one_update_is_told_once(bare: LanguageClient, tmp_path: Path) -> None:
    """An edit folded in (and a file changed on disk) is one ctx/indexUpdated: the index listener tells
    it; the request that applied it must not schedule a second one, which went out up to 0.5 s later
    for nothing new (a checkout looked that much slower to a client waiting for the last one)."""
    ws = copy_workspace(tmp_path / "ws")
    await initialize(bare, ws, "neovim", tmp_path / "cache", init={"jediRefinement": False})
    await wait_indexed(bare)
    await asyncio.sleep(1.0)  # the start's own notifications are out
    updates = bare.index_updates  # type: ignore[attr-defined]

    async def told_after(change: Any) -> list[Any]:
        seen = len(updates)
        change()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while len(updates) == seen:
            assert loop.time() < deadline, "no ctx/indexUpdated"
            await asyncio.sleep(0.05)
        await asyncio.sleep(UPDATE_NOTIFY_DELAY + 0.7)  # a second one would be out by now
        return updates[seen:]

    u = did_open(bare, "shop/models.py")
    got = await told_after(lambda: did_change(bare, u, 2, types.Range(start=types.Position(line=0, character=0),
                                                                     end=types.Position(line=0, character=0)),
                                              "import os\n"))
    assert len(got) == 1 and list(got[0].dirty_files) == ["shop/models.py"], got
    # Neovim on Linux: the server watches the folder itself
    got = await told_after(lambda: (ws / "shop" / "extra.py").write_text("def extra():\n    return 1\n"))
    assert len(got) == 1 and got[0].files == 5, got


async def test_changes_on_disk_wait_while_git_writes_the_tree(bare: LanguageClient, tmp_path: Path) -> None:
    """VS Code reports a checkout's files (didChangeWatchedFiles) while git is still writing them. While
    git holds its index lock they wait: requests answer from the graph as it was and editor buffers go
    in; once the lock is gone the server applies them by itself. A lock left by a git that died (older
    than the wait limit) holds nothing."""
    ws = copy_workspace(tmp_path / "ws")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    await initialize(bare, ws, "visual_studio_code", tmp_path / "cache", init={"jediRefinement": False})
    await wait_indexed(bare)
    updates = bare.index_updates  # type: ignore[attr-defined]
    refund = await prepare_call(bare, "shop/service.py", "refund", line=15)
    lock = ws / ".git" / "index.lock"
    lock.touch()
    (ws / "shop/extra.py").write_text("from shop.service import refund\n\n\ndef bulk(items):\n"
                                      "    return [refund(i) for i in items]\n", encoding="utf-8")
    bare.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=uri(ws, "shop/extra.py"), type=types.FileChangeType.Created)]))
    assert await callers(bare, refund) == {}  # the request right after the change
    u = did_open(bare, "shop/models.py")
    did_change(bare, u, 2, types.Range(start=types.Position(line=0, character=0),
                                       end=types.Position(line=0, character=0)), "import os\n")
    await asyncio.sleep(1.0)  # past the debounce, and many of the server's looks at the lock
    st = await command(bare, "ctx.indexStatus")
    assert st["files"] == 4 and st["folders"][0]["git_busy"] is True
    assert st["dirty_files"] == ["shop/models.py"]  # the buffer went in
    assert await callers(bare, refund) == {}
    # the wait shows as one work-done progress (VS Code's status bar), begun and not ended
    shown = [t for t, r in bare.progress_reports.items()
             if r and isinstance(r[0], types.WorkDoneProgressBegin) and "git" in r[0].title]
    assert len(shown) == 1 and not isinstance(bare.progress_reports[shown[0]][-1], types.WorkDoneProgressEnd)
    seen = len(updates)
    lock.unlink()  # git is done: the server applies the held changes with no request to prompt it
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not any(u.files == 5 for u in updates[seen:]):
        assert loop.time() < deadline, "the held changes were not applied once the lock was gone"
        await asyncio.sleep(0.05)
    assert set(await callers(bare, refund)) == {"bulk"}
    while not isinstance(bare.progress_reports[shown[0]][-1], types.WorkDoneProgressEnd):
        assert loop.time() < deadline, "the progress did not end once the held changes went in"
        await asyncio.sleep(0.05)
    assert (await command(bare, "ctx.indexStatus"))["folders"][0]["git_busy"] is False
    # a stale lock: the change goes in as usual
    lock.touch()
    old = time.time() - 3600
    os.utime(lock, (old, old))
    (ws / "shop/extra.py").unlink()
    bare.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=uri(ws, "shop/extra.py"), type=types.FileChangeType.Deleted)]))
    assert await callers(bare, refund) == {}
    assert (await command(bare, "ctx.indexStatus"))["files"] == 4
    assert sum("git" in r[0].title for r in bare.progress_reports.values()
               if r and isinstance(r[0], types.WorkDoneProgressBegin)) == 1  # nothing waited this time


# -- servers with their own settings ------------------------------------------------------------------
@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER))
async def bare(lsp_client: LanguageClient):
    """A started server the test initializes itself."""
    lsp_client.shut = False  # type: ignore[attr-defined]
    yield
    if not lsp_client.shut:  # type: ignore[attr-defined]
        await lsp_client.shutdown_session()


def generate_workspace(root: Path, modules: int) -> Path:
    """A synthetic workspace big enough that indexing takes a few seconds on this machine."""
    for i in range(modules):
        d = root / f"pkg{i % 20}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "__init__.py").touch()
        body = [f"from pkg{(i + 1) % 20}.m{i + 1} import f0 as nxt\n" if i + 1 < modules else "nxt = abs\n"]
        for j in range(8):
            body.append(f"\n\nclass C{j}:\n    def run(self, x):\n        return f{j}(x) + {j}\n")
            body.append(f"\n\ndef f{j}(x):\n    return nxt(x) if x else C{j}().run(x - 1)\n")
        (d / f"m{i}.py").write_text("".join(body), encoding="utf-8")
    return root


async def poll_status(client: LanguageClient, until: Any, timeout: float = 60) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        st = await command(client, "ctx.indexStatus")
        if until(st):
            return st
        assert loop.time() < deadline, st
        await asyncio.sleep(0.05)


async def test_settings_invalid_values_warn_and_configuration_is_honoured(bare: LanguageClient, tmp_path: Path) -> None:
    ws = copy_workspace(tmp_path / "ws")
    bare.set_configuration({"exclude": ["tests/**"], "budget": 300}, section="ctx")
    await initialize(bare, ws, "visual_studio_code", tmp_path / "cache",
                     init={"budget": -1, "jediRefinement": "yes", "bogus": 1})
    st = await wait_indexed(bare)
    warnings = [m.message for m in bare.messages if m.type == types.MessageType.Warning]
    assert any("'budget'" in w for w in warnings) and any("'jediRefinement'" in w for w in warnings)
    assert any("'bogus'" in w for w in warnings)
    assert st["files"] == 3  # the `ctx` section's exclude applies
    pack = await command(bare, "ctx.getContext", {"query": "checkout"})
    assert pack["budget"] == 300  # the `ctx` section's budget is the default
    # VS Code supports dynamic registration: the server watches **/*.py
    watchers = [r for r in bare.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES]  # type: ignore[attr-defined]
    assert watchers and watchers[0].register_options["watchers"][0]["globPattern"] == "**/*.py"
    # settings are re-read on didChangeConfiguration; a changed filter re-indexes
    bare.set_configuration({"exclude": []}, section="ctx")
    bare.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    st = await poll_status(bare, lambda s: s["files"] == 4 and not s["indexing"])
    pack = await command(bare, "ctx.getContext", {"query": "checkout"})
    assert pack["budget"] == 4000
    # each invalid value was shown once: the settings change re-read the same initializationOptions
    again = [m.message for m in bare.messages if m.type == types.MessageType.Warning]
    assert sorted(again) == sorted(set(again)) and len(again) == len(warnings), again


async def test_a_cache_directory_the_file_system_refuses_is_said_at_once(bare: LanguageClient, tmp_path: Path) -> None:
    """Not only in the log, and only once the index is written: the folder is still indexed and served."""
    ws = copy_workspace(tmp_path / "ws")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    await initialize(bare, ws, "visual_studio_code", blocker / "cache")
    st = await wait_indexed(bare)
    assert st["files"] == 4
    warnings = [m.message for m in bare.messages if m.type == types.MessageType.Warning]
    assert any("cannot use the cache directory" in w and "indexed in memory only" in w for w in warnings), warnings
    assert blocker.read_text() == "x"


async def test_a_changed_exclude_setting_moves_the_servers_own_watches(bare: LanguageClient, tmp_path: Path) -> None:
    """Neovim on Linux: the server's own watcher sets no watch in folders the exclude globs leave out.
    When the setting changes, the folder is re-indexed and the watches follow it: a file written
    afterwards in a folder no longer excluded reaches the index with no notification from the client."""
    ws = copy_workspace(tmp_path / "ws")
    (ws / "vendored" / "lib").mkdir(parents=True)
    (ws / "vendored" / "lib" / "old.py").write_text("def old():\n    return 1\n", encoding="utf-8")
    settings = {"exclude": ["vendored/"], "jediRefinement": False}
    bare.set_configuration(settings, section="ctx")
    await initialize(bare, ws, "neovim", tmp_path / "cache", init=settings)
    assert (await wait_indexed(bare))["files"] == 4
    await poll_status(bare, lambda s: s["folders"][0]["watching"] is True)
    bare.set_configuration({"exclude": [], "jediRefinement": False}, section="ctx")
    bare.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"ctx": {"exclude": [], "jediRefinement": False}}))
    await poll_status(bare, lambda s: s["files"] == 5 and not s["indexing"] and s["folders"][0]["watching"] is True)
    (ws / "vendored" / "lib" / "new.py").write_text("def new():\n    return 2\n", encoding="utf-8")
    await poll_status(bare, lambda s: s["files"] == 6, timeout=20)


async def test_the_servers_own_watcher_waits_for_git_and_the_status_says_so(bare: LanguageClient, tmp_path: Path) -> None:
    """Neovim on Linux: a checkout seen by the server's own watcher waits while git holds its index
    lock, and `ctx.indexStatus` says `git_busy` meanwhile, as for changes the client reports."""
    ws = copy_workspace(tmp_path / "ws")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    await initialize(bare, ws, "neovim", tmp_path / "cache", init={"jediRefinement": False})
    assert (await wait_indexed(bare))["files"] == 4
    await poll_status(bare, lambda s: s["folders"][0]["watching"] is True)
    lock = ws / ".git" / "index.lock"
    lock.touch()
    (ws / "shop/extra.py").write_text("def extra():\n    return 1\n", encoding="utf-8")
    st = await poll_status(bare, lambda s: s["folders"][0]["git_busy"] is True, timeout=20)
    assert st["files"] == 4  # held: not in the index yet

    def git_progress() -> list[Any]:
        return [r for r in bare.progress_reports.values()
                if r and isinstance(r[0], types.WorkDoneProgressBegin) and "git" in r[0].title]

    async def shown() -> bool:
        return len(git_progress()) == 1

    async def ended() -> bool:
        return isinstance(git_progress()[0][-1], types.WorkDoneProgressEnd)

    assert await eventually(shown)  # a work-done progress (Neovim's LspProgress, VS Code's status bar)
    assert not isinstance(git_progress()[0][-1], types.WorkDoneProgressEnd)
    lock.unlink()
    st = await poll_status(bare, lambda s: s["files"] == 5, timeout=20)
    assert st["folders"][0]["git_busy"] is False
    assert await eventually(ended)


async def test_multi_root_workspace(bare: LanguageClient, tmp_path: Path) -> None:
    a = copy_workspace(tmp_path / "alpha")
    b = copy_workspace(tmp_path / "beta")
    (b / "shop/extra.py").write_text("from shop.service import refund\n\n\ndef bulk(items):\n"
                                     "    return [refund(i) for i in items]\n", encoding="utf-8")
    await initialize(bare, a, "neovim", tmp_path / "cache", folders=[a, b])
    st = await wait_indexed(bare)
    assert st["roots"] == [str(a), str(b)] and st["files"] == 9
    assert [f["state"] for f in st["folders"]] == ["ready", "ready"]
    async def both_written() -> bool:  # the builds' writes (forked children on Linux) follow by a moment
        return len(list((tmp_path / "cache").glob("*/index.msgpack"))) == 2

    assert await eventually(both_written, 10.0)  # one cache per folder
    got = await bare.workspace_symbol_async(types.WorkspaceSymbolParams(query="refund"))
    assert sorted(s.location.uri for s in got) == [uri(a, "shop/service.py"), uri(b, "shop/service.py")]
    bare.ws = b  # type: ignore[attr-defined]
    item = await prepare_call(bare, "shop/service.py", "refund", line=15)
    assert item.uri == uri(b, "shop/service.py") and set(await callers(bare, item)) == {"bulk"}
    bare.ws = a  # type: ignore[attr-defined]
    item = await prepare_call(bare, "shop/service.py", "refund", line=15)
    assert await callers(bare, item) == {}
    pack = await command(bare, "ctx.getContext", {"query": "who calls refund", "uri": uri(b, "shop/service.py")})
    assert all(i["uri"].startswith(b.as_uri()) for i in pack["items"]) and pack["items"]


async def test_a_status_that_says_not_indexing_has_every_folders_counts(bare: LanguageClient, tmp_path: Path) -> None:
    """A status is taken folder by folder; a folder whose build finished while the next one was being
    asked must not be reported as done with the counts of its half-built index."""
    big = generate_workspace(tmp_path / "big", 300)
    small = copy_workspace(tmp_path / "small")
    await initialize(bare, small, "neovim", tmp_path / "cache", folders=[small, big])
    while True:
        st = await command(bare, "ctx.indexStatus", {})
        if not st["indexing"]:
            break
        assert [f["state"] for f in st["folders"]] != ["ready", "ready"] or st["files"] == 320 + 4
    assert st["files"] == 320 + 4 and [f["state"] for f in st["folders"]] == ["ready", "ready"]


async def test_indexing_runs_in_the_background_answers_stale_and_can_be_cancelled(
        bare: LanguageClient, tmp_path: Path) -> None:
    ws = generate_workspace(tmp_path / "big", 300)
    await initialize(bare, ws, "visual_studio_code", tmp_path / "cache")
    # answered while indexing: from the partial index, marked stale
    st = await command(bare, "ctx.indexStatus")
    assert st["indexing"] is True and st["stale"] is True
    pack = await command(bare, "ctx.getContext", {"query": "who calls f0", "budget": 500})
    assert pack["stale"] is True
    token = None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while token is None:
        token = next((t for t, r in bare.progress_reports.items() if r), None)
        assert loop.time() < deadline
        await asyncio.sleep(0.02)
    bare.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    st = await poll_status(bare, lambda s: not s["indexing"])
    assert st["folders"][0]["state"] == "cancelled" and st["stale"] is True
    end = bare.progress_reports[token][-1]
    assert isinstance(end, types.WorkDoneProgressEnd) and "cancelled" in (end.message or "")
    # ctx.reindex rebuilds from scratch and answers with the fresh status
    st = await command(bare, "ctx.reindex")
    assert st["indexing"] is False and st["stale"] is False and st["files"] == 320
    assert st["folders"][0]["state"] == "ready"
    # the index it replaced is freed (a rebuild of a Django-sized folder kept ~400 MB more each time)
    assert any("freed the index of" in m.message and "before the rebuild" in m.message for m in bare.log_messages)


@pytest_lsp.fixture(config=ClientServerConfig(
    server_command=SERVER, server_env={**os.environ, "CTX_LSP_TEST_CHECKPOINT_DELAY_MS": "300"}))
async def slow(lsp_client: LanguageClient, tmp_path: Path):
    """A server whose retrieval stages are slowed down, so a request can be cancelled mid-way."""
    ws = copy_workspace(tmp_path / "ws")
    await initialize(lsp_client, ws, "neovim", tmp_path / "cache")
    await wait_indexed(lsp_client)
    lsp_client.shut = False  # type: ignore[attr-defined]
    yield
    if not lsp_client.shut:  # type: ignore[attr-defined]
        await lsp_client.shutdown_session()


async def test_cancelling_ctx_get_context_stops_the_retrieval(slow: LanguageClient) -> None:
    from pygls.exceptions import JsonRpcRequestCancelled

    params = {"query": "who calls checkout", "budget": 500}
    pending = asyncio.ensure_future(send_raw(slow, "ctx/getContext", params, msg_id="cancel-me"))
    await asyncio.sleep(0.45)  # past the first checkpoint
    slow.protocol.notify("$/cancelRequest", types.CancelParams(id="cancel-me"))
    with pytest.raises(JsonRpcRequestCancelled):
        await pending
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10
    while not any("ctx/getContext cancelled" in m.message for m in slow.log_messages):
        assert loop.time() < deadline, [m.message for m in slow.log_messages]
        await asyncio.sleep(0.05)
    note = next(m.message for m in slow.log_messages if "ctx/getContext cancelled" in m.message)
    stages = int(note.split("stopped after ")[1].split(" ")[0])
    full = await send_raw(slow, "ctx/getContext", params)  # the server still serves, uncancelled
    assert full["items"] and 1 <= stages < 4


@pytest_lsp.fixture(config=ClientServerConfig(
    server_command=SERVER, server_env={**os.environ, "CTX_LSP_TEST_FAULT": "workspace/symbol"}))
async def faulty(lsp_client: LanguageClient, tmp_path: Path):
    """A server whose workspace/symbol handler raises (fault injection)."""
    ws = copy_workspace(tmp_path / "ws")
    await initialize(lsp_client, ws, "visual_studio_code", tmp_path / "cache")
    await wait_indexed(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_an_exception_in_a_handler_is_an_error_and_the_server_keeps_serving(faulty: LanguageClient) -> None:
    from pygls.exceptions import JsonRpcInternalError

    with pytest.raises(JsonRpcInternalError, match="injected fault in workspace/symbol"):
        await faulty.workspace_symbol_async(types.WorkspaceSymbolParams(query="checkout"))
    assert any(m.type == types.MessageType.Error and "workspace/symbol failed" in m.message
               for m in faulty.log_messages)
    item = await prepare_call(faulty, "shop/service.py", "checkout", line=9)
    assert set(await callers(faulty, item)) == {"refund", "test_checkout"}


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


async def test_a_checkout_is_written_to_the_cache_once_changes_pause(bare: LanguageClient, tmp_path: Path) -> None:
    """The refresh a checkout causes answers first and writes the cache later, unasked (jedi refinement,
    which also writes, is off here): a restart then finds nothing to update."""
    from ctx_lsp.index.workspace import WorkspaceIndex

    ws = copy_workspace(tmp_path / "ws")
    await initialize(bare, ws, "neovim", tmp_path / "cache", init={"jediRefinement": False})
    await wait_indexed(bare)
    await poll_status(bare, lambda s: s["folders"][0]["watching"] is True)
    (ws / "loyalty").mkdir()
    for i in range(20):
        (ws / "loyalty" / f"tier{i}.py").write_text(f"def tier{i}(x):\n    return x\n", encoding="utf-8")
    await poll_status(bare, lambda s: s["files"] == 24)
    cache = next((tmp_path / "cache").glob("*/index.msgpack")).parent

    async def written() -> bool:
        return WorkspaceIndex(ws, cache_dir=cache).load_or_build(save=False).extracted == 0

    assert await eventually(written)


async def test_clean_shutdown_and_nothing_written_outside_the_cache(bare: LanguageClient, tmp_path: Path) -> None:
    from ctx_lsp.index.store import default_cache_dir

    ws = copy_workspace(tmp_path / "ws")
    before = tree(ws)
    await initialize(bare, ws, "neovim", tmp_path / "cache")
    await wait_indexed(bare)
    u = did_open(bare, "shop/models.py")
    did_change(bare, u, 2, types.Range(start=types.Position(line=0, character=0),
                                       end=types.Position(line=0, character=0)), "import os\n")
    await command(bare, "ctx.getContext", {"query": "who calls save"})
    bare.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=u)))
    await command(bare, "ctx.reindex")
    await bare.shutdown_session()
    bare.shut = True  # type: ignore[attr-defined]
    assert bare._server is not None and bare._server.returncode == 0
    assert tree(ws) == before  # the server never writes into the workspace
    assert "index.msgpack" in [p.name for p in (tmp_path / "cache").glob("*/*")]
    assert not default_cache_dir(ws).exists()  # nor in the default per-user cache


def test_didchange_latency_benchmark_drives_the_real_server(tmp_path: Path) -> None:
    from benchmark_gen.lsp_latency import didchange_latency

    ws = copy_workspace(tmp_path / "ws")
    got = didchange_latency(ws, tmp_path / "cache", edits=3)
    assert got["didchange_n"] == 3
    assert 0 < got["didchange_p50_ms"] <= got["didchange_p95_ms"]
    assert (ws / "shop/service.py").read_text(encoding="utf-8") == (FIXTURE / "shop/service.py").read_text(encoding="utf-8")


async def test_jedi_refinement_runs_in_the_background_and_is_reported(client: LanguageClient) -> None:
    st = await poll_status(client, lambda s: s["refinement"]["total"] > 0
                           and s["refinement"]["done"] == s["refinement"]["total"])
    assert 0 < st["refinement"]["total"] <= st["files"]


async def test_opened_files_feed_working_memory(client: LanguageClient) -> None:
    def remembered(pack: dict[str, Any]) -> set[str]:
        return {i["path"] for i in pack["items"] if any(r["via"] == "working-memory" for r in i["reasons"])}

    before = await command(client, "ctx.getContext", {"query": "refund", "budget": 4000})
    assert "tests/test_service.py" not in remembered(before)
    did_open(client, "tests/test_service.py")
    pack = await command(client, "ctx.getContext", {"query": "refund", "budget": 4000})
    assert "tests/test_service.py" in remembered(pack)


async def test_workspace_folders_added_and_removed_at_runtime(client: LanguageClient, tmp_path: Path) -> None:
    other = copy_workspace(tmp_path / "other")
    folder = types.WorkspaceFolder(uri=other.as_uri(), name="other")
    client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(added=[folder], removed=[])))
    st = await poll_status(client, lambda s: len(s["roots"]) == 2 and not s["indexing"])
    assert st["roots"][1] == str(other) and st["files"] == 8
    client.workspace_did_change_workspace_folders(types.DidChangeWorkspaceFoldersParams(
        event=types.WorkspaceFoldersChangeEvent(added=[], removed=[folder])))
    st = await poll_status(client, lambda s: len(s["roots"]) == 1)
    assert st["files"] == 4
    # and the removed folder's index is freed, not kept alive by what followed it (coverage, history)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    while not any("index of removed folder other" in m.message for m in client.log_messages):
        assert loop.time() < deadline, [m.message for m in client.log_messages]
        await asyncio.sleep(0.05)
    assert any("freed the index of removed folder other" in m.message for m in client.log_messages)
    from pygls.exceptions import JsonRpcInvalidParams

    with pytest.raises(JsonRpcInvalidParams, match="outside the workspace"):
        await command(client, "ctx.architecturalContext", {"uri": uri(other, "shop/service.py")})


async def test_a_workspace_big_enough_for_worker_processes_indexes_inside_the_server(
        bare: LanguageClient, tmp_path: Path) -> None:
    # >= 600 files: the index parses and binds in process pools; forked workers once hung in the server
    # on the stdin lock held by the LSP reader thread
    ws = generate_workspace(tmp_path / "big", 650)
    await initialize(bare, ws, "neovim", tmp_path / "cache", init={"jediRefinement": False})
    st = await poll_status(bare, lambda s: not s["indexing"], timeout=240)
    assert st["folders"][0]["state"] == "ready" and st["files"] == 670 and st["stale"] is False
    assert st["edges"]["CALLS"] > 650 * 8


async def test_every_request_sent_after_an_edit_sees_it(client: LanguageClient) -> None:
    ws = client.ws  # type: ignore[attr-defined]
    refund = await prepare_call(client, "shop/service.py", "refund", line=15)
    u = did_open(client, "shop/service.py")
    n = len((ws / "shop/service.py").read_text(encoding="utf-8").splitlines())
    end = types.Position(line=n, character=0)
    did_change(client, u, 2, types.Range(start=end, end=end), "\n\ndef audit(item):\n    return refund(item)\n")
    # several requests in flight at once: whichever runs first folds the edit in for all of them
    answers = await asyncio.gather(*(callers(client, refund) for _ in range(4)))
    assert all(set(a) == {"audit"} for a in answers), answers


async def test_shutdown_with_a_request_in_flight_is_clean(slow: LanguageClient) -> None:
    pending = asyncio.ensure_future(send_raw(slow, "ctx/getContext", {"query": "who calls checkout"}))
    await asyncio.sleep(0.4)  # the retrieval is between two slowed-down stages
    await slow.shutdown_session()
    slow.shut = True  # type: ignore[attr-defined]
    assert slow._server is not None and slow._server.returncode == 0
    pending.cancel()
