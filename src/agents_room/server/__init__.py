"""The MCP adapter: the 18 tools over one ``Store``, on stdio or Streamable HTTP.

One ``Store`` per process, opened by the lifespan and shared by every call (and, over HTTP,
by every agent). Errors are mapped in one place, :meth:`RoomServer.call_tool`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError

from .. import __version__
from ..harnesses.identity import Identity, for_stdio
from ..store import Clock, InvalidArgument, Store
from . import tools
from .tools import State
from .failures import check_arguments, counted, describe, tool_error

# The first line stands alone: Codex shows the model only the first line of a deferred
# server's instructions, so it must say what the server is and where to start.
INSTRUCTIONS = """\
agents-room: talk to the other coding agents on this machine (presence, messages, file leases, drift checks); call room_join first.

It connects you with them in this repository, and through shared rooms in other
repositories. It holds presence, messages, file leases and a record of what you read.

1. Call room_join once, first. It returns your session_id (16 lowercase hex): keep it and pass
   it as session_id to every other tool. Your harness key (a UUID such as 2b50133e-...) is a
   different id: only room_join takes it, as harness_key; it is never a session_id. Over a
   shared HTTP server room_join also returns a credential: pass that as session_id instead.
   Other agents' ids (room_who shows them) are for msg_send's `to`, never your session_id.
2. Before editing a file another agent might touch, lease_claim it; lease_release it when done.
   If the claim is denied, the answer names the holder: msg_send them or work elsewhere.
3. note_read a file when you read it; drift_check it before you edit it, to learn whether it
   changed under you (CRITICAL: someone else held a lease on it meanwhile).
4. msg_recv reads your messages; msg_send to '*' reaches everyone sharing a room with you;
   room_who shows who is here; room_history shows what was said before you joined.

Errors start with a code: unknown_session (the session_id names no live session, or another
agent's: the text says what it probably is and which id is yours; room_join again if yours ended), invalid_argument: <field> (fix that
argument), lease_not_held, not_recipient, store_busy (the store was busy: retry in a moment,
nothing changed), store_error (the store failed; when it says the store is unreachable, call again in a
little while; otherwise tell your human).
"""


class RoomServer(MCPServer[State]):
    """``MCPServer`` with one change: every failure of a tool call (unknown or missing
    arguments, wrong types, store errors, crashes) comes back as a tool error whose text
    starts with a stable code, never as the SDK's generic text."""

    _schemas: dict[str, Mapping[str, Any]] | None = None

    def _schema(self, name: str) -> Mapping[str, Any] | None:
        """A tool's input schema, from the tool manager's own records, read once (the tools
        are registered before the first call; a name not seen then is looked up again)."""
        if self._schemas is None or name not in self._schemas:
            self._schemas = {t.name: t.parameters for t in self._tool_manager.list_tools()}
        return self._schemas.get(name)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[State, Any] | None = None
    ) -> Any:
        started, schema = time.monotonic(), None
        try:
            schema = self._schema(name)
            if schema is None:
                raise InvalidArgument("name", f"no tool called {name[:64]!r}; see the tool list")
            check_arguments(name, schema, arguments)
            result = await super().call_tool(name, arguments, context)
        except MCPError:
            raise
        except Exception as exc:
            result = tool_error(describe(name, exc))
        if schema is not None:
            counted(context, name, arguments, result, started)
        return result


def build_server(
    db: str | Path | None = None,
    *,
    store: Store | None = None,
    identity: Identity | None = None,
    clock: Clock | None = None,
    busy_timeout_s: float | None = None,
    wake_lever: str | None = None,
    on_the_loop: bool = False,
) -> RoomServer:
    """The server, not yet running. The store at ``db`` (default ``$AGENTS_ROOM_DB``, else
    ``~/.agents-room/room.db``) is opened when the server starts and closed when it stops;
    or pass ``store``, already open (the CLI does, to refuse a bad file before serving), and
    the server closes it when it stops. ``identity`` defaults to what a stdio server learns
    from its environment. ``on_the_loop`` runs tool calls on the event loop instead of worker
    threads: for a server of one agent (stdio) only."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[State]) -> AsyncIterator[State]:
        # Opening may wait on the write lock (a migration): off the event loop.
        opened = store or await anyio.to_thread.run_sync(
            lambda: Store.open(db, clock=clock, busy_timeout_s=busy_timeout_s)
        )
        try:
            yield State(opened, identity or for_stdio(), wake_lever)
        finally:
            opened.close()

    server = RoomServer(
        "agents-room", title="agents-room", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan,
        log_level="WARNING",
    )
    tools.register(server, on_the_loop=on_the_loop)
    return server


__all__ = ["INSTRUCTIONS", "RoomServer", "State", "build_server"]
