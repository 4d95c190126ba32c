"""Where a workspace's cache lives. Kept apart from `store` so light callers (the daemon client on the
one-shot CLI path) can find it without importing the index code."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import platformdirs

CACHE_ENV = "CTX_LSP_CACHE_DIR"


def default_cache_dir(root: Path) -> Path:
    """The cache directory of a workspace: keyed by its absolute path under the user's cache dir."""
    base = Path(os.environ[CACHE_ENV]) if os.environ.get(CACHE_ENV) else Path(platformdirs.user_cache_dir("ctx-lsp"))
    real = root.resolve()
    # the path's bytes as the file system holds them: a name that is not UTF-8 (a surrogate escape in
    # Python) hashes as well, and an ordinary path keys as it always did
    key = hashlib.sha1(os.fsencode(real)).hexdigest()[:16]
    name = os.fsencode(real.name).decode("utf-8", "replace")  # printable wherever the path is shown
    return base / f"{name}-{key}"
