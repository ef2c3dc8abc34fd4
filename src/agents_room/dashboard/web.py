"""The dashboard's HTTP side: GET only, over a store opened read-only.

Every viewer gets a server-sent event stream of snapshots (``Store.overview``, JSON). The
stream polls the store's ``last_seq`` (one indexed read) every ``POLL_S`` and reads a new
snapshot when it moved (a change after a quiet spell goes out at the next poll; a stream of
changes at most once per ``GAP_S``), and at least every ``HEARTBEAT_S`` for liveness and
countdowns.
Snapshots are shared between viewers of the same room for as long as they are current.

Access is ``serve --http``'s (server/http.py): loopback only without ``$AGENTS_ROOM_TOKEN``,
the bearer token required with it. A browser cannot put a header on an EventSource, so the
token comes once as ``/?token=...``, then an HttpOnly cookie stands for it; both are turned
into the ``Authorization`` header that ``BearerAuth`` checks. The cookie holds a value derived
from the token (:func:`cookie_value`), never the token: cookies do not separate ports, so it
goes to every server on that host, and the token is also ``serve --http``'s bearer. Its name
carries the port, and the cookie header is read leniently (:func:`cookie`): another local
app's malformed cookie neither hides it nor locks the viewer out.

At most ``MAX_STREAMS`` event streams are open at once; one more gets 503 (each costs a poll
of the store every ``POLL_S``).
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import sys
import threading
import time
from collections.abc import AsyncIterator
import hashlib
import hmac
from typing import Any
from urllib.parse import parse_qs

import anyio
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..server.http import Address, BearerAuth, LoopbackOnly, check_exposure
from ..store import InvalidArgument, RoomError, Store, bounds

POLL_S = 0.2  # how often a stream asks the store for its last_seq
GAP_S = 0.5  # at least this between two snapshots that carry a change: a busy store is drawn twice a second
HEARTBEAT_S = 1.0  # at most this between two snapshots (liveness, countdowns)
COOKIE = "agents_room_dashboard"  # with the port: agents_room_dashboard_8766
MAX_STREAMS = 32  # event streams open at once, every viewer's together
STATIC = importlib.resources.files(__package__) / "static"
ASSETS = {"/": ("index.html", "text/html; charset=utf-8"),
          "/dashboard.css": ("dashboard.css", "text/css; charset=utf-8"),
          "/dashboard.js": ("dashboard.js", "text/javascript; charset=utf-8")}
# The page runs no inline script and loads nothing from elsewhere: even a label that slipped
# into the markup could not run.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store",
           "Referrer-Policy": "no-referrer"}


def origin(address: Address) -> str:
    host = f"[{address.host}]" if ":" in address.host else address.host
    return f"http://{host}:{address.port}/"


class Snapshots:
    """The latest snapshot per room filter, as JSON, read again only when the store moved
    (its ``last_seq``) or it is older than ``HEARTBEAT_S``. Thread-safe."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._latest: dict[str | None, tuple[int, float, str]] = {}

    def get(self, room: str | None) -> tuple[int, str]:
        seq = self.store.last_seq()
        with self._lock:
            held = self._latest.get(room)
            if held and held[0] == seq and time.monotonic() - held[1] < HEARTBEAT_S:
                return seq, held[2]
            at = time.monotonic()
            text = json.dumps(dataclasses.asdict(self.store.overview(room)), separators=(",", ":"))
            self._latest[room] = (seq, at, text)
            return seq, text


def cookie_name(address: Address) -> str:
    return f"{COOKIE}_{address.port}"


def cookie_value(token: str) -> str:
    """What the dashboard's cookie holds for ``token``: an HMAC of a fixed text under it,
    worth nothing as a bearer anywhere else."""
    return hmac.new(token.encode(), b"agents-room dashboard cookie", hashlib.sha256).hexdigest()


def cookie(header: str, name: str) -> str | None:
    """The value of the cookie ``name`` in a ``Cookie`` header, read leniently: pairs split on
    ``;``, each at its first ``=``; a pair that is no pair is skipped (the standard library's
    parser gives up on the whole header at the first one it does not like)."""
    for pair in header.split(";"):
        key, sep, value = pair.partition("=")
        if sep and key.strip() == name:
            return value.strip().strip('"')
    return None


def _room(request: Request) -> str | None:
    value = request.query_params.get("room") or None
    return None if value is None else bounds.room(value)


