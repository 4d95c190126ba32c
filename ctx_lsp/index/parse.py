"""Parsing that never fails: `ast.parse`, then line-by-line repair of what it rejects (a broken header
keeps its name, statements nested too deep for CPython's parser are left out), and parso's
error-recovering parser for the definitions when nothing else converges. Problems come back as text.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Any

from ctx_lsp.index.facts import MAX_SIGNATURE, Def, FileFacts

_HEADER = re.compile(r"\s*(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)")


_COMPOUND = re.compile(r"\s*(if|elif|else|for|while|with|try|except|finally|async|match|case)\b")


_AFTER_LINE = re.compile(r"on line (\d+)")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def parse_tolerant(text: str, lines: list[str]) -> tuple[ast.Module | None, list[str]]:
    try:
        return ast.parse(text, type_comments=False), []
    except (SyntaxError, ValueError) as exc:
        first = [f"syntax error at line {getattr(exc, 'lineno', '?')}: {getattr(exc, 'msg', exc)}"]
        work = list(lines)
    except (RecursionError, MemoryError):
        # CPython's parser gives up on expressions nested a few thousand deep (`"a" + "a" + ...`,
        # `a.b.b...`, `----1`): leave those statements out and parse the rest.
        work, first = _without_deep_statements(text, lines)
        if not first:
            first = ["expression nested too deeply to parse"]
    # Repair line by line, keeping line numbers, until it parses: a broken def/class header becomes a
    # minimal header of the same name (the definition and its body survive), a broken block header
    # becomes `if True:`, any other offending line `pass`, and an unexpected indented block is blanked.
    for _ in range(40):
        try:
            return ast.parse("\n".join(work)), first
        except SyntaxError as exc:
            lineno = exc.lineno or 0
            msg = exc.msg or ""
            if not 1 <= lineno <= len(work):
                break
            if msg.startswith("expected an indented block"):
                after = _AFTER_LINE.search(msg)
                header = int(after.group(1)) if after else lineno - 1
                if 1 <= header <= len(work) and not work[header - 1].rstrip().endswith(" pass"):
                    work[header - 1] = work[header - 1].rstrip() + " pass"
                    continue
            line = work[lineno - 1]
            indent = _indent(line)
            if msg.startswith(("unexpected indent", "unindent does not match", "inconsistent use of tabs")):
                # blank the whole indented run at once rather than one parse per line
                j = lineno - 1
                while j < len(work) and (not work[j].strip() or len(_indent(work[j])) >= len(indent)):
                    work[j] = ""
                    j += 1
                continue
            opens_block = _opens_block(work, lineno - 1)
            m = _HEADER.match(line)
            if m and opens_block:
                replacement = f"{indent}{m.group(1)} {m.group(2)}{'(*_a, **_k)' if m.group(1) == 'def' else ''}:"
            elif opens_block and (_COMPOUND.match(line) or line.rstrip().endswith(":")):
                replacement = indent + "if True:"
            else:
                replacement = indent + "pass"
            if work[lineno - 1] == replacement:
                # The error is structural (e.g. an unclosed bracket opened earlier); blank upwards.
                if lineno >= 2 and work[lineno - 2].strip() and work[lineno - 2].strip() != "pass":
                    prev = work[lineno - 2]
                    work[lineno - 2] = _indent(prev) + "pass"
                    continue
                break
            work[lineno - 1] = replacement
        except (ValueError, RecursionError, MemoryError):
            break
    return None, [*first, "could not recover a syntax tree; only definitions were extracted (parso)"]


_DEEP_CHECK_CHARS = 200  # a statement shorter than this cannot nest deep enough to defeat the parser


def _without_deep_statements(text: str, lines: list[str]) -> tuple[list[str], list[str]]:
    """`lines` with each logical line the parser cannot nest deep enough for replaced by `pass` (a block
    header by a header of the same kind), line numbers kept; and one message per statement left out."""
    work = list(lines)
    errors: list[str] = []
    for first, last in _logical_lines(text):
        if sum(len(line) for line in lines[first - 1 : last]) < _DEEP_CHECK_CHARS:
            continue
        stmt = "\n".join(lines[first - 1 : last]).lstrip()
        header = _too_deep(stmt)
        if header is None:
            continue
        indent = _indent(lines[first - 1])
        m = _HEADER.match(stmt)
        if header and m:
            replacement = f"{m.group(1)} {m.group(2)}{'(*_a, **_k)' if m.group(1) == 'def' else ''}:"
        elif header:
            keyword = stmt.split(None, 1)[0].rstrip(":")
            replacement = {"elif": "elif True:", "except": "except Exception:"}.get(keyword, "if True:")
        else:
            replacement = "pass"
        work[first - 1] = indent + replacement
        for i in range(first, last):
            work[i] = ""
        errors.append(f"line {first}: expression nested too deeply to parse; the statement was left out")
    return work, errors


def _logical_lines(text: str) -> list[tuple[int, int]]:
    """(first, last) 1-based physical lines of each logical line, as far as the text tokenizes."""
    spans: list[tuple[int, int]] = []
    start = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in _NON_CODE:
                continue
            if not start:
                start = tok.start[0]
            if tok.type == tokenize.NEWLINE:
                spans.append((start, tok.start[0]))
                start = 0
    except (tokenize.TokenError, SyntaxError, RecursionError):
        pass  # the statements before the damage are still checked
    return spans


_NON_CODE = frozenset({tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER,
                       tokenize.ENCODING})


def _too_deep(stmt: str) -> bool | None:
    """Whether one statement, parsed alone, defeats the parser by nesting: None when it does not, else
    whether it is a block header (True) or a simple statement (False)."""
    if stmt.startswith("elif"):
        candidates = [("if" + stmt[4:] + "\n pass", True)]
    elif stmt.startswith("except"):
        candidates = [("try: pass\n" + stmt + "\n pass", True)]
    else:
        candidates = [(stmt, False), (stmt + "\n pass", True)]
        if stmt.startswith("@"):
            candidates.append((stmt + "\ndef _(): pass", False))
    for source, header in candidates:
        try:
            ast.parse(source)
            return None
        except (SyntaxError, ValueError):
            continue
        except (RecursionError, MemoryError):
            return header
    return None


def _opens_block(work: list[str], i: int) -> bool:
    """Whether the next non-blank line after index i is indented deeper than line i."""
    ind = len(_indent(work[i]))
    for j in range(i + 1, len(work)):
        if work[j].strip():
            return len(_indent(work[j])) > ind
    return False


def parso_defs(text: str, facts: FileFacts) -> None:
    try:
        import parso

        module = parso.parse(text, error_recovery=True)
    except Exception as exc:  # parso is the last resort; report and keep nothing
        facts.errors.append(f"parso failed: {exc}")
        return

    def walk(node: Any, prefix: str, in_class: bool) -> None:
        for child in getattr(node, "children", []):
            kind = child.type
            if kind in ("funcdef", "classdef"):
                name = child.name.value
                qual = f"{prefix}{name}"
                is_class = kind == "classdef"
                dkind = "class" if is_class else ("method" if in_class else "function")
                facts.defs.append(
                    Def(
                        qual=qual, kind=dkind, start=child.start_pos[0], end=child.end_pos[0],
                        line=child.start_pos[0], col=child.name.start_pos[1],
                        signature=child.get_code(include_prefix=False).split("\n", 1)[0].strip()[:MAX_SIGNATURE],
                    )
                )
                walk(child, qual + ".", is_class)
            elif kind in ("suite", "decorated", "async_stmt", "async_funcdef", "error_node"):
                walk(child, prefix, in_class)

    try:
        walk(module, "", False)
    except RecursionError:
        facts.errors.append("definitions nested too deeply; only the outer ones were extracted")
