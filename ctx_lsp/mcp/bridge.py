"""`ctx-lsp mcp`: the engine served to coding agents over MCP (stdio).

Thin adapters over `ctx_lsp.engine.Engine` (the same engine and persistent index as the language
server and the CLI). Every tool refreshes files changed on disk (size/mtime, then content hash)
before answering. Errors an agent can act on (unknown symbol, path outside the root, bad argument)
come back as MCP tool errors (`is_error=True`) with a one-line message.

stdout is the JSON-RPC wire: nothing here prints; logging goes to stderr. While serving, the SDK
also points fd 1 at stderr, so stray output from libraries cannot corrupt the wire.
An adapter beside the language server: never imports pygls or lsprotocol.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlparse

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import CallToolResult, TextContent, jsonrpc_message_adapter
from pydantic import BeforeValidator, Field, ValidationError

from ctx_lsp import __version__
from ctx_lsp.engine import TEST_DEPTH, Engine, TargetNotFound, path_problem
from ctx_lsp.index.model import Node
from ctx_lsp.retrieval.evidence import cap_text
from ctx_lsp.retrieval.text import NOT_TEXT, looks_binary

log = logging.getLogger("ctx_lsp.mcp")
SAID_CHARS = 160  # a query echoed in a tool's answer: its first line, cut here

MAX_LINES = 200  # a relation listing longer than this is cut (with a count) to protect the agent's context

INSTRUCTIONS = """\
ctx-lsp keeps a typed code graph of this Python workspace (imports, calls, references, inheritance,
instantiation, overrides, tests, history; each edge with its source site). Start a task with
get_context (the smallest explained set of code for a question, inside a token budget). Use
find_callers / find_callees / tests_for before changing a function, get_architectural_context to see
how a file is wired, and semantic_search when you only know words, not names.
Paths are relative to the workspace root; lines are 1-based."""


class ToolFailure(Exception):
    """An anticipated failure with a message for the agent (becomes an MCP ToolError)."""


# --------------------------------------------------------------------------------------------
# the bridge: tool logic, independent of the MCP SDK (testable in-process)
# --------------------------------------------------------------------------------------------
class Bridge:
    """One Engine for the workspace, opened in the background at start and refreshed on every call."""

    def __init__(self, engine: Engine, wait_for_git: bool = True) -> None:
        self.engine = engine
        # each call waits while git writes the tree before its refresh; not in the daemon, which waits
        # (or not, for a git hook's call) before it hands the call over, outside its engine lock
        self.wait_for_git = wait_for_git
        self.root = engine.root.resolve()
        self._warm: threading.Thread | None = None
        self.watcher: Any = None

    def warm_up(self) -> None:
        """Open the index off the request path; the first tool call waits on the engine lock if needed.
        Then watch the tree: an agent's `git checkout` or a batch of its edits is re-indexed in the
        background once it settles, so the next tool call's own refresh finds little left to do."""

        def run() -> None:
            try:
                self.engine.open()
                with self.engine.lock:  # the lexical indexes too (a forked cache writer built only its own)
                    self.engine.retriever.sync()
            except Exception:  # the next tool call retries (refresh opens) and reports the error
                log.exception("opening the index failed")
                return
            from ctx_lsp.index.watch import TreeWatcher

            ix = self.engine.index
            self.watcher = TreeWatcher(self.root, ix.accepts, lambda _rels: self.engine.refresh(),
                                       ignore=[ix.cache_dir], accepts_dir=ix.accepts_dir)
            self.watcher.start()

        self._warm = threading.Thread(target=run, name="ctx-lsp-mcp-open", daemon=True)
        self._warm.start()

    def _fresh(self) -> None:
        try:
            if self.wait_for_git:
                self.engine.wait_for_git()
            changed = self.engine.refresh()
        except Exception as exc:  # an unreadable cache or root: tell the agent, keep serving
            log.exception("refresh failed")
            raise ToolFailure(f"could not update the index: {exc}") from exc
        if changed:
            log.debug("refreshed %d changed files", len(changed))

    # -- argument helpers ----------------------------------------------------------------------
    def rel_path(self, raw: str) -> str:
        """A workspace-relative POSIX path for a path/URI, refusing anything outside the root."""
        text = raw.strip()
        if not text:
            raise ToolFailure("empty path")
        if text.startswith("file://"):
            text = unquote(urlparse(text).path)
        problem = path_problem(text)
        if problem:
            raise ToolFailure(f"not a usable path: {problem}")
        p = Path(text)
        full = p if p.is_absolute() else self.root / p
        try:
            resolved = full.resolve()  # follows `..` and symlinks: a link pointing outside is outside
        except (OSError, RuntimeError) as exc:  # an unreadable directory, a symlink loop
            raise ToolFailure(f"cannot use the path {text}: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            rel = resolved.relative_to(self.root)
        except ValueError:
            raise ToolFailure("path escapes the workspace root") from None
        return rel.as_posix() if rel.parts else "."

    @staticmethod
    def _looks_like_path(text: str) -> bool:
        return text.endswith(".py") or "/" in text or "\\" in text or text.startswith(("file://", "~"))

    def resolve_symbol(self, raw: str, allow_file: bool = False) -> tuple[str, list[str]]:
        """(node id, other candidate ids) for a symbol name; ToolFailure with a suggestion when unknown."""
        t = raw.strip()
        if not t:
            raise ToolFailure("empty symbol name")
        g = self.engine.graph
        if "::" in t:
            path_part, _, qual = t.partition("::")
            node_id = f"{self.rel_path(path_part)}::{qual.strip()}"
            if node_id in g:
                return node_id, []
            raise ToolFailure(f"unknown symbol: {t} (no {qual.strip()!r} in {self.rel_path(path_part)})")
        if self._looks_like_path(t) or Path(t).is_absolute():
            rel = self.rel_path(t)
            if allow_file:
                if rel in g:
                    return rel, []
                raise ToolFailure(f"file not in the index: {rel}")
            raise ToolFailure(f"expected a symbol name (e.g. `Class.method`, `pkg.mod.func` or `path.py::Qual.name`), "
                              f"got the file path {rel!r}; use get_architectural_context for a file")
        candidates = self.engine.find_symbols(t)
        if not candidates:
            close = self.engine.suggest_symbols(t)
            hint = f"; did you mean: {', '.join(close)}?" if close else ""
            raise ToolFailure(f"unknown symbol: {t}{hint}")
        return candidates[0].id, [c.id for c in candidates[1:6]]

    # -- tools -----------------------------------------------------------------------------------
    def get_context(self, query: str, budget: int, fmt: str, path: str | None = None,
                    line: int | None = None) -> tuple[str, dict[str, Any]]:
        q = query.strip()
        if not q and not (path and line is not None):
            raise ToolFailure("empty query (give a query, or `path` and `line` for the symbol there)")
        if looks_binary(q):
            raise ToolFailure(NOT_TEXT)
        if line is not None and not path:
            raise ToolFailure("`line` needs `path` (the file the line is in)")
        rel = self.rel_path(path) if path else None
        self._fresh()
        try:
            if rel is not None:
                self.engine.check_place(rel, line)
            if q:
                pack = self.engine.context(q, budget, path=rel, line=line)
            else:  # a place and no words: the symbol there, its callers, callees and tests (`context --at`)
                assert rel is not None and line is not None
                pack = self.engine.context_at(rel, line, None, budget)
        except ImportError as exc:
            raise ToolFailure(f"the retrieval engine is not available in this installation ({exc})") from exc
        except (TargetNotFound, ValueError) as exc:
            raise ToolFailure(str(exc)) from exc
        if fmt == "json":
            return json.dumps(pack, indent=1), pack
        from ctx_lsp.retrieval.render import to_markdown

        return to_markdown(pack), pack

    def architectural(self, file_path: str, fmt: str) -> str:
        rel = self.rel_path(file_path)
        self._fresh()
        g = self.engine.graph
        if rel not in g:
            try:
                is_dir, exists = (self.root / rel).is_dir(), (self.root / rel).exists()
            except OSError as exc:  # e.g. a file under an unreadable directory
                raise ToolFailure(f"cannot use the path {rel}: {exc.strerror or exc}") from None
            if is_dir:
                raise ToolFailure(f"{rel} is a directory; pass a Python file inside it")
            if exists:
                reason = self.engine.index.skipped.get(rel) if hasattr(self.engine.index, "skipped") else None
                raise ToolFailure(f"{rel} is not an indexed Python file" + (f" ({reason})" if reason else ""))
            raise ToolFailure(f"file not found in the workspace: {rel}")
        with self.engine.lock:
            arch = self.engine.architectural(rel)
        if fmt == "json":
            return json.dumps(arch, indent=1)
        from ctx_lsp.neighbors_text import neighbor_lines

        total = sum(len(grp["neighbors"]) for grp in arch["groups"])
        lines = [f"{rel}: typed 1-hop neighbourhood, {total} edges (-> out of this file or its symbols, <- into "
                 f"them; each neighbour once, [the file's symbols it reaches]; site = where the edge is written)"]
        if not total:
            lines.append("(no edges: nothing in the workspace imports or uses this file, and it uses nothing in it)")
        items = [nb for grp in arch["groups"] for nb in grp["neighbors"]]
        lines.extend(neighbor_lines(items, of_file=True, node_lines=True, counts=True))
        return "\n".join(lines)

    def semantic_search(self, query: str, top_n: int) -> str:
        q = query.strip()
        if not q:
            raise ToolFailure("empty query")
        if looks_binary(q):
            raise ToolFailure(NOT_TEXT)
        q = cap_text(q)  # bounded as get_context's: a pasted log keeps its head and tail
        first = q.split("\n", 1)[0]
        said = repr(first[:SAID_CHARS] + ("…" if len(first) > SAID_CHARS or "\n" in q else ""))  # echoed: one line
        self._fresh()
        with self.engine.lock:
            try:
                ranked = self.engine.retriever.bm25_files(q, top_n)
            except ImportError as exc:
                raise ToolFailure(f"the retrieval engine is not available in this installation ({exc})") from exc
            g = self.engine.graph
            lines = [f"{len(ranked)} files for {said}, best first (BM25 over function/class chunks):"]
            for i, r in enumerate(ranked, 1):
                best = g.node(r.get("best_chunk") or "")
                where = f"  best: {best.qualname or '(module)'}:{best.start_line}" if best is not None else ""
                lines.append(f"{i}. {r['path']}  score {float(r['score']):.2f}{where}")
        if not ranked:
            return f"no files match {said} (BM25 over function/class names, signatures, docstrings and identifiers)"
        return "\n".join(lines)

    def relation(self, symbol: str, relation: str) -> str:
        self._fresh()
        with self.engine.lock:
            node_id, others = self.resolve_symbol(symbol, allow_file=relation == "history")
            if relation == "tests":
                return self._tests(node_id, others)
            items = self.engine.related(node_id, relation, every_site=True)  # callers: every call site
            node = self.engine.graph.node(node_id)
            assert node is not None
            head = self._describe(node)
            note = self._ambiguity(symbol, others)
            if relation == "history":
                if not items:
                    if not self.engine.graph.edge_counts().get("TOUCHED", 0):
                        return (f"history unavailable for {head}: the index holds no commit history (no TOUCHED edges); "
                                f"the workspace is not a git repository or its history has not been imported." + note)
                    return f"no recorded commit touched {head}" + note
                lines = [f"{len(items)} commit{'s' if len(items) != 1 else ''} touched {head}, as recorded in the index:"]
                for it in items[:MAX_LINES]:
                    n: Node = it["node"]
                    doc = (n.doc or "").strip().splitlines()
                    lines.append(f"{n.id} {n.signature} {doc[0] if doc else ''}".rstrip() + f" ({it['reason']})")
                return self._finish(lines, len(items), note)
            word = {"callers": "callers of", "callees": "callees of"}[relation]
            if not items:
                what = "calls or instantiates it" if relation == "callers" else "it calls or instantiates"
                return (f"no {word.split()[0]} found for {head}: nothing in the workspace index {what} "
                        f"(static edges; dynamic dispatch such as getattr or callbacks is not seen)." + note)
            callers = len({it["node"].id for it in items})
            more = f", {len(items)} call sites" if relation == "callers" and len(items) > callers else ""
            count = callers if relation == "callers" else len(items)
            if count == 1:  # "1 caller of", "1 callee of"
                word = word.replace("s of", " of")
            lines = [f"{count} {word} {head}{more}:"]
            for it in items[:MAX_LINES]:
                n, e = it["node"], it["edge"]
                loc = f"{e.path}:{e.line}" if relation == "callers" else f"{n.path}:{n.start_line}"
                lines.append(f"{loc} {n.qualname or n.path} ({it['reason']})")
            return self._finish(lines, len(items), note)

    def _tests(self, node_id: str, others: list[str]) -> str:
        """Tests for a symbol: COVERS edges plus tests that call it within TEST_DEPTH calls (Engine.tests_for)."""
        g = self.engine.graph
        node = g.node(node_id)
        assert node is not None
        head = self._describe(node)
        found = self.engine.tests_for(node_id, TEST_DEPTH)
        note = self._ambiguity(node.qualname or node_id, others)
        if not found:
            cov = g.edge_counts().get("COVERS", 0)
            how = ("coverage data is imported but no test covers it" if cov else
                   "no per-test coverage is imported (run `ctx-lsp coverage run -- pytest` for dynamic COVERS edges)")
            return (f"no tests found for {head}: {how}, and no test function calls it within {TEST_DEPTH} calls." + note)
        lines = [f"{len(found)} tests for {head}:"]
        for t in found[:MAX_LINES]:
            lines.append(f"{t['location']} {t['node'].qualname or t['node'].id} ({t['reason']})")
        return self._finish(lines, len(found), note)

    def _describe(self, node: Node) -> str:
        if node.qualname is None:
            return node.path
        return f"{node.qualname} ({node.kind} at {node.path}:{node.start_line})"

    def _ambiguity(self, asked: str, others: list[str]) -> str:
        if not others:
            return ""
        return (f"\nnote: {asked!r} also matches {', '.join(others)}; pass a qualified name "
                f"(`Class.method`, `pkg.mod.func` or `path.py::Qual.name`) to choose.")

    @staticmethod
    def _finish(lines: list[str], total: int, note: str) -> str:
        if total > MAX_LINES:
            lines.append(f"... and {total - MAX_LINES} more")
        return "\n".join(lines) + note


# --------------------------------------------------------------------------------------------
# the MCP server
# --------------------------------------------------------------------------------------------
# Tool signatures are read by the SDK (pydantic) from these annotations: they must be module-level names.
Symbol = Annotated[str, Field(description="a symbol: short name (`apply_discount`), `Class.method`, dotted "
                                          "`pkg.mod.func`, or `path/to/file.py::Qual.name` to disambiguate")]


def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):  # pydantic's lax mode reads JSON `true` as 1
        raise ValueError("Input should be a valid integer, not a boolean")
    return value


