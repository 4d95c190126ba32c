"""Excerpts of long symbols and files for task text, and the pack's use of the budget a task leaves."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import open_engine

from ctx_lsp.engine import Engine
from ctx_lsp.retrieval.excerpt import LineFocus, excerpt, render, stretches
from ctx_lsp.retrieval.tokens import count_tokens

RARE = {"watermark": 4.0, "pagin": 3.0}  # index terms are stemmed: "pagination" -> "pagin"


def _long_function(n: int = 200) -> list[str]:
    lines = ["def build(report, *,", "          pages=None):", '    """Build the report."""']
    for i in range(n):
        lines.append(f"    step_{i} = report.section({i})")
    lines[120] = "    stamp = report.watermark(pages)"
    lines[60] = "    pagination = report.section(-1)"
    lines.append("    return report")
    return lines


def test_excerpt_shows_the_header_and_the_lines_around_the_task_terms() -> None:
    lines = _long_function()
    got = excerpt(lines, 1, len(lines), LineFocus(RARE), 400)
    assert got is not None
    text = got.text.splitlines()
    assert text[:2] == lines[:2]  # the header split over two lines, whole
    assert "    stamp = report.watermark(pages)" in text and "    pagination = report.section(-1)" in text
    # two lines each side of each match, the best match first, the gaps marked with their lines
    assert got.shown == [(1, 2), (59, 63), (119, 123)]
    assert text[2] == "    # ... lines 3-58 not shown"
    assert text[-1] == f"    # ... lines 124-{len(lines)} not shown"
    assert got.text == render(lines, 1, len(lines), {1, 2, 59, 60, 61, 62, 63, 119, 120, 121, 122, 123})


def test_excerpt_keeps_to_its_cap_best_lines_first_and_leaves_out_taken_lines() -> None:
    lines = _long_function()
    small = excerpt(lines, 1, len(lines), LineFocus(RARE), 120)
    assert small is not None and count_tokens(small.text) <= 120
    assert small.shown == [(1, 2), (119, 123)]  # only the rarer term's window fits
    skipped = excerpt(lines, 1, len(lines), LineFocus(RARE), 400, taken=frozenset(range(100, 140)))
    assert skipped is not None and skipped.shown == [(1, 2), (59, 63)]
    assert excerpt(lines, 1, len(lines), LineFocus({"nothing": 5.0}), 400) is None
    assert excerpt(lines, 1, len(lines), LineFocus(RARE), 5) is None  # not even a window fits


def test_focus_keeps_only_the_rarer_terms_of_the_task() -> None:
    df = {"watermark": 3, "report": 30}
    focus = LineFocus.of("The report loses its watermark", lambda t: 3.0, lambda t: df.get(t, 0), 100)
    assert focus.weights == {"watermark": 3.0}  # "report" is in too many chunks, "lose" in none
    tiny = LineFocus.of("The report loses its watermark", lambda t: 1.0, lambda t: {"watermark": 2}.get(t, 0), 6)
    assert tiny.weights == {"watermark": 1.0}  # a small workspace: a term in two chunks still counts
    assert focus.score("x = report.watermark") == 3.0 and focus.score("report = 1") == 0.0


def test_stretches() -> None:
    assert stretches([7, 1, 2, 3, 9, 8]) == [(1, 3), (7, 9)]
    assert stretches([]) == []


BODY = "\n".join(f"    part_{i} = pages[{i}] + offset_{i}" for i in range(300))
PROJECT = {
    "shop/__init__.py": "",
    "shop/render.py": (
        "def render_report(pages, offset_0=0):\n"
        '    """Render every page of the report."""\n'
        + BODY.replace("    part_150 = pages[150] + offset_150", "    part_150 = add_watermark(pages[150])")
        + "\n    return pages\n\n\ndef add_watermark(page):\n    return page\n\n\n"
        + "\n".join(f"LIMIT_{i} = {i}" for i in range(40))
        + "\nif LIMIT_3 > 2:  # long reports: the watermark step stops after this many pages\n"
        + "    render_report.__defaults__ = (0,)\n"
    ),
    "shop/other.py": "def unrelated(pages):\n    return len(pages)\n",
}
ISSUE = """render_report drops the watermark on long reports

