"""`python -m benchmark_gen swebench DATA.jsonl`: file and function localization on SWE-bench instances.

For each instance the repository is laid out at its base commit (one tree and one index cache per
repository under --work, instances visited in base-commit date order, so every visit after the first
is an incremental index update), the engine is asked for a ContextPack of the issue text, and the
two published lexical baselines (BM25 over files, over functions) rank the same tree. Gold files and
functions come from the gold patch (`swebench_gold`); scores are computed from the per-instance
ranks (`swebench_report`).

Selection: `--repos` and `--ids` filter; `--per-repo N` then keeps, per repository, the first N
instances in instance_id (string) order. A failing instance (unknown commit, git error, engine error)
is reported under `errors` and skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark_gen import swebench_delivery as D
from benchmark_gen.common import write_atomic
from benchmark_gen.swebench_baselines import BaselineCorpus, chunk_lines, is_swe_test_path
from benchmark_gen.swebench_gold import gold_functions, parse_patch
from benchmark_gen.swebench_layout import GitError, LayoutReport, TreeLayout, commit_time
from benchmark_gen.swebench_report import aggregate, markdown
from ctx_lsp.index.model import python_qualname

SCHEMA = "ctx-lsp-swebench/1"
DEFAULT_WORK = Path("~/.cache/ctx-lsp-swebench/work")
TOP = 10


def all_features() -> frozenset[str]:
    """The engine's feature switches, read at run time (their names change with the retrieval code)."""
    from ctx_lsp.retrieval import engine as retrieval_engine

    return frozenset(retrieval_engine.ALL_FEATURES)


# rows of `--dense`: the run's features plus the dense generator (None), and the dense generator alone
DENSE_ROWS: dict[str, frozenset[str] | None] = {"engine +dense": None, "dense only": frozenset({"dense", "files"})}


