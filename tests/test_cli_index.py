"""CLI contract: `python -m ctx_lsp index|neighbors` output shapes (as documented in README) and errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, TESTS, write_tree

from ctx_lsp.index.model import EdgeKind

ROOT = FIXTURES / "edges"
README = TESTS.parent / "README.md"


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "ctx_lsp", *args], capture_output=True, text=True, timeout=120,
                          env=full_env, cwd=cwd or TESTS.parent)


def documented_keys(heading: str) -> list[str]:
    """The top-level keys of the JSON object documented under a README heading (first `{...}` span)."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    span = re.search(r"`(\{.*?\})`", section, re.S)
    assert span, f"no JSON shape documented under {heading}"
    shape = span.group(1)
    # keep only depth-1 keys
    depth, keys, i = 0, [], 0
    while i < len(shape):
        c = shape[i]
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        elif c == '"' and depth == 1:
            end = shape.index('"', i + 1)
            keys.append(shape[i + 1 : end])
            i = end
        i += 1
    return keys


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cli") / "cache"


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_index_json_keys_are_the_documented_ones(cache: Path) -> None:
    proc = run("index", "--json", "--cache-dir", str(cache), str(ROOT))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert list(out) == documented_keys("### `ctx-lsp index")
    assert out["root"] == str(ROOT.resolve())
    assert out["files"] == len(list(ROOT.rglob("*.py")))
    assert set(out["edges"]) == {k.value for k in EdgeKind}
    assert all(isinstance(v, int) for v in out["edges"].values())
    assert out["edges"]["CALLS"] > 0 and out["edges"]["INHERITS"] > 0
    assert set(out["resolution"]) == {"internal", "external", "unresolved"}
    assert out["unresolved_sites"] == out["resolution"]["unresolved"]
    assert out["errors"] == []
    assert isinstance(out["seconds"], float)
    # a cold build: every stage it ran is there, and they account for (most of) its time
    assert {"discover", "extract", "bind", "graph", "flow", "save"} <= set(out["phases_s"])
    assert "install" not in out["phases_s"]  # nothing was loaded from a cache
    assert 0 < sum(out["phases_s"].values()) <= out["seconds"] + 0.5
    assert (cache / "index.msgpack").is_file()
    assert not list(ROOT.rglob("*.msgpack")), "nothing is written into the workspace"


def test_index_reports_errors_as_path_and_message(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "bad.py").write_text("def f(:\n    pass\n")
    (root / "ok.py").write_text("def g():\n    pass\n")
    proc = run("index", "--json", "--cache-dir", str(tmp_path / "cache"), str(root))
    assert proc.returncode == 0, proc.stderr
    errors = json.loads(proc.stdout)["errors"]
    assert [set(e) for e in errors] == [{"path", "message"}]
    assert errors[0]["path"] == "bad.py" and "syntax error" in errors[0]["message"]


def test_index_uses_the_env_cache_dir(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "m.py").write_text("def g():\n    pass\n")
    proc = run("index", str(root), env={"CTX_LSP_CACHE_DIR": str(tmp_path / "envcache")})
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "envcache").glob("ws-*/index.msgpack"))


def test_neighbors_json_shape(cache: Path) -> None:
    proc = run("neighbors", "--json", "--root", str(ROOT), "--cache-dir", str(cache), "app/models.py::Repo.save")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert list(out) == documented_keys("### `ctx-lsp neighbors")
    assert out["target"] == "app/models.py::Repo.save"
    required = {"path", "symbol", "kind", "edge", "direction", "site", "resolver"}
    for item in out["neighbors"]:
        assert required <= set(item) <= required | {"names", "commit", "sites"}, item  # from_symbol: file targets only
        assert item["direction"] in ("in", "out")
        assert set(item["site"]) == {"path", "line"} and item["site"]["line"] >= 1
        if "sites" in item:  # every call site of a caller or callee, the first one the `site`
            assert item["edge"] in ("CALLS", "INSTANTIATES") and item["sites"][0] == item["site"]
    seen = {(i["edge"], i["direction"], i["path"], i["symbol"]) for i in out["neighbors"]}
    assert ("OVERRIDES", "out", "app/models.py", "Base.save") in seen
    assert ("CALLS", "in", "app/services.py", "Service.run_param") in seen
    assert ("CONTAINS", "in", "app/models.py", "Repo") in seen
    assert not any(i["path"] == "app/unrelated.py" for i in out["neighbors"])


