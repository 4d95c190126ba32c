"""`python -m benchmark_gen reuse-check OLD NEW`: how a checkout from tree OLD to tree NEW (two versions
of one project) extracts its modified files, in one process, three ways per file: a whole extraction,
facts built from the old version's kept top-level statements (index/statement_reuse.py), and whether
the two are equal. Prints counts (modified, built from kept statements, declined, unequal: must be 0)
and seconds (whole extraction of every modified file against the reuse path, which extracts a
declined file whole). Exits 1 when any built facts differ from the whole extraction.

`--bindings` also checks the update end to end: a copy of OLD indexed from scratch, turned into NEW and
refreshed (re-bound files keep their unchanged site groups, index/bind.py), then compared with an index
built from scratch on the same files: every file's facts (each compared field), every binding (edges,
counts, unresolved sites, dependency keys, flows, site groups) and the graph (nodes and edges). A
binding compared with a fresh one on the updated facts alone would miss facts the update got wrong.
Any difference counts as a failure.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import fields
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


_BINDING_FIELDS = ("edges", "internal", "external", "unresolved", "deps", "flows", "groups")
_COMPARED = tuple(f.name for f in fields(FileFacts) if f.compare)  # what FileFacts equality compares


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
                               "bindings": len(index.bindings), "facts_unequal": [], "bindings_unequal": [],
                               "graph_unequal": []}
        index.wait_saved()
        scratch = WorkspaceIndex(tree, cache_dir=tmp / "scratch")
        scratch.load_or_build()
        for rel in sorted(index.facts.keys() | scratch.facts.keys()):
            a, b = index.facts.get(rel), scratch.facts.get(rel)
            field = "presence" if a is None or b is None else next((f for f in _COMPARED if getattr(a, f) != getattr(b, f)), None)
            if field is not None:
                out["facts_unequal"].append({"path": rel, "field": field})
        for rel in sorted(index.bindings.keys() | scratch.bindings.keys()):
            ga, gb = index.bindings.get(rel), scratch.bindings.get(rel)
            field = ("presence" if ga is None or gb is None
                     else next((f for f in _BINDING_FIELDS if getattr(ga, f) != getattr(gb, f)), None))
            if field is not None:
                out["bindings_unequal"].append({"path": rel, "field": field})
        (nodes, edges), (want_nodes, want_edges) = index.graph.snapshot(), scratch.graph.snapshot()
        for what, got_set, want_set in (("node", nodes, want_nodes), ("edge", edges, want_edges)):
            out["graph_unequal"] += [{"what": what, "extra": str(x)} for x in sorted(map(str, got_set - want_set))[:20]]
            out["graph_unequal"] += [{"what": what, "missing": str(x)} for x in sorted(map(str, want_set - got_set))[:20]]
        scratch.wait_saved()
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
            print(f"the updated index against a scratch build: {len(res['facts_unequal'])} files' facts, "
                  f"{len(res['bindings_unequal'])} of {res['bindings']} bindings and {len(res['graph_unequal'])} graph "
                  f"nodes or edges unequal; update {res['update_s']:.2f} s (bind {res['bind_s']:.2f} s)")
            for u in res["facts_unequal"]:
                print(f"  UNEQUAL FACTS {u['path']}: {u['field']}", file=sys.stderr)
            for u in res["bindings_unequal"]:
                print(f"  UNEQUAL BINDING {u['path']}: {u['field']}", file=sys.stderr)
            for u in res["graph_unequal"]:
                print(f"  UNEQUAL GRAPH {u}", file=sys.stderr)
    failed = res["unequal"] or res.get("facts_unequal") or res.get("bindings_unequal") or res.get("graph_unequal")
    return 1 if failed else 0
