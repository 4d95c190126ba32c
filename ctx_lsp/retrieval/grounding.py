"""Grounding task evidence in the graph: code snippets bound as virtual modules, traceback frames
mapped to workspace files.

A snippet (`>>> from astropy.utils import minversion`, a reproducer script) is extracted and bound
with the workspace's own binder, as a module that is not in the workspace: imports resolve through
the project's packages (re-exports, `__init__`, `__all__`), calls and attribute chains through
types and MROs. Nothing is written: the binder runs over a shallow overlay of the module table whose
caches are its own, so the graph, the index and the cache are the same after the query.
"""

from __future__ import annotations

import builtins
import copy
from collections import ChainMap
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctx_lsp.index.bind import Binder
from ctx_lsp.index.extract import extract
from ctx_lsp.index.model import EdgeKind, Node, python_qualname
from ctx_lsp.index.modules import Workspace, build_module_info
from ctx_lsp.retrieval.evidence import Frame
from ctx_lsp.retrieval.text import split_identifier

if TYPE_CHECKING:
    from ctx_lsp.index.graph import CodeGraph

_BUILTIN_NAMES = frozenset(dir(builtins))
TASK_DIR = "<task>"  # virtual paths of snippets: never a workspace path (no file is named like this)
MAX_SNIPPETS = 12
MAX_SNIPPET_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class Target:
    node_id: str
    via: str  # snippet-call, snippet-import, snippet-instantiate, snippet-inherit, snippet-ref, traceback
    weight: float  # relative strength in (0, 1]
    line: int  # line in the snippet (or frame index for tracebacks)


_VIA = {
    EdgeKind.CALLS.value: ("snippet-call", 1.0),
    EdgeKind.INSTANTIATES.value: ("snippet-instantiate", 0.9),
    EdgeKind.INHERITS.value: ("snippet-inherit", 0.9),
    EdgeKind.OVERRIDES.value: ("snippet-override", 0.9),
    EdgeKind.REFERENCES.value: ("snippet-ref", 0.7),
    EdgeKind.IMPORTS.value: ("snippet-import", 0.5),
}


def _overlay(ws: Workspace, path: str, module: str, text: str) -> Workspace:
    """A workspace that also holds one virtual module; the original's tables and caches are untouched."""
    facts = extract(path, text)
    info = build_module_info(facts, module)
    ov = copy.copy(ws)
    ov.info = ChainMap({path: info}, ws.info)  # type: ignore[assignment]
    ov._class_cache = ChainMap({}, ws._class_cache)  # type: ignore[assignment]
    ov._mro_active = set()
    return ov


def main_packages(ws: Workspace) -> list[str]:
    """Top-level packages of the workspace, largest first: what an issue's snippet is about when it
    forgets its imports (`x = symbols('x')` in a sympy issue)."""
    sizes: dict[str, int] = {}
    for path, module in ws.canonical.items():
        if "/" not in path or "." not in module:
            continue
        top = module.split(".")[0]
        if top in ws.modules and ws.modules[top].endswith("__init__.py") and "test" not in top:
            sizes[top] = sizes.get(top, 0) + 1
    return sorted(sizes, key=lambda t: (-sizes[t], t))


