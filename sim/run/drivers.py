"""How an agent reaches the store: ``direct`` calls :class:`agents_room.store.Store` in the
agent's own process (the most pressure one process can put on the file); ``mcp`` spawns a
real ``agents-room serve`` over stdio and calls its tools through the SDK's client (what a
harness does in production).

Both answer :meth:`Driver.call` with the *result digest* of ``docs/history.md``, or raise
:class:`OpError` carrying the stable error code and whether the outcome is ``fail`` (it
definitely did not happen) or ``info`` (it may have).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from ..check.history import outcome_of


class OpError(Exception):
    def __init__(self, code: str, text: str, outcome: Literal["fail", "info"] | None = None) -> None:
        super().__init__(f"{code}: {text}")
        self.code = code
        self.text = text
        self.outcome = outcome or outcome_of(code)


class Driver(Protocol):
    name: str

    def call(self, f: str, args: dict[str, Any]) -> dict[str, Any]: ...

    def cpu_s(self) -> float:
        """CPU seconds spent serving this agent's calls (the store's share of the work)."""
        ...

    def close(self) -> None: ...


# -- digests: the same for the store's dataclasses and the server's JSON ------------------------


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _holder_id(holder: Any) -> str | None:
    if holder is None or isinstance(holder, str):
        return holder
    return _get(holder, "session_id")


def digest(f: str, args: dict[str, Any], result: Any) -> dict[str, Any]:
    """The small, checkable part of a tool's answer (``docs/history.md``, result digests)."""
    if f == "room_join":
        return {"session_id": _get(result, "session_id"), "rooms": list(_get(result, "rooms", [])),
                "autonomy": _get(result, "autonomy"), "warned": _get(result, "warning") is not None}
    if f == "msg_send":
        return {"message_id": _get(result, "message_id"), "recipients": list(_get(result, "recipients", [])),
                "op": args.get("subject"), "warned": _get(result, "warning") is not None}
    if f == "msg_recv":
        messages = _get(result, "messages", []) or []
        out = {"message_ids": [_get(m, "id") for m in messages], "senders": [_get(m, "sender") for m in messages],
               "labels": [_get(m, "sender_label") for m in messages], "subjects": [_get(m, "subject") for m in messages],
               "to": [_get(m, "to") for m in messages]}
        inbox = _get(result, "inbox")
        if inbox is not None:  # an empty answer's inbox block: rooms, deliveries ever, read, last
            out["inbox"] = {"rooms": list(_get(inbox, "rooms", []) or []), "total": _get(inbox, "deliveries_total"),
                            "read": _get(inbox, "deliveries_read"), "last": _get(inbox, "last_delivery_at")}
        return out
    if f == "msg_ack":
        return {"message_id": args["message_id"]}
    if f == "lease_claim":
        lease = _get(result, "lease")
        holder = _get(result, "holder")
        return {"ok": bool(_get(result, "ok")), "token": _get(lease, "token"), "mode": _get(lease or holder, "mode"),
                "expires_at": _get(lease or holder, "expires_at"), "holder": _holder_id(holder)}
    if f == "lease_renew":
        lease = _get(result, "lease", result) if isinstance(result, dict) and "lease" in result else result
        return {"token": _get(lease, "token"), "expires_at": _get(lease, "expires_at"), "mode": _get(lease, "mode")}
    if f == "note_read":
        return {"hash": result if isinstance(result, str) else _get(result, "hash")}
    if f == "drift_check":
        return {"severity": _get(result, "severity"), "changed": _get(result, "changed"),
                "holder": _get(result, "holder")}
    if f == "msg_unread":
        return {"count": result if isinstance(result, int) else _get(result, "count")}
    if f == "lease_check":
        holders = _get(result, "holders") or ([_get(result, "lease")] if _get(result, "lease") else [])
        return {"free": bool(_get(result, "free")),
                "holders": [[_get(h, "session_id"), _get(h, "mode")] for h in holders]}
    if f == "lease_list":
        leases = result if isinstance(result, list) else _get(result, "leases", [])
        return {"leases": [[_get(x, "path"), _get(x, "session_id"), _get(x, "mode"), bool(_get(x, "mine"))]
                           for x in leases]}
    if f == "room_history":
        room, messages = result if isinstance(result, tuple) else (_get(result, "room"), _get(result, "messages", []))
        return {"room": room, "message_ids": [_get(m, "id") for m in messages or []]}
    if f == "msg_sent":
        messages = result if isinstance(result, list) else _get(result, "messages", [])
        return {"messages": [[_get(m, "id"), dict(_get(m, "states") or {}), _get(m, "pending"), list(_get(m, "left") or [])]
                             for m in messages]}
    if f == "room_set_autonomy_cap":
        room, level = result if isinstance(result, tuple) else (_get(result, "room"), _get(result, "autonomy"))
        return {"room": room, "autonomy": level}
    if f == "room_who":
        members = result if isinstance(result, list) else _get(result, "sessions", [])
        return {"sessions": [_get(m, "session_id") for m in members],
                "liveness": [_get(m, "liveness") for m in members], "hosts": [_get(m, "host") for m in members],
                "pids": [_get(m, "pid") for m in members]}
    return {}


