"""Working and episodic memory: what the user has open or edited, and what was asked and delivered.

Semantic memory is the graph and its indices. Episodic memory is persisted per workspace in the cache
directory as JSON lines, bounded, so TEMPORAL_HISTORY queries work across restarts.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_EPISODES = 200
MAX_WORKING = 50


@dataclass
class WorkingMemory:
    """Recently opened or edited files (and symbols), most recent last."""

    entries: dict[str, float] = field(default_factory=dict)  # path or node id -> last touch (epoch seconds)
    edits: set[str] = field(default_factory=set)

    def touch(self, key: str, edited: bool = False) -> None:
        self.entries.pop(key, None)
        self.entries[key] = time.time()
        if edited:
            self.edits.add(key)
        while len(self.entries) > MAX_WORKING:
            oldest = next(iter(self.entries))
            self.entries.pop(oldest)
            self.edits.discard(oldest)

    def recent(self, n: int = 10) -> list[str]:
        return list(reversed(list(self.entries)))[:n]


class EpisodicMemory:
    """A bounded log of queries and delivered items, persisted as JSON lines."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.episodes: list[dict[str, Any]] = []
        if path is not None and path.exists():
            try:
                for line in path.read_text(encoding="utf-8").splitlines():
                    if line.strip():
                        self.episodes.append(json.loads(line))
            except (OSError, ValueError) as exc:
                log.warning("episodic memory unreadable, starting empty: %s", exc)
                self.episodes = []
        self.episodes = self.episodes[-MAX_EPISODES:]

    def record(self, query: str, trigger: str, items: list[dict[str, Any]]) -> None:
        ep = {"t": round(time.time(), 3), "query": query, "trigger": trigger,
              "items": [{"path": i["path"], "symbol": i["symbol"], "start_line": i["start_line"]} for i in items[:10]]}
        self.episodes.append(ep)
        rewrite = len(self.episodes) > MAX_EPISODES
        self.episodes = self.episodes[-MAX_EPISODES:]
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if rewrite:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text("".join(json.dumps(e) + "\n" for e in self.episodes), encoding="utf-8")
                tmp.replace(self.path)
            else:
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(ep) + "\n")
        except OSError as exc:
            log.warning("could not persist episodic memory: %s", exc)
