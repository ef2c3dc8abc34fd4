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


def _refuse(status: int, text: str) -> tuple[dict, dict]:
    body = json.dumps({"error": text}).encode()
    return ({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]},
        {"type": "http.response.body", "body": body})


def _host_name(value: str) -> str:
    """The name of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``), lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    name, sep, port = value.rpartition(":")
    return name if sep and port.isdigit() else value


class LoopbackOnly:
    """On a loopback address, refuse a request whose ``Host`` is not a loopback name
    (``localhost``, ``127.0.0.1``, ``::1``, or the address served: ``127.0.0.2`` is loopback
    too) with 400, and one whose ``Origin``, when sent, is not such a name with 403: a page
    of another site that had its name resolve to 127.0.0.1 (DNS rebinding) can then neither
    read an answer nor send a request. The SDK's own check covers ``127.0.0.1``,
    ``localhost`` and ``::1`` only; the dashboard and ``serve --http`` both wear this one."""

    def __init__(self, app: ASGIApp, address: Address) -> None:
        self.app = app
        self.names = {"localhost", "127.0.0.1", "::1", address.host.lower()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or ())
            host = _host_name(headers.get(b"host", b"").decode("latin-1"))
            origin = headers.get(b"origin")
            refused = None
            if host not in self.names:
                refused = 400, f"Host {host[:80]!r} is not a loopback name this server answers to"
            elif origin is not None:
                from urllib.parse import urlsplit

                try:
                    parts = urlsplit(origin.decode("latin-1"))
                    named = (parts.hostname or "") if parts.scheme in ("http", "https") else ""
                except ValueError:
                    named = ""
                if named not in self.names:
                    refused = 403, f"Origin {origin.decode('latin-1')[:80]!r} is not a loopback page of this server"
            if refused:
                start, body = _refuse(*refused)
                await send(start)
                await send(body)
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
    guarded = BearerAuth(starlette_app, token) if token else starlette_app
    # and ours for every loopback address (the SDK's knows three names only)
    return LoopbackOnly(guarded, address) if address.loopback else guarded


async def serve(server: RoomServer, address: Address, token: str | None) -> None:
    import uvicorn

    config = uvicorn.Config(app(server, address, token), host=address.host, port=address.port, log_level="warning")
    guard = "bearer token required" if token else "no token: loopback only"
    print(f"agents-room: serving {address.url} ({guard})", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve()