def test_neighbors_of_a_symbol_lists_every_call_site_and_names_close_names(tmp_path: Path) -> None:
    """The graph keeps one CALLS edge per caller, at its first site; `neighbors` of a symbol lists every
    call site, as MCP's find_callers does. An unknown name says which names are close."""
    ws = tmp_path / "ws"
    write_tree(ws, {"pkg/__init__.py": "",
                    "pkg/m.py": "def f():\n    return 1\n\n\ndef g():\n    a = f()\n    b = f()\n    return a + b\n",
                    "pkg/n.py": "from pkg.m import f\n\n\ndef h():\n    return f() + f() + f()\n",
                    "lone.py": "def alone():\n    return 0\n"})
    base = ("--root", str(ws), "--cache-dir", str(tmp_path / "c"))
    text = run("neighbors", *base, "pkg.m.f")
    assert text.returncode == 0, text.stderr
    assert "pkg/m.py::g  (sites pkg/m.py:6, 7, ast-scope)" in text.stdout
    assert "pkg/n.py::h  (site pkg/n.py:5, ast-import)" in text.stdout  # three calls on one line: one site
    out = json.loads(run("neighbors", "--json", *base, "pkg.m.f").stdout)
    assert next(i for i in out["neighbors"] if i["symbol"] == "h")["sites"] == [{"path": "pkg/n.py", "line": 5}]
    g = next(i for i in out["neighbors"] if i["symbol"] == "g")
    assert g["site"] == {"path": "pkg/m.py", "line": 6}
    assert g["sites"] == [{"path": "pkg/m.py", "line": 6}, {"path": "pkg/m.py", "line": 7}]
    callees = json.loads(run("neighbors", "--json", *base, "pkg.m.g").stdout)["neighbors"]
    assert [i["sites"] for i in callees if i["edge"] == "CALLS"] == [[{"path": "pkg/m.py", "line": 6},
                                                                     {"path": "pkg/m.py", "line": 7}]]
    typo = run("neighbors", *base, "alonee")
    assert typo.returncode == 2 and "unknown symbol: alonee; did you mean: alone?" in typo.stderr
    lone = run("neighbors", *base, "lone.py")
    assert lone.returncode == 0 and lone.stdout.splitlines()[1].startswith("(no edges: nothing outside this file")


def test_neighbors_of_a_file_lists_imports_with_names(cache: Path) -> None:
    proc = run("neighbors", "--json", "--root", str(ROOT), "--cache-dir", str(cache), "app/sub/deep.py")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    imports = [i for i in out["neighbors"] if i["edge"] == "IMPORTS" and i["direction"] == "out"]
    assert {i["path"] for i in imports} == {"app/__init__.py", "app/models.py"}
    assert all(i["names"] for i in imports)


