"""`ctx-lsp mcp` end to end: the real stdio server, driven by the official MCP SDK client.

Each test starts `ctx-lsp mcp --root <copy of tests/fixtures/mcp_ws> --cache-dir <tmp>` as a subprocess
and calls tools through `mcp.ClientSession` over stdio, as a coding agent would. Also tests the
pre-prompt hook script docs/hooks/ctx-context-hook.sh.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "mcp_ws"
HOOK = REPO / "docs" / "hooks" / "ctx-context-hook.sh"
TOOLS = {"get_context", "get_architectural_context", "semantic_search", "find_callers", "find_callees",
         "tests_for", "symbol_history"}
HAVE_RETRIEVAL = importlib.util.find_spec("ctx_lsp.retrieval.render") is not None


def _ctx_lsp_command() -> list[str]:
    """The installed console script next to this interpreter, else the module (same code either way)."""
    script = Path(sys.executable).with_name("ctx-lsp")
    if script.exists():
        return [str(script)]
    found = shutil.which("ctx-lsp")
    return [found] if found else [sys.executable, "-m", "ctx_lsp"]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    dst = tmp_path / "ws"
    shutil.copytree(FIXTURE, dst)
    return dst


@asynccontextmanager
async def mcp_session(root: Path, cache: Path, errlog: Path) -> AsyncIterator[ClientSession]:
    cmd = _ctx_lsp_command()
    # the whole environment: the SDK's default passes only HOME/PATH-like variables, and without
    # PYTHONPATH a worktree's tests would drive the installed (editable) checkout instead
    params = StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp", "--root", str(root), "--cache-dir", str(cache)],
                                   cwd=str(root.parent), env=dict(os.environ))
    with errlog.open("w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def text(res) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(c.text for c in res.content if getattr(c, "type", "") == "text")


async def ok(session: ClientSession, tool: str, args: dict) -> str:
    res = await session.call_tool(tool, args)
    body = text(res)
    assert not res.is_error, f"{tool}({args}) failed: {body}"
    return body


async def err(session: ClientSession, tool: str, args: dict) -> str:
    res = await session.call_tool(tool, args)
    body = text(res)
    assert res.is_error, f"{tool}({args}) should fail, got: {body}"
    return body


async def test_tools_are_listed_with_when_to_use_descriptions(ws: Path, tmp_path: Path) -> None:
    async with mcp_session(ws, tmp_path / "cache", tmp_path / "err.log") as s:
        tools = {t.name: t for t in (await s.list_tools()).tools}
    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert "Use " in (tool.description or ""), f"{name} has no when-to-use description"
    assert tools["find_callers"].input_schema["required"] == ["symbol"]
    assert tools["semantic_search"].input_schema["properties"]["top_n"]["minimum"] == 1


async def test_relation_tools_return_real_locations(ws: Path, tmp_path: Path) -> None:
    async with mcp_session(ws, tmp_path / "cache", tmp_path / "err.log") as s:
        callers = await ok(s, "find_callers", {"symbol": "apply_discount"})
        callees = await ok(s, "find_callees", {"symbol": "price_order"})
        qualified = await ok(s, "find_callers", {"symbol": "shop/pricing.py::tax_for"})
        dotted = await ok(s, "find_callers", {"symbol": "shop.checkout.PaymentGateway.charge"})
        tests = await ok(s, "tests_for", {"symbol": "tax_for"})
        class_tests = await ok(s, "tests_for", {"symbol": "LineItem"})
        untested = await ok(s, "tests_for", {"symbol": "LineItem.subtotal"})
        history = await ok(s, "symbol_history", {"symbol": "tax_for"})
        file_history = await ok(s, "symbol_history", {"symbol": "shop/pricing.py"})

    # callers are listed at their call sites, each with the edge that links them
    assert callers.splitlines()[0].startswith("2 callers of apply_discount (function at shop/pricing.py:9)")
    assert "shop/checkout.py:20 price_order (calls apply_discount at shop/checkout.py:20" in callers
    assert "tests/test_pricing.py:7 test_apply_discount_welcome_code (" in callers
    # callees point at the callees' definitions; Order.total is reached through a parameter annotation
    assert "shop/models.py:31 Order.total (" in callees
    assert "shop/pricing.py:9 apply_discount (" in callees
    assert "shop/pricing.py:15 tax_for (" in callees
    assert "shop/checkout.py:21 price_order" in qualified
    assert "shop/checkout.py:27 checkout" in dotted
    # tests: direct callers that are tests, and tests reaching it through the call chain
    # a test calling the symbol directly is a static COVERS edge (ctx_lsp.sources.coverage_data)
    assert "tests/test_pricing.py:10 test_tax_for_unknown_region_is_zero (tests tax_for at tests/test_pricing.py:11 (static-test))" in tests
    assert "test_checkout_charges_the_customer (static: reaches it via checkout -> price_order" in tests
    assert "test_checkout_charges_the_customer (static: reaches it via Order.add" in class_tests
    assert untested.startswith("no tests found for LineItem.subtotal")
    # the fixture copy is not a git repository: history is reported as unavailable, not as an error
    assert history.startswith("history unavailable for tax_for")
    assert file_history.startswith("history unavailable for shop/pricing.py")


async def test_architectural_context_and_search(ws: Path, tmp_path: Path) -> None:
    async with mcp_session(ws, tmp_path / "cache", tmp_path / "err.log") as s:
        arch = await ok(s, "get_architectural_context", {"file_path": "shop/checkout.py"})
        arch_abs = await ok(s, "get_architectural_context", {"file_path": str(ws / "shop" / "checkout.py")})
        arch_json = json.loads(await ok(s, "get_architectural_context", {"file_path": "shop/checkout.py", "format": "json"}))
        lonely = await ok(s, "get_architectural_context", {"file_path": "shop/__init__.py"})
        found = await ok(s, "semantic_search", {"query": "percentage off with a discount code"})
        tax = await ok(s, "semantic_search", {"query": "sales tax rate", "top_n": 2})
        nothing = await ok(s, "semantic_search", {"query": "zzqx kubernetes"})
        pasted = await ok(s, "semantic_search", {"query": "sales tax rate is wrong for orders. " * 4000})
        binary = await err(s, "semantic_search", {"query": "\u0000\u0001\u0002\u00ff" * 100})

    assert arch.startswith("shop/checkout.py: typed 1-hop neighbourhood")
    assert "IMPORTS -> (2)" in arch and "shop/pricing.py names=apply_discount,tax_for" in arch
    assert "IMPORTS <- (2)" in arch and "shop/reports.py names=price_order" in arch
    assert "shop/reports.py:9 revenue_report [price_order]  (site shop/reports.py:13" in arch
    assert arch_abs == arch
    assert arch_json["path"] == "shop/checkout.py"
    groups = {(g["edge"], g["direction"]): g["neighbors"] for g in arch_json["groups"]}
    assert {n["path"] for n in groups[("CALLS", "out")]} == {"shop/models.py", "shop/pricing.py"}
    assert "(no edges" in lonely
    assert found.splitlines()[1].startswith("1. shop/pricing.py")
    # ranked files with their best chunk; top_n is honoured
    assert tax.splitlines()[1].startswith("1. shop/pricing.py") and tax.splitlines()[1].endswith("best: tax_for:15")
    assert len(tax.splitlines()) == 3
    assert nothing.startswith("no files match")
    # a pasted log is searched, and echoed as its first line cut to 160 characters, not whole
    assert pasted.splitlines()[1].startswith("1. shop/pricing.py") and len(pasted) < 2000, len(pasted)
    assert "not text" in binary


async def test_architectural_context_lists_each_neighbour_once(ws: Path, tmp_path: Path) -> None:
    async with mcp_session(ws, tmp_path / "cache", tmp_path / "err.log") as s:
        arch = await ok(s, "get_architectural_context", {"file_path": "shop/pricing.py"})
    # price_order calls two functions of pricing.py: one neighbour, both of the file's symbols named
    callers = arch.split("CALLS <- ", 1)[1].splitlines()
    mine = [ln for ln in callers if " price_order " in ln]
    assert mine == ["  shop/checkout.py:18 price_order [apply_discount, tax_for]  (sites shop/checkout.py:20, 21, ast-import)"], arch


async def test_bad_arguments_unknown_symbols_and_path_escapes_are_tool_errors(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.py"
    outside.write_text("def secret():\n    return 1\n")
    (ws / "shop" / "link.py").symlink_to(outside)
    async with mcp_session(ws, tmp_path / "cache", tmp_path / "err.log") as s:
        missing = await err(s, "find_callers", {})
        wrong_type = await err(s, "semantic_search", {"query": "tax", "top_n": "many"})
        too_small = await err(s, "semantic_search", {"query": "tax", "top_n": 0})
        bad_budget = await err(s, "get_context", {"query": "tax", "budget": -5})
        bool_budget = await err(s, "get_context", {"query": "tax", "budget": True})  # JSON `true` is no count
        bad_format = await err(s, "get_architectural_context", {"file_path": "shop/models.py", "format": "xml"})
        not_a_string = await err(s, "find_callees", {"symbol": 42})
        unknown = await err(s, "find_callers", {"symbol": "aply_discount"})
        unknown_q = await err(s, "tests_for", {"symbol": "shop/pricing.py::nope"})
        file_as_symbol = await err(s, "find_callers", {"symbol": "shop/pricing.py"})
        empty = await err(s, "semantic_search", {"query": "   "})
        binary = await err(s, "get_context", {"query": "ELF\x02\x01\x01" + "\x00\x03\x00>\x00\x01" * 40 + "tax"})
        escapes = [
            await err(s, "get_architectural_context", {"file_path": "../../etc/passwd"}),
            await err(s, "get_architectural_context", {"file_path": "/etc/passwd"}),
            await err(s, "get_architectural_context", {"file_path": str(outside)}),
            await err(s, "get_architectural_context", {"file_path": "shop/link.py"}),  # symlink out of the root
            await err(s, "get_architectural_context", {"file_path": "file:///etc/passwd"}),
            await err(s, "find_callers", {"symbol": "../../etc/passwd"}),
            await err(s, "symbol_history", {"symbol": "/etc/passwd"}),
            await err(s, "tests_for", {"symbol": "../outside.py::f"}),
            await err(s, "get_context", {"query": "tax", "path": "../../etc/passwd"}),
        ]
        line_alone = await err(s, "get_context", {"query": "tax", "line": 3})
        place_not_code = await err(s, "get_context", {"query": "tax", "path": "README.md"})
        place_past_end = await err(s, "get_context", {"query": "tax", "path": "shop/pricing.py", "line": 9999})
        not_indexed = await err(s, "get_architectural_context", {"file_path": "README.md"})
        absent = await err(s, "get_architectural_context", {"file_path": "shop/nope.py"})
        unknown_tool = await err(s, "no_such_tool", {})
        misspelt = await err(s, "get_context", {"querry": "tax", "query": "tax"})
        one_callee = await ok(s, "find_callees", {"symbol": "revenue_report"})
        # the server survives all of the above
        still = await ok(s, "find_callers", {"symbol": "tax_for"})

    assert "unknown argument: querry (it takes query, budget, format, path, line)" in misspelt
    assert "\n" not in misspelt.strip()
    assert one_callee.startswith("1 callee of revenue_report"), one_callee
    assert "symbol" in missing and "required" in missing.lower()
    assert "top_n" in wrong_type
    assert "top_n" in too_small
    assert "not an indexed Python file: README.md" in place_not_code  # never ignored silently
    assert "line 9999 is past the end of shop/pricing.py" in place_past_end
    assert "budget" in bad_budget
    assert "budget" in bool_budget and "boolean" in bool_budget
    for msg in (missing, wrong_type, too_small, bad_budget, bool_budget, bad_format, not_a_string):
        # one line naming the field, without pydantic's report layout or its documentation link
        assert "\n" not in msg.strip() and "errors.pydantic.dev" not in msg and "invalid arguments: " in msg, msg
    assert "format" in bad_format
    assert "symbol" in not_a_string
    assert "unknown symbol: aply_discount; did you mean: apply_discount?" in unknown
    assert "unknown symbol: shop/pricing.py::nope" in unknown_q
    assert "expected a symbol name" in file_as_symbol and "get_architectural_context" in file_as_symbol
    assert "empty query" in empty
    assert "the query is not text" in binary
    assert "`line` needs `path`" in line_alone
    for msg in escapes:
        assert "path escapes the workspace root" in msg, msg
    assert "README.md is not an indexed Python file" in not_indexed
    assert "file not found in the workspace: shop/nope.py" in absent
    assert "no_such_tool" in unknown_tool
    assert "2 callers of tax_for" in still


async def test_each_call_sees_files_changed_on_disk(ws: Path, tmp_path: Path) -> None:
    async with mcp_session(ws, tmp_path / "cache", tmp_path / "err.log") as s:
        before = await ok(s, "find_callers", {"symbol": "tax_for"})
        (ws / "shop" / "refunds.py").write_text(
            "from shop.pricing import tax_for\n\n\ndef refund_tax(amount: int) -> int:\n    return -tax_for(amount, 'eu')\n")
        after = await ok(s, "find_callers", {"symbol": "tax_for"})
        (ws / "shop" / "refunds.py").unlink()
        removed = await ok(s, "find_callers", {"symbol": "tax_for"})
    assert "refund_tax" not in before
    assert "shop/refunds.py:5 refund_tax (" in after and after.startswith("3 callers")
    assert "refund_tax" not in removed and removed.startswith("2 callers")


async def test_find_callers_lists_every_call_site_of_a_caller(ws: Path, tmp_path: Path) -> None:
    (ws / "shop" / "refunds.py").write_text(
        "from shop.pricing import tax_for\n\n\ndef refund_tax(amount: int) -> int:\n"
        "    if amount > 100:\n        return -tax_for(amount, 'eu')\n    return -tax_for(amount, 'us')\n")
    async with mcp_session(ws, tmp_path / "cache", tmp_path / "err.log") as s:
        got = await ok(s, "find_callers", {"symbol": "tax_for"})
    assert got.splitlines()[0].startswith("3 callers of tax_for (function at shop/pricing.py:15), 4 call sites:")
    assert "shop/refunds.py:6 refund_tax (" in got and "shop/refunds.py:7 refund_tax (" in got


@pytest.mark.skipif(not HAVE_RETRIEVAL, reason="the retrieval engine (ctx_lsp.retrieval) is not in this tree yet")
async def test_get_context_returns_markdown_and_json(ws: Path, tmp_path: Path) -> None:
    async with mcp_session(ws, tmp_path / "cache", tmp_path / "err.log") as s:
        md = await ok(s, "get_context", {"query": "how is a discount code applied to the price in apply_discount"})
        res = await s.call_tool("get_context", {"query": "who calls tax_for", "budget": 1500, "format": "json"})
        at = await ok(s, "get_context", {"query": "what does this compute", "path": "shop/checkout.py", "line": 20})
    assert "shop/pricing.py" in md
    assert not md.lstrip().startswith("{")  # markdown, not JSON
    assert not res.is_error, text(res)
    pack = json.loads(text(res))
    assert res.structured_content == pack
    assert pack["tokens"] <= pack["budget"] == 1500
    paths = [i["path"] for i in pack["items"]]
    assert "shop/pricing.py" in paths and "shop/checkout.py" in paths
    assert "shop/checkout.py" in at


def _run_hook(stdin: str, root: Path, cache: Path, cwd: Path, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "CTX_LSP_CACHE_DIR": str(cache)}
    env.pop("CTX_LSP_ROOT", None)
    env.pop("CLAUDE_PROJECT_DIR", None)
    env["PATH"] = f"{Path(_ctx_lsp_command()[0]).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra or {})
    return subprocess.run(["bash", str(HOOK)], input=stdin, capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)


def test_hook_script_exists_and_is_executable() -> None:
    assert HOOK.exists()
    assert os.access(HOOK, os.X_OK)
    assert subprocess.run(["bash", "-n", str(HOOK)], capture_output=True).returncode == 0


def test_hook_skips_empty_and_slash_prompts_without_failing(ws: Path, tmp_path: Path) -> None:
    for prompt in ("", "   ", "/clear"):
        r = _run_hook(json.dumps({"prompt": prompt, "cwd": str(ws)}), ws, tmp_path / "c", tmp_path)
        assert r.returncode == 0 and r.stdout == "", (prompt, r.stdout, r.stderr)
    # a broken root never blocks the user's prompt: no output, exit 0
    r = _run_hook(json.dumps({"prompt": "fix tax", "cwd": str(tmp_path / "missing")}), ws, tmp_path / "c", tmp_path)
    assert r.returncode == 0 and r.stdout == ""
    # an agent started in the home directory, outside any project: nothing indexed, nothing printed
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "x.py").write_text("def tax():\n    return 1\n")
    r = _run_hook(json.dumps({"prompt": "fix tax", "cwd": str(home)}), ws, tmp_path / "c-home", tmp_path,
                  {"HOME": str(home), "CTX_LSP_DAEMON": "off"})
    assert r.returncode == 0 and r.stdout == "" and "is not inside a project" in r.stderr, r.stderr
    assert not (tmp_path / "c-home").exists()


@pytest.mark.skipif(not HAVE_RETRIEVAL, reason="the retrieval engine (ctx_lsp.retrieval) is not in this tree yet")
def test_hook_prints_the_context_pack_for_a_claude_code_prompt(ws: Path, tmp_path: Path) -> None:
    event = {"session_id": "s1", "transcript_path": str(tmp_path / "t.jsonl"), "cwd": str(ws),
             "hook_event_name": "UserPromptSubmit", "prompt": "Change apply_discount so that VIP25 stacks with tax"}
    r = _run_hook(json.dumps(event), ws, tmp_path / "cache", tmp_path)  # root from the event's cwd
    assert r.returncode == 0, r.stderr
    assert "shop/pricing.py" in r.stdout
    # chit-chat finds nothing: the hook adds nothing to the agent's context
    thanks = _run_hook(json.dumps({**event, "prompt": "thanks!"}), ws, tmp_path / "cache", tmp_path)
    assert thanks.returncode == 0 and thanks.stdout == "", thanks.stdout
    # CLAUDE_PROJECT_DIR wins over the event's cwd; a plain-text prompt works too (generic wrappers)
    r2 = _run_hook("where is sales tax computed for a region", ws, tmp_path / "cache", tmp_path / "..",
                   {"CLAUDE_PROJECT_DIR": str(ws)})
    assert r2.returncode == 0, r2.stderr
    assert "shop/pricing.py" in r2.stdout
    # from a subdirectory of the project (no root named): the whole project, as when run by hand there
    (ws / "pyproject.toml").write_text("[project]\nname = 'shop'\n")
    r3 = _run_hook(json.dumps({**event, "cwd": str(ws / "shop")}), ws, tmp_path / "cache", tmp_path)
    assert r3.returncode == 0, r3.stderr
    assert "shop/pricing.py" in r3.stdout
    # the hook started the workspace's daemon on the first prompt, so later prompts skip loading the index
    status = subprocess.run([*_ctx_lsp_command(), "daemon", "status", "--json", "--root", str(ws)], capture_output=True,
                            text=True, env={**os.environ, "CTX_LSP_CACHE_DIR": str(tmp_path / "cache")}, timeout=60)
    subprocess.run([*_ctx_lsp_command(), "daemon", "stop", "--root", str(ws)], capture_output=True, timeout=60,
                   env={**os.environ, "CTX_LSP_CACHE_DIR": str(tmp_path / "cache")})
    assert status.returncode == 0 and json.loads(status.stdout)["requests"] >= 1, status.stdout


@pytest.mark.skipif(not HAVE_RETRIEVAL, reason="the retrieval engine (ctx_lsp.retrieval) is not in this tree yet")
async def test_get_context_with_a_place_and_no_query_is_the_symbol_there_and_its_callers(ws: Path, tmp_path: Path) -> None:
    async with mcp_session(ws, tmp_path / "cache", tmp_path / "err.log") as s:
        res = await s.call_tool("get_context", {"path": "shop/pricing.py", "line": 9, "format": "json"})
        bare = await s.call_tool("get_context", {"path": "shop/pricing.py", "format": "json"})
    assert not res.is_error, text(res)
    pack = json.loads(text(res))
    assert pack["items"][0]["symbol"] == "apply_discount"
    assert pack["items"][0]["reasons"][0]["via"] == "cursor"
    assert any(r["via"] == "CALLS<-" for i in pack["items"] for r in i["reasons"])
    assert bare.is_error and "empty query" in text(bare)  # a file alone names no symbol


def test_a_request_with_a_lone_surrogate_gets_an_answer(ws: Path, tmp_path: Path) -> None:
    """A non-UTF-8 file name reaches JSON as a lone surrogate escape (`"\\udcff"`); the SDK's stdio
    transport dropped such a line and the client waited forever. It is answered, and the server goes on."""
    import select

    env = {**os.environ, "CTX_LSP_DAEMON": "off"}
    proc = subprocess.Popen([*_ctx_lsp_command(), "mcp", "--root", str(ws), "--cache-dir", str(tmp_path / "cache")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None

    def send(obj: dict) -> None:
        proc.stdin.write((json.dumps(obj) + "\n").encode())  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def answer(msg_id: int, timeout: float = 60) -> dict:
        buf = b""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if not ready:
                continue
            buf += os.read(proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                got = json.loads(line)
                if got.get("id") == msg_id:
                    return got
        raise AssertionError(f"no answer to request {msg_id} in {timeout} s")

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "get_context", "arguments": {"query": "x", "path": "src/\udcff.py"}}})
        bad = answer(2)
        assert bad["result"]["isError"] and "\ufffd" in bad["result"]["content"][0]["text"], bad
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
        assert {t["name"] for t in answer(3)["result"]["tools"]} == TOOLS
    finally:
        proc.kill()
        proc.wait(timeout=30)