# -- direct --------------------------------------------------------------------------------------


# ``module:callable``: the store implementation the direct driver opens instead of the shipped
# one (another backend, or a deliberately broken store under test). Called as
# ``callable(db, busy_timeout_s=...)`` (``db``: the store's path or postgresql:// URL, a str),
# it returns an object with the ``Store``'s tool methods and ``close()``, raising
# ``agents_room.store.RoomError`` subclasses for the errors.
STORE_FACTORY_ENV = "SIM_STORE_FACTORY"


def open_store(db: str, busy_timeout_s: float) -> Any:
    """The store named by ``$SIM_STORE_FACTORY``, else the shipped ``Store``."""
    spec = os.environ.get(STORE_FACTORY_ENV, "").strip()
    if not spec:
        from agents_room.store import Store

        return Store.open(db, busy_timeout_s=busy_timeout_s)
    module, sep, name = spec.partition(":")
    if not sep or not module or not name.isidentifier():
        raise ValueError(f"{STORE_FACTORY_ENV}={spec!r}: expected module:callable, e.g. mypkg.store:open_store")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{STORE_FACTORY_ENV}={spec!r}: {exc}") from None
    return factory(db, busy_timeout_s=busy_timeout_s)


class DirectDriver:
    """The store in this process. Its CPU share is measured as this thread's CPU time inside
    each call, so the report can tell the store's work from the harness's own."""

    name = "direct"

    def __init__(self, db: str, cwd: str, busy_timeout_s: float) -> None:
        from agents_room.store import RoomError

        self._room_error = RoomError
        self.store = open_store(db, busy_timeout_s)
        self.cwd = cwd
        self._cpu_ns = 0

    def call(self, f: str, args: dict[str, Any]) -> dict[str, Any]:
        start = time.thread_time_ns()
        began = time.monotonic()
        try:
            if f == "wake":
                return self._wake(args)
            if f == "room_join":
                result = self.store.room_join(cwd=self.cwd, pid=os.getpid(), **args)
            else:
                result = getattr(self.store, f)(**args)
        except self._room_error as exc:
            self._count(f, args.get("session_id"), exc.code, began)
            raise OpError(exc.code, exc.text, "fail" if exc.definite else "info") from None
        finally:
            self._cpu_ns += time.thread_time_ns() - start
        answer = digest(f, args, result)
        denied = f == "lease_claim" and not answer["ok"]
        self._count(f, answer["session_id"] if f == "room_join" else args.get("session_id"),
                    "denied" if denied else "ok", began)  # callcounts.DENIED, OK
        return answer

    def _count(self, f: str, session_id: Any, outcome: str, began: float) -> None:
        """Count the call as a server counts its tool calls (store/callcounts.py): this driver
        is the agent's server. A store of ``$SIM_STORE_FACTORY`` may have no counter."""
        calls = getattr(self.store, "calls", None)
        if calls is not None:
            calls.count(f, session_id, outcome, began, time.monotonic())

    def _wake(self, args: dict[str, Any]) -> dict[str, Any]:
        """The agent's wake lever looks once: ``agents_room.harnesses.wake.deliver`` for its session, as a
        server's watcher runs it, with a lever that answers as told. Several transactions: an
        error part way may leave some of them done, so its outcome is ``info``."""
        from agents_room.harnesses.wake import deliver

        lever = ScriptedLever(ANSWERS[args["answer"]])
        try:
            signals = deliver(self.store, lever, session_id=args["session_id"], retry_s=args["retry_s"])
        except self._room_error as exc:
            raise OpError(exc.code, exc.text, "info") from None
        return {"signals": [[list(s.message_ids), s.accepted] for s in signals]}

    def cpu_s(self) -> float:
        return self._cpu_ns / 1e9

    def close(self) -> None:
        self.store.close()


# The simulator's wake lever: the name its agents record at room_join (scenario key
# ``wake_lever``), and how it answers a signal (the workload draws one per look).
SIM_LEVER = "sim"
ANSWERS: dict[str, bool | None] = {"accept": True, "unknown": None, "refuse": False}


@dataclass(frozen=True)
class ScriptedLever:
    """A wake lever that signals nothing real and answers as scripted: ``True`` the harness
    took the signal, ``None`` it cannot say, ``False`` it refused (``agents_room.harnesses.wake.WakeLever``)."""

    answer: bool | None
    name: str = SIM_LEVER

    def signal(self, session: Any, deliveries: list[Any]) -> bool | None:
        return self.answer


# -- mcp -----------------------------------------------------------------------------------------


def serve_command() -> str:
    """The ``agents-room`` console script of this interpreter's environment."""
    beside = Path(sys.executable).parent / "agents-room"
    found = str(beside) if beside.exists() else shutil.which("agents-room")
    if not found:
        raise OpError("store_error", "the agents-room command is not installed in this environment")
    return found


