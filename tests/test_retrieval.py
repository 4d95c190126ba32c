"""The read path on a fixture workspace: plans, expected files and symbols per trigger and operator,
the hard token budget, reasons, memory across restarts, and the `context` CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_tree
from hypothesis import given, settings
from hypothesis import strategies as st

from ctx_lsp.engine import Engine
from ctx_lsp.retrieval.plan import make_plan
from ctx_lsp.retrieval.render import to_markdown
from ctx_lsp.retrieval.tokens import count_tokens

FIXTURE = Path(__file__).parent / "fixtures" / "retrieval_ws"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ws") / "retrieval_ws"
    shutil.copytree(FIXTURE, root)
    return root


@pytest.fixture(scope="module")
def engine(workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    e = Engine(workspace, cache_dir=tmp_path_factory.mktemp("cache"))
    e.open()
    return e


# (query, trigger, operators that must be planned, symbols that must be delivered, symbols that must not)
CASES = [
    ("who calls apply_discount", "EXPLICIT_SYMBOL", {"callers"}, {"apply_discount", "OrderService.place"}, {"checkout"}),
    ("what does OrderService.place call", "EXPLICIT_SYMBOL", {"callees"}, {"apply_discount", "with_tax", "BaseRepository.save"}, set()),
    ("what implements BaseRepository", "EXPLICIT_SYMBOL", {"implementations"}, {"SqlRepository", "MemoryRepository"}, set()),
    ("which methods override BaseRepository.save", "EXPLICIT_SYMBOL", {"implementations"}, {"SqlRepository.save", "MemoryRepository.save"}, set()),
    ("where is SqlRepository instantiated", "EXPLICIT_SYMBOL", {"instantiations"}, {"get_order_service"}, set()),
    ("references to TAX_RATE", "EXPLICIT_SYMBOL", {"references"}, {"with_tax"}, set()),
    ("how is apply_discount used", "EXPLICIT_SYMBOL", {"callers", "references"}, {"apply_discount", "OrderService.place"}, set()),
    # a typo in the name a question targets: the close name, as for a mention
    ("who calls plaace", "SEMANTIC_CONCEPT", {"callers"}, {"OrderService.place", "checkout"}, set()),
    ("who imports shop/pricing.py", "EXPLICIT_SYMBOL", {"importers"}, set(), set()),
    ("which tests cover OrderService", "EXPLICIT_SYMBOL", {"tests"}, {"test_place_stores_order"}, set()),
    ("what must change if OrderService changes its signature", "EXPLICIT_SYMBOL", {"impact"}, {"get_order_service", "test_place_stores_order"}, set()),
    # an instruction whose needed file (the wiring that builds the repository) shares no words with it
    ("Make the database connection string of the SQL repository configurable", "IMPLICIT_CONTEXT", {"impact"}, {"SqlRepository", "get_order_service"}, set()),
    ("code related to value added tax", "SEMANTIC_CONCEPT", set(), {"with_tax"}, set()),
    ("Find the function get_order_service", "EXPLICIT_SYMBOL", set(), {"get_order_service"}, set()),
    # nameless: the target is described, resolved by a hop, then its callers are expanded
    ("who calls the function that adds value added tax to a net amount", "SEMANTIC_CONCEPT", {"callers"},
     {"with_tax", "OrderService.place"}, set()),
    ("which classes extend the repository base class that stores records", "SEMANTIC_CONCEPT", {"implementations"},
     {"BaseRepository", "SqlRepository", "MemoryRepository"}, set()),
]


def _symbols(pack: dict) -> list[str]:
    return [i["symbol"] for i in pack["items"] if i["symbol"]]


@pytest.mark.parametrize(("query", "trigger", "operators", "present", "absent"), CASES, ids=[c[0] for c in CASES])
def test_query_table(engine: Engine, query: str, trigger: str, operators: set[str], present: set[str], absent: set[str]) -> None:
    pack = engine.context(query, 4000, record=False)
    assert pack["plan"]["trigger"] == trigger
    assert operators <= set(pack["plan"]["operators"])
    got = _symbols(pack)
    assert present <= set(got), (query, got)
    assert not (absent & set(got)), (query, got)
    assert pack["tokens"] <= pack["budget"]
    for item in pack["items"]:
        assert item["reasons"], item
        assert item["detail"] in ("full", "signature", "reference")


def test_hop_reports_the_resolved_target(engine: Engine) -> None:
    pack = engine.context("who calls the function that adds value added tax to a net amount", 4000, record=False)
    assert pack["plan"]["hop"]["resolved"] == "shop/pricing.py::with_tax"
    place = next(i for i in pack["items"] if i["symbol"] == "OrderService.place")
    assert any(r["via"] == "CALLS<-" and r["from"] == "shop/pricing.py::with_tax" for r in place["reasons"])


def test_importers_lists_files(engine: Engine) -> None:
    pack = engine.context("who imports shop/pricing.py", 4000, record=False)
    assert "shop/orders.py" in [i["path"] for i in pack["items"]]


def test_reasons_name_the_edge_and_source(engine: Engine) -> None:
    pack = engine.context("who calls apply_discount", 4000, record=False)
    place = next(i for i in pack["items"] if i["symbol"] == "OrderService.place")
    assert {"via": "CALLS<-", "from": "shop/pricing.py::apply_discount"}.items() <= place["reasons"][0].items()


@pytest.mark.parametrize(("text", "mentions", "not_mentions"), [
    ("Find where Returns are computed", [], ["Find", "Returns"]),
    ("Updates the function apply_discount", ["apply_discount"], ["Updates"]),
    ("code related to caching of templates", [], []),
    ("what calls `render_template` in src/app/views.py", ["render_template", "src/app/views.py"], []),
    ("KeyError: 'user' raised by load_user()", ["load_user"], []),
    # abbreviations of prose are not dotted names (sympy.abc defines `e`, `g` and `i`)
    ("Rendering fails, e.g. in app.views.render, i.e. always, for u.m too", ["app.views.render", "u.m"],
     ["e.g", "i.e", "g", "e"]),
    # a word of a hyphenated compound is prose (no name has a hyphen); the same word alone names a class
    ("Why is the Content-Length header missing from my Session?", ["Session"], ["Content", "Length"]),
    ("The Content object is rebuilt for every pre-Content hook", ["Content"], []),
])
def test_plan_traps(text: str, mentions: list[str], not_mentions: list[str]) -> None:
    plan = make_plan(text, lambda w: w in {"apply_discount", "load_user", "render_template", "Content", "Session"})
    for m in mentions:
        assert m in plan.mentions
    for m in not_mentions:
        assert m not in plan.mentions
    if "related to" in text:
        assert plan.trigger == "SEMANTIC_CONCEPT" and plan.concepts


@pytest.mark.parametrize(("text", "relation"), [
    ("what implements BaseRepository", True),
    ("which classes implement BaseRepository", True),
    ("implementations of BaseRepository.save", True),
    ("classes implementing the repository interface", True),
    ("Where is the bytecode cache checksum implemented?", False),
    ("How is BaseRepository.save implemented", False),
    ("Does the client strip Authorization on a redirect? Where is it implemented?", False),
])
def test_implemented_asks_where_the_code_is_and_implements_asks_for_implementations(text: str, relation: bool) -> None:
    assert ("implementations" in make_plan(text, lambda w: w == "BaseRepository").operators) is relation


def test_a_name_typed_decomposed_is_the_name_the_code_defines(tmp_path: Path) -> None:
    """Python reads identifiers NFKC-normalized: `cálculo` typed decomposed (NFD, as macOS gives it)
    names the function, as a target and in a question."""
    import unicodedata

    root = tmp_path / "ws"
    root.mkdir()
    (root / "calc.py").write_text("def cálculo(x):\n    return x * 2\n\n\ndef total():\n    return cálculo(3)\n",
                                  encoding="utf-8")
    e = Engine(root, cache_dir=tmp_path / "c")
    e.open()
    nfd = unicodedata.normalize("NFD", "cálculo")
    assert nfd != "cálculo" and e.resolve_target(nfd) == "calc.py::cálculo"
    pack = e.context(f"who calls {nfd}", 2000, record=False)
    assert pack["plan"]["mentions"] == ["cálculo"] and "callers" in pack["plan"]["operators"]
    assert "total" in [i["symbol"] for i in pack["items"]]
    # a file name stays as the file system has it (here decomposed): only names are normalized
    nfd_file = unicodedata.normalize("NFD", "módulo.py")
    (root / nfd_file).write_text("def f():\n    return 1\n")
    e.refresh()
    assert e.resolve_target(nfd_file) == nfd_file and e.resolve_target(nfd_file + "::f") == nfd_file + "::f"


def test_a_plain_word_is_no_mention_of_a_class_a_function_defines_in_its_body(tmp_path: Path) -> None:
    """"Content" in prose names a workspace class, not one a test defines inside its body."""
    root = tmp_path / "ws"
    (root / "tests").mkdir(parents=True)
    (root / "tests/test_body.py").write_text(
        "def test_iterable():\n    class Content:\n        pass\n    assert Content\n")
    (root / "models.py").write_text("class Session:\n    pass\n")
    e = Engine(root, cache_dir=tmp_path / "c")
    e.open()
    assert e.retriever.is_symbol("Session") and not e.retriever.is_symbol("Content")
    assert make_plan("Why is Content empty in a Session?", e.retriever.is_symbol).mentions == ["Session"]
    (root / "content.py").write_text("class Content:\n    pass\n")  # a module-level one is a name again
    e.refresh()
    assert e.retriever.is_symbol("Content")


def test_a_short_name_is_a_mention_as_the_named_target_of_a_relation_when_it_exists() -> None:
    names = {"g", "f", "io"}.__contains__
    assert list(make_plan("who calls g", names).mentions) == ["g"]
    assert "f" in make_plan("callers of f", names).mentions
    assert "io" in make_plan("tests for io", names).mentions
    assert "Q" in make_plan("what does class Q do", {"Q"}.__contains__).mentions
    assert "Q" not in make_plan("Q: what does the parser do", {"Q"}.__contains__).mentions
    # not the named target of a relation, or no such name in the workspace: prose
    assert "g" not in make_plan("who calls render, as g does", names).mentions
    assert not make_plan("who calls h", names).mentions


def test_a_plain_word_that_ends_a_relation_question_and_names_a_function_is_a_mention() -> None:
    """"who calls request" asks about `request`; "who calls request handlers in the adapter" describes
    its target, and a word the workspace does not define is a description either way."""
    names = {"request"}.__contains__
    named = make_plan("who calls request?", names)
    assert named.mentions == ["request"] and named.trigger == "EXPLICIT_SYMBOL"
    described = make_plan("who calls request handlers in the adapter", names)
    assert "request" not in described.mentions and [w for w, _, _ in described.soft] == ["request"]
    assert not make_plan("who calls response", names).mentions


@settings(max_examples=25, deadline=None)
@given(budget=st.integers(min_value=20, max_value=3000))
def test_budget_is_never_exceeded(engine: Engine, budget: int) -> None:
    pack = engine.context("what must change if OrderService changes", budget, record=False)
    assert pack["tokens"] <= budget
    assert sum(i["tokens"] for i in pack["items"]) == pack["tokens"]
    for item in pack["items"]:
        assert count_tokens(item["text"]) <= item["tokens"]


def test_detail_falls_off_with_rank(engine: Engine) -> None:
    pack = engine.context("what must change if BaseRepository changes", 300, record=False)
    details = [i["detail"] for i in pack["items"]]
    assert details and details[0] in ("full", "signature")
    order = {"full": 0, "signature": 1, "reference": 2}
    assert "reference" in details or "signature" in details
    assert order[details[0]] <= order[details[-1]]


def test_temporal_query_uses_episodic_memory_across_restarts(workspace: Path, tmp_path: Path) -> None:
    first = Engine(workspace, cache_dir=tmp_path)
    first.open()
    first.context("what implements BaseRepository", 2000)
    second = Engine(workspace, cache_dir=tmp_path)  # a restart: memory comes from the cache dir
    second.open()
    pack = second.context("the class we looked at before", 2000)
    assert pack["plan"]["trigger"] == "TEMPORAL_HISTORY"
    assert "BaseRepository" in _symbols(pack)[:3]
    assert any(r["via"] == "episodic-memory" for i in pack["items"] for r in i["reasons"])



def test_an_empty_answer_is_not_remembered_and_a_follow_up_asks_about_the_last_subject(workspace: Path,
                                                                                        tmp_path: Path) -> None:
    """"and who calls it?" after a question about apply_discount is about apply_discount, in the next
    process too; a question that found nothing is not an episode, so "we looked at before" still
    recalls the last real answer; a question that describes its target is no follow-up."""
    first = Engine(workspace, cache_dir=tmp_path)
    first.open()
    first.context("what does apply_discount do", 2000)
    second = Engine(workspace, cache_dir=tmp_path)  # a restart: nothing open, memory from the cache dir
    second.open()
    assert second.context("zzyzx qwerty plugh", 2000)["items"] == []
    assert [e["query"] for e in second.retriever.episodic.episodes] == ["what does apply_discount do"]
    recalled = second.context("the function we looked at before", 2000, record=False)
    assert _symbols(recalled)[0] == "apply_discount"
    pack = second.context("and who calls it?", 2000)
    assert pack["items"][0]["symbol"] == "apply_discount"
    assert any(r["via"] == "follow-up" for r in pack["items"][0]["reasons"])
    assert "OrderService.place" in _symbols(pack)
    described = second.context("who calls the function that adds value added tax to a net amount", 2000)
    assert not any(r["via"] == "follow-up" for i in described["items"] for r in i["reasons"])
    assert "with_tax" in _symbols(described)

def test_task_text_reads_a_shared_name_the_same_whatever_was_asked_before(tmp_path: Path) -> None:
    """A question reads a name two modules define as the one the last question was about; task text
    (a pasted issue) never: its answer is the same after any earlier question, in the next process too."""
    root = tmp_path / "ws"
    write_tree(root, {"pkg/__init__.py": "",
                      "pkg/funcs.py": "def asdict(inst, recurse=True):\n    return dict(vars(inst))\n",
                      "pkg/next_gen.py": "from pkg import funcs\n\n\ndef asdict(inst):\n    return funcs.asdict(inst)\n",
                      "pkg/use.py": "from pkg.next_gen import asdict\n\n\ndef dump(x):\n    return asdict(x)\n"})
    task = ("asdict on a plain dict raises\n\nI pass whatever my API returns to `asdict`; sometimes it is "
            "already a dict. Could `asdict` just return a copy of it instead of raising?\n")

    def answer(engine: Engine, query: str) -> list[tuple[str, str | None, float]]:
        return [(i["path"], i["symbol"], i["score"]) for i in engine.context(query, 2000)["items"]]

    fresh = Engine(root, cache_dir=tmp_path / "c")
    fresh.open()
    before = answer(fresh, task)
    assert answer(fresh, "who calls pkg/next_gen.py asdict")  # a question about the other asdict
    again = Engine(root, cache_dir=tmp_path / "c")  # the next one-shot run reads the same episodes
    again.open()
    assert answer(again, "who calls asdict")[0][:2] == ("pkg/next_gen.py", "asdict")  # a question: the session's
    one_shot = Engine(root, cache_dir=tmp_path / "c")  # nothing open or just shown: only the episodes differ
    one_shot.open()
    assert answer(one_shot, task) == before


def test_task_text_gives_the_same_pack_in_a_session_as_one_shot(tmp_path: Path) -> None:
    """What a session holds in working memory (the symbols its answers showed, files opened) nudges
    questions, never task text: the same pasted issue packs the same after other answers."""
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/store.py").write_text(
        "class Store:\n    def save(self, key, value):\n        self.data[key] = value\n\n"
        "    def load(self, key):\n        return self.data[key]\n")
    (root / "pkg/cache.py").write_text(
        "from pkg.store import Store\n\n\ndef cached(store: Store, key):\n    return store.load(key)\n\n\n"
        "def evict(store: Store, key):\n    del store.data[key]\n")
    (root / "pkg/report.py").write_text("def render(rows):\n    return '\\n'.join(map(str, rows))\n")
    task = ("Evicting a key twice raises KeyError\n\nCalling `evict(store, 'a')` a second time for the same "
            "key fails with KeyError. It should do nothing when the key is already gone.\n")

    def pack(engine: Engine, query: str) -> list[tuple]:
        got = engine.context(query, 2000)
        return [(i["path"], i["symbol"], i["detail"], i["tokens"], i["score"],
                 [r["via"] for r in i["reasons"]]) for i in got["items"]] + [
            (f["path"], f["score"]) for f in got.get("files", [])]

    one_shot = Engine(root, cache_dir=tmp_path / "c1")
    one_shot.open()
    first = pack(one_shot, task)
    session = Engine(root, cache_dir=tmp_path / "c2")
    session.open()
    assert pack(session, "how does render format rows") != first
    session.retriever.working.touch("pkg/report.py::render")  # what an editor has open
    asked_after = pack(session, task)
    assert not any("working-memory" in item[-1] for item in asked_after if len(item) > 2)
    assert asked_after == first
    assert pack(session, task) == first  # asked again in the same session


def test_unsaved_buffer_is_what_gets_packed(workspace: Path, tmp_path: Path) -> None:
    e = Engine(workspace, cache_dir=tmp_path)
    e.open()
    text = (workspace / "shop/pricing.py").read_text() + "\n\ndef loyalty_bonus(amount):\n    return apply_discount(amount, 5)\n"
    e.index.update_file("shop/pricing.py", text, overlay=True)
    pack = e.context("who calls apply_discount", 4000, record=False)
    bonus = [i for i in pack["items"] if i["symbol"] == "loyalty_bonus"]
    assert bonus and "apply_discount(amount, 5)" in bonus[0]["text"]
    assert pack["dirty_files"] == ["shop/pricing.py"]


def test_markdown_rendering(engine: Engine) -> None:
    pack = engine.context("who calls apply_discount", 4000, record=False)
    md = to_markdown(pack)
    assert md.startswith("# Context for: who calls apply_discount")
    assert "## shop/orders.py:" in md and "```python" in md and "why: calls shop/pricing.py::apply_discount" in md


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ctx_lsp", *args], capture_output=True, text=True, input=stdin, timeout=120)


def test_cli_context_refuses_binary_data_and_keeps_a_paste_with_a_stray_nul(workspace: Path, tmp_path: Path) -> None:
    """A binary file piped by mistake (an agent's hook) is one error line, exit 2, never a pack; a
    pasted issue with a NUL or two in it is still text."""
    binary = subprocess.run([sys.executable, "-m", "ctx_lsp", "context", "--root", str(workspace), "--cache-dir",
                             str(tmp_path)], input=Path(sys.executable).resolve().read_bytes()[:4000],
                            capture_output=True, timeout=120)
    assert binary.returncode == 2 and binary.stdout == b""
    assert binary.stderr.decode().strip().endswith("the query is not text (binary data: control characters or undecodable bytes)")
    pasted = _cli("context", "--root", str(workspace), "--cache-dir", str(tmp_path), "--json",
                  stdin="with_tax returns the wrong amount\x00 for a zero rate.\nIt should return the net amount.\n")
    assert pasted.returncode == 0 and "with_tax" in pasted.stdout, pasted.stderr


def test_cli_context_json_and_stdin(workspace: Path, tmp_path: Path) -> None:
    out = _cli("context", "--root", str(workspace), "--cache-dir", str(tmp_path), "--json", "--budget", "800",
               "who calls with_tax")
    assert out.returncode == 0, out.stderr
    pack = json.loads(out.stdout)
    assert pack["budget"] == 800 and pack["tokens"] <= 800
    assert "OrderService.place" in _symbols(pack)
    md = _cli("context", "--root", str(workspace), "--cache-dir", str(tmp_path), "-", stdin="who calls with_tax\n")
    assert md.returncode == 0 and "OrderService.place" in md.stdout
    piped = _cli("context", "--root", str(workspace), "--cache-dir", str(tmp_path), stdin="who calls with_tax\n")
    assert piped.returncode == 0, piped.stderr  # `ctx-lsp context < task.md`: no '-' needed
    assert piped.stdout == md.stdout


@pytest.mark.parametrize("args", [["context", ""], ["context", "--root", "/nonexistent/root", "x"], ["context", "-"],
                                  ["context"]])
def test_cli_context_errors(args: list[str], tmp_path: Path) -> None:
    out = _cli(*args, "--cache-dir", str(tmp_path), stdin="")
    assert out.returncode == 2
    assert out.stderr.startswith("ctx-lsp: error:") and len(out.stderr.strip().splitlines()) == 1



def test_a_small_workspace_still_searches_words_that_many_of_its_chunks_hold(tmp_path: Path) -> None:
    # with five chunks every word is in a fifth of them: skipping such words left nothing to search
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "tests").mkdir()
    (ws / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n")
    (ws / "tests" / "test_calc.py").write_text("from pkg.calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    e = Engine(ws, cache_dir=tmp_path / "cache")
    e.open()
    hits = [nid for nid, _ in e.retriever.lexical.search("which tests cover add")]
    assert hits and set(hits) <= {"pkg/calc.py::add", "tests/test_calc.py::test_add", "tests/test_calc.py", "pkg/calc.py"}
    pack = e.context("which tests cover add", 4000, record=False)
    assert {"add", "test_add"} <= set(_symbols(pack))


def test_a_header_split_over_lines_reads_as_written(tmp_path: Path) -> None:
    """A def or class header a formatter split over lines reads as one line without the spaces the
    joins left inside its brackets, and a comment inside it does not swallow the rest."""
    from ctx_lsp.retrieval.pack import signature_text

    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text("")
    (ws / "pkg" / "jobs.py").write_text(
        "class Runner(\n    Base,  # the scheduler's base\n    metaclass=Meta,\n):\n"
        "    def start(\n        self,\n        when=(1,),\n        sep='#',\n    ) -> None:\n        pass\n",
        encoding="utf-8")
    e = Engine(ws, cache_dir=tmp_path / "cache")
    e.open()
    g = e.index.graph
    runner = next(n for n in g.nodes() if n.qualname == "Runner")
    assert signature_text(runner, g).splitlines() == [
        "class Runner(Base, metaclass=Meta,)",
        "    def start(self, when=(1,), sep='#',) -> None  # line 5",
    ]


def test_a_warm_start_answers_as_the_cold_build_it_was_saved_from(tmp_path: Path) -> None:
    """Every query a pack over a cold build and over the warm start from its cache: equal, including a
    name defined twice in one file (its second node `handle#2`, named `handle` by both)."""
    root = tmp_path / "ws"
    shutil.copytree(FIXTURE, root)
    (root / "shop" / "dispatch.py").write_text(
        "from functools import singledispatch\n\nfrom shop.pricing import with_tax\n\n\n@singledispatch\n"
        "def handle(x):\n    return x\n\n\nif True:\n    def handle(x):\n        return with_tax(x)\n",
        encoding="utf-8")
    queries = ["who calls with_tax", "what does handle do", "Fix `handle` so it adds tax: handle(3) returns 3",
               "which tests cover OrderService", "code related to value added tax"]
    cold = Engine(root, cache_dir=tmp_path / "cache")
    assert not cold.open().warm
    cold.index.wait_saved()
    warm = Engine(root, cache_dir=tmp_path / "cache")
    assert warm.open().warm

    def packs(e: Engine) -> list[dict]:
        out = []
        for q in queries:
            p = e.context(q, 2000, record=False)
            p.pop("timings_ms")
            out.append(p)
        return out

    assert packs(warm) == packs(cold)


def test_markdown_says_whose_a_merged_reason_is() -> None:
    # a file chosen by BM25 merged into the function that spans it: "bm25; bm25" read as a duplicate
    from ctx_lsp.retrieval.render import _reason_line

    item = {"reasons": [{"via": "bm25", "from": None, "weight": 2.0},
                        {"via": "bm25", "from": None, "weight": 1.6745, "merged": "pkg/crlf.py"},
                        {"via": "CALLS<-", "from": "pkg/a.py::g", "weight": 0.5, "merged": "pkg/crlf.py::inner"}]}
    assert _reason_line(item) == "bm25 (2.00); bm25 of pkg/crlf.py (1.67); pkg/crlf.py::inner calls pkg/a.py::g (0.50)"


def test_markdown_says_an_edge_reason_as_what_the_item_is_to_its_source() -> None:
    # `CALLS<- from f` read as "called from f": the item calls f
    from ctx_lsp.retrieval.render import reason_text

    def says(via: str) -> str:
        return reason_text({"via": via, "from": "pkg/a.py::f", "weight": 1.0})

    assert says("CALLS<-") == "calls pkg/a.py::f (1.00)"
    assert says("CALLS->") == "called by pkg/a.py::f (1.00)"
    assert says("COVERS<-") == "tests pkg/a.py::f (1.00)"
    assert says("INHERITS<-") == "subclass of pkg/a.py::f (1.00)"
    assert says("CONTAINS->") == "in pkg/a.py::f (1.00)"
    assert says("REFERENCES/import<-") == "imports pkg/a.py::f (1.00)"
    assert says("hop-resolved") == "hop-resolved from pkg/a.py::f (1.00)"


def test_a_place_in_the_question_is_its_cursor(engine: Engine) -> None:
    # "what does shop/pricing.py:LINE do": the symbol at that line leads, as at an editor's cursor;
    # `shop` is part of the path, not a name to look up
    line = next(i for i, text in enumerate((FIXTURE / "shop" / "pricing.py").read_text().splitlines(), 1)
                if text.startswith("def with_tax"))
    pack = engine.context(f"who calls shop/pricing.py:{line + 1}", 3000, record=False)
    assert pack["plan"]["at"] == f"shop/pricing.py:{line + 1}" and "shop" not in pack["plan"]["mentions"]
    assert pack["items"][0]["symbol"] == "with_tax"
    assert any(r["via"] == "cursor" for r in pack["items"][0]["reasons"])
    assert "OrderService.place" in _symbols(pack)  # its caller, as for "who calls with_tax"
    # a place past the end of the file, or in no indexed file, is no cursor
    assert "at" in engine.context("what does shop/pricing.py:9999 do", 1000, record=False)["plan"]
    assert not any(r["via"] == "cursor" for i in engine.context("what does shop/pricing.py:9999 do", 1000, record=False)["items"]
                   for r in i["reasons"])


def test_relation_reasons_say_what_each_symbol_is_to_the_edges_other_end(tmp_path: Path) -> None:
    # a grandchild is an implementation through its parent: its reason names the parent, not the base
    from tests.conftest import open_engine

    e = open_engine(tmp_path / "ws", {
        "pkg/__init__.py": "",
        "pkg/shapes.py": ("class Base:\n    def area(self):\n        return 0\n\n\n"
                          "class Square(Base):\n    def area(self):\n        return 4\n\n\n"
                          "class Tile(Square):\n    pass\n\n\n"
                          "def total(shapes):\n    return sum(s.area() for s in shapes) + Base().area()\n"),
    }, tmp_path / "cache")
    impl = {it["node"].qualname: it["reason"] for it in e.related("pkg/shapes.py::Base", "implementations")}
    assert impl["Square"] == "subclass of Base at pkg/shapes.py:6 (ast-scope)"
    assert impl["Tile"] == "subclass of Square at pkg/shapes.py:11 (ast-scope)"
    over = {it["node"].qualname: it["reason"] for it in e.related("pkg/shapes.py::Base.area", "implementations")}
    assert over["Square.area"].startswith("overrides Base.area at pkg/shapes.py:7")
    callees = {it["node"].qualname: it["reason"] for it in e.related("pkg/shapes.py::total", "callees")}
    assert callees["Base"].startswith("instantiated by total at pkg/shapes.py:16")


def test_a_name_several_symbols_share_resolves_to_the_one_the_session_is_looking_at(tmp_path: Path) -> None:
    """"What does `flush` call?" right after being shown BufferCopy.flush is about that flush, and so
    is the follow-up "and who calls it?"; a fresh session keeps the usual order."""
    from conftest import write_tree

    ws = tmp_path / "ws"
    write_tree(ws, {
        "pager.py": "class Pager:\n    def flush(self):\n        return self.drain()\n\n    def drain(self):\n        return 0\n",
        "copy.py": "class BufferCopy:\n    def flush(self):\n        return self.sync()\n\n    def sync(self):\n        return 1\n\n\n"
                   "def use_copy(b: BufferCopy):\n    b.flush()\n",
    })
    fresh = Engine(ws, cache_dir=tmp_path / "c1")
    fresh.open()
    first = fresh.context("What does `flush` call?", 2000, record=False)["items"][0]
    e = Engine(ws, cache_dir=tmp_path / "c2")
    e.open()
    other = "BufferCopy.flush" if first["symbol"] == "Pager.flush" else "Pager.flush"
    e.context(f"Show me `{other}`", 2000)
    assert e.context("What does `flush` call?", 2000)["items"][0]["symbol"] == other
    follow = e.context("And who calls it?", 2000)
    assert follow["items"][0]["symbol"] == other
    if other == "BufferCopy.flush":
        assert "use_copy" in _symbols(follow)


def test_names_made_of_a_question_s_common_words_do_not_crowd_out_its_text(tmp_path: Path) -> None:
    """Many names made of the question's words ("field", "model", "alias"): the one that uses most of
    them first, and none at the weight of a name the question spells out."""
    from conftest import write_tree

    defs = "".join(f"def {n}():\n    return 0\n\n\n" for n in (
        "field_alias", "model_alias", "alias_model", "model_field", "field_model", "alias_field", "apply_model_field_alias"))
    write_tree(tmp_path / "ws", {"names.py": defs})
    e = Engine(tmp_path / "ws", cache_dir=tmp_path / "cache")
    e.open()
    pack = e.context("how is a field alias applied to a model", 2000, record=False)
    top = pack["items"][0]
    assert top["symbol"] == "apply_model_field_alias"
    weights = [r["weight"] for i in pack["items"] for r in i["reasons"] if r["via"] == "symbol-subwords"]
    assert weights and max(weights) < 2.4


def test_the_symbol_at_a_cursor_on_an_import_is_the_name_under_it(tmp_path: Path) -> None:
    """An import's edges are sited at its statement, one site for all its names: the name under the
    cursor says which (on a parenthesised list's lines too); on `from` or the module it is none of them."""
    e = _engine_on(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/auth.py": "class Auth:\n    pass\n\n\nclass BasicAuth(Auth):\n    pass\n\n\ndef digest():\n    return 1\n",
        "pkg/client.py": "from .auth import Auth, BasicAuth\nfrom .auth import (\n    digest,\n    BasicAuth as Basic,\n)\n\n\n"
                         "def make():\n    return Basic(), digest()\n",
    })

    def at(line: int, col: int) -> str | None:
        n = e.symbol_at("pkg/client.py", line, col)
        return n.id if n is not None else None

    assert at(1, 19) == "pkg/auth.py::Auth"
    assert at(1, 26) == "pkg/auth.py::BasicAuth"
    assert at(1, 2) == "pkg/client.py"  # on `from`: the file
    assert at(3, 6) == "pkg/auth.py::digest"
    assert at(4, 18) == "pkg/auth.py::BasicAuth"  # the alias names it too
    assert at(9, 12) == "pkg/auth.py::BasicAuth"  # a call through the alias
    assert at(9, 21) == "pkg/auth.py::digest"


def _engine_on(tmp_path: Path, files: dict[str, str]) -> Engine:
    """An opened Engine over `files` written under tmp_path/ws."""
    from conftest import write_tree

    write_tree(tmp_path / "ws", files)
    e = Engine(tmp_path / "ws", cache_dir=tmp_path / "cache")
    e.open()
    return e


def test_a_bare_name_means_a_method_before_a_def_nested_in_a_function(tmp_path: Path) -> None:
    """`send` names Client.send, not the `send` closure inside another function."""
    e = _engine_on(tmp_path, {
        "a_transport.py": "def handle(app):\n    def send(message):\n        return message\n    return send\n",
        "client.py": "class Client:\n    def send(self, request):\n        return request\n",
        "util.py": "def send(x):\n    return x\n",
    })
    assert [n.id for n in e.find_symbols("send")] == ["util.py::send", "client.py::Client.send", "a_transport.py::handle.send"]


def test_a_name_means_package_code_before_examples_and_a_path_only_spelled_with_test_is_no_test(
        tmp_path: Path) -> None:
    """`shortest_path` lives in `graphs/shortest_paths/generic.py` (whose folder merely spells
    "test") and in a second module; an example script's variable of that name comes last."""
    e = _engine_on(tmp_path, {
        "graphs/__init__.py": "from graphs.shortest_paths.generic import shortest_path\n",
        "graphs/shortest_paths/__init__.py": "",
        "graphs/shortest_paths/generic.py": "def shortest_path(g, a, b):\n    return [a, b]\n",
        "graphs/threshold.py": "def shortest_path(seq, a, b):\n    return [a]\n",
        "examples/plot.py": "import graphs as gr\n\nshortest_path = gr.shortest_path(None, 1, 2)\n",
        "examples/shortest_path.py": "def shortest_path():\n    pass\n",
    })
    assert [n.id for n in e.find_symbols("shortest_path")] == [
        "graphs/shortest_paths/generic.py::shortest_path", "graphs/threshold.py::shortest_path",
        "examples/shortest_path.py::shortest_path", "examples/plot.py::shortest_path"]
    # `gr.shortest_path`: the project imports `graphs as gr`, so gr reads as graphs (its re-export)
    assert [n.id for n in e.find_symbols("gr.shortest_path")] == ["graphs/shortest_paths/generic.py::shortest_path"]
    assert e.module_alias("gr") == "graphs" and e.module_alias("np") is None
    assert e.find_symbols("zz.shortest_path") == []
    pack = e.context_for({"query": "what does gr.shortest_path do", "budget": 600})
    assert pack["items"][0]["path"] == "graphs/shortest_paths/generic.py"


def test_a_question_about_a_name_nothing_defines_says_so_and_a_budget_too_small_is_no_miss(tmp_path: Path) -> None:
    from ctx_lsp.retrieval.render import to_markdown

    e = _engine_on(tmp_path, {
        "shop/cart.py": "class Cart:\n    def evict(self, item):\n        return item\n\n\n"
                        "def clear_cart(cart):\n    return cart.evict(1)\n",
    })
    pack = e.context_for({"query": "who calls evict_everything_now", "budget": 600})
    assert pack["notes"] == ["no symbol, module or file named evict_everything_now is indexed; the items are the "
                             "closest matches by text"]
    assert "_note: no symbol, module or file named evict_everything_now" in to_markdown(pack)
    for known in ("who calls Cart.evict", "who calls self.evict", "who calls cart.evict", "what does shop.cart do"):
        said = e.context_for({"query": known, "budget": 600}).get("notes", [])
        assert not [n for n in said if n.startswith("no symbol")], known
    tiny = e.context_for({"query": "who calls Cart.evict", "budget": 3})
    assert tiny["items"] == [] and tiny["symbols"]
    text = to_markdown(tiny)
    assert "No matching code found" not in text
    assert "_Nothing fits in 3 tokens: " in text and "`shop/cart.py:2` `Cart.evict`; give a larger budget._" in text


def test_a_question_ranks_package_code_before_an_example_at_equal_evidence(tmp_path: Path) -> None:
    e = _engine_on(tmp_path, {
        "examples/demo.py": "def read_settings_file(p):\n    return p\n",
        "pkg/__init__.py": "",
        "pkg/settings.py": "def read_settings_file(p):\n    return p\n",
    })
    pack = e.context_for({"query": "how are settings file contents read", "budget": 2000})
    got = [i["path"] for i in pack["items"] if i["symbol"] == "read_settings_file"]
    assert got == ["pkg/settings.py", "examples/demo.py"], pack["items"]
    first, second = (i for i in pack["items"] if i["symbol"] == "read_settings_file")
    assert first["score"] == second["score"]  # the same evidence: only the scope orders them


def test_the_tests_of_a_helper_no_test_calls_are_those_of_its_callers(tmp_path: Path) -> None:
    """`which tests cover _check`: no test calls the private helper; the tests of the function that
    does are its tests, as `tests_for` and the editors' lists say."""
    e = _engine_on(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/forms.py": "def _check(value):\n    return value > 0\n\n\ndef validate(value):\n    return _check(value)\n",
        "tests/test_forms.py": "from pkg.forms import validate\n\n\ndef test_validate_positive():\n"
                               "    assert validate(3)\n\n\ndef test_unrelated():\n    assert 1 + 1 == 2\n",
    })
    pack = e.context_for({"query": "which tests cover _check", "budget": 2000})
    tests = [i["symbol"] for i in pack["items"] if i["kind"] == "test"]
    assert tests and tests[0] == "test_validate_positive", pack["items"]
    assert "test_unrelated" not in tests[:1]
    assert [t["node"].qualname for t in e.tests_for("pkg/forms.py::_check")] == ["test_validate_positive"]


