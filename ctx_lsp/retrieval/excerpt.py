"""Excerpts: the lines of a long symbol or file that bear on a task, for an item too long to show whole.

Handed a 500-line method's signature, an agent must open the file; handed the whole method, half its
budget is gone. An excerpt shows the head (the `def`/`class` line or lines), then a few lines around
each line that shares the task's rarer terms, best lines first until its token cap, in file order,
with every gap marked by the lines it leaves out. Only task text (a pasted issue) gets excerpts: a
short question keeps the packer's full / signature / reference choice.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ctx_lsp.retrieval.text import identifiers, terms
from ctx_lsp.retrieval.tokens import count_tokens

CONTEXT = 2  # lines shown on each side of a line that matches the task
HEAD_LINES = 8  # a def/class header split over more lines than this is cut
MAX_WINDOWS = 40  # best-matching lines tried per excerpt
GAP_TOKENS = 10  # a gap marker's tokens, for the estimate
PROSE_WEIGHT = 0.3  # a docstring or comment line's share of its score
COMMON_SHARE = 0.1  # terms in more of the workspace's chunks than this (self, return, value) say little about a line


@dataclass(frozen=True)
class LineFocus:
    """What makes a line relevant: the task's terms, each weighted by its rarity in the workspace."""

    weights: dict[str, float]
    _seen: dict[str, float] = field(default_factory=dict, compare=False, repr=False)  # line -> score, per query
    _hits: dict[str, frozenset[str]] = field(default_factory=dict, compare=False, repr=False)  # identifier -> its weighted terms

    @classmethod
    def of(cls, query: str, idf: Callable[[str], float], df: Callable[[str], int], chunks: int) -> LineFocus:
        """`idf`: a term's weight; `df`: how many of the workspace's `chunks` hold it."""
        most = max(2.0, COMMON_SHARE * chunks)
        return cls({t: idf(t) for t in set(terms(query)) if 0 < df(t) <= most})

    def score(self, line: str) -> float:
        """The summed weight of the task's terms in the line, each counted once."""
        if not self.weights:
            return 0.0
        got = self._seen.get(line)
        if got is None:
            found: set[str] = set()
            for ident in set(identifiers(line)):
                hit = self._hits.get(ident)
                if hit is None:
                    hit = self._hits[ident] = frozenset(t for t in terms(ident) if t in self.weights)
                found |= hit
            # summed in value order: a set's order changes with the process's string hashing
            got = self._seen[line] = sum(sorted(self.weights[t] for t in found))
        return got


def _head_end(lines: list[str], start: int, end: int) -> int:
    """The last line of the header that starts at `start` (1-based): up to the line ending with ':'."""
    for i in range(start, min(end, start + HEAD_LINES - 1) + 1):
        if lines[i - 1].split("#", 1)[0].rstrip().endswith(":"):
            return i
    return start


@dataclass(frozen=True)
class Excerpt:
    text: str
    shown: list[tuple[int, int]]  # the stretches of lines it shows, 1-based inclusive, in order


def excerpt(lines: list[str], start: int, end: int, focus: LineFocus, max_tokens: int,
            head: bool = True, taken: frozenset[int] = frozenset()) -> Excerpt | None:
    """Lines start..end (1-based, inclusive) cut down to at most `max_tokens`: the header (`head`),
    then windows around the best-matching lines, leaving out `taken` (lines other items show).
    None when no line matches or nothing fits beside the header."""
    end = min(end, len(lines))
    if end < start:
        return None
    body_from = _head_end(lines, start, end) + 1 if head else start
    prose = prose_lines(lines, start, end)
    if not head:  # a file's excerpt: the `@overload` stubs of a function an item shows repeat it
        taken = taken | overload_stubs(lines, start, end, taken)
    scored = sorted(((s * (PROSE_WEIGHT if i in prose else 1.0), i) for i in range(body_from, end + 1)
                     if i not in taken and (s := focus.score(lines[i - 1])) > 0),
                    key=lambda si: (-si[0], si[1]))
    if not scored:
        return None
    shown: set[int] = set(range(start, body_from))
    cost: dict[int, int] = {}

    def estimate(rows: set[int]) -> int:  # count_tokens of render(rows), give or take the markers
        gaps = sum(1 for i in rows if i - 1 >= start and i - 1 not in rows) + (end not in rows)
        for i in rows:
            if i not in cost:
                cost[i] = count_tokens(lines[i - 1])
        return sum(cost[i] for i in rows) + GAP_TOKENS * gaps

    for _, i in scored[:MAX_WINDOWS]:
        window = set(range(max(body_from, i - CONTEXT), min(end, i + CONTEXT) + 1)) - taken
        if window <= shown:
            continue
        if estimate(shown | window) > max_tokens:
            break
        shown |= window
    if len(shown) == body_from - start:
        return None
    text = render(lines, start, end, shown)
    while count_tokens(text) > max_tokens and len(shown) > body_from - start:
        shown.discard(max(shown))  # the estimate ran short: trim from the end
        text = render(lines, start, end, shown)
    if count_tokens(text) > max_tokens or len(shown) <= body_from - start:
        return None
    return Excerpt(text, stretches(shown))


