"""pyright's language server as an independent static oracle, driven as a plain LSP client.

The server comes from the npm project next to this file (`npm ci --prefix benchmark_gen/pyright`);
nothing is downloaded at run time. pygls' LanguageClient speaks the protocol; benchmark_gen never
imports our own server. Positions cross the wire in UTF-16 code units (LSP's default encoding),
while the core speaks 0-based code points, so every position is converted with the line's text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types as T
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path, to_fs_path

PYRIGHT_DIR = Path(__file__).resolve().parent / "pyright"
REQUEST_TIMEOUT = 60.0


def langserver_path() -> Path | None:
    """The installed `pyright-langserver`, or None when `npm ci --prefix benchmark_gen/pyright` was not run."""
    exe = PYRIGHT_DIR / "node_modules" / ".bin" / "pyright-langserver"
    return exe if exe.exists() else None


def cp_to_utf16(text: str, col: int) -> int:
    """A code-point column of one line as a UTF-16 offset (astral characters count twice)."""
    head = text[:col]
    return col + sum(1 for ch in head if ord(ch) > 0xFFFF)


def utf16_to_cp(text: str, offset: int) -> int:
    units = 0
    for i, ch in enumerate(text):
        if units >= offset:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(text)


@dataclass(frozen=True, slots=True)
class Loc:
    """A location pyright answered with: absolute path, 0-based line, code-point column."""

    path: str
    line: int
    col: int


@dataclass(frozen=True, slots=True)
class CallTarget:
    """One outgoing call of a call-hierarchy item: the callee's name location and its symbol kind."""

    loc: Loc
    name: str
    kind: str  # lsprotocol SymbolKind name: Function, Method, Class, Property, ...


