"""The 18 tools of the protocol, one short function each, each calling one ``Store`` method.

Docstrings and argument descriptions are what the model reads when it decides what to
call: when to call the tool, what each argument means, what each error means here. Plain
``def`` functions on purpose: the SDK runs them in a worker thread, so a call waiting for
SQLite's write lock (bounded, see ``store_busy``) never stalls the event loop of a server
shared by several agents; a stdio server, which serves one, runs them on the loop
(``register(on_the_loop=True)``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BeforeValidator, Field

from ..harnesses.identity import Identity, agent_process
from ..store import Store
from ..store.jsontext import compact_json
from .selves import Selves


@dataclasses.dataclass
class State:
    """What every tool call sees: the process's store, and what the process knows of the
    agent(s) it serves."""

    store: Store
    identity: Identity
    # How this process can start a turn in its idle agent (``None``: it cannot, so messages to
    # a session at autonomy ``wake`` are marked undeliverable). Set by whoever runs the server
    # once the harness has a wake lever; room_join records it on the session.
    wake_lever: str | None = None
    # The sessions this process may act for (selves.py); made from the identity when not given.
    selves: Selves = dataclasses.field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.selves is None:
            self.selves = Selves(self.identity.harness_key)


def _no_bool(value: Any) -> Any:
    # JSON true/false would otherwise pass as 1/0 (pydantic's lax int).
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")
    return value


def _says(description: str) -> Any:
    return Field(description=description)


# The arguments, each with the words the model reads in the published input schema.
Whole = Annotated[int, BeforeValidator(_no_bool)]
Level = Literal["hold", "notify", "wake"]
SessionId = Annotated[str, _says(
    "Your session id: the 16 lowercase hex characters room_join returned (over HTTP: the credential it returned). "
    "Not your harness key (a UUID), nor another agent's id.")]
OptionalSessionId = Annotated[str | None, _says("Your session id from room_join (16 lowercase hex); optional here.")]
PathArg = Annotated[str, _says(
    "The file, absolute or relative to your working directory (made absolute before use); at most 4096 bytes.")]
RoomName = Annotated[str | None, _says(
    "A room name: lowercase letters, digits and ._:/- (at most 64), e.g. 'team:payments' or 'repo:web'.")]
RoomToLeave = Annotated[str, _says("The room to leave.")]
ExtraRooms = Annotated[list[str] | None, _says("More shared rooms to join (room names).")]
Label = Annotated[str | None, _says("A short name others see, e.g. 'api-refactor' (≤ 64 chars).")]
Tags = Annotated[list[str] | None, _says("Up to 16 tags (≤ 32 chars each); others reach you with to='tag:<tag>'.")]
Autonomy = Annotated[Level | None, _says(
    "How messages reach you: 'hold' (only when you call msg_recv), 'notify' (mentioned during your turns; the "
    "default), 'wake' (may start a turn while you are idle). A rejoin can only raise it.")]
Cap = Annotated[Level, _says("The highest level members of the room may have.")]
Harness = Annotated[str | None, _says("Your harness, e.g. 'claude-code'; detected when omitted.")]
HarnessKey = Annotated[str | None, _says(
    "Your harness's id for this chat (a UUID), taken from the environment when omitted. It is never a session_id.")]
To = Annotated[str, _says(
    "Who receives it: '*' (everyone sharing a room with you), a session id, 'file:<glob>' (whoever holds a lease "
    "on a matching path; the glob is tried on the absolute path, the path relative to the holder's folder, and "
    "the base name; a directory lease is reached by a glob naming the directory or any path beneath it) or 'tag:<tag>'.")]
Subject = Annotated[str | None, _says("One line, ≤ 200 chars.")]
Body = Annotated[str | None, _says("The message, ≤ 64 KiB.")]
ReplyTo = Annotated[Whole | None, _says("The message_id this answers.")]
MessageTtl = Annotated[Whole | None, _says("Seconds until it expires unread, 1..2592000; default never.")]
MessageId = Annotated[Whole, _says("A message_id you received.")]
Limit = Annotated[Whole | None, _says("At most this many messages, 1..1000.")]
LeaseTtl = Annotated[Whole | None, _says("Lease length in seconds, 1..86400; default 600.")]
Mode = Annotated[Literal["exclusive", "shared"] | None, _says(
    "'exclusive' (default: you alone) or 'shared' (several holders; blocks exclusive claims).")]

_READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
_WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)


def _store(ctx: Context) -> Store:
    return _state(ctx).store


def headers(ctx: Context) -> Any:
    """The HTTP request's headers, ``None`` over stdio (or in process)."""
    return getattr(getattr(ctx.request_context, "request", None), "headers", None)