def test_a_module_item_showing_its_first_lines_says_so(tmp_path: Path) -> None:
    """A file's text in a pack is its first 40 lines: `head` with the lines it shows, not `full`."""
    from ctx_lsp.retrieval.pack import shown_lines
    from ctx_lsp.retrieval.render import to_markdown

    body = "".join(f"CONSTANT_{i} = {i}\n" for i in range(80))
    e = _engine_on(tmp_path, {"pkg/__init__.py": "", "pkg/settings.py": '"""Settings."""\n' + body,
                              "pkg/small.py": "SMALL = 1\n"})
    pack = e.context_for({"query": "what does pkg/settings.py define", "budget": 3000})
    item = next(i for i in pack["items"] if i["path"] == "pkg/settings.py" and i["symbol"] is None)
    assert (item["detail"], item["start_line"], item["end_line"], item["shown"]) == ("head", 1, 81, [[1, 40]])
    assert item["text"].count("\n") == 39
    assert "## pkg/settings.py:1-40 (file, first 40 of 81 lines)" in to_markdown(pack)
    assert set(shown_lines("head", 1, 81, True, item["shown"])) == set(range(1, 41))
    small = e.context_for({"query": "what does pkg/small.py define", "budget": 3000})
    assert next(i for i in small["items"] if i["path"] == "pkg/small.py")["detail"] == "full"  # it is whole


