"""File ranking: whole-file BM25, the scope prior, and the fusion of file and symbol evidence.

BM25 over whole files is strong on issue text (it sees comments, docstrings and every identifier),
so the file ranking keeps it as one input and adds what the graph grounds: named and bound symbols,
traceback frames, literals and their typed neighbours, each file scored by its best candidates.
Code in the project's importable packages outranks examples, docs, benchmarks, build and setup
scripts and vendored copies unless the task names them (`scope_prior`).
"""

from __future__ import annotations

import heapq
import keyword
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from ctx_lsp.index.facts import FileFacts, is_test_path
from ctx_lsp.index.modules import Workspace
from ctx_lsp.retrieval.lexical import EPSILON, K1, B, top_hits
from ctx_lsp.retrieval.postings import Postings
from ctx_lsp.retrieval.score import Candidate
from ctx_lsp.retrieval.text import query_terms, split_identifier, stem

PERIPHERAL = 0.5  # prior of code outside the importable packages
VENDORED = 0.6
_PERIPHERAL_DIRS = re.compile(
    r"(?:^|/)(?:examples?|demos?|docs?|documentation|benchmarks?|bench|asv_bench|scripts?|tools|utils?/scripts|"
    r"build|dist|release|ci|\.github|\.circleci|tutorials?|galleries|sandbox|contrib/scripts)/")
_VENDORED_DIRS = re.compile(r"(?:^|/)(?:_?vendor(?:ed)?|externals?|extern|third_party|thirdparty|_vendored)/")
_SCRIPTS = re.compile(r"(?:^|/)(?:setup|conftest|conf|noxfile|fabfile|tasks|manage|versioneer|bootstrap)\.py$")


