"""The Claude Code channel: a wake lever that pushes new mail into an idle Claude Code chat.

A stdio MCP server that declares the experimental capability ``claude/channel`` may send
``notifications/claude/channel`` (``{"content": str, "meta": {str: str}}``, meta keys
``[A-Za-z0-9_]``), and Claude Code, started with
``--dangerously-load-development-channels server:<name>``, turns each into a turn of the
chat. It is switched on by ``$AGENTS_ROOM_CHANNEL=1`` in the server's environment (set it
only together with that flag: a push nobody registered is dropped without a word).

Two things differ from a plain ``agents-room serve``:

- The server speaks the handshake-era protocol only. Claude Code first probes with
  ``server/discover`` (protocol 2026-07-28); the SDK's default loop would accept it and lock
  the connection to that era, on which Claude Code registers no channel. The handshake-era
  loop answers the probe with "method not found", so Claude Code falls back to
  ``initialize`` and sees the capability.
- A watcher notices new deliveries without any tool call: on PostgreSQL it is told at the
  sender's commit (LISTEN/NOTIFY, store/mailwait.py); on SQLite every 0.3 s it reads the
  newest event's seq (one b-tree probe; every change to the store writes an event). Only
  then (or every few seconds, for retries) it asks the store what is due for this process's
  session. Pushing marks a delivery ``offered``. A notification has no answer, so
  ``accepted`` is recorded when the session shows its turn came: its next hook event, or a
  tool call after the push (``last_seen`` later than ``offered_at``). An offer with neither
  is pushed again after the retry window.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.connection import Connection
from mcp.server.mcpserver import MCPServer
from mcp.server.runner import serve_connection
from mcp.server.stdio import stdio_server
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher

from ..store import Pending, Session
from ..store.wake import describe
from .wake import CHANNEL, POLL_S, Watcher, session_finder

CAPABILITY = "claude/channel"
METHOD = "notifications/claude/channel"


def enabled(env: Mapping[str, str]) -> bool:
    return env.get("AGENTS_ROOM_CHANNEL") == "1"


def meta(session: Session, deliveries: list[Pending]) -> dict[str, str]:
    """Plain string facts beside the text (keys ``[A-Za-z0-9_]``, as the channel requires)."""
    senders = list(dict.fromkeys(p.sender_label or p.sender for p in deliveries))
    return {
        "source": "agents_room",
        "session_id": session.id,
        "unread": str(len(deliveries)),
        "message_ids": ",".join(str(p.message_id) for p in deliveries),
        "senders": ",".join(senders),
    }


@dataclass(frozen=True)
class ChannelLever:
    """Pushes one channel notification per signal. ``push`` is called from a worker thread
    and must hand the notification to the event loop (see :func:`serve`)."""

    push: Callable[[dict[str, Any]], None]
    name: str = CHANNEL

    def signal(self, session: Session, deliveries: list[Pending]) -> bool | None:
        self.push({"content": describe(deliveries, session.id), "meta": meta(session, deliveries)})
        return None  # a notification has no reply: acceptance waits for the turn


async def serve(
    server: MCPServer[Any], read: Any, write: Any, *, poll_s: float = POLL_S,
    find: Callable[[Any], Callable[[], str | None]] | None = None,
) -> None:
    """Serve ``server`` on one stream pair, handshake era only, with the ``claude/channel``
    capability and the watcher pushing this process's session's new mail. The server's
    lifespan state must carry ``store`` and ``identity`` (``harness_key``, ``pid``): the
    session served is the live one with that key, else with that harness pid."""
    low = server._lowlevel_server  # MCPServer has no public accessor for its low-level server
    init = low.create_initialization_options(experimental_capabilities={CAPABILITY: {}})
    async with low.lifespan(low) as state:
        # The body of mcp.server.runner.serve_loop, unrolled to keep the Connection: the
        # watcher pushes through it.
        dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(read, write, inline_methods=frozenset({"initialize"}))
        connection = Connection.for_loop(dispatcher)
        finder = (find or _default_finder)(state)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch, connection, state.store, finder, poll_s)
            await serve_connection(low, dispatcher, connection=connection, lifespan_state=state, init_options=init)
            tg.cancel_scope.cancel()


def _default_finder(state: Any) -> Callable[[], str | None]:
    return session_finder(state.store, state.identity.harness_key, state.identity.pid)


async def _watch(connection: Connection, store: Any, find: Callable[[], str | None], poll_s: float) -> None:
    await connection.initialized.wait()

    def push(params: dict[str, Any]) -> None:
        anyio.from_thread.run(connection.notify, METHOD, params)

    watcher = Watcher(store, ChannelLever(push), find, poll_s=poll_s)
    waiter = None
    last_look = float("-inf")
    try:
        while True:
            try:
                waiter = waiter or await anyio.to_thread.run_sync(store.mail_waiter, poll_s)
                wait_s = watcher.wait_s(waiter, last_look, time.monotonic())
                # Blocks in a worker thread until told of mail (PostgreSQL) or the seq moved
                # (SQLite), for WAIT_CHUNK_S at most: a cancelled server waits no longer.
                last_look = await anyio.to_thread.run_sync(watcher.step, waiter, last_look, None, wait_s)
            except Exception as exc:  # noqa: BLE001 (keep serving tools; the store may be busy for a moment)
                print(f"agents-room: channel watcher: {exc}", file=sys.stderr)
                await anyio.sleep(poll_s)
    finally:
        if waiter is not None:
            waiter.close()


async def serve_stdio(server: MCPServer[Any]) -> None:
    """``agents-room serve`` with the channel on: stdio, handshake era, watcher running."""
    from ..server.stdio import Answering

    async with stdio_server() as (read, write):
        await serve(server, Answering(read, write), write)  # every malformed request answered
