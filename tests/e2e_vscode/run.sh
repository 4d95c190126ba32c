#!/usr/bin/env bash
# End-to-end test of the ctx-lsp VS Code extension in a real VS Code (code-server + headless
# Chromium, offline): builds and installs the .vsix, opens a fixture workspace, waits for the
# index, runs "CTX: Get Context…", "CTX: Show Architectural Neighbours" and "CTX: Context at
# Cursor", runs the test-only probe extension (probe/: the language-model tools through
# vscode.lm.invokeTool, the @ctx handler, the MCP definition), "CTX: Context for Selection" on a
# pasted issue and "CTX: Show Graph", and asserts on what the workbench shows. Screenshots and logs:
# test-artifacts/vscode-e2e/.
#
# Env: CTX_E2E_PYTHON   interpreter with ctx_lsp installed (default: python3 on PATH)
#      CTX_E2E_ARTIFACTS where screenshots/logs go (default: <repo>/test-artifacts/vscode-e2e)
#      VSCODE_E2E_SETUP  the vscode-e2e setup script (default: <repo>/../shared/vscode-e2e/setup)
#      CTX_E2E_SKIP_BUILD=1 reuse vscode-client/ctx-lsp-<version>.vsix as is
set -euo pipefail

t_start=$(date +%s)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null || (cd "$HERE/../.." && pwd))
CLIENT=$ROOT/vscode-client
SETUP=${VSCODE_E2E_SETUP:-$ROOT/../shared/vscode-e2e/setup}
ART=${CTX_E2E_ARTIFACTS:-$ROOT/test-artifacts/vscode-e2e}
PYTHON=${CTX_E2E_PYTHON:-$(command -v python3 || true)}
log() { printf '[e2e +%ss] %s\n' "$(($(date +%s) - t_start))" "$*" >&2; }

[ -n "$PYTHON" ] || { log "no python3 on PATH (set CTX_E2E_PYTHON)"; exit 1; }
PYTHON=$(command -v "$PYTHON")
"$PYTHON" -c 'import ctx_lsp.server.serve' || { log "ctx_lsp.server is not importable with $PYTHON (pip install -e $ROOT)"; exit 1; }

# 1. Toolchain (code-server, Node 24, Chromium, playwright-core) --------------------------------
[ -x "$SETUP" ] || { log "vscode-e2e setup not found at $SETUP"; exit 1; }
E2E_ENV=$("$SETUP"); eval "$E2E_ENV"
log "toolchain ready"

# 2. Build and package the extension --------------------------------------------------------------
VERSION=$(cd "$CLIENT" && node -p "require('./package.json').version")
VSIX=$CLIENT/ctx-lsp-$VERSION.vsix
if [ "${CTX_E2E_SKIP_BUILD:-0}" != 1 ] || [ ! -f "$VSIX" ]; then
  ( cd "$CLIENT" && npm ci --prefer-offline --no-audit --no-fund --loglevel=error && npm test --silent >/dev/null && npm run --silent package >/dev/null )
fi
[ -f "$VSIX" ] || { log "$VSIX was not built"; exit 1; }
log "packaged $(basename "$VSIX")"