When a report has more than a hundred pages, render_report no longer calls the watermark step for
the later pages: the watermark is missing from page 150 onwards. Smaller reports are fine.
"""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    return open_engine(tmp_path_factory.mktemp("shop"), PROJECT, tmp_path_factory.mktemp("cache"))


def _items(pack: dict, symbol: str) -> list[dict]:
    return [i for i in pack["items"] if i["symbol"] == symbol]


@pytest.mark.parametrize("budget", [1500, 3000])
def test_a_task_gets_the_matching_lines_of_a_function_too_long_to_show(engine: Engine, budget: int) -> None:
    with engine.lock:
        pack = engine.retriever.context(ISSUE, budget, record=False)
    assert pack["plan"].get("task") and pack["tokens"] <= budget
    [item] = _items(pack, "render_report")
    assert item["detail"] == "excerpt", item["detail"]
    line = 3 + 150  # the def, the docstring, then part_0 on line 3
    assert any(a <= line <= b for a, b in item["shown"]), item["shown"]
    src = (engine.root / "shop/render.py").read_text().splitlines()
    assert src[line - 1] in item["text"].splitlines()
    assert item["text"].splitlines()[0] == src[0]
    assert sum(i["tokens"] for i in pack["items"]) == pack["tokens"]


def test_a_task_spends_what_the_first_pass_left_on_fuller_items(engine: Engine) -> None:
    with engine.lock:
        pack = engine.retriever.context(ISSUE, 8000, record=False)
    # the leading item may take the budget it needs: whole here
    [item] = _items(pack, "render_report")
    assert item["detail"] == "full" and "shown" not in item
    [helper] = _items(pack, "add_watermark")
    assert helper["detail"] == "full"


def test_a_task_shows_the_leading_files_matching_lines_that_no_item_reached(engine: Engine) -> None:
    """Module-level code is no symbol, so no generator seeds it; the leading file's excerpt shows it."""
    src = (engine.root / "shop/render.py").read_text().splitlines()
    line = next(i for i, s in enumerate(src, 1) if s.startswith("if LIMIT_3"))
    with engine.lock:
        pack = engine.retriever.context(ISSUE, 8000, record=False)
    assert pack["files"][0]["path"] == "shop/render.py"
    [item] = [i for i in pack["items"] if i["path"] == "shop/render.py" and i["symbol"] is None]
    assert item["detail"] == "excerpt" and item["kind"] == "file", item
    assert any(a <= line <= b for a, b in item["shown"]), item["shown"]
    assert src[line - 1] in item["text"].splitlines()
    assert item["reasons"]  # its own candidate's reasons, or the file ranking's ("files") when none reached it
    # what other items show is not shown again
    others = [i for i in pack["items"] if i["path"] == "shop/render.py" and i["symbol"] is not None]
    spans = {n for i in others if i["detail"] == "full" for n in range(i["start_line"], i["end_line"] + 1)}
    assert not any(a <= n <= b for a, b in item["shown"] for n in spans)
    assert pack["tokens"] <= 8000


def test_a_short_question_gets_no_excerpt(engine: Engine) -> None:
    with engine.lock:
        pack = engine.retriever.context("who calls add_watermark", 8000, record=False)
    assert not pack["plan"].get("task")
    assert all(i["detail"] != "excerpt" and "shown" not in i for i in pack["items"])
    [item] = _items(pack, "render_report")
    assert item["detail"] in ("full", "signature", "reference")


def test_excerpt_render_in_markdown_names_the_shown_lines(engine: Engine, tmp_path: Path) -> None:
    from ctx_lsp.retrieval.render import to_markdown

    with engine.lock:
        pack = engine.retriever.context(ISSUE, 1500, record=False)
    md = to_markdown(pack)
    assert "not shown" in md and "(function, excerpt)" in md


