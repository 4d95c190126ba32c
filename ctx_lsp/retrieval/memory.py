"""Working and episodic memory: what the user has open or edited, and what was asked and delivered.

Semantic memory is the graph and its indices. Episodic memory is persisted per workspace in the cache
directory as JSON lines, bounded, so TEMPORAL_HISTORY queries work across restarts.
"""

from __future__ import annotations

import json
import logging
import os
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


def is_episode(ep: Any) -> bool:
    """Whether a decoded line has the shape `record` writes (retrieval reads `query` and `items`)."""
    return (isinstance(ep, dict) and isinstance(ep.get("query"), str) and isinstance(ep.get("items"), list)
            and all(isinstance(it, dict) and isinstance(it.get("path"), str)
                    and isinstance(it.get("symbol"), (str, type(None))) for it in ep["items"]))


SESSION_S = 3600.0  # episodes this recent are the session a bare name is read in (seeds.symbol_seeds)


def last_subject(episodes: list[dict[str, Any]], since: float | None = None) -> str | None:
    """What the latest answered query (at or after `since`, epoch seconds) was about (a node id): of
    the targets it named, the one its answer ranked first (a name several symbols share: the one the
    session was looking at), else its first target, else its first item."""
    for ep in reversed(episodes):
        if since is not None and not (isinstance(ep.get("t"), (int, float)) and ep["t"] >= since):
            return None
        items = [f"{it['path']}::{it['symbol']}" if it.get("symbol") else it["path"] for it in ep["items"]]
        targets = [t for t in ep.get("targets") or () if isinstance(t, str)]
        return next((i for i in items if i in targets), None) or next(iter(targets + items), None)
    return None


class EpisodicMemory:
    """A bounded log of queries and delivered items, persisted as JSON lines.

    A damaged file (a truncated write, foreign bytes, lines of another shape) keeps its good episodes:
    bad lines are dropped with one log line and the file is rewritten without them, so later appends
    do not land after a broken line.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.episodes: list[dict[str, Any]] = []
        if path is None:
            return
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("episodic memory unreadable, starting empty: %s", exc)
            return
        bad = 0
        for line in raw.split(b"\n"):
            if not line.strip():
                continue
            try:
                ep = json.loads(line.decode("utf-8"))
            except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError; RecursionError: nesting
                ep = None
            if is_episode(ep):
                self.episodes.append(ep)
            else:
                bad += 1
        self.episodes = self.episodes[-MAX_EPISODES:]
        if bad or (raw and not raw.endswith(b"\n")):
            log.warning("episodic memory damaged, dropped %d bad lines and kept %d episodes: %s",
                        bad, len(self.episodes), path)
            self._rewrite()

    def _rewrite(self) -> None:
        """Replace the file by the episodes held, atomically (a reader never sees half a file)."""
        assert self.path is not None
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        try:
            tmp.write_text("".join(json.dumps(e) + "\n" for e in self.episodes), encoding="utf-8")
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("could not persist episodic memory: %s", exc)

    def record(self, query: str, trigger: str, items: list[dict[str, Any]], targets: list[str] | None = None) -> None:
        """One answered query: its top items and the node ids it was about (`targets`, when it named
        them), which a follow-up ("and who calls it?") asks about again."""
        ep: dict[str, Any] = {
            "t": round(time.time(), 3), "query": query, "trigger": trigger,
            "items": [{"path": i["path"], "symbol": i["symbol"], "start_line": i["start_line"]} for i in items[:10]]}
        if targets:
            ep["targets"] = targets[:3]
        self.episodes.append(ep)
        rewrite = len(self.episodes) > MAX_EPISODES
        self.episodes = self.episodes[-MAX_EPISODES:]
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning("could not persist episodic memory: %s", exc)
            return
        if rewrite:
            self._rewrite()
            return
        try:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(ep) + "\n")
        except OSError as exc:
            log.warning("could not persist episodic memory: %s", exc)
