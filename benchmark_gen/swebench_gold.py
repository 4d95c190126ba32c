"""Gold locations of a SWE-bench instance, read from its gold patch and the files at base_commit.

Gold files: the files the patch edits (`diff --git a/X b/X`; the old path X) that exist at the base
commit. Gold functions: for each line the patch removes or changes, the innermost `def`/`class` of
the ORIGINAL file holding it, named like the engine's symbols (`Outer.Inner.meth`); a pure addition
counts for the line above it (the old-side line before the insertion; 0 at the top of a file). Lines
at module level name no function, and neither does a file that does not parse.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

_DIFF = re.compile(r"^diff --git a/(.+) b/(.+)$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class FilePatch:
    """One file of a unified diff: its old path and the old-side lines (1-based) it touches."""

    path: str
    lines: list[int] = field(default_factory=list)
    new_file: bool = False


def _diff_paths(line: str) -> str | None:
    m = _DIFF.match(line)
    if not m:
        return None
    a, b = m.group(1), m.group(2)
    if a != b and " b/" in line[len("diff --git a/"):]:
        # a path with " b/" in it is ambiguous; the unrenamed case splits the line in two equal halves
        rest = line[len("diff --git a/"):]
        half = (len(rest) - len(" b/")) // 2
        if rest[:half] == rest[half + len(" b/"):]:
            return rest[:half]
    return a


def parse_patch(patch: str) -> list[FilePatch]:
    """The files of a unified diff in order, each with the old-side lines its hunks touch."""
    files: list[FilePatch] = []
    cur: FilePatch | None = None
    lines = patch.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        path = _diff_paths(line) if line.startswith("diff --git ") else None
        if path is not None:
            cur = FilePatch(path)
            files.append(cur)
            continue
        if cur is None:
            continue
        if line.startswith("--- "):
            if line[4:].strip() == "/dev/null":
                cur.new_file = True
            elif line.startswith("--- a/"):
                cur.path = line[6:].rstrip("\t")
            continue
        m = _HUNK.match(line)
        if not m:
            continue
        old_start, old_n = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
        new_n = int(m.group(4) if m.group(4) is not None else 1)
        nxt = old_start if old_n else old_start + 1  # "-10,0": the insertion comes after line 10
        changing = False  # inside a run of - lines and the + lines replacing them
        while i < len(lines) and (old_n > 0 or new_n > 0):
            h = lines[i]
            i += 1
            tag = h[:1] or " "  # some tools strip the space of an empty context line
            if tag == "\\":
                continue
            if tag == "-":
                cur.lines.append(nxt)
                changing = True
                nxt += 1
                old_n -= 1
            elif tag == "+":
                if not changing:
                    cur.lines.append(nxt - 1)
                new_n -= 1
            else:
                changing = False
                nxt += 1
                old_n -= 1
                new_n -= 1
    for f in files:
        f.lines = sorted(set(f.lines))
    return files


def symbol_spans(source: str) -> list[tuple[int, int, str]] | None:
    """(start, end, qualname) of every def/class, decorators included, lines 1-based inclusive;
    None when the source does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    out: list[tuple[int, int, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                start = min([child.lineno] + [d.lineno for d in child.decorator_list])
                qual = f"{prefix}{child.name}"
                out.append((start, child.end_lineno or child.lineno, qual))
                walk(child, qual + ".")
            else:
                walk(child, prefix)

    walk(tree, "")
    return out


def innermost(spans: list[tuple[int, int, str]], line: int) -> str | None:
    """The qualname of the smallest def/class holding `line`, None at module level."""
    best: tuple[int, str] | None = None
    for s, e, q in spans:
        if s <= line <= e and (best is None or e - s < best[0]):
            best = (e - s, q)
    return best[1] if best else None


def gold_functions(source: str, lines: list[int]) -> list[str]:
    """Sorted qualnames of the innermost defs/classes holding `lines` in `source`."""
    spans = symbol_spans(source)
    if spans is None:
        return []
    return sorted({q for ln in lines if (q := innermost(spans, ln)) is not None})
