"""Line ranges carried through -U0 diffs: where lines a commit touched are in today's file
(`map_ranges`), and the ranges a set of hunks replaced and added (`hunk_ranges`)."""

from __future__ import annotations

from collections.abc import Iterable

from ctx_lsp.sources.git import Hunk

Ranges = list[tuple[int, int]]  # inclusive 1-based line ranges


def map_ranges(ranges: Iterable[tuple[int, int]], hunks: list[Hunk], keep_replaced: bool = False) -> Ranges:
    """Carry line ranges of a diff's old side to its new side.

    `hunks` are -U0 hunk headers sorted by position. A hunk with old_count 0 inserts after line
    old_start, so lines from old_start + 1 on shift. Lines a hunk removes drop out, unless
    `keep_replaced`: then lines the hunk replaces map to the same offsets in its new lines
    (clipped to them), so an older change to a region a newer commit rewrote still points at that
    region; lines removed without replacement drop out either way.
    """
    out: Ranges = []
    for a, b in ranges:
        cur, shift = a, 0
        for os_, oc, ns, nc in hunks:
            p = os_ if oc else os_ + 1  # first old line the hunk replaces or shifts
            if p > b:
                break
            hi = min(b, p - 1)
            if cur <= hi:
                out.append((cur + shift, hi + shift))
            if keep_replaced and oc and nc:
                lo_r, hi_r = max(cur, p), min(b, p + oc - 1)
                if lo_r <= hi_r:
                    last = ns + nc - 1
                    out.append((min(ns + lo_r - p, last), min(ns + hi_r - p, last)))
            cur = max(cur, p + oc)
            shift += nc - oc
        if cur <= b:
            out.append((cur + shift, b + shift))
    return _merge(out) if keep_replaced else out


def _merge(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def hunk_ranges(hunks: list[Hunk]) -> tuple[Ranges, Ranges]:
    """(added line ranges, deletion points) on a diff's new side; a deletion point is the pair of
    lines around the removed lines, stored as a 2-line range."""
    added: Ranges = []
    dels: Ranges = []
    for _os, _oc, ns, nc in hunks:
        if nc:
            added.append((ns, ns + nc - 1))
        else:
            dels.append((ns, ns + 1))
    return added, dels
