"""The syntactic pass: one file's text in, its facts out (definitions, imports, sites, types).

Pure: the result depends only on (path, text). It never raises on broken code (`parse.py` repairs
what it can, parso supplies at least the definitions); problems are returned in `errors`.

A *type* is stored as the chain (`facts.py`) of the call that would produce a value of it, so the
annotation `x: Repo` and the assignment `x = Repo()` both give ("Repo()",).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import re
from typing import Any, Protocol

from ctx_lsp.index.chains import (
    FIXTURE,
    callable_result,
    chain_of,
    child_nodes,
    first_line,
    is_cast,
    is_fixture,
    returned_name,
    type_chain,
    typevar_bound,
    value_chain,
)
from ctx_lsp.index.chunk_terms import chunk_term_counts
from ctx_lsp.index.facts import (
    CALL,
    MAX_SIGNATURE,
    REF,
    UNPARSABLE,
    Chain,
    Def,
    FileFacts,
    Import,
    Site,
    content_digest,
    is_test_path,
    split_lines,
)
from ctx_lsp.index.flowfacts import FlowWalk, walk_flows
from ctx_lsp.index.model import python_qualname
from ctx_lsp.index.parse import parse_tolerant, parso_defs


class MemberReplay(Protocol):
    """Facts of class members an earlier version of the file held (index/statement_reuse.py): a member
    whose text is unchanged has its body's facts copied, not walked."""

    def get(self, qual: str, digest: str) -> Any | None: ...

    def body(self, entry: Any, header_last: int, start: int) -> tuple[Def, list[Site], list[tuple[str, int, str]],
                                                                     list[Import], list[Def]]:
        """The old Def, then the facts of its body (sites, literals, imports, nested defs) with their
        lines moved to where the member now starts (`start`; its header now ends on `header_last`)."""
        ...

    def blanks(self, lines: list[str], first: int, last: int) -> dict[int, tuple[int, int, int, str, str]]:
        """Members whose old text lines [first, last] seem to hold, to blank before the parse: first
        line -> (last line, body's first line, its first statement's line, class, text digest). The walk
        proves them."""
        ...

    def flows(self, qual: str, digest: str, start: int) -> tuple[str, list[Any], tuple[str, ...]]:
        """A member's body flows (lines moved to `start`) and the attributes it stores (FlowReplay)."""
        ...

    def class_stored(self, quals: set[str]) -> dict[str, tuple[str, ...] | None]:
        """The attributes the top-level classes of these members stored in the old version."""
        ...


MAX_WORDS = 400
MAX_LITERALS = 2000  # per file: generated tables must not flood the literal index
MAX_LITERAL = 400
_BUILTINS = frozenset(dir(builtins))


def extract(path: str, text: str, digest: str | None = None) -> FileFacts:
    """Extract the facts of one file. Never raises."""
    if digest is None:
        digest = content_digest(text.encode("utf-8", "surrogatepass"))
    lines = split_lines(text)
    facts = FileFacts(path=path, digest=digest, lines=len(lines), is_test_file=is_test_path(path))
    tree, errors = parse_tolerant(text, lines)
    facts.errors.extend(errors)
    if tree is None:
        parso_defs(text, facts)
    else:
        visitor = _Visitor(facts, lines)
        visitor.run(tree)
        walk = walk_flows(tree, visitor.col)
        facts.flows = own_flows(walk.flows, facts.defs)
        if not facts.errors and not walk.gave_up:
            facts.tops = with_stored(visitor.statements, walk)
    facts.words = file_words(path, facts.words)
    facts.terms = _file_terms(text)
    facts.chunk_terms = chunk_term_counts(facts)
    return facts


