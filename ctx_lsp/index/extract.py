"""The syntactic pass: one file's text in, its facts out (definitions, imports, sites, types).

Pure: the result depends only on (path, text). It never raises on broken code: a file with syntax
errors is parsed again with the offending lines blanked out, and if that does not converge parso's
error-recovering parser supplies at least the definitions. Problems are returned in `errors`.

A *chain* is a dotted expression as a tuple of segments; a segment ending in "()" is a call:
`self.repo.get_session().send` is ("self", "repo", "get_session()", "send"). A *type* is stored as the
chain of the call that would produce a value of it, so the annotation `x: Repo` and the assignment
`x = Repo()` both give ("Repo()",).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any

Chain = tuple[str, ...]

MAX_SIGNATURE = 240
MAX_WORDS = 400
MAX_LITERALS = 2000  # per file: generated tables must not flood the literal index
MAX_LITERAL = 400
_BUILTINS = frozenset(dir(builtins))
_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test)\.py$|(^|/)(tests?|testing)/[^/]*\.py$|(^|/)conftest\.py$")

# what ast.parse raises on text it cannot take: bad syntax, NUL bytes, nesting too deep for the parser
UNPARSABLE = (SyntaxError, ValueError, RecursionError, MemoryError)

# site kinds
CALL = "call"
REF = "ref"


@dataclass(slots=True)
class Def:
    qual: str
    kind: str  # class | function | method | variable | test
    start: int
    end: int
    line: int  # line of the `def`/`class` keyword (decorators excluded)
    col: int  # column of the defined name
    signature: str = ""
    doc: str = ""
    bases: list[Chain] = field(default_factory=list)
    decorators: list[Chain] = field(default_factory=list)
    returns: Chain | None = None  # type of the value returned (a call chain), resolved in this def's scope
    value: Chain | None = None  # variables: the chain assigned to it
    attrs: dict[str, tuple[str, Chain]] = field(default_factory=dict)  # class: attr -> (scope, type chain)
    locals: dict[str, Chain | None] = field(default_factory=dict)  # function: local -> type chain or None
    words: str = ""  # identifiers and short string literals, for lexical search
    returns_def: str | None = None  # a nested def some `return` hands out by name (a decorator factory's)
    returns_call: Chain | None = None  # the callee of a `return g(...)`: this def returns what g returns
    call_returns: Chain | None = None  # R of a `-> Callable[..., R]` annotation: what its result returns


@dataclass(slots=True)
class Import:
    scope: str  # "" for module level
    line: int
    col: int
    module: str  # dotted module as written (without leading dots)
    name: str | None  # `from module import name`; None for `import module`
    asname: str | None
    level: int  # relative import level
    guarded: str = ""  # "" | "try" | "type_checking"


@dataclass(slots=True)
class Site:
    scope: str  # qual of the innermost enclosing def, "" for module level
    line: int
    col: int  # column of the last segment (where jedi's goto should look)
    chain: Chain
    kind: str  # call | ref


@dataclass(slots=True)
class FileFacts:
    path: str
    digest: str
    lines: int
    defs: list[Def] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    all_names: list[str] | None = None
    words: str = ""  # module-level identifiers, docstring and path words
    doc: str = ""
    errors: list[str] = field(default_factory=list)
    is_test_file: bool = False
    flows: list[tuple] = field(default_factory=list)  # where function values go (flowfacts.py)
    # string literals worth matching against quoted messages: (scope qual, line, text); f-strings
    # as templates with "{}" for each formatted value (retrieval/literals.py)
    literals: list[tuple[str, int, str]] = field(default_factory=list)
    # term frequencies of the whole text (comments and docstrings included): whole-file BM25
    terms: dict[str, int] = field(default_factory=dict)


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def decode_source(data: bytes) -> tuple[str, str | None]:
    """Text of a source file and an error message when bytes had to be replaced."""
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        return data.decode("utf-8", errors="replace"), f"non-UTF-8 bytes at offset {exc.start}; decoded with replacement"


def is_test_path(path: str) -> bool:
    return bool(_TEST_FILE.search(path))


def extract(path: str, text: str, digest: str | None = None) -> FileFacts:
    """Extract the facts of one file. Never raises."""
    if digest is None:
        digest = content_digest(text.encode("utf-8", "surrogatepass"))
    lines = split_lines(text)
    facts = FileFacts(path=path, digest=digest, lines=len(lines), is_test_file=is_test_path(path))
    tree, errors = _parse_tolerant(text, lines)
    facts.errors.extend(errors)
    if tree is None:
        _parso_defs(text, facts)
    else:
        visitor = _Visitor(facts, lines)
        visitor.run(tree)
        from ctx_lsp.index.flowfacts import flow_facts  # imports chain_of from here: not at module level

        facts.flows = flow_facts(tree, visitor.col)
    facts.words = " ".join([_path_words(path), facts.words])[: MAX_WORDS * 8]
    facts.terms = _file_terms(text)
    return facts


def _file_terms(text: str) -> dict[str, int]:
    from ctx_lsp.retrieval.text import (
        term_counts,  # the one tokenizer of lexical search (no cycle: text imports nothing here)
    )

    return dict(term_counts(text))


_LITERAL_WORTH = re.compile(r"\s|^(?:[a-z_]+\.)?[A-Z]{1,2}\d{3,4}$|^-{0,2}[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+$")


def keep_literal(text: str) -> bool:
    """Literals a task may quote: messages (with a space), error codes (`admin.E108`, `W0611`) and
    keys (`unused-import`, `--ignore-paths`, `autodoc_typehints`: options, settings, message names)."""
    return 4 <= len(text) <= MAX_LITERAL and bool(_LITERAL_WORTH.search(text.strip()))


def split_lines(text: str) -> list[str]:
    """Lines as Python's tokenizer counts them (\\n, \\r\\n, \\r), unlike str.splitlines, which also
    breaks at form feeds, \\v, \\x1c-\\x1e, \\x85 and U+2028/9 and so would shift every later line."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _path_words(path: str) -> str:
    return " ".join(p for p in re.split(r"[/._\-]+", path) if p and p != "py")


