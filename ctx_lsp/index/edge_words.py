"""Edges in words, for people and models reading a pack or a relation listing (kept out of
`model.py`, whose text is part of the cache's code digest: rewording must not rebuild caches)."""

from __future__ import annotations

# An edge from the side of its other end, in words: `KIND<-` is what a node is to the node an edge of
# that kind points at from it (`CALLS<-`: it calls that node), `KIND->` what it is to the node whose
# edge points at it (`CALLS->`: that node calls it). The read path's reasons (`via`) and the relation
# listings say edges this way; `REFERENCES/import` is a REFERENCES edge an import statement made.
EDGE_WORDS = {
    "CALLS<-": "calls", "CALLS->": "called by",
    "REFERENCES<-": "refers to", "REFERENCES->": "referred to by",
    "REFERENCES/import<-": "imports", "REFERENCES/import->": "imported by",
    "IMPORTS<-": "imports", "IMPORTS->": "imported by",
    "INHERITS<-": "subclass of", "INHERITS->": "base class of",
    "INSTANTIATES<-": "instantiates", "INSTANTIATES->": "instantiated by",
    "OVERRIDES<-": "overrides", "OVERRIDES->": "overridden by",
    "COVERS<-": "tests", "COVERS->": "tested by",
    "CONTAINS<-": "contains", "CONTAINS->": "in",
    "TOUCHED<-": "touched", "TOUCHED->": "touched by",
}
