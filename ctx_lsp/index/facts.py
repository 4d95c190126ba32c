"""What the syntactic pass records about one file (`FileFacts`: defs, imports, sites) and the small
helpers every reader of a file shares (digest, decoding, line splitting, test paths).

A *chain* is a dotted expression as a tuple of segments; a segment ending in "()" is a call:
`self.repo.get_session().send` is ("self", "repo", "get_session()", "send"). No logic beyond that.
"""

from __future__ import annotations

import hashlib
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgpack

Chain = tuple[str, ...]


MAX_SIGNATURE = 240


# test files by the conventions of pytest (test_*.py, *_test.py, conftest.py) and Django (tests.py), and
# everything under a tests/ or test/ folder at any depth (Django's tests/<app>/models.py is test code too);
# testing/ only directly (numpy.testing and sympy.testing are libraries with their own subpackages)
_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test|tests|conftest)\.py$|(^|/)tests?/|(^|/)testing/[^/]*\.py$")


# what ast.parse raises on text it cannot take: bad syntax, NUL bytes, nesting too deep for the parser
UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)


# site kinds
CALL = "call"


REF = "ref"


@dataclass(slots=True)
class Def:
    qual: str
    kind: str  # class | function | method | variable | test
    start: int
    end: int
    line: int  # line of the `def`/`class` keyword (decorators excluded)
    col: int  # column of the defined name
    signature: str = ""
    doc: str = ""
    bases: list[Chain] = field(default_factory=list)
    decorators: list[Chain] = field(default_factory=list)
    returns: Chain | None = None  # type of the value returned (a call chain), resolved in this def's scope
    value: Chain | None = None  # variables: the chain assigned to it
    attrs: dict[str, tuple[str, Chain]] = field(default_factory=dict)  # class: attr -> (scope, type chain)
    locals: dict[str, Chain | None] = field(default_factory=dict)  # function: local -> type chain or None
    words: str = ""  # identifiers and short string literals, for lexical search
    returns_def: str | None = None  # a nested def some `return` hands out by name (a decorator factory's)
    returns_call: Chain | None = None  # the callee of a `return g(...)`: this def returns what g returns
    call_returns: Chain | None = None  # R of a `-> Callable[..., R]` annotation: what its result returns


class Import(NamedTuple):
    scope: str  # "" for module level
    line: int
    col: int
    module: str  # dotted module as written (without leading dots)
    name: str | None  # `from module import name`; None for `import module`
    asname: str | None
    level: int  # relative import level
    guarded: str = ""  # "" | "try" | "type_checking"


class Site(NamedTuple):  # a tuple: ~280k per Django index, rebuilt on every warm start
    scope: str  # qual of the innermost enclosing def, "" for module level
    line: int
    col: int  # column of the last segment (where jedi's goto should look)
    chain: Chain
    kind: str  # call | ref


@dataclass(slots=True)
class FileFacts:
    path: str
    digest: str
    lines: int
    defs: list[Def] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    all_names: list[str] | None = None
    words: str = ""  # module-level identifiers, docstring and path words
    doc: str = ""
    errors: list[str] = field(default_factory=list)
    is_test_file: bool = False
    flows: list[tuple] = field(default_factory=list)  # where function values go (flowfacts.py)
    # string literals worth matching against quoted messages: (scope qual, line, text); f-strings
    # as templates with "{}" for each formatted value (retrieval/literals.py)
    literals: list[tuple[str, int, str]] = field(default_factory=list)
    # term frequencies of the whole text (comments and docstrings included): whole-file BM25
    terms: dict[str, int] = field(default_factory=dict)
    # each symbol chunk's term counts, packed (index/chunk_terms.py): the chunk BM25 index's input
    chunk_terms: bytes = b""
    # per top-level statement, when the file parsed whole: its first line (decorators included), last
    # line, the top-level names it defines or redefines (a qual's first part), the module-level words
    # it adds (most statements none), a digest of its text and, for a class, its members whose text a
    # later version's walk may find unchanged (extract._Visitor.members): what an edit re-extracting
    # statements alone checks (index/splice.py) and what a checkout finds kept
    # (index/statement_reuse.py); None for repaired or parso facts
    tops: list[tuple[int, int, tuple[str, ...], tuple[str, ...], str, tuple[Any, ...], tuple[Any, ...]]] | None = None
    # `sites` packed (see pack_sites) while nobody has read them: a warm start loads every file's
    # facts, but only a re-bind or jedi refinement reads a file's sites (280k on Django)
    packed_sites: bytes | None = field(default=None, repr=False, compare=False)
    # `flows` packed (pack_records) until read: only a module table (a re-bind, a task's snippet) reads them
    packed_flows: bytes | None = field(default=None, repr=False, compare=False)
    # `terms` packed until read: the file BM25 index starts from the cache's snapshot, which holds them
    packed_terms: bytes | None = field(default=None, repr=False, compare=False)
    # `defs` held as the cache's rows until read: the graph's nodes need only each def's first eight
    # fields (def_rows); the rest (bases, attrs, locals, words...) stays packed for the binder
    def_rows: tuple[tuple[Any, ...], ...] | None = field(default=None, repr=False, compare=False)
    packed_def_rest: bytes | None = field(default=None, repr=False, compare=False)
    # modules.interface_digests of these facts, once an update computed it (an extraction worker does,
    # beside the facts): derived, never persisted
    interface: dict[str, str] | None = field(default=None, repr=False, compare=False)
    # (digest of the facts these were built from, {site group key: line shift}) for the site groups
    # (index/bind.py Group) statement_reuse copied whole from those facts: the binder keeps such a
    # group without comparing it item by item. Derived, never persisted
    moved: tuple[str, dict[str, int]] | None = field(default=None, repr=False, compare=False)

    def __getattr__(self, name: str) -> Any:
        # called only for an unset slot: `sites`, `flows`, `terms` or `defs` of facts read from the cache
        if name == "sites" and self.packed_sites is not None:
            sites = unpack_sites(self.packed_sites)
            self.sites = sites
            self.packed_sites = None
            return sites
        if name == "flows" and self.packed_flows is not None:
            flows = list(unpack_records(self.packed_flows))
            self.flows = flows
            self.packed_flows = None
            return flows
        if name == "defs" and self.def_rows is not None:
            rest = unpack_records(self.packed_def_rest) if self.packed_def_rest is not None else ()
            defs = [Def(d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], list(r[0]), list(r[1]), r[2], r[3], r[4],
                        r[5], r[6], r[7], r[8], r[9]) for d, r in zip(self.def_rows, rest, strict=True)]
            self.defs = defs
            self.def_rows = self.packed_def_rest = None
            return defs
        if name == "terms" and self.packed_terms is not None:
            terms = unpack_records(self.packed_terms)
            self.terms = terms
            self.packed_terms = None
            return terms
        raise AttributeError(name)

    def defer_sites(self, packed: bytes) -> None:
        """Hold the sites as `pack_sites` bytes, unpacked on first read."""
        del self.sites
        self.packed_sites = packed

    def defer_defs(self, rows: tuple[tuple[Any, ...], ...], rest: bytes) -> None:
        """Hold the defs as the cache's rows (qual, kind, start, end, line, col, signature, doc) and
        the packed rest of each, built into `Def`s on first read."""
        del self.defs
        self.def_rows = rows
        self.packed_def_rest = rest

    def node_rows(self) -> Iterable[tuple[Any, ...]]:
        """(qual, kind, start, end, line, col, signature, doc) per def, without building the defs."""
        if self.def_rows is not None:
            return self.def_rows
        return [(d.qual, d.kind, d.start, d.end, d.line, d.col, d.signature, d.doc) for d in self.defs]

    def defer_terms(self, packed: bytes) -> None:
        """Hold the term counts as `pack_records` bytes, unpacked on first read."""
        del self.terms
        self.packed_terms = packed

    def defer_flows(self, packed: bytes) -> None:
        """Hold the flows as `pack_records` bytes, unpacked on first read."""
        del self.flows
        self.packed_flows = packed


