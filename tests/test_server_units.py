"""Unit tables for the server's pure parts: column conversion (convert.py), settings (options.py)
and params validation (params.py). The end-to-end behaviour is in test_server*.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from ctx_lsp.server import params as P
from ctx_lsp.server.convert import UTF8, UTF16, UTF32, Positions, col_to_codepoints, col_to_units
from ctx_lsp.server.options import Options, parse_options

LINE = 'x = "é😀—"; f()'  # é: 2 utf-8 bytes, 😀: 4 bytes / 2 utf-16 units, —: 3 bytes
F = LINE.index("f()")  # code-point column of f


@pytest.mark.parametrize(("encoding", "units"), [(UTF8, F + 1 + 3 + 2), (UTF16, F + 1), (UTF32, F)])
def test_columns_round_trip_per_encoding(encoding: str, units: int) -> None:
    assert col_to_units(LINE, F, encoding) == units
    assert col_to_codepoints(LINE, units, encoding) == F


@pytest.mark.parametrize(("units", "encoding", "expected"), [
    (0, UTF8, 0), (-3, UTF16, 0), (999, UTF8, len(LINE)), (999, UTF16, len(LINE)),
    (6, UTF8, 6),  # the middle of é's two bytes snaps to the next character
    (7, UTF16, 7),  # between the two halves of 😀: the next character
])
def test_client_columns_are_clamped_and_snap_inside_characters(units: int, encoding: str, expected: int) -> None:
    assert col_to_codepoints(LINE, units, encoding) == expected


def test_positions_prefer_the_buffer_over_the_disk(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("abc\n", encoding="utf-8")
    pos = Positions(UTF16, {f: "😀😀 = 1\n"})
    assert pos.to_lsp(f, 1, 2) == types.Position(line=0, character=4)
    assert pos.to_core(f, types.Position(line=0, character=4)) == (1, 2)
    assert Positions(UTF16).to_lsp(f, 1, 2) == types.Position(line=0, character=2)
    rng = pos.lines_range(f, 1, 1)
    assert (rng.start.character, rng.end.character) == (0, len("😀😀 = 1") + 2)


def check_options(raw: object, expected: dict[str, object], warned: list[str]) -> None:
    opts, warnings = parse_options(raw)
    for attr, value in expected.items():
        assert getattr(opts, attr) == value, (attr, opts)
    assert len(warnings) == len(warned), warnings
    for w, fragment in zip(warnings, warned, strict=True):
        assert fragment in w


@pytest.mark.parametrize(("raw", "expected", "warned"), [
    (None, {"budget": 4000, "include": ()}, []),
    ({"budget": 1200, "include": ["src/**"], "exclude": "tests/**", "cacheDir": "/c", "jediRefinement": False},
     {"budget": 1200, "include": ("src/**",), "exclude": ("tests/**",), "cache_dir": "/c", "jedi_refinement": False}, []),
    ({"budget": 0}, {"budget": 4000}, ["'budget'"]),
    ({"budget": "800"}, {"budget": 4000}, ["expected an integer"]),
    ({"budget": True}, {"budget": 4000}, ["expected an integer"]),
    ({"budget": 800.0, "debounceMs": 50}, {"budget": 800, "debounce_ms": 50}, []),
    ({"debounceMs": 60_000}, {"debounce_ms": 300}, ["'debounceMs'"]),
    ({"jediRefinement": "yes", "include": [1]}, {"jedi_refinement": True, "include": ()},
     ["'jediRefinement'", "'include'"]),
    ({"codeLens": False, "budget": None}, {"code_lens": False, "budget": 4000}, []),
    ({"typo": 1}, {}, ["unknown setting 'typo'"]),
    (["not", "an", "object"], {"budget": 4000}, ["must be an object"]),
    ([], {"budget": 4000}, []),  # Neovim's `settings = { ctx = {} }`: an empty Lua table is a JSON array
])
def test_settings_table(raw: object, expected: dict[str, object], warned: list[str]) -> None:
    check_options(raw, expected, warned)


def test_settings_layer_over_a_base() -> None:
    base, _ = parse_options({"budget": 100, "exclude": ["a"]})
    opts, _ = parse_options({"budget": 200}, base)
    assert (opts.budget, opts.exclude) == (200, ("a",))
    assert opts.index_key() == base.index_key() != Options().index_key()


@pytest.mark.parametrize(("args", "fragment"), [
    ((1,), "must be a params object"),
    (({}, {}), "one params object argument, got 2"),
])
def test_params_object_shape(args: tuple[object, ...], fragment: str) -> None:
    with pytest.raises(JsonRpcInvalidParams, match=fragment):
        P.params_object("ctx.x", args)


@pytest.mark.parametrize("args", [(), (None,), ([],), ({},)])
def test_empty_params_objects(args: tuple[object, ...]) -> None:
    assert P.params_object("ctx.x", args) == {}


def test_a_folder_named_in_latin1_gets_a_cache_directory_under_cache_dir(tmp_path: Path) -> None:
    import hashlib
    import os

    from ctx_lsp.server.folders import cache_dir_for

    opts, _ = parse_options({"cacheDir": str(tmp_path)})
    plain = cache_dir_for(opts, Path("/ws/proj"))
    assert plain == tmp_path / f"proj-{hashlib.sha1(b'/ws/proj').hexdigest()[:12]}"  # keys as before
    odd = cache_dir_for(opts, Path(os.fsdecode(b"/ws/r\xe9sum\xe9")))
    assert odd is not None and odd.parent == tmp_path and odd.name.startswith("r\ufffdsum\ufffd-")


def test_a_call_site_range_covers_a_written_name_never_a_slice_of_other_tokens() -> None:
    """Call hierarchy's `fromRanges`: the callee's name where the site writes it, else the name later
    on the line (a callback passed to a wrapper), else the identifier at the site (a class called
    through an attribute, a handler through a variable); a slice as long as the callee's name cut
    `ensure_sync(handl` out of flask's error handling."""
    f = Path("/ws/app.py")
    src = ("        return self.ensure_sync(handler)(server_error)\n"
           "        rv = self.response_class(rv, status=status)\n"
           "        x = 😀(run(task))\n")
    pos = Positions(UTF16, {f: src})

    def text(r: types.Range) -> str:
        line = src.splitlines()[r.start.line].encode("utf-16-le")
        return line[2 * r.start.character:2 * r.end.character].decode("utf-16-le")

    col = src.splitlines()[0].index("ensure_sync")
    assert text(pos.name_span(f, 1, col, "ensure_sync")) == "ensure_sync"
    assert text(pos.name_span(f, 1, col, "handler")) == "handler"
    assert text(pos.name_span(f, 1, col, "internal_server_error")) == "ensure_sync"
    assert text(pos.name_span(f, 2, src.splitlines()[1].index("response_class"), "Response")) == "response_class"
    assert text(pos.name_span(f, 3, src.splitlines()[2].index("run"), "task")) == "task"  # after an astral char


def test_a_graph_commit_node_is_labelled_as_git_log_oneline_shows_it() -> None:
    """Its short hash and subject; the id's first ten characters were `commit:6d6`."""
    from ctx_lsp.index.model import Node
    from ctx_lsp.server.graph_lookup import _node_json

    commit = Node("commit:6d657341e7e3f00d", "commit", "", "6d657341e7e3", 0, 0, "Release version 3.1.3")
    got = _node_json(None, commit)  # type: ignore[arg-type]  # a commit needs no folder (no uri)
    assert got["label"] == "6d657341e7e3 Release version 3.1.3" and got["uri"] is None
    long = _node_json(None, commit._replace(signature="x" * 200))  # type: ignore[arg-type]
    assert len(long["label"]) == 61 and long["label"].endswith("…")
