"""The extra lanes generated from the same graph: CTX triggers, change impact, RepoBench-R retrieval.

CTX lane (relation = trigger type):
- `symbol`: "Where is `name` defined?" for a name defined once in the workspace -> its definition.
- `concept`: "Which code deals with WORD?" for an identifier sub-word that names symbols in 2-5
  non-test files -> those symbols.
- `temporal`: a simulated session; earlier queries (field `session`) look at a symbol, the final query
  refers back to it without naming it ("And who calls it?") -> its callers.
- `implicit`: "What does this module depend on?" with the module in field `path` -> its import closure
  to depth 2 (workspace files only, the module itself excluded).

Change-impact lane (relation = add_parameter | rename | move): an edit instruction on a symbol; gold =
the spans that must be read or changed (half of each instruction's quota is drawn from questions
whose gold has a structural or hidden file, so those groups are large enough to measure). Every gold file is put in one group (field `groups`):
`semantic` when its identifiers share a sub-word with the target's name, else `structural` when it is
2-4 import hops (undirected) from the target's file, else `hidden`.

RepoBench-R lane (relation = first_use | random_use): at a line of a non-test file that uses a symbol
defined in another file, `question` holds up to 30 preceding lines of that file, `candidates` 10-15
definition spans from other files (the defining one among them), gold = the defining span.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from benchmark_gen.common import code_tokens, read_text, stable_hash, subwords
from benchmark_gen.gen_context import Context
from benchmark_gen.relations import CALLS, IMP, INH, INST, OVR, REFS, callers, span
from benchmark_gen.sampling import MAX_GOLD, is_test_code, trivial
from ctx_lsp.index.model import Node

Record = Callable[..., dict[str, Any]]
CODE = ("class", "function", "method")
STOP = frozenset("""self cls none true false return args kwargs init main test tests value values name names data
item items type types list dict str int bool obj object get set new old default info string text line lines key
keys result results param params option options func function method class module path file files call wrap
with from import for the and not""".split())
CONTEXT_LINES = 30


def _file_span(ctx: Context, path: str) -> dict[str, Any]:
    return {"path": path, "start_line": 1, "end_line": max(ctx.index.facts[path].lines, 1), "symbol": None}


def _spans(ctx: Context, ids: set[str], exclude: str | None = None) -> list[dict[str, Any]]:
    items = {}
    for i in ids:
        n = ctx.g.node(i)
        if n is None or n.id == exclude or n.path not in ctx.index.facts:
            continue
        s = _file_span(ctx, n.path) if n.qualname is None else span(n)
        items[(s["path"], s["start_line"], s["end_line"], s["symbol"] or "")] = s
    return [items[k] for k in sorted(items)]


def _import_adjacency(ctx: Context) -> dict[str, set[str]]:
    adj: dict[str, set[str]] = {p: set() for p in ctx.index.facts}
    for p in ctx.index.facts:
        for e in ctx.g.out_edges(p, (IMP,)):
            if e.dst in adj and e.dst != p:
                adj[p].add(e.dst)
                adj[e.dst].add(p)
    return adj


def import_distances(adj: dict[str, set[str]], start: str, limit: int = 6) -> dict[str, int]:
    dist = {start: 0}
    frontier = [start]
    for d in range(1, limit + 1):
        nxt = []
        for cur in frontier:
            for nb in sorted(adj.get(cur, ())):
                if nb not in dist:
                    dist[nb] = d
                    nxt.append(nb)
        frontier = nxt
    return dist


# -- CTX lane --------------------------------------------------------------------------------------
def ctx_lane(ctx: Context, per: int, record: Record) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    nodes = [n for n in ctx.code_nodes() if n.kind in CODE and not trivial(ctx.index, n)]
    # symbol: names defined exactly once among code symbols
    name_count = Counter(n.name for n in ctx.code_nodes() if n.kind in CODE)
    unique = [n for n in nodes if name_count[n.name] == 1 and not n.name.startswith("_")]
    for n in ctx.sample(unique, lambda x: x, per):
        out.append(record("ctx", "symbol", "natural", f"Where is `{n.name}` defined?", n.id, [span(n)], [n.path]))
    # concept: identifier sub-words naming symbols in 2-5 non-test files
    by_word: dict[str, list[Node]] = {}
    for n in nodes:
        for w in set(subwords(n.name)):
            if len(w) >= 4 and w not in STOP and not w.isdigit():
                by_word.setdefault(w, []).append(n)
    concepts = []
    for w, ns in sorted(by_word.items()):
        files = {n.path for n in ns}
        if 2 <= len(files) <= 5 and len(ns) <= MAX_GOLD:
            concepts.append((w, ns))
    concepts.sort(key=lambda c: (stable_hash(ctx.seed, "concept", c[0], *sorted(ctx.digest(n.path) for n in c[1])), c[0]))
    for w, ns in concepts[:per]:
        gold = sorted((span(n) for n in ns), key=lambda s: (s["path"], s["start_line"], s["symbol"]))
        out.append(record("ctx", "concept", "natural", f"Which code deals with {w}?", f"concept:{w}", gold,
                          sorted({n.path for n in ns})))
    # temporal: a short session about a function, then a query that refers back to it
    cands = []
    for n in nodes:
        if n.kind in ("function", "method"):
            gold = _spans(ctx, callers(ctx.g, n), exclude=n.id)
            if 1 <= len(gold) <= MAX_GOLD:
                cands.append((n, gold))
    for n, gold in ctx.sample(cands, lambda it: it[0], per):
        session = [f"Show me `{n.qualname}` in `{n.path}`", f"What does `{n.name}` call?"]
        out.append(record("ctx", "temporal", "natural", "And who calls it?", n.id, gold,
                          sorted({s["path"] for s in gold}), session=session))
    # implicit: a module's import closure to depth 2
    modules: list[tuple[str, set[str]]] = []
    for p in sorted(ctx.index.facts):
        if ctx.index.facts[p].is_test_file:
            continue
        closure: set[str] = set()
        frontier = {p}
        for _ in range(2):
            nxt = set()
            for cur in frontier:
                nxt |= {e.dst for e in ctx.g.out_edges(cur, (IMP,)) if e.dst in ctx.index.facts}
            nxt -= closure | {p}
            closure |= nxt
            frontier = nxt
        if 2 <= len(closure) <= MAX_GOLD:
            modules.append((p, closure))
    modules.sort(key=lambda it: (stable_hash(ctx.seed, "implicit", ctx.digest(it[0]), it[0]), it[0]))
    for p, closure in modules[:per]:
        gold = [_file_span(ctx, f) for f in sorted(closure)]
        out.append(record("ctx", "implicit", "natural", "What does this module depend on?", p, gold,
                          sorted(closure), path=p))
    return out


# -- change-impact lane ------------------------------------------------------------------------------
def _impact_gold(ctx: Context, kind: str, n: Node) -> set[str]:
    g = ctx.g
    ids: set[str] = {n.id}
    direct_users = {e.src for e in g.in_edges(n.id, (CALLS, INST))}
    if kind == "add_parameter":
        ids |= direct_users
        # the callers' callers must be read: they decide what the new argument's value is
        for u in direct_users:
            ids |= {e.src for e in g.in_edges(u, (CALLS,))}
        if n.kind == "method":
            ids |= {e.src for e in g.in_edges(n.id, (OVR,))} | {e.dst for e in g.out_edges(n.id, (OVR,))}
    elif kind == "rename":
        ids |= {e.src for e in g.in_edges(n.id, (REFS, CALLS, INST, INH))}
        ids |= {e.src for e in g.in_edges(n.path, (IMP,)) if n.name in e.extra}
        if n.kind == "method":
            ids |= {e.src for e in g.in_edges(n.id, (OVR,))} | {e.dst for e in g.out_edges(n.id, (OVR,))}
    else:  # move
        ids |= {e.src for e in g.in_edges(n.path, (IMP,)) if n.name in e.extra}
        ids |= {e.src for e in g.in_edges(n.id, (REFS, CALLS, INST, INH)) if e.path != n.path}
        # what the moved code uses from other files must be imported by its new module
        ids |= {e.dst for e in g.out_edges(n.id, (CALLS, INST, REFS))
                if (d := g.node(e.dst)) is not None and d.path != n.path}
    return ids


INSTRUCTIONS = {
    "add_parameter": "Add a parameter to `{q}` in `{p}` and pass it from every call.",
    "rename": "Rename `{q}` in `{p}` everywhere it is used.",
    "move": "Move `{q}` from `{p}` to another module.",
}


def impact_lane(ctx: Context, per: int, record: Record) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    adj = _import_adjacency(ctx)
    tokens_cache: dict[str, set[str]] = {}

    def file_words(p: str) -> set[str]:
        if p not in tokens_cache:
            tokens_cache[p] = set(code_tokens(read_text(ctx.index.root, p)))
        return tokens_cache[p]

    nodes = [n for n in ctx.code_nodes() if n.kind in CODE and not trivial(ctx.index, n)]
    for kind, tmpl in INSTRUCTIONS.items():
        cands = []
        for n in nodes:
            if kind == "move" and n.kind == "method":
                continue  # a method moves with its class
            gold = _spans(ctx, _impact_gold(ctx, kind, n))
            files = sorted({s["path"] for s in gold})
            if 2 <= len(files) <= MAX_GOLD:
                cands.append((n, gold, files))
        grouped = [(n, gold, files, _groups(n, files, adj, file_words)) for n, gold, files in cands]
        # stratified: half the quota from questions with a structural or hidden file (rare, and the
        # groups a lexical retriever cannot find), the rest from all the others
        rare = [c for c in grouped if set(c[3].values()) - {"semantic"}]
        picked = ctx.sample(rare, lambda it: it[0], per // 2)
        chosen = {c[0].id for c in picked}
        picked += ctx.sample([c for c in grouped if c[0].id not in chosen], lambda it: it[0], per - len(picked))
        for n, gold, files, groups in picked:
            out.append(record("impact", kind, "instruction", tmpl.format(q=n.qualname, p=n.path), n.id, gold, files,
                              groups=groups))
    return out


def _groups(n: Node, files: list[str], adj: dict[str, set[str]],
            file_words: Callable[[str], set[str]]) -> dict[str, str]:
    """semantic: shares a sub-word of the target's name; structural: 2-4 import hops; else hidden."""
    name_words = {w for w in subwords(n.name) if len(w) >= 3} | {n.name.lower().strip("_")}
    dist = import_distances(adj, n.path)
    groups = {}
    for f in files:
        if name_words & file_words(f):
            groups[f] = "semantic"
        elif 2 <= dist.get(f, 99) <= 4:
            groups[f] = "structural"
        else:
            groups[f] = "hidden"
    return groups