def test_a_question_naming_a_decorator_with_at_mentions_it() -> None:
    """`@validates` is decorator syntax: a name the workspace defines, even lower-case and plain."""
    names = {"validates", "example", "Schema", "load"}
    plan = make_plan("How does Schema.load run the validators declared with @validates?", names.__contains__)
    assert "validates" in plan.mentions
    assert "validates" not in make_plan("How does Schema.load run the declared validators?", names.__contains__).mentions
    assert "example" not in make_plan("who wrote to dev@example about Schema", names.__contains__).mentions  # an address
    assert "unknown" not in make_plan("what does @unknown do", names.__contains__).mentions  # not a workspace name


def _many_callers(tmp_path: Path) -> Engine:
    """`connect` has 14 callers in examples/ (a-z first by path), 3 in the package, 3 tests."""
    from conftest import open_engine

    files: dict[str, str | bytes] = {
        "lib/db/__init__.py": "",
        "lib/db/engine.py": "def connect(url):\n    return url\n",
        "lib/db/config.py": "from db.engine import connect\n\n\ndef from_config(cfg):\n    return connect(cfg['url'])\n",
        "lib/db/pool.py": "from db.engine import connect\n\n\ndef make_pool(url):\n    return [connect(url)]\n",
        "lib/db/aio.py": "from db.engine import connect\n\n\ndef connect_async(url):\n    return connect(url)\n",
    }
    for i in range(14):
        files[f"examples/demo_{i:02d}.py"] = f"from db.engine import connect\n\n\ndef main_{i}():\n    return connect('sqlite://')\n"
    for i in range(3):
        files[f"tests/test_connect_{i}.py"] = f"from db.engine import connect\n\n\ndef test_connect_{i}():\n    assert connect('x')\n"
    return open_engine(tmp_path / "ws", files, tmp_path / "cache")


