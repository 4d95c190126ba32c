"""An inverted index's postings (term -> {id: term count}) that can start from a persisted snapshot,
decoding a term only when it is first read.

Building the postings of Django's 59k symbol chunks and 2.8k files term by term (1.9M inserts) was
most of the first query after a warm start; a query reads a few hundred terms. Counts live in the
postings so BM25 scores a hit without decoding the document it came from.

A snapshot is a table of ids and, per term, the table positions of its ids then their counts, as
little-endian 32-bit integers: 14 MB on Django, where the ids themselves would be 85 MB. Ids of
files the snapshot no longer describes (`stale`: changed or removed since it was written) are
dropped as a term is decoded, and the owner re-adds those files' current ids, so the postings equal
ones built from scratch. A later snapshot keeps the table's positions (stale ones become DEAD, new
ids are appended), so a term nobody changed is written with the very bytes it was read with; the
table is renumbered once most of it is dead.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any

_CODE = "I"
assert array(_CODE).itemsize == 4
_SWAP = sys.byteorder == "big"
DEAD = "\0"  # a table position no posting may yield (its id was stale when a snapshot was written)


def ints_from_bytes(raw: bytes) -> array[int]:
    """Little-endian 32-bit integers, as snapshots store them."""
    out = array(_CODE)
    out.frombytes(raw)
    if _SWAP:
        out.byteswap()
    return out


def ints_to_bytes(values: array[int]) -> bytes:
    if _SWAP:
        values = array(_CODE, values)
        values.byteswap()
    return values.tobytes()


class Postings:
    def __init__(self) -> None:
        self._maps: dict[str, dict[str, int]] = {}
        self._packed: dict[str, bytes] = {}  # snapshot terms not decoded yet
        self._clean: dict[str, bytes] = {}  # decoded terms unchanged since their snapshot bytes
        self._table: list[str] = []  # snapshot position -> id
        self._stale: set[int] = set()  # dead positions: their ids are dropped on decode
        # ids added to a term still packed, merged when it is decoded: a checkout re-adds a few hundred
        # files, whose chunks hold nearly every common term, and decoding those long postings just to
        # insert into them was most of the next query's wait (1.3 s on Django)
        self._pending: dict[str, dict[str, int]] = {}

    def load(self, snap: Mapping[str, Any], stale_paths: set[str], path_of: Callable[[str], str]) -> list[str]:
        """Start an empty index from `snapshot()`'s output; returns the table (DEAD at stale positions)."""
        assert not self._maps and not self._packed
        table, packed = snap["table"], snap["postings"]
        if not isinstance(table, (list, tuple)) or not isinstance(packed, dict):
            raise ValueError("malformed postings snapshot")
        self._table = list(table)
        self._packed = dict(packed)
        self._stale = {i for i, item in enumerate(self._table) if item == DEAD or path_of(item) in stale_paths}
        return [DEAD if i in self._stale else item for i, item in enumerate(self._table)]

    def get(self, term: str) -> dict[str, int] | None:
        """The ids holding `term`, each with its count there."""
        found = self._maps.get(term)
        if found is not None:
            return found
        raw = self._packed.pop(term, None)
        if raw is None:
            return None
        pending = self._pending.pop(term, None)
        both = ints_from_bytes(raw)
        n = len(both) // 2
        pos, counts = both[:n], both[n:]
        table = self._table
        if self._stale and not self._stale.isdisjoint(pos):
            stale = self._stale
            found = {table[i]: c for i, c in zip(pos, counts, strict=True) if i not in stale}
        else:
            # itemgetter looks the positions up in C: faster than a comprehension on long postings
            found = dict(zip(itemgetter(*pos)(table), counts, strict=True)) if n > 1 else {table[i]: c for i, c in zip(pos, counts, strict=True)}
            if pending is None:
                self._clean[term] = raw
        if pending:
            found.update(pending)
        if not found:
            return None
        self._maps[term] = found
        return found

    def add_all(self, item: str, counts: Mapping[str, int]) -> None:
        """Record that `item` holds each term of `counts` that many times."""
        maps, packed, clean, pending = self._maps, self._packed, self._clean, self._pending
        for term, c in counts.items():
            found = maps.get(term)
            if found is None:
                if packed and term in packed:
                    pending.setdefault(term, {})[item] = c
                    continue
                maps[term] = {item: c}
                clean.pop(term, None)
                continue
            found[item] = c
            if clean:
                clean.pop(term, None)

    def discard(self, term: str, item: str) -> None:
        self.discard_all(item, (term,))

    def discard_all(self, item: str, terms: Iterable[str]) -> None:
        """Drop `item` from each of `terms` (a changed file's chunks, ~400k (term, id) pairs after a
        Django checkout: one call per id, not per pair)."""
        maps, clean = self._maps, self._clean
        for term in terms:
            found = maps.get(term)
            if found is None:
                found = self.get(term)  # still packed: decoded (pending ids merged) before the drop
                if found is None:
                    continue
            if found.pop(item, None) is None:
                continue
            if clean:
                clean.pop(term, None)
            if not found:
                del maps[term]

    def decode_all(self) -> None:
        """Decode every term now (a long-lived process, before its first request)."""
        for term in list(self._packed):
            self.get(term)

    def items(self) -> dict[str, dict[str, int]]:
        """Every term's ids (decodes every term: for checks, not for queries)."""
        self.decode_all()
        return dict(self._maps)

    def snapshot(self, live: Callable[[str], bool]) -> dict[str, Any]:
        """{"table": ids, "postings": {term: positions + counts}} for every term. `live`: whether an
        id is still indexed (a removed one is unreferenced: its file's terms were decoded to drop it)."""
        for term in list(self._pending):  # their packed bytes lack the added ids
            self.get(term)
        table, stale = self._table, self._stale
        for i, item in enumerate(table):
            if i not in stale and not live(item):
                stale.add(i)
        if 2 * len(stale) > len(table):  # mostly dead: decode what is left, then renumber below
            self.decode_all()
            self._clean.clear()
        if not self._packed and not self._clean:
            self._table, self._stale = [], set()  # nothing refers to the old positions: renumber
        table, stale = self._table, self._stale
        for i in stale:
            table[i] = DEAD
        number = {item: i for i, item in enumerate(table) if item != DEAD}
        out: dict[str, bytes] = {}
        for term in sorted(self._maps.keys() | self._packed.keys()):
            raw = self._clean.get(term) or self._packed.get(term)
            if raw is None:
                found = self._maps[term]
                pos, counts = array(_CODE), array(_CODE)
                for item in sorted(found):
                    at = number.get(item)
                    if at is None:
                        at = number[item] = len(table)
                        table.append(item)
                    pos.append(at)
                    counts.append(found[item])
                pos.extend(counts)
                raw = self._clean[term] = ints_to_bytes(pos)
            out[term] = raw
        return {"table": list(table), "postings": out}
