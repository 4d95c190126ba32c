"""Task text in, grounded code out: evidence extraction, snippet binding through re-exports and base
classes, traceback frames, the literal index, the planner on long text, the scope prior, the ranked
`files` list, and that a query leaves the graph and the cache as they were."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctx_lsp.engine import Engine
from ctx_lsp.index.extract import extract
from ctx_lsp.retrieval.engine import ALL_FEATURES
from ctx_lsp.retrieval.evidence import extract_evidence
from ctx_lsp.retrieval.literals import LiteralIndex
from ctx_lsp.retrieval.plan import TEMPORAL_HISTORY, make_plan
from tests.conftest import open_engine, write_tree

PROJECT = {
    "shop/__init__.py": '"""A small shop."""\nfrom .pricing.discounts import apply_discount\n\n__all__ = ["apply_discount"]\n',
    "shop/pricing/__init__.py": "",
    "shop/pricing/discounts.py": (
        "def apply_discount(total, rate):\n"
        "    \"\"\"Reduce a total by a rate.\"\"\"\n"
        "    if rate > 1:\n"
        "        raise ValueError(f\"rate {rate} is above one\")\n"
        "    return total * (1 - rate)\n"
    ),
    "shop/pricing/taxes.py": "def with_tax(amount, rate=0.2):\n    # discount and total words, to tempt a lexical ranker\n    return amount * (1 + rate)\n",
    "shop/models/__init__.py": "",
    "shop/models/base.py": (
        "class Model:\n"
        "    def save(self, using=None):\n"
        "        self.validate()\n"
        "        return self._store(using)\n\n"
        "    def validate(self):\n        return True\n\n"
        "    def _store(self, using):\n        return using\n"
    ),
    "shop/models/order.py": (
        "from shop.models.base import Model\n\n\n"
        "class Order(Model):\n"
        "    def __init__(self, total):\n        self.total = total\n"
    ),
    "shop/checks.py": (
        "def check_discounts(orders):\n"
        "    errors = []\n"
        "    for o in orders:\n"
        "        if o.discount > o.total:\n"
        "            errors.append(Error('Discount of %s must not exceed the order total %s.' % (o.discount, o.total),\n"
        "                                id='shop.E042'))\n"
        "    return errors\n\n\n"
        "class Error:\n    def __init__(self, msg, id=None):\n        self.msg, self.id = msg, id\n"
    ),
    "shop/report.py": "def report(orders):\n    # order total discount discount total order save model\n    return [o.total for o in orders]\n",
    "examples/discount_demo.py": (
        "# apply discount to an order total: a demo of the discount total order save model\n"
        "from shop import apply_discount\n\nprint(apply_discount(100, 0.1))  # discount total\n"
    ),
    "setup.py": "# discount total order save model shop\nfrom setuptools import setup\nsetup(name='shop')\n",
    "tests/test_discounts.py": "from shop import apply_discount\n\ndef test_discount_total():\n    assert apply_discount(100, 0.5) == 50\n",
}

TRACEBACK_ISSUE = """apply_discount crashes on a large rate

Description

When I call the pricing helper with a rate above one I get this:

Traceback (most recent call last):
  File "/home/me/app/run.py", line 3, in <module>
    main()
  File "/usr/lib/python3.11/site-packages/shop/pricing/discounts.py", line 4, in apply_discount
    raise ValueError(f"rate {rate} is above one")
ValueError: rate 3 is above one

It worked before v1.2, and again in the previous release. Expected: a clear error.
"""

SNIPPET_ISSUE = """Saving an order stores nothing

The order total is not saved, we lose every order. Steps to reproduce:

```python
>>> from shop import apply_discount
>>> from shop.models.order import Order
>>> o = Order(apply_discount(100, 0.1))
>>> o.save()
None
```

I expected the order to be stored when I save it.
"""

CODE_ISSUE = """Check shop.E042 fires for valid orders

Our discount total looks right, yet the check says "must not exceed the order total" for an order
with a zero discount. The error code is shop.E042 and the full message is: Discount of 0 must not
exceed the order total 10.
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return open_engine(tmp_path_factory.mktemp("shop"), PROJECT, tmp_path_factory.mktemp("cache"))


def _opened(tmp_path: Path, files: dict[str, str]) -> Engine:
    """An engine opened on `files` written under tmp_path/ws (its cache beside it)."""
    write_tree(tmp_path / "ws", files)
    e = Engine(tmp_path / "ws", cache_dir=tmp_path / "cache")
    e.open()
    return e


def _ctx(e: Engine, text: str, features: frozenset[str] = ALL_FEATURES) -> dict:
    with e.lock:
        return e.retriever.context(text, 8000, record=False, features=features)


