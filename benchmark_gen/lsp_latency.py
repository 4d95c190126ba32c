"""didChange -> a query that reflects it, and a checkout -> the graph that reflects it, through the real
language server over stdio.

Starts `python -m ctx_lsp serve` as a subprocess and speaks LSP to it with pygls' client (this
module never imports ctx_lsp.server). Each sample opens a random workspace file, appends a new
function with didChange (an incremental edit, as an editor sends it), then sends
textDocument/prepareCallHierarchy on the new function's name until the answer names it. The sample
is the wall time from sending didChange to that answer: the server's edit handling, the graph
update (re-extract + re-bind of affected files) and one query. The server runs with jedi refinement
off, so no background pass competes for the CPU or the index lock.
"""

from __future__ import annotations

import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from ctx_lsp.index.discovery import discover

READY_TIMEOUT_S = 1800.0  # a cold index of a large workspace inside the server
# one request's answer: the server answers from a partial index between indexing batches, so even
# during a cold index a request waits at most seconds; a lost answer fails the run instead of hanging it
REQUEST_TIMEOUT_S = 120.0
REFLECT_TIMEOUT_S = 30.0
EXIT_TIMEOUT_S = 5.0  # for the server to leave after `exit` (or after a failed run, before it is killed)


def _nearest_rank(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, -(-len(ordered) * q // 100) - 1))
    return ordered[int(k)]


def _end_position(text: str) -> types.Position:
    """The end of `text` in utf-16 units (the encoding negotiated by a client that states none)."""
    last = text.split("\n")[-1]
    return types.Position(line=text.count("\n"), character=len(last.encode("utf-16-le")) // 2)


def _ignore(params: Any) -> None:
    return None


def _field(obj: Any, name: str) -> Any:
    """A field of an executeCommand result (a dict, or pygls' namedtuple for untyped results)."""
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


async def _answer(request: Any, what: str) -> Any:
    try:
        return await asyncio.wait_for(request, REQUEST_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise TimeoutError(f"the server did not answer {what} within {REQUEST_TIMEOUT_S:.0f} s") from None


async def _execute(client: LanguageClient, command: str, arg: Any = None) -> Any:
    return await _answer(client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=[arg or {}])), command)


async def _stop(client: LanguageClient) -> None:
    """Stop the client and its server. pygls's `stop` waits for the server process to exit, which it
    does only after `exit`: when a run fails before that (an error answer, a timeout), the server is
    killed, or the benchmark would wait for it for ever."""
    server = getattr(client, "_server", None)
    if server is not None and server.returncode is None:
        try:
            await asyncio.wait_for(server.wait(), EXIT_TIMEOUT_S)
        except asyncio.TimeoutError:
            server.kill()
    await client.stop()


async def _measure(root: Path, cache_dir: Path, edits: int, seed: int) -> dict[str, Any]:
    root = root.resolve()
    files = sorted(discover(root).files)
    if not files:
        return {"didchange_p50_ms": None, "didchange_p95_ms": None, "didchange_n": 0}
    client = LanguageClient("ctx-lsp-bench", "0")
    for method in (types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE, "ctx/indexUpdated"):
        client.feature(method)(_ignore)  # server chatter the benchmark does not need
    await client.start_io(sys.executable, "-m", "ctx_lsp", "serve")
    try:
        await _answer(client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            # the request, not the debounce timer, folds the edit in; no jedi pass competing for the CPU
            initialization_options={"cacheDir": str(cache_dir), "debounceMs": 10_000, "jediRefinement": False})),
            "initialize")
        client.initialized(types.InitializedParams())
        deadline = time.monotonic() + READY_TIMEOUT_S
        while _field(await _execute(client, "ctx.indexStatus"), "indexing"):
            if time.monotonic() > deadline:
                raise TimeoutError("the server did not finish indexing")
            await asyncio.sleep(0.2)
        rng = random.Random(seed)
        samples: list[float] = []
        for i in range(edits):
            rel = rng.choice(files)
            uri = (root / rel).as_uri()
            text = (root / rel).read_bytes().decode("utf-8", "replace")
            client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=text)))
            doc = types.TextDocumentIdentifier(uri=uri)
            # fold the didOpen in before timing (the next request applies pending edits first)
            await client.text_document_prepare_call_hierarchy_async(types.CallHierarchyPrepareParams(
                text_document=doc, position=types.Position(line=0, character=0)))
            name = f"ctx_probe_{i}"
            end = _end_position(text)
            probe = f"\n\ndef {name}():\n    return None\n"
            at = types.Position(line=end.line + 2, character=4)  # the new def's name
            t0 = time.perf_counter()
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=end, end=end),
                                                                        text=probe)]))
            while True:
                items = await client.text_document_prepare_call_hierarchy_async(
                    types.CallHierarchyPrepareParams(text_document=doc, position=at))
                if items and items[0].name == name:
                    samples.append((time.perf_counter() - t0) * 1000)
                    break
                if time.perf_counter() - t0 > REFLECT_TIMEOUT_S:
                    raise TimeoutError(f"didChange of {rel} was not reflected after {REFLECT_TIMEOUT_S} s")
            client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=doc))
        await _execute(client, "ctx.indexStatus")  # fold the last close in before shutting down
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await _stop(client)
    return {
        "didchange_p50_ms": round(_nearest_rank(samples, 50) or 0, 2) if samples else None,
        "didchange_p95_ms": round(_nearest_rank(samples, 95) or 0, 2) if samples else None,
        "didchange_n": len(samples),
    }


