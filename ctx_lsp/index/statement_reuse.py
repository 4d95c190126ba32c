"""A checkout's changed file extracted from the top-level statements it kept.

A branch switch or a pull rewrites a few hundred files, mostly the project's large, busy modules, and
changes a few functions in each: on a Django pair four months apart 44% of the changed files' lines
were top-level statements whose text the old version held too. The old text is gone by then, but
the old facts record each top-level statement's lines and a digest of its text (`FileFacts.tops`).
`reuse_statements` finds those texts in the new file, keeps their facts (lines shifted) and extracts
only the rest, or returns None and the caller extracts the whole file; either way the result equals
`extract(path, new_text)` field for field (tests/test_statement_reuse.py checks it on real files).

Why a found text is the same statement: every stretch between found statements is parsed on its own
and must parse whole, so no bracket, string, decorator or block runs across a boundary, and each found
text parsed whole in the old file. Where a statement's facts depend on others it declines, as
splice.py does: a name two top-level statements define (in the new text or the old one), a file at the
literal cap, old facts with errors. Module-level words and the module docstring (whole-file values)
are put together again from every statement's (`FileFacts.tops` holds each one's words).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from ctx_lsp.index.chunk_terms import chunk_texts, module_chunk_text
from ctx_lsp.index.extract import MAX_LITERALS, MAX_WORDS, _file_terms, file_words, lines_digest
from ctx_lsp.index.facts import Def, FileFacts, Import, Site, pack_records, split_lines, unpack_records
from ctx_lsp.index.flowfacts import ReplayMismatch
from ctx_lsp.index.modules import dep_key, top_classes
from ctx_lsp.index.splice import FACT_FIELDS, Span, _chunked, _extract_part
from ctx_lsp.retrieval.text import term_counts  # the one tokenizer of lexical search; imports nothing of ours


def _code_starts(b: list[str]) -> list[int]:
    """1-based lines that may start a top-level statement: code at column 0 that does not continue the
    line before (a backslash)."""
    out = []
    for i, line in enumerate(b):
        if line and line[0] not in " \t#)]}" and not (i and b[i - 1].endswith("\\")):
            out.append(i + 1)
    return out


def _last_code(b: list[str], first: int, before: int) -> int:
    """The last line in [first, before) that is neither blank nor a comment; first - 1 when none.
    Blank as Python's tokenizer reads it: spaces, tabs and form feeds only (a no-break space, U+2028
    or \\v on a line is a syntax error there, which a parse of the stretch must report)."""
    e = before - 1
    while e >= first:
        s = b[e - 1].lstrip(" \t\f")
        if s and not s.startswith("#"):
            break
        e -= 1
    return e


def _find_kept(spans: list[Span], b: list[str]) -> list[tuple[int, int, int]]:
    """(new first, new last, old statement index) of old statements whose text the new lines hold at a
    statement start, in order, not overlapping. A statement ends on a code line whose next code line
    starts a statement (or the file ends): only such ranges of an old statement's length are hashed."""
    by_text: dict[tuple[int, str], int] = {}
    for k, sp in enumerate(spans):
        by_text.setdefault((sp[1] - sp[0] + 1, sp[4]), k)
    lengths = sorted({n for n, _ in by_text})
    starts = _code_starts(b)
    n = len(b)
    # ends[e]: line e (1-based) may end a statement: code, and the next code line starts one or none is left
    ends = [False] * (n + 2)
    is_start = set(starts)
    following_ok = True  # whether the next code line below is a statement start (or none)
    for e in range(n, 0, -1):
        s = b[e - 1].lstrip()
        if s and not s.startswith("#"):
            ends[e] = following_ok
            following_ok = e in is_start
    found: list[tuple[int, int, int]] = []
    free = 1  # the first line a next statement may start at
    for c in starts:
        if c < free:
            continue
        for length in lengths:
            e = c + length - 1
            if e > n:
                break
            if ends[e]:
                hit = by_text.get((length, lines_digest(b, c, e)))
                if hit is not None:
                    found.append((c, e, hit))
                    free = e + 1
                    break
    return found


def _per_statement(items: Sequence[Any], line: Callable[[Any], int], spans: list[Span]) -> list[int] | None:
    """Boundaries: statement k's items are items[bounds[k]:bounds[k + 1]]; None unless every item lies
    inside its statement's lines, statements in order."""
    bounds = [0] * (len(spans) + 1)
    k = 0
    m = len(spans)
    for idx, it in enumerate(items):
        ln = line(it)
        while k < m and ln > spans[k][1]:
            k += 1
            bounds[k] = idx
        if k == m or ln < spans[k][0]:
            return None
    for j in range(k + 1, m + 1):
        bounds[j] = len(items)
    return bounds


