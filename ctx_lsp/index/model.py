"""The graph's vocabulary: node and edge kinds, ids, and the small records the indexer produces.

Lines are 1-based and inclusive everywhere in the core; columns are 0-based code points.
Paths are workspace-relative POSIX strings.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import NamedTuple


class NodeKind(str, Enum):
    FILE = "file"
    CLASS = "class"
    FUNCTION = "function"
    METHOD = "method"
    VARIABLE = "variable"
    TEST = "test"  # test functions are functions whose kind says they are tests
    COMMIT = "commit"


class EdgeKind(str, Enum):
    CONTAINS = "CONTAINS"
    IMPORTS = "IMPORTS"
    CALLS = "CALLS"
    REFERENCES = "REFERENCES"
    INHERITS = "INHERITS"
    INSTANTIATES = "INSTANTIATES"
    OVERRIDES = "OVERRIDES"
    COVERS = "COVERS"
    TOUCHED = "TOUCHED"


# Resolvers: who made an edge. A consumer tells a certain edge from a guess by this.
RESOLVER_CONTAINS = "ast-contains"
RESOLVER_IMPORT = "ast-import"
RESOLVER_SCOPE = "ast-scope"
RESOLVER_TYPE = "ast-type"  # through an inferred attribute/variable/return type
RESOLVER_MRO = "ast-mro"
RESOLVER_FLOW = "ast-flow"  # a function value that reaches a call through parameters and attributes (flow.py)
RESOLVER_JEDI = "jedi"
RESOLVER_COVERAGE = "coverage-dynamic"
RESOLVER_STATIC_TEST = "static-test"
RESOLVER_GIT = "git-blame"


def symbol_id(path: str, qualname: str) -> str:
    """Stable node id of a symbol: `pkg/mod.py::Class.method`."""
    return f"{path}::{qualname}"


_ORDINAL = re.compile(r"#\d+")


def python_qualname(qualname: str) -> str:
    """A qualname as Python's `__qualname__` has it: a def defined again apart from the first has a
    node of its own named `name#2`, `name#3` (index/extract.py), Python names them all `name`."""
    return _ORDINAL.sub("", qualname) if "#" in qualname else qualname


def split_id(node_id: str) -> tuple[str, str | None]:
    """(path, qualname or None for a file node)."""
    path, sep, qual = node_id.partition("::")
    return path, (qual if sep else None)


class Node(NamedTuple):  # a tuple, as Edge: ~60k per Django index, rebuilt on every start
    id: str
    kind: str
    path: str
    qualname: str | None
    start_line: int
    end_line: int
    signature: str = ""
    doc: str = ""

    @property
    def name(self) -> str:
        if self.qualname is None:
            return self.path.rsplit("/", 1)[-1]
        return python_qualname(self.qualname).rsplit(".", 1)[-1]  # as written in the code: `_`, not `_#2`


class Edge(NamedTuple):
    """A typed edge with provenance: where it was seen and which resolver made it.

    A NamedTuple, not a dataclass: the binder makes ~170k of them on Django and the warm start and
    the bind workers' results rebuild them all; a tuple is built 4x and unpickled 3.5x faster."""

    src: str
    dst: str
    kind: str
    path: str  # site path
    line: int  # site line, 1-based
    col: int  # site column, 0-based code points
    resolver: str
    extra: tuple[str, ...] = ()  # e.g. the imported names of an IMPORTS edge

    def key(self) -> tuple[str, str, str]:
        return (self.src, self.dst, self.kind)
