"""An inverted index's postings (term -> ids) that can start from a persisted snapshot, decoding a
term's ids only when it is first read.

Building the postings of Django's 59k symbol chunks and 2.8k files term by term (1.9M set inserts)
was most of the first query after a warm start; a query reads a few hundred terms. A snapshot is a
table of ids and, per term, the table positions of its ids as 32-bit integers: 9 MB on Django, where
the ids themselves would be 85 MB. Ids of files the snapshot no longer describes (`stale`: changed
or removed since it was written) are dropped as a term is decoded, and the owner re-adds those
files' current ids, so the postings equal ones built from scratch.

Later snapshots keep the table's positions (new ids are appended), so a term nobody changed is
written with the very bytes it was read with; the table is renumbered when every term is decoded.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable
from typing import Any

_CODE = "I"
assert array(_CODE).itemsize == 4
_SWAP = sys.byteorder == "big"  # positions are stored little-endian
DEAD = "\0"  # a table position no posting may yield (its id was stale when a snapshot was written)


class Postings:
    def __init__(self) -> None:
        self._sets: dict[str, set[str]] = {}
        self._packed: dict[str, bytes] = {}  # snapshot terms not decoded yet
        self._clean: dict[str, bytes] = {}  # decoded terms unchanged since their snapshot bytes
        self._table: list[str] = []  # snapshot position -> id
        self._stale: set[int] = set()  # positions of ids dropped on decode

    def load(self, snap: dict[str, Any], stale_paths: set[str], path_of: Callable[[str], str]) -> None:
        """Start an empty index from `snapshot()`'s output."""
        assert not self._sets and not self._packed
        table = snap["table"]
        packed = snap["postings"]
        if not isinstance(table, (list, tuple)) or not isinstance(packed, dict):
            raise ValueError("malformed postings snapshot")
        self._table = list(table)
        self._packed = dict(packed)
        self._stale = {i for i, item in enumerate(table) if item == DEAD or path_of(item) in stale_paths}

    def get(self, term: str) -> set[str] | None:
        ids = self._sets.get(term)
        if ids is not None:
            return ids
        raw = self._packed.pop(term, None)
        if raw is None:
            return None
        pos = array(_CODE)
        pos.frombytes(raw)
        if _SWAP:
            pos.byteswap()
        table = self._table
        if self._stale and not self._stale.isdisjoint(pos):
            stale = self._stale
            ids = {table[i] for i in pos if i not in stale}
        else:
            ids = {table[i] for i in pos}
            self._clean[term] = raw
        if not ids:
            return None
        self._sets[term] = ids
        return ids

    def add(self, term: str, item: str) -> None:
        ids = self.get(term)
        if ids is None:
            self._sets[term] = {item}
        elif item not in ids:
            ids.add(item)
        else:
            return
        self._clean.pop(term, None)

    def add_all(self, item: str, terms: Iterable[str]) -> None:
        """`add(term, item)` for each term (the hot loop of a build from scratch)."""
        sets, packed, clean = self._sets, self._packed, self._clean
        for term in terms:
            ids = sets.get(term)
            if ids is None:
                if packed and term in packed:
                    self.add(term, item)
                else:
                    sets[term] = {item}
                continue
            ids.add(item)
            if clean:
                clean.pop(term, None)

    def discard(self, term: str, item: str) -> None:
        ids = self.get(term)
        if ids is None or item not in ids:
            return
        ids.discard(item)
        self._clean.pop(term, None)
        if not ids:
            del self._sets[term]

    def items(self) -> dict[str, set[str]]:
        """Every term's ids (decodes every term: for checks, not for queries)."""
        for term in list(self._packed):
            self.get(term)
        return dict(self._sets)

    def snapshot(self) -> dict[str, Any]:
        """{"table": ids, "postings": {term: positions}} for every term. Terms unchanged since the
        last snapshot keep their bytes; stale positions become DEAD in the table (the bytes that still
        hold them are dropped from on decode), and the table is renumbered once most of it is dead."""
        if self._stale and 2 * (len(self._stale) + self._table.count(DEAD)) > len(self._table):
            for term in list(self._packed):
                self.get(term)
            self._clean.clear()
        if not self._packed and not self._clean:
            self._table, self._stale = [], set()  # nothing refers to the old positions: renumber
        table, stale = self._table, self._stale
        for i in stale:
            table[i] = DEAD
        number = {item: i for i, item in enumerate(table) if item != DEAD}
        out: dict[str, bytes] = {}
        for term in sorted(self._sets.keys() | self._packed.keys()):
            raw = self._clean.get(term) or self._packed.get(term)
            if raw is None:
                pos = array(_CODE)
                for item in sorted(self._sets[term]):
                    at = number.get(item)
                    if at is None:
                        at = number[item] = len(table)
                        table.append(item)
                    pos.append(at)
                if _SWAP:
                    pos.byteswap()
                raw = pos.tobytes()
                self._clean[term] = raw
            out[term] = raw
        return {"table": list(table), "postings": out}
