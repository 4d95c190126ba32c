"""`ctx-lsp daemon`: one warm engine per workspace behind a Unix socket. `client.py` (light: on the CLI's
fast path) finds, starts and asks it; `server.py` is the daemon process.

Its own package, beside the adapters rather than inside one: the CLI and the MCP adapter are both its
clients, and the daemon runs the MCP adapter's tools. Deliberately empty otherwise.
"""