# -- RepoBench-R lane -------------------------------------------------------------------------------
def repobench_lane(ctx: Context, per: int, record: Record) -> list[dict[str, Any]]:
    g = ctx.g
    out: list[dict[str, Any]] = []
    pool = [n for n in ctx.code_nodes() if n.kind in ("class", "function") and not is_test_code(ctx.index, n)
            and n.end_line > n.start_line]
    uses_by_file: dict[str, list[tuple[int, int, Node]]] = {}
    for p in sorted(ctx.index.facts):
        if ctx.index.facts[p].is_test_file:
            continue
        import_lines = {i.line for i in ctx.index.facts[p].imports}
        for e in g.file_edges.get(p, []):
            if e.line in import_lines:
                continue  # an import names the symbol; the use that needs its definition comes later
            if e.kind not in (CALLS, INST, REFS):
                continue
            d = g.node(e.dst)
            if d is None or d.path == p or d.kind not in ("class", "function") or is_test_code(ctx.index, d):
                continue
            if e.line <= 3:
                continue  # too little preceding context to be a retrieval question
            uses_by_file.setdefault(p, []).append((e.line, e.col, d))
    files = sorted(uses_by_file, key=lambda p: (stable_hash(ctx.seed, "repobench", ctx.digest(p), p), p))
    for setting in ("first_use", "random_use"):
        for p in files[:per]:
            uses = sorted(uses_by_file[p], key=lambda u: (u[0], u[1], u[2].id))
            if setting == "first_use":
                line, _, d = uses[0]
            else:
                line, _, d = uses[stable_hash(ctx.seed, setting, ctx.digest(p), p) % len(uses)]
            text_lines = read_text(ctx.index.root, p).splitlines()
            context = "\n".join(text_lines[max(0, line - 1 - CONTEXT_LINES): line - 1])
            cands = _candidates(ctx, pool, p, d, setting)
            out.append(record("repobench", setting, "code", context, f"{p}:{line}", [span(d)], [d.path],
                              path=p, line=line, candidates=cands))
    return out