# -- evidence ---------------------------------------------------------------------------------


def test_evidence_reads_code_blocks_doctests_tracebacks_and_codes() -> None:
    ev = extract_evidence(TRACEBACK_ISSUE)
    assert [f.function for f in ev.frames] == ["<module>", "apply_discount"]
    assert ev.frames[-1].path.endswith("site-packages/shop/pricing/discounts.py") and ev.frames[-1].line == 4
    assert ("ValueError", "rate 3 is above one") in ev.exceptions
    assert "1.2" in ev.versions
    ev = extract_evidence(SNIPPET_ISSUE)
    assert ev.code == ["from shop import apply_discount\nfrom shop.models.order import Order\n"
                       "o = Order(apply_discount(100, 0.1))\no.save()"]  # doctest output dropped
    ev = extract_evidence(CODE_ISSUE)
    assert ev.codes == ["shop.E042"]
    assert "must not exceed the order total" in ev.messages
    # prose abbreviations are not dotted names of code; a one-letter alias's attribute is
    ev = extract_evidence("It breaks, e.g. in shop.pricing.apply, i.e. always.\nE.g. u.m breaks too (a.k.a. metre).")
    assert ev.dotted == ["shop.pricing.apply", "u.m"]


def test_evidence_finds_code_pasted_without_markup_and_in_trac_blocks() -> None:
    text = ("Crash on save.\nDescription\n\t\nTake this model:\nfrom django.db import models\n"
            "class Readable(models.Model):\n\ttitle = models.CharField(max_length=200)\nAnd then it fails with "
            "django.core.exceptions.FieldError: Local field 'title' clashes.\n{{{\n#!python\nx = f(1)\n}}}\n")
    ev = extract_evidence(text)
    assert "from django.db import models\nclass Readable(models.Model):\n    title = models.CharField(max_length=200)" in ev.code
    assert "x = f(1)" in ev.code
    assert ("django.core.exceptions.FieldError", "Local field 'title' clashes.") in ev.exceptions


def test_a_tracebacks_last_line_is_its_exception_whatever_the_name() -> None:
    text = ("get() fails:\n\nTraceback (most recent call last):\n  File \"/srv/app/views.py\", line 12, in show\n"
            "    author = Author.objects.get(pk=pk)\n             ^^^^^^^^^^^^^^^^^^^^^^^^^^\n\n"
            "books.models.DoesNotExist: Author matching query does not exist.\n\n"
            "The above exception was the direct cause of the following exception:\n\n"
            "    Traceback (most recent call last):\n      File \"x.py\", line 1, in <module>\n"
            "    ImproperlyConfigured\n\nTraceback (most recent call last):\n  File \"y.py\", line 2, in f\n"
            "and then nothing that names an exception\n")
    ev = extract_evidence(text)
    assert ev.exceptions == [("books.models.DoesNotExist", "Author matching query does not exist."),
                             ("ImproperlyConfigured", "")]
    assert "Author matching query does not exist." in ev.messages  # matched against the code's literals


def test_evidence_is_linear_and_tolerant() -> None:
    t = time.perf_counter()
    ev = extract_evidence("```\n" + "x = (\n" * 20000 + "```\n" + "word " * 100_000)
    assert time.perf_counter() - t < 10  # broken code and 600 KB of text: bounded, no exception
    assert ev.text


# -- planner ------------------------------------------------------------------------------------


def test_planner_treats_issue_text_as_a_task_not_a_session_question() -> None:
    plan = make_plan(TRACEBACK_ISSUE)
    assert plan.task and plan.trigger != TEMPORAL_HISTORY  # "before", "again", "previous" are about versions
    session = make_plan("Earlier in this session we looked at the discount code. Which function applied the rate? "
                        "I want to see it again, with the callers of it, since it changed since then.")
    assert session.task and session.trigger == TEMPORAL_HISTORY
    # what the reporter did is no session phrasing: the issue is read on its own
    for said in ("I looked at `convertors.py` where the types are registered, but the check is not there.",
                 "We looked at the settings and saw this before, last time I ran it on 5.1."):
        reporter = make_plan("Typo in a path parameter type gives an unhelpful AssertionError.\n\n" + said +
                             "\nThe message should name the unknown convertor.")
        assert reporter.task and reporter.trigger != TEMPORAL_HISTORY and not reporter.temporal, said
    short = make_plan("what did we look at before")
    assert not short.task and short.trigger == TEMPORAL_HISTORY  # short questions keep their behaviour
    nameless = make_plan('Who calls the function under src/pkg/ that takes three parameters and returns Response, '
                         'documented as "... a ... dictionary on a given piece of data. It is used. Often."?')
    assert not nameless.task and nameless.operators == ["callers"]  # one question, however long


