import os
import sys

# `python -m ctx_lsp` (the VS Code extension, the daemon, a Neovim config) runs in the workspace and puts
# that directory first on sys.path: a project's own json.py or token.py would then replace the standard
# library for the whole server. Our package is already imported; nothing else should come from there.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from ctx_lsp.cli import main  # noqa: E402

raise SystemExit(main())
