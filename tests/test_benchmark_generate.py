"""benchmark_gen generate: gold equals hand-written expectations, determinism, no leaking nameless phrasings."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchmark_gen.common import leaks, subwords
from benchmark_gen.generate import dumps, generate
from benchmark_gen.phrasing import forbidden_words
from benchmark_gen.sampling import spread

WS = Path(__file__).resolve().parent / "fixtures" / "bench_ws"


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return generate(WS, per_relation=100, seed=0, cache_dir=tmp_path_factory.mktemp("cache"))


def spans(q: dict[str, Any]) -> set[tuple[str, int, int, str | None]]:
    return {(g["path"], g["start_line"], g["end_line"], g["symbol"]) for g in q["gold"]}


def find(records: list[dict[str, Any]], lane: str, relation: str, target: str, phrasing: str) -> dict[str, Any]:
    hits = [q for q in records[1:] if (q["lane"], q["relation"], q["target"], q["phrasing"]) ==
            (lane, relation, target, phrasing)]
    assert len(hits) == 1, f"expected one {lane}/{relation}/{phrasing} question about {target}, got {len(hits)}"
    return hits[0]


# Hand-written from reading tests/fixtures/bench_ws (line numbers are the defs' spans, decorators included).
COMPUTE_PRICE = ("shop/pricing.py", 11, 14, "compute_price")
CHECKOUT = ("shop/service.py", 10, 15, "CheckoutService.checkout")
DISCOUNT_TOTAL = ("shop/models.py", 36, 39, "DiscountOrder.total")
TEST_DISCOUNT = ("tests/test_service.py", 9, 12, "test_discount")
EXPECTED = [
    ("callers", "shop/pricing.py::apply_tax", {COMPUTE_PRICE}),
    ("callers", "shop/models.py::Order.total", {COMPUTE_PRICE, DISCOUNT_TOTAL}),
    ("callers", "shop/service.py::CheckoutService.checkout",
     {("shop/reports.py", 6, 12, "daily_report"), ("tests/test_service.py", 5, 6, "test_checkout")}),
    ("callees", "shop/pricing.py::compute_price", {("shop/models.py", 24, 26, "Order.total"),
                                                   ("shop/pricing.py", 6, 8, "apply_tax")}),
    ("implementations", "shop/models.py::Order", {("shop/models.py", 29, 39, "DiscountOrder")}),
    ("implementations", "shop/models.py::Order.total", {DISCOUNT_TOTAL}),
    ("importers", "shop/models.py::Order", {("shop/pricing.py", 1, 14, None), ("shop/service.py", 1, 15, None)}),
    ("instantiations", "shop/models.py::Item", {CHECKOUT, TEST_DISCOUNT}),
    ("impact", "shop/models.py::Order", {("shop/models.py", 29, 39, "DiscountOrder"), CHECKOUT}),
    ("impact", "shop/pricing.py::compute_price", {CHECKOUT}),
    ("references", "shop/pricing.py::compute_price", {("shop/service.py", 1, 15, None), CHECKOUT}),
    # static-test COVERS edges: test_checkout calls checkout
    ("tests", "shop/service.py::CheckoutService.checkout", {("tests/test_service.py", 5, 6, "test_checkout")}),
]


@pytest.mark.parametrize("relation,target,expected", EXPECTED, ids=[f"{r}:{t}" for r, t, _ in EXPECTED])
def test_gold_equals_hand_written_expectation(records: list[dict[str, Any]], relation: str, target: str,
                                              expected: set[tuple[str, int, int, str | None]]) -> None:
    q = find(records, "relation", relation, target, "qualified")
    assert spans(q) == expected
    assert q["gold_files"] == sorted({s[0] for s in expected})
    # every phrasing of one target carries the same gold
    for other in ("short", "nameless"):
        assert spans(find(records, "relation", relation, target, other)) == expected


def test_phrasings_name_the_target_as_specified(records: list[dict[str, Any]]) -> None:
    assert find(records, "relation", "callers", "shop/pricing.py::apply_tax", "qualified")["question"] == \
        "Who calls `shop.pricing.apply_tax`?"
    assert find(records, "relation", "callers", "shop/pricing.py::apply_tax", "short")["question"] == \
        "Who calls `apply_tax` in `shop/pricing.py`?"
    nameless = find(records, "relation", "callers", "shop/pricing.py::apply_tax", "nameless")["question"]
    assert "Scale an amount by a value added rate" in nameless and "apply" not in nameless.lower()


def test_trivial_targets_are_skipped(records: list[dict[str, Any]]) -> None:
    rel = [q for q in records[1:] if q["lane"] == "relation"]
    assert not [q for q in rel if q["target"].rsplit(".", 1)[-1].startswith("__")], "dunders are never targets"
    assert not [q for q in rel if q["relation"] != "callees" and q["target"].startswith("tests/")]
    # test code may be asked about for its callees
    assert any(q["target"] == "tests/test_service.py::test_discount" for q in rel if q["relation"] == "callees")
    assert all(1 <= len(q["gold"]) for q in rel)


def test_nameless_phrasings_leak_no_identifier_subword(records: list[dict[str, Any]]) -> None:
    nameless = [q for q in records[1:] if q["phrasing"] == "nameless"]
    assert len(nameless) >= 20
    for q in nameless:
        qual = q["target"].split("::", 1)[1]
        forbidden = {w for part in qual.split(".") for w in subwords(part)}
        found = {w.lower() for w in __import__("re").findall(r"[A-Za-z0-9]+", q["question"])}
        assert not (forbidden & found), (q["question"], forbidden & found)
        assert qual.rsplit(".", 1)[-1].lower() not in q["question"].lower()


def test_leak_check_catches_forms_and_compounds() -> None:
    class N:
        qualname = "Session.merge_environment_settings"

    forb = forbidden_words(N)  # type: ignore[arg-type]
    assert {"session", "merge", "environment", "settings"} <= forb
    assert leaks("the method of the session class that merges environment settings", forb) == \
        ["environment", "merge", "session", "settings"]
    assert leaks("reads `merge_config` first", forb) == ["merge"]
    assert leaks("Checks the proxies and returns a mapping", forb) == []


def test_lanes_have_hand_checked_gold(records: list[dict[str, Any]]) -> None:
    q = find(records, "impact", "add_parameter", "shop/pricing.py::apply_tax", "instruction")
    # apply_tax is called by compute_price, which CheckoutService.checkout calls: service.py never says
    # "apply" or "tax" and is one import hop away, so it is hidden
    assert spans(q) == {("shop/pricing.py", 6, 8, "apply_tax"), COMPUTE_PRICE, CHECKOUT}
    assert q["groups"] == {"shop/pricing.py": "semantic", "shop/service.py": "hidden"}
    q = find(records, "impact", "add_parameter", "shop/pricing.py::compute_price", "instruction")
    assert q["groups"] == {"shop/pricing.py": "semantic", "shop/service.py": "semantic",
                           "shop/reports.py": "structural", "tests/test_service.py": "structural"}
    q = find(records, "ctx", "implicit", "shop/reports.py", "natural")
    assert q["path"] == "shop/reports.py"
    assert q["gold_files"] == ["shop/models.py", "shop/pricing.py", "shop/service.py"]
    q = find(records, "ctx", "temporal", "shop/pricing.py::compute_price", "natural")
    assert "compute_price" in " ".join(q["session"]) and "compute_price" not in q["question"]
    assert spans(q) == {CHECKOUT}
    rb = [r for r in records[1:] if r["lane"] == "repobench"]
    assert rb, "the fixture has cross-file uses"
    for r in rb:
        assert r["gold"][0] in r["candidates"]
        assert all(c["path"] != r["path"] for c in r["candidates"])
        assert r["line"] > 4  # never the import line itself
    first = find(records, "repobench", "first_use", "shop/service.py:12", "code")
    assert spans(first) == {("shop/models.py", 13, 26, "Order")}
    assert "from shop.models import Item, Order" in first["question"]


def test_header_and_counts(records: list[dict[str, Any]]) -> None:
    h = records[0]
    assert set(h) >= {"schema", "tool_version", "commit", "files_digest", "counts"}
    assert h["commit"] is None  # the fixture is not the top of a git work tree
    # so no history questions: the enclosing repository's commits are not pinned by this header
    assert not [q for q in records[1:] if q["relation"] == "history"]
    assert h["counts"]["questions"] == len(records) - 1
    assert sum(h["counts"]["relations"].values()) == len(records) - 1


def test_deterministic_across_runs_and_checkout_paths(tmp_path: Path) -> None:
    a = dumps(generate(WS, per_relation=3, seed=5, cache_dir=tmp_path / "c1"))
    b = dumps(generate(WS, per_relation=3, seed=5, cache_dir=tmp_path / "c2"))
    assert a == b
    copy = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(WS, copy)
    c = dumps(generate(copy, per_relation=3, seed=5, cache_dir=tmp_path / "c3"))
    assert a == c
    assert str(tmp_path) not in c and str(WS) not in a
    # a different seed samples differently (the fixture has more candidates than 3 per relation)
    d = dumps(generate(WS, per_relation=3, seed=6, cache_dir=tmp_path / "c4"))
    assert d != a
    # and a content change changes the digest in the header
    (copy / "shop" / "reports.py").write_text((copy / "shop" / "reports.py").read_text() + "\n# note\n")
    e = generate(copy, per_relation=3, seed=5, cache_dir=tmp_path / "c3")
    assert e[0]["files_digest"] != json.loads(a.splitlines()[0])["files_digest"]


def test_spread_round_robins_files_and_sizes() -> None:
    items = [("a.py", i, 1 + (i % 3) * 20) for i in range(6)] + [("b.py", i, 3) for i in range(6)]
    picked = spread(items, 0, lambda it: it[0], lambda it: f"{it[0]}:{it[1]}", lambda it: it[0],
                    lambda it: 0 if it[2] < 8 else 1, 4)
    assert {p[0] for p in picked} == {"a.py", "b.py"}
    assert {p[2] >= 8 for p in picked} == {True, False}
    assert picked == spread(list(reversed(items)), 0, lambda it: it[0], lambda it: f"{it[0]}:{it[1]}",
                            lambda it: it[0], lambda it: 0 if it[2] < 8 else 1, 4)


def test_history_questions_in_a_git_repository(tmp_path: Path) -> None:
    """At the top of a git work tree, `history` questions name the newest commits touching the target."""
    import subprocess

    repo = tmp_path / "repo"
    shutil.copytree(WS, repo)

    def git(*args: str) -> str:
        env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(tmp_path)}
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                              env=env).stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "shop")
    pricing = repo / "shop" / "pricing.py"
    pricing.write_text(pricing.read_text().replace("return apply_tax(subtotal, rate)",
                                                   "total = apply_tax(subtotal, rate)\n    return total"))
    git("commit", "-q", "-am", "name the total")
    head = git("rev-parse", "HEAD")
    shas = {line[:12] for line in git("log", "--format=%H").splitlines()}
    recs = generate(repo, per_relation=50, seed=0, cache_dir=tmp_path / "cache")
    assert recs[0]["commit"] == head
    hist = [q for q in recs[1:] if q["relation"] == "history" and q["phrasing"] == "qualified"]
    assert hist, "history questions at the top of a git work tree"
    for q in hist:
        assert {g["path"].removeprefix("commit:") for g in q["gold"]} <= shas
        assert q["gold_files"] == sorted(g["path"] for g in q["gold"])
    changed = next(q for q in hist if q["target"] == "shop/pricing.py::compute_price")
    assert head[:12] in {g["path"].removeprefix("commit:") for g in changed["gold"]}
