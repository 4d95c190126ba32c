"""Evidence from outside the code: git history (TOUCHED edges) and per-test coverage (COVERS edges).

Deliberately empty: importing a module of this package must not import the others.
"""
