"""The SWE-bench lane (`python -m benchmark_gen swebench`) on a small git mirror built here, offline.

A package laid out like a real project (`shop/`, with `examples/`, `setup.py` and `tests/` that
repeat its words) gets three commits; three hand-written issues point at different base commits.
Checked: the report's numbers follow from the per-instance ranks, two runs agree outside their
timings, gold functions come out of patches right, a blob missing from the mirror is skipped,
instances run in base-commit date order, a bad instance is reported without stopping the run.
The last group (engine ranks the gold file first) depends on the retrieval work and is marked.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from benchmark_gen.__main__ import main
from benchmark_gen.swebench import engine_rankings, select
from benchmark_gen.swebench_baselines import chunk_file, is_swe_test_path
from benchmark_gen.swebench_gold import gold_functions, parse_patch
from benchmark_gen.swebench_layout import TreeLayout, cat_blobs, ls_tree

DISCOUNTS = '''"""Discount rules applied to an order total."""

from shop.pricing.money import round_cents


def apply_discount(total, percent):
    """Return `total` reduced by `percent` per cent."""
    if percent < 0:
        raise ValueError("a discount cannot be negative")
    amount = total * percent / 100
    return round_cents(total - amount)


def best_discount(total, percents):
    return min(apply_discount(total, p) for p in percents)
'''
DISCOUNTS_FIXED = DISCOUNTS.replace(
    "    amount = total * percent / 100\n",
    "    percent = type(total)(percent)\n    amount = total * percent / 100\n")

BASE = '''"""The persistence base class of every model."""

from shop.storage import get_storage


class Model:
    table = ""

    def __init__(self, **fields):
        self.fields = dict(fields)
        self.pk = None

    def save(self):
        """Insert the row, or update it when it already has a primary key."""
        rows = get_storage().setdefault(self.table, {})
        self.pk = len(rows) + 1
        rows[self.pk] = dict(self.fields)

    def delete(self):
        get_storage().get(self.table, {}).pop(self.pk, None)
'''
BASE_FIXED = BASE.replace(
    "        self.pk = len(rows) + 1\n",
    "        if self.pk is None:\n            self.pk = len(rows) + 1\n")

CHECKS = '''"""System checks run by `shop check`."""

from shop.registry import Error, register


@register
def check_discount_limits(config):
    errors = []
    if config.get("max_discount", 0) >= config.get("order_total_cap", 0) * 0:
        errors.append(Error("Discount must not exceed the order total.", id="shop.E042"))
    return errors


@register
def check_currency(config):
    if not config.get("currency"):
        return [Error("A currency is required.", id="shop.E001")]
    return []
'''
CHECKS_FIXED = CHECKS.replace('config.get("order_total_cap", 0) * 0:', 'config.get("order_total_cap", 0):')

FILES_V1 = {
    "shop/__init__.py": '"""Shop: orders, discounts and prices."""\n\nfrom .models.order import Order\n'
                        'from .pricing.discounts import apply_discount\n\n__all__ = ["Order", "apply_discount"]\n',
    "shop/pricing/__init__.py": "",
    "shop/pricing/discounts.py": DISCOUNTS,
    "shop/pricing/money.py": 'def round_cents(value):\n    return round(value, 2)\n\n\n'
                             'def format_price(value, currency="EUR"):\n    return f"{round_cents(value)} {currency}"\n',
    "shop/models/__init__.py": "",
    "shop/models/base.py": BASE,
    "shop/models/order.py": 'from shop.models.base import Model\n\n\nclass Order(Model):\n    table = "orders"\n\n'
                            '    def total(self):\n        return self.fields.get("total", 0)\n',
    "shop/storage.py": '_ROWS = {}\n\n\ndef get_storage():\n    """The in-memory table store."""\n    return _ROWS\n',
    "shop/registry.py": 'class Error:\n    def __init__(self, msg, id):\n        self.msg = msg\n        self.id = id\n\n\n'
                        'CHECKS = []\n\n\ndef register(check):\n    CHECKS.append(check)\n    return check\n',
    "shop/checks.py": CHECKS,
    "shop/cli.py": 'import sys\n\nfrom shop.registry import CHECKS\n\n\ndef main(argv=None):\n'
                   '    """`shop check`: run every check on the configuration and print its errors."""\n'
                   '    config = {"currency": "EUR", "max_discount": 10, "order_total_cap": 100}\n'
                   '    errors = [e for check in CHECKS for e in check(config)]\n'
                   '    for e in errors:\n        print(f"{e.id}: {e.msg}", file=sys.stderr)\n    return 1 if errors else 0\n',
    "shop/legacy.py": "def old_discount(total):\n    return total\n",
    "examples/checkout.py": '"""Example: save an order and apply a discount to its total."""\n\n'
                            'from shop import Order, apply_discount\n\norder = Order(total=100)\norder.save()\n'
                            'print(apply_discount(order.total(), 10))  # discount the order total\n',
    "setup.py": 'from setuptools import setup\n\nsetup(name="shop", description="Orders, discounts, saving orders, '
                'order totals and checks", packages=["shop"])\n',
    "tests/test_discounts.py": 'from shop import apply_discount\n\n\ndef test_apply_discount():\n'
                               '    assert apply_discount(100, 10) == 90\n',
    "tests/test_models.py": 'from shop import Order\n\n\ndef test_order_save():\n    o = Order(total=1)\n    o.save()\n'
                            '    o.save()\n    assert o.pk == 1\n',
    "tests/test_checks.py": 'from shop.checks import check_discount_limits\n\n\ndef test_discount_must_not_exceed_total():\n'
                            '    # shop.E042: Discount must not exceed the order total.\n'
                            '    assert check_discount_limits({"max_discount": 10, "order_total_cap": 100}) == []\n',
    "data/prices.csv": "sku,price\n" + "".join(f"A{i},{i}.00\n" for i in range(200)),
}
FILES_V2 = {"shop/reporting.py": 'from shop.pricing.money import format_price\n\n\ndef report(orders):\n'
                                 '    return [format_price(o.total()) for o in orders]\n',
            "shop/legacy.py": None}
FILES_V3 = {"shop/pricing/money.py": FILES_V1["shop/pricing/money.py"] + '\n\ndef parse_price(text):\n'
                                                                         '    return float(text.split()[0])\n'}

ISSUE_TRACEBACK = """apply_discount fails with Decimal totals

