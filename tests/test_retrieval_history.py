"""History and tests operators of the read path, on a git repository built inside the test."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ctx_lsp.engine import Engine

FIXTURE = Path(__file__).parent / "fixtures" / "retrieval_ws"
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(root: Path, *args: str, date: str = "2024-01-01T00:00:00+00:00") -> None:
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "GIT_AUTHOR_NAME": "Ada",
           "GIT_AUTHOR_EMAIL": "ada@example.com", "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.com",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_SYSTEM": os.devnull}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    root = tmp_path_factory.mktemp("repo") / "ws"
    shutil.copytree(FIXTURE, root)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "Initial shop")
    pricing = root / "shop/pricing.py"
    pricing.write_text(pricing.read_text().replace("TAX_RATE = 0.2", "TAX_RATE = 0.21"))
    orders = root / "shop/orders.py"
    orders.write_text(orders.read_text().replace("return total", "return round(total, 2)"))
    _git(root, "commit", "-q", "-am", "Raise the VAT rate and round order totals", date="2024-03-01T00:00:00+00:00")
    e = Engine(root, cache_dir=tmp_path_factory.mktemp("cache"))
    e.open()
    return e


def _items(pack: dict) -> list[tuple[str, str | None, str]]:
    return [(i["path"], i["symbol"], i["kind"]) for i in pack["items"]]


def test_recent_changes_of_a_symbol_deliver_its_commits_newest_first(engine: Engine) -> None:
    pack = engine.context("what changed in OrderService.place recently", 3000, record=False)
    assert "history" in pack["plan"]["operators"]
    commits = [i for i in pack["items"] if i["kind"] == "commit"]
    assert commits, _items(pack)
    assert "Raise the VAT rate" in commits[0]["text"]
    assert any(r["via"] == "recent-change" for r in commits[0]["reasons"])


def test_commit_subjects_are_searchable(engine: Engine) -> None:
    pack = engine.context("which commit changed the VAT rate", 3000, record=False)
    symbols = {i["symbol"] for i in pack["items"]}
    assert "TAX_RATE" in symbols or "with_tax" in symbols, _items(pack)


def test_which_commit_introduced_a_symbol(engine: Engine) -> None:
    pack = engine.context("which commit introduced apply_discount", 3000, record=False)
    intro = [i for i in pack["items"] if any(r["via"] == "introduced" for r in i["reasons"])]
    assert intro and "Initial shop" in intro[0]["text"]


def test_tests_to_run_after_changing_a_symbol_include_its_callers_tests(engine: Engine) -> None:
    pack = engine.context("which tests should I run after changing apply_discount", 3000, record=False)
    tests = [i["symbol"] for i in pack["items"] if i["kind"] == "test"]
    assert "test_place_stores_order" in tests, _items(pack)


def test_what_a_test_exercises(engine: Engine) -> None:
    pack = engine.context("what does the test test_place_stores_order exercise", 3000, record=False)
    symbols = {i["symbol"] for i in pack["items"]}
    assert {"OrderService", "OrderService.place"} & symbols, _items(pack)
