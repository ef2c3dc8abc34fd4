"""The scripted model: one HTTP server on 127.0.0.1 (starlette on uvicorn, in a thread of its
own) that answers Claude Code, Codex and Gemini CLI as their model would, from a script.

    model = ScriptedModel()                  # serving; close() or use it as a context manager
    alice = model.agent("alice", [[ToolCall("room_join", {...})], Say("done")])
    alice.url                                # the base URL to give alice's harness (clis.py does)
    alice.wait_for(lambda r: r.tool_results(), what="the join's result")
    alice.requests, alice.side_requests, alice.errors

Several agents share one server: each has its own path prefix (``/agent/NAME``), script and
records. The wire is told by the path (``wires``). A main request takes the script's next
reply; a side request (title, classifier, token count) is answered without it. A script that
ran out, a tool the harness does not offer, a policy that raised: the error is recorded in
``errors`` and the turn ends with a text saying it, so the harness stops instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import wires
from .script import NotYet, Reply, Request, Say, Script, ScriptError, check_reply


WAITS = 10  # how many times a harness is asked to wait for its MCP servers before its tools count as unknown


class ModelWaitError(AssertionError):
    """What an agent's model waited for did not come: names the agent, the wait, and why."""


class ScriptedAgent:
    """One agent's script and everything its harness asked."""

    def __init__(self, name: str, script: Script, url: str) -> None:
        self.name = name
        self.url = url
        self.requests: list[Request] = []  # main requests, in arrival order
        self.side_requests: list[Request] = []
        self.errors: list[str] = []
        self._script = script
        self._played = 0
        self._again: Reply | None = None  # a reply to give once more (its tools were not offered yet)
        self._waits = 0
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)

    def record(self, request: Request) -> None:
        with self._arrived:
            (self.side_requests if request.side else self.requests).append(request)
            self._arrived.notify_all()

    def fail(self, message: str) -> None:
        with self._arrived:
            self.errors.append(message)
            self._arrived.notify_all()

    def again(self, reply: Reply) -> bool:
        """Give ``reply`` to the next request too (the harness was asked to wait for its
        servers); False once it has waited ``WAITS`` times: then the tools are unknown."""
        self._waits += 1
        self._again = reply if self._waits <= WAITS else None
        return self._again is not None

    def next_reply(self, request: Request) -> Reply:
        """The script's answer to ``request``; ScriptError when it has none."""
        if self._again is not None:
            reply, self._again = self._again, None
            return reply
        self._waits = 0
        if callable(self._script):
            try:
                reply = self._script(request)
            except ScriptError:
                raise
            except Exception as error:  # a policy's bug ends the turn visibly, not the server
                raise ScriptError(f"the policy raised {type(error).__name__}: {error}") from error
            return check_reply(reply)
        with self._lock:
            if self._played >= len(self._script):
                raise ScriptError(f"the script ran out after {len(self._script)} replies")
            reply = self._script[self._played]
            self._played += 1
        return check_reply(reply)

    def wait_for(self, predicate: Callable[[Request], Any], *, what: str, timeout: float = 60.0,
                 side: bool = False, stop: Callable[[], str | None] | None = None) -> Request:
        """The first request (main, or side with ``side=True``) that ``predicate`` accepts, seen
        before or arriving within ``timeout`` s. ModelWaitError naming this agent and ``what``
        on timeout, on a script error, or when ``stop()`` gives a reason (the harness exited)."""
        deadline = time.monotonic() + timeout
        seen = 0
        with self._arrived:
            while True:
                found = self.side_requests if side else self.requests
                for request in found[seen:]:
                    if predicate(request):
                        return request
                seen = len(found)
                reason = None
                if self.errors:
                    reason = f"the model's script failed: {'; '.join(self.errors)}"
                elif stop is not None and (why := stop()):
                    reason = why
                elif time.monotonic() >= deadline:
                    reason = f"nothing matched within {timeout:g} s"
                if reason:
                    raise ModelWaitError(f"{self.name}: waited for {what}: {reason} ({len(self.requests)} model "
                                         f"requests, {len(self.side_requests)} side requests)")
                # wakes on each arrival; the short cap only lets ``stop`` be asked again
                self._arrived.wait(min(0.25, max(0.0, deadline - time.monotonic())))


class ScriptedModel:
    """The server, hosting any number of :class:`ScriptedAgent`."""

    def __init__(self) -> None:
        self._agents: dict[str, ScriptedAgent] = {}
        self.unhandled: list[str] = []  # requests no wire or agent took: "METHOD path"
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        app = Starlette(routes=[Route("/agent/{name}/{rest:path}", self._handle, methods=["GET", "POST"]),
                                Route("/agent/{name}", self._reachable, methods=["GET", "HEAD"])])
        app.add_route("/{rest:path}", self._unhandled, methods=["GET", "POST"])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off",
                                                     timeout_graceful_shutdown=2))
        self._thread = threading.Thread(target=self._serve, name=f"scripted-model-{self.port}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._socket]))

    def agent(self, name: str, script: Script) -> ScriptedAgent:
        """A new agent on this server with its script (a list of replies, or a policy)."""
        if not name or not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"agent name must be letters, digits, - or _: got {name!r}")
        if name in self._agents:
            raise ValueError(f"agent {name!r} is already on this model")
        if not callable(script) and not isinstance(script, list | tuple):
            raise TypeError(f"script must be a list of replies or a callable policy, got {type(script).__name__}")
        self._agents[name] = ScriptedAgent(name, script, f"http://127.0.0.1:{self.port}/agent/{name}")
        return self._agents[name]

    @property
    def requests(self) -> list[Request]:
        """Every agent's main requests, in arrival order."""
        return sorted((r for a in self._agents.values() for r in a.requests), key=lambda r: r.at)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def __enter__(self) -> ScriptedModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _reachable(self, http: HttpRequest) -> Response:
        # Claude Code checks that its base URL answers before it starts a turn
        return Response(status_code=200 if http.path_params["name"] in self._agents else 404)

    async def _unhandled(self, http: HttpRequest) -> Response:
        self.unhandled.append(f"{http.method} {http.url.path}")
        return JSONResponse({"error": {"message": f"no agent at {http.url.path}: use /agent/NAME/..."}}, 404)

    async def _handle(self, http: HttpRequest) -> Response:
        agent = self._agents.get(http.path_params["name"])
        path = "/" + http.path_params["rest"]
        if path == "/":
            return await self._reachable(http)
        wire = wires.of(path)
        if agent is None or wire is None:
            return await self._unhandled(http)
        raw = await http.body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError as error:
            agent.fail(f"{http.method} {path}: the body is not JSON ({error})")
            return JSONResponse({"error": {"message": "body is not JSON"}}, 400)
        request = Request(agent.name, wire.name, path, body, time.time(), side=wire.side(path, body),
                          _text=wire.text, _results=wire.tool_results)
        agent.record(request)
        if request.side:
            kind, content = wire.side_answer(path, body)
            request.reply = content.decode()
            return Response(content, media_type=kind)
        try:
            reply = await run_in_threadpool(agent.next_reply, request)
            try:
                kind, content = wire.answer(reply, body)
            except NotYet as wait:
                if not agent.again(reply):
                    raise ScriptError(f"{wait}: still not offered after {WAITS} waits") from None
                request.reply = "waiting for the harness's MCP servers"
                return Response(wait.content, media_type=wait.kind)
        except ScriptError as error:
            agent.fail(f"request {len(agent.requests)} ({path}): {error}")
            reply = Say(f"scripted model error: {error}")
            kind, content = wire.answer(reply, body)
        request.reply = reply
        return Response(content, media_type=kind)
