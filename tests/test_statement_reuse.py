"""A checkout's changed file keeps the facts of the top-level statements whose text it still holds
(index/statement_reuse.py): the result equals a whole extraction of the new text, field for field, on
real files (this project's sources and the standard library's) changed the way a checkout changes
them (several functions at once, statements added, removed and moved), and it declines where
statements depend on each other or a kept text is no longer a statement."""

from __future__ import annotations

import ast
import random
import sysconfig
from pathlib import Path

import pytest
from conftest import write_tree

from ctx_lsp.index.extract import extract
from ctx_lsp.index.facts import FileFacts, content_digest, split_lines
from ctx_lsp.index.statement_reuse import reuse_statements
from ctx_lsp.index.workspace import WorkspaceIndex

ROOT = Path(__file__).resolve().parent.parent
STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = sorted((ROOT / "ctx_lsp").rglob("*.py"))[1::3] + [
    STDLIB / n for n in ("argparse.py", "dataclasses.py", "typing.py", "inspect.py", "ast.py", "functools.py",
                         "tarfile.py", "unittest/mock.py", "email/_header_value_parser.py", "asyncio/base_events.py",
                         "__future__.py", "textwrap.py")
    if (STDLIB / n).exists()]


def _digest(text: str) -> str:
    return content_digest(text.encode("utf-8", "surrogatepass"))


def _tops(tree: ast.Module) -> list[tuple[int, int]]:
    return [(min([d.lineno for d in getattr(t, "decorator_list", ())] + [t.lineno]), t.end_lineno or t.lineno)
            for t in tree.body]


