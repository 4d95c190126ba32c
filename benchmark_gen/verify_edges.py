"""`python -m benchmark_gen verify-edges ROOT`: how true is the graph? Edge precision and recall
measured against two oracles that share none of our code.

- Static: pyright's language server (`benchmark_gen/oracle_pyright.py`). For a deterministic sample of
  our edges per (kind, resolver) it answers `textDocument/definition` at the edge's site; for a sample
  of functions/methods its call hierarchy's outgoing calls are compared with our CALLS/INSTANTIATES.
- Dynamic: the project's test suite run under a call tracer (`benchmark_gen/oracle_trace.py`); every
  executed caller -> callee pair between workspace functions that the graph lacks is a missed edge.

ROOT is copied to a temporary directory first (tests write files; pyright and the index cache must not
touch the original). The report names no temporary path and no time, so two runs give the same text.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import hashlib
import json
import math
import re
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmark_gen.oracle_pyright import Loc, PyrightOracle, langserver_path
from benchmark_gen.oracle_trace import SYNTHETIC as SYNTHETIC_CODE
from benchmark_gen.oracle_trace import CodeMapper, run_traced
from ctx_lsp.index.bind import Binder
from ctx_lsp.index.chains import returned_name
from ctx_lsp.index.facts import Def, FileFacts, Site
from ctx_lsp.index.model import RESOLVER_FLOW, Edge, EdgeKind, Node, symbol_id
from ctx_lsp.index.modules import EXT
from ctx_lsp.index.workspace import WorkspaceIndex

CHECKED_KINDS = (
    EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value, EdgeKind.REFERENCES.value,
    EdgeKind.INHERITS.value, EdgeKind.OVERRIDES.value, EdgeKind.IMPORTS.value,
)
CALL_KINDS = (EdgeKind.CALLS.value, EdgeKind.INSTANTIATES.value)
AGREE, DISAGREE, UNRESOLVED, SKIPPED = "agree", "disagree", "oracle-unresolved", "skipped"
Z95 = 1.959963984540054
COPY_IGNORE = shutil.ignore_patterns(".git", "__pycache__", "node_modules", ".tox", ".nox", ".venv", "venv",
                                     ".mypy_cache", ".pytest_cache", ".ruff_cache", "*.pyc")
PROPERTY_DECORATORS = ("property", "cached_property", "setter", "getter", "deleter")
CONCURRENCY = 8


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


# -- the static oracle: precision ---------------------------------------------------------------
@dataclass
class Verdict:
    kind: str
    resolver: str
    status: str
    pattern: str
    site: str
    src: str
    dst: str
    pyright: list[str]
    note: str = ""


class Judge:
    def __init__(self, ws: Workspace, oracle: PyrightOracle) -> None:
        self.ws = ws
        self.oracle = oracle
        self.binder = Binder(ws.index.ws)
        self.sem = asyncio.Semaphore(CONCURRENCY)

    async def definition(self, rel: str, line: int, col: int) -> list[Loc]:
        async with self.sem:
            try:
                return await self.oracle.definition(self.ws.root / rel, line - 1, col)
            except (asyncio.TimeoutError, RuntimeError):
                return []

    async def follow_alias(self, locs: list[Loc]) -> list[Loc]:
        """One hop through a variable that pyright stops at (`Alias = Target` / `x = mod.func`)."""
        out: list[Loc] = []
        for loc in locs:
            rel = self.ws.rel_of(loc)
            if rel is None:
                continue
            nid = self.ws.node_at(loc)
            d = self.ws.def_of.get(nid) if nid else None
            if d is not None and d.kind != "variable":
                continue
            # a variable node, or a local/parameter declaration: `name = value` on that line
            pos = self._assigned_value_pos(rel, loc.line + 1, loc.col)
            if pos is not None:
                out.extend(await self.definition(rel, *pos))
        return out

    def _assigned_value_pos(self, rel: str, line: int, col: int) -> tuple[int, int] | None:
        tree = self.ws.tree(rel)
        if tree is None:
            return None
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno == line and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and self.ws.cp(rel, t.lineno, t.col_offset) == col for t in targets):
                    return self._name_pos(rel, node.value)
        return None

    def _name_pos(self, rel: str, expr: ast.expr) -> tuple[int, int] | None:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        if isinstance(expr, ast.Attribute) and expr.end_lineno is not None and expr.end_col_offset is not None:
            return expr.end_lineno, self.ws.cp(rel, expr.end_lineno, expr.end_col_offset) - len(expr.attr)
        if isinstance(expr, ast.Name):
            return expr.lineno, self.ws.cp(rel, expr.lineno, expr.col_offset)
        return None

    def matches(self, locs: list[Loc], dst: str) -> bool:
        node = self.ws.node(dst)
        d = self.ws.def_of.get(dst)
        for loc in locs:
            got = self.ws.node_at(loc)
            if got == dst:
                return True
            if node is not None and d is not None and self.ws.rel_of(loc) == node.path and node.start_line <= loc.line + 1 <= d.line:
                return True
        return False

    def external(self, locs: list[Loc]) -> bool:
        return bool(locs) and all(self.ws.rel_of(loc) is None for loc in locs)

    async def judge(self, e: Edge) -> Verdict:
        if e.resolver == RESOLVER_FLOW:
            # a call of a parameter/attribute: pyright's definition there is the variable, never the
            # function that flows into it; the runtime trace judges these (see flow_precision)
            return self.verdict(e, SKIPPED, "ast-flow: judged by the runtime trace", [])
        try:
            if e.kind == EdgeKind.INHERITS.value:
                return await self.judge_inherits(e)
            if e.kind == EdgeKind.OVERRIDES.value:
                return await self.judge_overrides(e)
            if e.kind == EdgeKind.IMPORTS.value:
                return await self.judge_imports(e)
            return await self.judge_site(e)
        except Exception as exc:  # one odd site must not end the run; it is reported
            return self.verdict(e, SKIPPED, f"judge error: {type(exc).__name__}", [], note=str(exc)[:200])

    def verdict(self, e: Edge, status: str, pattern: str, locs: list[Loc], note: str = "") -> Verdict:
        return Verdict(e.kind, e.resolver, status, pattern, f"{e.path}:{e.line}:{e.col}", e.src, e.dst,
                       sorted({self.ws.describe(loc) for loc in locs}), note)

    def relation(self, ours: str, theirs: list[Loc]) -> str:
        """How pyright's target relates to ours, for the disagreement pattern."""
        if self.external(theirs):
            return "pyright: outside the workspace (stdlib/site-packages/stub)"
        nodes = [n for n in (self.ws.node_at(loc) for loc in theirs) if n]
        if not nodes:
            return "pyright: a declaration that is not a node (parameter, instance attribute, local)"
        ours_name = ours.rsplit(".", 1)[-1].rsplit("::", 1)[-1]
        for nid in nodes:
            d = self.ws.def_of.get(nid)
            if nid.rsplit(".", 1)[-1].rsplit("::", 1)[-1] == ours_name:
                if d is not None and d.kind == "method":
                    return "pyright: same-named method of another class (base/override/sibling)"
                return "pyright: same-named symbol in another scope/file"
            if d is not None and d.kind == "variable":
                return "pyright: a variable (alias, assignment or attribute)"
        return "pyright: a different symbol"

    async def judge_site(self, e: Edge) -> Verdict:
        """CALLS / INSTANTIATES / REFERENCES: definition at the site's last segment."""
        import_pos = self.import_site_positions(e)
        line = col = 0
        if import_pos is not None:
            locs: list[Loc] = []
            for line, col in import_pos:
                locs.extend(await self.definition(e.path, line, col))
            shape = "import binding"
        else:
            site = self.ws.site_at(e.path, e.line, e.col)
            line, col = self.adjust(e, site)
            locs = await self.definition(e.path, line, col)
            shape = chain_shape(self.ws, e.path, site)
        if not locs:
            return self.verdict(e, UNRESOLVED, f"{e.kind} {shape}", [])
        if self.matches(locs, e.dst):
            return self.verdict(e, AGREE, "", locs)
        hop = await self.follow_alias(locs)
        if hop and self.matches(hop, e.dst):
            return self.verdict(e, AGREE, "", locs + hop, note="through an alias variable")
        if e.kind == EdgeKind.CALLS.value and import_pos is None and self.ws.calls_result_at(e.path, e.line, e.col):
            # `factory(a)(b)`: pyright names the factory; the callee is what the factory returns there
            ret = await self.returned(locs)
            if self.matches(ret, e.dst):
                return self.verdict(e, AGREE, "", locs + ret, note="returned by the function called there")
        if e.kind == EdgeKind.CALLS.value and import_pos is None:
            wrapper = await self.wrapper_of(locs, e.dst)
            if wrapper:
                return self.verdict(e, AGREE, "", locs + wrapper, note="the wrapper of the decorated def called there")
        if e.kind == EdgeKind.INSTANTIATES.value and import_pos is None:
            # `self.factory_class(...)` with `factory_class: type[X]`: the declared type decides what is built
            async with self.sem:
                try:
                    typed = await self.oracle.type_definition(self.ws.root / e.path, line - 1, col)
                except (asyncio.TimeoutError, RuntimeError):
                    typed = []
            if typed and self.matches(typed, e.dst):
                return self.verdict(e, AGREE, "", locs + typed, note="through the declared type")
        if all(self.ws.rel_of(loc) is not None and self.ws.node_at(loc) is None for loc in locs):
            # pyright stops at a parameter/local (`tag_class: type[JSONTag]`, `cls`): its declared type decides
            async with self.sem:
                try:
                    typed = await self.oracle.type_definition(self.ws.root / e.path, line - 1, col) \
                        if import_pos is None else []
                except (asyncio.TimeoutError, RuntimeError):
                    typed = []
            if typed and self.matches(typed, e.dst):
                return self.verdict(e, AGREE, "", locs + typed, note="through the declared type")
            if self.is_cls_param(e, locs):
                return self.verdict(e, AGREE, "", locs, note="cls of a classmethod is its class")
            # an unannotated parameter's "type definition" is the parameter itself: no type information
            if not [t for t in typed if t not in locs] and not hop:
                # pyright knows only the parameter/local, not what it holds: it cannot judge this site
                return self.verdict(e, UNRESOLVED, f"{e.kind} {shape} (pyright: a parameter/local of unknown type)",
                                    locs)
        return self.verdict(e, DISAGREE, f"{e.kind} {shape} -> {self.relation(e.dst, locs)}", locs)

    async def returned(self, locs: list[Loc], depth: int = 0) -> list[Loc]:
        """pyright's definitions of the names the functions at `locs` return (`return wrapper`), and
        of what the functions they return a call of return (`return option(...)`, two levels)."""
        out: list[Loc] = []
        for loc in locs:
            rel = self.ws.rel_of(loc)
            if rel is None:
                continue
            for rline, rcol in self.ws.returned_names(loc):
                out.extend(await self.definition(rel, rline, rcol))
            if depth < 2:
                for rline, rcol in self.ws.returned_names(loc, calls=True):
                    out.extend(await self.returned(await self.definition(rel, rline, rcol), depth + 1))
        return out

    async def wrapper_of(self, locs: list[Loc], dst: str) -> list[Loc]:
        """Locations proving `dst` is the wrapper a decorator of the def at `locs` returns: pyright
        resolves the decorator (for `@factory(...)`, the factory and then the decorator it returns) and
        the name that decorator returns. Empty when it is not."""
        for loc in locs:
            rel = self.ws.rel_of(loc)
            if rel is None:
                continue
            for line, col, called in self.ws.decorator_names(loc):
                deco = await self.definition(rel, line, col)
                if called:
                    deco = await self.returned(deco)
                wrappers = await self.returned(deco)
                if wrappers and self.matches(wrappers, dst):
                    return deco + wrappers
        return []

    def is_cls_param(self, e: Edge, locs: list[Loc]) -> bool:
        """pyright stopped at the first parameter of a classmethod enclosing the site, and our target
        is that method's class (pyright's typeDefinition answers with the parameter itself there)."""
        src = self.ws.def_of.get(e.src)
        node = self.ws.node(e.src)
        if src is None or node is None or node.qualname is None:
            return False
        qual = node.qualname
        while qual:
            d = self.ws.def_of.get(symbol_id(node.path, qual))
            parent = qual.rpartition(".")[0]
            pdef = self.ws.def_of.get(symbol_id(node.path, parent)) if parent else None
            if d is not None and pdef is not None and pdef.kind == "class" \
                    and any(c and c[-1] == "classmethod" for c in d.decorators):
                header = range(d.line, d.line + max(1, d.signature.count(",") + 2))
                return (symbol_id(node.path, parent) == e.dst
                        and all(self.ws.rel_of(loc) == node.path and loc.line + 1 in header for loc in locs))
            qual = parent
        return False

    def adjust(self, e: Edge, site: Site | None) -> tuple[int, int]:
        """The site's position, moved onto the name when the recorded column does not start it
        (string annotations carry the string's column)."""
        if site is None:
            return e.line, e.col
        name = site.chain[-1].removesuffix("()")
        lines = self.ws.lines(e.path)
        text = lines[e.line - 1] if 1 <= e.line <= len(lines) else ""
        if text[e.col:e.col + len(name)] == name:
            return e.line, e.col
        found = [m.start() for m in re.finditer(rf"\b{re.escape(name)}\b", text)]
        if found:
            return e.line, min(found, key=lambda c: (abs(c - e.col), c))
        return e.line, e.col

    def _import_stmt(self, rel: str, line: int) -> ast.Import | ast.ImportFrom | None:
        tree = self.ws.tree(rel)
        if tree is None:
            return None
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno == line:
                return node
        return None

    def import_site_positions(self, e: Edge) -> list[tuple[int, int]] | None:
        """REFERENCES made by `from m import a, b`: the alias names' positions (the edge's site is the
        statement's start). None when the edge is not sited on an import statement."""
        f = self.ws.facts.get(e.path)
        if f is None or not any(i.line == e.line and i.col == e.col for i in f.imports):
            return None
        stmt = self._import_stmt(e.path, e.line)
        if stmt is None:
            return None
        want = e.dst.rsplit("::", 1)[-1].rsplit(".", 1)[-1]
        aliases = [a for a in stmt.names if a.name.rsplit(".", 1)[-1] == want] or list(stmt.names)
        out = []
        for a in aliases:
            if a.name == "*":
                continue
            col = self.ws.cp(e.path, a.lineno, a.col_offset) + a.name.rfind(".") + 1
            out.append((a.lineno, col))
        return out

    async def judge_imports(self, e: Edge) -> Verdict:
        """IMPORTS file -> file: the module (or imported submodule) pyright resolves at the statement."""
        stmt = self._import_stmt(e.path, e.line)
        if stmt is None:
            return self.verdict(e, SKIPPED, "IMPORTS: no import statement at the site", [])
        positions: list[tuple[int, int]] = []
        lines = self.ws.lines(e.path)
        if isinstance(stmt, ast.ImportFrom) and stmt.module:
            text = lines[stmt.lineno - 1]
            m = re.compile(r"from\s+\.*\s*([\w.]+)").match(text, self.ws.cp(e.path, stmt.lineno, stmt.col_offset))
            if m:
                positions.append((stmt.lineno, m.start(1) + m.group(1).rfind(".") + 1))
        for a in stmt.names:
            if a.name != "*":
                positions.append((a.lineno, self.ws.cp(e.path, a.lineno, a.col_offset) + a.name.rfind(".") + 1))
        files: set[str] = set()
        all_locs: list[Loc] = []
        for i, (line, col) in enumerate(positions):
            locs = await self.definition(e.path, line, col)
            all_locs.extend(locs)
            for loc in locs:
                rel = self.ws.rel_of(loc)
                # the module token names a module; an alias counts only when it is one (line 0, col 0)
                is_module_token = i == 0 and isinstance(stmt, ast.ImportFrom) and bool(stmt.module)
                # `from . import x`: wherever pyright finds x, the package holding it was imported
                level_only = isinstance(stmt, ast.ImportFrom) and not stmt.module
                if rel is not None and (is_module_token or level_only or (loc.line == 0 and loc.col == 0)
                                        or isinstance(stmt, ast.Import)):
                    files.add(rel)
        if not all_locs:
            return self.verdict(e, UNRESOLVED, "IMPORTS", [])
        implied = set(files)
        for rel in files:  # importing a.b.c runs a/__init__.py and a/b/__init__.py too
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                implied.add("/".join(parts[:i]) + "/__init__.py")
        if e.dst in implied:
            return self.verdict(e, AGREE, "", all_locs)
        style = "from-import" if isinstance(stmt, ast.ImportFrom) else "import"
        level = "relative" if isinstance(stmt, ast.ImportFrom) and stmt.level else "absolute"
        if not files:
            return self.verdict(e, DISAGREE, f"IMPORTS {level} {style} -> pyright: no workspace module at the statement",
                                all_locs)
        return self.verdict(e, DISAGREE, f"IMPORTS {level} {style} -> pyright: another workspace module", all_locs)

    def class_bases(self, class_id: str) -> list[tuple[int, int]]:
        d = self.ws.def_of.get(class_id)
        node = self.ws.node(class_id)
        if d is None or node is None:
            return []
        tree = self.ws.tree(node.path)
        if tree is None:
            return []
        for n in ast.walk(tree):
            if isinstance(n, ast.ClassDef) and n.lineno == d.line and n.name == d.qual.rsplit(".", 1)[-1]:
                return [p for p in (self._name_pos(node.path, b) for b in n.bases) if p is not None]
        return []

    async def pyright_bases(self, class_id: str) -> tuple[list[str], bool, bool]:
        """Base classes of a class as pyright resolves them: (our class ids, any external, any unresolved)."""
        node = self.ws.node(class_id)
        if node is None:
            return [], False, True
        out: list[str] = []
        external = unresolved = False
        for line, col in self.class_bases(class_id):
            locs = await self.definition(node.path, line, col)
            if not locs:
                unresolved = True
                continue
            locs = locs + await self.follow_alias(locs)
            ids = [n for n in (self.ws.node_at(loc) for loc in locs) if n and self.ws.def_of.get(n) is not None
                   and self.ws.def_of[n].kind == "class"]
            if ids:
                out.extend(i for i in ids if i not in out)
            elif self.external(locs):
                external = True
            else:
                unresolved = True
        return out, external, unresolved

    async def judge_inherits(self, e: Edge) -> Verdict:
        if not self.class_bases(e.src):
            return self.verdict(e, SKIPPED, "INHERITS: no base expression found", [])
        bases, external, unresolved = await self.pyright_bases(e.src)
        if e.dst in bases:
            return self.verdict(e, AGREE, "", [])
        if not bases and not external:
            return self.verdict(e, UNRESOLVED, "INHERITS", [])
        v = self.verdict(e, DISAGREE, "INHERITS -> pyright: " + ("another workspace class" if bases else
                                                                   "an external class"), [])
        v.pyright = bases or ["external"]
        return v

    async def judge_overrides(self, e: Edge) -> Verdict:
        """Walk the bases pyright resolves (depth-first, as our binder does) to the first class that
        defines the method's name; that is pyright's overridden method."""
        d = self.ws.def_of.get(e.src)
        node = self.ws.node(e.src)
        if d is None or node is None or "." not in d.qual:
            return self.verdict(e, SKIPPED, "OVERRIDES: not a method", [])
        cls_qual, _, name = d.qual.rpartition(".")
        start = symbol_id(node.path, cls_qual)
        seen: set[str] = {start}
        any_external = any_resolved = False

        async def walk(cid: str, depth: int) -> str | None:
            nonlocal any_external, any_resolved
            if depth > 12:
                return None
            bases, external, _ = await self.pyright_bases(cid)
            any_external |= external
            for b in bases:
                if b in seen:
                    continue
                seen.add(b)
                any_resolved = True
                bnode = self.ws.node(b)
                bdef = self.ws.def_of.get(b)
                if bnode is None or bdef is None:
                    continue
                member = symbol_id(bnode.path, f"{bdef.qual}.{name}")
                if member in self.ws.def_of:
                    return member
                found = await walk(b, depth + 1)
                if found:
                    return found
            return None

        target = await walk(start, 0)
        if target == e.dst:
            return self.verdict(e, AGREE, "", [])
        if target is None and not any_resolved and not any_external:
            return self.verdict(e, UNRESOLVED, "OVERRIDES", [])
        v = self.verdict(e, DISAGREE, "OVERRIDES -> pyright: " + (
            "another base method" if target else "no workspace base defines the name"), [])
        v.pyright = [target] if target else []
        return v


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