def test_who_calls_a_hub_lists_the_packages_callers_before_tests_and_examples(tmp_path: Path) -> None:
    """Past the cap per edge kind, callers were kept in path order: examples/ filled the answer and
    the package's own callers never reached it. Now package code, then tests, then examples fill the
    cap; in the pack, callers in package code come before callers in examples at equal scores."""
    e = _many_callers(tmp_path)
    items = e.context("who calls connect", 4000)["items"]
    callers = [(i["symbol"], i["score"]) for i in items if any(r["via"] == "CALLS<-" for r in i["reasons"])]
    names = [s for s, _ in callers]
    assert {"connect_async", "from_config", "make_pool"} <= set(names)  # all of them
    assert {s for s in names if s.startswith("test_")} == {"test_connect_0", "test_connect_1", "test_connect_2"}
    assert len([s for s in names if s.startswith("main_")]) == 12 - 3 - 3  # the cap's rest: examples call it too
    for k, (s, score) in enumerate(callers):  # at equal scores, package code first
        if s.startswith("main_"):
            assert not any(t in ("from_config", "make_pool", "connect_async") and sc == score for t, sc in callers[k:])


def test_context_at_a_line_gives_every_caller_full_weight_before_the_tests(tmp_path: Path) -> None:
    """`--at` asks for the definition, callers, callees and tests; "definition" also follows callers
    at a low weight and used to take their cap, so callers scored 0.9 and packed last."""
    e = _many_callers(tmp_path)
    pack = e.context_at("lib/db/engine.py", 1, None, 8000)
    order = [i["symbol"] for i in pack["items"]]
    assert order[0] == "connect"
    package = {"connect_async", "from_config", "make_pool"}
    tests = [k for k, s in enumerate(order) if s.startswith("test_")]
    assert tests and max(order.index(s) for s in package) < min(tests)
    weights = {i["symbol"]: max(r["weight"] for r in i["reasons"]) for i in pack["items"]}
    assert all(weights[s] == weights["from_config"] == weights["connect"] for s in package)  # not 0.9
    examples = [k for k, s in enumerate(order) if s.startswith("main_")]
    assert examples and max(order.index(s) for s in package) < min(examples)  # equal scores: package first


