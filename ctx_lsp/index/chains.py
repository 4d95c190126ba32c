"""Expressions as chains (see `facts.py`): a name, attribute or call chain, the type an annotation
names, a value's chain seen through `cast` and TypeVar bounds. Pure functions over `ast` nodes,
shared by extraction (`extract.py`) and callback flow facts (`flowfacts.py`).
"""

from __future__ import annotations

import ast

from ctx_lsp.index.facts import UNPARSABLE, Chain


def first_line(node: ast.stmt) -> int:
    """A statement's first line, its decorators included."""
    return min([d.lineno for d in getattr(node, "decorator_list", ())] + [node.lineno])


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
        elif is_cast(value):
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


def value_chain(node: ast.AST | None) -> Chain | None:
    """The chain of an assigned value when it can name a type or symbol (calls and plain names)."""
    if node is None:
        return None
    if isinstance(node, ast.Await):
        node = node.value
    if isinstance(node, _BUILTIN_VALUES):
        return EXT_CHAIN
    if isinstance(node, ast.Constant):
        return EXT_CHAIN if node.value is not None and node.value is not ... else None
    if is_cast(node):
        return value_chain(node.args[1])  # type: ignore[attr-defined]
    return chain_of(node)


def is_cast(node: ast.AST) -> bool:
    """`cast(T, x)` / `typing.cast(T, x)` / `t.cast(T, x)`: x at run time."""
    if not isinstance(node, ast.Call) or len(node.args) != 2:
        return False
    head = chain_of(node.func)
    return head is not None and head[-1] == "cast"


def typevar_bound(node: ast.AST | None) -> Chain | None:
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
