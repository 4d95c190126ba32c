"""Stemming from several threads at once (the server indexes workspace folders concurrently): a
stemmer keeps the word it works on in the object, so a shared one corrupts its words."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

from ctx_lsp.retrieval.text import stem

WORDS = [f"{base}{suffix}" for base in ("relational", "conditional", "generalization", "hopefulness",
                                         "operational", "sensitivity", "formalize", "electrical")
         for suffix in ("", "s", "ness", "ities", "izations", "fully", "ing", "ed")] * 40


def test_stem_gives_the_same_words_from_many_threads() -> None:
    uncached = stem.__wrapped__  # the lru cache would hide the race
    expected = [uncached(w) for w in WORDS]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: [uncached(w) for w in WORDS], range(8)))
    finally:
        sys.setswitchinterval(switch)
    assert all(r == expected for r in results)


def test_stem_is_porter2() -> None:
    # Snowball English (Porter2) outputs, its special cases included: the stems the cached indexes hold
    words = {"consigned": "consign", "generously": "generous", "skies": "sky", "dying": "die", "news": "news",
             "innings": "inning", "cared": "care", "generalization": "general", "merges": "merg"}
    assert {w: stem.__wrapped__(w) for w in words} == words