def _state(ctx: Context) -> State:
    """The process's ``State``, from the request context. Read where pydantic keeps the
    context's private values: the ``request_context`` property reaches them through
    ``BaseModel.__getattr__``, which raises and catches an exception on every access (~3 µs
    of every tool call). Through the property whenever the SDK keeps it elsewhere."""
    private = getattr(ctx, "__pydantic_private__", None)
    request = private.get("_request_context") if private else None
    return (request or ctx.request_context).lifespan_context


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


_LEAVES = frozenset({str, int, float, bool, type(None)})


def plain(value: Any) -> Any:
    """Store records (frozen dataclasses) as plain JSON-able values: ``dataclasses.asdict``'s
    answer at a fifth of its cost (it deep-copies every leaf, on every tool call). Leaves
    are taken as they are without a call of their own: most values are leaves."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is list or kind is tuple:
        return [v if type(v) in _LEAVES else plain(v) for v in value]
    if kind is dict:
        return {k: v if type(v) in _LEAVES else plain(v) for k, v in value.items()}
    if hasattr(kind, "__dataclass_fields__"):
        return {name: v if type(v := getattr(value, name)) in _LEAVES else plain(v) for name in _field_names(kind)}
    return value


# -- sessions and rooms ------------------------------------------------------------------------


def room_join(
    ctx: Context, room: RoomName = None, extra_rooms: ExtraRooms = None, label: Label = None, tags: Tags = None,
    autonomy: Autonomy = None, harness: Harness = None, harness_key: HarnessKey = None,
) -> dict[str, Any]:
    """Join agents-room. Call this first, once, and keep the session_id it returns: every other
    tool takes it as session_id. You join repo:<your git repository's name> automatically;
    `room` and `extra_rooms` add shared rooms, which is how agents in other repositories reach
    you. Calling it again with the same harness key rejoins the same session (rooms added,
    label and tags replaced when given). Returns session_id, rooms, autonomy, rejoined, store (the
    store you are on: agents on another store never see you), and a warning when something was
    not applied as asked (e.g. autonomy lowered or clamped by a room cap). Over a shared HTTP
    server also credential: pass it as session_id (the bare id is a name others see, not a key).
    Messages said in your rooms before you joined are not delivered to you: room_history shows them.
    Errors: invalid_argument: <field> names the malformed argument."""
    s = _state(ctx)
    me = s.identity
    pid, host = me.pid, None
    sent = headers(ctx)
    if pid is None:  # a shared (HTTP) server: the client may name its agent's process (identity.py)
        pid, host = agent_process(sent)
    joined = plain(s.store.room_join(
        cwd=me.cwd, pid=pid, room=room, extra_rooms=extra_rooms, label=label, tags=tags, autonomy=autonomy,
        harness=harness or me.harness, harness_key=harness_key or me.harness_key, wake_lever=s.wake_lever, host=host,
    ))
    return {**joined, "store": s.store.path, **s.selves.joined_as(joined["session_id"], sent)}


def room_leave(ctx: Context, session_id: SessionId) -> dict[str, Any]:
    """Leave every room and end your session when you are done: your leases are released and
    your unread messages expire. The session_id is dead afterwards (room_join for a new one).
    Errors: unknown_session: the id names no live session (the text says what it probably is)."""
    _store(ctx).room_leave(session_id)
    return {}


def room_leave_room(ctx: Context, session_id: SessionId, room: RoomToLeave) -> dict[str, Any]:
    """Leave one room and stay in the others. Errors: invalid_argument: room when you are not
    in it or the name is malformed; unknown_session."""
    _store(ctx).room_leave_room(session_id, room)
    return {}


def room_who(ctx: Context, session_id: OptionalSessionId = None, room: RoomName = None) -> dict[str, Any]:
    """Who is here. With `room`: its members; else with session_id: everyone sharing a room with
    you; with neither: every session. Each has session_id, label, harness ('human': a person
    at the command line, not an agent), cwd, rooms, tags,
    autonomy, last_seen and liveness: 'alive' (its agent is running), 'gone' (it is not; it may
    be pruned), 'unknown' (no process recorded). Also store (the store you are on), and a warning
    when nobody else is there. Errors: unknown_session; invalid_argument: room."""
    store = _store(ctx)
    sessions = plain(store.room_who(session_id, room))
    answer: dict[str, Any] = {"sessions": sessions, "store": store.path}
    if not any(m["session_id"] != session_id for m in sessions):
        scope = f"in room {room}" if room else "sharing a room with you" if session_id else "in this store"
        answer["warning"] = (
            f"nobody else is here: no other live session {scope} (store {store.path}). If you expected others, "
            "they may be on another store (a different AGENTS_ROOM_DB): `agents-room doctor` lists the stores it finds")
    return answer


def room_set_autonomy_cap(
    ctx: Context, autonomy: Cap, session_id: OptionalSessionId = None, room: RoomName = None
) -> dict[str, Any]:
    """The operator's way to lower autonomy: cap a room's level; members above it are lowered
    now and later joins are clamped. Call it only when your human asks. Without `room` it caps
    your repo room (then session_id is needed). Returns room and autonomy.
    Errors: invalid_argument: room (no room named and no session_id); unknown_session."""
    target, level = _store(ctx).room_set_autonomy_cap(autonomy, session_id, room)
    return {"room": target, "autonomy": level}


# -- messages ------------------------------------------------------------------------------------


def msg_send(
    ctx: Context, session_id: SessionId, to: To, subject: Subject = None, body: Body = None,
    reply_to: ReplyTo = None, ttl_s: MessageTtl = None,
) -> dict[str, Any]:
    """Send a message to other agents. Returns message_id and recipients (session ids). Zero
    recipients is not an error: a warning says the selector matched nobody, and the message
    still shows in your rooms' history. Errors: unknown_session: your session_id names no live
    session; unknown_session: to: ... the recipient in `to` has left or is not a session id (your
    own session is fine: room_who lists who is here); invalid_argument: <field>."""
    return plain(_store(ctx).msg_send(session_id, to, subject, body, reply_to, ttl_s))


def msg_recv(ctx: Context, session_id: SessionId, limit: Limit = None) -> dict[str, Any]:
    """Read your unread messages, oldest first (default up to 100); they are marked read. Call it
    when told you have unread messages, and at natural pauses. When there are none, `inbox`
    says which rooms you are in, how many messages you ever received and read, and when the
    last arrived, so an empty answer is not mistaken for a wrong room or id. A message whose
    sender_harness is 'human' comes from a person, not an agent; msg_send to its sender answers
    them. Errors: unknown_session; invalid_argument: limit."""
    return plain(_store(ctx).msg_recv(session_id, limit))


def msg_ack(ctx: Context, session_id: SessionId, message_id: MessageId) -> dict[str, Any]:
    """Confirm you handled a message you have read (msg_recv first); its sender sees it in
    msg_sent. Acking twice is harmless. Errors: not_recipient: it was never delivered to you;
    invalid_argument: message_id when it is not read yet or expired unread; unknown_session."""
    _store(ctx).msg_ack(session_id, message_id)
    return {}


def msg_unread(ctx: Context, session_id: SessionId) -> dict[str, Any]:
    """How many unread messages wait for you, without reading them. Errors: unknown_session."""
    return {"count": _store(ctx).msg_unread(session_id)}


def msg_sent(ctx: Context, session_id: SessionId, limit: Limit = None) -> dict[str, Any]:
    """The messages you sent, newest first (default 50), each with every recipient's state
    (stored, offered, accepted, read, acked, expired, undeliverable), how many are still
    pending, and which recipients have left. Use it to see whether you were heard.
    Errors: unknown_session; invalid_argument: limit."""
    return {"messages": plain(_store(ctx).msg_sent(session_id, limit))}


def room_history(
    ctx: Context, session_id: OptionalSessionId = None, room: RoomName = None, limit: Limit = None
) -> dict[str, Any]:
    """A room's messages, oldest first (the last 50 by default): what was said and decided there,
    including before you joined. Default room: your repo room. Read-only: marks nothing read.
    Errors: invalid_argument: room (no room named and no session_id); unknown_session."""
    target, found = _store(ctx).room_history(session_id, room, limit)
    return {"room": target, "messages": plain(found)}


# -- leases --------------------------------------------------------------------------------------


def lease_claim(
    ctx: Context, session_id: SessionId, path: PathArg, ttl_s: LeaseTtl = None, mode: Mode = None
) -> dict[str, Any]:
    """Claim a file before you edit it, so no other agent edits it at the same time; claim a
    directory (a path ending in '/', or an existing directory) to hold every path beneath it,
    e.g. for a refactor: it conflicts with leases of anything beneath or above it. ok=true: it
    is yours until lease.expires_at (lease.token grows with every grant); claiming it again
    extends it, and a sole shared holder may upgrade to exclusive (holder is null). ok=false:
    someone else holds it; `holder` says who and until when, `reason` says it in words. Do not
    edit it then: message the holder (msg_send) or work on something else. Release it when done.
    Errors: unknown_session; invalid_argument: path, ttl_s or mode; store_busy (retry)."""
    claim = _store(ctx).lease_claim(session_id, path, ttl_s, mode)
    if claim.ok:  # the store's holder of a grant is the caller's own lease: said once, as lease
        return {"ok": True, "holder": None, "reason": claim.reason, "lease": plain(claim.lease)}
    return plain(claim)


def lease_renew(ctx: Context, session_id: SessionId, path: PathArg, ttl_s: LeaseTtl = None) -> dict[str, Any]:
    """Extend your lease before it expires, for edits that take long. Returns the renewed lease
    with a new token. ttl_s defaults to the lease's own length. Errors: lease_not_held: it
    expired or was never yours (the text names the current holder, if any): lease_claim again
    and re-check the file; unknown_session; invalid_argument: path or ttl_s."""
    return plain(_store(ctx).lease_renew(session_id, path, ttl_s))


def lease_release(ctx: Context, session_id: SessionId, path: PathArg) -> dict[str, Any]:
    """Release your lease when you finish editing, so others may claim it.
    Errors: lease_not_held: you do not hold it (the text says who does, if anyone); unknown_session."""
    _store(ctx).lease_release(session_id, path)
    return {}


def lease_check(ctx: Context, session_id: SessionId, path: PathArg) -> dict[str, Any]:
    """Is a file free? Returns free, and lease: the lease in the way (session_id, label, mode,
    expires_at; its path may be a directory over the file, ending in '/'), plus every holder
    (of shared leases, or beneath a directory). Does not claim anything.
    Errors: unknown_session; invalid_argument: path."""
    return plain(_store(ctx).lease_check(session_id, path))


def lease_list(ctx: Context, session_id: SessionId) -> dict[str, Any]:
    """Every live lease in the store (which files, or directories: paths ending in '/', are being
    edited, by whom, until when), with mine=true on yours and at_edit=true on one the edit guard
    took at an edit. Errors: unknown_session."""
    return {"leases": plain(_store(ctx).lease_list(session_id))}


# -- reads and drift -----------------------------------------------------------------------------


def note_read(ctx: Context, session_id: SessionId, path: PathArg) -> dict[str, Any]:
    """Record what a file holds right after you read it (its SHA-256), so drift_check can tell
    you later whether it changed under you. Returns hash. Errors: invalid_argument: path
    (missing, a directory, unreadable, or the store's own files); unknown_session."""
    return {"hash": _store(ctx).note_read(session_id, path)}


def drift_check(ctx: Context, session_id: SessionId, path: PathArg) -> dict[str, Any]:
    """Before editing a file you read earlier: did it change since your note_read? severity
    SAFE: unchanged, or baseline=false (you never called note_read on it: nothing to compare);
    MINOR: changed, nobody else held a lease on it: re-read it; CRITICAL: changed while another
    session (`holder`, named with its label in `message`) held a lease on it: re-read and
    coordinate with them. Also path, changed, since (when you read it, Unix seconds), message.
    Errors: invalid_argument: path; unknown_session."""
    return plain(_store(ctx).drift_check(session_id, path))


TOOLS = (
    room_join, room_leave, room_leave_room, room_who, room_set_autonomy_cap,
    msg_send, msg_recv, msg_ack, msg_unread, msg_sent, room_history,
    lease_claim, lease_renew, lease_release, lease_check, lease_list,
    note_read, drift_check,
)
READ_ONLY = {"room_who", "msg_unread", "msg_sent", "room_history", "lease_check", "lease_list", "drift_check"}


_ONE_LINE = compact_json(separators=(", ", ": "), ensure_ascii=False)


def _answering(fn: Any) -> Any:
    """``fn`` answering with the whole ``CallToolResult``: its ``dict`` as structured content and
    once more as one line of JSON text. The SDK would otherwise re-validate and re-serialize
    the dict and render an indented text (a third more of the model's context, for nothing);
    it passes a ``CallToolResult`` through, checked against the same output schema, which
    the SDK still reads from ``fn``'s annotations. A ``session_id`` is first checked to be one
    this server acts for (selves.py): one set lookup for the sessions it joined (a credential
    given in its place becomes the id it names)."""

    takes_session = "session_id" in inspect.signature(fn).parameters

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> CallToolResult:
        if takes_session and kwargs.get("session_id") is not None:  # a name, not a key (selves.py)
            ctx = kwargs["ctx"]
            state = _state(ctx)
            kwargs["session_id"] = state.selves.check(state.store, kwargs["session_id"], headers(ctx))
        result = fn(*args, **kwargs)
        return CallToolResult(content=[TextContent(type="text", text=_ONE_LINE(result))], structured_content=result)

    return call


def _on_the_loop(fn: Any) -> Any:
    """``fn`` as a coroutine function: the SDK then calls it on the event loop instead of in a
    worker thread (see ``register``)."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return call


def register(server: MCPServer[State], *, on_the_loop: bool = False) -> None:
    """``on_the_loop``: run each call on the event loop, not in a worker thread. For a stdio
    server, which serves one agent: the hop to the thread and back costs about as much CPU
    as the store's own work on a claim (~0.4 ms, docs/performance.md), and the agent waits
    for the answer either way (a store call waits at most the bounded busy timeout). A
    server shared by several agents (HTTP) keeps the threads."""
    for fn in TOOLS:
        server.add_tool(
            _on_the_loop(_answering(fn)) if on_the_loop else _answering(fn), description=inspect.cleandoc(fn.__doc__ or ""),
            annotations=_READ_ONLY if fn.__name__ in READ_ONLY else _WRITES,
        )