def family_ids(ws: Workspace, nid: str) -> set[str]:
    """A def and the defs nested in it (pyright's outgoing calls walk nested bodies too)."""
    node = ws.node(nid)
    if node is None:
        return {nid}
    prefix = (node.qualname or "") + "."
    return {nid} | {symbol_id(node.path, d.qual) for d in ws.facts[node.path].defs if d.qual.startswith(prefix)}


def out_targets(ws: Workspace, ids: set[str], kinds: Iterable[str] = CALL_KINDS) -> dict[str, Edge]:
    graph = ws.index.graph
    out: dict[str, Edge] = {}
    for i in sorted(ids):
        for e in graph.out_edges(i, kinds):
            out.setdefault(e.dst, e)
    return out


def class_of_init(ws: Workspace, nid: str) -> str | None:
    """`pkg/m.py::C.__init__` -> `pkg/m.py::C` (constructor calls are INSTANTIATES edges of the class)."""
    path, _, qual = nid.partition("::")
    if qual.endswith(".__init__") or qual.endswith(".__new__"):
        cls = symbol_id(path, qual.rsplit(".", 1)[0])
        d = ws.def_of.get(cls)
        if d is not None and d.kind == "class":
            return cls
    return None


def subclasses(ws: Workspace, cls: str) -> set[str]:
    graph = ws.index.graph
    out = {cls}
    todo = [cls]
    while todo:
        cur = todo.pop()
        for e in graph.in_edges(cur, [EdgeKind.INHERITS.value]):
            if e.src not in out:
                out.add(e.src)
                todo.append(e.src)
    return out