def test_the_pack_adds_a_leading_file_that_no_candidate_reached(engine: Engine) -> None:
    from ctx_lsp.retrieval.pack import pack
    from ctx_lsp.retrieval.score import Candidate, Reason

    r = engine.retriever
    r.sync()
    focus = LineFocus.of(ISSUE, r.lexical.idf, r.lexical.df, r.lexical.n)
    only = [Candidate("shop/render.py::add_watermark", 0, [Reason("bm25", None, 1.0)], 1.0)]
    items = pack(only, engine.graph, r.source_lines, 2000, focus=focus, files=[("shop/render.py", 2.5)])
    assert [(i.node.id, i.detail) for i in items] == [("shop/render.py::add_watermark", "full"),
                                                     ("shop/render.py", "excerpt")]
    added = items[1].to_json()
    assert added["reasons"] == [{"via": "files", "from": None, "weight": 2.5}]
    assert added["score"] == items[0].to_json()["score"]  # scored as the item before it: the order stays by score
    assert sum(i.tokens for i in items) <= 2000
    # the same call without a task's focus packs what it was given, nothing more
    assert [i.node.id for i in pack(only, engine.graph, r.source_lines, 2000)] == ["shop/render.py::add_watermark"]


def test_only_the_leading_files_get_excerpts_of_their_own(engine: Engine) -> None:
    """A module's excerpt stands for the file's relevance, which the file ranking judges: a file
    outside the leading ones keeps the short forms."""
    from ctx_lsp.retrieval.pack import pack
    from ctx_lsp.retrieval.score import Candidate, Reason

    r = engine.retriever
    r.sync()
    focus = LineFocus.of(ISSUE, r.lexical.idf, r.lexical.df, r.lexical.n)
    module = [Candidate("shop/render.py", 0, [Reason("bm25", None, 1.0)], 1.0)]
    elsewhere = pack(module, engine.graph, r.source_lines, 4000, focus=focus, files=[("shop/other.py", 1.0)])
    assert [i.detail for i in elsewhere] != ["excerpt"]
    leading = pack(module, engine.graph, r.source_lines, 4000, focus=focus, files=[("shop/render.py", 1.0)])
    assert [i.detail for i in leading] == ["excerpt"]


def _crowded(tmp_path: Path) -> tuple[Engine, LineFocus, list]:
    """The shop plus 30 twelve-line helpers that match the task and rank first: enough to fill a
    3,000-token pack on their own."""
    from ctx_lsp.retrieval.score import Candidate, Reason

    helpers = "\n\n".join(f"def helper_{i}(pages):\n" + "".join(f"    pages[{j}] = pages[{j}] + {i}  # keep the watermark\n"
                                                                for j in range(12)) for i in range(30))
    e = open_engine(tmp_path / "ws", {**PROJECT, "shop/helpers.py": helpers}, tmp_path / "cache")
    r = e.retriever
    r.sync()
    focus = LineFocus.of(ISSUE, r.lexical.idf, r.lexical.df, r.lexical.n)
    ranked = [Candidate(f"shop/helpers.py::helper_{i}", 0, [Reason("bm25", None, 2.0 - i / 100)], 2.0 - i / 100)
              for i in range(30)]
    return e, focus, ranked


def test_the_first_pass_leaves_the_leading_files_room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many matching symbols elsewhere would fill a task's whole budget; part of it waits for the
    leading file's matching lines."""
    from ctx_lsp.retrieval import pack as packing

    e, focus, ranked = _crowded(tmp_path)
    r = e.retriever
    src = (tmp_path / "ws/shop/render.py").read_text().splitlines()
    line = next(i for i, s in enumerate(src, 1) if s.startswith("if LIMIT_3"))

    def module_lines() -> list[tuple[int, int]]:
        items = packing.pack(ranked, e.graph, r.source_lines, 3000, focus=focus,
                             files=[("shop/render.py", 1.0), ("shop/helpers.py", 0.9)])
        assert sum(i.tokens for i in items) <= 3000
        return next((i.shown or [] for i in items if i.node.id == "shop/render.py"), [])

    assert any(a <= line <= b for a, b in module_lines())
    monkeypatch.setattr(packing, "RESERVE_SHARE", 0.0)
    assert not any(a <= line <= b for a, b in module_lines())  # without the reserve the helpers take it all