def test_two_prose_words_reach_the_identifier_that_joins_them(tmp_path: Path) -> None:
    """Prose spells as two words what code names as one ("file name" -> `secure_filename`,
    "time stamp" -> `timestamp`); function words never join ("from the"), and a join no code uses
    changes nothing."""
    from conftest import open_engine

    from ctx_lsp.retrieval.text import compounds, query_terms, terms

    assert compounds("strip it from the uploaded file name; the time stamp, a call back") == [
        "uploadedfil", "filenam", "timestamp", "callback"]
    assert compounds("set up into the file_name") == []  # short joins, function words, identifiers
    assert query_terms("the file name")[: len(terms("the file name"))] == terms("the file name")
    assert "filenam" in query_terms("where is the uploaded file name cleaned?")
    issue = ("Upload loses the file name\n\nWhen the uploaded file name has a slash in it, the server saves the "
             "upload somewhere else than the folder the form names.\n")
    assert query_terms(issue) == terms(issue)  # task text: its long prose joins no words
    assert query_terms("Upload loses the file name", joined=False) == terms("Upload loses the file name")  # its title
    files = {
        "web/utils.py": "def secure_filename(raw):\n    return raw.replace('/', '_')\n",
        "web/paths.py": "def strip_separators(path):\n    return path.strip('/')\n\n\ndef join(a, b):\n    return a + b\n",
        "web/names.py": "def display_name(user):\n    return user.name\n",
    }
    e = open_engine(tmp_path / "ws", files, tmp_path / "cache")
    pack = e.context("the uploaded file name is not what we expect")
    assert pack["items"][0]["symbol"] == "secure_filename", [(i["path"], i["symbol"]) for i in pack["items"]]