def is_hit(ws: Workspace, targets: dict[str, Edge], callee: str) -> Edge | None:
    """Does the graph have the call edge? A constructor (`__init__`) call is found as INSTANTIATES of
    its class or of a subclass that inherits that constructor."""
    if callee in targets:
        return targets[callee]
    cls = class_of_init(ws, callee)
    if cls is not None:
        for c in sorted(subclasses(ws, cls)):
            if c in targets and targets[c].kind == EdgeKind.INSTANTIATES.value:
                return targets[c]
    d = ws.def_of.get(callee)
    if d is not None and d.kind == "class":
        for c in sorted(subclasses(ws, callee)):
            if c in targets:
                return targets[c]
    return None


async def static_recall(judge: Judge, ws: Workspace, n: int, seed: int) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    misses: list[dict[str, Any]] = []
    hits_by_resolver: Counter[str] = Counter()
    patterns: Counter[str] = Counter()
    examples: dict[str, dict[str, Any]] = {}
    for nid in sample_symbols(ws, n, seed):
        d = ws.def_of[nid]
        node = ws.node(nid)
        if node is None:
            continue
        async with judge.sem:
            try:
                calls = await judge.oracle.outgoing_calls(ws.root / node.path, d.line - 1, d.col)
            except (asyncio.TimeoutError, RuntimeError):
                calls = None
        if calls is None:
            counts["symbols without a call-hierarchy item"] += 1
            continue
        counts["symbols"] += 1
        family = sorted(family_ids(ws, nid))
        seen: set[str] = set()
        for call in calls:
            if ws.rel_of(call.loc) is None:
                counts["calls outside the workspace"] += 1
                continue
            if call.kind == "Property":
                counts["property accesses (not call edges)"] += 1
                continue
            callee = ws.node_at(call.loc)
            if callee is None:
                counts["calls to a declaration that is not a node"] += 1
                continue
            if callee in seen:
                continue
            seen.add(callee)
            expected = "INSTANTIATES" if (class_of_init(ws, callee) or ws.def_of.get(callee, d).kind == "class") else "CALLS"
            counts[f"{expected} expected"] += 1
            found = next((h for h in (find_call(ws, m, callee, indirect=False) for m in family) if h), None)
            if found is not None:
                counts[f"{expected} found"] += 1
                counts[f"{expected} found ({found[0]})"] += 1
                hits_by_resolver[found[1].resolver] += 1
                continue
            pattern = classify_miss(judge.binder, ws, nid, callee)
            patterns[pattern] += 1
            miss = {"caller": nid, "callee": callee, "expected": expected, "pattern": pattern}
            misses.append(miss)
            examples.setdefault(pattern, miss)
    out: dict[str, Any] = {"counts": dict(sorted(counts.items())), "hits_by_resolver": dict(sorted(hits_by_resolver.items()))}
    for kind in CALL_KINDS:
        exp, got = counts[f"{kind} expected"], counts[f"{kind} found"]
        out[kind] = {"expected": exp, "found": got, "recall": (got / exp) if exp else None,
                     "ci": list(wilson(got, exp))}
    exp = sum(counts[f"{k} expected"] for k in CALL_KINDS)
    got = sum(counts[f"{k} found"] for k in CALL_KINDS)
    out["all"] = {"expected": exp, "found": got, "recall": (got / exp) if exp else None, "ci": list(wilson(got, exp))}
    out["patterns"] = [{"pattern": p, "count": c, "example": examples[p]} for p, c in _top(patterns)]
    out["misses"] = misses
    return out


