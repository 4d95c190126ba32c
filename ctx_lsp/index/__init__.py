"""The write path: workspace files in, a typed code graph and its cache out (see docs/architecture.md).

Deliberately empty: importing a module of this package must not import the others.
"""