def test_neighbors_of_a_file_lists_each_neighbour_once_with_the_files_symbols_it_reaches(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "lib.py").write_text("def parse(x):\n    return x\n\ndef check(x):\n    return x\n")
    (ws / "app.py").write_text("from lib import check, parse\n\ndef main():\n    parse(1)\n    check(2)\n    parse(3)\n")
    common = ("--root", str(ws), "--cache-dir", str(tmp_path / "cache"))
    text = run("neighbors", *common, "lib.py")
    assert text.returncode == 0, text.stderr
    callers = text.stdout.split("CALLS <-\n", 1)[1].split("\n")
    # one line for main, naming both functions of lib.py it calls, each at its first call
    assert callers[0] == "  app.py::main [check, parse]  (sites app.py:4, 5, ast-import)", text.stdout
    assert not callers[1].startswith("  app.py::main")
    items = json.loads(run("neighbors", "--json", *common, "lib.py").stdout)["neighbors"]
    calls = sorted((i["from_symbol"], i["site"]["line"]) for i in items if i["edge"] == "CALLS")
    assert calls == [("check", 5), ("parse", 4)]
    # a symbol target: the edges are all its own, so no from_symbol
    assert all("from_symbol" not in i for i in json.loads(run("neighbors", "--json", *common, "lib.py::parse").stdout)["neighbors"])


def test_context_at_a_file_and_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    out = 0\n"
                                        "    for _ in range(b):\n        out = add(out, a)\n    return out\n")
    (ws / "pkg" / "test_calc.py").write_text("from pkg.calc import mul\n\ndef test_mul():\n    assert mul(2, 3) == 6\n")
    common = ("--root", str(ws), "--cache-dir", str(tmp_path / "cache"), "--json")
    # a line and no question: the symbol there leads, then its callers and callees
    at = json.loads(run("context", *common, "--at", "pkg/calc.py:7", env={"CTX_LSP_DAEMON": "off"}).stdout)
    assert [i["symbol"] for i in at["items"]][0] == "mul"
    assert {"test_mul", "add"} <= {i["symbol"] for i in at["items"]}
    # relative to the current directory, like any path argument
    here = run("context", *common, "--at", "calc.py:7", env={"CTX_LSP_DAEMON": "off"}, cwd=ws / "pkg")
    assert json.loads(here.stdout)["items"] == at["items"]
    # with a question: the cursor is a generator beside the words
    asked = json.loads(run("context", *common, "--at", "pkg/calc.py:7", "why is this slow", env={"CTX_LSP_DAEMON": "off"}).stdout)
    assert any(r["via"] == "cursor" for i in asked["items"] if i["symbol"] == "mul" for r in i["reasons"])
    missing = run("context", *common, "--at", "pkg/nope.py:3", "x", env={"CTX_LSP_DAEMON": "off"}, cwd=ws)
    assert one_line_error(missing) == "ctx-lsp: error: no such file under the workspace root or the current directory: pkg/nope.py"
    (ws / "pkg" / "notes.txt").write_text("x\n")
    unindexed = run("context", *common, "--at", "pkg/notes.txt:1", "x", env={"CTX_LSP_DAEMON": "off"}, cwd=ws)
    assert one_line_error(unindexed) == "ctx-lsp: error: file not in the index: pkg/notes.txt"
    # a LINE that is not one is said so in one line (argparse's usage block is --help's)
    assert "line numbers start at 1" in one_line_error(run("context", *common, "--at", "pkg/calc.py:0", "x"))
    for bad in ("-3", "abc"):
        assert f"not a line number: '{bad}'" in one_line_error(run("context", *common, "--at", f"pkg/calc.py:{bad}", "x"))
    assert "invalid int value: 'abc'" in one_line_error(run("context", *common, "--budget", "abc", "x"))
    # a dotted module name as imports write it is its file; a mistyped path run from elsewhere is missing
    nb = run("neighbors", *common, "pkg.calc", env={"CTX_LSP_DAEMON": "off"})
    assert nb.returncode == 0 and json.loads(nb.stdout)["target"] == "pkg/calc.py", nb.stderr
    typo = run("neighbors", "--root", str(ws), "--cache-dir", str(tmp_path / "cache"), "pkg/calcc.py", cwd=tmp_path)
    assert one_line_error(typo) == "ctx-lsp: error: no such file under the workspace root or the current directory: pkg/calcc.py"


