"""Every conversion between LSP's world and the core's, in one place.

LSP: URIs, 0-based lines, columns in the negotiated encoding (utf-16 for VS Code, utf-8 for Neovim,
utf-32 = code points). Core: workspace-relative POSIX paths, 1-based lines, 0-based code-point columns.
Column conversion needs the text of the line, which comes from a snapshot of the open editor buffers
(so positions agree with the graph built from those buffers) or else from the disk.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from lsprotocol import types
from pygls import uris

from ctx_lsp.index.discovery import read_source
from ctx_lsp.index.model import Node

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


# -- URIs and paths ------------------------------------------------------------------------------
def uri_to_path(uri: str) -> Path | None:
    """The absolute, normalised file-system path of a `file:` URI; None for other schemes and for a
    file URI no file can have (`uri_problem` says why)."""
    fs = uris.to_fs_path(uri)
    if not fs or "\x00" in fs:  # `%00`: every os call on it raises ValueError("embedded null byte")
        return None
    return Path(os.path.normpath(fs))


def uri_problem(uri: str) -> str | None:
    """Why `uri` is a malformed file URI, for an InvalidParams message; None when it is not one."""
    fs = uris.to_fs_path(uri)
    if fs and "\x00" in fs:
        return f"{uri[:200]} has a NUL byte (%00) in its path"
    return None


def path_to_uri(path: Path | str) -> str:
    return uris.from_fs_path(str(path)) or Path(path).as_uri()


def rel_in(root: Path, path: Path) -> str | None:
    """`path` relative to `root` as a POSIX string, or None when it is not under `root`."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return None


# -- columns ---------------------------------------------------------------------------------
def _units(ch: str, encoding: str) -> int:
    if encoding == UTF8:
        return len(ch.encode("utf-8", "surrogatepass"))
    if encoding == UTF16:
        return 2 if ord(ch) > 0xFFFF else 1
    return 1


def col_to_codepoints(line: str, units: int, encoding: str) -> int:
    """A client column (code units of `encoding`) on `line` -> a code-point column (clamped to the line)."""
    if units <= 0:
        return 0
    if encoding == UTF32 or line.isascii():
        return min(units, len(line))
    seen = 0
    for i, ch in enumerate(line):
        if seen >= units:
            return i
        seen += _units(ch, encoding)
    return len(line)


def col_to_units(line: str, col: int, encoding: str) -> int:
    """A code-point column on `line` -> client code units of `encoding`."""
    if encoding == UTF32 or line.isascii():
        return col
    return sum(_units(ch, encoding) for ch in line[:col])


class Positions:
    """Position and range conversion for one request, over one snapshot of the open buffers.

    `buffers` maps absolute paths to editor text; other files are read from disk once and cached, only
    inside `root` (through discovery.read_source; without a root, none is read).
    """

    def __init__(self, encoding: str, buffers: Mapping[Path, str] | None = None, root: Path | None = None) -> None:
        self.encoding = encoding if encoding in (UTF8, UTF16, UTF32) else UTF16
        self.buffers = buffers or {}
        self.root = root
        self._lines: dict[Path, list[str]] = {}

    def lines(self, path: Path) -> list[str]:
        got = self._lines.get(path)
        if got is None:
            text = self.buffers.get(path)
            if text is None:
                data = read_source(self.root, path).data if self.root is not None else None
                text = data.decode("utf-8", "replace") if data is not None else ""
            got = text.splitlines()
            self._lines[path] = got
        return got

    def line_text(self, path: Path, line0: int) -> str:
        lines = self.lines(path)
        return lines[line0] if 0 <= line0 < len(lines) else ""

    def to_core(self, path: Path, pos: types.Position) -> tuple[int, int]:
        """LSP Position -> (1-based line, 0-based code-point column)."""
        return pos.line + 1, col_to_codepoints(self.line_text(path, pos.line), pos.character, self.encoding)

    def to_lsp(self, path: Path, line: int, col: int) -> types.Position:
        """(1-based line, code-point column) -> LSP Position in the client's encoding."""
        line0 = max(line - 1, 0)
        return types.Position(line=line0, character=col_to_units(self.line_text(path, line0), max(col, 0), self.encoding))

    def span(self, path: Path, line: int, col: int, length: int) -> types.Range:
        """A range of `length` code points starting at (1-based line, code-point col)."""
        return types.Range(start=self.to_lsp(path, line, col), end=self.to_lsp(path, line, col + length))

    def name_span(self, path: Path, line: int, col: int, name: str) -> types.Range:
        """The range of a call site whose callee is `name`, from the site's (1-based line, code-point
        col): the name where it is written there, else the name later on the line (`ensure_sync(handler)`
        for `handler`), else the identifier at the site (`response_class` for the class `Response`, a
        callback called through a variable): never a slice of other tokens."""
        text = self.line_text(path, line - 1)
        if text[col:col + len(name)] == name:
            return self.span(path, line, col, len(name))
        later = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)").search(text, col)
        if later is not None:
            return self.span(path, line, later.start(), len(name))
        here = re.compile(r"\w+").match(text, col)
        return self.span(path, line, col, len(here.group(0)) if here else min(len(name), max(len(text) - col, 0)))

    def lines_range(self, path: Path, start_line: int, end_line: int) -> types.Range:
        """Whole lines start..end (1-based, inclusive): from column 0 to the end of the last line."""
        last = self.line_text(path, end_line - 1)
        return types.Range(start=types.Position(line=max(start_line - 1, 0), character=0),
                           end=types.Position(line=max(end_line - 1, 0),
                                              character=col_to_units(last, len(last), self.encoding)))

    def node_range(self, root: Path, node: Node) -> types.Range:
        return self.lines_range(root / node.path, node.start_line, node.end_line)
