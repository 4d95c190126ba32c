"""Generators over task evidence: code snippets bound in the graph, traceback frames, quoted literals."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ctx_lsp.retrieval.evidence import TaskEvidence
from ctx_lsp.retrieval.grounding import bind_snippets, map_frames

if TYPE_CHECKING:
    from ctx_lsp.retrieval.generators import Query

W_SNIPPET = 2.6
W_TRACEBACK = 3.0
W_LITERAL = 3.0
W_CODE = 3.2
W_KEY = 2.4
MAX_SNIPPET_TARGETS = 40


class Snippets:
    """Code in the task (fenced, indented, doctest) bound as a virtual module: its imports, calls,
    instantiations, subclasses and overrides name workspace symbols."""

    name = "snippets"

    def applies(self, q: Query) -> bool:
        return bool(q.evidence.code)

    def seed(self, q: Query) -> None:
        engine = q.retriever.engine
        targets = bind_snippets(engine.index.ws, engine.graph, q.evidence.code, engine.find_symbols)
        # a name used many times in the snippets is what they are about; the first use ranks ties
        counts: dict[str, int] = {}
        for t in targets:
            counts[t.node_id] = counts.get(t.node_id, 0) + 1
        added = 0
        for t in targets:
            if added >= MAX_SNIPPET_TARGETS:
                break
            bonus = min(1.0, 0.8 + 0.1 * counts[t.node_id])
            before = t.node_id in q.cands
            q.cands.add(t.node_id, t.via, W_SNIPPET * t.weight * bonus)
            if not before:
                added += 1
            if t.node_id not in q.grounded and t.via not in ("snippet-import", "snippet-name"):
                q.grounded.append(t.node_id)
        if targets:
            q.notes.append(f"snippets: {len(q.evidence.code)} bound, {len(counts)} targets")


class Traceback:
    """Traceback frames inside the workspace; the innermost project frame weighs most."""

    name = "traceback"

    def applies(self, q: Query) -> bool:
        return bool(q.evidence.frames)

    def seed(self, q: Query) -> None:
        g = q.retriever.engine.graph
        targets = map_frames(q.evidence.frames, g, q.retriever.file_paths())
        for t in targets[:12]:
            q.cands.add(t.node_id, "traceback", W_TRACEBACK * t.weight)
            if t.node_id not in q.grounded:
                q.grounded.append(t.node_id)
        if targets:
            q.notes.append(f"traceback: {len({t.node_id.split('::')[0] for t in targets})} project files")


class Literals:
    """Messages and error codes quoted in the task, found as string literals in the code."""

    name = "literals"

    def applies(self, q: Query) -> bool:
        ev = q.evidence
        return bool(ev.messages or ev.codes or ev.quoted)

    def seed(self, q: Query) -> None:
        index = q.retriever.literal_index()
        found = 0
        for code in q.evidence.codes[:10]:
            hits = index.match_code(code)
            for lit in hits[:6]:
                q.cands.add(lit.node_id, "literal-code", W_CODE / (1 + 0.1 * (len(hits) - 1)))
                found += 1
        for key in _keys(q.evidence)[:30]:
            hits = index.match_key(key)
            for lit in hits[:6]:
                q.cands.add(lit.node_id, "literal-key", W_KEY / (1 + 0.1 * (len(hits) - 1)))
                found += 1
        for msg in q.evidence.messages[:20]:
            for lit, strength in index.match(msg)[:5]:
                q.cands.add(lit.node_id, "literal-message", W_LITERAL * strength)
                found += 1
        if found:
            q.notes.append(f"literals: {found} matches")


def _keys(ev: TaskEvidence) -> list[str]:
    """Option, setting and message names the task quotes (`--ignore-paths`, `unused-import`)."""
    out: list[str] = []
    for q in ev.quoted:
        if any(q in msg for msg in ev.messages):
            continue  # a message, or quoted inside one (`'utf-8' codec can't decode`): a value, not a name
        for part in re.findall(r"-{0,2}[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+", q.split("=", 1)[0]):
            if part not in out:
                out.append(part)
    for m in re.finditer(r"\((-{0,2}[a-z][a-z0-9]*(?:-[a-z0-9]+)+)\)|(?<![\w-])(--[a-z][a-z0-9-]+)", ev.text):
        part = m.group(1) or m.group(2)
        if part not in out:
            out.append(part)
    return out