def stretches(rows: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted line numbers as runs: [1, 2, 3, 7] -> [(1, 3), (7, 7)]."""
    out: list[tuple[int, int]] = []
    for i in sorted(rows):
        if out and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def prose_lines(lines: list[str], start: int, end: int) -> set[int]:
    """Lines start..end that are comments or inside a triple-quoted string (docstrings): an issue's
    prose matches them best, while the fix is usually in the code around them. A line-level scan,
    not a tokenizer: a span cut mid-string is read as well as it can be."""
    out: set[int] = set()
    quote: str | None = None  # the open triple quote
    for i in range(start, end + 1):
        line = lines[i - 1]
        if quote is None and line.lstrip().startswith("#"):
            out.add(i)
            continue
        inside = quote is not None
        pos = 0
        while True:
            if quote is None:
                found = [(j, q) for q in ('"""', "'''") if (j := line.find(q, pos)) >= 0]
                if not found:
                    break
                pos, quote = min(found)
                pos += 3
                inside = True
            else:
                j = line.find(quote, pos)
                if j < 0:
                    break
                pos, quote = j + 3, None
        if inside:
            out.add(i)
    return out


_OVERLOAD = re.compile(r"([ \t]*)@(?:\w+\.)*overload[ \t]*(?:#.*)?$")
_DECORATOR = re.compile(r"[ \t]*@")
_DEF = re.compile(r"([ \t]*)(?:async[ \t]+)?def[ \t]+(\w+)")


def overload_stubs(lines: list[str], start: int, end: int, taken: frozenset[int]) -> set[int]:
    """Lines start..end of `@overload` stubs (decorators to the `...` body) of a function whose
    implementation's `def` line is in `taken`: shown already, the declarations repeat it."""
    shown = {(m[1], m[2]) for i in taken if start <= i <= end and (m := _DEF.match(lines[i - 1]))}
    out: set[int] = set()
    if not shown:
        return out
    i = start
    while i <= end:
        m = _OVERLOAD.match(lines[i - 1])
        if m is None:
            i += 1
            continue
        j = i + 1
        while j <= end and _DECORATOR.match(lines[j - 1]):
            j += 1
        d = _DEF.match(lines[j - 1]) if j <= end else None
        stop = next((k for k in range(j, min(end, j + HEAD_LINES) + 1)
                     if lines[k - 1].split("#", 1)[0].rstrip().endswith("...")), None)
        if d is not None and d[1] == m[1] and (d[1], d[2]) in shown and stop is not None:
            out.update(range(i, stop + 1))
            i = stop + 1
        else:
            i = j
    return out


def render(lines: list[str], start: int, end: int, shown: Iterable[int]) -> str:
    """The shown lines in order, each gap replaced by one marker naming the lines it leaves out."""
    out: list[str] = []
    expect = start
    for i in sorted(shown):
        if i > expect:
            out.append(_gap(lines, expect, i - 1))
        out.append(lines[i - 1])
        expect = i + 1
    if expect <= end:
        out.append(_gap(lines, expect, end))
    return "\n".join(out)


def _gap(lines: list[str], a: int, b: int) -> str:
    """`# ... lines a-b not shown`, indented like the first line it stands for."""
    near = next((ln for ln in lines[a - 1 : b] if ln.strip()), "")
    indent = near[: len(near) - len(near.lstrip())]
    what = f"line {a}" if a == b else f"lines {a}-{b}"
    return f"{indent}# ... {what} not shown"
