"""The bare MCP server ``sim bench`` measures ``agents-room serve`` against: the SDK's
``MCPServer`` with two tools, ``lease_claim`` and ``lease_release``, each one raw ``BEGIN IMMEDIATE``
transaction (:meth:`sim.bench.raw.RawRoom.claim`, ``.release``) per call on the store file
``$AGENTS_ROOM_DB``. It is
the least any MCP lease server over SQLite can cost: no argument checks beyond the SDK's,
no error mapping, and the tool runs on the event loop (no worker thread).

    python -m sim.bench.bare          # stdio, spawned by the bench's client
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server.mcpserver import MCPServer

from .raw import RawRoom


def build() -> MCPServer:
    room = RawRoom(os.environ["AGENTS_ROOM_DB"])
    server: MCPServer = MCPServer("bare-lease", log_level="WARNING")

    @server.tool()
    async def lease_claim(session_id: str, path: str, ttl_s: int = 600, mode: str = "exclusive") -> dict[str, Any]:
        """Claim a file lease."""
        return room.claim(session_id, os.path.abspath(path), ttl_s, mode)

    @server.tool()
    async def lease_release(session_id: str, path: str) -> dict[str, Any]:
        """Release a file lease."""
        room.release(session_id, os.path.abspath(path))
        return {}

    return server


if __name__ == "__main__":
    build().run("stdio")
