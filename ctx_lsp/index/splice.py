"""Re-extracting an edited file from the top-level statements its edit touched.

An editor edit changes a few lines of one function, but extracting a large module again costs its
whole parse and walks (100-200 ms on sympy's largest files). The facts of a top-level statement depend
on its own text only, so an edit can re-extract just the statements it touched and keep the others'
facts, their lines shifted. `splice` does that, or returns None, and the caller extracts the whole
file; either way the result equals `extract(path, new_text)` field for field (tests/test_splice.py
checks it on real files).

Where a statement's facts depend on other statements, `splice` declines:
- a name two top-level statements define (the first definition wins: `FileFacts.tops` holds each one's),
  when an edited statement is one of them or lies between them (an `@overload` implementation takes its
  stub's def, a top-level `@f.setter` extends `f`'s def to its own lines);
- module-level words or the module docstring that the edit changes (whole-file values);
- edited statements holding most of the file (a whole extraction costs no more);
- a file whose literals reached the cap, or old facts with errors (a repaired parse), or text with
  `\\r` line ends. (Future imports need nothing: `ast.parse` neither checks where they stand nor lets
  them change the grammar, so a statement parsed apart gives the facts it gives in its file.)
"""

from __future__ import annotations

import ast
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import fields
from operator import attrgetter
from typing import Any, TypeVar

from ctx_lsp.index.chunk_terms import chunk_texts
from ctx_lsp.index.extract import MAX_LITERALS, MemberReplay, _Visitor, own_flows, with_stored
from ctx_lsp.index.facts import (
    UNPARSABLE,
    Def,
    FileFacts,
    Import,
    Site,
    pack_records,
    split_lines,
    unpack_records,
)
from ctx_lsp.index.flowfacts import FlowReplay, ReplayMismatch, walk_flows
from ctx_lsp.retrieval.text import term_counts

T = TypeVar("T")


# FileFacts.tops: first, last, names, module words, text digest, members (extract._Visitor.members),
# the attributes its top-level classes store (extract.with_stored)
Span = tuple[int, int, tuple[str, ...], tuple[str, ...], str, tuple[Any, ...], tuple[Any, ...]]


class _Part:
    """The facts of lines [first, first + count - 1] of a file extracted on their own."""

    def __init__(self, facts: FileFacts, tops: list[Span], replayed: set[str], unmoved: set[str] | None = None) -> None:
        self.facts = facts
        self.tops = tops
        self.replayed = replayed  # quals whose facts the walk copied from a replay
        self.unmoved = unmoved or set()  # of those, the ones whose flows may differ (their class's stored set did)


def _extract_part(path: str, is_test: bool, lines: list[str], first: int, count: int,
                  replay: MemberReplay | None = None) -> _Part | None:
    blanks = replay.blanks(lines, first, first + count - 1) if replay is not None else {}
    for _ in range(3):
        if not blanks:
            break
        try:
            return _walk_part(path, is_test, lines, first, count, replay, blanks)
        except ReplayMismatch as exc:
            # a class whose methods store other attributes now: walk its methods; a blanked text that
            # was not the member it looked like: walk everything
            blanks = {k: v for k, v in blanks.items() if v[3] != exc.cls} if exc.cls else {}
    return _walk_part(path, is_test, lines, first, count, replay, {})


def _walk_part(path: str, is_test: bool, lines: list[str], first: int, count: int, replay: MemberReplay | None,
               blanks: dict[int, tuple[int, int, int, str, str]]) -> _Part | None:
    """`_extract_part` with the bodies `blanks` names (first line -> last line, body start, its first
    statement's line, class, text digest) replaced before the parse; their facts are copied from `replay`. Raises
    ReplayMismatch when a blanked body's facts cannot be copied exactly."""
    body = lines[first - 1 : first - 1 + count]
    for end, b0, l0, _, _ in blanks.values():
        # the body becomes `()` spread over its lines, its first statement's line kept in place
        # (the signature runs up to it): the header parses as it is, every line number stays
        indent = lines[l0 - 1][: len(lines[l0 - 1]) - len(lines[l0 - 1].lstrip())]
        for ln in range(b0, end + 1):
            body[ln - first] = ""
        body[l0 - first] = indent + ("()" if l0 == end else "(")
        if l0 != end:
            body[end - first] = indent + ")"
    try:
        # padded with empty lines, so every line number is already the file's
        tree = ast.parse("\n" * (first - 1) + "\n".join(body) + "\n", type_comments=False)
    except UNPARSABLE:
        if blanks:
            raise ReplayMismatch("the blanked text does not parse") from None
        return None
    facts = FileFacts(path=path, digest="", lines=len(lines), is_test_file=is_test)
    visitor = _Visitor(facts, lines, replay)
    try:
        visitor.run(tree)
        flow_replay = None
        if blanks:
            assert replay is not None
            copied = {d.start: d for d in facts.defs if d.qual in visitor.replayed}
            members: dict[int, Any] = {}
            for start, (end, _, _, _, digest) in blanks.items():
                d = copied.get(start)
                if d is None or d.end != end:
                    raise ReplayMismatch(f"line {start} was blanked but not copied")
                members[start] = replay.flows(d.qual, digest, start)
            flow_replay = FlowReplay(members, replay.class_stored({m[0] for m in members.values()}))
        walk = walk_flows(tree, visitor.col, flow_replay)
        facts.flows = own_flows(walk.flows, facts.defs)
    except (RecursionError, MemoryError):
        return None
    if facts.errors or walk.gave_up:
        return None
    unmoved: set[str] = set()
    if visitor.replayed and replay is not None:
        # a replayed body's flows are its old ones only against the attributes its class stored then
        # (pending `self.x(...)` flows are kept only if the class stores x): members of a class that
        # stores another set now were walked for their flows, so their groups are not the old ones moved
        before = replay.class_stored(visitor.replayed)
        unmoved = {q for q in visitor.replayed
                   if before.get(q.partition(".")[0]) != walk.class_stored.get(q.partition(".")[0])}
    return _Part(facts, with_stored(visitor.statements, walk), visitor.replayed, unmoved)