_SITE_UNICODE = "surrogatepass"  # as the cache: any str round-trips


def pack_sites(sites: list[Site]) -> bytes:
    wire = [list(s) for s in sites]
    try:  # msgpack's UTF-8 fast path; only a lone surrogate needs the error handler
        return msgpack.packb(wire, use_bin_type=True)
    except UnicodeEncodeError:
        return msgpack.packb(wire, use_bin_type=True, unicode_errors=_SITE_UNICODE)


def unpack_sites(packed: bytes) -> list[Site]:
    return list(map(Site._make, msgpack.unpackb(packed, use_list=False, raw=False, unicode_errors=_SITE_UNICODE)))


def pack_records(records: Any) -> bytes:
    """Any msgpack-able value (records of tuples and strings) as bytes, for a field read lazily."""
    try:
        return msgpack.packb(records, use_bin_type=True)
    except UnicodeEncodeError:
        return msgpack.packb(records, use_bin_type=True, unicode_errors=_SITE_UNICODE)


def unpack_records(packed: bytes) -> Any:
    """Inverse of pack_records, arrays as tuples."""
    return msgpack.unpackb(packed, use_list=False, raw=False, unicode_errors=_SITE_UNICODE)


def packed_values(packed: bytes) -> dict[Any, bytes]:
    """A packed list of [key, value] records as key -> that value's bytes, undecoded: comparing the
    bytes of two versions finds the few values that differ without building every one."""
    u = msgpack.Unpacker(raw=False, use_list=False, unicode_errors=_SITE_UNICODE)
    u.feed(packed)
    out: dict[Any, bytes] = {}
    for _ in range(u.read_array_header()):
        if u.read_array_header() != 2:
            raise ValueError("not a list of [key, value] records")
        key = u.unpack()
        start = u.tell()
        u.skip()
        out[key] = packed[start : u.tell()]
    return out


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def decode_source(data: bytes) -> tuple[str, str | None]:
    """Text of a source file and an error message when bytes had to be replaced. UTF-8 (with or without
    a BOM) first, as nearly every file is; else the encoding a PEP 263 cookie declares (`# -*- coding:
    latin-1 -*-`), as Python itself reads the file."""
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        declared = _declared_encoding(data)
        if declared is not None:
            try:
                return data.decode(declared), None
            except (UnicodeDecodeError, LookupError):
                pass
        return data.decode("utf-8", errors="replace"), f"non-UTF-8 bytes at offset {exc.start}; decoded with replacement"


def _declared_encoding(data: bytes) -> str | None:
    """The encoding a coding cookie in the first two lines names, if any and if Python knows it."""
    lines = iter(data.splitlines(keepends=True)[:2])
    try:
        encoding, _ = tokenize.detect_encoding(lambda: next(lines, b""))
    except SyntaxError:  # an unknown encoding, or a cookie that contradicts a BOM
        return None
    return None if encoding in ("utf-8", "utf-8-sig") else encoding


def is_test_path(path: str) -> bool:
    return bool(_TEST_FILE.search(path))


def split_lines(text: str) -> list[str]:
    """Lines as Python's tokenizer counts them (\\n, \\r\\n, \\r), unlike str.splitlines, which also
    breaks at form feeds, \\v, \\x1c-\\x1e, \\x85 and U+2028/9 and so would shift every later line."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines
