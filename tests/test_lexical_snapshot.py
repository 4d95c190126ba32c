"""The lexical indexes persisted with the cache: a fresh process starts from the snapshot, and what
it then holds equals indexes built from scratch on the same files, through changes on disk, editor
buffers and a second generation of snapshots."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import msgpack
import pytest
from conftest import write_tree

from ctx_lsp.engine import Engine

WORDS = ("parse", "render", "cache", "token", "query", "graph", "node", "edge", "merge", "split", "load", "save")


def _module(rng: random.Random, i: int) -> str:
    out = [f'"""Module {i}: {" ".join(rng.sample(WORDS, 4))}."""\n']
    for j in range(rng.randint(1, 4)):
        a, b = rng.sample(WORDS, 2)
        out.append(f"class {a.title()}{b.title()}{i}_{j}:\n    \"\"\"{rng.choice(WORDS)} the {rng.choice(WORDS)}.\"\"\"\n\n"
                   f"    def {a}_{b}(self, {rng.choice(WORDS)}_value):\n        return '{rng.choice(WORDS)} failed: %s'\n\n")
    out.append(f"def {rng.choice(WORDS)}_{i}():\n    # {' '.join(rng.sample(WORDS, 3))}\n    return {i}\n")
    return "\n".join(out)


def _tree(rng: random.Random, n: int) -> dict[str, str]:
    return {f"pkg/{rng.choice(WORDS)}_{i}.py": _module(rng, i) for i in range(n)} | {"pkg/__init__.py": ""}


def _state(e: Engine) -> dict[str, object]:
    r = e.retriever
    r.sync()
    lex, fl = r.lexical, r.file_lexical
    chunks = {path: sorted((c.node_id, sorted(c.tf.items())) for c in lex._file_chunks(path)) for path in e.index.facts}
    lengths = dict(lex.length)
    return {
        "n": lex.n, "total": lex.total_len, "lengths": lengths, "postings": lex.postings.items(), "chunks": chunks,
        "file_postings": fl.postings.items(), "tf": {p: dict(f.terms) for p, f in fl._facts.items()}, "length": fl.length, "file_total": fl.total,
        "path_terms": fl.path_terms, "path_postings": fl.path_postings,
        "search": [lex.search(q, top=50) for q in QUERIES], "file_search": [fl.search(q) for q in QUERIES],
    }


QUERIES = ["parse the token cache", "graph node edge merge", "render failed", "load save split query", "Parse1_0"]


def _scratch(root: Path, tmp: Path, name: str) -> dict[str, object]:
    e = Engine(root, cache_dir=tmp / name)
    e.open()
    return _state(e)


def test_a_warm_start_takes_the_lexical_indexes_from_the_cache_and_they_equal_a_scratch_build(tmp_path: Path) -> None:
    rng = random.Random(7)
    root, cache = tmp_path / "ws", tmp_path / "cache"
    files = _tree(rng, 40)
    write_tree(root, files)
    first = Engine(root, cache_dir=cache)
    first.open()
    paths = sorted(p for p in files if p != "pkg/__init__.py")
    # an editor buffer the cache must not take for the disk, then a save with it open
    first.index.update_file(paths[0], _module(rng, 900), overlay=True)
    first.index.save()

    # changes on disk while no process runs: one file edited, one removed, one added
    write_tree(root, {paths[1]: _module(rng, 901), "pkg/extra_new.py": _module(rng, 902)})
    (root / paths[2]).unlink()

    warm = Engine(root, cache_dir=cache)
    assert warm.open().warm
    got = _state(warm)
    assert warm.retriever.lexical_loaded
    assert got == _scratch(root, tmp_path, "scratch1")

    # a second generation, from a process that decoded only what one query read: its snapshot keeps
    # the bytes of untouched terms, marks the stale files' positions dead and appends new ids
    mid = Engine(root, cache_dir=cache)
    mid.open()
    mid.context("parse the token cache", 2000, record=False)
    assert mid.retriever.lexical_loaded
    mid.index.update_file(paths[3], _module(rng, 903))
    (root / paths[3]).write_text(_module(rng, 903))
    mid.index.remove_file(paths[4])
    (root / paths[4]).unlink()
    mid.index.save()
    (root / paths[5]).write_text(_module(rng, 904))

    again = Engine(root, cache_dir=cache)
    again.open()
    got2 = _state(again)
    assert again.retriever.lexical_loaded
    assert got2 == _scratch(root, tmp_path, "scratch2")


def test_an_unusable_lexical_snapshot_is_rebuilt_with_the_same_answers(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    root, cache = tmp_path / "ws", tmp_path / "cache"
    write_tree(root, _tree(random.Random(3), 12))
    Engine(root, cache_dir=cache).open()
    e = Engine(root, cache_dir=cache)
    e.open()
    snap = msgpack.unpackb(e.index.loaded_sections["lexical"])
    snap["chunks"]["counts"] = {"no/such.py": [1, 2]}  # describes files that do not match its postings
    e.index.loaded_sections["lexical"] = msgpack.packb(snap, use_bin_type=True)
    with caplog.at_level(logging.WARNING):
        got = _state(e)
    assert not e.retriever.lexical_loaded
    assert any("lexical snapshot unusable" in r.getMessage() for r in caplog.records)
    assert got == _scratch(root, tmp_path, "scratch")


def test_a_query_leaves_the_cache_and_its_lexical_snapshot_as_they_were(tmp_path: Path) -> None:
    root, cache = tmp_path / "ws", tmp_path / "cache"
    write_tree(root, _tree(random.Random(5), 10))
    Engine(root, cache_dir=cache).open()
    before = (cache / "index.msgpack").read_bytes()
    e = Engine(root, cache_dir=cache)
    e.open()
    e.context("parse the token cache", 2000, record=False)
    assert e.retriever.lexical_loaded
    assert (cache / "index.msgpack").read_bytes() == before


def test_a_process_without_the_retriever_writes_the_snapshot_back_and_it_stays_correct(tmp_path: Path) -> None:
    from ctx_lsp.index.workspace import WorkspaceIndex

    rng = random.Random(11)
    root, cache = tmp_path / "ws", tmp_path / "cache"
    files = _tree(rng, 15)
    write_tree(root, files)
    Engine(root, cache_dir=cache).open()
    changed = sorted(files)[3]
    write_tree(root, {changed: _module(rng, 950)})
    bare = WorkspaceIndex(root, cache_dir=cache)  # as `ctx-lsp coverage import` opens and saves
    bare.load_or_build()  # re-extracts the changed file and writes the cache
    assert "lexical" in bare.loaded_sections

    e = Engine(root, cache_dir=cache)
    e.open()
    got = _state(e)
    assert e.retriever.lexical_loaded
    assert got == _scratch(root, tmp_path, "scratch")


RARE = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima")


def _rare_module(rng: random.Random, i: int, size: int = 1) -> str:
    # a few words per chunk from a larger vocabulary, so no query term is in a fifth of all chunks
    out = []
    for j in range(size * rng.randint(1, 3)):
        a, b = rng.sample(RARE, 2)
        body = " ".join(rng.sample(RARE, rng.randint(1, 4)))
        out.append(f"def {a}_{b}_{i}_{j}():\n    return '{body} {rng.choice(WORDS)}'\n")
    return "\n".join(out)


def test_scores_after_edits_in_a_process_that_already_queried_equal_a_scratch_build(tmp_path: Path) -> None:
    # the searches keep BM25's length normalisation between queries: an edit must drop it
    rng = random.Random(13)
    root, cache = tmp_path / "ws", tmp_path / "cache"
    files = {f"pkg/m{i}.py": _rare_module(rng, i) for i in range(30)} | {"pkg/__init__.py": ""}
    write_tree(root, files)
    e = Engine(root, cache_dir=cache)
    e.open()
    queries = ["alpha bravo golf", "kilo lima echo delta", "india hotel juliet parse"]
    before = [e.retriever.lexical.search(q, top=50) for q in queries]
    assert all(before), "the chunk searches must score something for the test to mean anything"
    _state(e)
    grown = _rare_module(rng, 960, size=6)  # longer: every chunk's and file's normalisation moves
    e.index.update_file("pkg/m0.py", grown)
    (root / "pkg/m0.py").write_text(grown)
    e.index.remove_file("pkg/m1.py")
    (root / "pkg/m1.py").unlink()
    got = _state(e)
    after = [e.retriever.lexical.search(q, top=50) for q in queries]
    scratch = Engine(root, cache_dir=tmp_path / "scratch")
    scratch.open()
    assert after == [scratch.retriever.lexical.search(q, top=50) for q in queries]
    assert got == _state(scratch)


def test_the_scope_prior_follows_packages_added_after_a_query(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_tree(root, {"pkg/__init__.py": "", "pkg/core.py": "def run():\n    return 1\n",
                      "loose/helper.py": "def helper():\n    return 2\n"})
    e = Engine(root, cache_dir=tmp_path / "cache")
    e.open()
    from ctx_lsp.retrieval.files import PERIPHERAL, scope_prior

    memo = e.scope_memo  # the one memo the retriever and name lookup share
    assert scope_prior(e.index.ws, lambda p: False, memo)("loose/helper.py") == PERIPHERAL
    e.index.update_file("loose/__init__.py", "")
    (root / "loose/__init__.py").write_text("")
    e.retriever.sync()
    assert scope_prior(e.index.ws, lambda p: False, memo)("loose/helper.py") == 1.0


def test_top_hits_equals_a_full_sort_with_ties_by_id() -> None:
    from ctx_lsp.retrieval.lexical import top_hits

    rng = random.Random(17)
    for _ in range(200):
        scores = {f"id{rng.randint(0, 500)}": float(rng.choice([0.5, 1.0, 1.5, rng.random()])) for _ in range(rng.randint(0, 60))}
        top = rng.randint(0, 70)
        assert top_hits(scores, top) == sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:top]


def test_ids_added_to_terms_still_packed_wait_until_the_term_is_read_and_equal_an_eager_build() -> None:
    from ctx_lsp.retrieval.postings import Postings

    docs = {"a.py::f": {"parse": 2, "token": 1}, "b.py::g": {"parse": 1, "cache": 3}, "c.py::h": {"token": 4}}
    first = Postings()
    for item, counts in docs.items():
        first.add_all(item, counts)
    snap = first.snapshot(lambda _i: True)

    # b.py changed (stale), d.py is new: what a checkout does to a loaded index
    later = Postings()
    later.load(snap, {"b.py"}, lambda item: item.split("::")[0])
    later.add_all("b.py::g", {"cache": 1, "merge": 2})
    later.add_all("d.py::k", {"parse": 5, "token": 1})
    assert "parse" in later._packed and "token" in later._packed  # nothing decoded by the adds
    later.discard("token", "c.py::h")

    eager = Postings()
    for item, counts in {"a.py::f": docs["a.py::f"], "c.py::h": docs["c.py::h"], "b.py::g": {"cache": 1, "merge": 2},
                         "d.py::k": {"parse": 5, "token": 1}}.items():
        eager.add_all(item, counts)
    eager.discard("token", "c.py::h")
    assert later.get("parse") == {"a.py::f": 2, "d.py::k": 5}
    assert later.items() == eager.items()
    # a second generation written after the adds holds them, and a stale file's ids are gone
    again = Postings()
    again.load(later.snapshot(lambda _i: True), set(), lambda item: item.split("::")[0])
    assert again.items() == eager.items()


def test_files_only_re_bound_keep_their_lexical_entries_and_equal_a_scratch_build(tmp_path: Path) -> None:
    """Renaming a function re-binds every file that imports it, but only the renamed file's text
    changed: only it is indexed again, and the indexes equal a scratch build."""
    root, cache = tmp_path / "ws", tmp_path / "cache"
    users = {f"pkg/use{i}.py": f"from pkg.core import parse_token\n\n\ndef run{i}():\n    return parse_token({i})\n"
             for i in range(6)}
    write_tree(root, {"pkg/__init__.py": "", "pkg/core.py": "def parse_token(x):\n    return x\n"} | users)
    e = Engine(root, cache_dir=cache)
    e.open()
    _state(e)
    renamed = "def parse_token_value(x):\n    return x\n"
    rebound = e.index.update_file("pkg/core.py", renamed)
    (root / "pkg/core.py").write_text(renamed)
    assert rebound == 7  # core.py and its six importers
    set_paths: list[str] = []
    original = e.retriever._set_lexical

    def counting(f: object, path: str) -> None:
        set_paths.append(path)
        original(f, path)  # type: ignore[arg-type]

    e.retriever._set_lexical = counting  # type: ignore[method-assign]
    got = _state(e)
    assert set_paths == ["pkg/core.py"]
    assert got == _scratch(root, tmp_path, "scratch")


def test_a_file_rewritten_with_most_chunks_unchanged_updates_only_the_rest_and_equals_a_scratch_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout rewrites a file but keeps most of its functions: the chunk index touches only the
    chunks whose counts changed (one gone, one new, one with other words), and what it then holds and
    answers equals a scratch build."""
    from ctx_lsp.retrieval.postings import Postings

    funcs = {name: f"def {name}(value):\n    return '{name} {word} failed: %s' % value\n"
             for name, word in (("parse_a", "alpha"), ("render_b", "bravo"), ("load_c", "charlie"),
                                ("save_d", "delta"), ("merge_e", "echo"))}
    root, cache = tmp_path / "ws", tmp_path / "cache"
    write_tree(root, {"pkg/__init__.py": "", "pkg/mod.py": "\n\n".join(funcs.values()), "pkg/other.py": "X = 1\n"})
    e = Engine(root, cache_dir=cache)
    e.open()
    _state(e)
    changed = dict(funcs)
    del changed["load_c"]
    changed["render_b"] = changed["render_b"].replace("bravo failed", "bravo foxtrot broke")
    changed["split_f"] = "def split_f(value):\n    return value.split()\n"
    text = "\n\n".join(changed.values())
    (root / "pkg/mod.py").write_text(text)
    old_terms = dict(e.index.facts["pkg/mod.py"].terms)
    touched: list[str] = []
    added: dict[str, set[str]] = {}
    for name in ("add_all", "discard_all"):
        original = getattr(Postings, name)

        def spy(self, item, terms, _original=original, _name=name):  # type: ignore[no-untyped-def]
            touched.append(item)
            if _name == "add_all":
                added.setdefault(item, set()).update(terms)
            return _original(self, item, terms)

        monkeypatch.setattr(Postings, name, spy)
    e.index.update_file("pkg/mod.py", text)
    got = _state(e)
    monkeypatch.undo()
    chunk_ids = {i for i in touched if "::" in i}
    assert chunk_ids == {"pkg/mod.py::render_b", "pkg/mod.py::load_c", "pkg/mod.py::split_f"}
    # the whole-file index sets only the counts that changed; a changed chunk, only its changed terms
    new_terms = e.index.facts["pkg/mod.py"].terms
    assert added["pkg/mod.py"] == {t for t, c in new_terms.items() if old_terms.get(t) != c}
    assert new_terms["alpha"] == old_terms["alpha"] and "alpha" not in added["pkg/mod.py"]
    assert "render" not in added["pkg/mod.py::render_b"] and "foxtrot" in added["pkg/mod.py::render_b"]
    assert got == _scratch(root, tmp_path, "scratch")


