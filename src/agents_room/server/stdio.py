"""The stdio transport with an answer for every line it cannot take.

The SDK's stdio reader validates each line as a JSON-RPC message and, when that fails, hands
the dispatcher the exception, which logs it and drops it: a request the SDK's parser refuses
(a lone surrogate escape, which Python's own ``json`` reads; nesting about 200 deep; a
request without a ``method``) got no answer at all, and its caller waited for its own
timeout. :func:`answering` wraps the read stream and answers each such line on the write
stream, as JSON-RPC 2.0 says: ``-32700`` (parse error) for a line that is not JSON the
parser takes, ``-32600`` (invalid request) for JSON that is no JSON-RPC message, with the
request's ``id`` where one can be read (Python's ``json`` is tried for it), else ``null`` for a
parse error. An invalid message without an id (a notification) is dropped, as before.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def _request_id(value: Any) -> tuple[bool, str | int | None]:
    """(whether ``value`` is a message with an id, that id)."""
    if isinstance(value, dict) and "id" in value:
        found = value["id"]
        if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
            return True, found
    return False, None


def answer(exc: Exception) -> types.JSONRPCError | None:
    """The error answer to a line the SDK's reader refused with ``exc``; None: none is owed."""
    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors()
    given = errors[0].get("input") if errors else None
    if errors and errors[0].get("type") == "json_invalid" and isinstance(given, str | bytes):  # the raw line
        try:
            parsed = json.loads(given)
        except (ValueError, RecursionError):
            parsed = None
        _, found = _request_id(parsed)
        return types.JSONRPCError(jsonrpc="2.0", id=found, error=types.ErrorData(
            code=PARSE_ERROR, message="Parse error: not JSON this server can read (a lone surrogate escape, "
            "nesting too deep, or not JSON at all)"))
    # The message itself: the input of an error on the whole message, or of a field missing
    # from it (each branch of the message union reports its own; a field's error carries
    # only the field's value).
    whole = [e.get("input") for e in errors if len(e.get("loc", ())) <= 1
             or (len(e.get("loc", ())) == 2 and e.get("type") == "missing")]
    has_id, found = next((r for r in map(_request_id, whole) if r[0]), (False, None))
    if not has_id:
        return None
    return types.JSONRPCError(jsonrpc="2.0", id=found, error=types.ErrorData(
        code=INVALID_REQUEST, message="Invalid Request: not a JSON-RPC 2.0 request (jsonrpc \"2.0\", an id, a "
        "string method, object params)"))


class Answering:
    """The SDK's read stream, less the lines it could not take: each is answered on
    ``write`` (:func:`answer`) and not passed on. Everything else of the stream (its
    ``last_context``, closing) is the inner stream's."""

    def __init__(self, inner: Any, write: Any) -> None:
        self._inner, self._write = inner, write

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        async for item in self._inner:
            if isinstance(item, Exception):
                reply = answer(item)
                if reply is not None:
                    await self._write.send(SessionMessage(reply))
                    continue
            return item
        raise StopAsyncIteration

    async def receive(self) -> Any:
        return await self.__anext__()

    async def __aenter__(self) -> Answering:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._inner.__aexit__(*exc)


async def serve(server: MCPServer[Any]) -> None:
    """``server.run("stdio")``, every malformed request answered."""
    low = server._lowlevel_server  # MCPServer has no public accessor for its low-level server
    async with stdio_server() as (read, write):
        await low.run(Answering(read, write), write, low.create_initialization_options())