# 3. Throw-away VS Code profile + fixture workspace -----------------------------------------------
T=$(mktemp -d)
WS=$T/workspace
cp -r "$HERE/workspace" "$WS"
find "$WS" -name __pycache__ -prune -exec rm -rf {} +
git -C "$WS" init -q  # a git work tree, for drive.mjs's wait while git holds its index lock
# and a commit, so the neighbours view shows its TOUCHED group (commit neighbours)
git -C "$WS" add -A
git -C "$WS" -c user.name=e2e -c user.email=e2e@example.com -c commit.gpgsign=false commit -qm "e2e fixture commit"
mkdir -p "$T/data/User" "$T/data/Machine" "$T/ext" "$ART"
rm -rf "$ART"/*.png "$ART"/*.log "$ART/logs"
"$PYTHON" - "$T/data/User/settings.json" "$PYTHON" "$T/cache" <<'PY'
import json, sys
path, python, cache = sys.argv[1:4]
settings = {
    "security.workspace.trust.enabled": False, "workbench.startupEditor": "none",
    "telemetry.telemetryLevel": "off", "update.mode": "none", "chat.disableAIFeatures": True,
    "workbench.secondarySideBar.defaultVisibility": "hidden", "workbench.tips.enabled": False,
    "extensions.autoCheckUpdates": False, "extensions.autoUpdate": False,
    "extensions.ignoreRecommendations": True, "git.enabled": False, "editor.stickyScroll.enabled": False,
    "ctxLsp.interpreter": python, "ctxLsp.cacheDir": cache, "ctxLsp.trace.server": "verbose",
}
with open(path, "w") as f:
    json.dump(settings, f, indent=2)
PY
# In code-server the extension host is "remote": machine-scoped settings (ctxLsp.interpreter,
# ctxLsp.cacheDir) are read from the Machine settings, not from the browser-side User settings.
cp "$T/data/User/settings.json" "$T/data/Machine/settings.json"
printf 'auth: none\ncert: false\n' >"$T/config.yaml"
# An interpreter that cannot import ctx_lsp (no site-packages), for the "not installed" check.
mkdir -p "$T/nopy"
printf '#!/bin/sh\nexec %q -I -S "$@"\n' "$PYTHON" >"$T/nopy/python3"
chmod +x "$T/nopy/python3"

( cd "$HERE/probe" && "$VSCODE_E2E_VSCE" package --no-dependencies --allow-missing-repository --skip-license --out "$T/probe.vsix" >"$T/probe-package.log" 2>&1 ) ||
  { cat "$T/probe-package.log" >&2; log "packaging the probe extension failed"; exit 1; }
for x in "$VSIX" "$T/probe.vsix"; do
  "$VSCODE_E2E_CODE_SERVER" --user-data-dir "$T/data" --extensions-dir "$T/ext" --force --install-extension "$x" >"$T/install.log" 2>&1 ||
    { cat "$T/install.log" >&2; log "installing $(basename "$x") failed"; exit 1; }
done
log "installed the extension"

# 4. code-server in its own process group ---------------------------------------------------------
# The probe writes its report to CTX_PROBE_OUT; the slowed retrieval stages let it cancel a
# request mid-way (the extension host and the server it starts inherit this environment).
rm -f "$ART/probe.json"
set -m
CTX_PROBE_OUT="$ART/probe.json" CTX_LSP_TEST_CHECKPOINT_DELAY_MS=250 EXTENSIONS_GALLERY='{}' "$VSCODE_E2E_CODE_SERVER" --config "$T/config.yaml" --auth none \
  --bind-addr 127.0.0.1:0 --disable-telemetry --disable-update-check --disable-workspace-trust \
  --disable-getting-started-override --ignore-last-opened \
  --user-data-dir "$T/data" --extensions-dir "$T/ext" "$WS" >"$T/cs.log" 2>&1 </dev/null &
CS_PID=$!
set +m
stop_cs() {
  kill -TERM -- -"$CS_PID" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 -- -"$CS_PID" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL -- -"$CS_PID" 2>/dev/null || true
}
finish() {
  local rc=$?
  # Keep the extension's output channel (server log + LSP trace) and code-server's log.
  find "$T/data/logs" -name '*ctx-lsp*.log' -exec cp {} "$ART/ctx-lsp-output.log" \; 2>/dev/null || true
  cp -r "$T/data/logs" "$ART/logs" 2>/dev/null || true
  cp "$T/cs.log" "$ART/code-server.log" 2>/dev/null || true
  stop_cs
  rm -rf "$T"
  log "done (exit $rc) in $(($(date +%s) - t_start)) s; artifacts in $ART"
  exit $rc
}
trap finish EXIT
URL=
for _ in $(seq 300); do
  URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$T/cs.log" | head -n1) && [ -n "$URL" ] && break; sleep 0.1
done
[ -n "$URL" ] || { cat "$T/cs.log" >&2; log "code-server did not start"; exit 1; }
log "code-server at $URL"

# 5. Drive the workbench ---------------------------------------------------------------------------
"$VSCODE_E2E_NODE" "$HERE/drive.mjs" --url "$URL/?folder=$WS" --artifacts "$ART" \
  --query "who calls save" --expect-file shop/service.py --neighbours-file shop/service.py \
  --settings-file "$T/data/Machine/settings.json" --bad-python "$T/nopy/python3" --workspace "$WS"
for f in vscode-context.png vscode-neighbours.png vscode-context-for-selection.png vscode-graph.png; do
  [ -s "$ART/$f" ] || { log "missing screenshot $f"; exit 1; }
done
# The probe's report, check by check; and the server's own word that the cancelled tool call
# stopped its retrieval ($/cancelRequest reached it).
"$PYTHON" - "$ART/probe.json" <<'PY' || { log "the probe report failed"; exit 1; }
import json, sys
r = json.load(open(sys.argv[1]))
for c in r.get("checks", []):
    print(f"[probe] {'ok  ' if c['ok'] else 'FAIL'} {c['name']}" + ("" if c["ok"] else f": {json.dumps(c['detail'])[:1500]}"))
if "error" in r:
    print("[probe] error:", r["error"])
sys.exit(0 if r.get("ok") else 1)
PY
OUT_LOG=$(find "$T/data/logs" -name '*ctx-lsp*.log' | head -n1)
grep -o 'ctx/getContext cancelled; retrieval stopped after [0-9]* stage(s)' "$OUT_LOG" | head -n1 | sed 's/^/[e2e] server: /' | grep . ||
  { log "the server never saw the cancelled ctx_getContext invocation"; exit 1; }
log "PASS"