def test_the_leading_symbols_no_item_shows_get_the_budget_left(tmp_path: Path) -> None:
    """The symbol ranking also weighs each function's own text against the task, so a leading file's
    best functions may be missing from the candidates that filled the first pass: the budget left
    shows them, before the file's other matching lines, and never twice."""
    from ctx_lsp.retrieval.pack import pack

    e, focus, ranked = _crowded(tmp_path)
    r = e.retriever
    files = [("shop/render.py", 1.0)]
    symbols = [("shop/helpers.py::helper_0", 2.0), ("shop/render.py::add_watermark", 1.5)]
    without = pack(ranked, e.graph, r.source_lines, 3000, focus=focus, files=files)
    assert "shop/render.py::add_watermark" not in [i.node.id for i in without]
    items = pack(ranked, e.graph, r.source_lines, 3000, focus=focus, files=files, symbols=symbols)
    assert sum(i.tokens for i in items) <= 3000
    ids = [i.node.id for i in items]
    assert ids.count("shop/helpers.py::helper_0") == 1  # already shown whole: not added again
    at = ids.index("shop/render.py::add_watermark")
    added = items[at].to_json()
    assert added["detail"] == "full" and added["reasons"] == [{"via": "symbols", "from": None, "weight": 1.5}]
    assert added["score"] == items[at - 1].to_json()["score"]  # after the last item, scored as it: the order stays
    # the leading file's excerpt comes from what is left after it and leaves its lines out
    module = next(i for i in items if i.node.id == "shop/render.py")
    assert not any(a <= n <= b for a, b in module.shown or () for n in range(items[at].node.start_line,
                                                                          items[at].node.end_line + 1))


def test_docstring_and_comment_lines_count_less_than_code() -> None:
    from ctx_lsp.retrieval.excerpt import prose_lines

    lines = ["def build(report):", '    """Build the report.', "", "    Keeps the watermark.", '    """',
             "    # the watermark goes last"] + [f"    step_{i} = report.section({i})" for i in range(20)] + [
             "    stamp = report.watermark", "    return stamp"]
    assert prose_lines(lines, 1, len(lines)) == {2, 3, 4, 5, 6}
    got = excerpt(lines, 1, len(lines), LineFocus({"watermark": 3.0}), 80)
    assert got is not None and got.shown == [(1, 1), (25, 28)], got  # the code line's window first


def test_the_budget_left_upgrades_items_in_rank_order(tmp_path: Path) -> None:
    """Past the first ranks the first pass gives signatures; for a task the budget it leaves turns
    them into full text, best first; a short question's pack keeps them short."""
    from ctx_lsp.retrieval.pack import FULL_RANKS, pack
    from ctx_lsp.retrieval.score import Candidate, Reason

    helpers = "\n\n".join(f"def helper_{i}(pages):\n    return pages[{i}]  # keep the watermark\n" for i in range(12))
    e = open_engine(tmp_path / "ws", {**PROJECT, "shop/helpers.py": helpers}, tmp_path / "cache")
    r = e.retriever
    r.sync()
    ranked = [Candidate(f"shop/helpers.py::helper_{i}", 0, [Reason("bm25", None, 2.0 - i / 100)], 2.0 - i / 100)
              for i in range(12)]
    short = pack(ranked, e.graph, r.source_lines, 8000)
    assert [i.detail for i in short][FULL_RANKS:] == ["signature"] * (12 - FULL_RANKS)
    focus = LineFocus.of(ISSUE, r.lexical.idf, r.lexical.df, r.lexical.n)
    task = pack(ranked, e.graph, r.source_lines, 8000, focus=focus, files=[("shop/helpers.py", 1.0)])
    symbols = [i for i in task if i.node.qualname is not None]
    assert [i.detail for i in symbols] == ["full"] * 12
    assert sum(i.tokens for i in task) <= 8000


def test_line_scores_do_not_depend_on_the_process_string_hashing() -> None:
    """A line's score sums its terms' weights; summed in a set's order, the float (and so the
    order of equal-looking lines, and the pack) changed from one process to the next."""
    import os
    import subprocess
    import sys

    code = ("from ctx_lsp.retrieval.excerpt import LineFocus\n"
            "w = {'watermark': 1e16, 'page': 1.0, 'stamp': 1.0, 'report': 1.0}\n"
            "print(repr(LineFocus(w).score('stamp = report.watermark(page)')))\n")
    got = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed})
        got.add(out.stdout.strip())
    assert len(got) == 1, got


