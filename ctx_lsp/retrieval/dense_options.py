"""The dense generator's options and the checks one-shot callers make before any query.

Apart from `dense.py` because `ctx-lsp context` runs these checks on every call, daemon or not:
importing the generator itself (facts, text, embedder, importlib.metadata) cost the CLI ~25 ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

BACKGROUND, CACHED, SYNC = "background", "cached", "sync"


@dataclass(frozen=True)
class DenseOptions:
    mode: str = BACKGROUND
    model_dir: str = ""  # "" = the default model package


def dense_wanted(model_dir: str | None = None) -> bool:
    """Whether a one-shot caller should set the generator up: a model was named, or the extra is
    installed (a cheap look-up; nothing heavy is imported)."""
    import importlib.util

    return bool(model_dir) or importlib.util.find_spec("sentence_transformers") is not None


def has_vectors(cache_dir: Path, model_dir: str | None = None) -> bool:
    """Whether `index --dense` left vectors of this model in the cache directory (no model is loaded)."""
    from ctx_lsp.retrieval.embedder import DenseUnavailable, resolve_model

    try:
        source = resolve_model(model_dir)
    except DenseUnavailable:
        return False
    return (cache_dir / "dense" / f"{source.slug}.npz").is_file()


def one_shot_options(cache_dir: Path, model_dir: str | None, off: bool) -> DenseOptions | None:
    """The options of a one-shot caller (`ctx-lsp context`, `ctx-lsp mcp`): the generator only once
    `index --dense` made the vectors (or a model was named), so a query never pays a full embedding pass."""
    if off or not dense_wanted(model_dir):
        return None
    if model_dir or has_vectors(cache_dir):
        return DenseOptions(CACHED, model_dir or "")
    return None
