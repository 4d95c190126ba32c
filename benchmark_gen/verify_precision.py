"""`verify-edges` precision: each sampled edge judged against pyright's `textDocument/definition` at
its site (`Judge`, `Verdict`: agree, disagree, oracle-unresolved, skipped, with the pattern seen).
"""

from __future__ import annotations

import ast
import asyncio
import re
from dataclasses import dataclass

from benchmark_gen.oracle_pyright import Loc, PyrightOracle
from benchmark_gen.verify_sampling import Workspace, chain_shape
from ctx_lsp.index.bind import Binder
from ctx_lsp.index.facts import Site
from ctx_lsp.index.model import RESOLVER_FLOW, Edge, EdgeKind, symbol_id

AGREE, DISAGREE, UNRESOLVED, SKIPPED = "agree", "disagree", "oracle-unresolved", "skipped"


CONCURRENCY = 8


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
