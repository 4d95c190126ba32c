"""JSON-RPC 2.0 and LSP lifecycle conformance over pygls' `LanguageServerProtocol`.

pygls 2.1.1 leaves a client waiting forever in four cases; this layer answers them (upstream
behaviour in each method's comment):
- a request whose params lsprotocol cannot structure: InvalidParams (-32602) naming the field;
- a message that is not a JSON-RPC request (no "jsonrpc", a non-object, a bad id or method): InvalidRequest (-32600);
- a request after `shutdown`: InvalidRequest;
- a body that is not JSON: ParseError (-32700) with `"id": null` (`answer_unparsable`, called from the
  server's error reporter: the read loop parses before the protocol sees anything).
On `exit` it ends the process through `exit_now` (set by `run_server`) with the LSP exit code, 0 after
`shutdown` and 1 without: pygls' `start_io` swallows the `SystemExit` that carries it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Generator
from typing import Any

import attrs
from cattrs import transform_error
from cattrs.errors import ClassValidationError, IterableValidationError
from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
)
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

log = logging.getLogger("ctx_lsp.server")

# lsprotocol's range validators say "Position.line should be in range [0:2147483647], but was -1."
_VALIDATOR = re.compile(r"^[A-Za-z_][\w.]*\.([A-Za-z_]\w*) (should be .*?)\.?$")
_MAX_REASONS = 3


@attrs.define
class Rejected:
    """A message that could not be structured; `handle_message` answers it (requests only)."""

    error: JsonRpcException
    id: int | str | None = None
    kind: str = "request"  # or "notification" / "response": JSON-RPC forbids answering those
    jsonrpc: str = "2.0"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _wire_field(path: str) -> str:
    """`$.params.text_document.uri` -> `textDocument.uri` (the names the client sent)."""
    parts = [p for p in re.split(r"\.|\[|\]", path) if p]
    if parts[:2] == ["$", "params"]:
        parts = parts[2:]
    return ".".join(_camel(p) for p in parts if p != "$")


def _format_leaf(exc: BaseException, cl: type | None) -> str:
    if isinstance(exc, KeyError):
        return "missing"
    if isinstance(exc, ValueError) and (m := _VALIDATOR.match(str(exc))):
        return f"attr {m.group(1)} {m.group(2)}"
    name = getattr(cl, "__name__", None)
    if cl is not None and name not in (None, "Union", "Optional"):
        return f"must be {name}"
    return "has an invalid value"


def describe_params_error(data: dict[str, Any], cause: BaseException | None) -> str:
    """A client-facing reason why `data["params"]` could not be structured, naming the fields."""
    params = data.get("params")
    if not isinstance(params, (dict, list)):
        return f"params must be an object, got {json.dumps(params)[:40]}"
    if not isinstance(cause, (ClassValidationError, IterableValidationError)):
        return f"params could not be read: {type(cause).__name__}: {cause}" if cause else "params could not be read"
    reasons: list[str] = []
    for line in transform_error(cause, format_exception=_format_leaf):
        text, _, path = line.rpartition(" @ ")
        field = _wire_field(path)
        if text == "missing":
            reasons.append(f"missing required field '{field}'")
        elif text.startswith("attr "):
            _, attr, rule = text.split(" ", 2)
            reasons.append(f"field '{'.'.join(p for p in (field, attr) if p)}' {rule}")
        else:
            reasons.append(f"field '{field}' {text}" if field else f"params {text}")
    more = len(reasons) - _MAX_REASONS
    return "; ".join(reasons[:_MAX_REASONS]) + (f" (and {more} more)" if more > 0 else "")


def _envelope_problem(data: dict[str, Any]) -> str | None:
    """Why `data` is not a JSON-RPC 2.0 request, notification or response (None when it is one)."""
    if data.get("jsonrpc") != "2.0":
        return f"'jsonrpc' must be \"2.0\", got {json.dumps(data.get('jsonrpc'))[:40]}"
    if "id" in data and (isinstance(data["id"], bool) or not isinstance(data["id"], (int, str))):
        return f"'id' must be an integer or a string, got {json.dumps(data['id'])[:40]}"
    if "method" in data and not isinstance(data["method"], str):
        return f"'method' must be a string, got {json.dumps(data['method'])[:40]}"
    if "method" not in data and ("id" not in data or not ("result" in data or "error" in data)):
        return "a message needs 'method' (request, notification) or 'id' with 'result' or 'error' (response)"
    return None


def _id_of(data: Any) -> int | str | None:
    msg_id = data.get("id") if isinstance(data, dict) else None
    return msg_id if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool) else None


class ConformantProtocol(LanguageServerProtocol):
    """`LanguageServerProtocol` that answers every request, as JSON-RPC 2.0 and LSP require."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shutdown_received = False
        self.exit_code: int | None = None  # set by `exit`: 0 after `shutdown`, else 1
        self.exit_now: Callable[[int], None] | None = None  # ends the process with the exit code

    # -- decoding ----------------------------------------------------------------------------------
    def structure_message(self, data: dict[str, Any]) -> Any:
        # json.loads' object_hook: called for every object, innermost first; only the top-level one
        # (with "jsonrpc") is a message. pygls raises here on a structuring failure, out of json.loads
        # into its read loop, which logs and answers nothing.
        if "jsonrpc" not in data:
            return data  # nested objects; a top-level one is rejected by handle_message
        problem = _envelope_problem(data)
        if problem is not None:
            return Rejected(JsonRpcInvalidRequest(message=f"Invalid Request: {problem}"), _id_of(data))
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            method = data.get("method")
            if method is None:  # a response of the client to one of our requests
                log.error("could not read the client's response %r: %s", data.get("id"), exc.__cause__)
                return Rejected(JsonRpcInternalError(message=f"unreadable response: {exc.__cause__}"),
                                _id_of(data), kind="response")
            reason = describe_params_error(data, exc.__cause__)
            log.warning("invalid params for %s: %s", method, reason)
            return Rejected(JsonRpcInvalidParams(message=f"Invalid params for {method}: {reason}"),
                            _id_of(data), kind="request" if "id" in data else "notification")

    def handle_message(self, message: Any) -> None:
        if isinstance(message, Rejected):
            if message.kind == "request":
                self.send_error(message.id, message.error)
            elif message.kind == "response" and message.id is not None:
                # pygls drops a response it cannot structure, so the awaiting request would hang
                future = self._request_futures.pop(message.id, None)
                if future is not None and not future.done():
                    future.set_exception(message.error)
            return
        if not attrs.has(type(message)):  # no "jsonrpc" key, or not an object at all
            self.send_error(_id_of(message), JsonRpcInvalidRequest(
                message="Invalid Request: not a JSON-RPC 2.0 message object"))
            return
        method = getattr(message, "method", None)
        is_request = method is not None and getattr(message, "id", None) is not None
        if is_request and self.shutdown_received:
            # pygls drops every message after shutdown without a word; LSP wants InvalidRequest
            self.send_error(message.id, JsonRpcInvalidRequest(
                message=f"Invalid Request: {method} after shutdown (only 'exit' is accepted)"))
            return
        if is_request and method == types.SHUTDOWN:
            self.shutdown_received = True  # from now on, even while shutdown itself runs
        super().handle_message(message)

    def send_error(self, msg_id: int | str | None, error: JsonRpcException) -> None:
        if msg_id is not None:
            self._send_response(msg_id, error=error.to_response_error())
            return
        # lsprotocol drops a None id when unstructuring; JSON-RPC wants an explicit "id": null
        self._send_data({"jsonrpc": "2.0", "id": None,
                         "error": self._converter.unstructure(error.to_response_error())})

    def answer_unparsable(self, error: BaseException) -> bool:
        """Answer a body the read loop could not parse as JSON; True when `error` was that."""
        if not isinstance(error, (json.JSONDecodeError, UnicodeDecodeError, RecursionError)):
            return False
        log.warning("unparsable message: %s", error)
        self.send_error(None, JsonRpcParseError(message=f"Parse error: {type(error).__name__}: {error}"[:300]))
        return True

    # -- lifecycle -----------------------------------------------------------------------------------
    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        # pygls exits through sys.exit(0 if shutdown else 1), but start_io catches SystemExit and
        # returns normally (the process ended with 0), and only after asyncio.run has joined every
        # worker thread (a running indexing or jedi call kept the process alive): `exit_now` ends it
        self.exit_code = 0 if self.shutdown_received else 1
        if self.exit_now is None:
            yield from super().lsp_exit(*args)
            return
        if (user_handler := self.fm.features.get(types.EXIT)) is not None:
            yield user_handler, args, None
        self.exit_now(self.exit_code)
