"""End-to-end test of the VS Code extension (vscode-client/) in a real VS Code.

Runs tests/e2e_vscode/run.sh: builds and installs the .vsix (and the test-only probe extension in
tests/e2e_vscode/probe/, which calls the language-model tools through vscode.lm.invokeTool) into
code-server, opens a fixture workspace and drives the workbench with headless Chromium (see that
script). Screenshots and logs go to test-artifacts/vscode-e2e/.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUN_SH = REPO / "tests" / "e2e_vscode" / "run.sh"
# The toolchain's setup script: $VSCODE_E2E_SETUP (as run.sh reads it), else ../shared/vscode-e2e/setup.
SETUP = Path(os.environ.get("VSCODE_E2E_SETUP") or REPO.parent / "shared" / "vscode-e2e" / "setup")


@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    not SETUP.is_file(),
    reason=f"the vscode-e2e toolchain setup {SETUP} does not exist (set VSCODE_E2E_SETUP)",
)
def test_vscode_extension_end_to_end() -> None:
    env = dict(os.environ)
    # The interpreter running pytest is the one with ctx_lsp installed.
    env.setdefault("CTX_E2E_PYTHON", sys.executable)
    env["VSCODE_E2E_SETUP"] = str(SETUP)
    proc = subprocess.run(
        ["bash", str(RUN_SH)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=840,
    )
    tail = "\n".join(proc.stdout.splitlines()[-80:])
    assert proc.returncode == 0, f"tests/e2e_vscode/run.sh failed (exit {proc.returncode}):\n{tail}"
    assert "[drive" in proc.stdout and "PASS" in proc.stdout, tail
    # the probe extension's checks (language-model tools, @ctx, MCP) all ran and passed
    probe = [ln for ln in proc.stdout.splitlines() if ln.startswith("[probe]")]
    assert len(probe) >= 12 and all(ln.startswith("[probe] ok") for ln in probe), "\n".join(probe)
