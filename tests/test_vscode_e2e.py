"""End-to-end test of the VS Code extension (vscode-client/) in a real VS Code.

Runs tests/e2e_vscode/run.sh: builds and installs the .vsix into code-server, opens a fixture
workspace and drives the workbench with headless Chromium (see that script). Screenshots and
logs go to test-artifacts/vscode-e2e/.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RUN_SH = REPO / "tests" / "e2e_vscode" / "run.sh"
VSCODE_E2E = REPO.parent / "shared" / "vscode-e2e"


@pytest.mark.e2e
@pytest.mark.timeout(900)
@pytest.mark.skipif(
    not VSCODE_E2E.is_dir(),
    reason=f"the vscode-e2e toolchain directory {VSCODE_E2E} does not exist",
)
def test_vscode_extension_end_to_end() -> None:
    env = dict(os.environ)
    # The interpreter running pytest is the one with ctx_lsp installed.
    env.setdefault("CTX_E2E_PYTHON", sys.executable)
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
