"""What a pack hands over, measured against the lines a gold patch edits.

Ranking scores say whether the right files and functions come first; an agent reads the pack. So
this measures the pack itself: of the lines the gold patch removes or changes in non-test files (a
pure addition counts for the line above it, as in swebench_gold), how many does the pack show
verbatim (items with detail `full`, and the `shown` lines of `excerpt` items), inside the same token
budget? The baseline packs BM25's def/class chunks (swebench_baselines) in their rank order into the
same budget, the way a retrieve-then-read pipeline without a graph would.

Per instance: `gold_lines`, and per row (`engine`, `bm25_chunks`) `shown` (gold lines shown
verbatim) and `tokens` (what the row's pack spent). Aggregates: line recall (mean of shown /
gold_lines), `complete` (every gold line shown: the edit needs no further read) and `any` (at
least one shown).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ctx_lsp.retrieval.pack import header_tokens, shown_lines
from ctx_lsp.retrieval.tokens import count_tokens

ROWS = ("engine", "bm25_chunks")


def gold_lines(patched: Iterable[tuple[str, list[int]]]) -> dict[str, set[int]]:
    """path -> the old-side lines to show (line 0, an insertion at the top, shows as line 1)."""
    out: dict[str, set[int]] = {}
    for path, lines in patched:
        if lines:
            out.setdefault(path, set()).update(max(1, ln) for ln in lines)
    return out


def engine_shown(items: Sequence[dict[str, Any]]) -> dict[str, set[int]]:
    """path -> lines the engine's pack shows verbatim."""
    out: dict[str, set[int]] = {}
    for it in items:
        if it.get("path") and it.get("kind") != "commit":
            out.setdefault(it["path"], set()).update(shown_lines(
                str(it.get("detail")), int(it["start_line"]), int(it["end_line"]), it.get("symbol") is None,
                it.get("shown")))
    return out


def bm25_shown(ranked: Sequence[tuple[str, str]], chunk_lines: Callable[[str], dict[str, list[int]]],
               source: Callable[[str], list[str]], budget: int) -> tuple[dict[str, set[int]], int]:
    """(path -> lines shown, tokens spent) by the BM25 chunks packed greedily in rank order: a
    chunk that no longer fits is skipped and the next one tried, as the engine's packer does."""
    out: dict[str, set[int]] = {}
    used = 0
    for path, qual in ranked:
        lines = chunk_lines(path).get(qual)
        if not lines:
            continue
        src = source(path)
        # beside its text, a chunk pays the same heading the engine's items pay
        cost = count_tokens("\n".join(src[i - 1] for i in lines if i <= len(src))) + header_tokens(
            path, lines[0], lines[-1], qual)
        if used + cost > budget:
            continue
        used += cost
        out.setdefault(path, set()).update(lines)
        if budget - used < 20:
            break
    return out, used


def shown_count(gold: dict[str, set[int]], shown: dict[str, set[int]]) -> int:
    return sum(len(lines & shown.get(path, set())) for path, lines in gold.items())


def aggregate(results: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per row: `n` (instances with gold lines), `line_recall`, `complete`, `any`, `tokens_median`."""
    with_lines = [r["delivery"] for r in results if r.get("delivery", {}).get("gold_lines")]
    out: dict[str, dict[str, float]] = {}
    for row in ROWS:
        recs = [(d["gold_lines"], d[row]) for d in with_lines if row in d]
        if not recs:
            continue
        n = len(recs)
        toks = sorted(x["tokens"] for _, x in recs)
        out[row] = {
            "n": n,
            "line_recall": sum(x["shown"] / g for g, x in recs) / n,
            "complete": sum(1 for g, x in recs if x["shown"] >= g) / n,
            "any": sum(1 for _, x in recs if x["shown"] > 0) / n,
            "tokens_median": float(toks[n // 2] if n % 2 else (toks[n // 2 - 1] + toks[n // 2]) / 2),
        }
    return out
