"""An edit re-extracts only the top-level statements it touched (index/splice.py): the spliced facts
equal a whole extraction of the new text, field for field, on real files (this project's sources and
the standard library's), for edits an editor makes and for edits that make statements depend on each
other (which splice must decline)."""

from __future__ import annotations

import ast
import random
import sysconfig
from pathlib import Path

import pytest

from ctx_lsp.index.extract import extract
from ctx_lsp.index.facts import content_digest, split_lines
from ctx_lsp.index.splice import splice
from ctx_lsp.index.workspace import WorkspaceIndex

ROOT = Path(__file__).resolve().parent.parent
STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = sorted((ROOT / "ctx_lsp").rglob("*.py"))[::3] + [
    STDLIB / n for n in ("argparse.py", "dataclasses.py", "typing.py", "inspect.py", "ast.py", "functools.py",
                         "tarfile.py", "unittest/mock.py", "email/_header_value_parser.py", "asyncio/base_events.py")
    if (STDLIB / n).exists()]


def _body_lines(tree: ast.Module) -> list[tuple[int, int]]:
    """(line, indent) of statements inside top-level defs and classes."""
    out = []
    for top in tree.body:
        if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for node in ast.walk(top):
                if isinstance(node, ast.stmt) and node is not top and node.end_lineno == node.lineno:
                    out.append((node.lineno, node.col_offset))
    return out


