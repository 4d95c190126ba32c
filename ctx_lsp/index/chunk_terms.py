"""Term counts of a file's symbol chunks, the documents of the chunk BM25 index (retrieval/lexical.py).

Computed once per file version at extraction (so in the extraction workers) and cached with the
facts, packed: tokenizing every chunk again was 1.5 s of the first query after a Django warm start.
A chunk is one symbol (name, qualified name, signature, docstring, identifiers, string literals and
path words) or the module itself; class attributes are covered by their class's chunk.
"""

from __future__ import annotations

from ctx_lsp.index.facts import FileFacts, pack_records, unpack_records
from ctx_lsp.index.model import symbol_id
from ctx_lsp.retrieval.text import term_counts  # the one tokenizer of lexical search; imports nothing of ours


def module_chunk_text(path: str, doc: str, words: str) -> str:
    return f"{path} {doc} {words}"


def chunk_texts(facts: FileFacts) -> list[tuple[str, str]]:
    """(node id, text) per chunk, the module's first."""
    out = [(facts.path, module_chunk_text(facts.path, facts.doc, facts.words))]
    for d in facts.defs:
        if d.kind == "variable" and "." in d.qual:
            continue  # class attributes are covered by their class's chunk
        text = f"{d.qual} {d.qual} {d.signature} {d.doc} {d.doc} {d.words} {facts.path}"
        out.append((symbol_id(facts.path, d.qual), text))
    return out


def chunk_term_counts(facts: FileFacts) -> bytes:
    """Every chunk's (node id, {term: count}), packed (facts.pack_records)."""
    return pack_records([[node_id, dict(term_counts(text))] for node_id, text in chunk_texts(facts)])


def unpack_chunk_terms(packed: bytes) -> list[tuple[str, dict[str, int]]]:
    return [(node_id, tf) for node_id, tf in unpack_records(packed)]
