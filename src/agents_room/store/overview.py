"""The overview: everything a live view shows at once (rooms and members, live leases and
their recent history, messages with each recipient's delivery state, recent events), read
in one transaction. Read-only: it never sweeps, never touches ``last_seen``.

Portable SQL with ``?`` placeholders only: the same queries run on every backend. The host
column (``sessions.host``, schema 2) is found from the cursor's description, not from a
catalogue query.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import coverage
from .leases import Lease
from .liveness import Judge
from .messages import UNREAD, Message
from .rooms import Member
from .engine import Tx

KEY_SHOWN = 8  # characters of a harness key shown; the rest is never sent to a viewer
LEASE_KINDS = ("lease_grant", "lease_renew", "lease_release", "lease_expire")
HISTORY_EVENTS = 20_000  # the timeline looks at most this many events back
MAX_SPANS = 300
MAX_MESSAGES = 20
MAX_EVENTS = 40
BODY_SHOWN = 400
TEXT_SHOWN = 160


@dataclass(frozen=True)
class MemberView(Member):
    key: str | None  # the harness key's first KEY_SHOWN characters and an ellipsis
    unread: int


@dataclass(frozen=True)
class RoomView:
    name: str
    cap: str | None
    members: int


@dataclass(frozen=True)
class LiveLease(Lease):
    ttl_s: float
    directory: bool  # a directory lease (path ending in "/"): it covers every path beneath
    at_edit: bool = False  # taken by the edit guard at an edit (store/editclaim.py)


@dataclass(frozen=True)
class LeaseSpan:
    """One holder's stretch on a path within the window. ``end`` None: still held."""

    path: str
    session_id: str
    label: str | None
    mode: str
    start: float
    end: float | None
    how: str  # live, release, expire, leave, prune


@dataclass(frozen=True)
class DeliveryView:
    recipient: str
    label: str | None
    state: str


@dataclass(frozen=True)
class MessageView(Message):
    deliveries: list[DeliveryView]


@dataclass(frozen=True)
class EventView:
    seq: int
    at: float
    session_id: str | None
    label: str | None
    kind: str
    path: str | None
    detail: dict[str, Any]


@dataclass(frozen=True)
class Overview:
    now: float
    seq: int
    room: str | None  # the filter, None = every room
    window_s: float
    has_host: bool
    rooms: list[RoomView]  # every room, whatever the filter (to choose from)
    members: list[MemberView]
    leases: list[LiveLease]
    spans: list[LeaseSpan]
    messages: list[MessageView]
    events: list[EventView]


def short_key(key: str | None) -> str | None:
    return None if not key else key[:KEY_SHOWN] + "…"


def _clip(value: Any, n: int = TEXT_SHOWN) -> Any:
    return value[:n] + "…" if isinstance(value, str) and len(value) > n else value


def _in_room(column: str, room: str | None) -> tuple[str, tuple]:
    if room is None:
        return "", ()
    return f" AND {column} IN (SELECT session_id FROM memberships WHERE room = ?)", (room,)


def snapshot(tx: Tx, judge: Judge, room: str | None, window_s: float) -> Overview:
    """The overview of ``room`` (None: every room) with a lease timeline of the last
    ``window_s`` seconds; liveness as ``judge`` sees it from this host."""
    now = tx.now
    seq = tx.scalar("SELECT coalesce(max(seq), 0) FROM events")
    members = _members(tx, judge, room)
    return Overview(
        now, seq, room, window_s, any(m.host is not None for m in members) or _has_host(tx),
        _rooms(tx), members, _leases(tx, room), _spans(tx, room, now, window_s, seq),
        _messages(tx, room), _events(tx, room),
    )


def _has_host(tx: Tx) -> bool:
    return "host" in [d[0] for d in tx.execute("SELECT * FROM sessions WHERE 1 = 0").description]


def _rooms(tx: Tx) -> list[RoomView]:
    counts = dict(tx.all(
        "SELECT m.room, count(*) FROM memberships m JOIN sessions s ON s.id = m.session_id "
        "WHERE s.left_at IS NULL GROUP BY m.room"
    ))
    caps = dict(tx.all("SELECT room, autonomy FROM room_caps"))
    return [RoomView(name, caps.get(name), counts.get(name, 0)) for name in sorted(counts.keys() | caps.keys())]


def _members(tx: Tx, judge: Judge, room: str | None) -> list[MemberView]:
    where, params = _in_room("id", room)
    cur = tx.execute(f"SELECT * FROM sessions WHERE left_at IS NULL{where} ORDER BY created_at, id", params)
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    rooms_of: dict[str, list[str]] = {}
    for sid, name in tx.all("SELECT session_id, room FROM memberships ORDER BY room"):
        rooms_of.setdefault(sid, []).append(name)
    unread = dict(tx.all(
        f"SELECT d.recipient, count(*) FROM deliveries d JOIN messages m ON m.id = d.message_id "
        f"WHERE d.state IN ({', '.join('?' * len(UNREAD))}) AND (m.expires_at IS NULL OR m.expires_at > ?) "
        "GROUP BY d.recipient",
        (*UNREAD, tx.now),
    ))
    return [
        MemberView(
            r["id"], r["label"], r["harness"], r["cwd"], r["pid"], rooms_of.get(r["id"], []), json.loads(r["tags"]),
            r["autonomy"], r["last_seen"],
            judge(r["id"], r["pid"], r["harness_key"], r.get("host"), r["last_seen"], r.get("gone_at")),
            key=short_key(r["harness_key"]), host=r.get("host"), wake_lever=r.get("wake_lever"),
            unread=unread.get(r["id"], 0),
        )
        for r in rows
    ]


