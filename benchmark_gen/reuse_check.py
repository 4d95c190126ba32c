"""`python -m benchmark_gen reuse-check OLD NEW`: how a checkout from tree OLD to tree NEW (two versions
of one project) extracts its modified files, in one process, three ways per file: a whole extraction,
facts built from the old version's kept top-level statements (index/statement_reuse.py), and whether
the two are equal. Prints counts (modified, built from kept statements, declined, unequal: must be 0)
and seconds (whole extraction of every modified file against the reuse path, which extracts a
declined file whole). Exits 1 when any built facts differ from the whole extraction.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ctx_lsp.index.discovery import discover
from ctx_lsp.index.extract import extract
from ctx_lsp.index.facts import FileFacts, content_digest, decode_source
from ctx_lsp.index.statement_reuse import reuse_statements

_FIELDS = ("defs", "imports", "sites", "literals", "flows", "all_names", "doc", "words", "tops", "terms",
           "chunk_terms", "errors", "lines")


def _first_difference(got: FileFacts, want: FileFacts) -> str:
    return next((f for f in _FIELDS if getattr(got, f) != getattr(want, f)), "?")


def check(old_root: Path, new_root: Path) -> dict[str, Any]:
    old_files, new_files = discover(old_root).files, discover(new_root).files
    out: dict[str, Any] = {"modified": 0, "reused": 0, "declined": 0, "unequal": [], "extract_s": 0.0,
                           "reuse_path_s": 0.0}
    for rel in sorted(set(old_files) & set(new_files)):
        a, b = (old_root / rel).read_bytes(), (new_root / rel).read_bytes()
        if a == b:
            continue
        out["modified"] += 1
        old = extract(rel, decode_source(a)[0])
        text, digest = decode_source(b)[0], content_digest(b)
        t = time.perf_counter()
        whole = extract(rel, text, digest)
        out["extract_s"] += time.perf_counter() - t
        t = time.perf_counter()
        got = reuse_statements(old, text, digest)
        if got is None:
            extract(rel, text, digest)
            out["declined"] += 1
        else:
            out["reused"] += 1
        out["reuse_path_s"] += time.perf_counter() - t
        if got is not None and got != whole:
            out["unequal"].append({"path": rel, "field": _first_difference(got, whole)})
    out["extract_s"] = round(out["extract_s"], 3)
    out["reuse_path_s"] = round(out["reuse_path_s"], 3)
    return out


def run_reuse_check(args: argparse.Namespace) -> int:
    res = check(Path(args.old).resolve(), Path(args.new).resolve())
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"{res['modified']} modified files: {res['reused']} built from kept statements, {res['declined']} "
              f"declined, {len(res['unequal'])} unequal; extraction {res['extract_s']:.2f} s whole, "
              f"{res['reuse_path_s']:.2f} s through statement reuse")
        for u in res["unequal"]:
            print(f"  UNEQUAL {u['path']}: {u['field']}", file=sys.stderr)
    return 1 if res["unequal"] else 0