class PyrightOracle:
    """One pyright-langserver process over one workspace root. Use as an async context manager."""

    def __init__(self, root: Path, exe: Path | None = None) -> None:
        self.root = root.resolve()
        found = exe or langserver_path()
        if found is None:
            raise FileNotFoundError(
                f"pyright-langserver is not installed under {PYRIGHT_DIR}; run `npm ci --prefix benchmark_gen/pyright`"
            )
        self.exe = found
        self.client = LanguageClient("ctx-lsp-verify-edges", "1")
        self.opened: dict[str, list[str]] = {}  # abs path -> lines (what pyright was given)
        self._stderr_task: asyncio.Task[None] | None = None
        self._install_handlers()

    def _install_handlers(self) -> None:
        client = self.client

        @client.feature(T.WORKSPACE_CONFIGURATION)
        def configuration(params: T.ConfigurationParams) -> list[Any]:
            # Defaults everywhere: an oracle must not be tuned towards our answers.
            return [None for _ in params.items]

        @client.feature(T.CLIENT_REGISTER_CAPABILITY)
        def register(params: Any) -> None:
            return None

        @client.feature(T.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def progress(params: Any) -> None:
            return None

        @client.feature(T.WINDOW_LOG_MESSAGE)
        def log_message(params: Any) -> None:
            return None

        @client.feature(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def diagnostics(params: Any) -> None:
            return None

    async def __aenter__(self) -> PyrightOracle:
        # pygls logs every unanswered notification at warning level; keep the report's stderr clean.
        logging.getLogger("pygls").setLevel(logging.ERROR)
        await self.client.start_io(str(self.exe), "--stdio", cwd=str(self.root))
        server = self.client._server  # the subprocess pygls started; its stderr must be drained
        if server is not None and server.stderr is not None:
            self._stderr_task = asyncio.create_task(_drain(server.stderr))
        uri = self.root.as_uri()
        await asyncio.wait_for(
            self.client.initialize_async(
                T.InitializeParams(
                    process_id=None,
                    root_uri=uri,
                    capabilities=T.ClientCapabilities(
                        workspace=T.WorkspaceClientCapabilities(configuration=True, workspace_folders=True),
                    ),
                    workspace_folders=[T.WorkspaceFolder(uri=uri, name=self.root.name)],
                )
            ),
            REQUEST_TIMEOUT,
        )
        self.client.initialized(T.InitializedParams())
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.shutdown_async(None), 10)
            self.client.exit(None)
        server = self.client._server
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.stop(), 10)
        if server is not None and server.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                server.kill()
        if self._stderr_task is not None:
            self._stderr_task.cancel()

    # -- documents ------------------------------------------------------------------------
    def open(self, path: Path) -> list[str]:
        key = str(path)
        lines = self.opened.get(key)
        if lines is None:
            text = path.read_text(encoding="utf-8", errors="replace")
            lines = text.splitlines()
            self.opened[key] = lines
            self.client.text_document_did_open(
                T.DidOpenTextDocumentParams(T.TextDocumentItem(path.as_uri(), "python", 1, text))
            )
        return lines

    def _position(self, path: Path, line: int, col: int) -> T.Position:
        """0-based line, code-point column -> LSP position."""
        lines = self.open(path)
        text = lines[line] if 0 <= line < len(lines) else ""
        return T.Position(line=line, character=cp_to_utf16(text, col))

    def _loc(self, uri: str, pos: T.Position) -> Loc | None:
        fs = to_fs_path(uri)
        if fs is None:
            return None
        col = pos.character
        with contextlib.suppress(OSError, ValueError):
            p = Path(fs)
            if p.suffix == ".py" and p.is_relative_to(self.root):
                lines = self.open(p)
                if 0 <= pos.line < len(lines):
                    col = utf16_to_cp(lines[pos.line], pos.character)
        return Loc(str(Path(fs)), pos.line, col)

    # -- requests ------------------------------------------------------------------------
    async def definition(self, path: Path, line: int, col: int) -> list[Loc]:
        """Where pyright says the name at (0-based line, code-point col) is defined; [] when it cannot say."""
        pos = self._position(path, line, col)
        uri = from_fs_path(str(path)) or path.as_uri()
        result = await asyncio.wait_for(
            self.client.text_document_definition_async(T.DefinitionParams(T.TextDocumentIdentifier(uri), pos)),
            REQUEST_TIMEOUT,
        )
        return self._locs(result)

    def _locs(self, result: Any) -> list[Loc]:
        out: list[Loc] = []
        items = result if isinstance(result, list) else ([result] if result is not None else [])
        for item in items:
            if isinstance(item, T.Location):
                loc = self._loc(item.uri, item.range.start)
            elif isinstance(item, T.LocationLink):
                loc = self._loc(item.target_uri, item.target_selection_range.start)
            else:
                loc = None
            if loc is not None and loc not in out:
                out.append(loc)
        return out

    async def type_definition(self, path: Path, line: int, col: int) -> list[Loc]:
        """Where the declared type of the name at (line, col) is defined (a `type[X]` parameter -> X)."""
        pos = self._position(path, line, col)
        uri = from_fs_path(str(path)) or path.as_uri()
        result = await asyncio.wait_for(
            self.client.text_document_type_definition_async(
                T.TypeDefinitionParams(T.TextDocumentIdentifier(uri), pos)
            ),
            REQUEST_TIMEOUT,
        )
        return self._locs(result)

    async def outgoing_calls(self, path: Path, line: int, col: int) -> list[CallTarget] | None:
        """pyright's outgoing calls of the def whose name is at (line, col); None when it has no item there."""
        pos = self._position(path, line, col)
        uri = from_fs_path(str(path)) or path.as_uri()
        items = await asyncio.wait_for(
            self.client.text_document_prepare_call_hierarchy_async(
                T.CallHierarchyPrepareParams(T.TextDocumentIdentifier(uri), pos)
            ),
            REQUEST_TIMEOUT,
        )
        if not items:
            return None
        calls = await asyncio.wait_for(
            self.client.call_hierarchy_outgoing_calls_async(T.CallHierarchyOutgoingCallsParams(items[0])),
            REQUEST_TIMEOUT,
        )
        out: list[CallTarget] = []
        for call in calls or []:
            loc = self._loc(call.to.uri, call.to.selection_range.start)
            if loc is not None:
                out.append(CallTarget(loc, call.to.name, T.SymbolKind(call.to.kind).name))
        return out


async def _drain(stream: asyncio.StreamReader) -> None:
    """Read and drop pyright's stderr so a full pipe never blocks the server."""
    with contextlib.suppress(Exception):
        while await stream.read(65536):
            pass