def _leases(tx: Tx, room: str | None) -> list[LiveLease]:
    where, params = _in_room("l.session_id", room)
    rows = tx.all(
        "SELECT l.path, l.session_id, s.label, l.mode, l.token, l.acquired_at, l.expires_at, l.ttl_s, l.at_edit "
        f"FROM leases l JOIN sessions s ON s.id = l.session_id WHERE l.expires_at > ?{where} "
        "ORDER BY l.path, l.token",
        (tx.now, *params),
    )
    return [LiveLease(*r[:8], directory=coverage.is_directory(r[0]), at_edit=bool(r[8])) for r in rows]


def _spans(tx: Tx, room: str | None, now: float, window_s: float, seq: int) -> list[LeaseSpan]:
    """Each holder's stretches on each path since ``now - window_s``, from the lease events
    (at most the last HISTORY_EVENTS events), the latest MAX_SPANS of them."""
    since = now - window_s
    where, params = _in_room("e.session_id", room)
    rows = tx.all(
        "SELECT e.session_id, s.label, e.kind, e.path, e.at, e.payload FROM events e "
        "LEFT JOIN sessions s ON s.id = e.session_id "
        f"WHERE e.seq > ? AND e.at >= ? AND e.kind IN ({', '.join('?' * len(LEASE_KINDS))}){where} ORDER BY e.seq",
        (seq - HISTORY_EVENTS, since, *LEASE_KINDS, *params),
    )
    spans: list[LeaseSpan] = []
    held: dict[tuple[str, str], tuple[float, str, float, str | None]] = {}  # -> start, mode, expires_at, label
    for sid, label, kind, path, at, payload in rows:
        data, key = json.loads(payload), (path, sid)
        if kind in ("lease_grant", "lease_renew"):
            start = held[key][0] if key in held else (at if kind == "lease_grant" else since)
            held[key] = (start, data.get("mode", "exclusive"), data.get("expires_at", at), label)
        else:
            start, mode, _, _ = held.pop(key, (since, data.get("mode", "exclusive"), at, label))
            # an expiry is swept (and recorded) by the next lease write: it ended at expires_at
            end = min(at, data.get("expires_at", at)) if kind == "lease_expire" else at
            how = data.get("reason", "release") if kind == "lease_release" else "expire"
            if end >= since:
                spans.append(LeaseSpan(path, sid, label, mode, min(start, end), end, how))
    live = {(x.path, x.session_id): x for x in _leases(tx, room)}
    for key, (start, mode, expires_at, label) in held.items():
        if key in live:
            continue
        spans.append(LeaseSpan(key[0], key[1], label, mode, start, min(expires_at, now), "expire"))
    for key, x in live.items():
        start = held[key][0] if key in held else max(x.acquired_at, since)
        spans.append(LeaseSpan(x.path, x.session_id, x.label, x.mode, start, None, "live"))
    spans.sort(key=lambda s: (s.end is None, s.end or now, s.start))
    return spans[-MAX_SPANS:]


def _messages(tx: Tx, room: str | None) -> list[MessageView]:
    where, params = ("", ()) if room is None else (
        " WHERE m.id IN (SELECT message_id FROM message_rooms WHERE room = ?)", (room,))
    rows = tx.all(
        "SELECT m.id, m.sender, s.label, m.selector, m.subject, m.body, m.reply_to, m.created_at, m.expires_at, "
        f"s.harness FROM messages m LEFT JOIN sessions s ON s.id = m.sender{where} ORDER BY m.id DESC LIMIT ?",
        (*params, MAX_MESSAGES),
    )
    states: dict[int, list[DeliveryView]] = {}
    if rows:
        for mid, recipient, label, state in tx.all(
            "SELECT d.message_id, d.recipient, s.label, d.state FROM deliveries d "
            f"LEFT JOIN sessions s ON s.id = d.recipient WHERE d.message_id IN ({', '.join('?' * len(rows))}) "
            "ORDER BY d.message_id, d.recipient",
            tuple(r[0] for r in rows),
        ):
            states.setdefault(mid, []).append(DeliveryView(recipient, label, state))
    out = []
    for mid, sender, label, to, subject, body, reply_to, created_at, expires_at, harness in rows:
        overdue = expires_at is not None and expires_at <= tx.now
        deliveries = [DeliveryView(d.recipient, d.label, "expired" if overdue and d.state in UNREAD else d.state)
                      for d in states.get(mid, [])]
        out.append(MessageView(mid, sender, label, to, _clip(subject), _clip(body, BODY_SHOWN), reply_to, created_at,
                               expires_at, harness, deliveries=deliveries))
    return out


def _detail(payload: str) -> dict[str, Any]:
    data = json.loads(payload)
    if "harness_key" in data:
        data["harness_key"] = short_key(data["harness_key"])
    return {k: _clip(v) for k, v in data.items() if k != "recipients"} | (
        {"recipients": len(data["recipients"])} if "recipients" in data else {})


def _events(tx: Tx, room: str | None) -> list[EventView]:
    where, params = _in_room("e.session_id", room)
    rows = tx.all(
        "SELECT e.seq, e.at, e.session_id, s.label, e.kind, e.path, e.payload FROM events e "
        f"LEFT JOIN sessions s ON s.id = e.session_id WHERE 1 = 1{where} ORDER BY e.seq DESC LIMIT ?",
        (*params, MAX_EVENTS),
    )
    return [EventView(seq, at, sid, label, kind, path, _detail(payload))
            for seq, at, sid, label, kind, path, payload in rows]