def own_flows(flows: list[Any], defs: list[Def]) -> list[Any]:
    """`flows` with each one's scope (and a decorator flow's decorated def) named as extraction names
    it: a def defined again elsewhere is `name#2` (`_Visitor.function`), the flow walk knows only
    `name`. Each part of a walked name is the def of that name, under the part before it as named here,
    whose lines hold the flow; where none does (an `@overload` or branch that extraction files under
    the first def of its name) the part is kept as written, under that parent: the first def's name.
    Part by part, so a method of a class defined twice is scoped under the class that holds it."""
    if not any("#" in d.qual for d in defs):
        return flows
    children: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
    for d in defs:
        parent, _, last = d.qual.rpartition(".")
        children.setdefault((parent, python_qualname(last)), []).append((d.start, d.end, d.qual))
    memo: dict[tuple[str, int], str] = {}

    def named(qual: str, line: int) -> str:
        got = memo.get((qual, line))
        if got is None:
            cur = ""
            for part in qual.split("."):
                found = [(end - start, q) for start, end, q in children.get((cur, part), ()) if start <= line <= end]
                cur = min(found)[1] if found else f"{cur}.{part}" if cur else part
            got = memo[(qual, line)] = cur
        return got

    out = []
    for f in flows:
        qual, kind, line = f[0], f[1], f[2]
        name = named(f[5], line) if kind == "decor" else f[5]
        out.append((named(qual, line), kind, line, *f[3:5], name, *f[6:]))
    return out


def with_stored(statements: list[Any], walk: FlowWalk) -> list[Any]:
    """`_Visitor.statements` completed from the flow walk: each member gets the attributes it stores,
    and each statement the attributes its top-level classes store, as (class, attributes) pairs
    (FileFacts.tops; a later version's walk copies a member's flows only against the same set)."""
    out = []
    for first, last, names, words, digest, members in statements:
        if members:
            members = tuple((*m, walk.member_stored.get(m[0], ())) for m in members)
            classes = sorted({m[0].partition(".")[0] for m in members})
            stored = tuple((c, a) for c in classes if (a := walk.class_stored.get(c)) is not None)
        else:
            stored = ()
        out.append((first, last, names, words, digest, members, stored))
    return out


def file_words(path: str, module_words: str) -> str:
    """`FileFacts.words`: path words, then the module-level words and docstring (`_Visitor.run`)."""
    return " ".join([_path_words(path), module_words])[: MAX_WORDS * 8]


def lines_digest(lines: list[str], first: int, last: int) -> str:
    """Digest of lines [first, last] (1-based): how a checkout finds a statement whose text it kept
    (index/statement_reuse.py)."""
    return hashlib.blake2b("\n".join(lines[first - 1 : last]).encode("utf-8", "surrogatepass"),
                           digest_size=8).hexdigest()


def _file_terms(text: str) -> dict[str, int]:
    from ctx_lsp.retrieval.text import (
        term_counts,  # the one tokenizer of lexical search (no cycle: text imports nothing here)
    )

    # sorted: the counts of an edited file spliced from its parts (splice.py) are the same dict in the same order
    return dict(sorted(term_counts(text).items()))


_LITERAL_WORTH = re.compile(r"\s|^(?:[a-z_]+\.)?[A-Z]{1,2}\d{3,4}$|^-{0,2}[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+$")


def keep_literal(text: str) -> bool:
    """Literals a task may quote: messages (with a space), error codes (`admin.E108`, `W0611`) and
    keys (`unused-import`, `--ignore-paths`, `autodoc_typehints`: options, settings, message names)."""
    return 4 <= len(text) <= MAX_LITERAL and bool(_LITERAL_WORTH.search(text.strip()))


def _path_words(path: str) -> str:
    return " ".join(p for p in re.split(r"[/._\-]+", path) if p and p != "py")


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