def test_unknown_target_fails_with_one_line(cache: Path) -> None:
    proc = run("neighbors", "--root", str(ROOT), "--cache-dir", str(cache), "NoSuchSymbolAnywhere")
    line = one_line_error(proc)
    assert "NoSuchSymbolAnywhere" in line


def test_missing_root_fails_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "does-not-exist"
    line = one_line_error(run("index", "--cache-dir", str(tmp_path / "cache"), str(missing)))
    assert "does-not-exist" in line
    line = one_line_error(run("neighbors", "--root", str(missing), "--cache-dir", str(tmp_path / "c"), "x.py"))
    assert "does-not-exist" in line
    assert not (tmp_path / "cache").exists() and not (tmp_path / "c").exists()


def test_path_outside_root_fails_with_one_line(cache: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.py"
    outside.write_text("def f():\n    pass\n")
    line = one_line_error(run("neighbors", "--root", str(ROOT), "--cache-dir", str(cache), str(outside)))
    assert "outside" in line


def test_without_a_root_a_command_in_a_subdirectory_reads_the_whole_project(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "src" / "pkg").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (proj / "src" / "pkg" / "a.py").write_text("def helper():\n    return 1\n")
    (proj / "scripts").mkdir()
    (proj / "scripts" / "use.py").write_text("from pkg.a import helper\n\nhelper()\n")
    got = json.loads(run("index", "--json", "--cache-dir", str(tmp_path / "cache"), cwd=proj / "src" / "pkg").stdout)
    assert got["root"] == str(proj.resolve()) and got["files"] == 2
    # a ROOT given is taken as it is
    got = json.loads(run("index", "--json", "--cache-dir", str(tmp_path / "c2"), ".", cwd=proj / "src" / "pkg").stdout)
    assert got["root"] == str((proj / "src" / "pkg").resolve()) and got["files"] == 1


def test_the_project_root_is_never_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ctx_lsp.workspace_args import project_root

    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)  # a dotfiles repository
    (home / "notes" / "deep").mkdir(parents=True)
    (home / "code" / "proj" / ".git").mkdir(parents=True)
    (home / "code" / "proj" / "sub").mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert project_root(home / "notes" / "deep") == (home / "notes" / "deep").resolve()
    assert project_root(home) == home.resolve()
    assert project_root(home / "code" / "proj" / "sub") == (home / "code" / "proj").resolve()


def small_workspace(tmp_path: Path, files: dict[str, str]) -> tuple[Path, tuple[str, ...]]:
    """`files` written under tmp_path/ws, and the `--root`/`--cache-dir` arguments for it."""
    ws = tmp_path / "ws"
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    return ws, ("--root", str(ws), "--cache-dir", str(tmp_path / "cache"))


def test_a_name_two_files_define_is_answered_for_one_with_a_note_naming_the_other(tmp_path: Path) -> None:
    ws, common = small_workspace(tmp_path, {"pkg/a.py": "def g():\n    return 1\n\ndef f():\n    return g()\n",
                                            "pkg/b.py": "def g():\n    return 2\n"})
    p = run("neighbors", *common, "g")
    assert p.returncode == 0 and p.stdout.splitlines()[0] == "pkg/a.py::g"
    assert p.stderr.strip() == "ctx-lsp: note: g also names pkg/b.py::g; give PATH::NAME to choose"
    chosen = run("neighbors", "--json", *common, "pkg/b.py::g")
    assert json.loads(chosen.stdout)["target"] == "pkg/b.py::g" and chosen.stderr == ""
    assert run("neighbors", *common, "f").stderr == ""  # one f: nothing to say
    # a method name unrelated classes define (no class overrides another's): the note names the others
    (ws / "pkg" / "mw.py").write_text("class A:\n    def handle(self):\n        pass\n\n\n"
                                      "class B:\n    def handle(self):\n        pass\n")
    p = run("neighbors", *common, "handle")
    assert p.returncode == 0 and p.stdout.splitlines()[0] == "pkg/mw.py::A.handle"
    assert p.stderr.strip() == "ctx-lsp: note: handle also names pkg/mw.py::B.handle; give PATH::NAME to choose"


