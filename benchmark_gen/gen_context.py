"""What the benchmark generator and its lanes (`generate.py`, `lanes.py`) share: the index a benchmark
is generated from, with lazily parsed def infos and the seeded, content-keyed sampling."""

from __future__ import annotations

from typing import Any

from benchmark_gen.common import read_text
from benchmark_gen.phrasing import DefInfo, def_infos
from benchmark_gen.sampling import size_bucket, spread
from ctx_lsp.index.model import Node
from ctx_lsp.index.workspace import WorkspaceIndex


class Context:
    """The index plus lazily parsed per-file docstring/signature info."""

    def __init__(self, index: WorkspaceIndex, seed: int) -> None:
        self.index = index
        self.g = index.graph
        self.seed = seed
        self._infos: dict[str, dict[str, DefInfo]] = {}

    def digest(self, path: str) -> str:
        f = self.index.facts.get(path)
        return f.digest if f is not None else ""

    def info(self, n: Node) -> DefInfo | None:
        if n.path not in self._infos:
            self._infos[n.path] = def_infos(read_text(self.index.root, n.path))
        return self._infos[n.path].get(n.qualname or "")

    def module(self, path: str) -> str:
        mod = self.index.ws.canonical.get(path)
        if mod:
            return mod
        return path[:-3].replace("/", ".") if path.endswith(".py") else path

    def code_nodes(self) -> list[Node]:
        return sorted((n for n in self.g.nodes() if n.qualname is not None and n.path in self.index.facts),
                      key=lambda n: n.id)

    def gold_files(self, gold: list[dict[str, Any]]) -> list[str]:
        return sorted({s["path"] for s in gold if s["path"] in self.index.facts or s["path"].startswith("commit:")})

    def sample(self, items: list[Any], node_of: Any, limit: int) -> list[Any]:
        return spread(items, self.seed, lambda it: self.digest(node_of(it).path), lambda it: node_of(it).id,
                      lambda it: node_of(it).path, lambda it: size_bucket(node_of(it)), limit)