def _versions(text: str, rng: random.Random) -> list[tuple[str, str]]:
    """(kind, new text): the changes a checkout brings to one file."""
    lines = split_lines(text)
    tree = ast.parse(text)
    spans = _tops(tree)
    bodies = [(n.lineno, n.col_offset) for t in tree.body if isinstance(t, (ast.FunctionDef, ast.ClassDef))
              for n in ast.walk(t) if isinstance(n, ast.stmt) and n is not t and n.end_lineno == n.lineno]
    out: list[tuple[str, str]] = []

    def joined(ls: list[str]) -> str:
        return "\n".join(ls) + "\n"

    for _ in range(3):
        if len(bodies) >= 3:
            new = list(lines)
            for line, indent in sorted(rng.sample(bodies, 3), reverse=True):
                new[line:line] = [" " * indent + "probe = helper_probe(self, 'a changed line')"] * rng.randint(1, 3)
            out.append(("three-bodies", joined(new)))
    out.append(("append-def", text.rstrip("\n") + "\n\n\ndef _probe_appended(value):\n    return value\n"))
    if len(spans) >= 2:
        i = rng.randrange(len(spans))
        f, la = spans[i]
        out.append(("delete-statement", joined(lines[: f - 1] + lines[la:])))
        j = rng.randrange(len(spans))
        f2, la2 = spans[j]
        if (f2, la2) != (f, la):
            a, b = sorted([(f, la), (f2, la2)])
            moved = lines[: a[0] - 1] + lines[b[0] - 1 : b[1]] + lines[a[1] : b[0] - 1] + lines[a[0] - 1 : a[1]] + lines[b[1]:]
            out.append(("swap-statements", joined(moved)))
        dup = lines[:la] + [""] + lines[f - 1 : la] + lines[la:]
        out.append(("duplicate-statement", joined(dup)))
        wrapped = lines[: f - 1] + ['_probe_text = """'] + lines[f - 1 : la] + ['"""'] + lines[la:]
        out.append(("statement-inside-a-string", joined(wrapped)))
        # a def's body continues below its old last line: its old text is no longer a whole statement
        indented = lines[:la] + ["    continued_probe()"] + lines[la:]
        out.append(("indented-after-statement", joined(indented)))
    out.append(("docstring-first", '"""A new module docstring."""\n' + text))
    out.append(("module-words", text.rstrip("\n") + "\nPROBE_SETTING = compute_probe('words')\n"))
    out.append(("all", text.rstrip("\n") + "\n__all__ = ['a', 'b']\n"))
    out.append(("broken", text.rstrip("\n") + "\ndef broken(:\n"))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_reused_statements_give_a_whole_extraction(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    rel = path.name
    old = extract(rel, text)
    assert old.tops and all(len(t) == 7 for t in old.tops), "a file that parses records each statement's digest"
    reused: dict[str, int] = {}
    for kind, new_text in _versions(text, random.Random(path.name)):
        digest = _digest(new_text)
        got = reuse_statements(old, new_text, digest)
        if got is None:
            continue
        reused[kind] = reused.get(kind, 0) + 1
        assert got == extract(rel, new_text, digest), kind
    assert reused.get("append-def") == 1
    # a kept text inside a new string is no statement: the stretch before it does not parse alone
    assert "broken" not in reused and "statement-inside-a-string" not in reused


def test_most_checkout_changes_keep_statements() -> None:
    done = tried = 0
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        old = extract(path.name, text)
        for kind, new_text in _versions(text, random.Random(path.name)):
            if kind in ("three-bodies", "delete-statement", "swap-statements"):
                tried += 1
                done += reuse_statements(old, new_text, _digest(new_text)) is not None
    assert tried > 40 and done >= tried * 2 // 3


def test_statements_that_depend_on_each_other_are_declined_and_moved_ones_kept() -> None:
    text = "from __future__ import annotations\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return f()\n"
    old = extract("m.py", text)
    # a second `f`: the first definition wins, so the two statements' facts depend on each other
    twice = text + "\n\ndef f():\n    return 2\n"
    assert reuse_statements(old, twice, _digest(twice)) is None
    # and the other way: the later of two old definitions kept, the first one gone (a variable's second
    # assignment has no def, a function's second def is `f#2`), so its old facts are not its new ones
    for first, later, replaced_by in (("x = 1\n", "x = 2\n", "y = 0\n"),
                                      ("def f():\n    pass\n", "def f():\n    return g()\n", "import os\n")):
        old_twice = extract("m.py", first + "\n\n" + later)
        new_once = replaced_by + "\n\n" + later
        got = reuse_statements(old_twice, new_once, _digest(new_once))
        assert got is None or got == extract("m.py", new_once)
    # two statements on one line are one text, which finds only the first: declined, not half kept
    semi = "a = 1; b = 2\n\n\ndef f():\n    pass\n"
    edited = semi.replace("pass", "return 1")
    got = reuse_statements(extract("m.py", semi), edited, _digest(edited))
    assert got is None or got == extract("m.py", edited)
    # a "blank" line that holds a no-break space (or U+2028, \\v) is a syntax error Python reports:
    # never skipped as blank
    plain = "import os\n\n\ndef f():\n    return os.getcwd()\n"
    for odd in ("\u00a0", "\u2028", "\x0b", "\u00a0# a comment"):
        broken = plain.replace("import os\n\n", f"import os\n{odd}\n", 1)
        got = reuse_statements(extract("m.py", plain), broken, _digest(broken))
        assert got is None or got == extract("m.py", broken), odd
        assert extract("m.py", broken).errors
    # a class whose first of two same-named methods is gone: its later method is walked as the first
    klass = "class C:\n    def m(self):\n        return 1\n\n    def m(self):\n        return helper()\n"
    one = "class C:\n    def m(self):\n        return helper()\n"
    got = reuse_statements(extract("m.py", klass), one, _digest(one))
    assert got is None or got == extract("m.py", one)
    # a new module docstring and module-level words (whole-file values): put together again
    plain = text.replace("from __future__ import annotations\n", "")
    doc = '"""Doc of the module."""\n' + plain + "\nSETTING = configure('value', other=VALUE)\n"
    got = reuse_statements(extract("m.py", plain), doc, _digest(doc))
    assert got is not None and got == extract("m.py", doc) and got.doc == "Doc of the module."
    # a future import that is no longer first: ast.parse does not check where it stands, so the facts
    # are what a whole extraction gives
    moved = "import os\n" + text
    got = reuse_statements(old, moved, _digest(moved))
    assert got is not None and got == extract("m.py", moved) and not got.errors
    # g's body changed, f kept: f's facts are kept, and the lines are the new ones
    edited = text.replace("    return f()", "    x = f()\n    return x")
    got = reuse_statements(old, edited, _digest(edited))
    assert got is not None and got == extract("m.py", edited)
    # f moved below g: kept, shifted
    swapped = "from __future__ import annotations\n\n\ndef g():\n    return f()\n\n\ndef f():\n    return 1\n"
    got = reuse_statements(old, swapped, _digest(swapped))
    assert got is not None and got == extract("m.py", swapped)
    assert [t[:3] for t in got.tops or []] == [(1, 1, ()), (4, 5, ("g",)), (8, 9, ("f",))]


def test_a_checkout_keeps_statements_and_equals_a_scratch_build(tmp_path: Path) -> None:
    """A checkout rewriting a large module (several functions changed, one added, one removed) is
    extracted from its kept statements, and the index equals a scratch build of the new tree."""
    funcs = [f"def f{i}(x):\n    return g{i}(x) + {i}\n\n\ndef g{i}(y):\n    return y" for i in range(40)]
    write_tree(tmp_path / "ws", {
        "pkg/__init__.py": "",
        "pkg/mod.py": "import os\n\n\n" + "\n\n\n".join(funcs) + "\n",
        "pkg/use.py": "from pkg.mod import f3, g7\n\n\ndef run():\n    return f3(1) + g7(2)\n",
    })
    root, cache = tmp_path / "ws", tmp_path / "cache"
    WorkspaceIndex(root, cache_dir=cache, workers=1).load_or_build()
    changed = list(funcs)
    changed[3] = "def f3(x):\n    y = g4(x)\n    return g3(y) + 3"
    changed[7] = "def f7(x, scale=2):\n    return g7(x) * scale"
    del changed[20]
    changed.append("def added(z):\n    return f1(z)")
    write_tree(root, {"pkg/mod.py": "import os\n\n\n" + "\n\n\n".join(changed) + "\n"})
    index = WorkspaceIndex(root, cache_dir=cache, workers=1)
    report = index.load_or_build()
    assert report.warm and (report.extracted, report.partial) == (1, 1)
    scratch = WorkspaceIndex(root, cache_dir=tmp_path / "scratch", workers=1)
    scratch.load_or_build()
    assert index.facts == scratch.facts
    assert index.graph.snapshot() == scratch.graph.snapshot()


def test_module_words_past_the_cap_are_cut_as_a_whole_extraction_cuts_them() -> None:
    """The walk keeps a file's first MAX_WORDS module-level words: a statement whose words it cut
    cannot be put together from the statements' own words, so the result equals a whole extraction
    or nothing."""
    from ctx_lsp.index.extract import MAX_WORDS

    stmts = [f"NAME_{i} = combine({', '.join(f'w{i}_{j}' for j in range(30))})" for i in range(MAX_WORDS // 25)]
    text = "\n".join(stmts) + "\n\n\ndef f():\n    return 1\n"
    old = extract("m.py", text)
    assert sum(len(t[3]) for t in old.tops or []) == MAX_WORDS  # the cut was reached
    for new_text in (text.replace("w0_0", "changed_word"), text.replace("return 1", "return 2"),
                     "\n".join(stmts[1:]) + "\n\n\ndef f():\n    return 1\n"):
        got = reuse_statements(old, new_text, _digest(new_text))
        assert got is None or got == extract("m.py", new_text)
    body_only = text.replace("return 1", "return 2")
    assert reuse_statements(old, body_only, _digest(body_only)) is not None  # the words did not move


@pytest.mark.parametrize("start", ["fork", "forkserver"])
def test_extraction_workers_reuse_statements_and_hand_back_equal_facts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       start: str) -> None:
    """Through the process pool (facts come back packed as the cache's wire), a build and a checkout
    give the facts an in-process build gives. Forked workers read the old facts they inherited; workers
    from a forkserver (a process with threads: the language server) are sent them, and keep statements too."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import ctx_lsp.index.workspace as ws_mod

    monkeypatch.setattr(ws_mod, "PARALLEL_BYTES", 0)  # any batch of files goes to the pool
    if start == "forkserver":
        if "forkserver" not in multiprocessing.get_all_start_methods():
            pytest.skip("no forkserver on this platform")
        # as where another thread runs off Linux: no fork, the pool from the process's default start method
        monkeypatch.setattr(WorkspaceIndex, "may_fork_workers", lambda self: False)
        monkeypatch.setattr(ws_mod, "ProcessPoolExecutor", lambda n, mp_context=None: ProcessPoolExecutor(
            n, mp_context=mp_context or multiprocessing.get_context("forkserver")))
    mods = {f"pkg/m{i}.py": "\n\n\n".join(f"def f{i}_{j}(x):\n    return helper(x, '{i} {j} failed: %s')"
                                          for j in range(12)) + "\n" for i in range(8)}
    root = tmp_path / "ws"
    use = "from pkg.m0 import f0_1\nfrom pkg.m2 import f2_5\n\n\ndef run():\n    return f0_1(1) + f2_5(2)\n"
    write_tree(root, {"pkg/__init__.py": "", "pkg/helpers.py": "def helper(x, msg):\n    return x\n",
                      "pkg/use.py": use} | mods)
    pooled = WorkspaceIndex(root, cache_dir=tmp_path / "pooled", workers=2)
    pooled.load_or_build()
    if pooled.workers_used.get("extract") != 2:
        pytest.skip("this platform cannot start extraction workers")
    alone = WorkspaceIndex(root, cache_dir=tmp_path / "alone", workers=1)
    alone.load_or_build()
    assert pooled.facts == alone.facts
    # bodies change in four modules; m0 also renames the f0_1 that use.py imports (an interface change,
    # which the workers' interface digests must show: use.py is re-bound, its call now unresolved)
    changed = {p: t.replace(f"return helper(x, '{p[5]} 3", f"return 2 * helper(x, '{p[5]} 3")
               for p, t in mods.items() if int(p[5]) % 2 == 0}
    changed["pkg/m0.py"] = changed["pkg/m0.py"].replace("def f0_1(", "def f0_1_renamed(")
    write_tree(root, changed)
    again = WorkspaceIndex(root, cache_dir=tmp_path / "pooled", workers=2)
    report = again.load_or_build()
    assert again.workers_used.get("extract") == 2 and (report.extracted, report.partial) == (4, 4)
    assert report.rebound == 5  # the four changed and use.py, not the rest
    assert not any(e.dst == "pkg/m0.py::f0_1" for e in again.graph.edges())
    scratch = WorkspaceIndex(root, cache_dir=tmp_path / "scratch", workers=1)
    scratch.load_or_build()
    assert again.facts == scratch.facts
    assert again.graph.snapshot() == scratch.graph.snapshot()


def test_a_file_changed_on_disk_under_a_running_index_reuses_its_kept_statements(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The server reloads a file a checkout rewrote: the old text is gone, so it is not spliced, and
    its kept statements keep their facts; an editor edit (old text at hand) is still spliced."""
    import ctx_lsp.index.workspace as ws_mod

    funcs = [f"def f{i}(x):\n    return g(x) + {i}" for i in range(30)]
    root = tmp_path / "ws"
    write_tree(root, {"pkg/__init__.py": "", "pkg/mod.py": "def g(x):\n    return x\n\n\n" + "\n\n\n".join(funcs) + "\n"})
    index = WorkspaceIndex(root, cache_dir=tmp_path / "cache", workers=1)
    index.load_or_build()
    calls: list[str] = []
    original_reuse, original_splice = ws_mod.reuse_statements, ws_mod.splice
    monkeypatch.setattr(ws_mod, "reuse_statements", lambda *a: calls.append("reuse") or original_reuse(*a))
    monkeypatch.setattr(ws_mod, "splice", lambda *a: calls.append("splice") or original_splice(*a))
    funcs[4] = "def f4(x):\n    y = g(x)\n    return y * 4"
    funcs[20] = "def f20(x, scale=2):\n    return g(x) * scale"
    new_text = "def g(x):\n    return x\n\n\n" + "\n\n\n".join(funcs) + "\n"
    (root / "pkg/mod.py").write_text(new_text)
    index.reload_file("pkg/mod.py")
    assert calls == ["reuse"]
    assert index.facts["pkg/mod.py"] == extract("pkg/mod.py", new_text, index.facts["pkg/mod.py"].digest)
    index.update_file("pkg/mod.py", new_text.replace("y * 4", "y * 5"), overlay=True)
    assert calls == ["reuse", "splice"]
    scratch = WorkspaceIndex(root, cache_dir=tmp_path / "scratch", workers=1)
    (root / "pkg/mod.py").write_text(new_text.replace("y * 4", "y * 5"))
    scratch.load_or_build()
    assert index.facts == scratch.facts and index.graph.snapshot() == scratch.graph.snapshot()


def test_reuse_check_command_compares_a_checkouts_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmark_gen.__main__ import main

    funcs = [f"def f{i}(x):\n    return x + {i}" for i in range(10)]
    old, new = tmp_path / "old", tmp_path / "new"
    write_tree(old, {"pkg/__init__.py": "", "pkg/a.py": "\n\n\n".join(funcs) + "\n", "pkg/b.py": "X = 1\n"})
    write_tree(new, {"pkg/__init__.py": "", "pkg/a.py": "\n\n\n".join(funcs).replace("x + 3", "x * 3") + "\n",
                     "pkg/b.py": "X = 2\n"})
    assert main(["reuse-check", str(old), str(new), "--json"]) == 0
    import json

    got = json.loads(capsys.readouterr().out)
    # a.py keeps nine of its ten statements; b.py's only statement changed: nothing to keep
    assert (got["modified"], got["reused"], got["declined"], got["unequal"]) == (2, 1, 1, [])

    # --bindings: the updated copy's bindings (kept site groups and all) against fresh ones
    from ctx_lsp.index import bind

    assert main(["reuse-check", str(old), str(new), "--json", "--bindings"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["bindings"], got["facts_unequal"], got["bindings_unequal"], got["graph_unequal"]) == (3, [], [], [])
    # facts the update got wrong (a kept def dropped): the scratch build says so, and what follows from them
    from ctx_lsp.index import workspace

    reuse = workspace.reuse_statements

    def dropping(o: FileFacts, text: str, digest: str) -> FileFacts | None:
        got = reuse(o, text, digest)
        if got is not None:
            got.defs = got.defs[:-1]
        return got

    workspace.reuse_statements = dropping  # type: ignore[assignment]
    try:
        assert main(["reuse-check", str(old), str(new), "--json", "--bindings"]) == 1
    finally:
        workspace.reuse_statements = reuse  # type: ignore[assignment]
    got = json.loads(capsys.readouterr().out)
    assert got["facts_unequal"] == [{"path": "pkg/a.py", "field": "defs"}]
    assert any(u["what"] == "node" and "pkg/a.py::f9" in u["missing"] for u in got["graph_unequal"] if "missing" in u)
    moved = bind._moved
    # a kept group's constraints moved wrong: the check must say so
    bind._moved = lambda c, delta: moved(c, delta + 1)  # type: ignore[assignment]
    try:
        write_tree(new, {"pkg/a.py": "def g(cb):\n    return cb()\n\n\n" + "\n\n\n".join(funcs).replace(
            "return x + 5", "return g(lambda: x)") + "\n\n\ndef h(cb):\n    return g(cb)\n"})
        write_tree(old, {"pkg/a.py": "\n\n\n".join(funcs).replace("return x + 5", "return g(lambda: x)")
                         + "\n\n\ndef g(cb):\n    return cb()\n\n\ndef h(cb):\n    return g(cb)\n"})
        assert main(["reuse-check", str(old), str(new), "--json", "--bindings"]) == 1
    finally:
        bind._moved = moved  # type: ignore[assignment]
    got = json.loads(capsys.readouterr().out)
    assert got["bindings_unequal"] == [{"path": "pkg/a.py", "field": "flows"}]


def test_unchanged_methods_of_a_changed_class_are_copied_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a class a checkout changed, a method whose text is unchanged has its body's facts copied
    (with the attributes it sets on the class, in order); methods whose name the class binds twice
    (a property's getter and setter) are walked. Either way the facts equal a whole extraction."""
    from ctx_lsp.index.extract import _Visitor

    methods = [f"    def m{i}(self, value):\n        self.helper(value, 'message {i} failed: %s')\n        return value + {i}"
               for i in range(8)]
    methods[1] = "    def m1(self):\n        self.a = First()\n        return self.a"
    methods[2] = "    def m2(self):\n        self.a = Second()\n        self.b = Other()"
    prop = "    @property\n    def p(self):\n        return self._p\n\n    @p.setter\n    def p(self, v):\n        self._p = make(v)"
    text = "class C(Base):\n    flag: int = 1\n\n" + "\n\n".join(methods + [prop]) + "\n"
    old = extract("m.py", text)
    replayed: list[str] = []
    original = _Visitor._replay_body

    def counting(self: _Visitor, entry: object, d: object, qual: str, *rest: object) -> None:
        replayed.append(qual)
        original(self, entry, d, qual, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(_Visitor, "_replay_body", counting)
    # m1 no longer sets `a`: the class's `a` now comes from m2, whose body was copied
    changed = text.replace("        self.a = First()\n        return self.a", "        return 1")
    got = reuse_statements(old, changed, _digest(changed))
    assert got is not None and got == extract("m.py", changed)
    assert dict(next(d for d in got.defs if d.qual == "C").attrs)["a"] == ("C.m2", ("Second()",))
    assert sorted(replayed) == ["C.m0", "C.m2", "C.m3", "C.m4", "C.m5", "C.m6", "C.m7"]
    # a method moved, a new one added, the class header changed: still equal
    replayed.clear()
    moved = changed.replace("class C(Base):", "class C(Base, Mixin):").replace(methods[5] + "\n\n", "") \
        + "\n" + methods[5] + "\n\n    def added(self):\n        self.c = Third()\n"
    got = reuse_statements(old, moved, _digest(moved))
    assert got is not None and got == extract("m.py", moved) and "C.m5" in replayed and "C.p" not in replayed


def _blanked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Spy on the walks of changed stretches: per walk (tried again after a mismatch), the first lines it
    blanked."""
    from ctx_lsp.index import splice

    seen: list[tuple[str, ...]] = []
    original = splice._walk_part

    def spying(path, is_test, lines, first, count, replay, blanks):  # type: ignore[no-untyped-def]
        seen.append(tuple(lines[s - 1].strip() for s in sorted(blanks)))
        return original(path, is_test, lines, first, count, replay, blanks)

    monkeypatch.setattr(splice, "_walk_part", spying)
    return seen


def test_unchanged_methods_are_blanked_before_the_parse_and_their_flows_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a changed class the unchanged methods are not even parsed: their bodies are blanked and
    every fact of them, flows included (stored callbacks, pending `self.x()` calls, nested defs,
    docstrings, a signature over several lines, a decorated first statement), is copied."""
    cls = '''class Registry(Base):
    """Holds callbacks."""

    def __init__(self, callback, name):
        self.callback = callback
        self.name = name

    def fire(self, *args, **kwargs):
        """Call the stored callback."""
        return self.callback(*args, **kwargs)

    def register(
        self,
        func,
    ):
        @wraps(func)
        def inner(*a):
            return func(*a)
        self.handlers.append(inner)
        return inner

    def changed(self):
        return 1
'''
    text = "import os\n\n\n" + cls + "\n\ndef tail(x):\n    return x\n"
    old = extract("m.py", text)
    seen = _blanked(monkeypatch)
    new = text.replace("        return 1", "        value = compute()\n        return self.fire(value)")
    got = reuse_statements(old, new, _digest(new))
    want = extract("m.py", new)
    assert got is not None and got == want
    assert seen == [("def __init__(self, callback, name):", "def fire(self, *args, **kwargs):",
                                 "def register(")]
    kinds = {(f[0], f[1]) for f in got.flows}
    assert ("Registry.fire", "callself") in kinds and ("Registry.register", "store") in kinds
    assert next(d for d in got.defs if d.qual == "Registry.fire").doc == "Call the stored callback."


def test_a_class_that_stores_other_attributes_walks_its_methods_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A copied method's `self.x(...)` flows were kept against the attributes its class stored then:
    when a changed method starts storing `x`, the class's methods are walked, and the call appears."""
    text = '''class Button:
    def __init__(self, label):
        self.label = label

    def click(self):
        return self.on_click()


class Other:
    def a(self):
        return self.run()

    def b(self):
        return 2
'''
    old = extract("m.py", text)
    assert not any(f[1] == "callself" for f in old.flows)  # nothing stores `on_click` yet
    seen = _blanked(monkeypatch)
    new = text.replace("        self.label = label", "        self.label = label\n        self.on_click = label") \
        .replace("        return 2", "        return 3")
    got = reuse_statements(old, new, _digest(new))
    assert got is not None and got == extract("m.py", new)
    assert ("Button.click", "callself") in {(f[0], f[1]) for f in got.flows}
    # one stretch (both classes changed): tried with both blanked, then with Other's `a` only
    assert seen == [("def click(self):", "def a(self):"), ("def a(self):",)]


def test_a_method_text_under_another_class_or_in_a_string_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a method of the class it was in is blanked, and a blanked text the parse does not find as
    that method (here: inside a string) is walked: the result still equals a whole extraction."""
    body = "    def helper(self, x):\n        return self.compute(x) + 1\n"
    text = f"class A:\n{body}\n    def other(self):\n        return 0\n"
    old = extract("m.py", text)
    seen = _blanked(monkeypatch)
    renamed = text.replace("class A:", "class B:")
    got = reuse_statements(old, renamed, _digest(renamed))
    assert got is not None and got == extract("m.py", renamed) and seen[-1] == ()
    seen.clear()
    quoted = f'class A:\n    doc = """\n{body}"""\n\n    def other(self):\n        return 1\n'
    got = reuse_statements(old, quoted, _digest(quoted))
    assert got is not None and got == extract("m.py", quoted)
    assert seen == [("def helper(self, x):",), ()]  # blanked inside the string, found out, walked whole


def test_an_edit_inside_a_class_that_spans_the_file_keeps_its_other_methods(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Splicing re-extracts whole top-level statements, and declines when that is most of the file (a
    test case class that spans it); the edit then keeps the class's unchanged methods instead of
    extracting the whole file."""
    from ctx_lsp.index import workspace

    methods = "".join(f"    def test_{i}(self):\n        self.assertEqual(helper({i}), {i})\n\n" for i in range(150))
    text = f"from pkg.util import helper\n\n\nclass BigTests:\n{methods}"
    write_tree(tmp_path / "ws", {"pkg/__init__.py": "", "pkg/util.py": "def helper(x):\n    return x\n",
                                 "pkg/test_big.py": text})
    index = WorkspaceIndex(tmp_path / "ws", cache_dir=tmp_path / "cache", workers=1)
    index.load_or_build()
    whole: list[str] = []
    extract_guarded = workspace._extract_guarded

    def counting(rel: str, text: str, digest: str | None = None):  # type: ignore[no-untyped-def]
        whole.append(rel)
        return extract_guarded(rel, text, digest)

    monkeypatch.setattr(workspace, "_extract_guarded", counting)
    edited = text.replace("        self.assertEqual(helper(30), 30)\n",
                          "        value = helper(30)\n        self.assertEqual(value, 30)\n")
    index.update_file("pkg/test_big.py", edited, overlay=True)
    assert whole == [], "built from the kept methods"
    assert index.facts["pkg/test_big.py"] == extract("pkg/test_big.py", edited, _digest(edited))
    assert index.graph.has_edge("pkg/test_big.py::BigTests.test_30", "pkg/util.py::helper")


# found by fuzzing checkouts (click's core.py after many random edits, shrunk): the class's only
# store of `max_content_width` goes; the replayed `to_info_dict` reads it in a pending flow
_STORES_BEFORE = 'from .formatting import HelpFormatter\ndef iter_params_for_processing(\n) -> list[Parameter]:\n    """Returns all declared parameters in the order they should be processed.\n    """\n    def sort_key(item: Parameter) -> tuple[bool, float]:\n        return not item.is_eager, idx\nclass ParameterSource(enum.IntEnum):\n    formatter_class: type[HelpFormatter] = HelpFormatter\n    def __init__(\n    ) -> None:\n        self.max_content_width = max_content_width\n    def to_info_dict(self) -> dict[str, t.Any]:\n        return self.formatter_class(\n            width=self.terminal_width, max_width=self.max_content_width\n        )\n        """Register a resource as if it were used in a ``with``\n        """\n        if rv is None:\n                kwargs[param] = self.params[param]\n        """Set the source of a parameter. This indicates the location\n        """\n    """Commands are the basic building block of command line interfaces in\n    """\n    def __init__(\n    ) -> None:\n        return {\n        }\n        """Writes all arguments into the formatter, if at least one is documented.\n        """\n        """Returns the left column of the option\'s help record: its spellings\n        """'


def test_a_member_replayed_after_its_class_stores_another_set_is_no_moved_group(tmp_path: Path) -> None:
    """Its flows were walked again (pending `self.x` flows hold only while the class stores x), so
    its site group must be bound again, not kept with the old flow constraint."""
    from ctx_lsp.index.workspace import WorkspaceIndex

    files: dict[str, str | bytes] = {
        "pkg/__init__.py": "",
        "pkg/formatting.py": ("class HelpFormatter:\n    def __init__(self, indent_increment=2, width=None, max_width=None):\n"
                              "        self.width = width\n        self.max_width = max_width\n"),
        "pkg/core.py": _STORES_BEFORE,
        "other.py": "x = 1\n",
    }
    root = tmp_path / "ws"
    write_tree(root, files)
    index = WorkspaceIndex(root, cache_dir=tmp_path / "c1", workers=1)
    index.load_or_build(save=False)
    assert any(f[0] == "v" and f[1][2] == "max_content_width" for f in index.bindings["pkg/core.py"].flows)
    after = _STORES_BEFORE.replace("        self.max_content_width = max_content_width\n", "        pass\n")
    (root / "pkg/core.py").write_text(after)
    old = index.facts["pkg/core.py"]
    reused = reuse_statements(old, after, content_digest(after.encode()))
    assert reused is not None and reused.moved is not None
    assert "ParameterSource.to_info_dict" not in reused.moved[1]
    index.reload_file("pkg/core.py")
    scratch = WorkspaceIndex(root, cache_dir=tmp_path / "c2", workers=1)
    scratch.load_or_build(save=False)
    got, want = index.bindings["pkg/core.py"], scratch.bindings["pkg/core.py"]
    assert (got.flows, got.groups, got.edges) == (want.flows, want.groups, want.edges)