class _Entry(NamedTuple):
    k: int  # the old top-level statement (a class) the member was in
    qual: str
    digest: str
    contribs: tuple[tuple[str, Any], ...]  # attributes it set on its class, in order
    b0: int  # its body's first line, from its own first line (-1: the body shares the header's line)
    l0: int  # its body's first statement's own line, from its first line
    stored: tuple[str, ...]  # the instance attributes it stores from a name (flowfacts)


class _Replay:
    """The old facts of class members, for a walk of the new text to copy where a member's text is
    unchanged (extract.MemberReplay): inside a class a checkout changed, most methods did not change."""

    def __init__(self, old: FileFacts, spans: list[Span], bounds: dict[str, list[int]]) -> None:
        self.old, self.spans, self.bounds = old, spans, bounds
        self.entries = {(m[0], m[1]): _Entry(k, *m) for k, sp in enumerate(spans) for m in sp[5]}
        self._defs: dict[str, Def] | None = None
        self._items: dict[int, dict[str, dict[int, list[Any]]]] = {}  # statement -> field -> member start -> facts
        self._by_text: dict[tuple[int, str], list[tuple[int, int, str]]] | None = None
        self._params: dict[str, int] | None = None  # def qual -> index of its `params` flow

    def def_of(self, qual: str) -> Def | None:
        if self._defs is None:
            self._defs = {d.qual: d for d in self.old.defs}
        return self._defs.get(qual)

    def get(self, qual: str, digest: str) -> _Entry | None:
        entry = self.entries.get((qual, digest))
        return entry if entry is not None and self.def_of(qual) is not None else None

    def blanks(self, lines: list[str], first: int, last: int) -> dict[int, tuple[int, int, int, str, str]]:
        """Unchanged members to blank before parsing lines [first, last] (MemberReplay.blanks): a text
        of an old member's length and digest, starting at an indented `def` or decorator under a
        top-level `class` line of the member's class name, and ending where the next code line is
        indented no deeper than its start."""
        if self._by_text is None:
            self._by_text = {}
            for entry in self.entries.values():
                od = self.def_of(entry.qual)
                if od is not None and entry.b0 > 0:
                    key = (od.end - od.start + 1, entry.digest)
                    self._by_text.setdefault(key, []).append((entry.b0, entry.l0, entry.qual.partition(".")[0]))
        if not self._by_text:
            return {}
        lengths = sorted({n for n, _ in self._by_text})
        indents = [-1] * (last + 2)  # per line: its indentation, -1 for blank and comment lines
        for i in range(first, last + 1):
            text = lines[i - 1]
            stripped = text.lstrip()
            if stripped and stripped[0] != "#":
                indents[i] = len(text) - len(stripped)
        next_indent = [-1] * (last + 2)  # the indentation of the next code line below (-1: none)
        for i in range(last, first - 1, -1):
            next_indent[i] = indents[i + 1] if indents[i + 1] >= 0 else next_indent[i + 1]
        out: dict[int, tuple[int, int, int, str, str]] = {}
        cls = ""  # the class a column-0 `class` line above opened ("" under any other column-0 line)
        i = first
        while i <= last:
            ind = indents[i]
            stripped = lines[i - 1].lstrip()
            if ind == 0:
                cls = stripped[6:].split("(")[0].split(":")[0].strip() if stripped.startswith("class ") else ""
            elif ind > 0 and cls and stripped.startswith(("def ", "async def ", "@")):
                for n in lengths:
                    e = i + n - 1
                    if e > last:
                        break
                    if indents[e] < 0 or next_indent[e] > ind:
                        continue
                    digest = lines_digest(lines, i, e)
                    hits = self._by_text.get((n, digest))
                    hit = next((h for h in hits if h[2] == cls), None) if hits else None
                    if hit is not None and indents[i + hit[1]] > ind:
                        out[i] = (e, i + hit[0], i + hit[1], cls, digest)
                        i = e
                        break
            i += 1
        return out

    def flows(self, qual: str, digest: str, start: int) -> tuple[str, list[Any], tuple[str, ...]]:
        """(MemberReplay.flows) the old flows after the member's `params` flow that its walk gave: one
        run, every scope the member's or nested in it (pending flows stay in walk order)."""
        entry = self.entries[(qual, digest)]
        od = self.def_of(qual)
        assert od is not None
        flows = self.old.flows
        if self._params is None:
            self._params = {}
            for idx, fl in enumerate(flows):
                if fl[1] == "params":
                    self._params.setdefault(fl[0], idx)
        at = self._params.get(qual)
        if at is None:
            raise ReplayMismatch(f"no flows of {qual} to copy")
        i = at + 1
        j = i
        inner = qual + "."
        while j < len(flows) and (flows[j][0] == qual or flows[j][0].startswith(inner)):
            j += 1
        delta = start - od.start
        shift = FACT_FIELDS["flows"][1]
        run = list(flows[i:j]) if delta == 0 else [shift(x, delta) for x in flows[i:j]]
        return qual, run, entry.stored

    def class_stored(self, quals: set[str]) -> dict[str, tuple[str, ...] | None]:
        out: dict[str, tuple[str, ...] | None] = {}
        for (qual, _), e in self.entries.items():
            if qual in quals:
                cls = qual.partition(".")[0]
                out[cls] = dict(self.spans[e.k][6]).get(cls)
        return out

    def _member_items(self, k: int) -> dict[str, dict[int, list[Any]]]:
        """Statement k's facts, per member (by its first line)."""
        got = self._items.get(k)
        if got is None:
            ranges = sorted((d.start, d.end) for m in self.spans[k][5] if (d := self.def_of(m[0])) is not None)
            starts = [r[0] for r in ranges]
            got = {}
            for name, (line, _) in FACT_FIELDS.items():
                per: dict[int, list[Any]] = {}
                lo, hi = self.bounds[name][k], self.bounds[name][k + 1]
                for x in getattr(self.old, name)[lo:hi]:
                    i = bisect_right(starts, line(x)) - 1
                    if i >= 0 and line(x) <= ranges[i][1]:
                        per.setdefault(starts[i], []).append(x)
                got[name] = per
            self._items[k] = got
        return got

    def body(self, entry: _Entry, header_last: int, start: int) -> tuple[Def, list[Site], list[tuple[str, int, str]],
                                                                        list[Import], list[Def]]:
        od = self.def_of(entry.qual)
        assert od is not None
        delta = start - od.start
        after = header_last - delta  # the old header's last line: what follows is the body
        items = self._member_items(entry.k)
        out: dict[str, list[Any]] = {}
        for name in ("sites", "literals", "imports", "defs"):
            line, shift = FACT_FIELDS[name]
            kept = [x for x in items[name].get(od.start, ()) if line(x) > after]
            out[name] = kept if delta == 0 else [shift(x, delta) for x in kept]
        return od, out["sites"], out["literals"], out["imports"], out["defs"]