_HEADER = re.compile(r"\s*(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)")
_COMPOUND = re.compile(r"\s*(if|elif|else|for|while|with|try|except|finally|async|match|case)\b")
_AFTER_LINE = re.compile(r"on line (\d+)")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _parse_tolerant(text: str, lines: list[str]) -> tuple[ast.Module | None, list[str]]:
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


def _parso_defs(text: str, facts: FileFacts) -> None:
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


def _first_doc_line(node: ast.AST) -> str:
    try:
        doc = ast.get_docstring(node, clean=False)  # type: ignore[arg-type]
    except TypeError:
        return ""
    if not doc:
        return ""
    # the first paragraph, joined: a first sentence often wraps onto the next line
    para: list[str] = []
    for line in doc.strip().splitlines():
        if not line.strip():
            if para:
                break
            continue
        para.append(line.strip())
    return " ".join(para)[:240]


def returned_name(value: ast.AST | None) -> ast.Name | None:
    """The name a `return` hands out, seen through the helpers decorators wrap it in:
    `update_wrapper(wrapper, f)`, `wraps(f)(wrapper)`, `cast(F, wrapper)` (functools, typing)."""
    while value is not None:
        if isinstance(value, ast.Name):
            return value
        if not isinstance(value, ast.Call):
            return None
        func = value.func
        head = chain_of(func.func) if isinstance(func, ast.Call) else chain_of(func)
        name = head[-1].removesuffix("()") if head else ""
        if isinstance(func, ast.Call) and name == "wraps" and value.args:
            value = value.args[0]
        elif name == "update_wrapper" and value.args:
            value = value.args[0]
        elif _is_cast(value):
            value = value.args[1]
        else:
            return None
    return None


def chain_of(node: ast.AST) -> Chain | None:
    """The dotted chain of an expression, or None when it is not a plain name/attribute/call chain."""
    parts: list[str] = []
    cur = node
    called = False
    while True:
        if isinstance(cur, ast.Call):
            if called:
                return None  # f()() : give up
            called = True
            cur = cur.func
            continue
        if isinstance(cur, ast.Attribute):
            parts.append(cur.attr + "()" if called else cur.attr)
            called = False
            cur = cur.value
            continue
        if isinstance(cur, ast.Name):
            parts.append(cur.id + "()" if called else cur.id)
            break
        return None
    parts.reverse()
    return tuple(parts)