class _Visitor:
    """One pass over the module collecting defs, imports and sites with their scopes."""

    def __init__(self, facts: FileFacts, lines: list[str], replay: MemberReplay | None = None) -> None:
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
        self.attempts: set[str] = set()  # top-level names the statement being visited defines or redefines
        # per top-level statement: (first line, last line, names it defines, the module-level words it
        # adds, digest of its text, its class's members: see `members`)
        self.statements: list[tuple[int, int, tuple[str, ...], tuple[str, ...], str, tuple[Any, ...]]] = []
        # the top-level class being walked: each function member whose name no other member of the class
        # binds, as (qual, digest of its text from its first decorator, the attributes it sets on the
        # class in order): what a later version's walk may copy instead of walking (`replay`)
        self.members: list[tuple[Any, ...]] = []  # (qual, digest, attributes set, body offsets: _body_offsets)
        self.contribs: list[tuple[str, Chain]] | None = None  # attributes the member being walked sets
        self.unique: frozenset[str] = frozenset()  # names bound once in the top-level class being walked
        self.replay: MemberReplay | None = replay
        self.replayed: set[str] = set()  # quals whose facts `replay` copied
        # per enclosing scope (module, then each def and class): the statement of its body being walked;
        # and per def, that statement where it was first defined (a redefinition inside the same `if`
        # or `try` statement extends it: `function`)
        self.level_stmt: list[ast.stmt | None] = [None]
        self.def_level: dict[str, ast.stmt | None] = {}
        self.redefined: dict[str, int] = {}  # qual -> how many defs with a node of their own bear it

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
        module_words = self.words[0]
        for stmt in tree.body:
            self.level_stmt[0] = stmt
            self.attempts = set()
            self.members = []
            before = len(module_words)
            try:
                self.stmt(stmt)
            except RecursionError:  # one statement nested too deeply for this walk: keep the others
                self.facts.errors.append(f"line {stmt.lineno}: nested too deeply; facts of this statement are partial")
                self._back_to_module()
            first = first_line(stmt)
            last = stmt.end_lineno or stmt.lineno
            self.statements.append((first, last, tuple(sorted(self.attempts)), tuple(module_words[before:]),
                                    lines_digest(self.lines, first, last), tuple(self.members)))
        self.facts.words = " ".join(module_words + ([self.facts.doc] if self.facts.doc else []))

    def attempt(self, qual: str) -> None:
        self.attempts.add(qual.partition(".")[0])

    def _back_to_module(self) -> None:
        """The scope state of module level, after a walk was abandoned somewhere inside a statement."""
        for stack in (self.scope, self.scope_kind, self.local_names, self.fill_params, self.guard):
            stack.clear()
        del self.words[1:]
        del self.level_stmt[1:]
        self.declared_global = set()
        self.docstring = None

    def body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.stmt(stmt)

    def _extends(self, old: Def, node: ast.FunctionDef | ast.AsyncFunctionDef, decorators: list[Chain],
                 qual: str) -> bool:
        """Whether redefining `old` by `node` extends it: a property's accessor, or another branch of
        the statement that first defined it, with no other def between (a node never spans a sibling)."""
        here = self.level_stmt[-1]
        return old.start <= first_line(node) and self._next_def_after(old) and (
            _is_accessor(node.name, decorators)
            or (here is not node and here is not None and self.def_level.get(qual) is here))

    def _next_qual(self, qual: str) -> str:
        """`qual#2`, `qual#3`, ...: the qualname of a redefinition with a node of its own."""
        n = self.redefined.get(qual, 1) + 1
        self.redefined[qual] = n
        return f"{qual}#{n}"

    def _next_def_after(self, old: Def) -> bool:
        """Whether no def recorded so far starts past `old`'s end (its own nested defs lie within it)."""
        for d in reversed(self.facts.defs):
            if d.start <= old.end:
                return True
            if d is not old:
                return False
        return True

    def scope_body(self, stmts: list[ast.stmt]) -> None:
        """The body of a def or class: a scope of its own (see `level_stmt`)."""
        self.level_stmt.append(None)
        for stmt in stmts:
            self.level_stmt[-1] = stmt
            self.stmt(stmt)
        self.level_stmt.pop()

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
            value = typevar_bound(node.value) or value_chain(node.value)
            for target in node.targets:
                self.assign_target(target, value, node)
                self.expr_store(target)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.expr(node.value)
            self.annotation(node.annotation)
            self.assign_target(node.target, type_chain(node.annotation) or value_chain(node.value), node,
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
                    self.assign_target(item.optional_vars, value_chain(item.context_expr), node)
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
                self.attempt(qual)
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
                    if self.contribs is not None and len(self.scope) == 2:
                        self.contribs.append((target.attr, value))
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
        if d.returns_call is None and isinstance(value, ast.Call) and not is_cast(value):
            callee = chain_of(value.func)  # `return option(*decls)`: option's decorator
            if callee is not None and not callee[-1].endswith("()"):
                d.returns_call = callee
        if d.returns is not None:
            return
        chain = value_chain(value)
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
                if isinstance(sub, ast.expr_context):
                    continue  # one shared Load()/Store() for every tree: positions set on it leak everywhere
                ast.copy_location(sub, node)
                sub.end_lineno = node.lineno  # type: ignore[attr-defined]
            # columns inside a string annotation are approximate (the string's own column)
            self.expr(parsed)
            return
        self.expr(node)

    def decorators(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, qual: str) -> list[Chain]:
        """Decorators are calls made on behalf of the decorated def: their sites belong to it. Inside a
        function they are also calls that function makes when it runs the `def` statement (a test
        defining `@app.route("/")` views calls route and the decorator route returns): the calls are
        sited under it too."""
        out: list[Chain] = []
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
        # a function member of a top-level class whose name no other member binds: its facts depend on
        # its own text only (with the class's name), so they can be recorded and replayed
        member = len(self.scope) == 1 and self.scope_kind[0] == "class" and node.name in self.unique
        parent_kind = self.scope_kind[-1] if self.scope_kind else "module"
        qual = f"{self.qual()}.{node.name}" if self.scope else node.name
        kind = "method" if parent_kind == "class" else "function"
        if node.name.startswith("test") and self.facts.is_test_file:
            kind = "test"
        old = self.defs_by_qual.get(qual)
        stub = implements = extending = False
        if old is not None:  # a redefinition (rare): its decorators' chains decide which kind
            chains = [c for c in map(chain_of, node.decorator_list) if c]
            stub = any(c[-1] == "overload" for c in chains)
            implements = old.kind == kind and not stub and any(c[-1] == "overload" for c in old.decorators)
            extending = not implements and old.kind == kind and self._extends(old, node, chains, qual)
        # a redefinition the first def stands for: another `@overload` stub, an accessor or other branch
        # extending it (`_extends`); any other has a node of its own, `name#2` (`@singledispatch`
        # registrations named `_`, a test class redefined, a def replacing a variable), so its calls
        # (those of its decorators too) come from the lines it spans
        shadow = old is not None and not implements and (stub or extending)
        own = old is not None and not implements and not shadow
        decorators = self.decorators(node, self._next_qual(qual) if own else qual)
        self.bind_local(node.name)
        start = first_line(node)
        end = node.end_lineno or node.lineno
        header_end = node.body[0].lineno - 1 if node.body else node.lineno
        if node.body and header_end < node.lineno:
            header_end = node.lineno
        d = Def(
            qual=qual, kind=kind, start=start, end=end, line=node.lineno,
            col=self.col(node.lineno, node.col_offset) + (6 if isinstance(node, ast.AsyncFunctionDef) else 0) + 4,
            # a redefinition with a node of its own reads with its decorators (`@handle.register(int)
            # def _(x)`): its name alone does not say which it is
            signature=_signature(self.lines, start if own else node.lineno, header_end),
            doc=_first_doc_line(node), decorators=decorators, returns=type_chain(node.returns),
            call_returns=callable_result(node.returns),
        )
        self.attempt(qual)
        extends: Def | None = None
        if implements:
            # the implementation after `@overload` stubs is what runs (and what a trace sees)
            assert old is not None
            self.facts.defs[self.facts.defs.index(old)] = d
            self.defs_by_qual[qual] = d
        elif shadow:
            # visit its body for sites, filed under the first def
            assert old is not None
            d = Def(qual=qual, kind=kind, start=start, end=end, line=node.lineno, col=d.col)
            if extending:
                # one name, so one node spanning all its definitions (their lines and words too)
                old.end = max(old.end, end)
                extends = old
        else:
            if own:
                qual = d.qual = f"{qual}#{self.redefined[qual]}"
            self.defs_by_qual[qual] = d
            self.def_level[qual] = self.level_stmt[-1]
            self.facts.defs.append(d)
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
        if shadow:
            # a redefinition's sites are the kept def's (its qualname): so are its parameters, which
            # would otherwise read as module names there (a name the kept def binds keeps its type)
            kept = self.defs_by_qual[qual].locals
            for name, typ in d.locals.items():
                kept.setdefault(name, typ)
        digest = lines_digest(self.lines, start, end) if member else ""
        entry = self.replay.get(qual, digest) if member and self.replay is not None and not shadow else None
        header_last = _header_last(node) if entry is not None else 0
        if entry is not None and node.body and first_line(node.body[0]) > header_last:
            self._replay_body(entry, d, qual, start, header_last)
            self.words.pop()
        else:
            if member:
                self.contribs = []
            self.scope_body(node.body)
            words = self.words.pop()
            if not shadow:
                d.words = " ".join(words)
            elif extends is not None and words:
                extends.words = f"{extends.words} {' '.join(words)}".strip()
            if member:
                self.members.append((qual, digest, tuple(self.contribs or ()), *_body_offsets(node, start)))
                self.contribs = None
        self.declared_global = saved_global
        self.fill_params.pop()
        self.local_names.pop()
        self.scope_kind.pop()
        self.scope.pop()

    def _replay_body(self, entry: Any, d: Def, qual: str, start: int, header_last: int) -> None:
        """The body facts of an unchanged member, copied from the version `replay` holds."""
        assert self.replay is not None
        old, sites, literals, imports, nested = self.replay.body(entry, header_last, start)
        self.facts.sites.extend(sites)
        self.facts.literals.extend(literals)  # past MAX_LITERALS too: the caller cuts the list as a walk would
        self.facts.imports.extend(imports)
        for nd in nested:
            self.facts.defs.append(nd)
            self.defs_by_qual.setdefault(nd.qual, nd)
            self.replayed.add(nd.qual)
        # what a body walk sets on its def (assignments, returns, words)
        d.locals = dict(old.locals)
        d.words, d.returns, d.returns_def, d.returns_call = old.words, old.returns, old.returns_def, old.returns_call
        d.doc = old.doc  # the body may have been blanked before parsing (statement_reuse._Replay.skeleton)
        owner = self.defs_by_qual[self.scope[-2]]
        contribs = entry.contribs
        for attr, value in contribs:
            owner.attrs.setdefault(attr, (qual, value))
        self.members.append((qual, entry.digest, contribs, entry.b0, entry.l0))
        self.replayed.add(qual)

    def klass(self, node: ast.ClassDef) -> None:
        qual = f"{self.qual()}.{node.name}" if self.scope else node.name
        if qual in self.defs_by_qual:
            qual = self._next_qual(qual)  # a class defined again: a node of its own (see `function`)
        decorators = self.decorators(node, qual)
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
        self.bind_local(node.name)
        start = first_line(node)
        end = node.end_lineno or node.lineno
        header_end = node.body[0].lineno - 1 if node.body else node.lineno
        d = Def(
            qual=qual, kind="class", start=start, end=end, line=node.lineno,
            col=self.col(node.lineno, node.col_offset) + 6,
            signature=_signature(self.lines, node.lineno, max(header_end, node.lineno)),
            doc=_first_doc_line(node), bases=bases, decorators=decorators,
        )
        self.attempt(qual.partition("#")[0])
        self.defs_by_qual[qual] = d
        self.facts.defs.append(d)
        top = not self.scope
        if top:
            self.unique = _bound_once(node.body)
        self.scope.append(qual)
        self.scope_kind.append("class")
        self.words.append([node.name])
        self.scope_body(node.body)
        if top:
            self.unique = frozenset()
        d.words = " ".join(self.words.pop())
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


def _body_offsets(node: ast.FunctionDef | ast.AsyncFunctionDef, start: int) -> tuple[int, int]:
    """Where a member's body begins, from its first line: its first statement's first line (decorators
    included) and that statement's own line; (-1, -1) when the body shares a line with the header
    (nothing to blank)."""
    first = first_line(node.body[0])
    return (first - start, node.body[0].lineno - start) if first > _header_last(node) else (-1, -1)


def _header_last(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """The last line of a def's name, parameters and return annotation. From the header's direct parts
    (each ends no earlier than what it holds), not ast.walk: that reaches the shared `Load()` context
    node, whose positions other code may have set."""
    a = node.args
    parts = [*a.posonlyargs, *a.args, *a.kwonlyargs, *a.defaults, *a.kw_defaults, a.vararg, a.kwarg, node.returns]
    return max([node.lineno] + [p.end_lineno or 0 for p in parts if p is not None])


def _bound_once(body: list[ast.stmt]) -> frozenset[str]:
    """Names a class body binds exactly once (defs, classes, assignment and import targets, at any
    depth outside nested defs): a name bound twice ties its members' facts together (the first
    definition wins, and a later body adds to the first def's locals)."""
    counts: dict[str, int] = {}
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            counts[node.name] = counts.get(node.name, 0) + 1
            continue  # their insides bind names of their own scopes
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            counts[node.id] = counts.get(node.id, 0) + 1
        elif isinstance(node, ast.alias):
            name = (node.asname or node.name).split(".")[0]
            counts[name] = counts.get(name, 0) + 1
        stack.extend(ast.iter_child_nodes(node))
    return frozenset(n for n, c in counts.items() if c == 1)


def _is_type_checking(test: ast.expr) -> bool:
    chain = chain_of(test)
    return bool(chain) and chain[-1] == "TYPE_CHECKING"  # type: ignore[index]


def _literal_strings(node: ast.AST | None) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)):
        out = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return out
    return None