# -- matching executed/pyright calls against the graph --------------------------------------------
FOUND_DIRECT, FOUND_DECORATOR, FOUND_DISPATCH, FOUND_REFERENCE = "direct", "decorator", "dispatch", "reference"


def overridden(ws: Workspace, nid: str) -> set[str]:
    """The methods `nid` overrides, transitively, by the graph's OVERRIDES edges."""
    graph = ws.index.graph
    out: set[str] = set()
    todo = [nid]
    while todo:
        for e in graph.out_edges(todo.pop(), [EdgeKind.OVERRIDES.value]):
            if e.dst not in out:
                out.add(e.dst)
                todo.append(e.dst)
    return out


def is_property(ws: Workspace, nid: str) -> bool:
    d = ws.def_of.get(nid)
    return d is not None and any(c and c[-1] in PROPERTY_DECORATORS for c in d.decorators)


def find_call(ws: Workspace, caller: str, callee: str, indirect: bool) -> tuple[str, Edge] | None:
    """How the graph holds an executed caller -> callee call, if it does.

    direct: a CALLS/INSTANTIATES edge (a constructor through its class or an inheriting subclass; a
    property getter through the REFERENCES edge of the attribute read). decorator: the decorator call
    is an edge of the decorated def nested in the caller (the extractor files decorators there).
    dispatch: the caller CALLS a method the callee overrides (virtual dispatch is CALLS + OVERRIDES).
    reference: the callee ran from inside a builtin or without a call site naming it, and the caller
    REFERENCES it (a callback passed as a value).
    """
    targets = out_targets(ws, {caller})
    hit = is_hit(ws, targets, callee)
    if hit is not None:
        return FOUND_DIRECT, hit
    refs = out_targets(ws, {caller}, [EdgeKind.REFERENCES.value])
    if is_property(ws, callee) and callee in refs:
        return FOUND_DIRECT, refs[callee]
    node = ws.node(caller)
    if node is not None and node.qualname is not None:
        for d in ws.facts[node.path].defs:
            if d.decorators and d.qual.rpartition(".")[0] == node.qualname:
                nested = symbol_id(node.path, d.qual)
                for e in ws.index.graph.out_edges(nested, CALL_KINDS):
                    if d.start <= e.line < d.line and is_hit(ws, {e.dst: e}, callee) is not None:
                        return FOUND_DECORATOR, e
    for base in sorted(overridden(ws, callee)):
        if base in targets and targets[base].kind == EdgeKind.CALLS.value:
            return FOUND_DISPATCH, targets[base]
    if indirect and callee in refs:
        return FOUND_REFERENCE, refs[callee]
    return None


