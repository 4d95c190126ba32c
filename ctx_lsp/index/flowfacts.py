"""Where function values go: the syntactic half of the callback flow analysis (see flow.py).

Frameworks call user code through values, not names: flask stores a view in
`self.view_functions[endpoint] = view_func` and later runs
`self.ensure_sync(self.view_functions[rule.endpoint])(**args)`. No call site names the view, so the
static binder cannot link them. This pass records, per def scope, the syntactic steps a function
value can take. bind.py resolves them to per-file constraints, and flow.py propagates them over the
workspace.

A flow is a tuple `(scope, kind, line, col, chain, name)`:
- `params`: the def `scope`'s parameter names, in order (`chain`; `name` is ""), then `**name` for
  its `**kwargs` parameter if it has one.
- `spread`: the call of `chain` passes `**name`, the `**kwargs` parameter of this or an enclosing
  def, on.
- `kwstore`: the `**kwargs` parameter `chain[0]` (of this or an enclosing def) gets `name` under key `chain[1]`
  (`kwargs.setdefault("callback", show_help)`, `kwargs["callback"] = f`).
- `store`: `self.<chain[0]>` (or an item of it, or a list appended to) receives `name`.
- `load`: local `name` receives an item of `self.<chain[0]>` (subscript, `.get`, a `for` loop).
- `arg`: the call of `chain` (a callee chain as in sites) gets `name` as argument `pos\\0name`
  (`pos` is the index, or `=keyword`).
- `decor`: the def `name` is passed to the decorator `chain` (a call-of-result chain for factories).
- `callvar`: local or parameter `name` is called.
- `callattr`: an item of `self.<chain[0]>` is called.
- `callwrap`: `chain(x)(...)`: what the call of `chain` returns is called, with `x` as its first
  argument (`name` is a local, or `@attr` for an item of `self.attr`).
- `returns`: the def `scope` returns its local or parameter `name` (`ensure_sync(f)` returns f).
- `alias`: local `name` receives local `chain[0]` or an item of it (`handler = handler_map.get(cls)`).
- `result`: local `name` receives what the call of `chain` returns (`handler = self._find(e)`).
- `callself`: `self.<chain[0]>(...)` calls an instance attribute that some method of the class
  assigns from a name (`self.callback = callback`), not a method.

An argument or a called name is followed when it can hold a function: a parameter, a local that
received a call's result, a stored item or another such local, or a module-level name.
"""

from __future__ import annotations

import ast
import builtins
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from ctx_lsp.index.chains import chain_of, child_nodes, first_line
from ctx_lsp.index.facts import Chain

Flow = tuple[str, str, int, int, Chain, str]


class FlowReplay(NamedTuple):
    """Bodies a walk copies instead of walking (index/statement_reuse.py blanks the unchanged methods of
    a changed class before parsing): `members` maps a method's first line (decorators included) to its
    qual, the flows its body gave in the earlier version (lines already moved) and the attributes it
    stores; `classes` maps each such method's top-level class to the attributes that class stored then.
    The copied flows are exact only if the class stores the same attributes now (its methods' pending
    flows were kept against that set), so the walk raises ReplayMismatch when it does not."""

    members: dict[int, tuple[str, list[Flow], tuple[str, ...]]]
    classes: dict[str, tuple[str, ...] | None]


class ReplayMismatch(Exception):
    """A FlowReplay that cannot be exact: walk that class's methods (`cls`), or the full text (no `cls`)."""

    def __init__(self, message: str, cls: str = "") -> None:
        super().__init__(message)
        self.cls = cls


class FlowWalk(NamedTuple):
    flows: list[Flow]
    # per top-level class: the attributes its methods store from a name (None: the name is bound by two
    # top-level classes); per function of a top-level class: the attributes it stores
    class_stored: dict[str, tuple[str, ...] | None]
    member_stored: dict[str, tuple[str, ...]]
    gave_up: bool  # a statement was too deep for the walk: its flows are partial