def test_a_bare_name_is_not_a_def_local_to_a_test_where_package_code_defines_it(tmp_path: Path) -> None:
    """"who calls echo": `echo` is the package's function, not a helper a test defines in its body
    (in click such a helper's few lines matched the question's words better and led the pack); a
    qualified name still reaches the helper."""
    from conftest import open_engine

    files = {
        "pkg/__init__.py": "",
        "pkg/out.py": "def echo(message, err=False):\n    '''Print a message.'''\n    print(message)\n",
        "pkg/cli.py": "from pkg.out import echo\n\n\ndef main():\n    echo('hello')\n",
        "tests/test_prompt.py": "def test_prompts_eof():\n    def echo():\n        pass\n\n    echo()\n",
    }
    e = open_engine(tmp_path / "ws", files, tmp_path / "cache")
    items = e.context("who calls echo")["items"]
    assert (items[0]["path"], items[0]["symbol"]) == ("pkg/out.py", "echo")
    assert ("pkg/cli.py", "main") in [(i["path"], i["symbol"]) for i in items]
    local = [(i["symbol"], r["via"]) for i in items if i["path"].startswith("tests/") for r in i["reasons"]]
    assert not [x for x in local if x[1] in ("symbol-exact", "CALLS<-")], local  # neither the helper nor its caller
    qualified = e.context("who calls test_prompts_eof.echo")["items"]
    assert (qualified[0]["path"], qualified[0]["symbol"]) == ("tests/test_prompt.py", "test_prompts_eof.echo")
    # only the package's own code outranks a local def: an example's `cli` leaves the tests' in the answer
    (tmp_path / "ws" / "examples").mkdir()
    (tmp_path / "ws" / "examples" / "app.py").write_text("def cli():\n    pass\n")
    (tmp_path / "ws" / "tests" / "test_cli.py").write_text(
        "from pkg.out import echo\n\n\ndef test_default():\n    def cli():\n        echo('x')\n\n    cli()\n")
    e.refresh()
    named = {(i["path"], i["symbol"]) for i in e.context("What does `cli` call?")["items"]
             if any(r["via"] == "symbol-exact" for r in i["reasons"])}
    assert ("tests/test_cli.py", "test_default.cli") in named, named


