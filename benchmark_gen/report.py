"""Markdown tables and a bar chart of an evaluation report (the dict `evaluate` returns)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from benchmark_gen.common import write_atomic
from benchmark_gen.strategies import LABELS


def _m(entry: dict[str, Any], key: str, ci: bool = False) -> str:
    v = entry.get(key)
    if v is None:
        return "-"
    if isinstance(v, dict):
        s = f"{v['mean']:.3f}"
        return s + f" [{v['lo']:.2f}, {v['hi']:.2f}]" if ci else s
    return f"{v:.0f}" if key == "tokens_mean" else f"{v:.1f}"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _main_table(agg: dict[str, Any], ks: list[int]) -> list[str]:
    headers = ["strategy", "n"] + [f"R@{k}" for k in ks] + [f"ALL@{ks[-1]}", f"ANY@{ks[0]}", "MRR", "TES",
                                                           "SpanR", "tokens", "p50 ms", "p95 ms"]
    rows = []
    for name, e in agg.items():
        rows.append([LABELS.get(name, name), str(e["n"])] + [_m(e, f"R@{k}", ci=True) for k in ks]
                    + [_m(e, f"ALL@{ks[-1]}"), _m(e, f"ANY@{ks[0]}"), _m(e, "MRR", ci=True), _m(e, "TES"),
                       _m(e, "SpanR"), _m(e, "tokens_mean"), _m(e, "latency_p50_ms"), _m(e, "latency_p95_ms")])
    return _table(headers, rows)


def _cross_table(groups: dict[str, dict[str, Any]], metric: str) -> list[str]:
    names: list[str] = []
    for g in groups.values():
        names += [n for n in g if n not in names]
    headers = ["strategy"] + [f"{k} (n={next(iter(v.values()))['n'] if v else 0})" for k, v in groups.items()]
    rows = []
    for n in names:
        rows.append([LABELS.get(n, n)] + [_m(groups[k].get(n, {}), metric) for k in groups])
    return _table(headers, rows)


def render_markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    ks = s["k"]
    hdr = report["benchmark"]["header"]
    res = report["results"]
    big = f"R@{ks[-1]}"
    out = [f"# Retrieval benchmark: {report['benchmark']['file']}", "",
           f"- benchmark: schema {hdr.get('schema')}, {hdr.get('tool_version')}, commit {hdr.get('commit')}, "
           f"files digest {hdr.get('files_digest')}"
           + ("" if report["benchmark"]["digest_matches"] else " (**the workspace changed since generation**)"),
           f"- questions: {hdr.get('counts', {}).get('relations')}",
           f"- engine budget {s['budget']} tokens; baselines return at most {s['cap']} files; tokens counted with "
           f"{s['token_counter']}; 95% percentile bootstrap intervals ({s['bootstrap_resamples']} resamples, seed "
           f"{s['bootstrap_seed']}).", ""]
    skipped = [st for st in report["strategies"] if st["status"] != "ok"]
    if skipped:
        out.append("Rows not run: " + "; ".join(f"{LABELS.get(st['name'], st['name'])}: {st['reason']}"
                                                 for st in skipped) + ".")
        out.append("")
    out += ["## Relation lane (all phrasings)", ""] + _main_table(res["relation"]["overall"], ks) + [""]
    if res["relation"]["by_relation"]:
        out += [f"### {big} per relation", ""] + _cross_table(res["relation"]["by_relation"], big) + [""]
        out += ["### MRR per relation", ""] + _cross_table(res["relation"]["by_relation"], "MRR") + [""]
        out += [f"### {big} per phrasing", ""] + _cross_table(res["relation"]["by_phrasing"], big) + [""]
    if res["ctx"]["overall"]:
        out += ["## CTX lane", ""] + _main_table(res["ctx"]["overall"], ks) + [""]
        out += [f"### {big} per trigger", ""] + _cross_table(res["ctx"]["by_trigger"], big) + [""]
    if res["impact"]["overall"]:
        out += ["## Change-impact lane", ""] + _main_table(res["impact"]["overall"], ks) + [""]
        out += [f"### {big} per instruction", ""] + _cross_table(res["impact"]["by_kind"], big) + [""]
        groups = {g: v for g, v in res["impact"]["by_group"].items() if v}
        out += [f"### {big} per gold group (recall of that group's files)", ""] + _cross_table(groups, big) + [""]
    if res["repobench"]:
        out += ["## RepoBench-R lane (candidate snippets)", ""]
        headers = ["strategy"] + [f"{st} {m}" for st in res["repobench"] for m in ("R@1", "R@5", "MRR")]
        names = list(next(iter(res["repobench"].values())))
        rows = [[LABELS.get(n, n)] + [_m(res["repobench"][st][n], m) for st in res["repobench"]
                                      for m in ("R@1", "R@5", "MRR")] for n in names]
        out += _table(headers, rows) + [""]
    if report["paired"]:
        out += [f"## Paired tests: {LABELS.get(s['reference'])} minus each row", "",
                "diff = mean per-question difference, [95% bootstrap interval], p = sign-flip permutation; "
                "`better`/`worse` only when the interval excludes zero and p < 0.05.", ""]
        headers = ["scope", "against"] + [f"{m} diff [CI] p" for m in ("R@10", "MRR")] + ["verdict (R@10)"]
        rows = []
        for scope, others in report["paired"].items():
            for other, ms in others.items():
                cells = []
                for m in ("R@10", "MRR"):
                    if m in ms:
                        d = ms[m]
                        cells.append(f"{d['diff']:+.3f} [{d['lo']:+.2f}, {d['hi']:+.2f}] p={d['p']:.3f}")
                    else:
                        cells.append("-")
                rows.append([scope, LABELS.get(other, other)] + cells + [ms.get("R@10", {}).get("verdict", "-")])
        out += _table(headers, rows) + [""]
    if report.get("edges"):
        from benchmark_gen.verify_report import render_accuracy_section

        try:
            out += [render_accuracy_section(report["edges"]), ""]
        except (KeyError, TypeError, ValueError):
            # not a verify-edges result after all: show what it holds rather than fail the report
            out += ["## Graph accuracy (verify-edges)", ""]
            out += [f"- {key}: {val}" for key, val in _flat(report["edges"])] + [""]
    return "\n".join(out)


def _flat(d: Any, prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    if isinstance(d, dict) and depth < 3:
        for k in sorted(d):
            out += _flat(d[k], f"{prefix}.{k}" if prefix else str(k), depth + 1)
    elif isinstance(d, (int, float, str, bool)) or d is None:
        out.append((prefix, d))
    return out[:80]


def render_png(report: dict[str, Any], path: Path) -> bool:
    """A bar chart of R@k (largest k) with intervals per strategy: relation lane, CTX lane, hidden group."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ks = report["settings"]["k"]
    metric = f"R@{ks[-1]}"
    res = report["results"]
    panels = [("relation lane", res["relation"]["overall"]), ("CTX lane", res["ctx"]["overall"]),
              ("impact: hidden group", res["impact"]["by_group"].get("hidden", {}))]
    panels = [(t, a) for t, a in panels if a]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.8), squeeze=False)
    for ax, (title, agg) in zip(axes[0], panels, strict=True):
        names = list(agg)
        means = [agg[n][metric]["mean"] for n in names]
        err = [[agg[n][metric]["mean"] - agg[n][metric]["lo"] for n in names],
               [agg[n][metric]["hi"] - agg[n][metric]["mean"] for n in names]]
        colors = ["#4c72b0" if n.startswith("engine_") else "#999999" for n in names]
        ax.bar(range(len(names)), means, yerr=err, color=colors, capsize=3)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([LABELS.get(n, n) for n in names], rotation=60, ha="right", fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{title}: {metric}")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_atomic(path, buf.getvalue())
    return True
