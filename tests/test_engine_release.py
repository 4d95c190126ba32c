"""A dropped engine's memory is freed: its index, with the producers that follow it (test coverage,
history, the jedi refiner), becomes garbage once nothing else holds it, and `collect_dropped` frees it
although the build froze its objects (`gc.freeze`)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from ctx_lsp.engine import Engine, collect_dropped
from ctx_lsp.index.refine import attach_refiner
from ctx_lsp.sources.coverage_data import coverage_for
from ctx_lsp.sources.history import history_for


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "shop.py").write_text(
        "class Cart:\n    def total(self):\n        return sum(self.items())\n\n"
        "    def items(self):\n        return [1, 2]\n", encoding="utf-8")
    (root / "tests").mkdir()
    (root / "tests" / "test_shop.py").write_text(
        "from pkg.shop import Cart\n\ndef test_total():\n    assert Cart().total() == 3\n", encoding="utf-8")
    return root


def test_a_dropped_engine_is_freed_with_what_follows_its_index(tmp_path: Path) -> None:
    engine = Engine(_tree(tmp_path / "ws"), cache_dir=tmp_path / "cache")
    engine.open()
    index = engine.index
    assert coverage_for(index) is not None and history_for(index) is not None  # attached by open()
    refiner = attach_refiner(index)
    assert attach_refiner(index) is refiner  # one per index
    assert engine.context_for({"query": "Cart total"})["items"]
    gone = weakref.ref(index)
    del engine, index, refiner
    gc.collect()  # frozen by the build: an ordinary collection does not reach it
    collect_dropped()
    assert gone() is None


def test_collecting_keeps_what_is_still_held(tmp_path: Path) -> None:
    engine = Engine(_tree(tmp_path / "ws"), cache_dir=tmp_path / "cache")
    engine.open()
    collect_dropped()
    assert coverage_for(engine.index) is not None
    assert engine.context_for({"query": "Cart total"})["items"]