I'm using shop 2.3 in a Django app and computing totals with `decimal.Decimal`. Applying a coupon crashes:

```
Traceback (most recent call last):
  File "/srv/app/orders/views.py", line 41, in checkout
    total = apply_discount(cart.total, coupon.percent)
  File "/usr/lib/python3.11/site-packages/shop/pricing/discounts.py", line 10, in apply_discount
    amount = total * percent / 100
TypeError: unsupported operand type(s) for *: 'decimal.Decimal' and 'float'
```

`coupon.percent` comes from a JSON payload, so it is a float. I'd expect the percent to be converted.
"""
ISSUE_DOCTEST = """Saving an object twice creates a duplicate row

```python
>>> from shop import apply_discount, Order
>>> order = Order(total=100)
>>> order.save()
>>> order.save()
>>> order.pk
2
```

The second `.save()` should update the existing row (pk 1) instead of inserting a new one. Same with
any other model I define.
"""
ISSUE_CODE = """shop.E042 reported although the discount is below the cap

Running `shop check` with `max_discount = 10` and `order_total_cap = 100` prints

    shop.E042: Discount must not exceed the order total.

but 10 is clearly below 100. Looks like the comparison is wrong.
"""


def _git(cwd: Path, *args: str, date: str | None = None) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.com", GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_SYSTEM=os.devnull)
    if date:
        env |= {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _commit(src: Path, files: dict[str, str | None], date: str) -> str:
    for rel, text in files.items():
        p = src / rel
        if text is None:
            p.unlink()
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    _git(src, "add", "-A")
    _git(src, "commit", "-q", "-m", f"change at {date}", date=date)
    return _git(src, "rev-parse", "HEAD")


def _patch(path: str, old: str, new: str) -> str:
    body = difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}")
    return f"diff --git a/{path} b/{path}\n" + "".join(body)


@pytest.fixture(scope="module")
def lane(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("swe")
    src = root / "src"
    src.mkdir()
    _git(src, "init", "-q", "-b", "main")
    c1 = _commit(src, dict(FILES_V1), "2020-01-01T10:00:00+00:00")
    c2 = _commit(src, dict(FILES_V2), "2020-02-01T10:00:00+00:00")
    c3 = _commit(src, dict(FILES_V3), "2020-03-01T10:00:00+00:00")
    mirror = root / "shop.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(mirror)], check=True)
    # like the real mirrors that lack their largest blobs: drop the data file's (loose) object
    blob = ls_tree(mirror, c1)["data/prices.csv"][1]
    (mirror / "objects" / blob[:2] / blob[2:]).unlink()
    instances = [  # listed neither in date nor in id order
        {"instance_id": "acme__shop-101", "base_commit": c3, "problem_statement": ISSUE_CODE,
         "patch": _patch("shop/checks.py", CHECKS, CHECKS_FIXED)},
        {"instance_id": "acme__shop-205", "base_commit": c1, "problem_statement": ISSUE_TRACEBACK,
         "patch": _patch("shop/pricing/discounts.py", DISCOUNTS, DISCOUNTS_FIXED)},
        {"instance_id": "acme__shop-150", "base_commit": c2, "problem_statement": ISSUE_DOCTEST,
         "patch": _patch("shop/models/base.py", BASE, BASE_FIXED)},
        {"instance_id": "acme__shop-999", "base_commit": "0123456789abcdef0123456789abcdef01234567",
         "problem_statement": "broken", "patch": ""},
    ]
    data = root / "DATA.jsonl"
    data.write_text("".join(json.dumps({**i, "repo": "acme/shop", "mirror": str(mirror)}) + "\n" for i in instances))
    return {"root": root, "mirror": mirror, "data": data, "commits": (c1, c2, c3)}


def _run(lane: dict[str, Any], name: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[dict, str, str]:
    out = lane["root"] / f"{name}.json"
    md = lane["root"] / f"{name}.md"
    rc = main(["swebench", str(lane["data"]), "--work", str(lane["root"] / f"work-{name}"), "--json", str(out),
               "--markdown", str(md), *extra])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert md.read_text() == cap.out  # the report on stdout, progress on stderr only
    return json.loads(out.read_text()), cap.out, cap.err


def test_report_numbers_follow_from_ranks_and_order(lane: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    rep, out, err = _run(lane, "a", capsys, "--ablate")
    lane["report_a"] = rep
    ids = [r["instance_id"] for r in rep["instances"]]
    assert ids == ["acme__shop-205", "acme__shop-150", "acme__shop-101"]  # base-commit date order
    assert [ln.split()[1] for ln in err.splitlines() if ln.startswith("[")] == ids  # one progress line each
    assert [e["instance_id"] for e in rep["errors"]] == ["acme__shop-999"]
    assert "acme__shop-999" in out and out.startswith("# SWE-bench")
    assert [r["timings"]["index_kind"] for r in rep["instances"]] == ["open", "refresh", "refresh"]
    by_id = {r["instance_id"]: r for r in rep["instances"]}
    assert by_id["acme__shop-205"]["gold_files"] == ["shop/pricing/discounts.py"]
    assert by_id["acme__shop-205"]["gold_functions"] == ["shop/pricing/discounts.py::apply_discount"]
    assert by_id["acme__shop-150"]["gold_functions"] == ["shop/models/base.py::Model.save"]
    assert by_id["acme__shop-101"]["gold_functions"] == ["shop/checks.py::check_discount_limits"]
    assert all(r["missing_blobs"] == ["data/prices.csv"] for r in rep["instances"])

    rows = rep["aggregates"]["overall"]
    assert {"engine", "engine_as_is", "bm25_files", "bm25_functions"} <= set(rows)
    assert {f"engine -{f}" for f in rep["config"]["features"]} <= set(rows)
    for row, agg in rows.items():
        recs = [r["rankings"][row] for r in rep["instances"]]
        assert agg["n"] == len(recs) == 3
        for k in (1, 3, 5, 10):
            want = sum(all(v is not None and v <= k for v in rec["file_ranks"].values()) for rec in recs) / 3
            assert agg[f"acc@{k}"] == pytest.approx(want), (row, k)
        for k in (1, 5, 10):
            want = sum(any(v is not None and v <= k for v in rec["file_ranks"].values()) for rec in recs) / 3
            assert agg[f"hit@{k}"] == pytest.approx(want), (row, k)
        mrr = sum(1 / min([v for v in rec["file_ranks"].values() if v] or [float("inf")]) for rec in recs) / 3
        assert agg["mrr"] == pytest.approx(mrr), row
        if row != "bm25_files":
            fn = [rec["function_ranks"] for rec in recs if "function_ranks" in rec]
            assert agg["fn_n"] == len(fn) == 3
            for k in (5, 10):
                want = sum(all(v is not None and v <= k for v in f.values()) for f in fn) / 3
                assert agg[f"fn_acc@{k}"] == pytest.approx(want), (row, k)
        for rec in recs:  # the top-10 lists agree with the ranks they report
            for g, rank in rec["file_ranks"].items():
                if rank is not None and rank <= 10:
                    assert rec["files"][rank - 1] == g
    for rec in (r["rankings"]["engine"] for r in rep["instances"]):
        assert not any(is_swe_test_path(p, "acme/shop") for p in rec["files"])
    assert rep["aggregates"]["repos"]["acme/shop"] == rows
    boot = rep["aggregates"]["bootstrap_acc5_engine_minus_bm25_files"]
    eng = [all(v is not None and v <= 5 for v in r["rankings"]["engine"]["file_ranks"].values()) for r in rep["instances"]]
    bm = [all(v is not None and v <= 5 for v in r["rankings"]["bm25_files"]["file_ranks"].values())
          for r in rep["instances"]]
    assert boot["n"] == 3 and boot["diff"] == pytest.approx((sum(eng) - sum(bm)) / 3)


def _strip_timings(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _strip_timings(v) for k, v in x.items() if k != "timings"}
    if isinstance(x, list):
        return [_strip_timings(v) for v in x]
    return x


def test_two_runs_agree_outside_timings(lane: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    a, out_a, _ = _run(lane, "b", capsys)
    # the second run reuses the first one's trees and caches: warm layouts and indexes, same answers
    rc = main(["swebench", str(lane["data"]), "--work", str(lane["root"] / "work-b"),
               "--json", str(lane["root"] / "b2.json")])
    out_b = capsys.readouterr().out
    assert rc == 0
    b = json.loads((lane["root"] / "b2.json").read_text())
    assert _strip_timings(a) == _strip_timings(b)

    def untimed(md: str) -> str:  # the report without its timing columns and table
        head, rest = md.split("## Overall", 1)
        table = [ln.rsplit("|", 5)[0] for ln in head.splitlines() if ln.startswith("|")]
        return "\n".join(table) + rest.split("## Timings")[0] + rest.split("## Skipped")[-1]

    assert untimed(out_a) == untimed(out_b)


def test_selection_is_deterministic() -> None:
    insts = [{"instance_id": f"r{r}__x-{i}", "repo": f"r{r}"} for r in (1, 2) for i in (3, 1, 2, 10)]
    assert [i["instance_id"] for i in select(insts, per_repo=2)] == ["r1__x-1", "r1__x-10", "r2__x-1", "r2__x-10"]
    assert [i["instance_id"] for i in select(insts, ids={"r2__x-3", "r1__x-2"})] == ["r1__x-2", "r2__x-3"]
    assert [i["instance_id"] for i in select(insts, per_repo=1, repos={"r2"})] == ["r2__x-1"]


PATCH = """diff --git a/pkg/a.py b/pkg/a.py
index 1111111..2222222 100644
--- a/pkg/a.py
+++ b/pkg/a.py
@@ -1,9 +1,10 @@
 import os
