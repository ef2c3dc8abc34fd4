"""The one place where anything that goes wrong in a tool call becomes a tool error.

A model reads these texts, so each starts with a stable code and a colon (``unknown_session:``,
``invalid_argument: <field>:`` ...) and then says in plain words what to do. Never the SDK's
generic "Error executing tool" and never a traceback: the traceback goes to stderr, which the
harness keeps in its MCP log.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import ValidationError

from ..store import InvalidArgument, RoomError
from ..store.bounds import shown
from ..store.callcounts import DENIED, OK

log = logging.getLogger("agents_room.server")

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")


def shown_name(name: Any) -> str:
    """An argument name as the error text shows it: as is when it is a plain name, else quoted
    (an empty name, spaces, a colon, a NUL would make ``invalid_argument: <field>:`` unreadable)."""
    text = str(name)
    return text if _PLAIN_NAME.fullmatch(text) else ascii(text[:60])


def check_arguments(tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
    """Refuse an argument the tool does not take, or a required one that is missing, naming
    it. (The SDK silently drops unknown arguments: a misspelt ``sesion_id`` would then be
    reported as a missing ``session_id``, or, for an optional one, ignored without a word.)"""
    known = list(schema.get("properties", {}))
    for name in arguments:
        if name not in known:
            raise InvalidArgument(
                shown_name(name), f"{tool} takes no such argument; its arguments are {', '.join(known) or 'none'}"
            )
    for name in schema.get("required", ()):
        if name not in arguments:
            raise InvalidArgument(name, f"required by {tool}")


def _invalid(exc: ValidationError) -> InvalidArgument:
    """The first problem pydantic found, as ``invalid_argument: <field>: ...``."""
    err = exc.errors()[0]
    loc = [str(part) for part in err.get("loc", ())] or ["arguments"]
    field, inner = loc[0], "".join(f"[{part}]" for part in loc[1:])
    msg = err.get("msg", "invalid value")
    if msg.startswith("Value error, "):  # our own validators' words
        msg = msg.removeprefix("Value error, ")
    msg = msg[:1].lower() + msg[1:]
    if err.get("type") == "missing":
        return InvalidArgument(field + inner, "required")
    return InvalidArgument(field + inner, f"{msg}, got {shown(err.get('input'))}")


def unwrap(exc: BaseException) -> BaseException:
    """The SDK wraps what a tool raised in a ``ToolError`` (argument validation included)
    whose ``__cause__`` is the original: map the original."""
    while isinstance(exc, ToolError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def describe(tool: str, exc: BaseException) -> str:
    """The text of the tool error for ``exc``: a ``RoomError`` speaks for itself (its
    ``__str__`` is ``code: words``); anything unexpected is a short ``store_error:``."""
    cause = unwrap(exc)
    if isinstance(cause, ValidationError):
        cause = _invalid(cause)
    if isinstance(cause, RoomError):
        return str(cause)
    if isinstance(cause, ToolError):  # raised by the SDK itself with no cause (e.g. unknown tool)
        return f"invalid_argument: name: {str(cause)[:200]}"
    log.error("%s failed unexpectedly", tool, exc_info=cause)
    first_line = (str(cause).splitlines() or [""])[0][:200]
    return f"store_error: unexpected {type(cause).__name__} in {tool}: {first_line}".rstrip(": ")


def counted(context: Any, tool: str, arguments: Mapping[str, Any], result: Any, started: float) -> None:
    """Count one call of ``tool`` in the store's :class:`~agents_room.store.callcounts.CallCounts`:
    outcome ``ok``, ``denied`` (a claim answered ok=false) or the error's code (the text's
    first word). Never fails the call it counts."""
    try:
        calls = context.request_context.lifespan_context.store.calls
    except Exception:  # noqa: BLE001 (no request context: a call made in-process, nothing to count in)
        return
    if calls is None:
        return
    answer = getattr(result, "structured_content", None) or {}
    if getattr(result, "is_error", False):
        text = result.content[0].text if result.content else ""
        outcome = text.split(":", 1)[0] if ":" in text else "store_error"
    else:
        outcome = DENIED if tool == "lease_claim" and answer.get("ok") is False else OK
    session = answer.get("session_id") if tool == "room_join" else arguments.get("session_id")
    if isinstance(session, str) and "." in session:  # a credential (server/selves.py): the id it names
        session = session.partition(".")[0]
    calls.count(tool, session, outcome, started, time.monotonic())


def tool_error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
