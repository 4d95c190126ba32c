"""A typed neighbourhood (`Engine.neighbors` items) as text, for people (`ctx-lsp neighbors`) and for
agents (the MCP tool `get_architectural_context`): per edge kind and direction, each neighbour once.

The graph has an edge per (source, target, kind), and a file's neighbourhood holds the edges of each
of its symbols: a commit that touched twelve of a file's functions, or a function calling three of
them, is twelve or three edges but one neighbour. Listing them once, with the file's symbols they
reach in brackets and their sites compacted, says the same in a fraction of the lines.
"""

from __future__ import annotations

from typing import Any

SUBJECT_CHARS = 100  # a commit subject in a listing; the JSON answers have it whole
SITES_SHOWN = 6
MEMBERS_SHOWN = 4


def neighbor_lines(items: list[dict[str, Any]], of_file: bool, node_lines: bool = False,
                   counts: bool = False) -> list[str]:
    """Lines: `EDGE ->` (with `counts`, `EDGE -> (neighbours)`), then `  other [mine]  (sites …,
    resolvers)` per neighbour. `of_file`: the target is a file, so name its symbols each edge starts
    or ends at. `node_lines`: a symbol neighbour as `path:line Qual.name` (where it is defined), else
    `path::Qual.name`; IMPORTS then add `names=` (what is imported), when one edge says them all."""
    groups: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for i in items:
        other = i["commit"]["hash"] if "commit" in i else (f"{i['path']}::{i['symbol']}" if i["symbol"] else i["path"])
        groups.setdefault((i["edge"], i["direction"]), {}).setdefault(other, []).append(i)
    out: list[str] = []
    for (edge, direction), by_other in groups.items():
        out.append(f"{edge} {'->' if direction == 'out' else '<-'}" + (f" ({len(by_other)})" if counts else ""))
        for other, its in by_other.items():
            first = its[0]
            name = other
            if "commit" in first:  # commit nodes have no path: show what a reader needs instead
                c = first["commit"]
                subject = c["subject"] if len(c["subject"]) <= SUBJECT_CHARS else c["subject"][: SUBJECT_CHARS - 1] + "…"
                name = f"{c['hash'][:12]} {c['date'][:10]} {c['author']}: {subject}"
                if node_lines:
                    name = f"commit {name}"
            elif node_lines and first["symbol"]:
                name = f"{first['path']}:{first['line']} {first['symbol']}"
            mine = sorted({i["from_symbol"] for i in its if of_file and i.get("from_symbol")})
            more = f" +{len(mine) - MEMBERS_SHOWN} more" if len(mine) > MEMBERS_SHOWN else ""
            via = f" [{', '.join(mine[:MEMBERS_SHOWN])}{more}]" if mine else ""
            names = ""
            if node_lines and edge == "IMPORTS" and len(its) == 1 and first.get("names"):
                names = f" names={','.join(first['names'])}"
            resolvers = ", ".join(dict.fromkeys(i["resolver"] for i in its))
            out.append(f"  {name}{via}{names}  ({sites_text(its)}, {resolvers})")
    return out


def sites_text(items: list[dict[str, Any]]) -> str:
    """`site a.py:3` or `sites a.py:3, 9, b.py:4 +2 more`: lines of one file after its path."""
    sites = sorted({(x["path"], x["line"]) for i in items for x in i.get("sites") or (i["site"],)})
    parts: list[str] = []
    last = None
    for path, line in sites[:SITES_SHOWN]:
        parts.append(f"{path}:{line}" if path != last else str(line))
        last = path
    more = f" +{len(sites) - SITES_SHOWN} more" if len(sites) > SITES_SHOWN else ""
    return f"site{'s' if len(sites) > 1 else ''} {', '.join(parts)}{more}"