NOT_BOOL = BeforeValidator(_not_bool)  # after Field in Annotated: before it, the schema loses minimum/maximum


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def _recovered(item: Any) -> Any:
    """A message the SDK could not read because a string holds a lone surrogate escape (`"\\udcff"`:
    how Python's json writes a file name that is not UTF-8), read with each such character as U+FFFD,
    so the request gets an answer (a path that names no file) instead of none: the SDK's stdio
    transport drops the line, and the client waits forever. Anything else as it came."""
    if not isinstance(item, ValidationError):
        return item
    errors = item.errors()
    raw = errors[0].get("input") if errors and errors[0].get("type") == "json_invalid" else None
    if not isinstance(raw, str):
        return item
    try:
        message = jsonrpc_message_adapter.validate_python(_without_surrogates(json.loads(raw)), by_name=False)
    except (ValueError, ValidationError):
        return item
    return SessionMessage(message)


class _RecoveringStream:
    """The stdio transport's read stream, its unreadable requests recovered where they can be (`_recovered`)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    @property
    def last_context(self) -> Any:
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Any:
        return _recovered(await self.inner.receive())

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> _RecoveringStream:
        return self

    async def __anext__(self) -> Any:
        return _recovered(await self.inner.__anext__())

    async def __aenter__(self) -> _RecoveringStream:
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self.inner.__aexit__(*exc)


class _Server(MCPServer):
    """Argument validation errors in one line naming each field (the SDK gives pydantic's multi-line
    report with a documentation link); every request answered (`_RecoveringStream`)."""

    async def run_stdio_async(self) -> None:
        async with stdio_server() as (read_stream, write_stream):
            low = self._lowlevel_server
            await low.run(_RecoveringStream(read_stream), write_stream, low.create_initialization_options())

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        known = {t.name: t for t in await self.list_tools()}.get(name)
        if known is not None and isinstance(arguments, dict):
            unknown = sorted(set(arguments) - set(known.input_schema.get("properties", {})))
            if unknown:  # a misspelt argument (`querry`) would otherwise be dropped in silence
                raise ToolError(f"Error executing tool {name}: unknown argument{'s' if len(unknown) > 1 else ''}: "
                                f"{', '.join(unknown)} (it takes {', '.join(known.input_schema.get('properties', {}))})")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                                 for err in cause.errors())
            raise ToolError(f"Error executing tool {name}: invalid arguments: {problems}") from cause


def build_server(bridge: Any) -> MCPServer:
    """An MCPServer whose tools call `bridge` (a Bridge, or a RelayBridge to the daemon: same calls)."""
    app = _Server("ctx-lsp", instructions=INSTRUCTIONS, version=__version__)

    def call(fn, *a):  # type: ignore[no-untyped-def]
        try:
            return fn(*a)
        except ToolFailure as exc:
            raise ToolError(str(exc)) from None
        except OSError as exc:  # the file system refused a path: the agent can act on the reason
            raise ToolError(f"file system error: {exc.strerror or exc}") from None

    @app.tool()
    def get_context(
        query: Annotated[str, Field(description="the task or question in plain words, naming symbols/files if known; "
                                               "empty with `path` and `line`: the symbol there, its callers, callees "
                                               "and tests")] = "",
        budget: Annotated[int, Field(ge=1, le=200_000, description="hard token budget of the pack"), NOT_BOOL] = 4000,
        format: Annotated[Literal["markdown", "json"], Field(
            description="markdown (default, for reading) or json (the ContextPack, also as structured content)")] = "markdown",
        path: Annotated[str | None, Field(description="optional: the file you are working in (workspace-relative)")] = None,
        line: Annotated[int | None, Field(ge=1, description="optional: 1-based line in `path` you are working at"),
                       NOT_BOOL] = None,
    ) -> CallToolResult:
        """Use FIRST for any task or question about this codebase: returns the smallest explained set of code
        (definitions, callers, callees, tests, related files) that answers it, ranked, within a hard token budget.
        Each item says why it was included. Prefer this over reading files one by one."""
        text, pack = call(bridge.get_context, query, budget, format, path, line)
        if format == "json":
            return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=pack)
        # markdown only: several clients show structured content instead of the text when both are present
        return CallToolResult(content=[TextContent(type="text", text=text)])

    @app.tool()
    def get_architectural_context(
        file_path: Annotated[str, Field(description="a Python file, workspace-relative (e.g. `pkg/service.py`)")],
        format: Annotated[Literal["text", "json"], Field(description="text (default) or json")] = "text",
    ) -> str:
        """Use before editing, moving or reviewing a file: its typed 1-hop neighbourhood in both directions
        (what it imports/calls/inherits/instantiates, and what imports/calls/references it), grouped by edge
        kind, each with the exact site (path:line) and the resolver that found it."""
        return call(bridge.architectural, file_path, format)

    @app.tool()
    def semantic_search(
        query: Annotated[str, Field(description="words describing the behaviour or concept you are looking for")],
        top_n: Annotated[int, Field(ge=1, le=100, description="how many files to return"), NOT_BOOL] = 10,
    ) -> str:
        """Use when you know WHAT the code does but not its names: files ranked by BM25 over function and class
        chunks (names, signatures, docstrings, identifiers), each with its best-matching symbols and lines."""
        return call(bridge.semantic_search, query, top_n)

    @app.tool()
    def find_callers(symbol: Symbol) -> str:
        """Use before changing a function's signature or behaviour: every place in the workspace that calls
        (or, for a class, instantiates) it, as `path:line caller (reason)` with the call site."""
        return call(bridge.relation, symbol, "callers")

    @app.tool()
    def find_callees(symbol: Symbol) -> str:
        """Use to understand what a function depends on: the workspace functions, methods and classes it calls
        or instantiates, as `path:line callee (reason)` pointing at each callee's definition."""
        return call(bridge.relation, symbol, "callees")

    @app.tool()
    def tests_for(symbol: Symbol) -> str:
        """Use to find which tests to run or update after changing a symbol: tests covering it (per-test
        coverage when imported) and tests that call it directly or through a few calls (static)."""
        return call(bridge.relation, symbol, "tests")

    @app.tool()
    def symbol_history(symbol: Annotated[str, Field(description="a symbol (as for find_callers) or a file path")]) -> str:
        """Use to learn why code looks the way it does or who changed it recently: the commits that touched the
        symbol or file (from git history in the index); says so when no history is available."""
        return call(bridge.relation, symbol, "history")

    return app
