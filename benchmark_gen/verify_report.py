"""`verify-edges` report: the precision summary per (kind, resolver) stratum, and the markdown report
(also the accuracy section of the benchmark report). No temporary path and no time in the text.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmark_gen.verify_precision import AGREE, DISAGREE, SKIPPED, UNRESOLVED, Verdict
from benchmark_gen.verify_recall import top_counts
from benchmark_gen.verify_sampling import CALL_KINDS, CHECKED_KINDS, resolver_family, stratified, wilson
from ctx_lsp.index.model import EdgeKind


# -- precision summary --------------------------------------------------------------------------
def summarize_precision(verdicts: list[Verdict], population: dict[tuple[str, str], int]) -> dict[str, Any]:
    by_stratum: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for v in verdicts:
        by_stratum[(v.kind, v.resolver)][v.status] += 1
    rows: list[dict[str, Any]] = []
    for (kind, resolver), pop in sorted(population.items()):
        if kind not in CHECKED_KINDS:
            continue
        c = by_stratum.get((kind, resolver), Counter())
        judged = c[AGREE] + c[DISAGREE]
        rows.append({
            "kind": kind, "resolver": resolver, "edges": pop, "sampled": sum(c.values()), "agree": c[AGREE],
            "disagree": c[DISAGREE], "oracle_unresolved": c[UNRESOLVED], "skipped": c[SKIPPED],
            "precision": c[AGREE] / judged if judged else None, "ci": list(wilson(c[AGREE], judged)),
        })
    combined = []
    for kind in CHECKED_KINDS:
        for fam in (None, "ast-*", "jedi"):
            chosen = [r for r in rows if r["kind"] == kind and (fam is None or resolver_family(r["resolver"]) == fam)]
            if not chosen or (fam is not None and not any(r["edges"] for r in chosen)):
                continue
            est = stratified([(r["edges"], r["agree"], r["agree"] + r["disagree"]) for r in chosen])
            combined.append({
                "kind": kind, "resolvers": fam or "all", "edges": sum(r["edges"] for r in chosen),
                "sampled": sum(r["sampled"] for r in chosen), "agree": sum(r["agree"] for r in chosen),
                "disagree": sum(r["disagree"] for r in chosen),
                "oracle_unresolved": sum(r["oracle_unresolved"] for r in chosen),
                "skipped": sum(r["skipped"] for r in chosen), "precision": est["precision"], "ci": est["ci"],
            })
    patterns: Counter[str] = Counter()
    examples: dict[str, Verdict] = {}
    for v in verdicts:
        if v.status == DISAGREE:
            patterns[v.pattern] += 1
            examples.setdefault(v.pattern, v)
    unresolved: Counter[str] = Counter(v.pattern for v in verdicts if v.status == UNRESOLVED)
    return {
        "strata": rows, "by_kind": combined,
        "patterns": [{"pattern": p, "count": c, "example": asdict(examples[p])} for p, c in top_counts(patterns)],
        "oracle_unresolved_patterns": [{"pattern": p, "count": c} for p, c in top_counts(unresolved)],
    }


# -- rendering ---------------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


def _ci(ci: list[float]) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def render_markdown(res: dict[str, Any]) -> str:
    out = [f"# Edge accuracy: {res['root']}", ""]
    out.append(f"{res['files']} files; sample {res['sample']} edges per (kind, resolver), seed {res['seed']}; "
               f"static oracle pyright {res.get('pyright') or 'not run'}; jedi refinement "
               f"{'on' if res.get('jedi') else 'off'}.")
    out.append("")
    prec = res.get("precision")
    if prec:
        out += ["## Precision (pyright's definition at the edge's site)", "",
                "Precision = agree / (agree + disagree); sites where pyright returned nothing are "
                "`oracle-unresolved` and do not count against the graph. Per-kind rows weight each resolver's "
                "sample by its share of the edges (Wilson 95% CI at the effective sample size).", "",
                "| kind | resolvers | edges | sampled | agree | disagree | oracle-unresolved | precision | 95% CI |",
                "|---|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in prec["by_kind"]:
            out.append(f"| {r['kind']} | {r['resolvers']} | {r['edges']} | {r['sampled']} | {r['agree']} | "
                       f"{r['disagree']} | {r['oracle_unresolved']} | {_pct(r['precision'])} | {_ci(r['ci'])} |")
        out += ["", "By resolver:", "",
                "| kind | resolver | edges | sampled | agree | disagree | oracle-unresolved | skipped | precision | 95% CI |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in prec["strata"]:
            out.append(f"| {r['kind']} | {r['resolver']} | {r['edges']} | {r['sampled']} | {r['agree']} | "
                       f"{r['disagree']} | {r['oracle_unresolved']} | {r['skipped']} | {_pct(r['precision'])} | "
                       f"{_ci(r['ci'])} |")
        out += ["", "### Most common disagreements", ""]
        if not prec["patterns"]:
            out.append("None in the sample.")
        for i, p in enumerate(prec["patterns"], 1):
            ex = p["example"]
            out.append(f"{i}. **{p['pattern']}** ({p['count']}) — e.g. `{ex['site']}` ours `{ex['dst']}`, "
                       f"pyright `{', '.join(ex['pyright']) or '—'}`")
        if prec["oracle_unresolved_patterns"]:
            out += ["", "Where pyright returned nothing: " + "; ".join(
                f"{p['pattern']} ({p['count']})" for p in prec["oracle_unresolved_patterns"]) + "."]
        out.append("")
    rec = res.get("static_recall")
    if rec:
        out += ["## Recall (pyright's outgoing calls of sampled functions/methods)", "",
                f"{rec['counts'].get('symbols', 0)} symbols. Calls pyright finds into workspace functions/classes "
                "that the graph lacks are misses (property reads and calls leaving the workspace are not counted).",
                "", "| kind | pyright calls | found | missed | recall | 95% CI |", "|---|---:|---:|---:|---:|---|"]
        for kind in (*CALL_KINDS, "all"):
            r = rec[kind]
            out.append(f"| {kind} | {r['expected']} | {r['found']} | {r['expected'] - r['found']} | "
                       f"{_pct(r['recall'])} | {_ci(r['ci'])} |")
        out += ["", "Found through: " + "; ".join(f"{k}: {v}" for k, v in rec["counts"].items() if "found (" in k)
                + ". Not counted: " + "; ".join(f"{k}: {v}" for k, v in rec["counts"].items()
                                                 if "expected" not in k and "found" not in k) + ".", ""]
        if rec["patterns"]:
            out += ["Missed calls by pattern:", ""]
            for i, p in enumerate(rec["patterns"], 1):
                ex = p["example"]
                out.append(f"{i}. **{p['pattern']}** ({p['count']}) — e.g. `{ex['caller']}` -> `{ex['callee']}`")
            out.append("")
    dyn = res.get("dynamic_recall")
    if dyn:
        out += ["## Recall on executed calls (runtime trace of the test suite)", "",
                f"Command: `{dyn['command']}` (exit code {dyn['returncode']}); {dyn['traced_pairs']} distinct "
                "traced code pairs, mapped to distinct (caller, callee) node pairs below. *Strict*: the caller "
                "has a CALLS edge to the callee, or INSTANTIATES of the constructor's class (or of a subclass "
                "inheriting it), or a REFERENCES edge for a property getter. *Graph*: strict, or (+decorator) the "
                "decorator's call filed under the decorated nested def or a call into a decorator's wrapper "
                "whose decorated def the caller CALLS, or (+dispatch) CALLS to a method the callee OVERRIDES, "
                "or (+reference) REFERENCES to a callback that ran from a builtin.", "",
                "| callers | executed pairs | direct | +decorator | +dispatch | +reference | recall (strict) | "
                "95% CI | recall (graph) | 95% CI |", "|---|---:|---:|---:|---:|---:|---:|---|---:|---|"]
        for group in ("source callers", "test callers", "all"):
            r = dyn[group]
            h = r["found"]
            out.append(f"| {group} | {r['pairs']} | {h['direct']} | {h['decorator']} | {h['dispatch']} | "
                       f"{h['reference']} | {_pct(r['recall_strict'])} | {_ci(r['ci_strict'])} | "
                       f"{_pct(r['recall'])} | {_ci(r['ci'])} |")
        if dyn["excluded"]:
            out += ["", "Not counted: " + "; ".join(f"{k}: {v}" for k, v in dyn["excluded"].items()) + "."]
        fp = dyn.get("flow_precision")
        if fp and fp["edges"]:
            out += ["", f"`ast-flow` edges (calls of parameters and stored callbacks; pyright cannot judge them): "
                        f"{fp['edges']}; {fp['caller_ran']} have a caller that ran, and the trace saw "
                        f"{fp['confirmed']} of those calls: precision {_pct(fp['precision'])} {_ci(fp['ci'])} "
                        "(a lower bound: a registered callback the tests never dispatched counts against it)."]
            if fp.get("unseen_by_caller"):
                out += ["", "Callers with the most unseen `ast-flow` edges: " + "; ".join(
                    f"`{caller}` ({n})" for caller, n in fp["unseen_by_caller"]) + "."]
        out += ["", "Missed calls by pattern:", ""]
        for i, p in enumerate(dyn["patterns"], 1):
            ex = p["example"]
            out.append(f"{i}. **{p['pattern']}** ({p['count']}) — e.g. `{ex['caller']}` -> `{ex['callee']}`")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def render_accuracy_section(json_path: str | Path | dict[str, Any]) -> str:
    """A short "Graph accuracy" section for the evaluate report, from a verify-edges JSON result (a path,
    or the already-loaded dict; `{"results": [...]}` holding several roots' results also works)."""
    res = json_path if isinstance(json_path, dict) else json.loads(Path(json_path).read_text(encoding="utf-8"))
    results = res["results"] if isinstance(res, dict) and "results" in res else [res]
    out = ["## Graph accuracy", "",
           "Edge precision against pyright's definitions and recall against pyright's call hierarchy and a "
           "runtime trace of the test suite (`python -m benchmark_gen verify-edges`).", "",
           "| root | kind | precision | 95% CI | static recall | executed calls recalled, source callers "
           "(strict / graph) |", "|---|---|---:|---|---:|---:|"]
    for r in results:
        rec = r.get("static_recall") or {}
        dyn = (r.get("dynamic_recall") or {}).get("source callers") or {}
        for row in (r.get("precision") or {}).get("by_kind", []):
            if row["resolvers"] != "all":
                continue
            kind = row["kind"]
            srec = (rec.get(kind) or {}).get("recall") if kind in CALL_KINDS else None
            drec = (f"{_pct(dyn.get('recall_strict'))} / {_pct(dyn.get('recall'))}"
                    if kind == EdgeKind.CALLS.value and dyn else "—")
            out.append(f"| {r['root']} | {kind} | {_pct(row['precision'])} | {_ci(row['ci'])} | {_pct(srec)} | "
                       f"{drec} |")
    return "\n".join(out) + "\n"