def test_importers_of_a_symbol_are_the_imports_of_its_name(tmp_path: Path) -> None:
    """Who imports a function: the statements that import its name, from its module or through a
    re-export, at their own lines; not the files that import other names of its module."""
    from conftest import open_engine

    helpers = "def abort():\n    pass\n\n\ndef url_for(name):\n    return name\n"
    views = "import os\nfrom pkg import abort\nfrom pkg import url_for\n\n\ndef page():\n    return url_for('x')\n"
    e = open_engine(tmp_path / "ws", {"pkg/__init__.py": "from .helpers import abort\nfrom .helpers import url_for\n",
                                      "pkg/helpers.py": helpers, "views.py": views,
                                      "pkg/app.py": "from .helpers import abort\n\n\ndef run():\n    abort()\n"},
                    tmp_path / "cache")
    got = {(r["node"].id, r["edge"].path, r["edge"].line) for r in e.related("pkg/helpers.py::url_for", "importers")}
    assert got == {("pkg/__init__.py", "pkg/__init__.py", 2), ("views.py", "views.py", 3)}, got
    whole = {r["node"].id for r in e.related("pkg/helpers.py", "importers")}
    assert "pkg/app.py" in whole  # a file's importers are still every file importing it


def test_a_follow_up_after_task_text_is_about_what_its_pack_led_with(tmp_path: Path) -> None:
    """Paste an issue, then ask "its tests": the tests of what the issue's pack led with, not of a
    name the issue mentioned on the way (an example's `index` view)."""
    from conftest import open_engine

    files = {
        "pkg/__init__.py": "",
        "pkg/helpers.py": ("class BuildError(Exception):\n    pass\n\n\ndef url_for(endpoint):\n"
                           "    if '.' in endpoint:\n        raise BuildError(endpoint)\n    return '/' + endpoint\n"),
        "examples/app.py": "from pkg.helpers import url_for\n\n\ndef index():\n    return url_for('api.index')\n",
        "tests/test_helpers.py": "from pkg.helpers import url_for\n\n\ndef test_url_for():\n    assert url_for('a') == '/a'\n",
    }
    e = open_engine(tmp_path / "ws", files, tmp_path / "cache")
    task = ("Link building fails for a blueprint endpoint\n\nCalling it from my `index` view with `api.index`:\n\n"
            "```python\nfrom pkg.helpers import url_for\nurl_for('api.index')\n```\n\n```\n"
            "Traceback (most recent call last):\n  File \"app.py\", line 2, in <module>\n"
            "  File \"/venv/lib/python3.11/site-packages/pkg/helpers.py\", line 7, in url_for\n"
            "    raise BuildError(endpoint)\npkg.helpers.BuildError: api.index\n```\n")
    lead = e.context(task)["items"][0]
    assert (lead["path"], lead["symbol"]) == ("pkg/helpers.py", "url_for")
    follow = e.context("its tests")["items"]
    subject = [(i["path"], i["symbol"]) for i in follow if any(r["via"] == "follow-up" for r in i["reasons"])]
    assert subject == [("pkg/helpers.py", "url_for")], subject
    assert (follow[0]["path"], follow[0]["symbol"]) == ("tests/test_helpers.py", "test_url_for")



