"""`python -m benchmark_gen reuse-check OLD NEW`: how a checkout from tree OLD to tree NEW (two versions
of one project) extracts its modified files, in one process, three ways per file: a whole extraction,
facts built from the old version's kept top-level statements (index/statement_reuse.py), and whether
the two are equal. Prints counts (modified, built from kept statements, declined, unequal: must be 0)
and seconds (whole extraction of every modified file against the reuse path, which extracts a
declined file whole). Exits 1 when any built facts differ from the whole extraction.

`--bindings` also checks the binding side: a copy of OLD indexed from scratch, turned into NEW and
refreshed (re-bound files keep their unchanged site groups, index/bind.py), then every file's binding
compared with a fresh binding of the same workspace (edges, counts, unresolved sites, dependency keys,
flows, site groups); unequal bindings count as failures too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ctx_lsp.index.bind import Binder
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


_BINDING_FIELDS = ("edges", "internal", "external", "unresolved", "deps", "flows", "groups")


def check_bindings(old_root: Path, new_root: Path) -> dict[str, Any]:
    """The update's bindings against fresh ones on the same workspace (see the module doc)."""
    from benchmark_gen.speed import _sync_tree
    from ctx_lsp.index.workspace import WorkspaceIndex

    tmp = Path(tempfile.mkdtemp(prefix="ctx-lsp-reuse-check-"))
    try:
        tree = tmp / "tree"
        shutil.copytree(old_root, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        index = WorkspaceIndex(tree, cache_dir=tmp / "cache")
        index.load_or_build()
        _sync_tree(tree, new_root)
        t = time.perf_counter()
        index.refresh()
        out: dict[str, Any] = {"update_s": round(time.perf_counter() - t, 3), "bind_s": round(index.phases.get("bind", 0.0), 3),
                               "bindings": len(index.bindings), "bindings_unequal": []}
        binder = Binder(index.ws)
        for rel in sorted(index.bindings):
            got, want = index.bindings[rel], binder.bind_file(rel)
            field = next((f for f in _BINDING_FIELDS if getattr(got, f) != getattr(want, f)), None)
            if field is not None:
                out["bindings_unequal"].append({"path": rel, "field": field})
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_reuse_check(args: argparse.Namespace) -> int:
    res = check(Path(args.old).resolve(), Path(args.new).resolve())
    if args.bindings:
        res |= check_bindings(Path(args.old).resolve(), Path(args.new).resolve())
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        print(f"{res['modified']} modified files: {res['reused']} built from kept statements, {res['declined']} "
              f"declined, {len(res['unequal'])} unequal; extraction {res['extract_s']:.2f} s whole, "
              f"{res['reuse_path_s']:.2f} s through statement reuse")
        for u in res["unequal"]:
            print(f"  UNEQUAL {u['path']}: {u['field']}", file=sys.stderr)
        if args.bindings:
            print(f"bindings after the update: {res['bindings']}, {len(res['bindings_unequal'])} unequal to a fresh "
                  f"binding; update {res['update_s']:.2f} s (bind {res['bind_s']:.2f} s)")
            for u in res["bindings_unequal"]:
                print(f"  UNEQUAL BINDING {u['path']}: {u['field']}", file=sys.stderr)
    return 1 if res["unequal"] or res.get("bindings_unequal") else 0