def classify_miss(binder: Binder, ws: Workspace, caller: str, callee: str, via_builtin: bool = False,
                  generator: bool = False, wrapper: bool = False) -> str:
    """Why the graph lacks an executed (or pyright-found) call: a pattern name for the report."""
    node = ws.node(caller)
    cdef = ws.def_of.get(callee)
    callee_qual = callee.rsplit("::", 1)[-1]
    callee_name = callee_qual.rsplit(".", 1)[-1]
    if is_property(ws, callee):
        return "property read (the getter runs; no REFERENCES edge for the attribute read)"
    if node is None or node.qualname is None:
        return "caller is not a def"
    f = ws.facts[node.path]
    scopes = {d.qual for d in f.defs if d.qual == node.qualname or d.qual.startswith(node.qualname + ".")}
    names = {callee_name}
    if callee_name in ("__init__", "__new__") and "." in callee_qual:
        names.add(callee_qual.rsplit(".", 2)[-2])
    sites = [s for s in f.sites if s.scope in scopes and s.kind == "call" and s.chain[-1].removesuffix("()") in names]
    if not sites:
        if wrapper:
            return "call into a decorator's wrapper (the decorated def's call is not resolved either)"
        if via_builtin:
            return "called back from inside a builtin (sorted key=, map, io, ...)"
        if generator:
            return "generator resumed by a function other than its creator"
        parent = symbol_id(callee.rsplit("::", 1)[0], callee_qual.rpartition(".")[0]) if "." in callee_qual else ""
        pdef = ws.def_of.get(parent)
        if pdef is not None and pdef.kind in ("function", "method"):
            made = [s for s in f.sites if s.scope in scopes and s.kind == "call"]
            for s in made:
                v = site_value(binder, ws, s, node.path)
                if v is not None and v is not EXT and v[0] == "sym" and v[1] == parent:
                    return "function returned by a call (decorator factory / closure)"
            pname = pdef.qual.rsplit(".", 1)[-1]
            if any(s.chain[-1].removesuffix("()") == pname for s in made):
                return "function returned by a call (decorator factory / closure)"
        if any(s.chain[-1] in names for s in f.sites if s.scope in scopes):
            return "callback / higher-order (the function is passed as a value)"
        own = ws.def_of.get(caller)
        if own is not None and own.kind == "function" and "." in node.qualname:
            return "closure/decorator wrapper calls a function it was given"
        return "indirect call (no call site names the callee: parameter, local variable, getattr, table)"
    site = sites[0]
    head = site.chain[0].removesuffix("()")
    values = [site_value(binder, ws, s, node.path) for s in sites]
    resolved = [v for v in values if v is not None and v is not EXT and v[0] == "sym"]
    if resolved:
        other = resolved[0][1]
        odef = ws.def_of.get(other)
        init_of = class_of_init(ws, callee)
        if other == callee or (init_of is not None and other in subclasses(ws, init_of)):
            return "bound at a site of a nested def (the edge's source differs)"
        if odef is not None and odef.kind == "variable":
            return "resolved to a variable/attribute holding the callable"
        if odef is not None and odef.kind == "method" and cdef is not None and cdef.kind == "method":
            return "resolved to another class's method (polymorphic receiver)"
        return "resolved to another symbol"
    if any(v is EXT for v in values):
        return f"resolved outside the workspace, ran a workspace object: {chain_shape(ws, node.path, site)}"
    if head == "super":
        return "super() call unresolved"
    if head in ("self", "cls"):
        if len(site.chain) == 2:
            return f"{head}.<m>() unresolved (not found on the static class: mixin/dynamic attribute)"
        return f"{head}.<attr>...<m>() through an attribute of unknown type"
    if len(site.chain) > 1:
        hv = site_value(binder, ws, Site(site.scope, site.line, site.col, site.chain[:1], "ref"), node.path)
        if hv is not None and hv is not EXT and hv[0] == "sym":
            hdef = ws.def_of.get(hv[1])
            if hdef is not None and hdef.kind in ("function", "method") and hdef.decorators:
                return "receiver is a decorated def (the decorator changes its type)"
    shape = chain_shape(ws, node.path, site)
    if "<untyped-local/param>" in shape:
        return f"receiver is an untyped parameter or local: {shape}"
    return f"unresolved: {shape}"