def _edits(text: str, rng: random.Random) -> list[tuple[str, str]]:
    """(kind, new text) edits of one file."""
    lines = split_lines(text)
    tree = ast.parse(text)
    body = _body_lines(tree)
    tops = [t for t in tree.body if isinstance(t, (ast.FunctionDef, ast.ClassDef))]
    out: list[tuple[str, str]] = []
    for _ in range(4):
        if body:
            line, indent = rng.choice(body)
            ins = lines[: line] + [" " * indent + "probe_value = helper_probe(self, 'a message with words')"] + lines[line:]
            out.append(("insert-in-body", "\n".join(ins) + "\n"))
            rep = list(lines)
            rep[line - 1] = rep[line - 1] + "  # edited"
            out.append(("same-line-count", "\n".join(rep) + "\n"))
            deleted = lines[: line - 1] + [" " * indent + "pass"] + lines[line:]
            out.append(("replace-line", "\n".join(deleted) + "\n"))
    out.append(("append-def", text.rstrip("\n") + "\n\n\ndef _probe_appended(value):\n    return value\n"))
    if tops:
        top = rng.choice(tops)
        renamed = list(lines)
        renamed[top.lineno - 1] = renamed[top.lineno - 1].replace(top.name, top.name + "_renamed", 1)
        out.append(("rename-top", "\n".join(renamed) + "\n"))
        end = top.end_lineno or top.lineno
        dup = lines[:end] + [""] + lines[top.lineno - 1 : end] + lines[end:]  # the same name defined twice
        out.append(("duplicate-top", "\n".join(dup) + "\n"))
        out.append(("delete-top", "\n".join(lines[: top.lineno - 1] + lines[end:]) + "\n"))
        decorated = lines[: top.lineno - 1] + ["@probe_decorator(1, key=value)"] + lines[top.lineno - 1 :]
        out.append(("decorate-top", "\n".join(decorated) + "\n"))
    out.append(("all", text.rstrip("\n") + "\n__all__ = ['a', 'b']\n"))
    out.append(("docstring-first", '"""A new module docstring."""\n' + text))
    out.append(("import-first", "import probe_module\n" + text))
    out.append(("broken", text.rstrip("\n") + "\ndef broken(:\n"))
    cut = rng.randrange(1, max(2, len(lines)))
    out.append(("cut-lines", "\n".join(lines[:cut] + lines[cut + 3 :]) + "\n"))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_spliced_facts_equal_a_whole_extraction(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    rel = path.name
    old = extract(rel, text)
    assert old.tops, "a file that parses records its statements"
    rng = random.Random(path.name)
    spliced: dict[str, int] = {}
    for kind, new_text in _edits(text, rng):
        digest = content_digest(new_text.encode("utf-8", "surrogatepass"))
        got = splice(old, text, new_text, digest)
        if got is None:
            continue
        spliced[kind] = spliced.get(kind, 0) + 1
        assert got == extract(rel, new_text, digest), kind
    assert spliced.get("append-def") == 1  # an appended def is spliced, not re-extracted
    assert "broken" not in spliced


def test_most_edits_inside_functions_are_spliced() -> None:
    done = tried = 0
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        old = extract(path.name, text)
        for kind, new_text in _edits(text, random.Random(path.name)):
            if kind in ("insert-in-body", "same-line-count"):
                tried += 1
                done += splice(old, text, new_text, content_digest(new_text.encode("utf-8", "surrogatepass"))) is not None
    # edits inside a class holding most of its file are extracted whole (no cheaper spliced)
    assert tried > 50 and done >= tried // 2


def test_statements_that_depend_on_each_other_are_not_spliced() -> None:
    text = "def f():\n    return 1\n\n\ndef g():\n    return f()\n"
    old = extract("m.py", text)
    # a second `f`: the first definition wins, so the two statements' facts depend on each other
    twice = text + "\n\ndef f():\n    return 2\n"
    assert splice(old, text, twice, content_digest(twice.encode())) is None
    # a module docstring, a whole-file value, changes when a string becomes the first statement
    doc = '"""Doc."""\n' + text
    assert splice(old, text, doc, content_digest(doc.encode())) is None
    # an edit inside g is spliced, and its lines are the new ones
    edited = text.replace("    return f()", "    x = f()\n    return x")
    got = splice(old, text, edited, content_digest(edited.encode()))
    assert got is not None and got == extract("m.py", edited)
    assert [d.qual for d in got.defs] == ["f", "g"] and [t[:3] for t in got.tops or []] == [(1, 2, ("f",)), (5, 7, ("g",))]


@pytest.mark.parametrize(("text", "between"), [
    # an `@overload` implementation takes its stub's def (out of line order)
    ("from typing import overload\n\n\n@overload\ndef f(x: int) -> int: ...\n\n\ndef f(x):\n    return x\n",
     "\n\ndef f(x):\n"),
    # a module-level `@f.setter` extends `f`'s def to its own last line
    ("@property\ndef f(self):\n    return 1\n\n\n@f.setter\ndef f(self, v):\n    pass\n", "\n\n@f.setter\n"),
])
@pytest.mark.parametrize("inserted", ["# a comment\n", "def g():\n    pass\n\n\n", "x = 1\n\n\n"])
def test_an_edit_between_two_statements_of_one_def_gives_a_whole_extraction(text: str, between: str,
                                                                              inserted: str) -> None:
    """Two top-level statements can make one def (an overload's implementation, a property's setter);
    an edit between them is extracted as a whole extraction gives it (found by fuzzing editor edits)."""
    edited = text.replace(between, "\n\n" + inserted + between.lstrip("\n"), 1)
    assert edited != text
    got = splice(extract("m.py", text), text, edited, content_digest(edited.encode()))
    assert got is None or got == extract("m.py", edited, content_digest(edited.encode()))


def test_an_index_edit_splices_and_equals_a_scratch_build(tmp_path: Path) -> None:
    src = tmp_path / "pkg"
    src.mkdir()
    (src / "__init__.py").write_text("")
    big = "\n\n".join(f"def f{i}(x):\n    return g{i}(x) + {i}\n\n\ndef g{i}(y):\n    return y" for i in range(60))
    (src / "mod.py").write_text(big + "\n")
    (src / "use.py").write_text("from pkg.mod import f3\n\n\ndef run():\n    return f3(1)\n")
    index = WorkspaceIndex(tmp_path, cache_dir=tmp_path / ".cache")
    index.load_or_build(save=False)
    calls: list[int] = []
    original = splice

    def counting(*args: object) -> object:
        out = original(*args)  # type: ignore[arg-type]
        calls.append(out is not None)
        return out

    import ctx_lsp.index.workspace as ws_mod

    ws_mod.splice = counting  # type: ignore[assignment]
    try:
        edited = big.replace("    return g3(x) + 3", "    y = g4(x)\n    return g3(y) + 3") + "\n"
        index.update_file("pkg/mod.py", edited, overlay=True)
        again = edited.replace("    return y\n\ndef f10", "    return y * 2\n\ndef f10")
        index.update_file("pkg/mod.py", again, overlay=True)  # from the editor buffer this time
    finally:
        ws_mod.splice = original  # type: ignore[assignment]
    assert calls == [True, True]
    (src / "mod.py").write_text(again)
    scratch = WorkspaceIndex(tmp_path, cache_dir=tmp_path / ".cache2")
    scratch.load_or_build(save=False)
    assert index.facts["pkg/mod.py"] == scratch.facts["pkg/mod.py"]
    assert sorted(index.graph.edges()) == sorted(scratch.graph.edges())
