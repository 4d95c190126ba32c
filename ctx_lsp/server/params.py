"""Validation of the params objects of the custom commands and requests (docs/protocol.md).

Commands take one params object; a malformed one is answered with InvalidParams naming the field.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

UINTEGER_MAX = 2**31 - 1  # LSP's `uinteger` (lines, characters): lsprotocol raises ValueError above it


def invalid(message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message=message)


def params_object(method: str, args: tuple[Any, ...] | list[Any] | dict[str, Any] | None) -> dict[str, Any]:
    """The one params object of a command (`arguments: [{...}]`), or {} when there are no arguments."""
    if args is None:
        return {}
    if isinstance(args, dict):
        return args
    if len(args) == 0:
        return {}
    if len(args) > 1:
        raise invalid(f"{method} takes one params object argument, got {len(args)} arguments")
    obj = args[0]
    if obj is None or obj == []:
        return {}  # Lua clients encode an empty table `{}` as `[]`
    if not isinstance(obj, dict):
        raise invalid(f"{method}: the argument must be a params object, got {type(obj).__name__}")
    return obj


def string(obj: dict[str, Any], name: str, *, required: bool = True, nonempty: bool = True) -> str | None:
    v = obj.get(name)
    if v is None:
        if required:
            raise invalid(f"missing required field '{name}'")
        return None
    if not isinstance(v, str):
        raise invalid(f"field '{name}' must be a string, got {type(v).__name__}")
    if nonempty and not v.strip():
        raise invalid(f"field '{name}' must not be empty")
    return v


MAX_BUDGET = 200_000  # tokens, the most the MCP tools take too


def positive_int(obj: dict[str, Any], name: str, default: int, maximum: int | None = None) -> int:
    v = obj.get(name)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v <= 0:
        raise invalid(f"field '{name}' must be a positive integer, got {v!r}")
    if maximum is not None and v > maximum:
        raise invalid(f"field '{name}' must be at most {maximum}, got {v!r}")
    return int(v)


def position(obj: dict[str, Any], name: str = "position", *, required: bool = True) -> types.Position | None:
    v = obj.get(name)
    if v is None:
        if required:
            raise invalid(f"missing required field '{name}'")
        return None
    if not isinstance(v, dict):
        raise invalid(f"field '{name}' must be an object {{line, character}}, got {type(v).__name__}")
    out: dict[str, int] = {}
    for key in ("line", "character"):
        x = v.get(key)
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise invalid(f"field '{name}.{key}' must be a non-negative integer, got {x!r}")
        if x > UINTEGER_MAX:
            raise invalid(f"field '{name}.{key}' must be at most {UINTEGER_MAX}, got {x!r}")
        out[key] = x
    return types.Position(line=out["line"], character=out["character"])


def choice(obj: dict[str, Any], name: str, allowed: tuple[str, ...]) -> str:
    v = string(obj, name)
    if v not in allowed:
        raise invalid(f"field '{name}' must be one of {', '.join(allowed)}, got {v!r}")
    return v  # type: ignore[return-value]
