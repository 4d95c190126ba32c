"""jedi refinement: edges for sites the static pass leaves open, externals kept out, per-digest caching."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from ctx_lsp.index.model import RESOLVER_JEDI
from ctx_lsp.index.refine import STATE_KEY, Refiner, _Resolution
from ctx_lsp.index.workspace import WorkspaceIndex

REPO = '''\
class Repo:
    def save(self):
        return 1


class Holder:
    def get_fn(self):
        return len


holder = Holder()


def dumps(x):
    """A project function that shares its name with json.dumps."""
    return str(x)
'''

USE = '''\
import json

from pkg.repo import Repo, holder


def pick():
    return {"a": Repo()}["a"]


def run2(x):
    r = pick()
    r.save()
    codec = {"j": json}["j"]
    return codec.dumps(x)


def call_of_call():
    return holder.get_fn()([1])
'''

BROKEN = "def broken(:\n    x = (1,\n    r.save(\n\x00\ufeff weird ( text\n"


def make_ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "repo.py").write_text(REPO)
    (root / "pkg" / "use.py").write_text(USE)
    (root / "pkg" / "broken.py").write_text(BROKEN)
    return root


def position(text: str, needle: str, name: str) -> tuple[int, int]:
    """1-based line and 0-based column of `name` inside the first line containing `needle`."""
    for i, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return i, line.index(needle) + needle.index(name)
    raise AssertionError(needle)


def jedi_edges(index: WorkspaceIndex) -> list:
    return [e for e in index.graph.edges() if e.resolver == RESOLVER_JEDI]


@pytest.fixture()
def ws(tmp_path: Path) -> tuple[Path, Path]:
    return make_ws(tmp_path), tmp_path / "cache"


def open_files(root: Path, files: dict[str, str], cache: Path) -> WorkspaceIndex:
    """Write `files` under `root` and index them."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return open_index(root, cache)


def open_index(root: Path, cache: Path) -> WorkspaceIndex:
    index = WorkspaceIndex(root, cache_dir=cache)
    index.load_or_build()
    return index


def test_jedi_resolves_a_site_the_static_pass_left_open(ws: tuple[Path, Path]) -> None:
    root, cache = ws
    index = open_index(root, cache)
    line, col = position(USE, "r.save()", "save")
    facts = index.facts["pkg/use.py"]
    open_sites = [facts.sites[i] for i in index.bindings["pkg/use.py"].unresolved]
    assert any(s.line == line and s.col == col for s in open_sites), "precondition: static pass cannot bind r.save()"
    assert index.graph.in_edges("pkg/repo.py::Repo.save", ["CALLS"]) == []

    status = Refiner(index).run()

    edges = [e for e in jedi_edges(index) if e.dst == "pkg/repo.py::Repo.save"]
    assert len(edges) == 1
    e = edges[0]
    assert (e.src, e.kind, e.path, e.line, e.col) == ("pkg/use.py::run2", "CALLS", "pkg/use.py", line, col)
    assert e in index.graph.in_edges("pkg/repo.py::Repo.save", ["CALLS"])
    assert status["done"] == status["total"] > 0
    assert status["added_edges"] >= 1 and status["internal"] >= 1
    assert status["errors"] == 0 and status["file_errors"] == 0


def test_external_target_never_maps_to_a_same_named_project_symbol(ws: tuple[Path, Path]) -> None:
    root, cache = ws
    index = open_index(root, cache)
    line, col = position(USE, "codec.dumps(x)", "dumps")
    assert any(index.facts["pkg/use.py"].sites[i].line == line for i in index.bindings["pkg/use.py"].unresolved)
    status = Refiner(index).run()
    assert status["external"] >= 1  # jedi followed codec to the json module
    assert index.graph.in_edges("pkg/repo.py::dumps", ["CALLS", "REFERENCES"]) == []
    assert not any(e.line == line for e in jedi_edges(index))


