"""Shared helpers of the benchmark: identifier words, stable hashing, opening an index, token counts.

Everything here is deterministic and independent of the checkout path: hashes are taken over
workspace-relative paths and file contents only.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ctx_lsp import __version__ as CTX_VERSION
from ctx_lsp.index.workspace import WorkspaceIndex

SCHEMA = "ctx-lsp-bench/1"
TOOL_VERSION = f"ctx-lsp {CTX_VERSION}"

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SUBWORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_WORD = re.compile(r"[A-Za-z0-9]+")


def subwords(identifier: str) -> list[str]:
    """Lower-cased sub-words of an identifier: snake_case and CamelCase (HTTPAdapter -> http, adapter)."""
    out: list[str] = []
    for part in identifier.split("_"):
        out.extend(m.group(0).lower() for m in _SUBWORD.finditer(part))
    return out


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words of free text (no identifier splitting)."""
    return [w.lower() for w in _WORD.findall(text)]


def code_tokens(text: str) -> list[str]:
    """Tokens for lexical retrieval: each identifier lower-cased plus its sub-words (when it has several)."""
    out: list[str] = []
    for m in _IDENT.finditer(text):
        ident = m.group(0)
        parts = subwords(ident)
        low = ident.lower().strip("_")
        if low:
            out.append(low)
        if len(parts) > 1:
            out.extend(parts)
    return out


def stem(w: str) -> str:
    """A light suffix stripper, enough to catch `sessions`/`session` and `merges`/`merge` as the same word."""
    for suffix, repl in (("ies", "y"), ("ing", ""), ("ers", ""), ("er", ""), ("ed", ""), ("es", ""), ("s", "")):
        if len(w) > len(suffix) + 2 and w.endswith(suffix):
            return w[: -len(suffix)] + repl
    return w


def leaks(text: str, forbidden: Iterable[str]) -> list[str]:
    """The forbidden identifier sub-words that occur in `text` (case-insensitive, whole words).

    Sub-words of three letters or more also match through a light stem (`settings` ~ `setting`),
    so a plural or a verb form of a name counts as a leak. Words of one or two letters match exactly.
    """
    forb = {f.lower() for f in forbidden if f}
    if not forb:
        return []
    stems = {stem(f): f for f in forb if len(f) >= 3}
    found: set[str] = set()
    for w in words(text):
        if w in forb:
            found.add(w)
        elif len(w) >= 3 and stem(w) in stems:
            found.add(stems[stem(w)])
        elif len(w) >= 4 and (hit := _prefix_form(w, forb)):
            found.add(hit)
        else:
            # a question word that is itself an identifier (e.g. `merge_environment`) leaks through its parts
            for part in subwords(w):
                if part in forb:
                    found.add(part)
    return sorted(found)


def _prefix_form(w: str, forb: set[str]) -> str | None:
    """A forbidden word of 4+ letters that `w` extends or shortens by at most 3 letters (merge/merges)."""
    for f in forb:
        if len(f) >= 4 and abs(len(w) - len(f)) <= 3 and (w.startswith(f) or f.startswith(w)):
            return f
    return None


def stable_hash(*parts: object) -> int:
    """A 64-bit hash that is the same on every machine and Python run (unlike hash())."""
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        h.update(str(p).encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return int.from_bytes(h.digest(), "big")


def files_digest(index: WorkspaceIndex) -> str:
    """A digest of the indexed files: their relative paths and content digests, sorted."""
    h = hashlib.blake2b(digest_size=16)
    for path in sorted(index.facts):
        h.update(f"{path}\0{index.facts[path].digest}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def git_commit(root: Path) -> str | None:
    """HEAD of the git work tree whose top level is `root`, else None.

    A root inside someone else's work tree (a fixture directory in this repository) has no commit of
    its own: recording the enclosing repository's HEAD would make the benchmark depend on where the
    tree was checked out.
    """
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10)
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != root.resolve():
            return None
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = head.stdout.strip()
    return sha if head.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", sha) else None


def open_index(root: Path, cache_dir: Path | None) -> WorkspaceIndex:
    """The index as the engine opens it: with the COVERS (tests) and TOUCHED (git) producers attached."""
    from ctx_lsp.engine import Engine

    engine = Engine(root, cache_dir=cache_dir)
    engine.open()
    return engine.index


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path` through a temporary file in the same directory and
    os.replace, so an interrupted run leaves the old file or none, never half of a new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; the file gets the mode open() would give
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def read_text(root: Path, rel: str) -> str:
    try:
        data = (root / rel).read_bytes()
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def _load_counter():  # type: ignore[no-untyped-def]
    try:
        from ctx_lsp.retrieval.tokens import count_tokens  # the engine's own offline counter

        return count_tokens, "ctx_lsp.retrieval.tokens.count_tokens"
    except ImportError:
        return (lambda text: (len(text) + 3) // 4), "chars/4"


def token_counter():  # type: ignore[no-untyped-def]
    """(count_tokens, name): the engine's counter when it is importable, else chars/4 rounded up."""
    return _load_counter()