-X = 1
+X = 2

 class Outer:
     class Inner:
         def meth(self):
-            return 1
+            return 2
+
     def other(self):
         pass
@@ -14,3 +15,5 @@ def top():
     a = 1
     b = 2
+    c = 3
+    d = 4
     return a
diff --git a/pkg/b.py b/pkg/b.py
--- a/pkg/b.py
+++ b/pkg/b.py
@@ -2,0 +3,2 @@
+    # a pure addition after line 2
+    y = 1
diff --git a/pkg/new.py b/pkg/new.py
new file mode 100644
--- /dev/null
+++ b/pkg/new.py
@@ -0,0 +1 @@
+print("hi")
"""
A_SRC = """import os
X = 1

class Outer:
    class Inner:
        def meth(self):
            return 1
    def other(self):
        pass


@decorator
def top():
    a = 1
    b = 2
    return a
"""
B_SRC = "def f():\n    x = 0\n    return x\n"


def test_patch_parser_lines_and_gold_functions() -> None:
    files = parse_patch(PATCH)
    assert [(f.path, f.new_file) for f in files] == [("pkg/a.py", False), ("pkg/b.py", False), ("pkg/new.py", True)]
    # removed/changed old lines 2 and 7; the blank line added after line 7 is a pure addition (line 7);
    # the two lines added after old line 15 count for line 15
    assert files[0].lines == [2, 7, 15]
    assert files[1].lines == [2]
    assert gold_functions(A_SRC, files[0].lines) == ["Outer.Inner.meth", "top"]  # line 2 is module level
    assert gold_functions(B_SRC, files[1].lines) == ["f"]
    assert gold_functions("def broken(:\n", [1]) == []  # a file that does not parse names no function
    assert gold_functions(A_SRC, [12]) == ["top"]  # a decorator line belongs to its def
    assert gold_functions(A_SRC, [0]) == []  # an insertion at the top of a file


def test_chunks_and_test_paths() -> None:
    names = [q for q, _ in chunk_file(A_SRC)]
    assert names == ["Outer", "Outer.Inner", "Outer.Inner.meth", "Outer.other", "top"]
    assert [q for q, _ in chunk_file("def broken(:\n")] == [None]
    assert is_swe_test_path("tests/test_x.py", "psf/requests") and is_swe_test_path("pkg/testing.py", "a/b")
    assert not is_swe_test_path("src/_pytest/python.py", "pytest-dev/pytest")
    assert is_swe_test_path("src/_pytest/pytester.py", "pytest-dev/pytest")


def test_engine_functions_come_from_the_symbol_ranking_not_the_budgeted_items() -> None:
    item = {"path": "a.py", "symbol": "f", "kind": "function"}
    pack = {"files": [{"path": "a.py"}, {"path": "b.py"}], "items": [item],
            "symbols": [{"path": "b.py", "symbol": "g"}, {"path": "a.py", "symbol": "f"}, {"path": "b.py", "symbol": "g"}]}
    assert engine_rankings(pack) == (["a.py", "b.py"], ["b.py::g", "a.py::f"])
    del pack["symbols"]  # a pack from before the symbol ranking: its items, in order
    assert engine_rankings(pack) == (["a.py", "b.py"], ["a.py::f"])


def test_layout_is_incremental_and_skips_missing_blobs(lane: dict[str, Any], tmp_path: Path) -> None:
    c1, c2, c3 = lane["commits"]
    mirror = lane["mirror"]
    assert [b for b, data in cat_blobs(mirror, ["0" * 40]) if data is None] == ["0" * 40]
    tree = tmp_path / "tree"
    lay = TreeLayout(mirror, tree, tmp_path / "layout.json")
    rep = lay.checkout(c1)
    assert rep.missing == ["data/prices.csv"] and not (tree / "data").exists()
    assert (tree / "shop/legacy.py").is_file() and (tree / "setup.py").read_text() == FILES_V1["setup.py"]
    old = 1_000_000_000
    for p in rep.entries:
        os.utime(tree / p, (old, old))
    rep2 = lay.checkout(c2)
    assert rep2.written == ["shop/reporting.py"] and rep2.deleted == ["shop/legacy.py"]
    assert not (tree / "shop/legacy.py").exists()
    assert (tree / "shop/checks.py").stat().st_mtime == old  # unchanged files keep their mtimes
    rep3 = lay.checkout(c3)
    assert rep3.written == ["shop/pricing/money.py"] and rep3.deleted == []
    assert (tree / "shop/pricing/money.py").read_text() == FILES_V3["shop/pricing/money.py"]
    back = TreeLayout(mirror, tree, tmp_path / "layout.json").checkout(c1)  # a new process, from the manifest
    assert sorted(back.written) == ["shop/legacy.py", "shop/pricing/money.py"]
    assert sorted(back.deleted) == ["shop/reporting.py"]
    on_disk = sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file())
    assert on_disk == sorted(p for p in FILES_V1 if p != "data/prices.csv")


def test_layout_with_git_history_is_a_work_tree_at_the_base_commit(lane: dict[str, Any], tmp_path: Path) -> None:
    c1, c2, c3 = lane["commits"]
    mirror = lane["mirror"]
    before = sorted(str(p.relative_to(mirror)) for p in mirror.rglob("*"))
    tree = tmp_path / "tree"
    lay = TreeLayout(mirror, tree, tmp_path / "layout.json", tmp_path / "git")
    lay.checkout(c2)
    assert _git(tree, "rev-parse", "--is-inside-work-tree", "HEAD").split() == ["true", c2]
    assert _git(tree, "log", "--format=%H").split() == [c2, c1]  # the past of the base commit, nothing after it
    rep = lay.checkout(c3)
    assert _git(tree, "log", "--format=%H").split() == [c3, c2, c1]
    assert ".git" not in rep.deleted and rep.written == ["shop/pricing/money.py"]
    back = TreeLayout(mirror, tree, tmp_path / "layout.json", tmp_path / "git").checkout(c1)
    assert ".git" not in back.deleted and _git(tree, "rev-parse", "HEAD") == c1
    assert sorted(str(p.relative_to(mirror)) for p in mirror.rglob("*")) == before  # the mirror is not written


# -- depends on the retrieval work in progress (ctx_lsp/retrieval): may fail until it lands ----------
@pytest.mark.parametrize("instance_id", ["acme__shop-205", "acme__shop-150", "acme__shop-101"])
def test_retrieval_dependent_engine_ranks_gold_file_first(lane: dict[str, Any], capsys: pytest.CaptureFixture[str],
                                                          instance_id: str) -> None:
    if "report_a" not in lane:
        lane["report_a"] = _run(lane, "c", capsys)[0]
    res = {r["instance_id"]: r for r in lane["report_a"]["instances"]}[instance_id]
    ranks = res["rankings"]["engine"]["file_ranks"]
    assert list(ranks.values()) == [1], (res["rankings"]["engine"]["files"], res["gold_files"])


def test_merge_of_split_runs_equals_one_run(lane: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    whole, _, _ = _run(lane, "m-all", capsys)
    ids = sorted(x["instance_id"] for x in whole["instances"])
    parts = []
    for i, chunk in enumerate((ids[:1], ids[1:])):
        out = lane["root"] / f"m-{i}.json"
        rc = main(["swebench", str(lane["data"]), "--work", str(lane["root"] / "work-m-all"), "--ids", ",".join(chunk),
                   "--json", str(out)])
        assert rc == 0
        parts.append(str(out))
    capsys.readouterr()
    merged_path = lane["root"] / "merged.json"
    assert main(["swebench-merge", *parts, "--json", str(merged_path)]) == 0
    merged = json.loads(merged_path.read_text())
    assert [x["instance_id"] for x in merged["instances"]] == ids
    strip = _strip_timings
    assert strip(merged["aggregates"]) == strip(whole["aggregates"])
    # the same instance in two runs is refused, not counted twice
    capsys.readouterr()
    assert main(["swebench-merge", parts[0], parts[0]]) == 2
    assert "more than one run" in capsys.readouterr().err


def test_explain_inputs_rescore_to_the_engine_ranking(lane: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """`--explain` keeps the file ranking's inputs; re-scored offline with the engine's own weights
    (swebench-fit) they give back the engine's gold ranks, so weights fitted on them mean something."""
    import numpy as np

    from benchmark_gen.swebench_fit import load, metrics
    from ctx_lsp.retrieval.files import WEIGHTS

    rep, _, _ = _run(lane, "x", capsys, "--explain")
    for r in rep["instances"]:
        files = r["explain"]["files"]
        assert set(r["gold_files"]) <= set(files)
        assert all("prior" in f for f in files.values())
        assert r["explain"]["symbols"] and all("parts" in s for s in r["explain"]["symbols"])
    classes = sorted(WEIGHTS)
    insts = load([lane["root"] / "x.json"], classes)
    assert len(insts) == 3
    m = metrics(insts, np.array([WEIGHTS[c] for c in classes]))
    eng = rep["aggregates"]["overall"]["engine"]
    for k in (1, 3, 5, 10):
        assert m[f"acc@{k}"] == pytest.approx(eng[f"acc@{k}"])
    assert m["mrr"] == pytest.approx(eng["mrr"])
    assert metrics(insts, np.zeros(len(classes)))["acc@1"] < 1.0  # the weights decide: all zero is a tie
    from benchmark_gen.swebench_fit import load_symbols, symbol_metrics
    from ctx_lsp.retrieval.symbols import CLASS_LINES, W_CHUNK, W_LENGTH

    sm = symbol_metrics(load_symbols([lane["root"] / "x.json"]), W_CHUNK, W_LENGTH, CLASS_LINES)
    assert sm["n"] == eng["fn_n"] == 3
    assert (sm["fn_acc@5"], sm["fn_acc@10"]) == (pytest.approx(eng["fn_acc@5"]), pytest.approx(eng["fn_acc@10"]))
    assert main(["swebench-fit", str(lane["root"] / "x.json")]) == 0
    out = capsys.readouterr().out
    assert "leave-one-repository-out" in out and "(current)" in out


