"""Persistence of per-file facts, bindings and jedi results with msgpack, in the cache directory.

The cache is versioned: one from another version, or a truncated or corrupt one, is discarded with a
single log line and rebuilt. The file is MAGIC, a CRC-32 of the rest, then one msgpack map: damage that
still decodes as msgpack (a flipped byte, a value of the wrong type written by another tool) fails the
checksum, so nothing the cache holds is trusted unless this code wrote it. A value holding a lone
surrogate (a git path decoded with surrogateescape) is packed with `surrogatepass` and round-trips.
Writes go to a temporary file that is renamed over the old one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgpack

from ctx_lsp import __version__
from ctx_lsp.index.bind import FileBinding
from ctx_lsp.index.cachedir import CACHE_ENV, default_cache_dir  # noqa: F401  (re-exported)
from ctx_lsp.index.facts import FileFacts, Import, pack_records, pack_sites
from ctx_lsp.index.model import Edge

log = logging.getLogger(__name__)

SCHEMA = 19  # 19: a binding's edges as rows into its own string table (one object per distinct string once loaded); 18: each binding's site groups (index/bind.py Group), kept by an update whose changes they did not read; 17: each class member's body offsets and stored attributes, each top-level class's stored attributes; pending flows in walk order (index/flowfacts.py FlowReplay); 16: each top-level statement's module-level words, text digest and class members (FileFacts.tops, index/statement_reuse.py); 15: each file's top-level statement starts and names (FileFacts.tops); 14: a file's defs as node rows plus their packed rest, built on first read; 13: a file's term counts packed apart, unpacked on first read; 12: derived sections (the lexical indexes, retrieval/engine.py lexical_snapshot); 11: each file's chunk term counts (index/chunk_terms.py); 10: flows and a binding's dependencies packed apart too, unpacked on first read; 9: each file's sites packed apart, unpacked on first read; 8: MAGIC and CRC-32 before the map, strings packed with surrogatepass; 7: literals and whole-file term counts; 6: name-level dependencies (modules.name_dep); 5: per-file payload packed as one inner blob
MAGIC = b"ctx-lsp\n"
_PREFIX = len(MAGIC) + 4  # MAGIC, then the CRC-32 (big-endian) of everything after it
_UNICODE = "surrogatepass"  # any Python str packs and unpacks losslessly


def _code_digest() -> str:
    """The digest of the code that produces what the cache holds: a cache written by other extraction
    or binding code (a development checkout between releases) is rebuilt, not trusted."""
    h = hashlib.sha1()
    pkg = Path(__file__).parent.parent  # ctx_lsp/
    for name in ("index/facts.py", "index/chains.py", "index/parse.py", "index/extract.py", "index/flowfacts.py",
                 "index/modules.py", "index/evaluate.py", "index/bind.py", "index/flow.py", "index/model.py",
                 "index/store.py", "index/splice.py", "retrieval/text.py"):
        h.update((pkg / name).read_bytes())
    return h.hexdigest()[:16]


CODE = _code_digest()


def facts_to_wire(f: FileFacts) -> list[Any]:
    rows: Any
    if f.def_rows is not None:  # still as read: written back as read
        rows, rest = f.def_rows, f.packed_def_rest
    else:
        rows = [[d.qual, d.kind, d.start, d.end, d.line, d.col, d.signature, d.doc] for d in f.defs]
        rest = pack_records(
            [[[list(b) for b in d.bases], [list(c) for c in d.decorators], d.returns, d.value,
              {k: [v[0], list(v[1])] for k, v in d.attrs.items()},
              {k: (list(v) if v is not None else None) for k, v in d.locals.items()}, d.words, d.returns_def,
              list(d.returns_call) if d.returns_call is not None else None,
              list(d.call_returns) if d.call_returns is not None else None]
             for d in f.defs])
    return [
        f.path, f.digest, f.lines, rows,
        [[i.scope, i.line, i.col, i.module, i.name, i.asname, i.level, i.guarded] for i in f.imports],
        f.packed_sites if f.packed_sites is not None else pack_sites(f.sites),
        f.all_names, f.words, f.doc, f.errors, f.is_test_file,
        f.packed_flows if f.packed_flows is not None else pack_records(
            [[fl[0], fl[1], fl[2], fl[3], list(fl[4]), fl[5]] for fl in f.flows]),
        [list(lit) for lit in f.literals],
        f.packed_terms if f.packed_terms is not None else pack_records(f.terms), f.chunk_terms, rest, f.tops,
    ]


def facts_from_wire(w: Any) -> FileFacts:
    """Inverse of facts_to_wire, for a payload unpacked with use_list=False: every array is then already
    a tuple, the shape chains, sites, imports and attrs hold, so records are built without copying.
    Defs, sites, flows and term counts stay as read until something reads them (FileFacts.__getattr__)."""
    f = FileFacts(w[0], w[1], w[2])
    if not all(isinstance(x, bytes) for x in (w[5], w[11], w[13], w[14], w[15])):
        raise ValueError("packed fields are not bytes")
    f.defer_defs(w[3], w[15])
    f.imports = list(map(Import._make, w[4]))
    f.defer_sites(w[5])
    f.all_names = list(w[6]) if w[6] is not None else None
    f.words, f.doc, f.errors, f.is_test_file = w[7], w[8], list(w[9]), w[10]
    f.defer_flows(w[11])
    f.literals = list(w[12])
    f.defer_terms(w[13])
    f.chunk_terms = w[14]
    f.tops = [(t[0], t[1], tuple(t[2]), tuple(t[3]), t[4],
               tuple((m[0], m[1], tuple((c[0], tuple(c[1])) for c in m[2]), m[3], m[4], tuple(m[5])) for m in t[5]),
               tuple((c[0], tuple(c[1])) for c in t[6])) for t in w[16]] if w[16] is not None else None
    return f


def edge_to_wire(e: Edge) -> list[Any]:
    return [e.src, e.dst, e.kind, e.path, e.line, e.col, e.resolver, list(e.extra)]


def edge_from_wire(w: Any) -> Edge:
    return Edge._make(w)  # extra is already a tuple (use_list=False)


def edges_to_wire(edges: list[Edge]) -> list[Any]:
    """[strings, rows]: each edge's strings as indexes into a table of the distinct ones. Decoded as
    one edge per row, a Django cache held a separate object for every edge's ids, kind, path and
    resolver (64 MB of strings, 90% of them copies); this way each distinct string is one object
    per binding, the section is a quarter of the size, and a pickle of the bindings shares them too."""
    table: dict[str, int] = {}

    def at(text: str) -> int:
        i = table.get(text)
        if i is None:
            i = table[text] = len(table)
        return i

    rows = [(at(e.src), at(e.dst), at(e.kind), at(e.path), e.line, e.col, at(e.resolver), e.extra) for e in edges]
    return [list(table), rows]


def edges_from_wire(w: Any) -> list[Edge]:
    table, rows = w
    new = tuple.__new__  # Edge's own __new__ checks arity in Python: the rows are ours
    return [new(Edge, (table[s], table[d], table[k], table[p], line, col, table[r], extra))
            for s, d, k, p, line, col, r, extra in rows]


def binding_to_wire(b: FileBinding) -> list[Any]:
    deps, flows, groups = b.packed_parts()
    return [b.path, edges_to_wire(b.edges), deps, b.internal, b.external, b.unresolved, flows, groups]


def binding_from_wire(w: Any) -> FileBinding:
    if not (isinstance(w[2], bytes) and isinstance(w[6], bytes) and isinstance(w[7], bytes)):
        raise ValueError("dependencies, flows and site groups are not packed")
    b = FileBinding(w[0], edges_from_wire(w[1]), internal=w[3], external=w[4], unresolved=list(w[5]))
    b.defer(w[2], w[6], w[7])
    return b


class IndexStore:
    """Reads and writes one workspace's cache file."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self.path = cache_dir / "index.msgpack"
        # each file's (size, mtime_ns, digest) as of the last write, beside the cache: a warm start reads
        # it before the cache to tell a checkout that rewrote most of the code (index from scratch, and
        # the cache's hundred megabytes are not read). Only a hint: a stale or missing one costs time.
        self.states_path = cache_dir / "states.msgpack"

    def save_states(self, root: Path, states: dict[str, tuple[int, int, str]], has_previous: bool) -> None:
        header = {"schema": SCHEMA, "version": __version__, "code": CODE, "root": str(root.resolve())}
        tmp = self.states_path.with_suffix(f".tmp{os.getpid()}")
        try:
            tmp.write_bytes(msgpack.packb({**header, "previous": has_previous, "files": states},
                                          use_bin_type=True, unicode_errors=_UNICODE))
            os.replace(tmp, self.states_path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def load_states(self, root: Path) -> tuple[dict[str, tuple[int, int, str]], bool] | None:
        """The states `save_states` wrote for this code and root, and whether the cache then held
        previous versions; None when missing or unusable."""
        try:
            data = msgpack.unpackb(self.states_path.read_bytes(), raw=False, strict_map_key=False,
                                   unicode_errors=_UNICODE)
            if data.get("schema") != SCHEMA or data.get("version") != __version__ or data.get("code") != CODE \
                    or data.get("root") != str(root.resolve()):
                return None
            return {str(k): (int(v[0]), int(v[1]), str(v[2])) for k, v in data["files"].items()}, bool(data["previous"])
        except Exception:  # missing, unreadable or malformed: the warm start reads the cache as before
            return None

    def load(self, root: Path) -> dict[str, Any] | None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cache unreadable, rebuilding: %s", exc)
            return None
        if not raw.startswith(MAGIC):
            log.warning("not a ctx-lsp cache (damaged or foreign bytes), rebuilding: %s", self.path)
            return None
        body = memoryview(raw)[_PREFIX:]
        if len(raw) < _PREFIX or zlib.crc32(body) != int.from_bytes(raw[len(MAGIC):_PREFIX], "big"):
            log.warning("cache corrupt, rebuilding (checksum mismatch): %s", self.path)
            return None
        try:
            data = msgpack.unpackb(body, raw=False, strict_map_key=False, unicode_errors=_UNICODE)
            if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("version") != __version__ \
                    or data.get("code") != CODE:
                log.warning("cache from another version, rebuilding: %s", self.path)
                return None
            if data.get("root") != str(root.resolve()):
                log.warning("cache belongs to another workspace, rebuilding: %s", self.path)
                return None
            del body, raw
            # the per-file payload is one inner blob: unpacked with tuples (cheaper, and the shapes the
            # records hold), while producers' extra state keeps msgpack's default lists
            data["files"] = msgpack.unpackb(data["files"], raw=False, strict_map_key=False, use_list=False,
                                            unicode_errors=_UNICODE)
            return data
        except Exception as exc:  # undecodable although the checksum matched: any decoding error means rebuild
            log.warning("cache corrupt, rebuilding (%s): %s", type(exc).__name__, self.path)
            return None

    def save(self, root: Path, files: Iterable[tuple[str, Any]], count: int, extra: dict[str, Any] | None = None) -> None:
        """Write the cache: `count` (path, entry) pairs, packed one at a time and streamed to the file in
        1 MB pieces (the whole blob in memory cost sympy's build ~100 MB of peak RSS). The inner blob's
        length and the CRC are filled in once it is written: the CRC is read back from the file."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        strict = msgpack.Packer(use_bin_type=True)
        lenient = msgpack.Packer(use_bin_type=True, unicode_errors=_UNICODE)

        def pack(obj: Any) -> bytes:
            # strict first: msgpack's UTF-8 fast path is ~25% faster than any error handler, and only
            # a value holding a lone surrogate (a git path that is not UTF-8) needs one
            try:
                return strict.pack(obj)
            except UnicodeEncodeError:
                return lenient.pack(obj)

        header: dict[str, Any] = {"schema": SCHEMA, "version": __version__, "code": CODE, "root": str(root.resolve())}
        if extra:
            header.update(extra)
        head = bytearray(strict.pack_map_header(len(header) + 1))
        for key, value in header.items():
            head += pack(key)
            head += pack(value)
        head += strict.pack("files")
        head += b"\xc6\0\0\0\0"  # bin 32, its length filled in below
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        try:
            with open(tmp, "w+b") as fh:
                fh.write(MAGIC + b"\0\0\0\0")
                fh.write(head)
                blob_at = fh.tell()
                buf = bytearray(strict.pack_map_header(count))
                for rel, entry in files:
                    buf += pack(rel)
                    buf += pack(entry)
                    if len(buf) >= 1 << 20:
                        fh.write(buf)
                        buf.clear()
                fh.write(buf)
                size = fh.tell() - blob_at
                fh.seek(blob_at - 4)
                fh.write(size.to_bytes(4, "big"))
                fh.flush()
                fh.seek(_PREFIX)
                crc = 0
                while chunk := fh.read(1 << 22):
                    crc = zlib.crc32(chunk, crc)
                fh.seek(len(MAGIC))
                fh.write(crc.to_bytes(4, "big"))
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # no half-written temporary file is left in the cache directory
            raise