def _signature(lines: list[str], start: int, end: int) -> str:
    """The def or class header on one line, as written. A header a formatter split over lines is
    joined without the spaces the joins would leave inside its brackets (`def f(\n    a,\n)` reads
    `def f(a,)`, not `def f( a, )`)."""
    text = ""
    for line in lines[start - 1 : max(end, start)]:
        part = _without_comment(line).strip()
        if text and part and not text.endswith(("(", "[", "{")) and not part.startswith((")", "]", "}")):
            text += " "
        text += part
    text = re.sub(r"\s+", " ", text)
    if text.endswith(":"):
        text = text[:-1]
    elif ":" in text and ")" in text:
        # one-line def with a body on the same line
        close = text.rfind("):")
        if close != -1:
            text = text[: close + 1]
    return text[:MAX_SIGNATURE]


def _without_comment(line: str) -> str:
    """`line` without a trailing `# comment` (a `#` inside a string literal is kept); joined into one
    line, a comment would swallow the rest of the header."""
    if "#" not in line:
        return line
    quote = ""
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 1
            elif line.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif c in "\"'":
            quote = line[i : i + 3] if line[i : i + 3] in ('"""', "'''") else c
            i += len(quote) - 1
        elif c == "#":
            return line[:i]
        i += 1
    return line


def _one_line(lines: list[str], start: int, end: int) -> str:
    text = lines[start - 1].strip() if 1 <= start <= len(lines) else ""
    if end > start:
        text += " ..."
    return text[:MAX_SIGNATURE]


_ACCESSORS = frozenset({"setter", "deleter", "getter"})
_DEF_KINDS = frozenset({"function", "method", "test", "class"})


def _is_accessor(name: str, decorators: list[Chain]) -> bool:
    """`@name.setter` (`.deleter`, `.getter`) on `def name`: another accessor of property `name`."""
    return any(len(c) == 2 and c[0] == name and c[1] in _ACCESSORS for c in decorators)
