"""ContextPack -> markdown ready to paste into an LLM: path:lines headers, fenced code, one line of reasons."""

from __future__ import annotations

from typing import Any


def _reason_line(item: dict[str, Any]) -> str:
    parts = []
    for r in item.get("reasons", [])[:4]:
        src = r.get("from")
        parts.append(f"{r['via']}" + (f" from {src}" if src else "") + f" ({r['weight']:.2f})")
    return "; ".join(parts)


def to_markdown(pack: dict[str, Any]) -> str:
    plan = pack.get("plan", {})
    lines = [
        f"# Context for: {pack['query']}",
        "",
        f"_plan: {plan.get('trigger')}; operators: {', '.join(plan.get('operators', [])) or '-'}; "
        f"mentions: {', '.join(plan.get('mentions', [])) or '-'}; {pack['tokens']}/{pack['budget']} tokens"
        + ("; index is still building (stale)" if pack.get("stale") else "") + "_",
        "",
    ]
    for item in pack["items"]:
        sym = f" `{item['symbol']}`" if item.get("symbol") else ""
        lines.append(f"## {item['path']}:{item['start_line']}-{item['end_line']}{sym} ({item['kind']}, {item['detail']})")
        lines.append(f"why: {_reason_line(item)}")
        if item["detail"] == "reference":
            lines.append(f"- {item['text']}")
        else:
            lines.append("```python")
            lines.append(item["text"])
            lines.append("```")
        lines.append("")
    if not pack["items"]:
        lines.append("_No matching code found._")
    return "\n".join(lines).rstrip() + "\n"
