"""ctx-lsp: a typed code graph of a Python workspace and a budgeted retrieval engine over it."""

__version__ = "0.1.0"
