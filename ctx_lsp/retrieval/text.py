"""Words: identifier splitting, stemming and stopwords shared by the planner and lexical search."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import Counter
from functools import lru_cache

import Stemmer  # PyStemmer: the Snowball stemmers compiled; the same stems as snowballstemmer, ~20x faster

_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

STOPWORDS = frozenset("""
a an the of to in on for and or but is are was were be been being it its this that these those with by from at as
into onto over under about what which who whom whose where when why how does do did done doing can could should
would will shall may might must i we you he she they me us my our your their his her them there here than then so
if else not no yes all any some each every more most much many few other such only own same too very just also
via per within without up down out off again further once both either neither nor find show give get tell list me
code function functions method methods class classes file files module modules use uses used using make makes
let please want need needs named called call calls""".split())

# the stopwords that are words of code too ("file name", "call back", "class name" join into identifiers)
_CODE_WORDS = frozenset("""find show give get tell list code function functions method methods class classes file
files module modules use uses used using make makes let want need needs named called call calls""".split())
_FUNCTION_WORDS = STOPWORDS - _CODE_WORDS

_STEMMERS = threading.local()  # a stemmer keeps its word in the object: one per thread


# what text never holds much of: control characters but tab and line breaks, C1 controls, and what
# bytes that did not decode became (U+FFFD, or lone surrogates with errors="surrogateescape")
_NOT_TEXT = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd\ud800-\udfff]")


NOT_TEXT = "the query is not text (binary data: control characters or undecodable bytes)"


def looks_binary(text: str) -> bool:
    """Whether `text` is binary data read as text (a file piped by mistake): more than a tenth of it
    control characters or undecodable bytes. A NUL or two in a pasted issue is still text."""
    return len(_NOT_TEXT.findall(text)) > max(8, len(text) // 10)


def identifier_form(name: str) -> str:
    """A name as Python reads identifiers (NFKC, PEP 3131): `cálculo` typed decomposed (NFD, as macOS
    file names and some terminals give it) is the name the code defines."""
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def composed(text: str) -> str:
    """Text with its accents composed (NFC): a word typed decomposed reads as one word, and nothing
    else changes (NFKC would also turn `µ` into `μ`, which a quoted message must keep)."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def split_identifier(name: str) -> list[str]:
    """`merge_environmentSettings` -> ["merge", "environment", "settings"] (lower case)."""
    out: list[str] = []
    for part in name.split("_"):
        if not part:
            continue
        out.extend(p.lower() for p in _CAMEL.findall(part))
    return out


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """Porter2 (Snowball English) stem of a lower-cased word: "merges" and "merge" meet at "merg"."""
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = Stemmer.Stemmer("english", 0)  # no cache of its own: stem() has one
    return str(stemmer.stemWord(word.lower()))


@lru_cache(maxsize=200_000)
def _ident_terms(ident: str, keep_stopwords: bool) -> tuple[str, ...]:
    subs = split_identifier(ident)
    out = [ident.lower()] if len(subs) > 1 else []
    out.extend(stem(s) for s in subs if len(s) >= 2 and (keep_stopwords or s not in STOPWORDS))
    return tuple(out)


def identifiers(text: str) -> list[str]:
    """The identifier-shaped words of a text, in order (what `terms` splits into index terms)."""
    return _WORD.findall(text)


def terms(text: str, keep_stopwords: bool = False) -> list[str]:
    """Index terms of free text or code: stemmed identifier sub-words plus whole lower-cased identifiers."""
    out: list[str] = []
    for ident in _WORD.findall(text):
        out.extend(_ident_terms(ident, keep_stopwords))
    return out


# two words of prose side by side ("file name", "time stamp", "call back"), each a whole word of 3+ letters
_WORD_PAIR = re.compile(r"(?<![\w.])([A-Za-z]{3,})(?=[ \t]+([A-Za-z]{3,})(?![\w.]))")
MIN_COMPOUND = 6  # shorter joins ("setup", "into") are words of their own


def compounds(text: str) -> list[str]:
    """Stems of two adjacent prose words written as one, each once ("file name" -> "filenam"): code
    names as one identifier (`secure_filename`, `timestamp`, `callback`) what prose spells as two.
    A join no code uses has no postings and so no effect."""
    out: list[str] = []
    for m in _WORD_PAIR.finditer(text):
        a, b = m.group(1).lower(), m.group(2).lower()
        joined = a + b
        if a in _FUNCTION_WORDS or b in _FUNCTION_WORDS or len(joined) < MIN_COMPOUND:
            continue
        if (t := stem(joined)) not in out:
            out.append(t)
    return out


def query_terms(text: str, joined: bool = True) -> list[str]:
    """The terms a query searches for: `terms`, then, for a question, its `compounds` that are not
    terms already. Not for task text (a pasted issue, or its title: `joined` False): there most
    adjacent words of its prose name nothing, and their joins moved the dev split's files (rank 1 lost
    on 4 issues, gained on 1)."""
    # evidence imports nothing of ours: imported here, text.py stays a leaf module at import time
    from ctx_lsp.retrieval.evidence import is_task_text

    out = terms(text)
    if not joined or is_task_text(text):
        return out
    have = set(out)
    out.extend(t for t in compounds(text) if t not in have)
    return out


def term_counts(text: str, keep_stopwords: bool = False) -> Counter[str]:
    """`Counter(terms(text))`, computed per distinct identifier: code repeats its names, so this is
    several times faster on whole files and symbol chunks."""
    out: Counter[str] = Counter()
    for ident, n in Counter(_WORD.findall(text)).items():
        for t in _ident_terms(ident, keep_stopwords):
            out[t] += n
    return out
