"""Literal index: string literals of the workspace matched against messages quoted in a task.

An issue quotes what the program printed: "The value of 'list_display[0]' refers to 'choice',
which is not a callable..." or an error code `admin.E108`. Those strings are literals (often format
strings) in the code that produced them. A literal is split at its placeholders (`%s`, `%(name)r`,
`{}`, `{name!r}`) into fixed fragments; a message matches when the literal's fixed words appear in
it (coverage of the literal), or when a quoted fragment appears inside one literal. Candidate
literals come from an inverted index of their rarer words, so matching costs what the message shares.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ctx_lsp.index.facts import FileFacts
from ctx_lsp.index.model import symbol_id

_PLACEHOLDER = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdifrxXegGc%]|\{[^{}]*\}")
_WORD = re.compile(r"[a-z0-9_]+(?:\.[a-z0-9_]+)*")
_CODE = re.compile(r"^(?:[a-z_]+\.)?[A-Z]{1,2}\d{3,4}$")
_KEY = re.compile(r"^-{0,2}[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+$")
MAX_KEY_HOLDERS = 12  # a key in more places than this is vocabulary, not a pointer
MIN_WORDS = 3
MAX_POSTINGS = 400  # a word in more literals than this is not used to find candidates


@dataclass(frozen=True, slots=True)
class Literal:
    node_id: str  # the symbol (or file) whose body holds it
    line: int
    text: str
    words: frozenset[str]
    code: bool


def literal_words(text: str) -> list[str]:
    return _WORD.findall(_PLACEHOLDER.sub(" ", text.lower()))


class LiteralIndex:
    def __init__(self) -> None:
        self.by_path: dict[str, list[Literal]] = {}
        self.postings: dict[str, set[Literal]] = {}
        self.codes: dict[str, list[Literal]] = {}
        self.keys: dict[str, list[Literal]] = {}  # option, setting and message names, without leading dashes

    def set_file(self, facts: FileFacts | None, path: str) -> None:
        for lit in self.by_path.pop(path, []):
            for w in lit.words:
                holders = self.postings.get(w)
                if holders is not None:
                    holders.discard(lit)
                    if not holders:
                        del self.postings[w]
            for table, key in ((self.codes, lit.text if lit.code else None), (self.keys, _key(lit.text))):
                if key is None:
                    continue
                table[key] = [x for x in table.get(key, []) if x is not lit]
                if not table[key]:
                    del table[key]
        if facts is None:
            return
        out: list[Literal] = []
        for scope, line, text in facts.literals:
            stripped = text.strip()
            code = bool(_CODE.match(stripped))
            key = _key(stripped)
            words = frozenset(literal_words(stripped)) if key is None else frozenset()
            if not code and key is None and len(words) < MIN_WORDS:
                continue
            lit = Literal(symbol_id(path, scope) if scope else path, line, stripped, words, code)
            out.append(lit)
            if code:
                self.codes.setdefault(stripped, []).append(lit)
            if key is not None:
                self.keys.setdefault(key, []).append(lit)
            for w in words:
                self.postings.setdefault(w, set()).add(lit)
        self.by_path[path] = out

    def match(self, message: str) -> list[tuple[Literal, float]]:
        """Literals a quoted message came from, with a strength in (0, 1]: the share of the literal's
        words the message holds (or of the message's words the literal holds, for a quoted part)."""
        words = set(literal_words(message))
        if len(words) < 2:
            return []
        found: set[Literal] = set()
        for w in words:
            holders = self.postings.get(w)
            if holders is not None and len(holders) <= MAX_POSTINGS:
                found |= holders
        out: list[tuple[Literal, float]] = []
        for lit in found:
            shared = len(lit.words & words)
            if shared < 2:
                continue
            of_literal = shared / len(lit.words)
            of_message = shared / len(words)
            strength = max(of_literal if shared >= MIN_WORDS else 0.0, of_message if len(words) >= MIN_WORDS else 0.0)
            if strength >= 0.6:
                out.append((lit, strength))
        out.sort(key=lambda x: (-x[1], -len(x[0].words), x[0].node_id, x[0].line))
        return out[:20]

    def match_key(self, key: str) -> list[Literal]:
        """Literals that are this option, setting or message name (`--ignore-paths`, `unused-import`);
        none when the name is everywhere."""
        k = _key(key.strip())
        hits = self.keys.get(k, []) if k is not None else []
        return hits if len(hits) <= MAX_KEY_HOLDERS else []

    def match_code(self, code: str) -> list[Literal]:
        """Literals that are this error code (`admin.E108`), or end with it after a namespace."""
        hits = list(self.codes.get(code, ()))
        if not hits and "." not in code:
            hits = [lit for text, lits in sorted(self.codes.items()) if text.endswith("." + code) for lit in lits]
        return hits[:20]


def _key(text: str) -> str | None:
    return text.lstrip("-") if _KEY.match(text) else None
