"""The published lexical baselines of SWE-bench localization: BM25 over files and over def/class chunks.

Corpus: the `.py` files of the tree minus test files (`is_swe_test_path`). Query and documents are
tokenized with `ctx_lsp.retrieval.text.terms` (stemmed identifier sub-words). Chunks: one per class
(its own lines: header, docstring, attributes; not its methods) and one per function or method (all
of its lines, nested defs included); module-level code is in no chunk, as in the published
baseline, except that a file which does not parse is one chunk without a symbol (it ranks as a
file, never as a function). Files rank by their best chunk.
Only documents scoring above zero are ranked; ties break by path, then by position in the file.
Per-file tokens are cached by blob id, so moving to the next commit re-tokenizes changed files only.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from rank_bm25 import BM25Okapi

from benchmark_gen.swebench_layout import Entry
from ctx_lsp.retrieval.text import terms


def is_swe_test_path(path: str, repo: str) -> bool:
    """The published corpus filter: a path containing "test" (for pytest, whose every path says
    pytest, only the file name counts)."""
    if repo == "pytest-dev/pytest":
        return "test" in path.rsplit("/", 1)[-1]
    return "test" in path


@dataclass
class FileDoc:
    tokens: list[str]
    chunks: list[tuple[str | None, list[str]]]  # (qualname or None for module level, tokens)


def chunk_file(text: str) -> list[tuple[str | None, str]]:
    """(qualname, text) chunks of one file, in file order; a file that does not parse is one chunk
    without a symbol (so it can still rank as a file)."""
    lines = text.splitlines()
    spans = chunk_lines(text)
    if spans is None:
        return [(None, text)]
    return [(q, "\n".join(lines[i - 1] for i in ls)) for q, ls in spans]


def chunk_lines(text: str) -> list[tuple[str, list[int]]] | None:
    """(qualname, 1-based lines) of each chunk in file order (see chunk_file); None when the file
    does not parse."""
    lines = text.splitlines()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    out: list[tuple[str, list[int]]] = []

    def span(n: ast.AST) -> tuple[int, int]:
        decos = [d.lineno for d in getattr(n, "decorator_list", [])]
        return min([n.lineno] + decos), n.end_lineno or n.lineno  # type: ignore[attr-defined]

    def own_lines(start: int, end: int, children: list[tuple[int, int]]) -> list[int]:
        covered = {i for s, e in children for i in range(s, e + 1)}
        return [i for i in range(start, min(end, len(lines)) + 1) if i not in covered]

    def defs_in(body: list[ast.stmt]) -> list[ast.stmt]:
        found: list[ast.stmt] = []
        for stmt in body:  # defs under if/try at class or module level still belong to it
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append(stmt)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for sub in getattr(stmt, field, []) or []:
                        if isinstance(sub, ast.ExceptHandler):
                            found.extend(defs_in(sub.body))
                        elif isinstance(sub, ast.stmt):
                            found.extend(defs_in([sub]))
        return found

    def walk(body: list[ast.stmt], prefix: str) -> list[tuple[int, int]]:
        spans = []
        for d in defs_in(body):
            s, e = span(d)
            spans.append((s, e))
            qual = f"{prefix}{d.name}"  # type: ignore[attr-defined]
            if isinstance(d, ast.ClassDef):
                at = len(out)
                out.append((qual, []))  # the class comes before its members
                out[at] = (qual, own_lines(s, e, walk(d.body, qual + ".")))
            else:
                out.append((qual, list(range(s, min(e, len(lines)) + 1))))
        return spans

    walk(tree.body, "")
    return out


class BaselineCorpus:
    """BM25 models over one repository's tree, kept up to date across commits."""

    def __init__(self, repo: str) -> None:
        self.repo = repo
        self.docs: dict[str, tuple[str, FileDoc]] = {}  # path -> (blob id, doc)
        self._file_bm25: BM25Okapi | None = None
        self._chunk_bm25: BM25Okapi | None = None
        self.paths: list[str] = []
        self.chunk_keys: list[tuple[str, str | None]] = []

    def update(self, tree: Path, entries: dict[str, Entry]) -> int:
        """Bring the corpus to the tree described by `entries`; returns how many files were re-read."""
        wanted = {p: blob for p, (_, blob) in entries.items()
                  if p.endswith(".py") and not is_swe_test_path(p, self.repo)}
        changed = 0
        for p in list(self.docs):
            if p not in wanted:
                del self.docs[p]
                changed += 1
        for p, blob in wanted.items():
            if p in self.docs and self.docs[p][0] == blob:
                continue
            try:
                text = (tree / p).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            chunks = [(q, terms(t)) for q, t in chunk_file(text)]
            self.docs[p] = (blob, FileDoc(terms(text), chunks))
            changed += 1
        if changed or self._file_bm25 is None:
            self.paths = sorted(self.docs)
            self.chunk_keys = [(p, q) for p in self.paths for q, _ in self.docs[p][1].chunks]
            file_docs = [self.docs[p][1].tokens or ["\0"] for p in self.paths] or [["\0"]]
            chunk_docs = [toks or ["\0"] for p in self.paths for _, toks in self.docs[p][1].chunks] or [["\0"]]
            self._file_bm25 = BM25Okapi(file_docs)
            self._chunk_bm25 = BM25Okapi(chunk_docs)
        return changed

    def rank_files(self, query: str) -> list[str]:
        """Files by BM25 over whole files, best first."""
        assert self._file_bm25 is not None
        if not self.paths:
            return []
        scores = self._file_bm25.get_scores(terms(query))
        order = sorted(range(len(self.paths)), key=lambda i: (-scores[i], self.paths[i]))
        return [self.paths[i] for i in order if scores[i] > 0]

    def rank_chunks(self, query: str) -> tuple[list[str], list[tuple[str, str]]]:
        """(files ranked by their best chunk, (path, qualname) functions ranked by chunk), best first."""
        assert self._chunk_bm25 is not None
        if not self.chunk_keys:
            return [], []
        scores = self._chunk_bm25.get_scores(terms(query))
        order = sorted(range(len(self.chunk_keys)), key=lambda i: (-scores[i], self.chunk_keys[i][0], i))
        files: list[str] = []
        seen: set[str] = set()
        funcs: list[tuple[str, str]] = []
        for i in order:
            if scores[i] <= 0:
                break
            p, q = self.chunk_keys[i]
            if p not in seen:
                seen.add(p)
                files.append(p)
            if q is not None:
                funcs.append((p, q))
        return files, funcs
