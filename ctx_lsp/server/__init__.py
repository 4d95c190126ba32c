"""The language server adapter: the only part of ctx_lsp that knows LSP (pygls, lsprotocol).

`serve.py` builds and runs it. Deliberately empty: importing a module of this package must not
import the others.
"""