def _common_ends(a: list[str], b: list[str]) -> tuple[int, int]:
    """(lines equal at the start, lines equal at the end, not overlapping the first)."""
    limit = min(len(a), len(b))
    p = 0
    while p < limit and a[p] == b[p]:
        p += 1
    s = 0
    limit -= p
    while s < limit and a[-1 - s] == b[-1 - s]:
        s += 1
    return p, s


def _run(items: Sequence[T], line: Callable[[T], int], first: int, last: int) -> tuple[int, int] | None:
    """[i, j): the items whose line is in [first, last]; None unless those items are contiguous, the
    ones before them all before `first` and the ones after all after `last` (facts come in statement
    order, each inside its statement's lines)."""
    n = len(items)
    i = 0
    while i < n and line(items[i]) < first:
        i += 1
    j = i
    while j < n and line(items[j]) <= last:
        j += 1
    for k in range(j, n):
        if line(items[k]) <= last:
            return None
    return i, j


_DEF_VALUES = attrgetter(*(f.name for f in fields(Def)))  # every field, in the constructor's order


def _shift_def(d: Def, delta: int) -> Def:
    # not dataclasses.replace, which re-reads the fields per call: 2.6 us a def, 0.6 this way
    moved = Def(*_DEF_VALUES(d))
    moved.start += delta
    moved.end += delta
    moved.line += delta
    return moved


# the per-statement fact lists of FileFacts: each item's line, and the item moved by `delta` lines
FACT_FIELDS: dict[str, tuple[Callable[[Any], int], Callable[[Any, int], Any]]] = {
    "defs": (lambda d: d.start, _shift_def),
    "imports": (lambda i: i.line, lambda i, delta: Import(i[0], i[1] + delta, *i[2:])),
    "sites": (lambda x: x.line, lambda x, delta: Site(x[0], x[1] + delta, x[2], x[3], x[4])),
    "literals": (lambda x: x[1], lambda x, delta: (x[0], x[1] + delta, x[2])),
    "flows": (lambda x: x[2], lambda x, delta: (x[0], x[1], x[2] + delta, *x[3:])),
}


def _candidates(spans: list[Span], a: list[str], p: int, lo: int, hi: int) -> list[tuple[int, int]]:
    """Old line ranges [first, last] to re-extract, narrowest first: the statements the changed lines
    [lo, hi] touch (or, for an insertion after line p, the inserted lines alone), then whole segments
    from one statement's start to the next one's (an indented insertion after a statement continues it)."""
    starts = [sp[0] for sp in spans]
    n = len(a)

    def holding(line: int) -> tuple[int, int] | None:
        k = bisect_right(starts, line) - 1
        return (spans[k][0], spans[k][1]) if k >= 0 and spans[k][1] >= line else None

    out: list[tuple[int, int]] = []
    if hi < lo:
        inside = holding(p) if p >= 1 else None
        if inside is not None and inside[1] > p:
            out.append(inside)
        else:
            out.append((p + 1, p))
    else:
        head, tail = holding(lo), holding(hi)
        out.append((head[0] if head else lo, tail[1] if tail else hi))
    # whole segments: from the start of the statement at or before the change to the next start
    seg_starts = [1, *starts[1:]]
    k = bisect_right(seg_starts, max(min(lo, hi, n), 1)) - 1
    m = bisect_right(seg_starts, max(min(max(lo, hi), n), 1)) - 1
    wide = (seg_starts[k], seg_starts[m + 1] - 1 if m + 1 < len(seg_starts) else n)
    if wide != out[0]:
        out.append(wide)
    return [(f, la) for f, la in out if not (f >= 2 and a[f - 2].endswith("\\"))]


