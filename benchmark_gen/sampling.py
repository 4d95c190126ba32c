"""Deterministic target sampling and the rule that skips trivial targets.

Trivial-target rule (documented in the README):
- dunder names (`__init__`, `__eq__`, ...) are never targets: their callers are the language itself;
- a target must span at least 2 lines;
- code in test files (and test functions) is a target only for `callees` and the lanes that ask about
  production code from a test's point of view (none today);
- a relation's answer must have between 1 and MAX_GOLD related nodes (an answer of 40 callers is a
  grep, not a retrieval question).

Sampling: candidates are ordered by a hash of (seed, the target file's content digest, the target's
id), then taken round-robin over size buckets (small < 8 lines, medium < 30, large) and, inside a
bucket, round-robin over files, so the sample spreads over files and sizes and changes only when the
files involved change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from benchmark_gen.common import stable_hash
from ctx_lsp.index.model import Node
from ctx_lsp.index.workspace import WorkspaceIndex

MAX_GOLD = 15
MIN_LINES = 2
T = TypeVar("T")


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def is_test_code(index: WorkspaceIndex, n: Node) -> bool:
    f = index.facts.get(n.path)
    return n.kind == "test" or (f is not None and f.is_test_file)


def trivial(index: WorkspaceIndex, n: Node, allow_tests: bool = False) -> bool:
    if n.qualname is None or is_dunder(n.name) or "#" in n.qualname:
        return True  # (`name#2`, a def defined again: no name a question could use for it alone)
    if n.end_line - n.start_line + 1 < MIN_LINES and n.kind != "variable":
        return True
    return not allow_tests and is_test_code(index, n)


def size_bucket(n: Node) -> int:
    lines = n.end_line - n.start_line + 1
    return 0 if lines < 8 else (1 if lines < 30 else 2)


def spread(items: Sequence[T], seed: int, digest: Callable[[T], str], key: Callable[[T], str],
           path: Callable[[T], str], bucket: Callable[[T], int], limit: int) -> list[T]:
    """Up to `limit` items, round-robin over size buckets and, inside each, over files."""
    buckets: dict[int, dict[str, list[T]]] = {}
    for it in items:
        buckets.setdefault(bucket(it), {}).setdefault(path(it), []).append(it)
    lanes: list[list[T]] = []
    for b in sorted(buckets):
        files = buckets[b]
        order = sorted(files, key=lambda p: (stable_hash(seed, "file", digest(files[p][0]), p), p))
        per_file = [sorted(files[p], key=lambda it: (stable_hash(seed, digest(it), key(it)), key(it))) for p in order]
        lanes.append(_interleave(per_file))
    return _interleave(lanes)[:limit]


def _interleave(lists: list[list[T]]) -> list[T]:
    """Round-robin: the first of each list, then the second of each, ..."""
    out: list[T] = []
    for i in range(max((len(x) for x in lists), default=0)):
        out.extend(x[i] for x in lists if i < len(x))
    return out
