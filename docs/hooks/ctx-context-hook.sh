#!/usr/bin/env bash
# ctx-lsp mandated-context hook: print the ContextPack (markdown) for the prompt on stdin, so an agent
# gets the relevant code with every task instead of having to decide to ask for it.
#
# Claude Code: register as a UserPromptSubmit hook (see README "Mandated context"); Claude Code pipes a
# JSON event ({"prompt": ..., "cwd": ...}) to stdin and adds what this prints (exit 0) to the context.
# Anything else: pipe the task text itself to stdin; the markdown pack is printed on stdout.
#
# Workspace root: $CTX_LSP_ROOT, else $CLAUDE_PROJECT_DIR, else the project the event's "cwd" (else
# the current directory) is in. Budget: $CTX_LSP_HOOK_BUDGET tokens (default 2000: Claude Code shows
# hook output over ~10,000 characters only as a preview). Command: $CTX_LSP (default: ctx-lsp on PATH).
# Speed: the first prompt starts a `ctx-lsp daemon` for the workspace, which keeps the index loaded, so
# later prompts are answered in a fraction of a second ($CTX_LSP_DAEMON: default auto here; off: never).
# It never blocks a prompt: on any failure it prints nothing and exits 0 (errors go to stderr).
set -u

input="$(cat)"
py="$(command -v python3 || command -v python || true)"
[ -n "$py" ] || exit 0

# Split the event into (cwd, prompt) without jq: the prompt may be any text, so pass it through a file.
tmp="$(mktemp "${TMPDIR:-/tmp}/ctx-hook.XXXXXX")" || exit 0
trap 'rm -f "$tmp"' EXIT
event_cwd="$(printf '%s' "$input" | "$py" -c '
import json, sys
raw = sys.stdin.read()
try:
    ev = json.loads(raw)
except ValueError:
    ev = None
if isinstance(ev, dict):
    prompt, cwd = ev.get("prompt") or "", ev.get("cwd") or ""
else:  # plain text on stdin: the task itself
    prompt, cwd = raw, ""
with open(sys.argv[1], "w", encoding="utf-8") as f:
    f.write(str(prompt).strip())
print(cwd)
' "$tmp")" || exit 0

# Nothing to retrieve for an empty prompt or a slash command (/clear, /compact, ...).
[ -s "$tmp" ] || exit 0
case "$(head -c 1 "$tmp")" in /) exit 0 ;; esac

# A root the environment names is taken as it is; from a directory (the event's cwd, else this one),
# ctx-lsp reads the project that directory is in (the nearest .git, pyproject.toml, setup.py or
# setup.cfg upwards), as it does when run by hand there.
root="${CTX_LSP_ROOT:-${CLAUDE_PROJECT_DIR:-}}"
dir="${root:-${event_cwd:-$PWD}}"
[ -d "$dir" ] || exit 0

export CTX_LSP_DAEMON="${CTX_LSP_DAEMON:-auto}"
if ! out="$(cd "$dir" && "${CTX_LSP:-ctx-lsp}" context --markdown ${root:+--root "$root"} \
        --budget "${CTX_LSP_HOOK_BUDGET:-2000}" - <"$tmp")"; then
    exit 0
fi
# a pack with no item ("thanks!", "lgtm"): nothing worth the agent's context
case "$out" in *$'\n## '*) ;; *) exit 0 ;; esac
printf 'Relevant code for this task, retrieved by ctx-lsp from the workspace code graph:\n\n%s\n' "$out"
exit 0
