"""Pack: ranked candidates -> items inside a hard token budget.

Symbol-level spans rather than whole files; a span inside an already delivered span is merged into it;
detail falls off with rank and distance (full text, then signature, then a one-line reference); an
adaptive cut stops where scores drop. The sum of item tokens never exceeds the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctx_lsp.index.graph import CodeGraph
from ctx_lsp.index.model import Node
from ctx_lsp.retrieval.excerpt import Excerpt, LineFocus, excerpt
from ctx_lsp.retrieval.score import Candidate, Reason
from ctx_lsp.retrieval.tokens import count_tokens

CUT_RATIO = 0.08  # drop candidates scoring under this share of the best
MAX_ITEMS = 40
FULL_RANKS = 8  # ranks that may get full text
MAX_FULL_SHARE = 0.45  # one item's full text may take at most this share of the budget
FULL_SHARE = 0.8  # full texts stop here, leaving room for lower-ranked signatures and references
OUTLINE_MEMBERS = 20
MODULE_HEAD = 40  # a module's full text is its first lines (imports, docstring, constants)
HEAD = "head"  # an item's detail in JSON when its text is a module's first lines (with `shown`)
LEADING_FILES = 3  # task text: the files whose matching lines the pack shows even when no item reached them
RESERVE_SHARE = 0.25  # task text: the share of the budget the first pass leaves for the leading files' lines
EXCERPT_SHARE = 0.15  # an excerpt of a long symbol or file takes at most this share of the budget
TASK_FILES = 10  # task text: past the first FULL_RANKS candidates, only those of this many leading files are placed
LEADING_SYMBOLS = 10  # task text: the symbol ranking's first functions, shown when no item shows them
_SHOWN_KINDS = ("function", "method", "test")

SourceLines = Callable[[str], list[str]]


@dataclass
class Item:
    node: Node
    cand: Candidate
    detail: str
    text: str
    tokens: int
    merged: list[Candidate] = field(default_factory=list)
    shown: list[tuple[int, int]] | None = None  # an excerpt's stretches of lines

    def to_json(self) -> dict[str, Any]:
        reasons = [r.to_json() for r in self.cand.reasons]
        for m in self.merged:
            reasons.extend({**r.to_json(), "merged": m.node_id} for r in m.reasons[:2])
        n = self.node
        detail, shown = self.detail, self.shown
        if detail == "full" and n.qualname is None and n.kind != "commit":
            head = _full_end(n.start_line, n.end_line, True)
            if head < n.end_line:  # a module's text is its first lines: say so, not "full"
                detail, shown = HEAD, [(n.start_line, head)]
        return {
            "path": n.path, "start_line": n.start_line, "end_line": n.end_line, "symbol": n.qualname,
            "kind": n.kind, "detail": detail, "score": round(self.cand.score, 4), "tokens": self.tokens,
            "reasons": reasons[:8], "text": self.text,
        } | ({"shown": [list(r) for r in shown]} if shown is not None else {})


def header_tokens(path: str, start: int, end: int, qualname: str | None) -> int:
    """What an item costs beside its text: its heading and reasons, as renderers print them."""
    return count_tokens(f"### {path}:{start}-{end} {qualname or ''} reasons") + 6


def _header_tokens(node: Node) -> int:
    return header_tokens(node.path, node.start_line, node.end_line, node.qualname)


def shown_lines(detail: str, start: int, end: int, module: bool,
                shown: Iterable[Sequence[int]] | None = None) -> range | set[int]:
    """The lines an item shows verbatim: a full symbol its span, a module in full its head, an
    excerpt its `shown` stretches; a signature or reference none."""
    if detail in ("excerpt", HEAD):
        return {i for a, b in shown or () for i in range(a, b + 1)}
    if detail == "full":
        return range(start, _full_end(start, end, module) + 1)
    return range(0)


def _full_end(start: int, end: int, module: bool) -> int:
    """The last line of an item's full text: a module's is its head."""
    return min(end, start + MODULE_HEAD - 1) if module else end


def full_text(node: Node, lines: list[str]) -> str:
    if node.kind == "commit":
        return f"{node.qualname} {node.doc}: {node.signature}"
    return "\n".join(lines[node.start_line - 1 : _full_end(node.start_line, node.end_line, node.qualname is None)])


def signature_text(node: Node, graph: CodeGraph) -> str:
    if node.kind == "commit":
        return f"{node.qualname} {node.doc}: {node.signature}"
    if node.qualname is None:
        return f"# {node.path}" + (f": {node.doc}" if node.doc else "")
    parts = [node.signature or node.qualname]
    if node.doc:
        parts.append(f'    """{node.doc}"""')
    if node.kind == "class":
        found = [graph.node(e.dst) for e in graph.out_edges(node.id, ("CONTAINS",))]
        members = sorted((m for m in found if m is not None and m.kind in ("method", "test")), key=lambda m: m.start_line)
        for m in members[:OUTLINE_MEMBERS]:
            parts.append(f"    {m.signature}  # line {m.start_line}")
        if len(members) > OUTLINE_MEMBERS:
            parts.append(f"    # ... {len(members) - OUTLINE_MEMBERS} more methods")
    return "\n".join(parts)


def reference_text(node: Node) -> str:
    if node.kind == "commit":
        return f"{node.qualname}: {node.signature}"
    return f"{node.path}:{node.start_line} {node.qualname or ''} ({node.kind})".replace("  ", " ")


TARGET_FULL_SHARE = 0.2  # a relation question's own target gets full text only when it is this small


def _taken(items: list[Item], path: str, but: Item | None = None) -> frozenset[int]:
    """Lines of `path` that full-text and excerpt items already show."""
    out: set[int] = set()
    for it in items:
        if it is not but and it.node.path == path and it.node.kind != "commit":
            out.update(shown_lines(it.detail, it.node.start_line, it.node.end_line, it.node.qualname is None, it.shown))
    return frozenset(out)


def _excerpt_of(node: Node, lines: list[str], focus: LineFocus, max_tokens: int,
                taken: frozenset[int]) -> Excerpt | None:
    if node.kind == "commit" or max_tokens <= 0:
        return None
    if node.qualname is None:  # a module: its matching stretches, no header
        return excerpt(lines, node.start_line, node.end_line, focus, max_tokens, head=False, taken=taken)
    if node.kind not in ("function", "method", "test"):
        return None
    return excerpt(lines, node.start_line, node.end_line, focus, max_tokens, taken=taken)


def _found_by_literals(cand: Candidate) -> bool:
    """Whether its strongest evidence (reasons come strongest first: Candidates.ranked) is a string it
    holds (task_generators.LiteralGenerator)."""
    return bool(cand.reasons) and cand.reasons[0].via.startswith("literal")


def _long(node: Node, budget: int) -> bool:
    """Whether a symbol's full text likely takes more than an excerpt's share of the budget (about 8
    tokens a line, without reading it)."""
    return (node.end_line - node.start_line + 1) * 8 > EXCERPT_SHARE * budget


def pack(ranked: list[Candidate], graph: CodeGraph, source: SourceLines, budget: int,
         targets: frozenset[str] = frozenset(), focus: LineFocus | None = None,
         files: list[tuple[str, float]] | None = None,
         symbols: Sequence[tuple[str, float]] = ()) -> list[Item]:
    """Pack ranked candidates. `targets` are the subjects of a relation question ("who calls X":
    X): their bodies are not the answer, so they are kept short to leave room for what is.
    `focus` (task text): a leading symbol too long to show whole shows its matching lines
    (excerpt.py), and what budget is left goes first to the leading `files` ((path, score), best
    first): to each one's functions among the leading `symbols` ((node id, score), best first), then
    to its matching lines, where no item shows them; then to upgrading items in rank order."""
    if not ranked:
        return []
    top = ranked[0].score
    items: list[Item] = []
    used = 0
    leading = {p for p, _ in (files or [])[:LEADING_FILES]} if focus is not None else set()
    # task text: part of the budget waits for the leading files' matching lines (_fill)
    room = budget - int(RESERVE_SHARE * budget) if leading else budget
    # task text: a low-ranked candidate of a file far down the file ranking (a word it shares with the
    # task, a method named like a snippet's call) is a signature the reader skips: its tokens go to
    # the leading files instead
    near = {p for p, _ in (files or [])[:TASK_FILES]} if focus is not None and files else None
    nudged = 0  # candidates before this one that only working memory brought (an editor's open file)
    for pos, cand in enumerate(ranked[: MAX_ITEMS * 2]):
        if cand.score < CUT_RATIO * top or len(items) >= MAX_ITEMS:
            break
        # working memory adds its items and takes no one's rank: a session's answer differs from a
        # one-shot run's by those items only, not by an item cut to a signature for them
        rank = pos - nudged
        if cand.memory_only:
            nudged += 1
        node = graph.node(cand.node_id)
        if node is None:
            continue
        if near is not None and rank >= FULL_RANKS and node.kind != "commit" and node.path not in near:
            continue
        container = next((it for it in items if it.detail == "full" and it.node.path == node.path and node.kind != "commit"
                          and it.node.start_line <= node.start_line and node.end_line <= it.node.end_line
                          and it.node.qualname is not None), None)
        if container is not None:
            container.merged.append(cand)
            continue
        contains_chosen = any(it.node.path == node.path and node.start_line <= it.node.start_line
                              and it.node.end_line <= node.end_line for it in items)
        head = _header_tokens(node)
        remaining = room - used - head
        if remaining <= 0:
            continue
        options: list[str] = []
        if rank < FULL_RANKS and cand.hops <= 1 and not contains_chosen and node.kind != "commit":
            options.append("full")
        if focus is not None and rank < FULL_RANKS and cand.hops <= 1 and (node.qualname is not None or node.path in leading):
            # a leading module's full text is its head (imports): for a task its matching stretches say
            # more; so do a long symbol's found above all by a string it holds (a quoted key or message
            # is one line of it: `"follow_redirects"` in a 200-line CLI entry point)
            first = node.qualname is None or (_found_by_literals(cand) and _long(node, budget))
            options.insert(0 if first else len(options), "excerpt")
        if rank < FULL_RANKS * 2 or cand.hops <= 1:
            options.append("signature")
        options.append("reference")
        got: Excerpt | None = None
        for detail in options:
            if detail == "full":
                text = full_text(node, source(node.path))
                if not text:
                    continue
                cost = count_tokens(text)
                if cost > MAX_FULL_SHARE * budget and rank > 0:
                    continue
                if cand.node_id in targets and cost > TARGET_FULL_SHARE * budget:
                    continue
                if items and used + cost + head > FULL_SHARE * room:
                    continue
            elif detail == "excerpt":
                assert focus is not None
                cap = min(remaining, int(EXCERPT_SHARE * budget))
                if items and used + head + cap > FULL_SHARE * room:
                    cap = int(FULL_SHARE * room) - used - head
                got = _excerpt_of(node, source(node.path), focus, cap, _taken(items, node.path))
                if got is None:
                    continue
                text, cost = got.text, count_tokens(got.text)
            elif detail == "signature":
                text = signature_text(node, graph)
                cost = count_tokens(text)
            else:
                text = reference_text(node)
                cost = count_tokens(text)
            if cost <= remaining:
                items.append(Item(node, cand, detail, text, cost + head,
                                  shown=got.shown if detail == "excerpt" and got is not None else None))
                used += cost + head
                break
    if focus is not None:
        _fill(items, graph, source, budget, focus, files or [], symbols)
    return items


def _fill(items: list[Item], graph: CodeGraph, source: SourceLines, budget: int, focus: LineFocus,
          files: list[tuple[str, float]], symbols: Sequence[tuple[str, float]] = ()) -> None:
    """Task text: the budget the first pass left goes to the leading files, best first: each file's
    leading symbols that no item shows, then its matching lines that no item shows yet; then to
    upgrading items in rank order: a signature or reference to the full text when it fits (and
    holds no other item), else to an excerpt."""
    used = sum(it.tokens for it in items)
    leading = symbols[:LEADING_SYMBOLS]
    for path, score in files[:LEADING_FILES]:
        used = _fill_symbols(items, graph, source, budget, focus, leading, used, path)
        used = _fill_file(items, graph, source, budget, focus, path, score, used)
    for it in items:
        left = budget - used
        if left < 40:
            return
        if it.detail not in ("full", "excerpt") and it.node.kind != "commit":
            used += _upgrade(it, items, source, budget, focus, left)


def _upgrade(it: Item, items: list[Item], source: SourceLines, budget: int, focus: LineFocus, left: int) -> int:
    """`it` shown whole when it fits in `left` more tokens (and holds no other item), else as an
    excerpt when that shows more; the tokens it grew by."""
    node = it.node
    head = _header_tokens(node)
    old = it.tokens - head
    holds_other = any(o is not it and o.node.path == node.path and node.start_line <= o.node.start_line
                      and o.node.end_line <= node.end_line for o in items)
    if not holds_other and node.qualname is not None:
        text = full_text(node, source(node.path))
        cost = count_tokens(text) if text else 0
        if text and cost <= MAX_FULL_SHARE * budget and cost - old <= left:
            it.detail, it.text, it.tokens, it.shown = "full", text, cost + head, None
            return cost - old
    got = _excerpt_of(node, source(node.path), focus, min(old + left, int(EXCERPT_SHARE * budget)),
                      _taken(items, node.path, but=it))
    if got is not None and (cost := count_tokens(got.text)) > old:
        it.detail, it.text, it.tokens, it.shown = "excerpt", got.text, cost + head, got.shown
        return cost - old
    return 0


def _insert_after_file(items: list[Item], new: Item) -> None:
    """`new` after its file's last item (else last), scored as the item before it (when there is
    one), so the items stay in score order."""
    at = max((i for i, it in enumerate(items) if it.node.path == new.node.path), default=len(items) - 1)
    if at >= 0:
        new.cand.score = items[at].cand.score
    items.insert(at + 1, new)


def _fill_symbols(items: list[Item], graph: CodeGraph, source: SourceLines, budget: int, focus: LineFocus,
                  symbols: Sequence[tuple[str, float]], used: int, path: str) -> int:
    """`path`'s functions among the leading symbols (a ranking that also weighs each function's own
    text against the task) that no item shows: their item upgraded, else one added. The tokens the
    items then take."""
    for nid, weight in symbols:
        left = budget - used
        if left < 40:
            break
        node = graph.node(nid)
        if node is None or node.path != path or node.kind not in _SHOWN_KINDS:
            continue
        if _taken(items, path).issuperset(range(node.start_line, node.end_line + 1)):
            continue
        held = next((it for it in items if it.node.id == nid), None)
        if held is not None:
            if held.detail not in ("full", "excerpt"):
                used += _upgrade(held, items, source, budget, focus, left)
            continue
        head = _header_tokens(node)
        text = full_text(node, source(node.path))
        cost = count_tokens(text) if text else 0
        shown: list[tuple[int, int]] | None = None
        detail = "full"
        if not text or cost > EXCERPT_SHARE * budget or cost + head > left:
            got = _excerpt_of(node, source(node.path), focus, min(left - head, int(EXCERPT_SHARE * budget)),
                              _taken(items, node.path))
            if got is None:
                continue
            detail, text, cost, shown = "excerpt", got.text, count_tokens(got.text), got.shown
        cand = Candidate(nid, 0, [Reason("symbols", None, weight)], weight)
        _insert_after_file(items, Item(node, cand, detail, text, cost + head, shown=shown))
        used += cost + head
    return used


def _fill_file(items: list[Item], graph: CodeGraph, source: SourceLines, budget: int, focus: LineFocus,
               path: str, score: float, used: int) -> int:
    """A leading file's matching lines that no item shows: the file's item made an excerpt of them,
    else one added. The tokens the items then take."""
    node = graph.node(path)
    left = budget - used
    if node is None or left < 40 or any(it.node.id == path and it.detail in ("full", "excerpt") for it in items):
        return used
    head = _header_tokens(node)
    got = _excerpt_of(node, source(path), focus, min(left - head, int(EXCERPT_SHARE * budget)), _taken(items, path))
    if got is None:
        return used
    tokens = count_tokens(got.text) + head
    held = next((i for i, it in enumerate(items) if it.node.id == path), None)
    if held is not None:  # the file's own item, upgraded in place
        used -= items[held].tokens
        items[held] = Item(node, items[held].cand, "excerpt", got.text, tokens, items[held].merged, got.shown)
    else:
        cand = Candidate(path, 0, [Reason("files", None, score)], score)
        _insert_after_file(items, Item(node, cand, "excerpt", got.text, tokens, shown=got.shown))
    return used + tokens
