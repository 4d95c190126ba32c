"""`ctx-lsp mcp`: the engine served to coding agents over MCP. `bridge.py` (the tools over one engine),
`relay.py` (the same calls relayed to the workspace's daemon), `serve.py` (which of the two, on stdio).

Deliberately empty: importing a module of this package must not import the others.
"""