class FileLexicalIndex:
    """BM25 (Okapi, rank-bm25's parameters) over whole files, from their persisted term counts; the
    postings can start from a snapshot (`snapshot`, `load`), as the chunk index's."""

    def __init__(self) -> None:
        self._facts: dict[str, FileFacts] = {}  # the facts indexed per path (their terms are read again only to drop them)
        self.length: dict[str, int] = {}
        self.postings = Postings()
        self.total = 0
        self.path_terms: dict[str, dict[str, float]] = {}  # path -> its words (file name words weigh 1, folders 0.5)
        self.path_postings: dict[str, set[str]] = {}
        self._norm: dict[str, float] | None = None  # see _norms; None once the index changes

    def set_file(self, facts: FileFacts | None, path: str) -> None:
        self._norm = None
        for w in self.path_terms.pop(path, {}):
            holders = self.path_postings.get(w)
            if holders is not None:
                holders.discard(path)
                if not holders:
                    del self.path_postings[w]
        old = self._facts.pop(path, None)
        terms = facts.terms if facts is not None else None
        old_terms: dict[str, int] = {}
        if old is not None:
            self.total -= self.length.pop(path)
            old_terms = old.terms
            # the terms it no longer holds; add_all sets the counts of the others
            self.postings.discard_all(path, [t for t in old_terms if not terms or t not in terms])
        if facts is None or not terms:
            return
        self._add(facts, path)
        # only the counts that changed: a checkout's changed file keeps ~90% of its terms' counts
        self.postings.add_all(path, {t: c for t, c in terms.items() if old_terms.get(t) != c} if old_terms else terms)

    def _add(self, facts: FileFacts, path: str, words: dict[str, float] | None = None, length: int | None = None) -> None:
        self._facts[path] = facts
        if words is None:
            words = path_words(path)
        self.path_terms[path] = words
        for w in words:
            self.path_postings.setdefault(w, set()).add(path)
        n = sum(facts.terms.values()) if length is None else length
        self.length[path] = n
        self.total += n

    def snapshot(self) -> dict[str, Any]:
        return {"postings": self.postings.snapshot(self.length.__contains__),
                "path_terms": dict(sorted(self.path_terms.items())), "lengths": dict(sorted(self.length.items()))}

    def load(self, snap: dict[str, Any], facts: Mapping[str, FileFacts], same: set[str], stale: set[str]) -> None:
        """Start an empty index from `snap` (see LexicalIndex.load). The files' term counts are not
        read: the postings hold them, and the snapshot each file's length."""
        self._norm = None
        words, lengths = snap["path_terms"], snap["lengths"]
        for p in sorted(same):
            if p in lengths:
                self._add(facts[p], p, words[p], int(lengths[p]))
        self.postings.load(snap["postings"], stale, lambda p: p)

    def _norms(self) -> dict[str, float]:
        """Per file, BM25's length normalisation `K1 * (1 - B + B * length / avgdl)`, kept until the
        index changes (a query reads it for every holder of every term)."""
        if self._norm is None:
            avgdl = self.total / len(self.length)
            self._norm = {p: K1 * (1 - B + B * n / avgdl) for p, n in self.length.items()}
        return self._norm

    def search(self, query: str, keep: Callable[[str], bool] | None = None, top: int = 50,
               joined: bool = True) -> list[tuple[str, float]]:
        """`joined` False: no joined prose words (`text.query_terms`), for task text's parts."""
        q = Counter(query_terms(query, joined))
        n = len(self.length)
        if not q or not n:
            return []
        norm = self._norms()
        mean_idf = math.log(2)  # rank-bm25 floors negative idf at EPSILON * the mean idf; approximated
        k1p1 = K1 + 1
        scores: defaultdict[str, float] = defaultdict(float)
        for term, mult in sorted(q.items()):
            holders = self.postings.get(term)
            if not holders:
                continue
            df = len(holders)
            idf = math.log(n - df + 0.5) - math.log(df + 0.5)
            if idf <= 0:
                idf = EPSILON * mean_idf
            for p, f in holders.items():
                scores[p] += idf * f * k1p1 / (f + norm[p]) * mult
        return top_hits(scores if keep is None else {p: s for p, s in scores.items() if keep(p)}, top)

    def identifier_matches(self, query: str, keep: Callable[[str], bool] | None = None) -> dict[str, float]:
        """Files holding the task's compound identifiers (`autodoc_typehints`, `getDefaultColumns`) as
        whole words, each weighted by its rarity over files: far more precise than their sub-words."""
        n = len(self.length) or 1
        compound = {ident.lower() for ident in _IDENT.findall(query) if len(split_identifier(ident)) > 1}
        scores: dict[str, float] = {}
        for t in sorted(compound):
            holders = self.postings.get(t)
            if not holders or len(holders) > 0.05 * n + 5:
                continue
            idf = math.log(n / len(holders))
            for p in holders:
                if keep is None or keep(p):
                    scores[p] = scores.get(p, 0.0) + idf
        return scores

    def rare_matches(self, query: str) -> dict[str, float]:
        """Files holding the task's rare words: a term of RARE_MIN_CHARS or more that at most RARE_FILES
        files of the workspace use (a setting, a message word, an unusual name) pins them, each
        holder getting 1/df. BM25 adds such a word to every common word of the task, and on a long
        issue the common words outweigh it."""
        scores: dict[str, float] = {}
        for t in sorted(set(query_terms(query))):
            if len(t) < RARE_MIN_CHARS:
                continue
            holders = self.postings.get(t)
            if not holders or len(holders) > RARE_FILES:
                continue
            share = 1.0 / len(holders)
            for p in holders:
                scores[p] = scores.get(p, 0.0) + share
        return scores

    def path_matches(self, query: str, keep: Callable[[str], bool] | None = None) -> dict[str, float]:
        """Files whose path words the task uses (`autodetector` for django/db/migrations/autodetector.py),
        each word weighted by its rarity over paths; file-name words count fully, folders half."""
        q = set(query_terms(query))
        n = len(self.path_terms) or 1
        scores: dict[str, float] = {}
        for w in sorted(q):
            holders = self.path_postings.get(w)
            if not holders:
                continue
            idf = math.log(n / len(holders))
            for p in holders:
                if keep is None or keep(p):
                    scores[p] = scores.get(p, 0.0) + idf * self.path_terms[p][w]
        return scores


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
RARE_FILES = 3  # a term in at most this many files is rare (rare_matches)
RARE_MIN_CHARS = 4  # shorter terms (stems of short words, numbers) are rare by accident
_GENERIC_PATH = frozenset({"init", "__init__", "py", "src", "lib", "core", "base", "util", "utils", "main"})