def splice(old: FileFacts, old_text: str, new_text: str, digest: str) -> FileFacts | None:
    """The facts of `new_text` built from `old` (the facts of `old_text`, same path) by re-extracting
    only the top-level statements the edit touched; None when that cannot be exact."""
    spans = old.tops
    if not spans or old.errors or old.digest == digest or "\r" in old_text or "\r" in new_text:
        return None
    if len(old.literals) >= MAX_LITERALS:
        return None  # the list was cut: the statements after the edit may have literals it left out
    a, b = split_lines(old_text), split_lines(new_text)
    if len(a) != old.lines:
        return None
    p, s = _common_ends(a, b)
    if p == len(a) and p == len(b):
        return None  # the same lines (a final newline added or removed): nothing to save
    lo, hi = p + 1, len(a) - s  # the changed old lines, 1-based; empty (hi < lo) for a pure insertion
    for first, last in _candidates(spans, a, p, lo, hi):
        out = _splice_range(old, a, b, first, last, digest)
        if out is not None:
            return out
    return None


def _splice_range(old: FileFacts, a: list[str], b: list[str], first: int, last: int, digest: str) -> FileFacts | None:
    """`splice` re-extracting old lines [first, last] (new lines [first, last + delta])."""
    spans = old.tops
    assert spans is not None
    delta = len(b) - len(a)
    count = last - first + 1 + delta
    if count > max(200, 2 * len(b) // 3):
        return None  # most of the file: extracting it whole costs no more
    i = bisect_left(spans, (first,))
    j = bisect_left(spans, (last + 1,))
    if _split_by(spans, i, j):
        return None
    was = spans[i:j]  # the old statements in the range
    new = _extract_part(old.path, old.is_test_file, b, first, count)
    if new is None:
        return None
    # a name the edited statements define that another statement defines too: they depend on each other
    names = {n for sp in was for n in sp[2]} | {n for sp in new.tops for n in sp[2]}
    if names and any(n in names for sp in (*spans[:i], *spans[j:]) for n in sp[2]):
        return None
    if [sp[3] for sp in was if sp[3]] != [sp[3] for sp in new.tops if sp[3]]:
        return None  # the module-level words (the module chunk's): a whole-file value
    if first <= spans[0][0]:
        # the file's first statement may be another: its docstring is the module's
        if new.tops:
            doc = new.facts.doc
        elif not was:
            doc = old.doc
        else:
            return None
        if doc != old.doc:
            return None

    runs = {name: _run(getattr(old, name), line, first, last) for name, (line, _) in FACT_FIELDS.items()}
    if any(run is None for run in runs.values()):
        return None  # facts come in statement order, each inside its statement's lines

    out = FileFacts(path=old.path, digest=digest, lines=len(b), is_test_file=old.is_test_file)
    for name, (_, shift) in FACT_FIELDS.items():
        items = getattr(old, name)
        lo, hi = runs[name]  # type: ignore[misc]
        after = items[hi:] if delta == 0 else [shift(x, delta) for x in items[hi:]]
        setattr(out, name, [*items[:lo], *getattr(new.facts, name), *after])
    out.literals = out.literals[:MAX_LITERALS]
    out.all_names = new.facts.all_names if "__all__" in names else old.all_names
    out.doc, out.words = old.doc, old.words
    out.tops = [*spans[:i], *new.tops, *((sp[0] + delta, sp[1] + delta, *sp[2:]) for sp in spans[j:])]  # type: ignore[misc]
    terms = Counter(old.terms)
    terms.subtract(term_counts("\n".join(a[first - 1 : last])))
    terms.update(term_counts("\n".join(b[first - 1 : last + delta])))
    out.terms = {t: c for t, c in sorted(terms.items()) if c > 0}
    out.chunk_terms = _spliced_chunks(old, runs["defs"], new.facts, out)  # type: ignore[arg-type]
    return out


def _split_by(spans: list[Span], i: int, j: int) -> bool:
    """Whether a name is defined both before the statements [i, j) and after them: such statements'
    facts are one def's (an `@overload` implementation takes its stub's def, `@f.setter` extends `f` to
    its own last line), so an edit between them moves part of one def."""
    before = {n for sp in spans[:i] for n in sp[2]}
    return bool(before) and any(n in before for sp in spans[j:] for n in sp[2])


def _chunked(d: Def) -> bool:
    return not (d.kind == "variable" and "." in d.qual)  # chunk_texts' rule: class attributes have none


def _spliced_chunks(old: FileFacts, run: tuple[int, int], part: FileFacts, out: FileFacts) -> bytes:
    """The chunk term counts: the module's and the kept defs' as they were (their texts hold no line
    numbers), the edited statements' counted again."""
    records = unpack_records(old.chunk_terms)
    i, j = run
    before = sum(1 for d in old.defs[:i] if _chunked(d))
    inside = sum(1 for d in old.defs[i:j] if _chunked(d))
    fresh = [[node_id, dict(term_counts(text))] for node_id, text in chunk_texts(part)[1:]]
    return pack_records([*records[: 1 + before], *fresh, *records[1 + before + inside :]])