def test_an_open_file_adds_its_item_and_changes_no_other(tmp_path: Path) -> None:
    """Working memory (a file open in the editor) adds its own item to a question's pack; the other
    items are those of a one-shot run, detail included (the open file's item took a rank, and the
    caller after it lost its full text)."""
    from conftest import open_engine

    callees = "\n\n".join(f"def step_{i}(x):\n    '''Step {i}.'''\n    return x + {i}\n" for i in range(6))
    files = {
        "pkg/__init__.py": "",
        "pkg/steps.py": callees,
        "pkg/flow.py": ("from pkg.steps import " + ", ".join(f"step_{i}" for i in range(6)) + "\n\n\n"
                        "def run(x):\n" + "".join(f"    x = step_{i}(x)\n" for i in range(6)) + "    return x\n"),
        "pkg/app.py": "from pkg.flow import run\n\n\n" + "\n\n".join(f"def entry_{i}(x):\n    return run(x)\n"
                                                                     for i in range(3)),
    }
    e = open_engine(tmp_path / "ws", files, tmp_path / "cache")
    line = files["pkg/flow.py"].splitlines().index("def run(x):") + 1

    def pack() -> tuple[list[tuple[str, str | None, str]], int]:
        got = e.context("what does this do", path="pkg/flow.py", line=line, record=False)["items"]
        rest = [(i["path"], i["symbol"], i["detail"]) for i in got
                if not all(r["via"] == "working-memory" for r in i["reasons"])]
        return rest, len(got) - len(rest)

    alone, none = pack()
    assert none == 0 and ("pkg/app.py", "entry_0", "full") in alone
    e.note_open("pkg/steps.py")
    e.note_open("pkg/flow.py")
    nudged, added = pack()
    assert added > 0 and nudged == alone


def test_a_relation_the_index_has_none_of_is_said(tmp_path: Path) -> None:
    """"who calls X" where nothing calls X: the pack's notes say the relation is empty, so the items
    (X and text near the question) are not read as callers; a relation with members gets no note."""
    from conftest import open_engine

    files = {"pkg/__init__.py": "",
             "pkg/d.py": ("class Multi:\n    def sortedvalues(self):\n        return sorted(self.values())\n\n"
                          "    def values(self):\n        return []\n")}
    e = open_engine(tmp_path / "ws", files, tmp_path / "cache")
    empty = e.context("who calls Multi.sortedvalues")
    assert empty["notes"] == ["the index has no callers of Multi.sortedvalues (pkg/d.py), and no other code "
                              "names `sortedvalues`"]
    assert "notes" not in e.context("who calls Multi.values")
    (tmp_path / "ws" / "pkg" / "use.py").write_text("def clear(box):\n    return box.sortedvalues()\n")
    e.refresh()
    unresolved = e.context("who calls Multi.sortedvalues")  # `box` has no known type: no CALLS edge
    assert unresolved["notes"] == ["the index has no callers of Multi.sortedvalues (pkg/d.py); 1 other symbol names "
                                   "`sortedvalues` (calls it could not resolve, or uses by name)"]
    # the whole name is counted, not its words (`get`, `values` are in many symbols)
    (tmp_path / "ws" / "pkg" / "get.py").write_text(
        "def get_sorted_values_renamed():\n    return 1\n\n\n" + "".join(
            f"def get_values_{i}():\n    return {i}\n\n\n" for i in range(5)))
    e.refresh()
    renamed = e.context("who calls get_sorted_values_renamed")
    assert renamed["notes"] == ["the index has no callers of get_sorted_values_renamed (pkg/get.py), and no other "
                                "code names `get_sorted_values_renamed`"]


def test_a_session_answers_a_name_nothing_defines_as_a_one_shot_run_does(tmp_path: Path) -> None:
    """"who calls frobnicate_widget" after a question about `finalize`: the session's working memory
    (the last answer) is no described target, so no hop reaches its callers; the items are what a
    one-shot run gives, plus working memory's own."""
    from conftest import open_engine

    files = {"pkg/__init__.py": "",
             "pkg/app.py": ("def finalize(rv):\n    return rv\n\n\ndef dispatch(req):\n    return finalize(req)\n\n\n"
                            "def handle(exc):\n    return finalize(exc)\n")}
    e = open_engine(tmp_path / "ws", files, tmp_path / "cache")
    one_shot = e.context("who calls frobnicate_widget", record=False)
    e.context("what does pkg/app.py:1 do")
    session = e.context("who calls frobnicate_widget")
    assert "hop" not in session["plan"]
    assert not [i for i in session["items"] for r in i["reasons"] if r["via"] in ("CALLS<-", "hop-resolved")]
    rest = [(i["path"], i["symbol"]) for i in session["items"] if not all(r["via"] == "working-memory" for r in i["reasons"])]
    assert rest == [(i["path"], i["symbol"]) for i in one_shot["items"]]


def test_the_cursor_pack_has_the_tests_the_code_lens_counts(tmp_path: Path) -> None:
    """A helper's tests are those of the functions that use it: the code lens counts them
    (`tests_for`), and the cursor pack shows them, after the code."""
    from conftest import open_engine

    files = {"pkg/__init__.py": "",
             "pkg/env.py": "def load_dotenv_flag():\n    return True\n\n\ndef run(app):\n    if load_dotenv_flag():\n        app.x = 1\n",
             "tests/test_run.py": "from pkg.env import run\n\n\ndef test_run_defaults():\n    run(object())\n"}
    e = open_engine(tmp_path / "ws", files, tmp_path / "cache")
    counted = {t["node"].id for t in e.tests_for("pkg/env.py::load_dotenv_flag")}
    assert counted == {"tests/test_run.py::test_run_defaults"}
    items = e.context_at("pkg/env.py", 2, None)["items"]
    got = [(i["symbol"], [r["via"] for r in i["reasons"]]) for i in items]
    assert got[0] == ("load_dotenv_flag", ["cursor"]) and ("run", ["CALLS<-"]) in got
    assert got[-1] == ("test_run_defaults", ["tests (static)"]), got