def test_a_workspace_path_that_is_not_utf8_gets_its_cache_and_answers(tmp_path: Path) -> None:
    """A root directory named in Latin-1 (a surrogate escape in Python) keys its default cache by the
    path's bytes instead of failing to encode it."""
    root = tmp_path / os.fsdecode(b"r\xe9sum\xe9")
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text("def helper():\n    return 1\n\n\ndef main():\n    return helper()\n")
    env = {"CTX_LSP_CACHE_DIR": str(tmp_path / "caches")}
    p = run("neighbors", "--root", os.fsdecode(root), "helper", env=env)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert "pkg/a.py::main" in p.stdout
    (made,) = (tmp_path / "caches").iterdir()
    assert made.name.startswith("r\ufffdsum\ufffd-")  # printable wherever it is shown


def test_a_workspace_without_python_and_a_target_that_is_no_python_file_say_so(tmp_path: Path) -> None:
    ws = tmp_path / "docs-only"
    ws.mkdir()
    (ws / "README.md").write_text("# notes\n")
    common = ("--root", str(ws), "--cache-dir", str(tmp_path / "cache"))
    p = run("context", *common, "who calls main")
    assert p.returncode == 0 and "No matching code found" in p.stdout
    assert p.stderr.strip() == f"ctx-lsp: note: no Python files are indexed under {ws.resolve()}"
    note = f"ctx-lsp: note: no Python files are indexed under {ws.resolve()}"
    for target, error in (("README.md", "not an indexed Python file: README.md"), ("no.such", "unknown symbol: no.such")):
        p = run("neighbors", *common, target)
        assert p.returncode == 2 and p.stderr.splitlines() == [note, f"ctx-lsp: error: {error}"], p.stderr


def test_a_cache_directory_the_file_system_refuses_and_two_roots_fail_with_one_line(tmp_path: Path) -> None:
    """Before any work: not after indexing, with a traceback from the cache write and exit status 0."""
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "a.py").write_text("def f():\n    return 1\n")
    a_file = tmp_path / "afile.py"
    a_file.write_text("x = 1\n")
    for cache, message in ((a_file, f"the cache directory is not a directory: {a_file}"),
                           (a_file / "sub", f"cannot use the cache directory {a_file / 'sub'}: Not a directory")):
        for cmd in (("index",), ("context", "what does f return"), ("neighbors", "f")):
            p = run(cmd[0], "--root", str(ws), "--cache-dir", str(cache), *cmd[1:])
            assert p.returncode == 2 and one_line_error(p) == f"ctx-lsp: error: {message}", (cmd, p.stderr)
    assert a_file.read_text() == "x = 1\n"
    other = tmp_path / "other"
    other.mkdir()
    p = run("index", str(ws), "--root", str(other), "--cache-dir", str(tmp_path / "c"))
    assert one_line_error(p) == f"ctx-lsp: error: two roots given ({ws} and --root {other}): give one"
    assert run("index", str(ws), "--root", str(ws), "--cache-dir", str(tmp_path / "c")).returncode == 0  # the same one twice


def test_neighbors_of_a_directory_says_so_and_of_a_path_and_line_answers_for_the_symbol_there(tmp_path: Path) -> None:
    ws, common = small_workspace(tmp_path, {
        "pkg/__init__.py": "", "docs/index.md": "# docs\n",
        "pkg/a.py": "import os\n\n\ndef helper():\n    return 1\n\n\ndef main():\n    return helper()\n"})
    for target in ("docs", "docs/", "pkg/"):
        p = run("neighbors", *common, target)
        assert one_line_error(p) == f"ctx-lsp: error: {target} is a directory; pass a Python file inside it"
    assert run("neighbors", *common, "pkg").stdout.splitlines()[0] == "pkg/__init__.py"  # a package: its module
    assert run("neighbors", *common, "pkg/a.py:9").stdout.splitlines()[0] == "pkg/a.py::main"
    assert run("neighbors", *common, "pkg/a.py:1").stdout.splitlines()[0] == "pkg/a.py"  # module level: the file
    for line in ("0", "10", "-2"):
        assert one_line_error(run("neighbors", *common, f"pkg/a.py:{line}")) == f"ctx-lsp: error: pkg/a.py has no line {line}"


