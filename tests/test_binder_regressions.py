"""Regressions for binder bugs found by `benchmark_gen verify-edges` (pyright and runtime traces)."""

from __future__ import annotations

from pathlib import Path

from ctx_lsp.index.bind import Binder
from ctx_lsp.index.workspace import WorkspaceIndex


def _index(tmp_path: Path, files: dict[str, str]) -> WorkspaceIndex:
    root = tmp_path / "ws"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    ix = WorkspaceIndex(root, cache_dir=tmp_path / "cache")
    ix.load_or_build()
    return ix


def _edges(ix: WorkspaceIndex, kind: str) -> set[tuple[str, str]]:
    return {(e.src, e.dst) for e in ix.graph.edges() if e.kind == kind}


def test_ve2_a_cached_mro_does_not_depend_on_the_depth_of_the_first_lookup(tmp_path: Path) -> None:
    ix = _index(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/base.py": "class Provider:\n    def dumps(self, obj):\n        return str(obj)\n",
        "pkg/app.py": "from .base import Provider\n\nclass Mid(Provider):\n    pass\n\nclass App(Mid):\n    pass\n",
    })
    b = Binder(ix.ws)
    ix.ws._class_cache.clear()
    deep = b.member("pkg/app.py::App", "dumps", 13)  # asked from deep inside a long chain first
    shallow = b.member("pkg/app.py::App", "dumps", 0)
    assert deep == shallow == ("sym", "pkg/base.py::Provider.dumps")


def test_ve4_attribute_reads_through_typed_parameters_and_locals_reference_the_member(tmp_path: Path) -> None:
    ix = _index(tmp_path, {"m.py": (
        "class Ctx:\n"
        "    @property\n"
        "    def path(self) -> str:\n"
        "        return 'x'\n"
        "def show(ctx: Ctx) -> str:\n"
        "    return ctx.path\n"
        "def local() -> str:\n"
        "    c = Ctx()\n"
        "    return c.path\n"
        "def untyped(x):\n"
        "    return x.path\n"
    )})
    refs = _edges(ix, "REFERENCES")
    assert ("m.py::show", "m.py::Ctx.path") in refs
    assert ("m.py::local", "m.py::Ctx.path") in refs
    assert not any(src == "m.py::untyped" for src, _ in refs)  # an untyped receiver is never guessed


def test_ve3_a_variable_rebinding_its_own_name_is_transparent(tmp_path: Path) -> None:
    """requests/compat.py: `builtin_str = str; str = str` — both mean the builtin str."""
    ix = _index(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/compat.py": "builtin_str = str\nstr = str\n",
        "pkg/use.py": "from pkg.compat import builtin_str\n\n\ndef f(x):\n    return builtin_str(x)\n",
    })
    edges = {(e.src, e.dst) for e in ix.graph.edges() if e.kind in ("REFERENCES", "CALLS", "INSTANTIATES")}
    assert not any(dst == "pkg/compat.py::str" for _, dst in edges)
    # the import names the compat variable itself; the call through it runs the builtin (no edge)
    assert ("pkg/use.py", "pkg/compat.py::builtin_str") in edges
    assert not any(src == "pkg/use.py::f" for src, _ in edges)


def test_ve5_reading_an_annotated_class_attribute_references_the_attribute(tmp_path: Path) -> None:
    """click/core.py: `command_class: type[Command] | None = None`; `self.command_class` read is the
    attribute, `self.command_class(...)` builds a Command."""
    ix = _index(tmp_path, {"m.py": (
        "class Command:\n"
        "    pass\n"
        "class Group:\n"
        "    command_class: type[Command] | None = None\n"
        "    def read(self):\n"
        "        return self.command_class\n"
        "    def build(self):\n"
        "        return self.command_class()\n"
    )})
    assert ("m.py::Group.read", "m.py::Group.command_class") in _edges(ix, "REFERENCES")
    assert ("m.py::Group.read", "m.py::Command") not in _edges(ix, "REFERENCES")
    assert ("m.py::Group.build", "m.py::Command") in _edges(ix, "INSTANTIATES")


def test_a_base_class_property_wins_over_an_instance_attribute_assigned_in_a_subclass(tmp_path: Path) -> None:
    """flask: `App.debug` is a property with a setter; `Flask.run` assigns `self.debug = ...` (the setter
    runs), and `self.debug` reads in Flask run the getter."""
    ix = _index(tmp_path, {"m.py": (
        "class App:\n"
        "    @property\n"
        "    def debug(self) -> bool:\n"
        "        return True\n"
        "    @debug.setter\n"
        "    def debug(self, value: bool) -> None:\n"
        "        pass\n"
        "class Flask(App):\n"
        "    def run(self):\n"
        "        self.debug = bool(1)\n"
        "    def env(self):\n"
        "        return self.debug\n"
        "class Plain:\n"
        "    def __init__(self):\n"
        "        self.debug = App()\n"
        "    def use(self):\n"
        "        return self.debug.debug\n"
    )})
    refs = _edges(ix, "REFERENCES")
    assert ("m.py::Flask.env", "m.py::App.debug") in refs
    assert ("m.py::Plain.use", "m.py::App.debug") in refs  # the instance attribute's type, then its property