# -- literals -----------------------------------------------------------------------------------


def test_literal_index_matches_format_strings_and_codes() -> None:
    index = LiteralIndex()
    index.set_file(extract("shop/checks.py", PROJECT["shop/checks.py"]), "shop/checks.py")
    hits = index.match("Discount of 0 must not exceed the order total 10.")
    assert hits and hits[0][0].node_id == "shop/checks.py::check_discounts"
    assert [lit.node_id for lit in index.match_code("shop.E042")] == ["shop/checks.py::check_discounts"]
    assert [lit.node_id for lit in index.match_code("E042")] == ["shop/checks.py::check_discounts"]
    assert index.match("an unrelated sentence about weather today") == []
    index.set_file(None, "shop/checks.py")  # removal leaves nothing behind
    assert index.match_code("shop.E042") == [] and not index.postings


# -- grounding through the engine -----------------------------------------------------------------


def test_traceback_innermost_project_frame_ranks_first(engine: Engine) -> None:
    pack = _ctx(engine, TRACEBACK_ISSUE)
    assert pack["files"][0]["path"] == "shop/pricing/discounts.py"
    vias = {r["via"] for r in pack["files"][0]["reasons"]}
    assert "traceback" in vias
    assert pack["plan"]["trigger"] != TEMPORAL_HISTORY
    assert pack["items"][0]["path"] == "shop/pricing/discounts.py"  # items follow the file ranking


def test_snippet_binds_through_reexport_and_base_class(engine: Engine) -> None:
    pack = _ctx(engine, SNIPPET_ISSUE)
    reasons = {(it["symbol"], r["via"]) for it in pack["items"] for r in it["reasons"]}
    assert ("apply_discount", "snippet-call") in reasons  # `from shop import apply_discount`: the re-export
    assert ("Model.save", "snippet-call") in reasons  # `Order(...).save()`: found on the base class
    paths = [f["path"] for f in pack["files"]]
    assert paths.index("shop/models/base.py") < paths.index("shop/report.py")
    # without the snippet generator, the base class is not found by name (nothing in the text says Model)
    plain = _ctx(engine, SNIPPET_ISSUE, ALL_FEATURES - {"snippets"})
    assert not any(r["via"].startswith("snippet") for it in plain["items"] for r in it["reasons"])


def test_error_code_and_message_find_the_check(engine: Engine) -> None:
    pack = _ctx(engine, CODE_ISSUE)
    assert pack["files"][0]["path"] == "shop/checks.py"
    assert any(r["via"] == "literal" for r in pack["files"][0]["reasons"])


def test_scope_prior_puts_package_code_above_examples_and_setup(engine: Engine) -> None:
    text = ("Discount total is wrong for an order\n\nThe discount total of an order is wrong when I save the "
            "model. The order total discount should be the total minus the discount.\n")
    pack = _ctx(engine, text)
    paths = [f["path"] for f in pack["files"]]
    assert "examples/discount_demo.py" in paths and "setup.py" in paths
    for peripheral in ("examples/discount_demo.py", "setup.py"):
        f = next(f for f in pack["files"] if f["path"] == peripheral)
        assert any(r["via"] == "scope-prior" for r in f["reasons"])
    off = _ctx(engine, text, ALL_FEATURES - {"scope"})
    rank = {f["path"]: i for i, f in enumerate(pack["files"])}
    rank_off = {f["path"]: i for i, f in enumerate(off["files"])}
    assert rank["examples/discount_demo.py"] > rank_off["examples/discount_demo.py"]
    # named by the task: no penalty
    named = _ctx(engine, text + "\nSee examples/discount_demo.py for the demo.\n")
    f = next(f for f in named["files"] if f["path"] == "examples/discount_demo.py")
    assert not any(r["via"] == "scope-prior" for r in f["reasons"])


def test_files_list_is_deterministic_and_short_questions_keep_items_order(engine: Engine) -> None:
    a = _ctx(engine, SNIPPET_ISSUE)
    b = _ctx(engine, SNIPPET_ISSUE)
    assert a["files"] == b["files"] and [i["symbol"] for i in a["items"]] == [i["symbol"] for i in b["items"]]
    short = _ctx(engine, "who calls apply_discount")
    assert "task" not in short["plan"]
    first_seen: list[str] = []
    for it in short["items"]:
        if it["path"] not in first_seen:
            first_seen.append(it["path"])
    assert [f["path"] for f in short["files"]] == first_seen