_NO_CALLS = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)

_APPENDERS = frozenset({"append", "add", "appendleft", "insert", "setdefault"})
_ITEM_READERS = frozenset({"get", "values", "items", "pop", "copy"})
_ITER_WRAPPERS = frozenset({"reversed", "list", "tuple", "iter", "sorted", "chain"})
_BUILTINS = frozenset(dir(builtins))


def _self_attr(node: ast.AST | None) -> str | None:
    """`self.a`, `self.a[k]`, `self.a[k][j]`, `self.a.get(k)`, `self.a.setdefault(k, [])`, ... -> "a"."""
    return _attr_of_self(_item_base(node))


def _attr_of_self(base: ast.AST | None) -> str | None:
    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "self":
        return base.attr
    return None


def _item_base(node: ast.AST | None) -> ast.AST | None:
    """The container an item expression reads from: strips subscripts, item readers and iteration
    wrappers down to the first node that is none of them."""
    while node is not None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return node
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in (_ITEM_READERS | {"setdefault"}):
            node = node.func.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in _ITER_WRAPPERS and node.args:
            node = node.args[0]
        else:
            return node
    return None


class _Walker:
    def __init__(self, col: Callable[[int, int], int], replay: FlowReplay | None = None) -> None:
        self.col = col  # (line, utf-8 byte column) -> code-point column, as sites count them
        self.out: list[Flow | None] = []  # None: a pending flow dropped (see add_if_stored)
        self.scope: list[str] = []
        self.kinds: list[str] = []
        self.names: list[set[str]] = []  # parameters and assigned names of each function scope
        self.params: list[set[str]] = []  # parameters of each scope (empty for classes)
        self.fed: list[set[str]] = []  # locals of each scope that received a call's result or an item
        # per enclosing class: instance attributes its methods assign from a plain name
        # (`self.callback = callback`), and the flows that only count if their attribute is one of
        # them, kept until the class body has been walked
        self.stored: list[set[str]] = []
        self.pending: list[list[tuple[int, str]]] = []  # (index in `out`, attribute)
        self.kwparam: list[str] = []  # per scope: its `**kwargs` parameter's name ("" for none, classes)
        self._quals: dict[tuple[str, ...], str] = {}
        self.replay = replay
        self.replayed = 0
        self.class_stored: dict[str, tuple[str, ...] | None] = {}
        self.member_stored: dict[str, tuple[str, ...]] = {}
        self.member_attrs: set[str] | None = None  # what the function of a top-level class being walked stores
        self.gave_up = False

    def qual(self) -> str:
        # one string per scope, shared by all its flows (Django has ~100k flows)
        key = tuple(self.scope)
        q = self._quals.get(key)
        if q is None:
            q = self._quals[key] = ".".join(self.scope)
        return q

    def add(self, kind: str, node: ast.AST, chain: Chain, name: str) -> None:
        if not self.scope or self.kinds[-1] != "function":
            return  # module and class bodies run at import time: nothing to flow into yet
        line, col = self.position(node)
        self.out.append((self.qual(), kind, line, col, chain, name))

    def position(self, node: ast.AST) -> tuple[int, int]:
        """Where extract's site for this call (or decorator) is: the callee's last name."""
        target = node.func if isinstance(node, ast.Call) else node
        while isinstance(target, ast.Call):
            target = target.func
        if isinstance(target, ast.Attribute) and target.end_lineno is not None:
            line = target.end_lineno
            return line, max(self.col(line, target.end_col_offset or 0) - len(target.attr), 0)
        line = getattr(target, "lineno", 0)
        return line, max(self.col(line, getattr(target, "col_offset", 0)), 0)

    def may_hold_function(self, name: str) -> bool:
        """Whether an argument name can carry a function value worth following: a parameter of an
        enclosing function (callbacks are passed on through parameters), or a module-level name that
        is not a class, a constant or a builtin. Other locals hold data far more often than
        functions, and following them costs memory on large workspaces."""
        if self.local(name):
            return any(kind == "function" and (name in params or name in fed)
                       for kind, params, fed in zip(self.kinds, self.params, self.fed, strict=True))
        return name not in _BUILTINS and not name[:1].isupper()

    def feed(self, name: str) -> None:
        if self.fed:
            self.fed[-1].add(name)

    def local(self, name: str) -> bool:
        """A parameter or assigned name of the innermost function or of one it is nested in."""
        return any(kind == "function" and name in names for kind, names in zip(self.kinds, self.names, strict=True))

    def run(self, tree: ast.Module) -> list[Flow]:
        for node in tree.body:
            try:
                self.stmt(node)
            except RecursionError:  # nested too deeply for this walk: the flows of the other statements stand
                self.gave_up = True
                for pend in self.pending:
                    for idx, _ in pend:
                        self.out[idx] = None
                for stack in (self.scope, self.kinds, self.names, self.params, self.fed, self.stored, self.pending,
                              self.kwparam):
                    stack.clear()
                self.member_attrs = None
        if self.replay is not None and self.replayed != len(self.replay.members):
            raise ReplayMismatch("a blanked body was not copied")
        return [f for f in self.out if f is not None]

    def stmts(self, body: list[ast.stmt]) -> None:
        for node in body:
            self.stmt(node)

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if self.kinds and self.kinds[-1] == "function":
                self.names[-1].add(node.name)  # a closure: `return view` hands it out
                self.fed[-1].add(node.name)  # and it is a function value worth following
            self.function(node)
            return
        if isinstance(node, ast.ClassDef):
            top = not self.scope
            replayed_before = self.replayed
            self.scope.append(node.name)
            self.kinds.append("class")
            self.names.append(set())
            self.params.append(set())
            self.fed.append(set())
            self.stored.append(set())
            self.pending.append([])
            self.kwparam.append("")
            self.stmts(node.body)
            self.kwparam.pop()
            stored = self.stored.pop()
            for idx, wanted in self.pending.pop():
                if wanted not in stored:
                    self.out[idx] = None  # dropped at the end of the walk
            if top:
                attrs = tuple(sorted(stored))
                self.class_stored[node.name] = None if node.name in self.class_stored else attrs
                if self.replayed != replayed_before and (
                        self.replay is None or self.replay.classes.get(node.name) != attrs
                        or self.class_stored[node.name] is None):
                    raise ReplayMismatch(f"class {node.name} stores other attributes now", node.name)
            self.fed.pop()
            self.params.pop()
            self.names.pop()
            self.kinds.pop()
            self.scope.pop()
            return
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and self.names:
                    self.names[-1].add(target.id)
            value = node.value
            if isinstance(value, ast.Name):
                for target in node.targets:
                    attr = _self_attr(target)
                    if attr is not None:
                        self.add("store", node, (attr,), value.id)
                        if self.stored and isinstance(target, ast.Attribute):
                            self.stored[-1].add(attr)
                            if self.member_attrs is not None and len(self.stored) == 1:
                                self.member_attrs.add(attr)
                    key = self.kwargs_key(target)
                    if key is not None:
                        self.add("kwstore", node, key, value.id)
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.assigned(node, target.id, value)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            if isinstance(node.target, ast.Name):
                if self.names:
                    self.names[-1].add(node.target.id)
                self.assigned(node, node.target.id, node.iter, iterated=True)
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Name) and self.local(node.value.id):
            self.add("returns", node, (), node.value.id)
        for child in child_nodes(node):
            if isinstance(child, ast.stmt):
                self.stmt(child)
            elif isinstance(child, ast.expr):
                self.expr(child)

    def assigned(self, node: ast.stmt, name: str, value: ast.expr, iterated: bool = False) -> None:
        """Local `name` receives `value` (or, `iterated`, its items)."""
        container = _item_base(value)  # `self.a[k]` -> self.a; `x.get(k)`, `x` -> x
        attr = _attr_of_self(container)
        if attr is not None:
            self.add("load", node, (attr,), name)
            self.feed(name)
            return
        if isinstance(container, ast.Name) and self.local(container.id) and self.may_hold_function(container.id):
            self.add("alias", node, (container.id,), name)
            self.feed(name)
            return
        if isinstance(value, ast.Await):
            value = value.value
        if isinstance(value, ast.Call) and not iterated:
            chain = chain_of(value.func)
            if chain is not None and not (chain[0] in _BUILTINS and not self.local(chain[0])):
                self.add("result", value, chain, name)
                self.feed(name)

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        qual = ".".join(self.scope + [node.name])
        member = len(self.kinds) == 1 and self.kinds[0] == "class"  # a function of a top-level class
        for dec in node.decorator_list:
            chain = chain_of(dec)
            if chain is not None:
                # evaluated where the def statement runs, module and class bodies included
                if isinstance(dec, ast.Call):
                    line, col = self.position(dec)
                else:
                    line = dec.end_lineno or dec.lineno
                    col = max(self.col(line, dec.end_col_offset or 0) - len(chain[-1]), 0)
                self.out.append((self.qual(), "decor", line, col, chain, qual))
            self.expr(dec)
        args = node.args
        params = [a.arg for a in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs)]
        kwparam = args.kwarg.arg if args.kwarg is not None else ""
        self.scope.append(node.name)
        self.kinds.append("function")
        self.names.append(set(params))
        self.params.append(set(params))
        self.fed.append(set())
        self.kwparam.append(kwparam)
        self.add("params", node, tuple(params) + ((f"**{kwparam}",) if kwparam else ()), "")
        copied = self.replay.members.get(first_line(node)) if self.replay is not None and member else None
        if copied is not None:
            if copied[0] != qual:
                raise ReplayMismatch(f"{qual} is not the blanked {copied[0]}")
            self.out.extend(copied[1])
            self.stored[-1].update(copied[2])
            self.member_stored[qual] = copied[2]
            self.replayed += 1
        elif member:
            self.member_attrs = set()
            self.stmts(node.body)
            self.member_stored[qual] = tuple(sorted(self.member_attrs))
            self.member_attrs = None
        else:
            self.stmts(node.body)
        self.kwparam.pop()
        self.fed.pop()
        self.params.pop()
        self.names.pop()
        self.kinds.pop()
        self.scope.pop()

    def expr(self, node: ast.expr) -> None:
        # ast.walk's order (breadth first), without its generator layers and without the nodes that
        # can hold no call (names, constants, load/store contexts): the hottest loop of extraction
        todo: deque[ast.AST] = deque((node,))
        pop, push = todo.popleft, todo.append
        AST, Call, NamedExpr, skip = ast.AST, ast.Call, ast.NamedExpr, _NO_CALLS
        while todo:
            sub = pop()
            if sub.__class__ is Call:
                self.call(sub)  # type: ignore[arg-type]  # the class test above
            elif sub.__class__ is NamedExpr and self.names:
                self.names[-1].add(sub.target.id)  # type: ignore[attr-defined]  # the class test above
            for name in sub._fields:
                v = getattr(sub, name, None)
                if v.__class__ is list:
                    for x in v:
                        if isinstance(x, AST) and not isinstance(x, skip):
                            push(x)
                elif isinstance(v, AST) and not isinstance(v, skip):
                    push(v)

    def call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and self.local(func.id):
            self.add("callvar", node, (), func.id)
        elif isinstance(func, ast.Subscript) and (item_of := _self_attr(func)) is not None:
            self.add("callattr", node, (item_of,), "")
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            self.add_if_stored("callself", node, (func.attr,), "", func.attr)
        elif isinstance(func, ast.Call) and func.args:
            inner = chain_of(func.func)
            first = func.args[0]
            if inner is not None:
                if isinstance(first, ast.Name) and self.local(first.id):
                    self.add("callwrap", node, inner, first.id)
                elif (stored := _self_attr(first)) is not None:
                    self.add("callwrap", node, inner, "@" + stored)
        if isinstance(func, ast.Attribute) and func.attr == "setdefault" and len(node.args) == 2 \
                and isinstance(node.args[1], ast.Name):
            key = self.kwargs_key(ast.Subscript(value=func.value, slice=node.args[0]))
            if key is not None:
                self.add("kwstore", node, key, node.args[1].id)
        for kw in node.keywords:
            if kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id in self.kwparam \
                    and self.kinds and self.kinds[-1] == "function":
                spread = chain_of(func)
                if spread is not None:
                    self.add("spread", node, spread, kw.value.id)
        if isinstance(func, ast.Attribute) and func.attr in _APPENDERS and node.args:
            attr = _self_attr(func.value)
            last = node.args[-1]
            if attr is not None and isinstance(last, ast.Name):
                self.add("store", node, (attr,), last.id)
        chain = chain_of(func)
        if chain is None or (chain[0] in _BUILTINS and not self.local(chain[0])):
            return  # print(f), isinstance(f, X): a builtin never stores what it is given
        for i, a in enumerate(node.args):
            name = self.argument(a)
            if name is not None:
                self.add_if_stored("arg", node, chain, f"{i}\0{name}", name[1:] if name[0] == "@" else "")
        for kw in node.keywords:
            name = self.argument(kw.value) if kw.arg is not None else None
            if name is not None:
                self.add_if_stored("arg", node, chain, f"={kw.arg}\0{name}", name[1:] if name[0] == "@" else "")

    def kwargs_key(self, target: ast.AST) -> tuple[str, str] | None:
        """`kwargs["key"]` where kwargs is the `**` parameter of this or an enclosing def -> (kwargs, key)."""
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                and target.value.id in self.kwparam and target.value.id \
                and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
            return (target.value.id, target.slice.value)
        return None

    def argument(self, value: ast.expr) -> str | None:
        """How an argument that can carry a function is named in an `arg` flow: the variable, or
        `@attr` for an instance attribute the class stores a name in (`ctx.invoke(self.callback)`)."""
        if isinstance(value, ast.Name):
            return value.id if self.may_hold_function(value.id) else None
        if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id == "self":
            return "@" + value.attr  # kept if the class stores a name there (`add_if_stored`)
        return None

    def add_if_stored(self, kind: str, node: ast.AST, chain: Chain, name: str, attr: str) -> None:
        """Add a flow now, or, when it is about instance attribute `attr`, once the class is walked
        and only if one of its methods assigns `attr` from a name."""
        if not attr:
            self.add(kind, node, chain, name)
        elif self.pending and self.scope and self.kinds[-1] == "function":
            # in walk order, dropped at the class's end unless a method stores `attr`: a method's flows
            # are one run after its `params` flow, which a later version can copy (FlowReplay)
            line, col = self.position(node)
            self.pending[-1].append((len(self.out), attr))
            self.out.append((self.qual(), kind, line, col, chain, name))


def flow_facts(tree: ast.Module, col: Callable[[int, int], int]) -> list[Flow]:
    """The flows of one parsed module (see the module docstring). `col` converts (line, utf-8 byte
    column) to the code-point column extract's sites use. Never raises on valid trees."""
    return _Walker(col).run(tree)


def walk_flows(tree: ast.Module, col: Callable[[int, int], int], replay: FlowReplay | None = None) -> FlowWalk:
    """flow_facts with what a later version's walk needs to copy method bodies (FlowWalk). Raises
    ReplayMismatch only with a `replay` that cannot be exact."""
    w = _Walker(col, replay)
    flows = w.run(tree)
    return FlowWalk(flows, w.class_stored, w.member_stored, w.gave_up)
