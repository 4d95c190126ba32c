"""Lexical search: BM25 (Okapi) over symbol-level chunks, updated per file as the index changes.

rank-bm25's BM25Okapi scores every document for every query and cannot be updated in place; on
Django (59k chunks) that is 25-40 ms per query and a full rebuild after each edit. This index keeps
the same formula and parameters (k1=1.5, b=0.75, idf floor epsilon=0.25 of the mean idf) over an
inverted index, so a query scores only documents that contain a query term and an edit re-indexes
one file. The benchmark baselines use rank-bm25 itself.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ctx_lsp.index.chunk_terms import chunk_term_counts, unpack_chunk_terms
from ctx_lsp.index.facts import FileFacts, packed_values, unpack_records
from ctx_lsp.retrieval.postings import DEAD, Postings, ints_from_bytes, ints_to_bytes
from ctx_lsp.retrieval.text import query_terms

K1 = 1.5
B = 0.75
EPSILON = 0.25
COMMON_POSTINGS = 1500


@dataclass(slots=True)
class Chunk:
    node_id: str
    path: str
    length: int
    tf: dict[str, int]


class LexicalIndex:
    """Chunk BM25. The postings hold each chunk's term counts and `length` its length, so a query
    scores hits without decoding their files; a file's chunks stay packed (its facts' `chunk_terms`)
    until it is re-indexed or scored on its own (`chunk_scores`). The postings can start from a
    snapshot (`snapshot`, `load`: persisted with the cache by the Retriever)."""

    def __init__(self) -> None:
        self.postings = Postings()
        self.n = 0  # chunks
        self.total_len = 0
        self.length: dict[str, int] = {}  # chunk id -> its length in terms
        self._files: dict[str, bytes] = {}  # path -> the packed chunk terms indexed for it
        self._counts: dict[str, tuple[int, int]] = {}  # path -> (its chunks, their total length)
        self._decoded: dict[str, list[Chunk]] = {}
        self._norm: dict[str, float] = {}  # chunk id -> BM25's length normalisation; emptied when the index changes

    def _file_chunks(self, path: str) -> list[Chunk]:
        got = self._decoded.get(path)
        if got is None:
            raw = self._files.get(path)
            if raw is None:
                return []
            got = self._decoded[path] = [Chunk(nid, path, sum(tf.values()), tf) for nid, tf in unpack_chunk_terms(raw)]
        return got

    def set_file(self, facts: FileFacts | None, path: str) -> None:
        self._norm.clear()
        # only what changed: after a checkout most chunks of a changed file are the same (a kept
        # function's counts are copied), and dropping then re-adding each of their terms was most of the
        # next query's wait (~1M postings on Django); the chunks are compared packed, and only those
        # whose bytes differ are decoded (decoding both versions of every chunk was the rest of it)
        before: dict[str, bytes] = {}  # the chunks indexed for the file until now
        if path in self._files:
            before = packed_values(self._files.pop(path))
            n, length = self._counts.pop(path)
            self.n -= n
            self.total_len -= length
            self._decoded.pop(path, None)
        if facts is None:
            for node_id, raw in before.items():
                self.length.pop(node_id, None)
                self.postings.discard_all(node_id, unpack_records(raw))
            return
        packed = self._files[path] = facts.chunk_terms or chunk_term_counts(facts)
        now = packed_values(packed)
        length = 0
        for node_id, raw in now.items():
            old_raw = before.pop(node_id, None)
            if old_raw != raw:
                tf: dict[str, int] = unpack_records(raw)
                old_tf: dict[str, int] | None = unpack_records(old_raw) if old_raw is not None else None
                if old_tf != tf:
                    if old_tf is None:
                        self.postings.add_all(node_id, tf)
                    else:
                        self.postings.discard_all(node_id, [t for t in old_tf if t not in tf])
                        # add_all sets the counts of the terms it still holds: only those that changed
                        self.postings.add_all(node_id, {t: c for t, c in tf.items() if old_tf.get(t) != c})
                    self.length[node_id] = sum(tf.values())
            length += self.length.get(node_id, 0)
        for node_id, raw in before.items():
            self.length.pop(node_id, None)
            self.postings.discard_all(node_id, unpack_records(raw))
        self._counts[path] = (len(now), length)
        self.n += len(now)
        self.total_len += length
        if len(self._decoded) > 64:  # a file's decoded chunks are only needed while it is scored or changed
            self._decoded.clear()

    def snapshot(self) -> dict[str, Any]:
        postings = self.postings.snapshot(self.length.__contains__)
        lengths = ints_to_bytes(array("I", (self.length.get(nid, 0) for nid in postings["table"])))
        return {"n": self.n, "total": self.total_len, "postings": postings, "lengths": lengths,
                "counts": {p: list(c) for p, c in sorted(self._counts.items())}}

    def load(self, snap: dict[str, Any], facts: Mapping[str, FileFacts], same: set[str], stale: set[str]) -> None:
        """Start an empty index from `snap`: `same` are the files it describes as they are now
        (their chunks are read from `facts`), `stale` those it describes in another version or that
        are gone; the caller then sets the stale and the new files."""
        self._norm.clear()
        counts = snap["counts"]
        self.n, self.total_len = int(snap["n"]), int(snap["total"])
        for p in stale:
            n, length = counts[p]
            self.n -= n
            self.total_len -= length
        for p in same:
            n, length = counts[p]
            self._counts[p] = (int(n), int(length))
            self._files[p] = facts[p].chunk_terms
        table = self.postings.load(snap["postings"], stale, lambda nid: nid.partition("::")[0])
        lengths = ints_from_bytes(snap["lengths"])
        if len(lengths) != len(table):
            raise ValueError("chunk lengths do not match the postings table")
        self.length = {nid: n for nid, n in zip(table, lengths, strict=True) if n and nid != DEAD}

    def idf(self, term: str) -> float:
        n = self.n
        df = len(self.postings.get(term) or ())
        if df == 0 or n == 0:
            return 0.0
        value = math.log(n - df + 0.5) - math.log(df + 0.5)
        # rank-bm25 floors negative idf at epsilon * mean idf; approximate the mean by log(2)
        return value if value > 0 else EPSILON * math.log(2)

    def df(self, term: str) -> int:
        """How many chunks hold `term`."""
        return len(self.postings.get(term) or ())

    def search(self, query: str, top: int = 20, skip_common: float = 0.2) -> list[tuple[str, float]]:
        """Top chunks for a query: (node id, score), best first; ties broken by node id."""
        q = query_terms(query)
        if not q or not self.n:
            return []
        n = self.n
        avgdl = self.total_len / n if n else 1.0
        qtf = Counter(q)
        scores: defaultdict[str, float] = defaultdict(float)
        norm = self._norm
        length = self.length
        k1p1 = K1 + 1
        # rarest terms first; a very common term then only adds to documents already found, which
        # keeps a query over a large workspace to the documents that matter
        ordered = sorted(qtf.items(), key=lambda kv: (len(self.postings.get(kv[0]) or ()), kv[0]))
        for term, mult in ordered:
            posting = self.postings.get(term)
            if not posting:
                continue
            ids: Iterable[str] = posting
            if len(posting) > skip_common * n and len(qtf) > 1 and scores:
                continue  # a term in a fifth of all chunks adds cost, not signal, once rarer ones found some
            # (in a small workspace every term is in a fifth of the chunks: the rarest still counts)
            idf = self.idf(term)
            if len(posting) > COMMON_POSTINGS and scores:
                ids = scores.keys() & posting.keys()  # a set operation: long task texts have many common terms
            for node_id in ids:
                f = posting[node_id]
                try:
                    nv = norm[node_id]
                except KeyError:  # BM25's length normalisation, kept per chunk until the index changes
                    nv = norm[node_id] = K1 * (1 - B + B * length[node_id] / avgdl)
                scores[node_id] += idf * f * k1p1 / (f + nv) * mult
        return top_hits(scores, top)

    def best_chunks(self, query: str, path: str, n: int = 3) -> list[str]:
        """The chunks of one file that score best for a query, best first (symbols only: the file's
        own chunk is its module text)."""
        return [nid for nid, _ in top_hits(self.chunk_scores(query, path), n)]

    def chunk_scores(self, query: str, path: str) -> dict[str, float]:
        """BM25 of each symbol chunk of one file that shares a term with the query (not the module chunk)."""
        chunks = self._file_chunks(path)
        if not chunks:
            return {}
        q = Counter(query_terms(query))
        total = self.n
        avgdl = self.total_len / total if total else 1.0
        idf = {t: self.idf(t) for t in q}
        order = {t: i for i, t in enumerate(q)}  # sum in the query's term order, whatever the chunk's
        out: dict[str, float] = {}
        for ch in chunks:
            node_id = ch.node_id
            if node_id == path:
                continue
            common = ch.tf.keys() & order.keys()
            if not common:
                continue
            s = 0.0
            for term in sorted(common, key=order.__getitem__):
                f = ch.tf[term]
                s += q[term] * idf[term] * f * (K1 + 1) / (f + K1 * (1 - B + B * ch.length / avgdl))
            if s > 0:
                out[node_id] = s
        return out


def top_hits(scores: dict[str, float], top: int) -> list[tuple[str, float]]:
    """The `top` best (id, score) pairs, best first, ties by id: `sorted(...)[:top]`, without sorting
    or keying every hit (the top-th score is found first; only hits at or above it are sorted)."""
    if top <= 0:
        return []
    if len(scores) > top:
        floor = heapq.nlargest(top, scores.values())[-1]
        kept = [(k, v) for k, v in scores.items() if v >= floor]
    else:
        kept = list(scores.items())
    kept.sort(key=_best_first)
    return kept[:top]


def _best_first(hit: tuple[str, float]) -> tuple[float, str]:
    return -hit[1], hit[0]