def build(store: Store, address: Address, token: str | None) -> ASGIApp:
    """The ASGI app: the page, ``/snapshot.json`` and ``/events`` (both ``?room=``), GET only."""
    check_exposure(address, token)
    snapshots = Snapshots(store)
    streams = [0]  # open now

    async def asset(request: Request) -> Response:
        if token and request.url.path == "/" and "token" in request.query_params:
            # BearerAuth let this through, so the token is right: keep it in a cookie and take
            # it out of the address bar (and the history).
            done = RedirectResponse("/", status_code=303, headers=HEADERS)
            done.set_cookie(cookie_name(address), cookie_value(token), httponly=True, samesite="strict")
            return done
        name, media_type = ASSETS[request.url.path]
        return Response((STATIC / name).read_bytes(), media_type=media_type, headers=HEADERS)

    async def snapshot(request: Request) -> Response:
        try:
            _, text = await anyio.to_thread.run_sync(snapshots.get, _room(request))
        except InvalidArgument as exc:
            return JSONResponse({"error": str(exc)}, status_code=400, headers=HEADERS)
        except RoomError as exc:  # the store is busy or down: say so; the next request tries again
            return JSONResponse({"error": str(exc)}, status_code=503, headers=HEADERS)
        return Response(text, media_type="application/json", headers=HEADERS)

    async def events(request: Request) -> Response:
        try:
            room = _room(request)
        except InvalidArgument as exc:
            return JSONResponse({"error": str(exc)}, status_code=400, headers=HEADERS)
        if streams[0] >= MAX_STREAMS:
            return JSONResponse({"error": f"{MAX_STREAMS} event streams are open already: close a dashboard tab, "
                                 "or try again later"}, status_code=503, headers={**HEADERS, "Retry-After": "5"})
        streams[0] += 1

        async def stream() -> AsyncIterator[dict[str, Any]]:
            shown, sent_at, changed_at = -1, 0.0, 0.0
            while True:
                try:
                    seq = await anyio.to_thread.run_sync(store.last_seq)
                    now = time.monotonic()
                    if (seq != shown and now - changed_at >= GAP_S) or now - sent_at >= HEARTBEAT_S:
                        new, text = await anyio.to_thread.run_sync(snapshots.get, room)
                        sent_at, changed_at = now, now if new != shown else changed_at
                        shown = new
                        yield {"event": "snapshot", "data": text}
                except RoomError as exc:  # store_busy, say: tell the page, keep watching
                    yield {"event": "problem", "data": json.dumps({"error": str(exc)})}
                await anyio.sleep(POLL_S)

        return Counted(EventSourceResponse(stream(), headers={**HEADERS, "X-Accel-Buffering": "no"}, ping=15),
                       streams)

    routes = [Route(path, asset, methods=["GET"]) for path in ASSETS]
    routes += [Route("/snapshot.json", snapshot, methods=["GET"]), Route("/events", events, methods=["GET"])]
    app: ASGIApp = Starlette(routes=routes)
    if token:
        app = TokenCarrier(BearerAuth(app, token), token, cookie_name(address))
    if address.loopback:
        # A page elsewhere cannot read this one through DNS rebinding: only loopback names,
        # on every loopback address, [::1] too (server/http.py).
        app = LoopbackOnly(app, address)
    return app


class Counted:
    """A response counted in ``streams`` until it ends, however it ends."""

    def __init__(self, response: Response, streams: list[int]) -> None:
        self.response, self.streams = response, streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.response(scope, receive, send)
        finally:
            self.streams[0] -= 1


class TokenCarrier:
    """Turn ``?token=`` or the dashboard's cookie into ``Authorization: Bearer`` (when the
    request has none), for ``BearerAuth`` to check in constant time: the cookie stands for
    the token only when it holds :func:`cookie_value` of it (compared in constant time)."""

    def __init__(self, app: ASGIApp, token: str, name: str) -> None:
        self.app, self.token, self.name = app, token, name
        self.expected = cookie_value(token).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = list(scope.get("headers") or ())
            given = dict(headers)
            if b"authorization" not in given:
                query = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
                held = cookie(given.get(b"cookie", b"").decode("latin-1"), self.name)
                token = query[0] if query else None
                if token is None and held is not None:
                    token = self.token if hmac.compare_digest(held.encode(), self.expected) else "wrong"
                if token:
                    scope = {**scope, "headers": [*headers, (b"authorization", f"Bearer {token}".encode())]}
        await self.app(scope, receive, send)


def server(store: Store, address: Address, token: str | None) -> Any:
    import uvicorn

    config = uvicorn.Config(build(store, address, token), host=address.host, port=address.port,
                            log_level="warning", timeout_graceful_shutdown=1)
    return uvicorn.Server(config)


def banner(address: Address, token: str | None) -> str:
    if token:
        return f"{origin(address)}?token=$AGENTS_ROOM_TOKEN (bearer token required)"
    return f"{origin(address)} (no token: loopback only)"


async def serve(store: Store, address: Address, token: str | None) -> None:
    print(f"agents-room: dashboard of {store.path} at {banner(address, token)}", file=sys.stderr, flush=True)
    await server(store, address, token).serve()


class Running:
    """The dashboard served from a thread of this process (``sim run --dashboard``)."""

    def __init__(self, store: Store, address: Address, token: str | None) -> None:
        self.url = origin(address)
        self._server = server(store, address, token)
        self._thread = threading.Thread(target=self._server.run, name="dashboard", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not self._server.started:
            raise InvalidArgument("--dashboard", f"could not serve on {address.host}:{address.port}")

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