def reuse_statements(old: FileFacts, text: str, digest: str) -> FileFacts | None:
    """The facts of `text` (a new version of old's file) from old's facts of the top-level statements
    it still holds and an extraction of the rest; None when that cannot be exact or saves nothing."""
    spans = old.tops
    if not spans or old.errors or old.digest == digest or "\r" in text or len(old.literals) >= MAX_LITERALS:
        return None
    b = split_lines(text)
    found = _find_kept(spans, b)
    if not found and not any(sp[5] for sp in spans):
        return None
    # a name two old statements define: each one's facts were those of a first or a later definition
    # (`f` or `f#2`, a variable's def or none), which a kept one's copy would keep whatever the other became
    defined = Counter(n for sp in spans for n in sp[2])
    if any(defined[n] > 1 for _, _, k in found for n in spans[k][2]):
        return None
    if any(spans[k][0] <= spans[k - 1][1] for k in range(1, len(spans))):
        return None  # statements sharing a line (`a = 1; b = 2`): one text, which finds only the first
    bounds = {}
    for name, (line, _) in FACT_FIELDS.items():
        got = _per_statement(getattr(old, name), line, spans)
        if got is None:
            return None
        bounds[name] = got

    # the pieces of the new file in order: kept statements and the stretches between them
    pieces: list[tuple[str, int, int, int]] = []  # ("kept", first, last, k) | ("new", first, last, -1)
    at = 1
    for first, last, k in found:
        if first > at:
            pieces.append(("new", at, first - 1, -1))
        pieces.append(("kept", first, last, k))
        at = last + 1
    if at <= len(b):
        pieces.append(("new", at, len(b), -1))

    out = FileFacts(path=old.path, digest=digest, lines=len(b), is_test_file=old.is_test_file)
    tops: list[Span] = []
    chunks: list[Any] = []
    old_chunks = unpack_records(old.chunk_terms)
    chunk_at = [1]  # chunk record index of each old def (records[0] is the module's)
    for d in old.defs:
        chunk_at.append(chunk_at[-1] + _chunked(d))
    all_names: list[str] | None = None
    doc: str | None = None
    replay: _Replay | None = None
    old_by_id: dict[str, Any] | None = None
    copied: list[tuple[int, int, int]] = []  # (first, last, line shift) of new text whose facts are old ones moved
    for kind, first, last, k in pieces:
        if kind == "kept":
            sp = spans[k]
            delta = first - sp[0]
            copied.append((first, last, delta))
            if not tops:
                if k != 0:
                    return None  # another statement is first now: the module docstring may differ
                doc = old.doc
            for name, (_, shift) in FACT_FIELDS.items():
                lo, hi = bounds[name][k], bounds[name][k + 1]
                items = getattr(old, name)[lo:hi]
                getattr(out, name).extend(items if delta == 0 else [shift(x, delta) for x in items])
            d_lo, d_hi = bounds["defs"][k], bounds["defs"][k + 1]
            chunks.extend(old_chunks[chunk_at[d_lo] : chunk_at[d_hi]])
            tops.append((first, last, *sp[2:]))
            if "__all__" in sp[2]:
                if next(j for j, s in enumerate(spans) if "__all__" in s[2]) != k:
                    return None  # old __all__ came from an earlier statement
                all_names = old.all_names
            continue
        if _last_code(b, first, last + 1) < first:
            continue  # blank lines and comments only
        if replay is None:
            replay = _Replay(old, spans, bounds)
        part = _extract_part(old.path, old.is_test_file, b, first, last - first + 1, replay)
        if part is None:
            return None
        pf = part.facts
        if sum(len(t[3]) for t in part.tops) >= MAX_WORDS:
            return None  # its module-level words may have been cut
        if part.replayed:
            assert replay is not None
            for d in pf.defs:
                od = replay.def_of(d.qual) if d.qual in part.replayed and d.qual not in part.unmoved else None
                if od is not None:
                    copied.append((d.start, d.end, d.start - od.start))
        if not tops and part.tops:
            doc = pf.doc
        for name in FACT_FIELDS:
            getattr(out, name).extend(getattr(pf, name))
        for node_id, chunk_text in chunk_texts(pf)[1:]:
            # a replayed def's chunk text (qual, signature, doc, words, path) is the old one
            if part.replayed and node_id.partition("::")[2] in part.replayed:
                if old_by_id is None:
                    old_by_id = {r[0]: r for r in old_chunks[1:]}
                rec = old_by_id.get(node_id)
                if rec is not None:
                    chunks.append(rec)
                    continue
            chunks.append([node_id, dict(term_counts(chunk_text))])
        if any("__all__" in s[2] for s in part.tops):
            all_names = pf.all_names
        tops.extend(part.tops)
    # a name two statements define: the first definition wins, so their facts depend on each other
    seen: set[str] = set()
    for t in tops:
        for n in t[2]:
            if n in seen:
                return None
            seen.add(n)
    new_doc = doc or ""
    module_chunk = old_chunks[0]
    if [t[3] for t in tops if t[3]] == [s[3] for s in spans if s[3]] and new_doc == old.doc:
        out.words = old.words  # the module's words and docstring as they were
    else:
        # the module-level words of every statement in order, cut at MAX_WORDS as the walk cuts them;
        # the old statements' are whole only when the old file stayed below the cut
        if sum(len(sp[3]) for sp in spans) >= MAX_WORDS:
            return None
        module_words: list[str] = []
        for i, t in enumerate(tops):
            room = max(MAX_WORDS - len(module_words), 0)
            if len(t[3]) > room:
                tops[i] = (t[0], t[1], t[2], t[3][:room], *t[4:])
            module_words.extend(tops[i][3])
        out.words = file_words(old.path, " ".join(module_words + ([new_doc] if new_doc else [])))
        module_chunk = [old.path, dict(term_counts(module_chunk_text(old.path, new_doc, out.words)))]
    out.literals = out.literals[:MAX_LITERALS]
    out.all_names = all_names
    out.doc = new_doc
    out.tops = tops
    out.terms = _file_terms(text)
    out.chunk_terms = pack_records([module_chunk, *chunks])
    out.moved = (old.digest, _moved_groups(out, old, copied))
    return out


def _moved_groups(new: FileFacts, old: FileFacts, copied: list[tuple[int, int, int]]) -> dict[str, int]:
    """Site group key -> line shift, for each group (bind.Group: a top-level function, or a member of a
    top-level class, with all nested in it) whose root def lies inside text copied from `old`: all the
    group's sites, defs, imports and flows are inside that def, so they are the old ones moved."""
    classes = top_classes(new)
    if classes != top_classes(old):
        return {}
    copied = sorted(copied)  # disjoint ranges, by first line
    firsts = [c[0] for c in copied]
    old_start = {d.qual: d.start for d in old.defs}
    out: dict[str, int] = {}
    seen: set[str] = set()
    for d in new.defs:
        key = dep_key(classes, d.qual)
        if key != d.qual or key in classes:
            continue  # not a group's root (or a class body, which is never kept)
        if key in seen:
            out.pop(key, None)  # defined twice: compared item by item
            continue
        seen.add(key)
        i = bisect_right(firsts, d.start) - 1
        if i >= 0:
            first, last, delta = copied[i]
            if d.end <= last and old_start.get(key) == d.start - delta:
                out[key] = delta
    return out