def _candidates(ctx: Context, pool: list[Node], use_path: str, gold: Node, setting: str) -> list[dict[str, Any]]:
    """10-15 definition spans from files other than the one being edited, the gold one among them.

    Half the negatives are hard (from the gold's file and files the editing file imports), the rest
    come from anywhere else; all choices and the final order follow content hashes.
    """
    n_total = 10 + stable_hash(ctx.seed, setting, use_path, gold.id) % 6
    imported = {e.dst for e in ctx.g.out_edges(use_path, (IMP,))} | {gold.path}
    others = [n for n in pool if n.path != use_path and n.id != gold.id
              and not (n.path == gold.path and n.start_line <= gold.start_line <= n.end_line)]

    def h(n: Node) -> tuple[int, str]:
        return (stable_hash(ctx.seed, "cand", use_path, gold.id, ctx.digest(n.path), n.id), n.id)

    hard = sorted((n for n in others if n.path in imported), key=h)
    rest = sorted((n for n in others if n.path not in imported), key=h)
    want = n_total - 1
    chosen = hard[: want // 2]
    chosen += rest[: want - len(chosen)]
    if len(chosen) < want:
        chosen += [n for n in hard[want // 2:] if n not in chosen][: want - len(chosen)]
    cands = [span(n) for n in chosen] + [span(gold)]
    cands.sort(key=lambda s: (stable_hash(ctx.seed, "order", use_path, s["path"], s["symbol"]), s["path"]))
    return cands
