"""Facts of file versions the index held before, kept by (path, content digest), so a checkout back to
them (a branch switched and back, a rebase undone, a stash popped) reuses them instead of extracting
the files again: extraction is about 60% of a cold index.

Facts are a pure function of (path, text) for one version of this code, and a cache written by other
code is discarded whole, so a reused entry equals a fresh extraction. Only versions read from disk
are kept (never an editor buffer). The store is bounded (PREVIOUS_FILES, PREVIOUS_BYTES: the oldest
versions go first) and persisted as the cache section SECTION, left packed until an update needs it.
"""

from __future__ import annotations

from ctx_lsp.index.facts import FileFacts, pack_records, unpack_records
from ctx_lsp.index.store import facts_from_wire, facts_to_wire

SECTION = "previous-facts"
PREVIOUS_FILES = 4096
PREVIOUS_BYTES = 64 << 20


class PreviousFacts:
    def __init__(self) -> None:
        self._entries: dict[str, bytes] = {}  # "path\0digest" -> packed facts wire, oldest first
        self._section: bytes | None = None  # as read from the cache, not unpacked yet
        self._bytes = 0

    def load(self, packed: bytes | None) -> None:
        # an empty store (msgpack's empty map) is none: a warm start then need not read every file
        # whose stat changed to look for versions it cannot hold
        self._entries, self._bytes, self._section = {}, 0, packed if packed and packed != b"\x80" else None

    def _unpacked(self) -> dict[str, bytes]:
        if self._section is not None:
            raw, self._section = self._section, None
            try:
                got = unpack_records(raw)
                loaded = {k: v for k, v in got.items() if isinstance(k, str) and isinstance(v, bytes)}
            except Exception:  # an unreadable section only costs the reuse
                loaded = {}
            loaded.update(self._entries)
            self._entries = loaded
            self._bytes = sum(map(len, loaded.values()))
        return self._entries

    def __bool__(self) -> bool:
        return self._section is not None or bool(self._entries)

    def remember(self, facts: FileFacts) -> None:
        entries = self._unpacked()
        key = f"{facts.path}\0{facts.digest}"
        old = entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old)
        raw = entries[key] = pack_records(facts_to_wire(facts))
        self._bytes += len(raw)
        while entries and (len(entries) > PREVIOUS_FILES or self._bytes > PREVIOUS_BYTES):
            self._bytes -= len(entries.pop(next(iter(entries))))

    def holds(self, path: str, digest: str) -> bool:
        return bool(self) and f"{path}\0{digest}" in self._unpacked()

    def take(self, path: str, digest: str) -> FileFacts | None:
        """The facts of `path` with this content, if kept (then no longer kept: the index holds them)."""
        entries = self._unpacked()
        raw = entries.pop(f"{path}\0{digest}", None)
        if raw is None:
            return None
        self._bytes -= len(raw)
        try:
            return facts_from_wire(unpack_records(raw))
        except Exception:
            return None

    def section(self) -> bytes:
        """The store for the cache, packed (as read when nothing changed it)."""
        if self._section is not None:
            return self._section
        return pack_records(self._entries)
