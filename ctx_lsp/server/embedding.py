"""The dense generator's vectors in the server: embedded in the background after indexing (with
work-done progress) and again, for the changed symbols only, once edits pause. Queries meanwhile
run without the generator and say so in the pack (ctx_lsp/retrieval/dense.py)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from ctx_lsp.server.folders import READY, Root

if TYPE_CHECKING:
    from ctx_lsp.server.server import CtxLanguageServer

log = logging.getLogger("ctx_lsp.server")
EMBED_DELAY = 1.0  # seconds without edits before the changed symbols are embedded again


def _dense(root: Root) -> Any:
    return root.engine.retriever.dense if root.engine.dense_options is not None else None


def start_embedding(ls: CtxLanguageServer, root: Root) -> None:
    if root.state != READY or _dense(root) is None:
        return
    if root.embed_task is not None and not root.embed_task.done():
        root.embed_again = True  # files changed while it ran: one more pass afterwards
        return
    root.embed_task = ls.spawn(_embed(ls, root))


def schedule_embedding(ls: CtxLanguageServer, root: Root) -> None:
    if _dense(root) is None:
        return
    ls.debounce("embed:" + str(root.path), EMBED_DELAY, lambda: start_embedding(ls, root))


async def _embed(ls: CtxLanguageServer, root: Root) -> None:
    from ctx_lsp.retrieval.embedder import DenseUnavailable

    engine, cancel, dense = root.engine, root.cancel, _dense(root)
    loop = asyncio.get_running_loop()
    token = await _begin(ls, root)

    def progress(done: int, total: int) -> None:
        if token is not None:
            pct = int(100 * done / total) if total else 100
            report = types.WorkDoneProgressReport(message=f"{root.name}: embedding {done}/{total}", percentage=pct)
            loop.call_soon_threadsafe(ls.work_done_progress.report, token, report)

    message = ""
    try:
        while True:
            root.embed_again = False
            finished = await asyncio.to_thread(dense.update, progress, cancel.is_set, engine.lock)
            last = dense.last
            message = (f"{root.name}: {last.get('vectors', 0)} vectors, {last.get('embedded', 0)} embedded"
                       if finished else f"{root.name}: embedding stopped")
            if not finished or engine is not root.engine or not root.embed_again:
                break
    except DenseUnavailable as exc:
        message = f"{root.name}: dense generator unavailable: {exc}"
        ls.log_message(f"ctx-lsp: {message}", types.MessageType.Warning)
    except Exception as exc:  # never takes the server down: queries go on without the generator
        log.exception("embedding %s failed", root.path)
        message = f"{root.name}: embedding failed: {exc!r}"
        ls.log_message(f"ctx-lsp: {message}", types.MessageType.Warning)
    if token is not None:
        ls.end_progress(token, message)
    ls.schedule_index_updated()


async def _begin(ls: CtxLanguageServer, root: Root) -> str | None:
    window = ls.client_capabilities.window
    if window is None or not window.work_done_progress:
        return None
    token = f"ctx-lsp-embed-{uuid.uuid4().hex[:8]}"
    try:
        await ls.work_done_progress.create_async(token)
        ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title="ctx-lsp: embedding", message=root.name, percentage=0))
    except Exception as exc:  # the client refused the token: embed without progress
        log.warning("progress token refused: %s", exc)
        return None
    return token