def test_cross_check_confirms_static_bindings(ws: tuple[Path, Path]) -> None:
    root, cache = ws
    index = open_index(root, cache)
    status = Refiner(index, sample_per_file=50).run()
    # Repo(), pick(), holder.get_fn() (a call of a call: its site column is the expression start)
    assert status["sampled"] >= 3
    assert status["confirmed"] == status["sampled"]
    assert status["contradicted"] == 0 and status["contradiction_examples"] == []


def test_cache_avoids_running_jedi_again_in_process_and_after_restart(ws: tuple[Path, Path]) -> None:
    root, cache = ws
    index = open_index(root, cache)
    refiner = Refiner(index)
    first = refiner.run()
    assert first["goto_calls"] > 0
    again = refiner.run()
    assert again["goto_calls"] == first["goto_calls"]  # nothing resolved twice
    assert again["last_run"]["files"] == 0

    restarted = open_index(root, cache)  # warm start from the persisted cache
    assert restarted.extra_state[STATE_KEY]["files"], "jedi results were persisted"
    fresh = Refiner(restarted)
    assert {(e.src, e.dst) for e in jedi_edges(restarted)} == {(e.src, e.dst) for e in jedi_edges(index)}
    status = fresh.run()
    assert status["goto_calls"] == 0
    assert status["done"] == status["total"] == first["total"]
    assert status["added_edges"] == first["added_edges"]


def test_under_the_server_the_refinement_write_is_left_to_it(ws: tuple[Path, Path]) -> None:
    """With `defer_save` (the language server) a run leaves its cache write pending for the owner, who
    writes when requests pause; its results are in that write."""
    root, cache = ws
    index = open_index(root, cache)
    index.defer_save = True
    Refiner(index).run()
    assert index.pending_save
    assert not open_index(root, cache).extra_state.get(STATE_KEY, {}).get("files")  # not written yet
    index.save_pending()
    index.wait_saved()
    assert not index.pending_save and open_index(root, cache).extra_state[STATE_KEY]["files"]


def test_a_changed_file_is_dropped_and_resolved_again(ws: tuple[Path, Path]) -> None:
    root, cache = ws
    index = open_index(root, cache)
    refiner = Refiner(index)
    first = refiner.run()
    assert any(e.dst == "pkg/repo.py::Repo.save" for e in jedi_edges(index))

    (root / "pkg" / "use.py").write_text("# moved down\n" + USE)  # saved, then reported by the editor
    index.update_file("pkg/use.py", "# moved down\n" + USE)
    assert not any(e.path == "pkg/use.py" for e in jedi_edges(index))  # the listener dropped them
    assert refiner.status()["done"] < refiner.status()["total"]

    second = refiner.run()
    assert second["goto_calls"] > first["goto_calls"]
    line, col = position(USE, "r.save()", "save")
    moved = [e for e in jedi_edges(index) if e.dst == "pkg/repo.py::Repo.save"]
    assert [(e.line, e.col) for e in moved] == [(line + 1, col)]
    refiner.detach()
    assert refiner._on_change not in index.listeners


def test_stop_and_lock_and_unreadable_sources(ws: tuple[Path, Path]) -> None:
    root, cache = ws
    index = open_index(root, cache)
    lock = threading.RLock()
    refiner = Refiner(index, lock=lock)
    stopped = refiner.run(should_stop=lambda: True)
    assert stopped["last_run"]["stopped"] == "cancelled"
    assert stopped["done"] == 0 and stopped["goto_calls"] == 0

    # an editor buffer the refiner cannot see: its facts do not match the disk, so it is left for later
    index.update_file("pkg/use.py", USE + "\n\ndef extra():\n    pass\n", overlay=True)
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(refiner.run(lock=lock)))
    worker.start()
    worker.join(120)
    assert result and result["files_stale"] >= 1
    assert result["done"] == result["total"] - 1

    # given the buffer text, it is resolved
    buffers = {"pkg/use.py": USE + "\n\ndef extra():\n    pass\n"}
    with_buffers = Refiner(index, sources=buffers.get)
    status = with_buffers.run()
    assert status["done"] == status["total"]
    assert any(e.dst == "pkg/repo.py::Repo.save" for e in jedi_edges(index))


