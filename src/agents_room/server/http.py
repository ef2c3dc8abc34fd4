"""Streamable HTTP: one process serving several agents, behind a bearer token.

Each agent passes its own session_id, so one process can serve many. What a stdio server
learns from its environment (the agent's folder, process, harness and key) is unknown here:
see :func:`agents_room.harnesses.identity.for_http`.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import sys
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from ..store import InvalidArgument
from . import RoomServer

PATH = "/mcp"


@dataclass(frozen=True)
class Address:
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{PATH}"

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_address(text: str) -> Address:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6)."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgument("--http", f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:8765)")
    return Address(host, int(port))


class BearerAuth:
    """Refuse every HTTP request without ``Authorization: Bearer <token>`` (401). The token
    is compared in constant time."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = json.dumps({"error": "unauthorized: send Authorization: Bearer <$AGENTS_ROOM_TOKEN>"}).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="agents-room"'),
                    (b"content-length", str(len(body)).encode()),
                ]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def check_exposure(address: Address, token: str | None) -> None:
    """Anyone who can reach the port can act as any session: off loopback, a token is a must."""
    if not token and not address.loopback:
        raise InvalidArgument(
            "--http", f"refusing to serve on {address.host}, which is not a loopback address, without a token: "
            "set $AGENTS_ROOM_TOKEN",
        )


def app(server: RoomServer, address: Address, token: str | None) -> ASGIApp:
    check_exposure(address, token)
    # host= turns on the SDK's DNS-rebinding protection for loopback hosts.
    starlette_app = server.streamable_http_app(streamable_http_path=PATH, host=address.host)
    return BearerAuth(starlette_app, token) if token else starlette_app


async def serve(server: RoomServer, address: Address, token: str | None) -> None:
    import uvicorn

    config = uvicorn.Config(app(server, address, token), host=address.host, port=address.port, log_level="warning")
    guard = "bearer token required" if token else "no token: loopback only"
    print(f"agents-room: serving {address.url} ({guard})", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve()
