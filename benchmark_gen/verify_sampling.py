"""`verify-edges`: what is checked and how sure the numbers are. The deterministic samples (edges per
(kind, resolver), symbols for recall), Wilson intervals and stratified estimates, and `Workspace`,
the view of the copied workspace every oracle comparison reads (sources, trees, positions, sites).
"""

from __future__ import annotations

import ast
import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark_gen.oracle_pyright import Loc
from ctx_lsp.index.bind import Binder
from ctx_lsp.index.chains import returned_name
from ctx_lsp.index.facts import Def, FileFacts, Site
from ctx_lsp.index.model import Edge, EdgeKind, Node, symbol_id
from ctx_lsp.index.workspace import WorkspaceIndex

CHECKED_KINDS = (
    EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value, EdgeKind.REFERENCES.value,
    EdgeKind.INHERITS.value, EdgeKind.OVERRIDES.value, EdgeKind.IMPORTS.value,
)


CALL_KINDS = (EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value)


Z95 = 1.959963984540054


PROPERTY_DECORATORS = ("property", "cached_property", "setter", "getter", "deleter")


# -- statistics --------------------------------------------------------------------------------
def wilson(successes: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion; (0, 1) when there is no data."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def stratified(strata: list[tuple[int, int, int]]) -> dict[str, Any]:
    """Combine per-stratum samples (population, agree, judged) into one precision estimate.

    The estimate weights each stratum by its share of the population; its 95% interval is Wilson's
    at the Kish effective sample size (n_eff = p(1-p)/var), which reduces to the plain Wilson
    interval when there is a single stratum.
    """
    live = [(pop, a, n) for pop, a, n in strata if n > 0 and pop > 0]
    total = sum(pop for pop, _, _ in live)
    judged = sum(n for _, _, n in live)
    if not live or total == 0:
        return {"precision": None, "ci": [0.0, 1.0], "judged": 0}
    p = sum(pop / total * a / n for pop, a, n in live)
    var = sum((pop / total) ** 2 * (a / n) * (1 - a / n) / n for pop, a, n in live)
    n_eff = p * (1 - p) / var if var > 0 else float(judged)
    lo, hi = wilson(p * n_eff, n_eff)
    return {"precision": p, "ci": [lo, hi], "judged": judged}


def sample_key(seed: int, digest: str, *parts: object) -> str:
    """Sort key of the deterministic sample: content hash of the site's file + the item + the seed."""
    h = hashlib.blake2b(digest_size=10)
    h.update(f"{seed}\0{digest}".encode())
    for p in parts:
        h.update(b"\0" + str(p).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def sample_edges(edges: Iterable[Edge], facts: dict[str, FileFacts], n: int, seed: int) -> dict[tuple[str, str], list[Edge]]:
    """Up to n edges per (kind, resolver), chosen by hash order: same graph + seed -> same sample."""
    strata: dict[tuple[str, str], list[tuple[str, Edge]]] = defaultdict(list)
    for e in edges:
        if e.kind not in CHECKED_KINDS:
            continue
        f = facts.get(e.path)
        digest = f.digest if f is not None else ""
        strata[(e.kind, e.resolver)].append((sample_key(seed, digest, e.src, e.dst, e.kind, e.line, e.col), e))
    return {k: [e for _, e in sorted(v, key=lambda t: t[0])[:n]] for k, v in sorted(strata.items())}


def resolver_family(resolver: str) -> str:
    return "jedi" if resolver == "jedi" else ("ast-*" if resolver.startswith("ast-") else resolver)


# -- workspace helpers -------------------------------------------------------------------------
@dataclass
class Workspace:
    """What the judges need: the copied root, the index and per-file text/ast/def tables."""

    root: Path
    index: WorkspaceIndex
    _lines: dict[str, list[str]] = field(default_factory=dict)
    _trees: dict[str, ast.Module | None] = field(default_factory=dict)
    defs_at: dict[tuple[str, int], list[tuple[Def, str]]] = field(default_factory=dict)
    def_of: dict[str, Def] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for path, f in self.index.facts.items():
            for d in f.defs:
                nid = symbol_id(path, d.qual)
                self.def_of[nid] = d
                self.defs_at.setdefault((path, d.line), []).append((d, nid))

    @property
    def facts(self) -> dict[str, FileFacts]:
        return self.index.facts

    def node(self, nid: str) -> Node | None:
        return self.index.graph.node(nid)

    def lines(self, rel: str) -> list[str]:
        if rel not in self._lines:
            try:
                text = (self.root / rel).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            self._lines[rel] = text.splitlines()
        return self._lines[rel]

    def tree(self, rel: str) -> ast.Module | None:
        if rel not in self._trees:
            try:
                self._trees[rel] = ast.parse("\n".join(self.lines(rel)))
            except (SyntaxError, ValueError):
                self._trees[rel] = None
        return self._trees[rel]

    def cp(self, rel: str, line: int, byte_col: int) -> int:
        """ast's utf-8 byte column -> code points."""
        lines = self.lines(rel)
        text = lines[line - 1] if 1 <= line <= len(lines) else ""
        return len(text.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def rel_of(self, loc: Loc) -> str | None:
        p = Path(loc.path)
        if not p.is_relative_to(self.root):
            return None
        return p.relative_to(self.root).as_posix()

    def node_at(self, loc: Loc) -> str | None:
        """Our node whose name pyright's location points at (a def/class/variable name, or a module)."""
        rel = self.rel_of(loc)
        if rel is None or rel not in self.facts:
            return None
        cands = self.defs_at.get((rel, loc.line + 1), [])
        for d, nid in cands:
            if d.col == loc.col:
                return nid
        # another name on a def's line (a parameter) is not that def
        if loc.line == 0 and loc.col == 0:
            return rel
        return None

    def describe(self, loc: Loc) -> str:
        rel = self.rel_of(loc)
        if rel is None:
            return f"external:{_external_name(loc.path)}"
        nid = self.node_at(loc)
        return nid if nid is not None else f"{rel}:{loc.line + 1}:{loc.col} (no node)"

    def calls_result_at(self, rel: str, line: int, col: int) -> bool:
        """A call site there calls what another call returned (`f(a)(b)`, `@factory(...)`)."""
        f = self.facts.get(rel)
        return f is not None and any(s.line == line and s.col == col and s.kind == "call"
                                     and s.chain[-1].endswith("()") for s in f.sites)

    def returned_names(self, loc: Loc, calls: bool = False) -> list[tuple[int, int]]:
        """Positions (1-based line, code-point column) of the names the function whose definition
        `loc` points at returns (`return decorator`), outside its nested defs; with `calls`, of the
        callees whose result it returns instead (`return option(*decls)`)."""
        rel = self.rel_of(loc)
        tree = self.tree(rel) if rel is not None else None
        if rel is None or tree is None:
            return []
        out: list[tuple[int, int]] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == loc.line + 1:
                stack: list[ast.AST] = list(node.body)
                while stack:
                    cur = stack.pop()
                    if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                        continue
                    if isinstance(cur, ast.Return):
                        if not calls:
                            named = returned_name(cur.value)
                            if named is not None:
                                out.append((named.lineno, self.cp(rel, named.lineno, named.col_offset)))
                        elif isinstance(cur.value, ast.Call) and returned_name(cur.value) is None:
                            pos = self.name_position(rel, cur.value.func)
                            if pos is not None:
                                out.append(pos)
                    stack.extend(ast.iter_child_nodes(cur))
        return sorted(out)

    def name_position(self, rel: str, target: ast.AST) -> tuple[int, int] | None:
        """(1-based line, code-point column) of the last name of a callee `f` or `a.f`."""
        if isinstance(target, ast.Attribute) and target.end_lineno is not None:
            line = target.end_lineno
            return line, self.cp(rel, line, target.end_col_offset or 0) - len(target.attr)
        if isinstance(target, ast.Name):
            return target.lineno, self.cp(rel, target.lineno, target.col_offset)
        return None

    def decorator_names(self, loc: Loc) -> list[tuple[int, int, bool]]:
        """(1-based line, code-point column of the decorator's name, whether it is called) for each
        decorator of the function whose definition `loc` points at."""
        rel = self.rel_of(loc)
        tree = self.tree(rel) if rel is not None else None
        if rel is None or tree is None:
            return []
        out: list[tuple[int, int, bool]] = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == loc.line + 1:
                for dec in node.decorator_list:
                    called = isinstance(dec, ast.Call)
                    pos = self.name_position(rel, dec.func if isinstance(dec, ast.Call) else dec)
                    if pos is not None:
                        out.append((*pos, called))
        return out

    def site_at(self, rel: str, line: int, col: int) -> Site | None:
        f = self.facts.get(rel)
        if f is None:
            return None
        for s in f.sites:
            if s.line == line and s.col == col:
                return s
        return None


def _external_name(path: str) -> str:
    parts = Path(path).parts
    for anchor in ("site-packages", "typeshed-fallback", "stdlib"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor):][-3:])
    return "/".join(parts[-2:])


def site_value(binder: Binder, ws: Workspace, site: Site, path: str) -> Any:
    """What our static binder makes of one site (the same steps as bind_file), for classification."""
    info = binder.ws.info.get(path)
    if info is None:
        return None
    try:
        chain = site.chain
        if len(chain) == 1:
            head = chain[0]
            value = binder.lookup(info, site.scope, head[:-2] if head.endswith("()") else head, 0)
            if head.endswith("()"):
                value = binder.apply_call(value, 0)
        else:
            value = binder.eval_chain(info, site.scope, chain[:-1], 0)
            last = chain[-1]
            value = binder.attr(value, last[:-2] if last.endswith("()") else last, 0)
        return binder.deref_variable(value, 0)
    except Exception:  # classification only; never let it break the run
        return None


def chain_shape(ws: Workspace, path: str, site: Site | None) -> str:
    """A site's expression with names abstracted: `self.<attr>.<m>()`, `<param>.<m>()`, `<Name>()`."""
    if site is None:
        return "<no extracted site>"
    f = ws.facts.get(path)
    scope_def = None
    if f is not None and site.scope:
        scope_def = next((d for d in f.defs if d.qual == site.scope), None)
    out = []
    for i, seg in enumerate(site.chain):
        called = seg.endswith("()")
        name = seg[:-2] if called else seg
        if i == 0:
            if name in ("self", "cls", "super"):
                token = name
            elif scope_def is not None and name in scope_def.locals:
                token = "<typed-local>" if scope_def.locals[name] else "<untyped-local/param>"
            else:
                token = "<Name>" if name[:1].isupper() else "<name>"
        elif i == len(site.chain) - 1:
            token = "<m>"
        else:
            token = "<attr>"
        out.append(token + ("()" if called else ""))
    return ".".join(out)


# -- the static oracle: recall -------------------------------------------------------------------
def sample_symbols(ws: Workspace, n: int, seed: int) -> list[str]:
    """Functions and methods of non-test files, hash-ordered: the callers whose outgoing calls we compare."""
    keyed = []
    for path, f in ws.facts.items():
        if f.is_test_file:
            continue
        for d in f.defs:
            if d.kind in ("function", "method"):
                nid = symbol_id(path, d.qual)
                keyed.append((sample_key(seed, f.digest, "symbol", nid), nid))
    return [nid for _, nid in sorted(keyed)[:n]]
