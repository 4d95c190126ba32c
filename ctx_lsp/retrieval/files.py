"""File ranking: whole-file BM25, the scope prior, and the fusion of file and symbol evidence.

BM25 over whole files is strong on issue text (it sees comments, docstrings and every identifier),
so the file ranking keeps it as one input and adds what the graph grounds: named and bound symbols,
traceback frames, literals and their typed neighbours, each file scored by its best candidates.
Code in the project's importable packages outranks examples, docs, benchmarks, build and setup
scripts and vendored copies unless the task names them (`scope_prior`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from ctx_lsp.bind import Workspace
from ctx_lsp.extract import FileFacts, is_test_path
from ctx_lsp.retrieval.lexical import EPSILON, K1, B
from ctx_lsp.retrieval.score import Candidate
from ctx_lsp.retrieval.text import terms

PERIPHERAL = 0.5  # prior of code outside the importable packages
VENDORED = 0.6
_PERIPHERAL_DIRS = re.compile(
    r"(?:^|/)(?:examples?|demos?|docs?|documentation|benchmarks?|bench|asv_bench|scripts?|tools|utils?/scripts|"
    r"build|dist|release|ci|\.github|\.circleci|tutorials?|galleries|sandbox|contrib/scripts)/")
_VENDORED_DIRS = re.compile(r"(?:^|/)(?:_?vendor(?:ed)?|externals?|extern|third_party|thirdparty|_vendored)/")
_SCRIPTS = re.compile(r"(?:^|/)(?:setup|conftest|conf|noxfile|fabfile|tasks|manage|versioneer|bootstrap)\.py$")


class FileLexicalIndex:
    """BM25 (Okapi, rank-bm25's parameters) over whole files, from their persisted term counts."""

    def __init__(self) -> None:
        self.tf: dict[str, dict[str, int]] = {}
        self.length: dict[str, int] = {}
        self.postings: dict[str, set[str]] = {}
        self.total = 0

    def set_file(self, facts: FileFacts | None, path: str) -> None:
        old = self.tf.pop(path, None)
        if old is not None:
            self.total -= self.length.pop(path)
            for t in old:
                holders = self.postings.get(t)
                if holders is not None:
                    holders.discard(path)
                    if not holders:
                        del self.postings[t]
        if facts is None or not facts.terms:
            return
        self.tf[path] = facts.terms
        n = sum(facts.terms.values())
        self.length[path] = n
        self.total += n
        for t in facts.terms:
            self.postings.setdefault(t, set()).add(path)

    def search(self, query: str, keep: Callable[[str], bool] | None = None, top: int = 50) -> list[tuple[str, float]]:
        q = Counter(terms(query))
        n = len(self.tf)
        if not q or not n:
            return []
        avgdl = self.total / n
        mean_idf = math.log(2)  # rank-bm25 floors negative idf at EPSILON * the mean idf; approximated
        scores: dict[str, float] = {}
        for term, mult in sorted(q.items()):
            holders = self.postings.get(term)
            if not holders:
                continue
            df = len(holders)
            idf = math.log(n - df + 0.5) - math.log(df + 0.5)
            if idf <= 0:
                idf = EPSILON * mean_idf
            for p in holders:
                f = self.tf[p][term]
                s = idf * f * (K1 + 1) / (f + K1 * (1 - B + B * self.length[p] / avgdl))
                scores[p] = scores.get(p, 0.0) + s * mult
        ranked = sorted(((p, s) for p, s in scores.items() if keep is None or keep(p)), key=lambda kv: (-kv[1], kv[0]))
        return ranked[:top]


def scope_prior(ws: Workspace, named: Callable[[str], bool]) -> Callable[[str], float]:
    """Importable package code 1.0; scripts, examples, docs, benchmarks, build files and files outside
    any package PERIPHERAL; vendored copies VENDORED; unless `named(path)` (the task names it)."""
    packaged = ws.package_dirs
    cache: dict[str, float] = {}

    def prior(path: str) -> float:
        hit = cache.get(path)
        if hit is not None:
            return hit
        value = 1.0
        if not named(path):
            if _PERIPHERAL_DIRS.search(path) or _SCRIPTS.search(path) or (not _in_package(path, packaged)
                                                                           and not is_test_path(path)):
                value = PERIPHERAL
            elif _VENDORED_DIRS.search(path):
                value = VENDORED
        cache[path] = value
        return value

    return prior


def _in_package(path: str, packaged: set[str]) -> bool:
    """Inside a package: some ancestor directory has an `__init__.py` (namespace portions count)."""
    folder = path.rpartition("/")[0]
    while folder:
        if folder in packaged:
            return True
        folder = folder.rpartition("/")[0]
    return False


W_FILE_LEX = 1.0
W_FILE_CAND = 1.0
W_FILE_SECOND = 0.25  # a file's second-best candidate: several grounded symbols in one file agree


def rank_files(ranked: list[Candidate], lexical: list[tuple[str, float]], prior: Callable[[str], float],
               top: int = 20) -> list[dict[str, Any]]:
    """Files, best first: W_FILE_LEX * whole-file BM25 (relative to the best file) + W_FILE_CAND * the
    file's best candidate (relative to the best candidate) + a share of its second best, times the
    file's scope prior. Reasons name each contribution. Deterministic (ties by path)."""
    best_lex = lexical[0][1] if lexical else 0.0
    by_file: dict[str, list[Candidate]] = {}
    for c in ranked:
        path = c.node_id.split("::", 1)[0]
        if path.startswith("commit:") or ":" in path and not path.endswith(".py"):
            continue
        by_file.setdefault(path, []).append(c)
    best_cand = max((c.score for c in ranked), default=0.0) or 1.0
    scores: dict[str, float] = {}
    reasons: dict[str, list[dict[str, Any]]] = {}
    for path, s in lexical:
        w = W_FILE_LEX * s / best_lex if best_lex else 0.0
        scores[path] = w
        reasons[path] = [{"via": "file-bm25", "weight": round(w, 4)}]
    for path, cs in by_file.items():
        w = W_FILE_CAND * cs[0].score / best_cand
        if len(cs) > 1:
            w += W_FILE_SECOND * W_FILE_CAND * cs[1].score / best_cand
        scores[path] = scores.get(path, 0.0) + w
        top_reason = cs[0].reasons[0].via if cs[0].reasons else "candidate"
        reasons.setdefault(path, []).append({"via": f"symbols ({top_reason})", "from": cs[0].node_id,
                                             "weight": round(w, 4)})
    out: list[dict[str, Any]] = []
    for path, s in scores.items():
        p = prior(path)
        rs = reasons[path]
        if p != 1.0:
            rs = rs + [{"via": "scope-prior", "weight": p}]
        out.append({"path": path, "score": round(s * p, 4), "reasons": rs})
    out.sort(key=lambda d: (-float(d["score"]), str(d["path"])))
    return out[:top]