def test_delivery_counts_the_gold_lines_each_pack_shows(lane: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """`delivery`: the gold patch's edited lines in non-test files, and how many of them the engine's
    items (full text, an excerpt's `shown`) and BM25's chunks packed into the same budget show."""
    from benchmark_gen import swebench_delivery as D

    rep = lane.get("report_a") or _run(lane, "a", capsys, "--ablate")[0]
    by_id = {r["instance_id"]: r for r in rep["instances"]}
    d = by_id["acme__shop-205"]["delivery"]
    assert d["gold_lines"] >= 1 and 0 <= d["engine"]["shown"] <= d["gold_lines"]
    assert d["bm25_chunks"]["tokens"] <= rep["config"]["budget"]
    assert d["engine"]["tokens"] == by_id["acme__shop-205"]["tokens"]
    agg = rep["aggregates"]["delivery"]["overall"]
    recs = [r["delivery"] for r in rep["instances"] if r["delivery"]["gold_lines"]]
    assert agg["engine"]["n"] == len(recs)
    assert agg["engine"]["line_recall"] == pytest.approx(sum(x["engine"]["shown"] / x["gold_lines"] for x in recs) / len(recs))
    assert agg["bm25_chunks"]["complete"] == pytest.approx(
        sum(x["bm25_chunks"]["shown"] == x["gold_lines"] for x in recs) / len(recs))
    # the pieces on their own
    gold = D.gold_lines([("a.py", [0, 3, 9]), ("b.py", [])])
    assert gold == {"a.py": {1, 3, 9}}
    items = [{"path": "a.py", "start_line": 2, "end_line": 5, "symbol": "f", "detail": "full"},
             {"path": "a.py", "start_line": 1, "end_line": 99, "symbol": None, "detail": "excerpt", "shown": [[8, 9]]},
             {"path": "a.py", "start_line": 1, "end_line": 99, "symbol": "g", "detail": "signature"}]
    assert D.shown_count(gold, D.engine_shown(items)) == 2  # line 3 (full) and 9 (excerpt), not line 1
    src = {"a.py": [f"x{i} = {i}" for i in range(1, 12)]}
    chunks = {"a.py": {"f": [1, 2, 3], "g": [9, 10]}}
    shown, spent = D.bm25_shown([("a.py", "g"), ("a.py", "f")], lambda p: chunks[p], lambda p: src[p], 60)
    assert shown == {"a.py": {9, 10}} and 0 < spent <= 60  # f no longer fits
    assert D.bm25_shown([("a.py", "g"), ("a.py", "f")], lambda p: chunks[p], lambda p: src[p], 80)[0] == {"a.py": {1, 2, 3, 9, 10}}
