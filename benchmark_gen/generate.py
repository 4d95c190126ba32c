"""`python -m benchmark_gen generate ROOT --out FILE.jsonl`: a deterministic gold benchmark from the graph.

The file is a header line, then one question per line, sorted by (lane, relation, target, phrasing).
Nothing in it depends on the checkout path, the cache, the clock or the machine: targets are sampled
by hashes of content digests and the seed, paths are workspace-relative, and JSON is written with
sorted keys and fixed separators.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from benchmark_gen import lanes
from benchmark_gen.common import (
    SCHEMA,
    TOOL_VERSION,
    files_digest,
    git_commit,
    open_index,
    stable_hash,
    write_atomic,
)
from benchmark_gen.gen_context import Context
from benchmark_gen.phrasing import phrasings
from benchmark_gen.relations import RELATIONS, available_relations, gold_for
from benchmark_gen.sampling import MAX_GOLD, trivial
from ctx_lsp.index.model import Node
from ctx_lsp.index.workspace import WorkspaceIndex

PHRASING_ORDER = {"qualified": 0, "short": 1, "nameless": 2}


def relation_questions(ctx: Context, per_relation: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    out: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    nodes = ctx.code_nodes()
    for relation in available_relations(ctx.g, pinned_history=git_commit(ctx.index.root) is not None):
        _, kinds, allow_tests = RELATIONS[relation]
        candidates: list[tuple[Node, list[dict[str, Any]]]] = []
        for n in nodes:
            if n.kind not in kinds or trivial(ctx.index, n, allow_tests):
                continue
            gold = gold_for(ctx.g, relation, n)
            if not 1 <= len(gold) <= MAX_GOLD or not ctx.gold_files(gold):
                continue
            candidates.append((n, gold))
        for n, gold in ctx.sample(candidates, lambda it: it[0], per_relation):
            made = phrasings(n, ctx.module(n.path), relation, ctx.info(n))
            if len(made) < 3:
                dropped[relation] += 1
            for phrasing, question in made:
                out.append(record("relation", relation, phrasing, question, n.id, gold, ctx.gold_files(gold)))
    return out, dict(sorted(dropped.items()))


def record(lane: str, relation: str, phrasing: str, question: str, target: str, gold: list[dict[str, Any]],
           gold_files: list[str], **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": f"{lane}-{relation}-{stable_hash(lane, relation, phrasing, target, question) % 16**10:010x}",
        "lane": lane, "relation": relation, "phrasing": phrasing, "question": question, "target": target,
        "gold": gold, "gold_files": gold_files,
    }
    rec.update(extra)
    return rec


def generate(root: Path, per_relation: int = 20, seed: int = 0, cache_dir: Path | None = None,
             index: WorkspaceIndex | None = None) -> list[dict[str, Any]]:
    """The header followed by every question (as dicts), in file order."""
    index = index if index is not None else open_index(root, cache_dir)
    ctx = Context(index, seed)
    questions, dropped = relation_questions(ctx, per_relation)
    questions += lanes.ctx_lane(ctx, per_relation, record)
    questions += lanes.impact_lane(ctx, per_relation, record)
    questions += lanes.repobench_lane(ctx, per_relation, record)
    lane_order = {"relation": 0, "ctx": 1, "impact": 2, "repobench": 3}
    questions.sort(key=lambda q: (lane_order.get(q["lane"], 9), q["lane"], q["relation"], q["target"],
                                  PHRASING_ORDER.get(q["phrasing"], 9), q["phrasing"], q["id"]))
    counts: dict[str, Any] = {
        "questions": len(questions),
        "lanes": dict(sorted(Counter(q["lane"] for q in questions).items())),
        "relations": dict(sorted(Counter(f"{q['lane']}/{q['relation']}" for q in questions).items())),
        "phrasings": dict(sorted(Counter(q["phrasing"] for q in questions if q["lane"] == "relation").items())),
        "nameless_dropped": dropped,
        "files": len(index.facts),
    }
    header = {"schema": SCHEMA, "tool_version": TOOL_VERSION, "commit": git_commit(index.root),
              "files_digest": files_digest(index), "counts": counts, "seed": seed, "per_relation": per_relation}
    return [header, *questions]


def dumps(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)


def run_generate(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if not root.is_dir():
        print(f"error: not a directory: {root}", file=sys.stderr)
        return 2
    cache = Path(args.cache_dir) if getattr(args, "cache_dir", None) else None
    records = generate(root, args.per_relation, args.seed, cache)
    out = Path(args.out)
    write_atomic(out, dumps(records))
    print(summary_line(records[0], out))
    return 0


def summary_line(header: dict[str, Any], out: Path) -> str:
    counts = header["counts"]
    return (f"wrote {counts['questions']} questions to {out}: " +
            ", ".join(f"{k}={v}" for k, v in counts["relations"].items()))