def _unquote(node: ast.AST | None) -> ast.AST | None:
    """A string annotation's expression (`"Command"`, `"type[T]"`); None if it does not parse."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except UNPARSABLE:
            return None
    return node


def type_chain(node: ast.AST | None) -> Chain | None:
    """The type an annotation names, as an instance-producing chain; unwraps Optional/Union-with-None."""
    node = _unquote(node)
    if node is None:
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [s for s in (node.left, node.right) if not (isinstance(s, ast.Constant) and s.value is None)]
        return type_chain(sides[0]) if len(sides) == 1 else None
    if isinstance(node, ast.Subscript):
        head = chain_of(node.value)
        if head and head[-1] in ("Optional", "Annotated", "Type", "type", "ClassVar", "Final"):
            inner = node.slice
            if isinstance(inner, ast.Tuple):
                inner = inner.elts[0] if head[-1] == "Annotated" and inner.elts else inner
            sub = type_chain(inner)
            if sub and head[-1] in ("Type", "type"):
                return sub[:-1] + (sub[-1][:-2],)  # type[X] is the class itself, not an instance
            return sub
        if head and head[-1] == "Union" and isinstance(node.slice, ast.Tuple):
            sides = [s for s in node.slice.elts if not (isinstance(s, ast.Constant) and s.value is None)]
            return type_chain(sides[0]) if len(sides) == 1 else None
        if head and not any(seg.endswith("()") for seg in head):
            return head[:-1] + (head[-1] + "()",)  # a generic: list[str] is a list, Registry[T] a Registry
        return None
    chain = chain_of(node)
    if chain is None or chain[-1].endswith("()"):
        return None
    return chain[:-1] + (chain[-1] + "()",)


def callable_result(node: ast.AST | None) -> Chain | None:
    """R of a `Callable[[...], R]` return annotation (or of the Callable member of a union such as
    click's `Group | Callable[[F], Group | GrpType]`): what a decorator factory's decorator returns.
    A union R takes its first member."""
    node = _unquote(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return callable_result(node.left) or callable_result(node.right)
    if not isinstance(node, ast.Subscript):
        return None
    head = chain_of(node.value)
    if not head or head[-1] != "Callable" or not isinstance(node.slice, ast.Tuple) or len(node.slice.elts) != 2:
        return None
    result = node.slice.elts[1]
    while isinstance(result, ast.BinOp) and isinstance(result.op, ast.BitOr):
        result = result.left
    return type_chain(result)


# The type chain of a value built into the language (a literal, a display, a comprehension): its
# methods are never the project's, so the binder resolves it to "outside the workspace".
EXT_CHAIN: Chain = ("<ext>()",)
_BUILTIN_VALUES = (ast.List, ast.ListComp, ast.Dict, ast.DictComp, ast.Set, ast.SetComp, ast.Tuple, ast.JoinedStr,
                   ast.GeneratorExp)


# The head of a chain naming a pytest fixture: (FIXTURE, name) is the value fixture `name` provides.
FIXTURE = "<fixture>"


def is_fixture(decorators: list[Chain]) -> bool:
    """`@pytest.fixture`, `@fixture`, `@pytest.fixture(...)`."""
    return any(c[-1] in ("fixture", "fixture()") for c in decorators)


def _value_chain(node: ast.AST | None) -> Chain | None:
    """The chain of an assigned value when it can name a type or symbol (calls and plain names)."""
    if node is None:
        return None
    if isinstance(node, ast.Await):
        node = node.value
    if isinstance(node, _BUILTIN_VALUES):
        return EXT_CHAIN
    if isinstance(node, ast.Constant):
        return EXT_CHAIN if node.value is not None and node.value is not ... else None
    if _is_cast(node):
        return _value_chain(node.args[1])  # type: ignore[attr-defined]
    return chain_of(node)


def _is_cast(node: ast.AST) -> bool:
    """`cast(T, x)` / `typing.cast(T, x)` / `t.cast(T, x)`: x at run time."""
    if not isinstance(node, ast.Call) or len(node.args) != 2:
        return False
    head = chain_of(node.func)
    return head is not None and head[-1] == "cast"


def _typevar_bound(node: ast.AST | None) -> Chain | None:
    """`TypeVar("T", bound=X)` -> X's chain (the class), so `type[T]` and `x: T` mean X. A TypeVar
    without a bound (or with constraints) stays unknown."""
    if not isinstance(node, ast.Call):
        return None
    head = chain_of(node.func)
    if head is None or head[-1] != "TypeVar":
        return None
    for kw in node.keywords:
        if kw.arg == "bound":
            bound = _unquote(kw.value)
            chain = chain_of(bound) if bound is not None else None
            return chain if chain is not None and not chain[-1].endswith("()") else None
    return None


class _Visitor:
    """One pass over the module collecting defs, imports and sites with their scopes."""

    def __init__(self, facts: FileFacts, lines: list[str]) -> None:
        self.facts = facts
        self.lines = lines
        self.scope: list[str] = []  # quals of enclosing defs
        self.scope_kind: list[str] = []  # "class" | "function"
        self.defs_by_qual: dict[str, Def] = {}
        self.local_names: list[set[str]] = []  # per enclosing function: names bound locally
        self.fill_params: list[set[str]] = []  # per enclosing function: None-default params not yet assigned
        self.words: list[list[str]] = [[]]
        self.guard: list[str] = []
        self.declared_global: set[str] = set()
        self.docstring: ast.AST | None = None  # the bare string statement being visited: not a literal

    # -- helpers -------------------------------------------------------------------------
    def col(self, line: int, byte_col: int) -> int:
        """ast columns are utf-8 byte offsets; the core speaks code points."""
        if 1 <= line <= len(self.lines):
            text = self.lines[line - 1]
            if not text.isascii():
                return len(text.encode("utf-8")[:byte_col].decode("utf-8", "replace"))
        return byte_col

    def qual(self) -> str:
        return self.scope[-1] if self.scope else ""

    def add_word(self, w: str) -> None:
        bucket = self.words[-1]
        if len(bucket) < MAX_WORDS:
            bucket.append(w)

    def literal(self, line: int, text: str) -> None:
        if len(self.facts.literals) < MAX_LITERALS:
            self.facts.literals.append((self.qual(), line, text))

    def site(self, node: ast.AST, chain: Chain, kind: str) -> None:
        end_line = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
        target: ast.AST = node
        while isinstance(target, ast.Call):
            target = target.func  # `f(a)(b)`: the call of f's result is sited on `f` too
        if isinstance(target, ast.Attribute):
            line = target.end_lineno or target.lineno
            col = self.col(line, (target.end_col_offset or 0)) - len(target.attr)
        else:
            line = target.lineno  # type: ignore[attr-defined]
            col = self.col(line, target.col_offset)  # type: ignore[attr-defined]
        del end_line
        self.facts.sites.append(Site(self.qual(), line, max(col, 0), chain, kind))

    def is_local(self, name: str) -> bool:
        return bool(self.local_names) and name in self.local_names[-1]

    # -- entry ---------------------------------------------------------------------------
    def run(self, tree: ast.Module) -> None:
        self.facts.doc = _first_doc_line(tree)
        for stmt in tree.body:
            try:
                self.stmt(stmt)
            except RecursionError:  # one statement nested too deeply for this walk: keep the others
                self.facts.errors.append(f"line {stmt.lineno}: nested too deeply; facts of this statement are partial")
                self._back_to_module()
        self.facts.words = " ".join(self.words[0] + ([self.facts.doc] if self.facts.doc else []))

    def _back_to_module(self) -> None:
        """The scope state of module level, after a walk was abandoned somewhere inside a statement."""
        for stack in (self.scope, self.scope_kind, self.local_names, self.fill_params, self.guard):
            stack.clear()
        del self.words[1:]
        self.declared_global = set()
        self.docstring = None

    def body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.stmt(stmt)

    # -- statements ----------------------------------------------------------------------
    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function(node)
        elif isinstance(node, ast.ClassDef):
            self.klass(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                self.facts.imports.append(
                    Import(self.qual(), node.lineno, self.col(node.lineno, node.col_offset), alias.name, None,
                           alias.asname, 0, self.guard[-1] if self.guard else "")
                )
                self.bind_local((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                self.facts.imports.append(
                    Import(self.qual(), node.lineno, self.col(node.lineno, node.col_offset), node.module or "",
                           alias.name, alias.asname, node.level or 0, self.guard[-1] if self.guard else "")
                )
                if alias.name != "*":
                    self.bind_local(alias.asname or alias.name)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            self.expr(node.test)
            self.guard.append("type_checking")
            self.body(node.body)
            self.guard.pop()
            self.body(node.orelse)
        elif isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self.guard.append("try")
            self.body(node.body)  # type: ignore[attr-defined]
            self.guard.pop()
            for handler in node.handlers:  # type: ignore[attr-defined]
                if handler.type is not None:
                    self.expr(handler.type)
                if handler.name:
                    self.bind_local(handler.name)
                self.guard.append("try")
                self.body(handler.body)
                self.guard.pop()
            self.body(node.orelse)  # type: ignore[attr-defined]
            self.body(node.finalbody)  # type: ignore[attr-defined]
        elif isinstance(node, ast.Assign):
            self.expr(node.value)
            value = _typevar_bound(node.value) or _value_chain(node.value)
            for target in node.targets:
                self.assign_target(target, value, node)
                self.expr_store(target)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.expr(node.value)
            self.annotation(node.annotation)
            self.assign_target(node.target, type_chain(node.annotation) or _value_chain(node.value), node,
                               annotated=True)
            self.expr_store(node.target)
        elif isinstance(node, ast.AugAssign):
            self.expr(node.value)
            self.expr(node.target)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self.expr(node.iter)
            self.bind_target(node.target)
            self.expr_store(node.target)
            self.body(node.body)
            self.body(node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self.expr(item.context_expr)
                if item.optional_vars is not None:
                    self.assign_target(item.optional_vars, _value_chain(item.context_expr), node)
                    self.expr_store(item.optional_vars)
            self.body(node.body)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            if self.local_names:
                for name in node.names:
                    self.local_names[-1].discard(name)
                    self.declared_global.add(name)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Yield) and node.value.value is not None:
            self.expr(node.value)
            if self.scope and self.scope_kind[-1] == "function" and is_fixture(self.defs_by_qual[self.qual()].decorators):
                self.note_return(node.value.value)  # a yield fixture's value is what it yields
        elif isinstance(node, ast.Return):
            if node.value is not None:
                self.expr(node.value)
                self.note_return(node.value)
        elif hasattr(ast, "Match") and isinstance(node, ast.Match):
            self.expr(node.subject)
            for case in node.cases:
                for sub in ast.walk(case.pattern):
                    captured = getattr(sub, "name", None) or getattr(sub, "rest", None)
                    if isinstance(captured, str):
                        self.bind_local(captured)
                    if isinstance(sub, ast.MatchClass):
                        self.expr(sub.cls)
                    elif isinstance(sub, ast.MatchValue):
                        self.expr(sub.value)
                if case.guard is not None:
                    self.expr(case.guard)
                self.body(case.body)
        else:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                self.docstring = node.value  # docstrings and bare strings are prose, not messages
            for child in child_nodes(node):
                if isinstance(child, ast.stmt):
                    self.stmt(child)
                elif isinstance(child, ast.expr):
                    self.expr(child)
                elif isinstance(child, ast.excepthandler):
                    pass

    def bind_local(self, name: str) -> None:
        if self.local_names and name not in self.declared_global:
            self.local_names[-1].add(name)
            if self.scope_kind and self.scope_kind[-1] == "function":
                # every local shadows module names, typed or not (None = type unknown)
                self.defs_by_qual[self.qual()].locals.setdefault(name, None)

    def bind_target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.bind_local(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind_target(elt)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value)

    def assign_target(self, target: ast.AST, value: Chain | None, node: ast.stmt, annotated: bool = False) -> None:
        """Record what an assignment binds: locals' types, instance attributes, module/class variables."""
        kind = self.scope_kind[-1] if self.scope_kind else "module"
        if isinstance(target, ast.Name):
            name = target.id
            if kind == "function":
                d = self.defs_by_qual[self.qual()]
                if self.fill_params and name in self.fill_params[-1]:
                    # `if cls is None: cls = Command`: the default callers get (the annotation, often
                    # `type[T] | None`, rarely names it); a later different assignment makes it unknown
                    self.fill_params[-1].discard(name)
                    d.locals[name] = value
                elif name not in d.locals or annotated:
                    d.locals[name] = value
                elif d.locals[name] != value:
                    d.locals[name] = None  # rebound to something else: unknown
                self.bind_local(name)
            else:
                qual = f"{self.qual()}.{name}" if self.scope else name
                if qual in self.defs_by_qual:
                    return  # first definition wins; keeps ids unique
                end = getattr(node, "end_lineno", None) or node.lineno
                line = target.lineno
                d = Def(qual=qual, kind="variable", start=node.lineno, end=end, line=line,
                        col=self.col(line, target.col_offset), value=value,
                        signature=_one_line(self.lines, node.lineno, end))
                self.defs_by_qual[qual] = d
                self.facts.defs.append(d)
                if kind == "class" and value is not None and annotated:
                    owner = self.defs_by_qual[self.qual()]
                    owner.attrs.setdefault(name, (self.qual(), value))
                if name == "__all__" and not self.scope:
                    self.facts.all_names = _literal_strings(getattr(node, "value", None))
        elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
            # self.x = ... inside a method: an instance attribute of the enclosing class
            if kind == "function" and len(self.scope) >= 2 and self.scope_kind[-2:] == ["class", "function"]:
                fdef = self.defs_by_qual[self.qual()]
                if fdef.locals.get(target.value.id) == ("<self>",) and value is not None:
                    owner = self.defs_by_qual[self.scope[-2]]
                    owner.attrs.setdefault(target.attr, (self.qual(), value))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.assign_target(elt, None, node)
        elif isinstance(target, ast.Starred):
            self.assign_target(target.value, None, node)

    def note_return(self, value: ast.expr) -> None:
        if not self.scope or self.scope_kind[-1] != "function":
            return
        d = self.defs_by_qual[self.qual()]
        named = returned_name(value)
        if d.returns_def is None and named is not None and f"{d.qual}.{named.id}" in self.defs_by_qual:
            d.returns_def = named.id
        if d.returns_call is None and isinstance(value, ast.Call) and not _is_cast(value):
            callee = chain_of(value.func)  # `return option(*decls)`: option's decorator
            if callee is not None and not callee[-1].endswith("()"):
                d.returns_call = callee
        if d.returns is not None:
            return
        chain = _value_chain(value)
        if chain and chain[-1].endswith("()"):
            d.returns = chain
        elif isinstance(value, ast.Name) and value.id in d.locals and d.locals[value.id]:
            d.returns = d.locals[value.id]
        elif isinstance(value, ast.Name) and f"{d.qual}.{value.id}" in self.defs_by_qual:
            d.returns = (value.id,)  # a decorator factory or closure returning its nested def

    def annotation(self, node: ast.AST | None) -> None:
        if node is None:
            return
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                parsed = ast.parse(node.value, mode="eval").body
            except UNPARSABLE:
                return
            ast.copy_location(parsed, node)
            for sub in ast.walk(parsed):
                ast.copy_location(sub, node)
                sub.end_lineno = node.lineno  # type: ignore[attr-defined]
            # columns inside a string annotation are approximate (the string's own column)
            self.expr(parsed)
            return
        self.expr(node)

    def decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[Chain]:
        """Decorators are calls made on behalf of the decorated def: their sites belong to it. Inside a
        function they are also calls that function makes when it runs the `def` statement (a test
        defining `@app.route("/")` views calls route and the decorator route returns): the calls are
        sited under it too."""
        out: list[Chain] = []
        qual = f"{self.qual()}.{node.name}" if self.scope else node.name
        runner = self.qual() if self.scope and self.scope_kind[-1] == "function" else None
        for dec in node.decorator_list:
            chain = chain_of(dec)
            if chain is not None and not isinstance(dec, ast.Call):
                line = dec.end_lineno or dec.lineno
                col = self.col(line, dec.end_col_offset or 0) - len(chain[-1])
                for scope in (qual, runner) if runner else (qual,):
                    self.facts.sites.append(Site(scope, line, max(col, 0), chain, CALL))
            else:
                self.scope.append(qual)
                if chain is not None:
                    # `@app.route("/")`: the decorator factory's result is called with the def
                    self.site(dec, chain, CALL)
                self.expr(dec)
                self.scope.pop()
                if runner and chain is not None and isinstance(dec, ast.Call):
                    self.site(dec, chain, CALL)
                    inner = chain_of(dec.func)
                    if inner is not None:
                        self.site(dec, inner, CALL)
            if chain:
                out.append(chain)
        return out

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        decorators = self.decorators(node)
        parent_kind = self.scope_kind[-1] if self.scope_kind else "module"
        qual = f"{self.qual()}.{node.name}" if self.scope else node.name
        self.bind_local(node.name)
        kind = "method" if parent_kind == "class" else "function"
        if node.name.startswith("test") and self.facts.is_test_file:
            kind = "test"
        start = min([d.lineno for d in node.decorator_list] + [node.lineno])
        end = node.end_lineno or node.lineno
        header_end = node.body[0].lineno - 1 if node.body else node.lineno
        if node.body and header_end < node.lineno:
            header_end = node.lineno
        d = Def(
            qual=qual, kind=kind, start=start, end=end, line=node.lineno,
            col=self.col(node.lineno, node.col_offset) + (6 if isinstance(node, ast.AsyncFunctionDef) else 0) + 4,
            signature=_signature(self.lines, node.lineno, header_end),
            doc=_first_doc_line(node), decorators=decorators, returns=type_chain(node.returns),
            call_returns=callable_result(node.returns),
        )
        old = self.defs_by_qual.get(qual)
        if old is not None and old.kind == kind and any(c[-1] == "overload" for c in old.decorators) \
                and not any(c[-1] == "overload" for c in decorators):
            # the implementation after `@overload` stubs is what runs (and what a trace sees)
            self.facts.defs[self.facts.defs.index(old)] = d
            self.defs_by_qual[qual] = d
            shadow = False
        elif old is not None:
            # redefinition (e.g. under if/else): keep the first node, still visit the body for sites
            d = Def(qual=qual, kind=kind, start=start, end=end, line=node.lineno, col=d.col)
            shadow = True
        else:
            self.defs_by_qual[qual] = d
            self.facts.defs.append(d)
            shadow = False
        # defaults and annotations are evaluated in the enclosing scope
        args = node.args
        for default in list(args.defaults) + [x for x in args.kw_defaults if x is not None]:
            self.expr(default)
        all_args = list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)
        if args.vararg:
            all_args.append(args.vararg)
        if args.kwarg:
            all_args.append(args.kwarg)
        for a in all_args:
            self.annotation(a.annotation)
        self.annotation(node.returns)
        self.scope.append(qual)
        self.scope_kind.append("function")
        self.local_names.append(set())
        positional = list(args.posonlyargs) + list(args.args)
        self.fill_params.append(
            {a.arg for a, dflt in zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True)
             if isinstance(dflt, ast.Constant) and dflt.value is None}
            | {a.arg for a, dflt in zip(args.kwonlyargs, args.kw_defaults, strict=True)
               if isinstance(dflt, ast.Constant) and dflt.value is None})
        saved_global = self.declared_global
        self.declared_global = set()
        self.words.append([node.name])
        # a test's or fixture's unannotated parameters are pytest fixtures, typed by the fixture's value
        takes_fixtures = kind == "test" or is_fixture(decorators)
        for a in all_args:
            self.local_names[-1].add(a.arg)
            if a.arg not in d.locals:
                typ = type_chain(a.annotation)
                if typ is None and a.annotation is None and takes_fixtures:
                    typ = (FIXTURE, a.arg)
                d.locals[a.arg] = typ
        is_static = any(c[-1] == "staticmethod" for c in decorators)
        if parent_kind == "class" and all_args and not is_static:
            # the first parameter of a method is the instance (or the class for classmethods)
            is_cls = any(c[-1] == "classmethod" for c in decorators) or all_args[0].arg == "cls"
            d.locals[all_args[0].arg] = ("<cls>",) if is_cls else ("<self>",)
        self.body(node.body)
        words = self.words.pop()
        if not shadow:
            d.words = " ".join(words)
        self.declared_global = saved_global
        self.fill_params.pop()
        self.local_names.pop()
        self.scope_kind.pop()
        self.scope.pop()

    def klass(self, node: ast.ClassDef) -> None:
        decorators = self.decorators(node)
        bases: list[Chain] = []
        for base in node.bases:
            chain = chain_of(base if not isinstance(base, ast.Subscript) else base.value)
            if chain and not any(c.endswith("()") for c in chain):
                bases.append(chain)  # an INHERITS edge, not a separate reference
                if isinstance(base, ast.Subscript):
                    self.expr(base.slice)
            else:
                self.expr(base)
        for kw in node.keywords:
            self.expr(kw.value)
        qual = f"{self.qual()}.{node.name}" if self.scope else node.name
        self.bind_local(node.name)
        start = min([d.lineno for d in node.decorator_list] + [node.lineno])
        end = node.end_lineno or node.lineno
        header_end = node.body[0].lineno - 1 if node.body else node.lineno
        d = Def(
            qual=qual, kind="class", start=start, end=end, line=node.lineno,
            col=self.col(node.lineno, node.col_offset) + 6,
            signature=_signature(self.lines, node.lineno, max(header_end, node.lineno)),
            doc=_first_doc_line(node), bases=bases, decorators=decorators,
        )
        shadow = qual in self.defs_by_qual
        if not shadow:
            self.defs_by_qual[qual] = d
            self.facts.defs.append(d)
        else:
            d = self.defs_by_qual[qual]
        self.scope.append(qual)
        self.scope_kind.append("class")
        self.words.append([node.name])
        self.body(node.body)
        words = self.words.pop()
        if not shadow:
            d.words = " ".join(words)
        self.scope_kind.pop()
        self.scope.pop()

    # -- expressions ---------------------------------------------------------------------
    def expr_store(self, target: ast.AST) -> None:
        """Visit the loads inside an assignment target (a.b[c] = ... loads a and c). Assigning an
        attribute is a reference of it: `app.debug = True` runs the `debug` property's setter."""
        if isinstance(target, ast.Attribute):
            chain = chain_of(target)
            if chain is not None and not chain[0].endswith("()") and (chain[0] not in _BUILTINS or self.is_local(chain[0])):
                self.site(target, chain, REF)
            self.expr(target.value)
        elif isinstance(target, ast.Subscript):
            self.expr(target.value)
            self.expr(target.slice)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.expr_store(elt)
        elif isinstance(target, ast.Starred):
            self.expr_store(target.value)

    def expr(self, node: ast.AST | None) -> None:
        if node is None:
            return
        stack = [node]
        while stack:
            cur = stack.pop()
            if isinstance(cur, ast.Call):
                chain = chain_of(cur.func)
                if chain is not None:
                    self.site(cur, chain, CALL)
                    self.add_word(chain[-1].rstrip("()"))
                    # attributes read on the way to the callee (`result.output.splitlines()` reads the
                    # `output` property) are references of their own
                    recv = cur.func.value if isinstance(cur.func, ast.Attribute) else None
                    while isinstance(recv, ast.Attribute):
                        c3 = chain_of(recv)
                        if c3 is not None and not c3[0].endswith("()") and (c3[0] not in _BUILTINS or self.is_local(c3[0])):
                            self.site(recv, c3, REF)
                        recv = recv.value
                    # the inner calls of the receiver (a.b().c()) and of the callee (`f(a)(b)`, whose
                    # own site is the call of f's result) need their own sites
                    inner = cur.func
                    while isinstance(inner, (ast.Attribute, ast.Call)):
                        if isinstance(inner, ast.Call):
                            stack.extend(inner.args)
                            stack.extend(k.value for k in inner.keywords)
                            c2 = chain_of(inner.func)
                            if c2 is not None:
                                self.site(inner, c2, CALL)
                            inner = inner.func
                        else:
                            inner = inner.value
                else:
                    stack.append(cur.func)
                stack.extend(cur.args)
                stack.extend(k.value for k in cur.keywords)
            elif isinstance(cur, ast.Name):
                if isinstance(cur.ctx, ast.Load):
                    name = cur.id
                    self.add_word(name)
                    if not self.is_local(name) and name not in _BUILTINS:
                        self.site(cur, (name,), REF)
                    elif name in _BUILTINS and not self.is_local(name) and name[:1].isupper():
                        pass
            elif isinstance(cur, ast.Attribute):
                chain = chain_of(cur)
                if chain is not None and isinstance(cur.ctx, ast.Load):
                    self.add_word(cur.attr)
                    head = chain[0]
                    if not head.endswith("()"):
                        # typed locals and parameters too: `ctx.path` reads a property of ctx's class
                        if head not in _BUILTINS or self.is_local(head):
                            self.site(cur, chain, REF)
                    elif head.endswith("()"):
                        stack.append(cur.value)
                else:
                    stack.append(cur.value)
            elif isinstance(cur, ast.Constant):
                if isinstance(cur.value, str):
                    if 2 < len(cur.value) <= 80:
                        self.add_word(cur.value)
                    if keep_literal(cur.value) and cur is not self.docstring:
                        self.literal(cur.lineno, cur.value)
            elif isinstance(cur, ast.JoinedStr):
                # an f-string is one template: its constant parts with "{}" for each formatted value
                template = "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
                                   for v in cur.values)
                if keep_literal(template):
                    self.literal(cur.lineno, template)
                for v in cur.values:
                    if isinstance(v, ast.FormattedValue):
                        stack.append(v.value)
                    elif isinstance(v, ast.Constant) and isinstance(v.value, str) and 2 < len(v.value) <= 80:
                        self.add_word(v.value)
            elif isinstance(cur, ast.Lambda):
                # lambda parameters shadow names only inside the lambda; approximating by ignoring them
                stack.append(cur.body)
                stack.extend(cur.args.defaults)
            elif isinstance(cur, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                bound: set[str] = set()
                for gen in cur.generators:
                    for sub in ast.walk(gen.target):
                        if isinstance(sub, ast.Name):
                            bound.add(sub.id)
                if self.local_names:
                    self.local_names[-1].update(bound)
                    stack.extend(child_nodes(cur))
                else:
                    # module/class-level comprehension: its variables must not become module refs
                    self.local_names.append(bound)
                    for child in child_nodes(cur):
                        self.expr(child)
                    self.local_names.pop()
            elif isinstance(cur, ast.NamedExpr):
                self.bind_target(cur.target)
                stack.append(cur.value)
            else:
                stack.extend(child_nodes(cur))


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """`list(ast.iter_child_nodes(node))`, same order, without its generator layers (extraction's hot path)."""
    out: list[ast.AST] = []
    for name in node._fields:
        v = getattr(node, name, None)
        if isinstance(v, ast.AST):
            out.append(v)
        elif v.__class__ is list:
            out.extend(x for x in v if isinstance(x, ast.AST))
    return out


def _is_type_checking(test: ast.expr) -> bool:
    chain = chain_of(test)
    return bool(chain) and chain[-1] == "TYPE_CHECKING"  # type: ignore[index]


def _literal_strings(node: ast.AST | None) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)):
        out = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return out
    return None


def _signature(lines: list[str], start: int, end: int) -> str:
    text = " ".join(line.strip() for line in lines[start - 1 : max(end, start)])
    text = re.sub(r"\s+", " ", text)
    if text.endswith(":"):
        text = text[:-1]
    elif ":" in text and ")" in text:
        # one-line def with a body on the same line
        close = text.rfind("):")
        if close != -1:
            text = text[: close + 1]
    return text[:MAX_SIGNATURE]


def _one_line(lines: list[str], start: int, end: int) -> str:
    text = lines[start - 1].strip() if 1 <= start <= len(lines) else ""
    if end > start:
        text += " ..."
    return text[:MAX_SIGNATURE]
