"""The `ctx-lsp` command line: `commands.py` (the subcommands), `coverage.py` (`ctx-lsp coverage`).

`main` is re-exported here because the console script and `python -m ctx_lsp` call `ctx_lsp.cli:main`.
"""

from ctx_lsp.cli.commands import main

__all__ = ["main"]