def path_words(path: str) -> dict[str, float]:
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    out: dict[str, float] = {}
    for i, part in enumerate(reversed(parts[-3:])):
        weight = 1.0 if i == 0 else 0.5
        if part == "__init__":
            continue
        for w in [part.lower()] + [stem(x) for x in split_identifier(part)]:
            if w and w not in _GENERIC_PATH and len(w) > 2:
                out[w] = max(out.get(w, 0.0), weight)
    return out


class ScopeMemo:
    """The scope of each path without the task's names, kept while the workspace's packages stay the
    same set (the index replaces the set when they change): a long task reaches a thousand files."""

    def __init__(self) -> None:
        self._packaged: set[str] | None = None
        self._values: dict[str, float] = {}

    def values(self, packaged: set[str]) -> dict[str, float]:
        if packaged is not self._packaged:
            self._packaged, self._values = packaged, {}
        return self._values


def scope_prior(ws: Workspace, named: Callable[[str], bool], memo: ScopeMemo | None = None) -> Callable[[str], float]:
    """Importable package code 1.0; scripts, examples, docs, benchmarks, build files, files no import
    can name and files outside any package PERIPHERAL; vendored copies VENDORED; unless `named(path)`
    (the task names it)."""
    packaged = ws.package_dirs
    base = (memo or ScopeMemo()).values(packaged)

    def prior(path: str) -> float:
        value = base.get(path)
        if value is None:
            value = base[path] = _scope(path, packaged)
        return value if value == 1.0 or not named(path) else 1.0

    return prior


def _scope(path: str, packaged: set[str]) -> float:
    if _PERIPHERAL_DIRS.search(path) or _SCRIPTS.search(path) or not _importable_name(path) or (
            not _in_package(path, packaged) and not is_test_path(path)):
        return PERIPHERAL
    if _VENDORED_DIRS.search(path):
        return VENDORED
    return 1.0


def _importable_name(path: str) -> bool:
    """Whether an import statement can name the file: `0003_add_field.py` (a migration), `run-me.py`
    (a script) cannot, so a framework or a shell loads them; they are data and entry points, not the
    package's code."""
    stem = path.rpartition("/")[2].removesuffix(".py")
    return stem.isidentifier() and not keyword.iskeyword(stem)


def _in_package(path: str, packaged: set[str]) -> bool:
    """Inside a package: some ancestor directory has an `__init__.py` (namespace portions count)."""
    folder = path.rpartition("/")[0]
    while folder:
        if folder in packaged:
            return True
        folder = folder.rpartition("/")[0]
    return False


# Evidence classes of a file: each is the best reason of that class among the file's candidates
# (relative to W_REF), plus whole-file BM25 relative to the best file. Weights were fitted on the
# SWE-bench development split (python -m benchmark_gen swebench), one weight per class.
WEIGHTS: dict[str, float] = {
    "file-bm25": 1.0,
    "file-bm25-rank": 0.5,
    "prose-bm25": 0.5,
    "title-bm25": 3.0,  # an issue's title is its most specific sentence
    "chunk-bm25": 1.0,
    "chunk-seed": 0.0,  # the same signal as chunk-bm25, from the seed step
    "identifier": 0.0,  # compound identifiers: already in the BM25 terms; no gain measured on its own
    "rare": 1.0,  # task words at most three files use: 1.0 fitted on the 407, and in 10 of 12 leave-one-repository-out folds
    "path": 2.0,
    "symbol": 0.75,
    "title-symbol": 1.5,
    "snippet": 1.5,
    "traceback": 0.75,
    "literal": 0.25,
    "edge": 0.75,
    "other": 0.25,
    "imports-near-top": 0.1,
    "folder-of-top": 0.5,
    "dense": 0.0,  # dense seeds: the dense file score below carries them
    "dense-file": 1.0,  # the optional dense generator (retrieval/dense.py): exp((cos - best) / T)
}
W_SECOND = 0.25  # a file's second-best candidate: several grounded symbols in one file agree
W_REF = 3.0  # a reason this strong (an exact, unambiguous name; a traceback frame) counts 1.0
CAP = 1.5


