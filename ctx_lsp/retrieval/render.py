"""ContextPack -> markdown ready to paste into an LLM: path:lines headers, fenced code, one line of reasons."""

from __future__ import annotations

from typing import Any

from ctx_lsp.index.edge_words import EDGE_WORDS


def reason_text(r: dict[str, Any]) -> str:
    """One reason in words: `calls pkg/a.py::f (2.85)` for an edge (`via` CALLS<-, `from` f), naming
    the candidate a merged reason is of (`pkg/b.py::inner calls pkg/a.py::f`); else the generator and
    its source: `bm25 (1.98)`, `bm25 of pkg/a.py (1.67)`."""
    src = r.get("from")
    merged = r.get("merged")  # a reason of a candidate this item's span holds (its file, a nested def)
    relation = EDGE_WORDS.get(r["via"]) if src else None
    if relation:
        text = (f"{merged} " if merged else "") + f"{relation} {src}"
    else:
        text = r["via"] + (f" from {src}" if src else "") + (f" of {merged}" if merged else "")
    return f"{text} ({r['weight']:.2f})"


def _reason_line(item: dict[str, Any]) -> str:
    return "; ".join(reason_text(r) for r in item.get("reasons", [])[:4])


def to_markdown(pack: dict[str, Any]) -> str:
    plan = pack.get("plan", {})
    query = pack["query"]
    if plan.get("task"):
        # a pasted issue: its first line names it; the reader has the rest already
        first = query.strip().split("\n", 1)[0]
        query = first[:160] + ("…" if len(first) > 160 or "\n" in query.strip() else "")
    mentions = plan.get("mentions", [])
    shown = ", ".join(mentions[:12]) + (f", … ({len(mentions)} in all)" if len(mentions) > 12 else "")
    lines = [
        f"# Context for: {query}",
        "",
        f"_plan: {plan.get('trigger')}; operators: {', '.join(plan.get('operators', [])) or '-'}; "
        f"mentions: {shown or '-'}; " + (f"at: {plan['at']}; " if plan.get("at") else "")
        + f"{pack['tokens']}/{pack['budget']} tokens"
        + ("; index is still building (stale)" if pack.get("stale") else "") + "_",
        "",
    ]
    if plan.get("task") and pack.get("files"):
        lines.append("Files, best first: " + ", ".join(
            f"`{f['path']}` ({', '.join(r['via'] for r in f['reasons'][:2])})" for f in pack["files"][:10]))
        shown_items = {(i["path"], i.get("symbol")) for i in pack["items"]}
        more = [s for s in pack.get("symbols", []) if (s["path"], s["symbol"]) not in shown_items][:10]
        if more:  # where to look next: ranked symbols the budget left out
            lines.append("Also look at: " + ", ".join(f"`{s['path']}:{s['start_line']}` `{s['symbol']}`" for s in more))
        lines.append("")
    for item in pack["items"]:
        sym = f" `{item['symbol']}`" if item.get("symbol") else ""
        if item["detail"] == "head":  # a module's first lines
            last = item["shown"][0][1]
            lines.append(f"## {item['path']}:{item['start_line']}-{last}{sym} ({item['kind']}, first {last} "
                         f"of {item['end_line']} lines)")
        else:
            lines.append(f"## {item['path']}:{item['start_line']}-{item['end_line']}{sym} ({item['kind']}, {item['detail']})")
        lines.append(f"why: {_reason_line(item)}")
        if item["detail"] == "reference":
            lines.append(f"- {item['text']}")
        else:
            lines.append("```python")
            lines.append(item["text"])
            lines.append("```")
        lines.append("")
    for note in pack.get("notes", ()):
        lines.insert(3, f"_note: {note}_")
    if not pack["items"]:
        ranked = pack.get("symbols") or []
        if ranked:  # found, but the budget holds none of it
            first = ranked[0]
            lines.append(f"_Nothing fits in {pack['budget']} tokens: {len(ranked)} symbols ranked, the first "
                         f"`{first['path']}:{first['start_line']}` `{first['symbol']}`; give a larger budget._")
        else:
            lines.append("_No matching code found._")
    return "\n".join(lines).rstrip() + "\n"