def test_nothing_is_written_outside_the_cache_dir(ws: tuple[Path, Path]) -> None:
    root, cache = ws
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    index = open_index(root, cache)
    Refiner(index).run()
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
    assert (cache / "jedi").is_dir()  # jedi's parse pickles went into our cache directory


def test_alias_and_bundled_stub_of_the_workspace_package(tmp_path: Path) -> None:
    """`register = registry.register` counts as confirmed; jedi's bundled django-stubs map back to the workspace."""
    root = tmp_path / "ws"
    files = {
        "pkg/__init__.py": "",
        "pkg/registry.py": "class Registry:\n    def register(self, f):\n        return f\n\n\n"
                           "registry = Registry()\nregister = registry.register\n",
        "pkg/use.py": "from pkg import registry as checks\n\n\ndef g():\n    pass\n\n\ncheks = checks.register(g)\n",
        "django/__init__.py": "",
        "django/core/__init__.py": "",
        "django/core/files/__init__.py": "",
        "django/core/files/base.py": "class File:\n    def open(self, mode=None):\n        return self\n",
        "django/core/files/images.py": "from django.core.files.base import File\n\n\n"
                                       "def first(x):\n    y = {\"a\": File(x)}[\"a\"]\n    return y.open()\n",
    }
    index = open_files(root, files, tmp_path / "cache")
    refiner = Refiner(index, sample_per_file=50)
    status = refiner.run()
    assert status["contradicted"] == 0 and status["confirmed"] == status["sampled"] > 0
    # jedi may stop at the alias variable; the static target is its value, so that is a confirmation
    res = _Resolution()
    res.targets["pkg/registry.py::register"] = next(d for d in index.facts["pkg/registry.py"].defs if d.qual == "register")
    assert refiner._alias_of(res, "pkg/registry.py::Registry.register")
    assert not refiner._alias_of(res, "pkg/use.py::g")
    # jedi answers with its bundled django-stubs for the real django: mapped by full name, never external
    stub = SimpleNamespace(module_path=Path("/site/jedi/third_party/django-stubs/django-stubs/core/files/base.pyi"),
                           full_name="django.core.files.base.File.open", line=30, name="open", type="function",
                           in_builtin_module=lambda: False)
    res = _Resolution()
    refiner._map(stub, res)
    assert list(res.targets) == ["django/core/files/base.py::File.open"] and not res.external
    stdlib = SimpleNamespace(module_path=Path("/site/jedi/third_party/typeshed/stdlib/json/__init__.pyi"),
                             full_name="json.dumps", line=1, name="dumps", type="function",
                             in_builtin_module=lambda: False)
    res = _Resolution()
    refiner._map(stdlib, res)
    assert res.external and not res.targets
    line, col = position(files["django/core/files/images.py"], "y.open()", "open")
    edges = [e for e in jedi_edges(index) if e.path == "django/core/files/images.py"]
    assert [(e.dst, e.line, e.col) for e in edges] == [("django/core/files/base.py::File.open", line, col)]


def test_a_decorator_factory_application_is_confirmed_not_contradicted(tmp_path: Path) -> None:
    """`@reg.route("/")` CALLS the nested def route returns; jedi names route itself there: that
    confirms the static edge, and the application site is never handed to jedi as unresolved."""
    root = tmp_path / "ws"
    files = {
        "pkg/__init__.py": "",
        "pkg/app.py": "class App:\n    def route(self, rule):\n        def decorator(f):\n            return f\n"
                      "        return decorator\n",
        "pkg/views.py": "from pkg.app import App\n\n\ndef build(app: App):\n    @app.route('/')\n    def index():\n"
                        "        return 1\n\n    return index\n",
        "pkg/deco.py": "def traced(fn):\n    def wrapper():\n        return fn()\n    return wrapper\n\n\n"
                       "@traced\ndef work():\n    return 1\n\n\ndef run():\n    return work()\n",
    }
    index = open_files(root, files, tmp_path / "cache")
    edges = {(e.src, e.dst) for e in index.graph.edges() if e.kind == "CALLS"}
    assert ("pkg/views.py::build", "pkg/app.py::App.route.decorator") in edges
    assert ("pkg/deco.py::run", "pkg/deco.py::traced.wrapper") in edges
    status = Refiner(index, sample_per_file=50).run()
    assert status["sampled"] >= 4  # route and route.decorator, from build and from index; work and its wrapper
    assert status["contradicted"] == 0 and status["confirmed"] == status["sampled"]