def test_a_pooled_update_brings_the_lexical_indexes_up_to_date_beside_the_bind_workers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the bind pool binds a large update, the parent thread sets the changed files' lexical
    entries (it would only wait there): the next query has none left to set, and the indexes equal a
    scratch build."""
    import threading

    from ctx_lsp.index import workspace as ws_mod

    monkeypatch.setattr(ws_mod, "PARALLEL_THRESHOLD", 4)
    rng = random.Random(7)
    root = tmp_path / "ws"
    write_tree(root, _tree(rng, 10))
    e = Engine(root, cache_dir=tmp_path / "cache")
    e.index.workers = 2
    e.index.fork_safe = True  # as the daemon and the server declare (see WorkspaceIndex.may_fork_workers)
    e.open()
    if not e.index.may_fork_workers():
        pytest.skip("this platform cannot fork")
    _state(e)  # the lexical indexes are live
    changed = sorted(p for p in e.index.facts if p != "pkg/__init__.py")[:6]
    for i, path in enumerate(changed):
        (root / path).write_text(_module(rng, 100 + i))
    (root / changed[-1]).unlink()
    threads: dict[str, str] = {}
    original = e.retriever._set_lexical

    def recording(f: object, path: str) -> None:
        threads[path] = threading.current_thread().name
        original(f, path)  # type: ignore[arg-type]

    e.retriever._set_lexical = recording  # type: ignore[method-assign]
    e.refresh()
    assert e.index.workers_used.get("bind") == 2
    assert threads == {p: "ctx-lsp-while-binding" for p in changed}
    threads.clear()
    got = _state(e)
    assert threads == {}  # nothing left for the query's sync
    assert got == _scratch(root, tmp_path, "scratch")