def test_a_task_query_changes_neither_graph_nor_cache(engine: Engine) -> None:
    before = engine.graph.snapshot()
    ws_info = dict(engine.index.ws.info)
    class_cache = dict(engine.index.ws._class_cache)
    cache_file = engine.index.store.path
    stat = cache_file.stat()
    for text in (SNIPPET_ISSUE, TRACEBACK_ISSUE, CODE_ISSUE, "```python\nclass Mine(Order):\n    def save(self):\n"
                 "        super().save()\n```\nSubclassing Order and overriding save breaks.\n" + "More text. " * 20):
        _ctx(engine, text)
    assert engine.graph.snapshot() == before
    assert dict(engine.index.ws.info) == ws_info and not any(k.startswith("<task>") for k in engine.index.ws.info)
    assert dict(engine.index.ws._class_cache) == class_cache
    assert cache_file.stat().st_mtime_ns == stat.st_mtime_ns and cache_file.stat().st_size == stat.st_size


def test_every_generator_can_be_switched_off(engine: Engine) -> None:
    for name in sorted(ALL_FEATURES):
        pack = _ctx(engine, SNIPPET_ISSUE, ALL_FEATURES - {name})
        assert pack["files"], name


def test_cli_context_json_has_files(tmp_path: Path) -> None:
    write_tree(tmp_path / "ws", PROJECT)
    out = subprocess.run([sys.executable, "-m", "ctx_lsp", "context", "--root", str(tmp_path / "ws"),
                          "--cache-dir", str(tmp_path / "cache"), "--json", "-"], input=TRACEBACK_ISSUE,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    pack = json.loads(out.stdout)
    assert pack["files"][0]["path"] == "shop/pricing/discounts.py"


def test_a_query_too_long_is_cut_keeping_its_start_and_its_traceback(engine: Engine) -> None:
    from ctx_lsp.retrieval.evidence import MAX_QUERY_CHARS

    log = "\n".join(f"INFO step {i} finished without trouble" for i in range(20_000))
    text = ("Checkout fails with a KeyError after many steps\n\n" + log +
            '\nTraceback (most recent call last):\n  File "/srv/app/shop/checks.py", line 4, in check_discounts\n'
            "KeyError: 'code'\n")
    assert len(text) > MAX_QUERY_CHARS
    pack = engine.context(text, 3000, record=False)
    assert pack["plan"]["truncated"] == {"chars": len(text), "kept": len(pack["query"])}
    assert len(pack["query"]) <= MAX_QUERY_CHARS + 100
    assert pack["query"].startswith("Checkout fails with a KeyError")
    assert "shop/checks.py:4 check_discounts" in " ".join(pack["plan"]["evidence"]["frames"])  # the end was kept
    short = engine.context("Checkout fails with a KeyError\n\n" + log[:5000], 3000, record=False)
    assert "truncated" not in short["plan"]


def test_symbols_rank_functions_past_the_budget(engine: Engine) -> None:
    pack = _ctx_budget(engine, CODE_ISSUE, 60)
    symbols = pack["symbols"]
    assert len(pack["items"]) == 1 and len(symbols) > 5  # the budget cuts the items, not the ranking
    assert (symbols[0]["path"], symbols[0]["symbol"]) == ("shop/checks.py", "check_discounts")
    for s in symbols:
        node = engine.graph.node(f"{s['path']}::{s['symbol']}")
        assert node is not None and node.start_line == s["start_line"] and node.kind == s["kind"]
    assert [s["score"] for s in symbols] == sorted((s["score"] for s in symbols), reverse=True)
    # a leading file's symbol that no generator reached is found by its own text, and says so
    init = next(s for s in symbols if s["symbol"] == "Error.__init__")
    assert [r["via"] for r in init["reasons"]] == ["chunk-bm25"]
    assert _ctx_budget(engine, CODE_ISSUE, 60)["symbols"] == symbols  # deterministic
    no_lexical = _ctx_budget(engine, CODE_ISSUE, 60, ALL_FEATURES - {"lexical"})["symbols"]
    assert no_lexical and not any(r["via"] == "chunk-bm25" for s in no_lexical for r in s["reasons"])


def test_symbols_of_a_short_question_are_its_ranked_candidates(engine: Engine) -> None:
    pack = _ctx(engine, "who calls validate")
    names = [s["symbol"] for s in pack["symbols"]]
    assert names[:1] == ["Model.validate"] and "Model.save" in names
    assert not any(r["via"] == "chunk-bm25" for s in pack["symbols"] for r in s["reasons"])


def _ctx_budget(e: Engine, text: str, budget: int, features: frozenset[str] = ALL_FEATURES) -> dict:
    with e.lock:
        return e.retriever.context(text, budget, record=False, features=features)


def test_markdown_names_the_ranked_symbols_the_budget_left_out(engine: Engine) -> None:
    from ctx_lsp.retrieval.render import to_markdown

    pack = _ctx_budget(engine, CODE_ISSUE, 60)
    md = to_markdown(pack)
    also = next(line for line in md.splitlines() if line.startswith("Also look at: "))
    left_out = [s for s in pack["symbols"] if s["symbol"] not in {i["symbol"] for i in pack["items"]}]
    assert f"`{left_out[0]['path']}:{left_out[0]['start_line']}` `{left_out[0]['symbol']}`" in also
    assert "`check_discounts`" not in also  # the packed item is not repeated


def test_a_class_member_named_through_a_subclass_resolves_on_its_base(engine: Engine) -> None:
    """`Order.save` where Order inherits save from Model: the name means Model.save (its MRO), for
    lookups and for an issue's title; a member no base defines stays unknown."""
    assert [n.id for n in engine.find_symbols("Order.save")] == ["shop/models/base.py::Model.save"]
    assert [n.id for n in engine.find_symbols("shop.models.order.Order.validate")] == \
        ["shop/models/base.py::Model.validate"]
    assert engine.find_symbols("Order.refund") == []
    # through a package's re-export (shop/__init__.py imports it from shop.pricing.discounts)
    assert [n.id for n in engine.find_symbols("shop.apply_discount")] == ["shop/pricing/discounts.py::apply_discount"]
    assert engine.find_symbols("shop.no_such_name") == []
    assert engine.find_symbols("Order.__init__")[0].id == "shop/models/order.py::Order.__init__"  # its own wins
    issue = ("Order.validate() rejects every order\n\nDescription\n\nSince the last release each order I "
             "create is reported invalid, although its total is fine. The order report shows the total. "
             "I expected a valid order to pass.\n")
    pack = engine.context(issue, 4000, record=False)
    assert pack["plan"]["task"]
    assert pack["files"][0]["path"] == "shop/models/base.py"
    assert "title-symbol" in {r["via"] for r in pack["files"][0]["reasons"]}


def test_a_method_name_many_classes_define_means_the_one_they_override_first(tmp_path: Path) -> None:
    """`render` defined by a base and overridden by two subclasses (in files sorted before it): the
    base's definition is the first match, other definitions that override nothing next, overrides last."""
    write_tree(tmp_path / "ws", {
        "app/__init__.py": "",
        "app/a_widgets.py": "from app.z_base import Widget\n\n\nclass Button(Widget):\n    def render(self):\n        return 'b'\n\n\n"
                            "class Link(Widget):\n    def render(self):\n        return 'l'\n",
        "app/b_other.py": "class Page:\n    def render(self):\n        return 'p'\n",
        "app/z_base.py": "class Widget:\n    def render(self):\n        return ''\n",
    })
    e = Engine(tmp_path / "ws", cache_dir=tmp_path / "cache")
    e.open()
    ids = [n.id for n in e.find_symbols("render")]
    assert ids[0] == "app/z_base.py::Widget.render"
    assert ids.index("app/b_other.py::Page.render") < ids.index("app/a_widgets.py::Button.render")
    assert e.resolve_target("render") == "app/z_base.py::Widget.render"


def test_scope_prior_lowers_files_no_import_can_name(tmp_path: Path) -> None:
    """A migration (`0002_order_total.py`) or a dashed script sits inside a package but no import
    statement can name it: peripheral like a script, unless the task names it."""
    from ctx_lsp.index.modules import Workspace
    from ctx_lsp.retrieval.files import PERIPHERAL, scope_prior

    files = {"shop/__init__.py": "", "shop/orders.py": "def total():\n    return 1\n",
             "shop/migrations/__init__.py": "", "shop/migrations/0002_order_total.py": "operations = []\n",
             "shop/run-report.py": "print(1)\n", "shop/class.py": "X = 1\n"}
    ws = Workspace({p: extract(p, t) for p, t in files.items()})
    prior = scope_prior(ws, lambda p: False)
    assert prior("shop/orders.py") == 1.0 and prior("shop/migrations/__init__.py") == 1.0
    for p in ("shop/migrations/0002_order_total.py", "shop/run-report.py", "shop/class.py"):
        assert prior(p) == PERIPHERAL, p
    assert scope_prior(ws, lambda p: p.endswith("0002_order_total.py"))("shop/migrations/0002_order_total.py") == 1.0


TEMPLATED_ISSUE = """\
Rounding of the invoice total drops the last cent
<!-- Before submitting, please search the existing issues. Describe the bug and the expected behavior,
and tell us your environment, the version and the operating system. -->
**Describe the bug**
The invoice total loses a cent when rounding half amounts.

**To Reproduce**
```python
# Describe the bug
print(invoice_total([0.125, 0.125]))
```

**Expected behavior**
0.26 after rounding, see https://github.com/acme/billing/blob/0a1b2c3/billing/rounding.py#L12

**Screenshots**
<img width="612" alt="Screen Shot 2021-05-12 at 12 30 50 PM" src="https://example.com/x.png">
![shot](https://example.com/y.png)

**Environment info**
- OS: Mac
- Python version: 3.9.0
- Billing version: 4.0.1
- [x] I searched the existing issues
"""


def test_clean_prose_drops_template_scaffolding_and_keeps_code_title_and_repository_paths() -> None:
    ev = extract_evidence(TEMPLATED_ISSUE)
    s = ev.search
    assert s.startswith("Rounding of the invoice total drops the last cent\n")
    for gone in ("Describe the bug**", "To Reproduce", "Expected behavior", "Before submitting", "Screen Shot",
                 "Python version", "OS: Mac", "Billing version", "I searched", "example.com", "blob/"):
        assert gone not in s, gone
    assert "# Describe the bug" in s  # a comment in a code block is code, not a heading
    assert "billing/rounding.py" in s  # a link into the repository keeps the file's path
    assert "loses a cent when rounding half amounts" in s and "0.26 after rounding" in s
    assert "Describe the bug" not in ev.prose and "loses a cent" in ev.prose
    plain = "A plain report: the total is wrong.\nIt drops a cent when it rounds half amounts, always."
    assert extract_evidence(plain).search == plain  # text without scaffolding is searched as written


def test_template_words_do_not_pull_in_code_that_shares_them(tmp_path: Path) -> None:
    """A module whose words are the template's (bug, reproduce, expected, environment, version,
    screenshot) must not outrank the module the issue is about."""
    files = {
        "billing/__init__.py": "",
        "billing/rounding.py": "def round_half(amount):\n    \"\"\"Round half amounts of an invoice total to a cent.\"\"\"\n"
                               "    return round(amount + 1e-9, 2)\n\n\ndef invoice_total(amounts):\n"
                               "    return round_half(sum(amounts))\n",
        "billing/report.py": "\"\"\"Bug report helpers: describe the bug, the steps to reproduce, the expected behavior,\n"
                             "screenshots, the environment info, OS, Python version, the version of each tool and\n"
                             "whether the existing issues were searched before submitting.\"\"\"\n\n\n"
                             + "".join(f"def describe_bug{i}(environment, version, os_name, screen_shot, expected_behavior):\n"
                                       f"    \"\"\"Describe the bug {i}: to reproduce, the expected behavior, screenshots, "
                                       "the environment info, OS, Python version, submitting, searching existing issues.\"\"\"\n"
                                       "    return [environment, version, os_name, screen_shot, expected_behavior]\n\n\n"
                                       for i in range(4)),
    }
    for i in range(6):
        files[f"billing/other{i}.py"] = f"def helper{i}(x):\n    return x + {i}\n"
    e = _opened(tmp_path, files)
    ranked = _ctx(e, TEMPLATED_ISSUE)["files"]
    assert ranked[0]["path"] == "billing/rounding.py", ranked
    bm25 = {f["path"]: next((r["value"] for r in f["reasons"] if r["via"] == "file-bm25"), 0.0) for f in ranked}
    # whole-file BM25 itself prefers the module the issue is about, not the template's words
    assert bm25["billing/rounding.py"] == 1.0 and bm25.get("billing/report.py", 0.0) < 1.0, bm25


def test_the_projects_own_name_in_prose_is_not_the_class_named_like_it(tmp_path: Path) -> None:
    """"Shop version 2 ..." names the project (its package `shop`), not the class `Shop` that the
    project's application object happens to be: no symbol evidence for it, unless code uses it."""
    files = {
        "shop/__init__.py": "",
        "shop/app.py": "class Shop:\n    def __init__(self, name):\n        self.name = name\n",
        "shop/pricing.py": "def apply_discount(total, rate):\n    return total * (1 - rate)\n",
        "tests/__init__.py": "",
        "tests/test_pricing.py": "from shop.pricing import apply_discount\n\n\ndef test_it():\n    assert apply_discount(1, 0)\n",
    }
    e = _opened(tmp_path, files)
    assert e.retriever._project_names() == frozenset({"shop"})
    issue = ("Discounts are applied twice\nWith Shop 2.1 the apply_discount result is wrong for a zero rate.\n"
             "Since upgrading Shop the totals are off. Shop runs on Linux.\n")
    pack = _ctx(e, issue)
    by_path = {f["path"]: {r["via"] for r in f["reasons"]} for f in pack["files"]}
    assert "symbol" not in by_path.get("shop/app.py", set()), by_path
    assert pack["files"][0]["path"] == "shop/pricing.py"
    assert "Shop" not in pack["plan"]["mentions"]
    code = issue + "\n```python\nfrom shop.app import Shop\nShop('x')\n```\n"  # code that uses the class still binds it
    by_path = {f["path"]: {r["via"] for r in f["reasons"]} for f in _ctx(e, code)["files"]}
    assert "snippet" in by_path.get("shop/app.py", set()), by_path


def test_rare_words_of_the_task_pin_the_few_files_that_use_them(tmp_path: Path) -> None:
    """A word of the task that at most three files use gives each of them 1/df ('rare' evidence);
    a word more files use, and short words, give nothing. The class reaches the file ranking."""
    files = {
        "shop/__init__.py": "",
        "shop/export.py": "def export(report):\n    # keep the watermark on every page\n    return report.pages\n",
        "shop/stamp.py": "def stamp(page, watermark):\n    return page + watermark\n",
        **{f"shop/common{i}.py": f"def report_total{i}(report):\n    # the report total is saved\n    return report.total\n"
           for i in range(4)},
    }
    e = _opened(tmp_path, files)
    e.retriever.sync()
    issue = ("Exports lose the watermark when the report total is saved\n"
             "The report total is saved and the report is saved, but the watermark is gone from the export.\n")
    rare = e.retriever.file_lexical.rare_matches(issue)
    # 'watermark' is in two files (1/2 each), 'export' in one; 'report' and 'total' are in four or more
    assert rare["shop/stamp.py"] == pytest.approx(0.5), rare
    assert rare["shop/export.py"] > rare["shop/stamp.py"], rare
    assert not any(p.startswith("shop/common") for p in rare), rare
    assert e.retriever.file_lexical.rare_matches("the cat sat on a mat") == {}
    ranked = _ctx(e, issue)["files"]
    reasons = {f["path"]: {r["via"]: r for r in f["reasons"]} for f in ranked}
    assert reasons["shop/export.py"]["rare"]["value"] == 1.0, reasons
    assert ranked[0]["path"] == "shop/export.py", ranked


def test_a_long_symbol_found_above_all_by_a_string_it_holds_shows_the_lines_around_it(tmp_path: Path) -> None:
    """A key the task quotes (`follow_redirects`) is a string in a 150-line command-line entry point:
    found above all by it, that item is the lines around the string, not the whole function's 1,000
    tokens; a short symbol found the same way is shown whole."""
    body = "".join(f"    step_{i} = configure_option_{i}(options, verbose=verbose)\n" for i in range(150))
    files = {
        "tool/__init__.py": "",
        "tool/cli.py": ("def main(options, verbose):\n" + body[: len(body) // 2]
                        + '    names = ["follow_redirects", "max_hops"]\n' + body[len(body) // 2:] + "    return names\n"),
        "tool/small.py": 'def hops():\n    return "max_hop_count"\n',
        "tool/client.py": "class Client:\n    def send(self, request):\n        return request\n",
    }
    e = _opened(tmp_path, files)
    issue = ("Redirect to another host keeps the header\n\nWe pass `follow_redirects` and `max_hop_count` "
             "to the client. The header should be dropped when the host changes.\n")
    items = {i["symbol"]: i for i in _ctx(e, issue)["items"]}
    main = items["main"]
    assert main["reasons"][0]["via"] == "literal-key", main["reasons"]  # what found it above all
    assert main["detail"] == "excerpt" and '"follow_redirects"' in main["text"] and main["tokens"] < 700
    assert items["hops"]["detail"] == "full"


def test_a_links_host_and_page_name_no_code_but_its_file_and_anchor_do() -> None:
    text = ("escape() duplicates the stdlib\n\nSee https://docs.python.org/3/library/html.html#html.escape and "
            "https://docs.djangoproject.com/en/3.2/ref/settings/#std:setting-CSRF_TRUSTED_ORIGINS, and the code at "
            "https://github.com/org/shop/blob/stable/1.x/shop/pricing/discounts.py#L4 which we call.\n")
    mentions = make_plan(text).mentions
    assert "html.escape" in mentions and "CSRF_TRUSTED_ORIGINS" in mentions  # anchors name objects and settings
    assert "1.x/shop/pricing/discounts.py" in mentions  # the linked file (a branch with a slash in front)
    for junk in ("html.html", "docs.python", "L4", "library"):
        assert junk not in mentions
    ev = extract_evidence(text)
    assert "html.html" not in ev.dotted and "html.escape" in ev.dotted
    assert "1.x/shop/pricing/discounts.py" in ev.paths


def test_a_link_to_a_file_on_a_branch_whose_name_holds_a_slash_finds_the_file(engine: Engine) -> None:
    text = ("Rounding is off\n\nThe rate check at "
            "https://github.com/org/shop/blob/release/1.x/shop/pricing/discounts.py#L3 compares the wrong way.\n")
    pack = _ctx(engine, text)
    assert pack["files"][0]["path"] == "shop/pricing/discounts.py"
    assert any(r["via"] == "symbol-file" for it in pack["items"] for r in it["reasons"]
               if it["path"] == "shop/pricing/discounts.py")


def test_a_snippet_calling_a_class_member_it_never_imports_names_that_member(engine: Engine) -> None:
    # `Model.validate(order)` with no import shown: the binder cannot follow `Model`, and `validate`
    # alone is too common a word; the two names together name one method
    text = ("Validation passes for a broken order\n\nI call the check directly:\n\n```python\n"
            ">>> Model.validate(order)\nTrue\n```\n\nbut the order has no total.\n")
    pack = _ctx(engine, text)
    named = [it for it in pack["items"] if it["symbol"] == "Model.validate"]
    assert named and any(r["via"] == "snippet-name" for r in named[0]["reasons"])
    assert pack["files"][0]["path"] == "shop/models/base.py"


def test_a_traceback_path_is_the_frames_generators_not_a_linked_file(engine: Engine) -> None:
    # a frame's path has more in front than the workspace too; only a link's is read as a file named
    text = TRACEBACK_ISSUE.replace("/usr/lib/python3.11/", "/home/me/.venvs/shop-env/lib/python3.11/")
    pack = _ctx(engine, text)
    assert pack["files"][0]["path"] == "shop/pricing/discounts.py"
    vias = {r["via"] for it in pack["items"] for r in it["reasons"]}
    assert "traceback" in vias and "symbol-file" not in vias


def test_a_question_quoting_an_error_message_finds_the_code_that_raises_it(engine: Engine) -> None:
    """Not only task text: a one-line question quoting a message looks it up among string literals."""
    question = 'Where does the error "Discount of 5 must not exceed the order total 3." come from?'
    pack = _ctx(engine, question)
    assert pack["plan"].get("task") is None  # a question, not a task
    first = pack["items"][0]
    assert (first["path"], first["symbol"]) == ("shop/checks.py", "check_discounts")
    assert any(r["via"] == "literal-message" for r in first["reasons"])


def test_a_bare_traceback_has_no_title_and_its_header_matches_no_code(tmp_path: Path) -> None:
    """A pasted traceback's first line is its header, not an issue's title: code that talks about
    tracebacks (a debugger's renderer) gets no title match from it."""
    from ctx_lsp.retrieval.evidence import issue_title

    assert issue_title("Traceback (most recent call last):\n  File \"a.py\", line 1") == ""
    assert issue_title(">>> f(1)\n2") == ""
    assert issue_title("  f() fails on empty input\n\nDetails") == "f() fails on empty input"
    e = _opened(tmp_path, {
        "app/__init__.py": "",
        "app/debug.py": ("def render_traceback(frames):\n"
                         "    # Traceback (most recent call last): the most recent call is last\n"
                         "    return ['Traceback (most recent call last):'] + [str(f) for f in frames]\n"),
        "app/convert.py": "def to_int(value):\n    return int(value)\n",
    })
    tb = ("Traceback (most recent call last):\n"
          '  File "/usr/lib/python3.12/site-packages/app/convert.py", line 2, in to_int\n'
          "    return int(value)\n"
          "ValueError: invalid literal for int() with base 10: 'abc'\n")
    pack = _ctx(e, tb)
    assert pack["files"][0]["path"] == "app/convert.py"
    debug = [f for f in pack["files"] if f["path"] == "app/debug.py"]
    assert not any(r["via"] == "title-bm25" for f in debug for r in f["reasons"])



def test_a_message_quoted_as_inline_code_ends_with_it_and_values_inside_messages_are_no_keys() -> None:
    """`AssertionError: Unknown path convertor 'itn'` followed by prose: the message is what the
    backticks hold, not the rest of the sentence. A value quoted inside a message (`'utf-8' codec
    can't decode`) is part of it, not an option or setting name to look up."""
    from ctx_lsp.retrieval.task_generators import _keys

    ev = extract_evidence("Route fails on typo\n\nIt fails with `AssertionError: Unknown path convertor 'itn'`. "
                          "The app is then broken and it does not exist anymore.")
    assert [m for _, m in ev.exceptions] == ["Unknown path convertor 'itn"]
    assert not any("does not exist" in m for m in ev.messages)
    ev = extract_evidence('Connection fails with "Error reading banner\'utf-8\' codec can\'t decode byte 0xff"\n\n'
                          "Pass `--ignore-paths` or set 'unused-import' to skip it.")
    assert _keys(ev) == ["--ignore-paths", "unused-import"]