def test_a_task_places_low_ranked_candidates_only_from_its_leading_files(tmp_path: Path) -> None:
    """Past the first FULL_RANKS candidates, a task's pack leaves out those of files outside the
    first TASK_FILES of its file ranking; a short question's pack (no focus) keeps them."""
    from ctx_lsp.retrieval.pack import FULL_RANKS, pack

    e, focus, ranked = _crowded(tmp_path)
    r = e.retriever

    def helpers(files: list[tuple[str, float]] | None, with_focus: bool) -> set[int]:
        items = pack(ranked, e.graph, r.source_lines, 3000, focus=focus if with_focus else None, files=files)
        return {int(i.node.id.rpartition("_")[2]) for i in items
                if i.node.path == "shop/helpers.py" and i.node.qualname is not None}

    far = helpers([("shop/render.py", 1.0)], True)
    assert far and max(far) < FULL_RANKS
    assert max(helpers([("shop/render.py", 1.0), ("shop/helpers.py", 0.5)], True)) >= FULL_RANKS
    assert max(helpers(None, False)) >= FULL_RANKS


def _module_with_stubs() -> list[str]:
    lines = ["from decimal import Decimal", "from shop.money import (", "    Price,", "    round_price,", ")", ""]
    for t in ("int", "str", "float"):  # three @overload stubs of `convert`, each naming the task's term
        lines += ["@overload", f"def convert(value: {t}, *, price: Price = ...) -> Price: ...", ""]
    lines += ["def convert(value, *, price=None):", "    return Price(value)", ""]
    lines += [f"def other_{i}(x):" for i in range(30)]
    lines += ["REGISTRY = {'price': round_price}", "def register(kind):", "    REGISTRY[kind] = kind"]
    return lines


def test_line_focus_reads_no_traceback_chrome() -> None:
    """The focus of a task with a traceback reads its function names, code lines and message, not
    the words Python's format adds (most recent call last, file, line, site-packages, python3)."""
    from ctx_lsp.retrieval.evidence import without_traceback_chrome

    text = ("dumps fails\n```\nTraceback (most recent call last):\n"
            '  File "repro.py", line 3, in <module>\n    tomlkit.dumps(data)\n'
            '  File "/usr/lib/python3.11/site-packages/tomlkit/items.py", line 212, in item\n'
            "    raise ConvertError(msg)\n    ^^^^^^^^^^^^^^^^^^^^^^^\n"
            "tomlkit.exceptions.ConvertError: Unable to convert\n```\n"
            "tests/test_api.py:12: in test_dump\n")
    got = without_traceback_chrome(text)
    for gone in ("Traceback", "most recent", "File", "line 212", "site-packages", "python3", "^^^", "<module>", "12:"):
        assert gone not in got, gone
    for kept in ("dumps fails", "tomlkit.dumps(data)", "  item\n", "raise ConvertError(msg)",
                 "ConvertError: Unable to convert", "test_dump"):
        assert kept in got, kept


def test_a_file_excerpt_leaves_out_the_stubs_of_a_function_shown() -> None:
    """A file's excerpt does not show the `@overload` stubs of a function whose implementation an
    item shows (tomlkit: eight `def item(...)` stubs filled a traceback file's excerpt); its other
    lines that hold the task's terms stay, and without the implementation shown the stubs are lines
    like any other."""
    lines = _module_with_stubs()
    impl = lines.index("def convert(value, *, price=None):") + 1
    focus = LineFocus({"price": 3.0})
    got = excerpt(lines, 1, len(lines), focus, 400, head=False, taken=frozenset({impl, impl + 1}))
    assert got is not None
    shown = {i for a, b in got.shown for i in range(a, b + 1)}
    assert lines.index("REGISTRY = {'price': round_price}") + 1 in shown
    stubs = {i + 1 for i, ln in enumerate(lines) if ln.startswith("def convert(value: ")}
    assert not shown & stubs, got.text
    alone = excerpt(lines, 1, len(lines), focus, 400, head=False)
    assert alone is not None and stubs <= {i for a, b in alone.shown for i in range(a, b + 1)}