class McpDriver:
    """A real ``agents-room serve`` child over stdio, driven through the SDK client on an
    event loop in a background thread (the agent's own loop stays synchronous)."""

    name = "mcp"

    def __init__(self, cwd: str, env: dict[str, str], op_timeout_s: float) -> None:
        from mcp import Client, StdioServerParameters

        params = StdioServerParameters(command=serve_command(), args=["serve"], env=env, cwd=cwd)
        self._open(Client(params, mode="legacy"), op_timeout_s)

    def _open(self, client: Any, op_timeout_s: float) -> None:
        """Enter ``client`` (an async context manager) on a portal thread of this driver's own."""
        from anyio.from_thread import start_blocking_portal

        self.op_timeout_s = op_timeout_s
        self._portal_cm = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        self._client_cm = self._portal.wrap_async_context_manager(client)
        try:
            self._client = self._client_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise
        self._closed = False

    def call(self, f: str, args: dict[str, Any]) -> dict[str, Any]:
        from mcp.shared.exceptions import MCPError

        try:
            result = self._portal.call(self._call, f, self._sent(args))
        except MCPError as exc:
            code = "timeout" if exc.code == -32001 else "lost" if exc.code == -32000 else "mcp_error"
            raise OpError(code, str(exc), "info") from None
        except TimeoutError as exc:
            raise OpError("timeout", str(exc) or "no answer in time", "info") from None
        except (OSError, EOFError, RuntimeError) as exc:
            raise OpError("lost", f"{type(exc).__name__}: {exc}", "info") from None
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            code, sep, rest = text.partition(":")
            if not sep or " " in code.strip():
                raise OpError("unexpected", text[:300], "info")
            raise OpError(code.strip(), rest.strip())
        data = result.structured_content
        if data is None:  # fall back to the JSON the text content repeats
            text = "".join(getattr(c, "text", "") for c in result.content)
            data = json.loads(text) if text.strip() else {}
        if isinstance(data, dict) and set(data) == {"result"}:  # a non-object return, wrapped
            data = data["result"]
        self._answered(f, data)
        return digest(f, args, data)

    def _sent(self, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments as they go out (a stdio server knows its sessions: as they are)."""
        return args

    def _answered(self, f: str, data: Any) -> None:
        """What the driver keeps of an answer (nothing, over stdio)."""

    async def _call(self, f: str, args: dict[str, Any]) -> Any:
        return await self._client.call_tool(f, args, read_timeout_seconds=self.op_timeout_s)

    def cpu_s(self) -> float:
        """The server child's CPU, known once it has exited (``close``)."""
        import resource

        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._client_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)


class HttpDriver(McpDriver):
    """One agent's MCP session with a shared ``agents-room serve --http`` (one per host and
    repository, as a team deploys it), over Streamable HTTP with a bearer token. The server's
    folder is the repository; the agent's harness key travels in ``room_join``."""

    name = "http"

    def __init__(self, url: str, token: str, op_timeout_s: float) -> None:  # McpDriver's shape, another transport
        self.credentials: dict[str, str] = {}  # session id -> the credential its room_join returned
        self._open(_http_client(url, token, op_timeout_s), op_timeout_s)

    def _sent(self, args: dict[str, Any]) -> dict[str, Any]:
        """A shared server acts for a session only on its credential (agents_room/server/selves.py):
        the session's own id is sent as the credential its room_join returned."""
        sid = args.get("session_id")
        return {**args, "session_id": self.credentials[sid]} if sid in self.credentials else args

    def _answered(self, f: str, data: Any) -> None:
        if f == "room_join" and isinstance(data, dict) and data.get("credential"):
            self.credentials[data["session_id"]] = data["credential"]

    def cpu_s(self) -> float:
        return 0.0  # the server is the host's, not this process's child


@contextlib.asynccontextmanager
async def _http_client(url: str, token: str, timeout_s: float) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from agents_room.harnesses.identity import HOST_HEADER, PID_HEADER

    # The agent's process and host, so that a prune on its host can prove it gone once it is
    # killed (agents_room/harnesses/identity.py): a shared server cannot learn them otherwise.
    headers = {"Authorization": f"Bearer {token}", PID_HEADER: str(os.getpid())}
    if os.environ.get("AGENTS_ROOM_HOST_ID"):
        headers[HOST_HEADER] = os.environ["AGENTS_ROOM_HOST_ID"]
    async with httpx2.AsyncClient(headers=headers, timeout=timeout_s) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def open_driver(name: str, *, db: str, cwd: str, env: dict[str, str], busy_timeout_s: float,
                op_timeout_s: float, http_url: str | None = None) -> Driver:
    if name == "direct":
        return DirectDriver(db, cwd, busy_timeout_s)
    if name == "mcp":
        if os.environ.get(STORE_FACTORY_ENV, "").strip():  # the server opens the shipped store
            raise ValueError(f"{STORE_FACTORY_ENV} applies to the direct driver only")
        return McpDriver(cwd, env, op_timeout_s)
    if name == "http" and http_url:
        if os.environ.get(STORE_FACTORY_ENV, "").strip():  # the server opens the shipped store
            raise ValueError(f"{STORE_FACTORY_ENV} applies to the direct driver only")
        return HttpDriver(http_url, env.get("AGENTS_ROOM_TOKEN", ""), op_timeout_s)
    raise ValueError(f"unknown driver {name!r}")