def reason_class(via: str) -> str:
    if via.startswith("symbol") or via == "member-of-described":
        return "symbol"
    if via.startswith("snippet"):
        return "snippet"
    if via == "traceback":
        return "traceback"
    if via.startswith("literal"):
        return "literal"
    if via == "bm25":
        return "chunk-seed"
    if via == "dense":
        return "dense"
    if "<-" in via or "->" in via or via == "hop-resolved":
        return "edge"
    return "other"


def file_features(ranked: list[Candidate], lexical: list[tuple[str, float]],
                  extra: dict[str, dict[str, float]] | None = None) -> dict[str, dict[str, float]]:
    """Per file, per evidence class: the strongest reason (relative to W_REF, capped), whole-file
    BM25 relative to the best file, and each `extra` file score relative to its best file."""
    feats: dict[str, dict[str, float]] = {}
    best_lex = lexical[0][1] if lexical else 0.0
    for path, score in lexical:
        feats[path] = {"file-bm25": score / best_lex if best_lex else 0.0}
    add_features(feats, extra or {})
    for c in ranked:
        path = c.node_id.split("::", 1)[0]
        if not path.endswith(".py"):
            continue  # commits
        f = feats.setdefault(path, {})
        for r in c.reasons:
            cls = reason_class(r.via)
            v = min(CAP, r.weight / W_REF)
            if v > f.get(cls, 0.0):
                f[cls] = v
        f["_best"] = max(f.get("_best", 0.0), c.score)
        f["_n"] = f.get("_n", 0) + 1
    return feats


def add_features(feats: dict[str, dict[str, float]], extra: dict[str, dict[str, float]]) -> None:
    """Add per-file scores as evidence classes, each relative to its best file."""
    for name, scores in extra.items():
        top = max(scores.values(), default=0.0)
        for path, score in scores.items():
            if top > 0:
                feats.setdefault(path, {})[name] = score / top


def rank_files(feats: dict[str, dict[str, float]], prior: Callable[[str], float], top: int = 20,
               weights: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Files, best first: the weighted sum of a file's evidence classes (file_features), times the
    file's scope prior. Each class's contribution is a reason. Deterministic (ties by path)."""
    w = weights or WEIGHTS
    # score every file, explain only the `top` kept: a long task reaches a thousand files
    scored: list[tuple[float, str]] = []
    for path, f in feats.items():
        score = sum(w.get(cls, 0.0) * v for cls, v in sorted(f.items()) if not cls.startswith("_"))
        scored.append((-round(score * prior(path), 4), path))
    out: list[dict[str, Any]] = []
    for neg, path in heapq.nsmallest(top, scored):
        parts = [(cls, v, w.get(cls, 0.0) * v) for cls, v in sorted(feats[path].items()) if not cls.startswith("_")]
        reasons: list[dict[str, Any]] = [{"via": cls, "value": round(v, 4), "weight": round(x, 4)}
                                         for cls, v, x in parts]
        p = prior(path)
        if p != 1.0:
            reasons.append({"via": "scope-prior", "weight": p})
        reasons.sort(key=lambda r: -float(r["weight"]))
        out.append({"path": path, "score": -neg, "reasons": reasons})
    return out