def bind_snippets(ws: Workspace, graph: CodeGraph, snippets: list[str],
                  find: Callable[[str], list[Node]] | None = None) -> list[Target]:
    """Targets named by code snippets: what their imports, calls, instantiations and subclasses
    resolve to in the workspace, in snippet order."""
    out: list[Target] = []
    packages = main_packages(ws)[:1]
    for i, code in enumerate(snippets[:MAX_SNIPPETS]):
        code = code[:MAX_SNIPPET_CHARS]
        if packages and f"import {packages[0]}" not in code and f"from {packages[0]}" not in code:
            # a snippet that never imports the project uses its names as the docs do (`from pkg import *`)
            code = f"from {packages[0]} import *\n{code}"
        path = f"{TASK_DIR}/snippet_{i}.py"
        try:
            ov = _overlay(ws, path, f"__ctx_task_{i}__", code)
            binding = Binder(ov).bind_file(path)
        except (RecursionError, MemoryError, ValueError):
            continue
        bound_at: set[tuple[int, int]] = set()
        for e in binding.edges:
            if e.kind == EdgeKind.CONTAINS.value or e.dst.startswith(TASK_DIR) or e.dst not in graph:
                continue
            via, w = _VIA.get(e.kind, ("snippet-ref", 0.5))
            if e.kind == EdgeKind.IMPORTS.value and e.extra == ("*",):
                continue  # the implicit star import names no one module
            bound_at.add((e.line, e.col))
            out.append(Target(e.dst, via, w, e.line))
        if find is None:
            continue
        # names the binder could not follow (an untyped receiver, a name the snippet never imports):
        # a distinctive name still points at the few symbols that have it
        local = set(ov.info[path].top)
        def named(found: list[Node], weight: float, line: int) -> bool:
            """The few symbols a name not bound points at (at most three), sharing `weight`."""
            if not 0 < len(found) <= 3:
                return False
            out.extend(Target(n.id, "snippet-name", weight / len(found), line) for n in found)
            return True

        for site in ov.info[path].facts.sites:
            if (site.line, site.col) in bound_at:
                continue
            head = site.chain[0].removesuffix("()")
            if len(site.chain) >= 2 and head[:1].isupper() and head not in local and head not in _BUILTIN_NAMES:
                # `Expression.compile("x")` with no import shown: a class's member, named by both names;
                # two names agreeing say as much as a bound call
                pair = f"{head}.{site.chain[1].removesuffix('()')}"
                if named([n for n in find(pair) if n.qualname and python_qualname(n.qualname).endswith(pair)],
                         1.0, site.line):
                    continue
            name = site.chain[-1].removesuffix("()")
            if len(site.chain) == 1 and name in local or name in _BUILTIN_NAMES or len(name) < 4:
                continue
            if not (len(split_identifier(name)) > 1 or name[:1].isupper()):
                continue  # `compile`, `get`: too common to name one symbol
            named([n for n in find(name) if n.name == name], 0.5, site.line)
    return out


def map_frames(frames: list[Frame], graph: CodeGraph, paths: list[str]) -> list[Target]:
    """Traceback frames inside the workspace, innermost first: a frame's path maps to the workspace
    file sharing the longest path suffix (at least the package directory and the file name:
    `.../site-packages/pkg/sub/mod.py` -> `pkg/sub/mod.py` or `src/pkg/sub/mod.py`); frames
    outside the workspace are ignored. The frame's function (else its line) names the symbol."""
    by_base: dict[str, list[str]] = {}
    for p in paths:
        by_base.setdefault(p.rsplit("/", 1)[-1], []).append(p)
    out: list[Target] = []
    seen: set[str] = set()
    inside = 0
    for f in reversed(frames):
        parts = [x for x in f.path.split("/") if x not in ("", ".")]
        if not parts:
            continue
        best: tuple[int, str] | None = None
        for cand in by_base.get(parts[-1], ()):
            cparts = cand.split("/")
            k = 0
            while k < min(len(parts), len(cparts)) and parts[-1 - k] == cparts[-1 - k]:
                k += 1
            if k >= 2 or (k == len(cparts) == 1 and len(parts) == 1):
                key = (k, cand)
                if best is None or key[0] > best[0] or (key[0] == best[0] and len(cand) < len(best[1])):
                    best = key
        if best is None:
            continue
        path = best[1]
        weight = 1.0 / (1 + 0.5 * inside)  # the innermost frame inside the project weighs most
        inside += 1
        node = None
        if f.function and f.function != "<module>":
            named = [n for n in graph.nodes_of_file(path) if n.name == f.function and n.qualname]
            if named:
                node = min(named, key=lambda n: abs(n.start_line - f.line))
        if node is None:
            node = graph.innermost(path, f.line)
        for nid in dict.fromkeys([node.id if node is not None else path, path]):
            if nid not in seen:
                seen.add(nid)
                out.append(Target(nid, "traceback", weight, inside))
    return out