def load_instances(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def select(instances: list[dict[str, Any]], per_repo: int | None = None, ids: set[str] | None = None,
           repos: set[str] | None = None) -> list[dict[str, Any]]:
    """Instances passing the filters; with per_repo, the first N of each repository by instance_id."""
    chosen = [i for i in instances
              if (ids is None or i["instance_id"] in ids) and (repos is None or i["repo"] in repos)]
    chosen.sort(key=lambda i: i["instance_id"])
    if per_repo is not None:
        count: dict[str, int] = {}
        kept = []
        for inst in chosen:
            if count.get(inst["repo"], 0) < per_repo:
                count[inst["repo"]] = count.get(inst["repo"], 0) + 1
                kept.append(inst)
        chosen = kept
    return chosen


def visit_order(instances: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(instances grouped by repository, each repository's in base-commit date order with ties by
    instance_id; errors for instances whose commit date cannot be read)."""
    dated: list[tuple[str, int, str, dict[str, Any]]] = []
    errors = []
    for inst in instances:
        try:
            ct = commit_time(Path(inst["mirror"]), inst["base_commit"])
        except (GitError, OSError, ValueError) as exc:
            errors.append(_error(inst, f"base commit: {exc}"))
            continue
        dated.append((inst["repo"], ct, inst["instance_id"], inst))
    dated.sort(key=lambda d: d[:3])
    return [d[3] for d in dated], errors


def _error(inst: dict[str, Any], msg: str) -> dict[str, Any]:
    return {"instance_id": inst.get("instance_id"), "repo": inst.get("repo"), "error": msg}


def repo_dir(work: Path, repo: str) -> Path:
    name = repo.replace("/", "+")
    if not name or any(c in name for c in "\\\0") or name.startswith(".") or ".." in name:
        raise ValueError(f"unusable repository name: {repo!r}")
    return work / name


def ranks(ranking: list[str], gold: list[str]) -> dict[str, int | None]:
    pos: dict[str, int] = {}
    for i, x in enumerate(ranking, 1):
        pos.setdefault(x, i)
    return {g: pos.get(g) for g in gold}


def engine_rankings(pack: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(files, `path::symbol` functions) in the engine's order; `pack["files"]` ranks files and
    `pack["symbols"]` functions when present (the items are cut by the token budget; they are not)."""
    items = [i for i in pack.get("items", []) if i.get("kind") != "commit" and i.get("path")]
    if isinstance(pack.get("files"), list):
        files = [f["path"] for f in pack["files"]]
    else:
        files = [i["path"] for i in items]
    ranked = pack["symbols"] if isinstance(pack.get("symbols"), list) else items
    # gold functions are Python's qualnames: a redefinition's node `name#2` is `name` there
    funcs = [f"{i['path']}::{python_qualname(i['symbol'])}" for i in ranked if i.get("symbol") is not None]
    return _dedupe(files), _dedupe(funcs)


def _dedupe(xs: list[str]) -> list[str]:
    return list(dict.fromkeys(xs))


def ranking_record(files: list[str], funcs: list[str] | None, gold_files: list[str],
                   gold_funcs: list[str]) -> dict[str, Any]:
    rec: dict[str, Any] = {"files": files[:TOP], "file_ranks": ranks(files, gold_files)}
    if funcs is not None and gold_funcs:
        rec["function_ranks"] = ranks(funcs, gold_funcs)
    return rec


class RepoRun:
    """The tree, engine and baseline corpus of one repository, carried from instance to instance."""

    def __init__(self, work: Path, repo: str, mirror: Path, dense: bool = False, explain: bool = False,
                 git_history: bool = False) -> None:
        base = repo_dir(work, repo)
        self.repo = repo
        self.tree = base / "tree"
        self.cache = base / "cache"
        self.layout = TreeLayout(mirror, self.tree, base / "layout.json", base / "git" if git_history else None)
        self.corpus = BaselineCorpus(repo)
        self.engine: Any = None
        self.dense = dense
        self.explain = explain  # --explain: keep the ranking's raw inputs per instance (offline fitting)
        self.cache_was_warm = self.cache.exists()

    def index(self) -> tuple[str, float]:
        """Open (first visit) or refresh the engine; (kind, seconds)."""
        t0 = time.perf_counter()
        if self.engine is None:
            from ctx_lsp.engine import Engine
            from ctx_lsp.retrieval.dense import SYNC, DenseOptions

            self.cache.mkdir(parents=True, exist_ok=True)
            eng = Engine(self.tree, cache_dir=self.cache, dense=DenseOptions(SYNC) if self.dense else None)
            eng.open()
            self.engine = eng
            return "open", time.perf_counter() - t0
        self.engine.refresh()
        return "refresh", time.perf_counter() - t0

    def embed(self) -> dict[str, Any]:
        """Bring the dense vectors up to date (cold: the whole tree; then the changed symbols)."""
        r = self.engine.retriever
        if r.dense is None:
            raise RuntimeError(f"--dense: {r.dense_error}")
        t0 = time.perf_counter()
        r.dense.update()
        return {"dense_s": time.perf_counter() - t0, "dense_embedded": r.dense.last.get("embedded", 0),
                "dense_vectors": r.dense.last.get("vectors", 0)}

    def query(self, text: str, budget: int, features: frozenset[str], explain: bool = False) -> dict[str, Any]:
        r = self.engine.retriever
        with self.engine.lock:
            if hasattr(r, "reset_memory"):
                r.reset_memory()  # no instance may see another's (or a refresh's) working memory
            return dict(r.context(text, budget, record=False, features=features, explain=explain))


def delivery(tree: Path, patched: list[tuple[str, list[int]]], pack: dict[str, Any],
             bm_funcs: list[tuple[str, str]], budget: int) -> dict[str, Any]:
    """The gold lines each row's pack shows verbatim (swebench_delivery)."""
    gold = D.gold_lines(patched)
    read: dict[str, tuple[list[str], dict[str, list[int]]]] = {}  # path -> (lines, chunk lines)

    def file(path: str) -> tuple[list[str], dict[str, list[int]]]:
        if path not in read:
            try:
                text = (tree / path).read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            read[path] = (text.splitlines(), dict(chunk_lines(text) or []))
        return read[path]

    engine = D.engine_shown(pack.get("items", []))
    bm, bm_tokens = D.bm25_shown(bm_funcs, lambda p: file(p)[1], lambda p: file(p)[0], budget)
    return {"gold_lines": sum(len(v) for v in gold.values()),
            "engine": {"shown": D.shown_count(gold, engine), "tokens": int(pack.get("tokens", 0))},
            "bm25_chunks": {"shown": D.shown_count(gold, bm), "tokens": bm_tokens}}


def run_instance(run: RepoRun, inst: dict[str, Any], budget: int, features: frozenset[str],
                 ablate: list[str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    lay: LayoutReport = run.layout.checkout(inst["base_commit"])
    layout_s = time.perf_counter() - t0
    gold_files: list[str] = []
    gold_funcs: list[str] = []
    patched: list[tuple[str, list[int]]] = []
    for fp in parse_patch(inst["patch"]):
        if fp.new_file or fp.path not in lay.listed or fp.path in gold_files:
            continue
        gold_files.append(fp.path)
        if fp.path.endswith(".py") and fp.path in lay.entries:
            if not is_swe_test_path(fp.path, run.repo):
                patched.append((fp.path, fp.lines))
            src = (run.tree / fp.path).read_text(encoding="utf-8", errors="replace")
            gold_funcs += [f"{fp.path}::{q}" for q in gold_functions(src, fp.lines)]
    if not gold_files:
        raise ValueError("no file of the gold patch exists at base_commit")
    kind, index_s = run.index()
    dense_t = run.embed() if run.dense else {}
    t1 = time.perf_counter()
    pack = run.query(inst["problem_statement"], budget, features, explain=run.explain)
    query_ms = 1000 * (time.perf_counter() - t1)  # the first query after the update: index upkeep included
    t1 = time.perf_counter()
    run.query(inst["problem_statement"], budget, features)
    warm_ms = 1000 * (time.perf_counter() - t1)  # the same query again: retrieval alone
    t2 = time.perf_counter()
    run.corpus.update(run.tree, lay.entries)
    baseline_s = time.perf_counter() - t2
    t3 = time.perf_counter()
    bm_files = run.corpus.rank_files(inst["problem_statement"])
    bm_chunk_files, bm_funcs = run.corpus.rank_chunks(inst["problem_statement"])
    baseline_ms = 1000 * (time.perf_counter() - t3)

    def no_tests(xs: list[str]) -> list[str]:
        return [x for x in xs if not is_swe_test_path(x.split("::", 1)[0], run.repo)]

    e_files, e_funcs = engine_rankings(pack)
    rankings = {
        "engine": ranking_record(no_tests(e_files), no_tests(e_funcs), gold_files, gold_funcs),
        "engine_as_is": ranking_record(e_files, e_funcs, gold_files, gold_funcs),
        "bm25_files": ranking_record(bm_files, None, gold_files, gold_funcs),
        "bm25_functions": ranking_record(bm_chunk_files, [f"{p}::{q}" for p, q in bm_funcs], gold_files, gold_funcs),
    }
    ablation_ms = {}
    for feat in ablate:
        t4 = time.perf_counter()
        f_files, f_funcs = engine_rankings(run.query(inst["problem_statement"], budget, features - {feat}))
        ablation_ms[feat] = 1000 * (time.perf_counter() - t4)
        rankings[f"engine -{feat}"] = ranking_record(no_tests(f_files), no_tests(f_funcs), gold_files, gold_funcs)
    if run.dense:
        for row, feats in DENSE_ROWS.items():
            t4 = time.perf_counter()
            feats = features | {"dense"} if feats is None else feats
            d_files, d_funcs = engine_rankings(run.query(inst["problem_statement"], budget, feats))
            ablation_ms[row] = 1000 * (time.perf_counter() - t4)
            rankings[row] = ranking_record(no_tests(d_files), no_tests(d_funcs), gold_files, gold_funcs)
    extra = {"explain": pack.get("explain")} if run.explain else {}
    return {
        **extra,
        "instance_id": inst["instance_id"], "repo": inst["repo"], "base_commit": inst["base_commit"],
        "gold_files": gold_files, "gold_functions": gold_funcs, "tokens": int(pack.get("tokens", 0)),
        "delivery": delivery(run.tree, patched, pack, bm_funcs, budget),
        "missing_blobs": lay.missing, "rankings": rankings,
        "timings": {"layout_s": layout_s, "files_written": len(lay.written), "files_deleted": len(lay.deleted),
                    "index_kind": kind, "index_s": index_s, "cache_was_warm": run.cache_was_warm,
                    "query_ms": query_ms, "warm_query_ms": warm_ms, "baseline_update_s": baseline_s, "baseline_query_ms": baseline_ms,
                    "ablation_query_ms": ablation_ms, **dense_t},
    }


def evaluate(instances: list[dict[str, Any]], work: Path, budget: int, features: frozenset[str],
             ablate: list[str], log: Any = None, dense: bool = False,
             explain: bool = False, git_history: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(results, errors) for instances, laid out under `work`; one progress line per instance on `log`
    (default stderr)."""
    log = log or sys.stderr
    ordered, errors = visit_order(instances)
    results: list[dict[str, Any]] = []
    run: RepoRun | None = None
    for n, inst in enumerate(ordered, 1):
        t0 = time.perf_counter()
        try:
            if run is None or run.repo != inst["repo"]:
                run = None  # the previous repository's engine and corpus are freed first
                run = RepoRun(work, inst["repo"], Path(inst["mirror"]), dense, explain, git_history)
            res = run_instance(run, inst, budget, features, ablate)
        except Exception as exc:  # one broken instance never stops the run
            errors.append(_error(inst, f"{type(exc).__name__}: {exc}"))
            print(f"[{n}/{len(ordered)}] {inst['instance_id']} ERROR {exc} {time.perf_counter() - t0:.1f}s",
                  file=log, flush=True)
            continue
        results.append(res)
        fr = res["rankings"]["engine"]["file_ranks"]
        best = min((r for r in fr.values() if r is not None), default=None)
        print(f"[{n}/{len(ordered)}] {res['instance_id']} gold rank {best if best else '-'} "
              f"({len(fr)} gold) {time.perf_counter() - t0:.1f}s", file=log, flush=True)
    errors.sort(key=lambda e: str(e["instance_id"]))
    return results, errors


def report(results: list[dict[str, Any]], errors: list[dict[str, Any]], config: dict[str, Any]) -> dict[str, Any]:
    return {"schema": SCHEMA, "config": config, "aggregates": aggregate(results), "errors": errors,
            "instances": results}


@dataclass(frozen=True)
class Selection:
    """What a `swebench` command line asks for: the chosen instances and how to run them."""

    instances: list[dict[str, Any]]
    work: Path
    budget: int
    features: frozenset[str]
    ablate: list[str]
    config: dict[str, Any]
    dense: bool = False  # --dense: also the rows of DENSE_ROWS
    git_history: bool = False  # --git-history: trees are git work trees at their base commit
    explain: bool = False  # --explain: each instance keeps its ranking's raw inputs


def selection(args: argparse.Namespace, prog: str = "swebench") -> Selection | None:
    """The instances and settings of `args`; None (after a message on stderr) when they are unusable."""
    data = Path(args.data)
    if not data.is_file():
        print(f"{prog}: no such file: {data}", file=sys.stderr)
        return None
    known = all_features() | {"dense"}
    features = all_features() if args.features is None else frozenset(f for f in args.features.split(",") if f)
    unknown = sorted(features - known)
    if unknown:
        print(f"{prog}: unknown feature(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}", file=sys.stderr)
        return None
    ids = set(args.ids.split(",")) if args.ids else None
    repos = set(args.repos.split(",")) if args.repos else None
    chosen = select(load_instances(data), args.per_repo, ids, repos)
    if not chosen:
        print(f"{prog}: no instance selected", file=sys.stderr)
        return None
    work = Path(args.work).expanduser() if args.work else DEFAULT_WORK.expanduser()
    ablate = sorted(features) if args.ablate else []
    config = {"data": data.name, "budget": args.budget, "features": sorted(features), "per_repo": args.per_repo,
              "dense": bool(args.dense), "git_history": bool(getattr(args, "git_history", False)),
              "ids": sorted(ids) if ids else None, "repos": sorted(repos) if repos else None,
              "ablate": ablate, "selected": len(chosen)}
    return Selection(chosen, work, args.budget, features, ablate, config, bool(getattr(args, "dense", False)),
                     config["git_history"], bool(getattr(args, "explain", False)))


def finish(args: argparse.Namespace, sel: Selection, results: list[dict[str, Any]], errors: list[dict[str, Any]],
           wall_s: float) -> int:
    """Write the report of a run; 0 when some instance was evaluated."""
    out = report(results, errors, sel.config)
    out["timings"] = {"wall_s": wall_s}
    _write(out, errors, sel.config, args)
    return 0 if results else 1


def run_swebench(args: argparse.Namespace) -> int:
    sel = selection(args)
    if sel is None:
        return 2
    t0 = time.perf_counter()
    results, errors = evaluate(sel.instances, sel.work, sel.budget, sel.features, sel.ablate, dense=sel.dense,
                               explain=sel.explain, git_history=sel.git_history)
    return finish(args, sel, results, errors, time.perf_counter() - t0)


def run_merge(args: argparse.Namespace) -> int:
    """Runs over disjoint sets of repositories (one process each, in parallel) as one report: the
    instances and errors of each run, aggregated again. The runs must share budget and features."""
    runs = []
    for name in args.files:
        try:
            runs.append(json.loads(Path(name).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            print(f"swebench-merge: cannot read {name}: {exc}", file=sys.stderr)
            return 2
    keys = {(r["config"]["budget"], tuple(r["config"]["features"]), tuple(r["config"]["ablate"])) for r in runs}
    if len(keys) != 1:
        print("swebench-merge: the runs differ in budget, features or ablation", file=sys.stderr)
        return 2
    seen: set[str] = set()
    results: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for r in runs:
        for inst in r["instances"]:
            if inst["instance_id"] in seen:
                print(f"swebench-merge: {inst['instance_id']} is in more than one run", file=sys.stderr)
                return 2
            seen.add(inst["instance_id"])
            results.append(inst)
        errors += r["errors"]
    results.sort(key=lambda x: x["instance_id"])
    config = dict(runs[0]["config"], repos=sorted({x["repo"] for x in results}), selected=len(results) + len(errors),
                  merged=[Path(n).name for n in args.files])
    out = report(results, errors, config)
    out["timings"] = {"wall_s": sum(r.get("timings", {}).get("wall_s", 0.0) for r in runs)}
    _write(out, errors, config, args)
    return 0


def _write(out: dict[str, Any], errors: list[dict[str, Any]], config: dict[str, Any], args: argparse.Namespace) -> None:
    """The markdown report on stdout (and --markdown), the whole report as JSON (--json)."""
    md = markdown(out["aggregates"], errors, config)
    sys.stdout.write(md)
    if args.markdown:
        write_atomic(Path(args.markdown), md)
    if args.json:
        write_atomic(Path(args.json), json.dumps(out, indent=1, sort_keys=True) + "\n")