def didchange_latency(root: Path, cache_dir: Path | None = None, edits: int = 50, seed: int = 0) -> dict[str, Any]:
    """{"didchange_p50_ms", "didchange_p95_ms", "didchange_n"} for `edits` samples on `root`.

    The server's cache goes under `cache_dir` (a temporary directory when None, removed afterwards).
    """
    if cache_dir is not None:
        return asyncio.run(_measure(root, cache_dir, edits, seed))
    with tempfile.TemporaryDirectory(prefix="ctx-lsp-didchange-") as tmp:
        return asyncio.run(_measure(root, Path(tmp), edits, seed))


def measure(root: Path, cache_dir: Path, args: Any) -> dict[str, Any]:
    """The `benchmark_gen.speed.EXTRA_MEASURES` hook: samples = `--edits` (default 50)."""
    return didchange_latency(root, cache_dir / "lsp", edits=int(getattr(args, "edits", 50) or 50))


async def _checkout(tree: Path, cache_dir: Path, layout: Callable[[], object], quiet_s: float) -> dict[str, Any]:
    tree = tree.resolve()
    client = LanguageClient("ctx-lsp-bench", "0")
    updates: list[tuple[float, Any]] = []
    for method in (types.WINDOW_LOG_MESSAGE, types.WINDOW_SHOW_MESSAGE):
        client.feature(method)(_ignore)
    client.feature("ctx/indexUpdated")(lambda params: updates.append((time.perf_counter(), params)))
    await client.start_io(sys.executable, "-m", "ctx_lsp", "serve")
    try:
        # no dynamic didChangeWatchedFiles (as Neovim on Linux): the server watches the folder itself
        await _answer(client.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(), root_uri=tree.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=tree.as_uri(), name=tree.name)],
            initialization_options={"cacheDir": str(cache_dir), "jediRefinement": False})), "initialize")
        client.initialized(types.InitializedParams())
        t_start = time.perf_counter()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            status = await _execute(client, "ctx.indexStatus")
            if not _field(status, "indexing") and _field(_field(status, "folders")[0], "watching"):
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the server did not finish indexing, or does not watch the folder")
            await asyncio.sleep(0.05)
        indexed = time.perf_counter() - t_start
        await asyncio.sleep(quiet_s)  # the start's own notifications are out
        seen = len(updates)
        layout()
        t_end = time.perf_counter()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while len(updates) == seen or time.perf_counter() - updates[-1][0] < quiet_s:
            if time.monotonic() > deadline:
                raise TimeoutError("the server did not take in the checkout")
            await asyncio.sleep(0.05)  # no request: the server folds the changes in by itself
        settle = updates[-1][0] - t_end
        t0 = time.perf_counter()
        status = await _execute(client, "ctx.indexStatus")
        call = time.perf_counter() - t0
        files = _field(status, "files")
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await _stop(client)
    return {"settle_s": settle, "status_s": call, "files": files, "indexed_s": indexed}


def checkout_settle(tree: Path, cache_dir: Path, layout: Callable[[], object], quiet_s: float = 1.5) -> dict[str, Any]:
    """A checkout under the language server (its own watcher, as for Neovim; jedi refinement off): the
    server indexes `tree`, then `layout()` turns it into another version. `settle_s`: from the end of
    the layout to the server's last `ctx/indexUpdated` (none follows for `quiet_s`), what an editor
    user waits before answers reflect the checkout; `status_s`: a `ctx.indexStatus` request then;
    `files`: the files it then reports; `indexed_s`: from `initialized` until the server reported its
    first index (from cold: `cache_dir` is new) done and the folder watched, polled every 50 ms."""
    return asyncio.run(_checkout(tree, cache_dir, layout, quiet_s))
