"""Offline token counting: a deterministic estimate that errs high, so a budget is never exceeded.

tiktoken downloads its tables at run time, which this tool must not depend on. Code tokenizes at
roughly one token per identifier piece of up to four characters plus one per punctuation mark; the
estimate counts exactly that, which is at or above cl100k's count on typical Python.
"""

from __future__ import annotations

import re

_PIECE = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")


def count_tokens(text: str) -> int:
    n = 0
    for m in _PIECE.finditer(text):
        piece = m.group()
        n += (len(piece) + 3) // 4 if piece[0].isalnum() else 1
    # newlines and indentation runs cost tokens too
    return n + text.count("\n") // 2 + 1