def test_a_files_jedi_edges_do_not_depend_on_who_calls_it(tmp_path: Path) -> None:
    """`make(cls)` calls its parameter: what it instantiates depends on its callers elsewhere. jedi's
    dynamic parameter inference would guess it from them (and the per-file cache would never notice a
    new caller); refinement answers from the file and what it imports only, the same on every run."""
    import jedi

    root = tmp_path / "ws"
    files = {
        "pkg/__init__.py": "",
        "pkg/maker.py": "def make(cls):\n    return cls()\n",
        "pkg/kinds.py": "class Small:\n    pass\n\n\nclass Large:\n    pass\n",
        "pkg/use.py": "from pkg.kinds import Small, Large\nfrom pkg.maker import make\n\n\n"
                      "def a():\n    return make(Small)\n\n\ndef b():\n    return make(Large)\n",
    }
    index = open_files(root, files, tmp_path / "cache")
    before = jedi.settings.dynamic_params
    Refiner(index).run()
    assert jedi.settings.dynamic_params == before  # the process's jedi settings are put back
    assert [e for e in jedi_edges(index) if e.src == "pkg/maker.py::make"] == []


def test_any_process_opening_a_refined_cache_has_its_jedi_edges_and_a_warm_start_drops_those_it_re_bound(
        ws: tuple[Path, Path]) -> None:
    """`ctx-lsp index --refine` (or the server) wrote jedi results: a later `neighbors` or `context`
    on that cache answers with them, as the server does, without running jedi. A file the warm start
    re-binds because a file it imports changed keeps its digest, yet loses them until refined again."""
    from ctx_lsp.engine import Engine
    from ctx_lsp.index.refine import refine_index

    root, cache = ws
    engine = Engine(root, cache_dir=cache)
    engine.open()
    refine_index(engine.index)
    engine.index.save()
    refined = {(e.src, e.dst) for e in jedi_edges(engine.index)}
    assert any(src.startswith("pkg/use.py::") for src, _ in refined)
    plain = Engine(root, cache_dir=cache)  # a one-shot process: no refinement runs
    plain.open()
    assert {(e.src, e.dst) for e in jedi_edges(plain.index)} == refined
    # pkg/repo.py's interface changes on disk: pkg/use.py is re-bound by the warm start
    (root / "pkg" / "repo.py").write_text(REPO.replace("class Holder:", "class Holder(object):"))
    later = Engine(root, cache_dir=cache)
    later.open()
    assert "pkg/use.py" in (later.index.loaded_update or ((), ()))[1]
    assert not any(e.src.startswith("pkg/use.py::") for e in jedi_edges(later.index))


def test_jedi_stopping_at_the_variable_that_holds_a_callable_instance_is_no_contradiction(tmp_path: Path) -> None:
    """`local = Local(); local("app")` runs `Local.__call__` (the static edge); jedi's goto names the
    variable `local`, which is not a call target: no verdict, not a contradiction."""
    root = tmp_path / "ws"
    files = {
        "pkg/__init__.py": "",
        "pkg/local.py": "class Local:\n    def __call__(self, name):\n        return name\n",
        "pkg/utils.py": "from pkg.local import Local\n\nlocal = Local()\n\n\ndef application():\n"
                        "    return local('application')\n",
    }
    index = open_files(root, files, tmp_path / "cache")
    edges = {(e.src, e.dst) for e in index.graph.edges() if e.kind == "CALLS"}
    assert ("pkg/utils.py::application", "pkg/local.py::Local.__call__") in edges
    status = Refiner(index, sample_per_file=50).run()
    assert status["sampled"] >= 1
    assert status["contradicted"] == 0