# -- the dynamic oracle ----------------------------------------------------------------------------
def decorator_wrappers(ws: Workspace, pairs: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """Wrapper closures of decorators and the decorated defs they ran: W -> {F} for executed pairs
    W -> F where W is defined inside a function D and F is decorated with D (`@D` / `@x.D(...)`)."""
    out: dict[str, set[str]] = {}
    for caller, callee in pairs:
        node = ws.node(caller)
        if node is None or node.qualname is None or "." not in node.qualname:
            continue
        outer = ws.def_of.get(symbol_id(node.path, node.qualname.rpartition(".")[0]))
        fdef = ws.def_of.get(callee)
        if outer is None or fdef is None or outer.kind not in ("function", "method"):
            continue
        dname = outer.qual.rsplit(".", 1)[-1]
        if any(c and c[-1].removesuffix("()") == dname for c in fdef.decorators):
            out.setdefault(caller, set()).add(callee)
    return out


def dynamic_recall(ws: Workspace, calls: list[Any], binder: Binder) -> dict[str, Any]:
    mapper = CodeMapper(ws.facts)
    excluded: Counter[str] = Counter()
    pairs: dict[tuple[str, str], tuple[bool, bool]] = {}
    for c in calls:
        if not c.caller.is_function:
            excluded["caller is a module or class body (import time)"] += 1
            continue
        if c.callee.name in SYNTHETIC_CODE:
            excluded["lambda or comprehension body"] += 1
            continue
        caller = mapper.node_of(c.caller)
        callee = mapper.node_of(c.callee)
        if caller is None or callee is None:
            excluded["code object without a node (module-level lambda, generated code)"] += 1
            continue
        name = callee.rsplit("::", 1)[-1].rsplit(".", 1)[-1]
        if name.startswith("__") and name.endswith("__") and name not in ("__init__", "__new__", "__call__"):
            excluded["implicit protocol call (dunder method)"] += 1
            continue
        via, gen = pairs.get((caller, callee), (True, False))
        # a pair seen both through a builtin and directly counts as direct
        pairs[(caller, callee)] = (via and c.via_builtin, gen or c.callee.is_generator)
    wrapped = decorator_wrappers(ws, pairs)
    executed = set(pairs)  # wrapper -> wrapped included: flow edges name those calls too
    for (caller, callee) in list(pairs):
        if callee in wrapped.get(caller, ()):
            del pairs[(caller, callee)]
            excluded["decorator's wrapper calling the def it wraps"] += 1
    counts: Counter[str] = Counter()
    patterns: Counter[str] = Counter()
    examples: dict[str, dict[str, Any]] = {}
    hits_by_resolver: Counter[str] = Counter()
    misses = []
    groups = ("source callers", "test callers")
    for (caller, callee), (via, gen) in sorted(pairs.items()):
        cnode = ws.node(caller)
        group = groups[1] if cnode is not None and ws.facts[cnode.path].is_test_file else groups[0]
        counts[f"{group} pairs"] += 1
        found = find_call(ws, caller, callee, indirect=via or gen)
        if found is None and callee in wrapped:
            # caller -> wrapper: the graph's edge goes to the decorated def the wrapper ran
            targets = out_targets(ws, {caller})
            edge = next((targets[f] for f in sorted(wrapped[callee]) if f in targets), None)
            found = (FOUND_DECORATOR, edge) if edge is not None else None
        if found is not None:
            how, edge = found
            counts[f"{group} {how}"] += 1
            hits_by_resolver[edge.resolver] += 1
            continue
        pattern = classify_miss(binder, ws, caller, callee, via_builtin=via, generator=gen, wrapper=callee in wrapped)
        patterns[pattern] += 1
        miss = {"caller": caller, "callee": callee, "pattern": pattern}
        misses.append(miss)
        examples.setdefault(pattern, miss)
    out: dict[str, Any] = {"excluded": dict(sorted(excluded.items())),
                           "hits_by_resolver": dict(sorted(hits_by_resolver.items()))}
    for group in (*groups, "all"):
        sel: tuple[str, ...] = groups if group == "all" else (group,)
        n = sum(counts[f"{g} pairs"] for g in sel)
        by_how = {h: sum(counts[f"{g} {h}"] for g in sel)
                  for h in (FOUND_DIRECT, FOUND_DECORATOR, FOUND_DISPATCH, FOUND_REFERENCE)}
        strict = by_how[FOUND_DIRECT]
        graph = sum(by_how.values())
        out[group] = {"pairs": n, "found": by_how, "recall_strict": strict / n if n else None,
                      "ci_strict": list(wilson(strict, n)), "recall": graph / n if n else None,
                      "ci": list(wilson(graph, n))}
    out["patterns"] = [{"pattern": p, "count": c, "example": examples[p]} for p, c in _top(patterns)]
    out["misses"] = misses
    out["flow_precision"] = flow_precision(ws, executed)
    return out


def flow_precision(ws: Workspace, pairs: set[tuple[str, str]]) -> dict[str, Any]:
    """The trace as the oracle of `ast-flow` edges (may-calls through values, which pyright cannot
    judge): of the flow edges whose caller ran, the share whose callee it was seen calling. A lower
    bound: a registered callback the tests never dispatched counts against it."""
    ran = {caller for caller, _ in pairs}
    flow = [e for es in ws.index.graph.extra_edges.values() for e in es if e.resolver == RESOLVER_FLOW]
    judged = [e for e in flow if e.src in ran]
    seen = sum(1 for e in judged if (e.src, e.dst) in pairs)
    unseen: Counter[str] = Counter(e.src for e in judged if (e.src, e.dst) not in pairs)
    return {"edges": len(flow), "caller_ran": len(judged), "confirmed": seen,
            "precision": seen / len(judged) if judged else None, "ci": list(wilson(seen, len(judged))),
            "unseen_by_caller": _top(unseen)}


def _top(counter: Counter[str], k: int = 10) -> list[tuple[str, int]]:
    return sorted(counter.items(), key=lambda t: (-t[1], t[0]))[:k]


# -- precision summary --------------------------------------------------------------------------
def summarize_precision(verdicts: list[Verdict], population: dict[tuple[str, str], int]) -> dict[str, Any]:
    by_stratum: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for v in verdicts:
        by_stratum[(v.kind, v.resolver)][v.status] += 1
    rows: list[dict[str, Any]] = []
    for (kind, resolver), pop in sorted(population.items()):
        if kind not in CHECKED_KINDS:
            continue
        c = by_stratum.get((kind, resolver), Counter())
        judged = c[AGREE] + c[DISAGREE]
        rows.append({
            "kind": kind, "resolver": resolver, "edges": pop, "sampled": sum(c.values()), "agree": c[AGREE],
            "disagree": c[DISAGREE], "oracle_unresolved": c[UNRESOLVED], "skipped": c[SKIPPED],
            "precision": c[AGREE] / judged if judged else None, "ci": list(wilson(c[AGREE], judged)),
        })
    combined = []
    for kind in CHECKED_KINDS:
        for fam in (None, "ast-*", "jedi"):
            chosen = [r for r in rows if r["kind"] == kind and (fam is None or resolver_family(r["resolver"]) == fam)]
            if not chosen or (fam is not None and not any(r["edges"] for r in chosen)):
                continue
            est = stratified([(r["edges"], r["agree"], r["agree"] + r["disagree"]) for r in chosen])
            combined.append({
                "kind": kind, "resolvers": fam or "all", "edges": sum(r["edges"] for r in chosen),
                "sampled": sum(r["sampled"] for r in chosen), "agree": sum(r["agree"] for r in chosen),
                "disagree": sum(r["disagree"] for r in chosen),
                "oracle_unresolved": sum(r["oracle_unresolved"] for r in chosen),
                "skipped": sum(r["skipped"] for r in chosen), "precision": est["precision"], "ci": est["ci"],
            })
    patterns: Counter[str] = Counter()
    examples: dict[str, Verdict] = {}
    for v in verdicts:
        if v.status == DISAGREE:
            patterns[v.pattern] += 1
            examples.setdefault(v.pattern, v)
    unresolved: Counter[str] = Counter(v.pattern for v in verdicts if v.status == UNRESOLVED)
    return {
        "strata": rows, "by_kind": combined,
        "patterns": [{"pattern": p, "count": c, "example": asdict(examples[p])} for p, c in _top(patterns)],
        "oracle_unresolved_patterns": [{"pattern": p, "count": c} for p, c in _top(unresolved)],
    }


# -- running ------------------------------------------------------------------------------------
async def run_static(ws: Workspace, samples: dict[tuple[str, str], list[Edge]], n_symbols: int, seed: int,
                     progress: Any = None) -> tuple[list[Verdict], dict[str, Any]]:
    async with PyrightOracle(ws.root) as oracle:
        judge = Judge(ws, oracle)
        edges = [e for key in sorted(samples) for e in samples[key]]
        verdicts: list[Verdict] = []
        batch = 64
        for i in range(0, len(edges), batch):
            verdicts.extend(await asyncio.gather(*(judge.judge(e) for e in edges[i:i + batch])))
            if progress:
                progress(f"pyright definitions {min(i + batch, len(edges))}/{len(edges)}")
        recall = await static_recall(judge, ws, n_symbols, seed)
    return verdicts, recall


def copy_workspace(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=COPY_IGNORE, symlinks=True)
    return dst


def pyright_version() -> str:
    pkg = Path(__file__).resolve().parent / "pyright" / "node_modules" / "pyright" / "package.json"
    try:
        return str(json.loads(pkg.read_text(encoding="utf-8")).get("version", "?"))
    except (OSError, ValueError):
        return "?"


def verify(root: Path, sample: int = 50, seed: int = 0, trace_cmd: str | None = None,
           static: bool = True, progress: Any = None, work: Path | None = None, jedi: bool = False) -> dict[str, Any]:
    """The whole measurement for one root; returns the JSON-able result."""
    root = root.resolve()
    with tempfile.TemporaryDirectory(prefix="ctx-verify-") as tmp_s:
        tmp = work if work is not None else Path(tmp_s)
        ws_root = copy_workspace(root, tmp / "ws" / root.name)
        index = WorkspaceIndex(ws_root, cache_dir=tmp / "cache")
        index.load_or_build()
        if jedi:
            if progress:
                progress("jedi refinement")
            from ctx_lsp.index.refine import refine_index

            stats = refine_index(index)
            del stats  # the edges are in the graph now, under resolver "jedi"
        ws = Workspace(ws_root, index)
        edges = sorted((e for e in index.graph.edges() if e.kind in CHECKED_KINDS),
                       key=lambda e: (e.kind, e.resolver, e.src, e.dst, e.path, e.line, e.col))
        population = Counter((e.kind, e.resolver) for e in edges)
        result: dict[str, Any] = {
            "root": root.name, "seed": seed, "sample": sample, "files": len(index.facts),
            "edges": {f"{k}/{r}": n for (k, r), n in sorted(population.items())},
            "pyright": pyright_version() if static else None, "jedi": jedi,
        }
        if static:
            samples = sample_edges(edges, index.facts, sample, seed)
            verdicts, recall = asyncio.run(run_static(ws, samples, sample, seed, progress))
            result["precision"] = summarize_precision(verdicts, dict(population))
            result["static_recall"] = recall
            result["verdicts"] = [asdict(v) for v in verdicts]
        if trace_cmd:
            if progress:
                progress(f"tracing: {trace_cmd}")
            run = run_traced(ws_root, trace_cmd, tmp / "trace")
            dyn = dynamic_recall(ws, run.calls, Binder(index.ws))
            dyn["command"] = " ".join(run.command)
            dyn["returncode"] = run.returncode
            dyn["traced_pairs"] = len(run.calls)
            result["dynamic_recall"] = dyn
        return result


# -- rendering ---------------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _ci(ci: list[float]) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def render_markdown(res: dict[str, Any]) -> str:
    out = [f"# Edge accuracy: {res['root']}", ""]
    out.append(f"{res['files']} files; sample {res['sample']} edges per (kind, resolver), seed {res['seed']}; "
               f"static oracle pyright {res.get('pyright') or 'not run'}; jedi refinement "
               f"{'on' if res.get('jedi') else 'off'}.")
    out.append("")
    prec = res.get("precision")
    if prec:
        out += ["## Precision (pyright's definition at the edge's site)", "",
                "Precision = agree / (agree + disagree); sites where pyright returned nothing are "
                "`oracle-unresolved` and do not count against the graph. Per-kind rows weight each resolver's "
                "sample by its share of the edges (Wilson 95% CI at the effective sample size).", "",
                "| kind | resolvers | edges | sampled | agree | disagree | oracle-unresolved | precision | 95% CI |",
                "|---|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in prec["by_kind"]:
            out.append(f"| {r['kind']} | {r['resolvers']} | {r['edges']} | {r['sampled']} | {r['agree']} | "
                       f"{r['disagree']} | {r['oracle_unresolved']} | {_pct(r['precision'])} | {_ci(r['ci'])} |")
        out += ["", "By resolver:", "",
                "| kind | resolver | edges | sampled | agree | disagree | oracle-unresolved | skipped | precision | 95% CI |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in prec["strata"]:
            out.append(f"| {r['kind']} | {r['resolver']} | {r['edges']} | {r['sampled']} | {r['agree']} | "
                       f"{r['disagree']} | {r['oracle_unresolved']} | {r['skipped']} | {_pct(r['precision'])} | "
                       f"{_ci(r['ci'])} |")
        out += ["", "### Most common disagreements", ""]
        if not prec["patterns"]:
            out.append("None in the sample.")
        for i, p in enumerate(prec["patterns"], 1):
            ex = p["example"]
            out.append(f"{i}. **{p['pattern']}** ({p['count']}) — e.g. `{ex['site']}` ours `{ex['dst']}`, "
                       f"pyright `{', '.join(ex['pyright']) or '—'}`")
        if prec["oracle_unresolved_patterns"]:
            out += ["", "Where pyright returned nothing: " + "; ".join(
                f"{p['pattern']} ({p['count']})" for p in prec["oracle_unresolved_patterns"]) + "."]
        out.append("")
    rec = res.get("static_recall")
    if rec:
        out += ["## Recall (pyright's outgoing calls of sampled functions/methods)", "",
                f"{rec['counts'].get('symbols', 0)} symbols. Calls pyright finds into workspace functions/classes "
                "that the graph lacks are misses (property reads and calls leaving the workspace are not counted).",
                "", "| kind | pyright calls | found | missed | recall | 95% CI |", "|---|---:|---:|---:|---:|---|"]
        for kind in (*CALL_KINDS, "all"):
            r = rec[kind]
            out.append(f"| {kind} | {r['expected']} | {r['found']} | {r['expected'] - r['found']} | "
                       f"{_pct(r['recall'])} | {_ci(r['ci'])} |")
        out += ["", "Found through: " + "; ".join(f"{k}: {v}" for k, v in rec["counts"].items() if "found (" in k)
                + ". Not counted: " + "; ".join(f"{k}: {v}" for k, v in rec["counts"].items()
                                                 if "expected" not in k and "found" not in k) + ".", ""]
        if rec["patterns"]:
            out += ["Missed calls by pattern:", ""]
            for i, p in enumerate(rec["patterns"], 1):
                ex = p["example"]
                out.append(f"{i}. **{p['pattern']}** ({p['count']}) — e.g. `{ex['caller']}` -> `{ex['callee']}`")
            out.append("")
    dyn = res.get("dynamic_recall")
    if dyn:
        out += ["## Recall on executed calls (runtime trace of the test suite)", "",
                f"Command: `{dyn['command']}` (exit code {dyn['returncode']}); {dyn['traced_pairs']} distinct "
                "traced code pairs, mapped to distinct (caller, callee) node pairs below. *Strict*: the caller "
                "has a CALLS edge to the callee, or INSTANTIATES of the constructor's class (or of a subclass "
                "inheriting it), or a REFERENCES edge for a property getter. *Graph*: strict, or (+decorator) the "
                "decorator's call filed under the decorated nested def or a call into a decorator's wrapper "
                "whose decorated def the caller CALLS, or (+dispatch) CALLS to a method the callee OVERRIDES, "
                "or (+reference) REFERENCES to a callback that ran from a builtin.", "",
                "| callers | executed pairs | direct | +decorator | +dispatch | +reference | recall (strict) | "
                "95% CI | recall (graph) | 95% CI |", "|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]
        for group in ("source callers", "test callers", "all"):
            r = dyn[group]
            h = r["found"]
            out.append(f"| {group} | {r['pairs']} | {h['direct']} | {h['decorator']} | {h['dispatch']} | "
                       f"{h['reference']} | {_pct(r['recall_strict'])} | {_ci(r['ci_strict'])} | "
                       f"{_pct(r['recall'])} | {_ci(r['ci'])} |")
        if dyn["excluded"]:
            out += ["", "Not counted: " + "; ".join(f"{k}: {v}" for k, v in dyn["excluded"].items()) + "."]
        fp = dyn.get("flow_precision")
        if fp and fp["edges"]:
            out += ["", f"`ast-flow` edges (calls of parameters and stored callbacks; pyright cannot judge them): "
                        f"{fp['edges']}; {fp['caller_ran']} have a caller that ran, and the trace saw "
                        f"{fp['confirmed']} of those calls: precision {_pct(fp['precision'])} {_ci(fp['ci'])} "
                        "(a lower bound: a registered callback the tests never dispatched counts against it)."]
            if fp.get("unseen_by_caller"):
                out += ["", "Callers with the most unseen `ast-flow` edges: " + "; ".join(
                    f"`{caller}` ({n})" for caller, n in fp["unseen_by_caller"]) + "."]
        out += ["", "Missed calls by pattern:", ""]
        for i, p in enumerate(dyn["patterns"], 1):
            ex = p["example"]
            out.append(f"{i}. **{p['pattern']}** ({p['count']}) — e.g. `{ex['caller']}` -> `{ex['callee']}`")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_accuracy_section(json_path: str | Path | dict[str, Any]) -> str:
    """A short "Graph accuracy" section for the evaluate report, from a verify-edges JSON result (a path,
    or the already-loaded dict; `{"results": [...]}` holding several roots' results also works)."""
    res = json_path if isinstance(json_path, dict) else json.loads(Path(json_path).read_text(encoding="utf-8"))
    results = res["results"] if isinstance(res, dict) and "results" in res else [res]
    out = ["## Graph accuracy", "",
           "Edge precision against pyright's definitions and recall against pyright's call hierarchy and a "
           "runtime trace of the test suite (`python -m benchmark_gen verify-edges`).", "",
           "| root | kind | precision | 95% CI | static recall | executed calls recalled, source callers "
           "(strict / graph) |", "|---|---|---:|---|---:|---:|"]
    for r in results:
        rec = r.get("static_recall") or {}
        dyn = (r.get("dynamic_recall") or {}).get("source callers") or {}
        for row in (r.get("precision") or {}).get("by_kind", []):
            if row["resolvers"] != "all":
                continue
            kind = row["kind"]
            srec = (rec.get(kind) or {}).get("recall") if kind in CALL_KINDS else None
            drec = (f"{_pct(dyn.get('recall_strict'))} / {_pct(dyn.get('recall'))}"
                    if kind == EdgeKind.CALLS.value and dyn else "—")
            out.append(f"| {r['root']} | {kind} | {_pct(row['precision'])} | {_ci(row['ci'])} | {_pct(srec)} | "
                       f"{drec} |")
    return "\n".join(out) + "\n"


def run_verify_edges(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if not root.is_dir():
        print(f"verify-edges: not a directory: {root}", file=sys.stderr)
        return 2
    static = not getattr(args, "no_pyright", False)
    if static and langserver_path() is None:
        print("verify-edges: pyright is not installed; run `npm ci --prefix benchmark_gen/pyright` "
              "(or pass --no-pyright for the dynamic oracle only)", file=sys.stderr)
        return 2

    def progress(msg: str) -> None:
        print(f"verify-edges: {msg}", file=sys.stderr, flush=True)

    result = verify(root, sample=args.sample, seed=args.seed, trace_cmd=args.trace_cmd, static=static,
                    progress=progress, jedi=not getattr(args, "no_jedi", False))
    text = render_markdown(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if not args.out:
        sys.stdout.write(text)
    return 0