def test_index_says_whether_anything_changed_since_the_cache(tmp_path: Path) -> None:
    ws, common = small_workspace(tmp_path, {"pkg/a.py": "def f():\n    return 1\n",
                                            "pkg/b.py": "from pkg.a import f\n\n\ndef g():\n    return f()\n"})
    assert re.fullmatch(r"indexed 2 files in [\d.]+ s\n", run("index", *common).stderr)
    assert re.fullmatch(r"up to date: 2 files, none changed \([\d.]+ s\)\n", run("index", *common).stderr)
    (ws / "pkg" / "a.py").write_text("def f(x=1):\n    return x\n")
    assert re.fullmatch(r"indexed 2 files: 1 changed, 2 re-bound \([\d.]+ s\)\n", run("index", *common).stderr)
    (ws / "pkg" / "b.py").unlink()
    assert re.fullmatch(r"indexed 1 file: 1 changed, 0 re-bound \([\d.]+ s\)\n", run("index", *common).stderr)


def test_index_says_when_a_checkout_back_took_bindings_back(tmp_path: Path) -> None:
    """A checkout and back (ten files each way): the second update binds nothing and says so."""
    a = {f"pkg/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(10)}
    a["pkg/use.py"] = "from pkg.m0 import f0\n\n\ndef g():\n    return f0()\n"
    ws, common = small_workspace(tmp_path, a)
    run("index", *common)
    for i in range(10):
        (ws / f"pkg/m{i}.py").write_text(f"def f{i}(x=1):\n    return x + {i}\n")
    out = run("index", *common).stderr
    assert re.fullmatch(r"indexed 11 files: 10 changed, 11 re-bound \([\d.]+ s\)\n", out), out
    for i in range(10):
        (ws / f"pkg/m{i}.py").write_text(a[f"pkg/m{i}.py"])
    out = run("index", *common).stderr
    assert re.fullmatch(r"indexed 11 files: 10 changed, 0 re-bound, 11 as before the last checkout "
                        r"\([\d.]+ s\)\n", out), out


def test_index_tells_files_the_filters_moved_from_changes_on_disk(tmp_path: Path) -> None:
    """Switching `--exclude` on one cache is no change on disk: the files it leaves out or lets back
    in are counted as the filters', and a file edited meanwhile still as changed."""
    ws, common = small_workspace(tmp_path, {"pkg/a.py": "def f():\n    return 1\n",
                                            "examples/demo.py": "from pkg.a import f\n\nf()\n",
                                            "examples/more.py": "x = 1\n"})
    assert re.fullmatch(r"indexed 3 files in [\d.]+ s\n", run("index", *common).stderr)
    out = run("index", *common, "--exclude", "examples/").stderr
    assert re.fullmatch(r"indexed 1 file: the filters changed \(2 left out\), 0 changed on disk, 0 re-bound "
                        r"\([\d.]+ s\)\n", out), out
    (ws / "pkg" / "a.py").write_text("def f(x=1):\n    return x\n")
    out = run("index", *common).stderr
    assert re.fullmatch(r"indexed 3 files: the filters changed \(2 let in\), 1 changed on disk, 3 re-bound "
                        r"\([\d.]+ s\)\n", out), out
    (ws / "examples" / "more.py").unlink()  # gone from the disk: a change, not the filters'
    out = run("index", *common).stderr
    assert re.fullmatch(r"indexed 2 files: 1 changed, 0 re-bound \([\d.]+ s\)\n", out), out
