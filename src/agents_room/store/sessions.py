"""Sessions: join (and rejoin by harness key), leave, prune, and resolving a session id,
with errors that name the id the caller probably meant."""

from __future__ import annotations

import json
import os
import re
from collections import namedtuple
from dataclasses import dataclass
from typing import Any

from . import bounds, paths
from .clock import iso
from .errors import InvalidArgument, UnknownSession
from .liveness import Judge
from .news import COLUMNS
from .engine import Tx

LEVEL = {name: rank for rank, name in enumerate(bounds.AUTONOMY_LEVELS)}
# The tag of a session the edit guard joined on its agent's behalf (store/editclaim.py).
EDIT_GUARD_TAG = "edit-guard"


@dataclass(frozen=True)
class Session:
    id: str
    harness: str
    harness_key: str | None
    cwd: str
    pid: int | None
    label: str | None
    tags: list[str]
    autonomy: str
    wake_lever: str | None
    created_at: float
    last_seen: float
    left_at: float | None
    host: str | None = None  # the host id of its server (store/hosts.py); None: recorded before hosts were
    gone_at: float | None = None  # when a check on its own host proved its agent gone

    @classmethod
    def from_row(cls, row: tuple) -> Session:
        values = list(row)
        values[6] = json.loads(values[6])
        return cls(*values)


class Caller(namedtuple("Caller", "id cwd label last_seen")):
    """The session an operation acts as: the four columns the operations use (``id``,
    ``cwd``, ``label`` or None, ``last_seen``). Every tool call but ``room_join`` resolves one,
    usually inside the write lock, so it is read as a bare tuple (no JSON to decode, no
    dataclass to fill) rather than as a whole ``Session``. A ``collections.namedtuple``:
    ``typing.NamedTuple`` compiles each annotation at import, which the edit guard pays."""

    __slots__ = ()
    id: str
    cwd: str
    label: str | None
    last_seen: float


_CALLER = ", ".join(Caller._fields)
_TOUCH = f"UPDATE sessions SET last_seen = ? WHERE id = ? AND left_at IS NULL RETURNING {_CALLER}"
_LOOKUP = f"SELECT {_CALLER} FROM sessions WHERE id = ? AND left_at IS NULL"


@dataclass(frozen=True)
class Joined:
    session_id: str
    rooms: list[str]
    autonomy: str
    warning: str | None
    rejoined: bool


# -- resolving ids ---------------------------------------------------------------------------


def resolve(tx: Tx, session_id: Any, store_path: str, *, touch: bool) -> Caller:
    """The live session ``session_id`` names. ``touch`` (write transactions only) records
    the call in ``last_seen`` in the same statement.

    Raises ``UnknownSession`` naming what the caller probably meant."""
    value = bounds.session_id_text(session_id)
    row = tx.one(_TOUCH, (tx.now, value)) if touch else tx.one(_LOOKUP, (value,))
    if row is None:
        raise UnknownSession(explain_unknown(tx, value, store_path))
    return Caller(*row)


def explain_unknown(tx: Tx, value: str, store_path: str) -> str:
    """Words for an id that names no live session (contract §2), given as the caller's own
    ``session_id``: the advice is for the caller's session."""
    lowered = value.lower()
    key = tx.one(
        "SELECT id, left_at FROM sessions WHERE harness_key = ? ORDER BY left_at IS NOT NULL, created_at DESC",
        (lowered,),
    )
    if key is not None:
        sid, left_at = key
        if left_at is None:
            return f"{value} is the harness key of session {sid}; pass session_id={sid!r}"
        return f"{value} is the harness key of session {sid}, which left at {iso(left_at)}; room_join again"
    if _looks_like_uuid(lowered):
        return (f"{value} looks like a harness key, but no session in store {store_path} has it; "
                "session ids are 16 lowercase hex, returned by room_join")
    if bounds.SESSION_ID_RE.fullmatch(value):
        left_at = tx.scalar("SELECT left_at FROM sessions WHERE id = ?", (value,))
        if left_at is not None:
            return f"session {value} left at {iso(left_at)}; room_join again for a new session id"
        return f"no such session {value} in store {store_path}: possibly left, or from another store"
    if re.fullmatch(r"[0-9a-f]{4,15}", lowered):
        ids = _starting(tx, lowered)
        if ids:
            return f"{value} is not a whole session id; it starts {', '.join(ids)}"
    labelled = _labelled(tx, value)
    if labelled:
        return f"{value!r} is the label of session {', '.join(labelled)}; pass the session id"
    return f"{value[:80]!r} is not a session id (16 lowercase hex, returned by room_join)"


def explain_unknown_recipient(tx: Tx, value: str, store_path: str) -> str:
    """Words for a ``to`` of ``msg_send`` that names no live session. The recipient is
    someone else: the caller's own session is fine, so the advice is about whom to write to
    (never "room_join again"). The text starts with the field, ``to:``."""
    lowered = value.lower()
    here = "room_who lists who is here"
    key = tx.one(
        "SELECT id, left_at, label FROM sessions WHERE harness_key = ? ORDER BY left_at IS NOT NULL, created_at DESC",
        (lowered,),
    )
    if key is not None:
        sid, left_at, label = key
        if left_at is None:
            return f"to: {value} is the harness key of session {sid}{_named(label)}; pass to={sid!r}"
        return (f"to: {value} is the harness key of session {sid}{_named(label)}, which left at {iso(left_at)} "
                f"and receives nothing more; {here}")
    if bounds.SESSION_ID_RE.fullmatch(value):
        row = tx.one("SELECT left_at, label FROM sessions WHERE id = ?", (value,))
        if row is not None:
            return (f"to: session {value}{_named(row[1])} left at {iso(row[0])} and receives nothing more; "
                    f"{here}")
        return f"to: no such session {value} in store {store_path}: possibly left, or from another store; {here}"
    hint = ""
    if re.fullmatch(r"[0-9a-f]{4,15}", lowered):
        ids = _starting(tx, lowered)
        hint = f"; it starts session {', '.join(ids)}" if ids else ""
    labelled = _labelled(tx, value)
    if labelled:
        hint = f"; did you mean session {' or '.join(labelled)} (label {value!r})? pass to=<that id>"
    return (f"to: {value[:80]!r} is not a session id (16 lowercase hex) nor a selector ('*', 'file:<glob>', "
            f"'tag:<tag>'){hint or '; ' + here}")


def _named(label: str | None) -> str:
    return f" ({label})" if label else ""


def _starting(tx: Tx, prefix: str) -> list[str]:
    return [r[0] for r in tx.all(
        "SELECT id FROM sessions WHERE id >= ? AND id < ? AND left_at IS NULL ORDER BY id LIMIT 5",
        (prefix, prefix + "g"),
    )]


def _labelled(tx: Tx, label: str) -> list[str]:
    return [r[0] for r in tx.all(
        "SELECT id FROM sessions WHERE label = ? AND left_at IS NULL ORDER BY created_at DESC LIMIT 5", (label,)
    )]


def _looks_like_uuid(value: str) -> bool:
    return re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", value) is not None


# -- join -------------------------------------------------------------------------------------


def join(
    tx: Tx,
    *,
    repo_room: str,
    cwd: str,
    pid: int | None,
    harness: str | None,
    harness_key: str | None,
    room: str | None,
    extra_rooms: list[str],
    label: str | None,
    tags: list[str] | None,
    autonomy: str | None,
    wake_lever: str | None,
    host: str | None = None,
) -> Joined:
    """Join ``repo_room`` plus ``room`` and ``extra_rooms``. The harness key of a live
    session rejoins it: same id, rooms added, label and tags replaced when given, autonomy
    raised only (clamped by the rooms' caps; a lower level is refused with a warning)."""
    wanted_rooms = list(dict.fromkeys([repo_room, *([room] if room else []), *extra_rooms]))
    existing = None
    if harness_key:
        row = tx.one(
            f"SELECT {COLUMNS} FROM sessions WHERE harness_key = ? AND left_at IS NULL "
            "ORDER BY created_at DESC LIMIT 1",
            (harness_key,),
        )
        existing = Session.from_row(row) if row else None
    if existing is None and pid is not None:
        # A session the edit guard joined for this harness process before its model joined
        # (store/editclaim.py): the model's own join is that session, as a rejoin by key is.
        by_pid = tx.one(
            f"SELECT {', '.join('s.' + c.strip() for c in COLUMNS.split(','))} FROM sessions s "
            "JOIN session_tags t ON t.session_id = s.id AND t.tag = ? "
            "WHERE s.pid = ? AND s.left_at IS NULL AND s.host IS NOT DISTINCT FROM ? "
            "AND (s.harness_key IS NULL OR s.harness_key = ?) ORDER BY s.created_at DESC LIMIT 1",
            (EDIT_GUARD_TAG, pid, host, harness_key),
        )
        existing = None if by_pid is None else Session.from_row(by_pid)

    if existing is None:
        sid = os.urandom(8).hex()  # secrets.token_hex(8), without importing hmac and hashlib
        tx.execute(
            f"INSERT INTO sessions ({COLUMNS}, view) VALUES (?, ?, ?, ?, ?, ?, ?, 'notify', ?, ?, ?, NULL, ?, NULL, ?)",
            (sid, harness or "unknown", harness_key, cwd, pid, label, json.dumps(tags or []), wake_lever, tx.now, tx.now,
             host, paths.view() or None),
        )
        stored_level = None
    else:
        sid = existing.id
        tx.execute(
            "UPDATE sessions SET cwd = ?, pid = coalesce(?, pid), harness = coalesce(?, harness), last_seen = ?, "
            "label = coalesce(?, label), tags = coalesce(?, tags), wake_lever = coalesce(?, wake_lever), host = ?, "
            "gone_at = NULL, harness_key = coalesce(harness_key, ?), view = ? WHERE id = ?",
            (cwd, pid, harness, tx.now, label, None if tags is None else json.dumps(tags), wake_lever, host,
             harness_key, paths.view() or None, sid),
        )
        stored_level = existing.autonomy
    if tags is not None:
        tx.execute("DELETE FROM session_tags WHERE session_id = ?", (sid,))
        tx.many("INSERT INTO session_tags (session_id, tag) VALUES (?, ?)", [(sid, t) for t in tags])
    tx.many(
        "INSERT INTO memberships (session_id, room, joined_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        [(sid, r, tx.now) for r in wanted_rooms],
    )
    rooms = [r[0] for r in tx.all("SELECT room FROM memberships WHERE session_id = ? ORDER BY room", (sid,))]
    level, warning = _decide_autonomy(tx, sid, rooms, stored_level, autonomy)
    tx.execute("UPDATE sessions SET autonomy = ? WHERE id = ?", (level, sid))
    tx.event(
        "join", sid, rooms=rooms, autonomy=level, harness_key=harness_key,
        rejoin=existing is not None, label=label, tags=tags, cwd=cwd, wake_lever=wake_lever,
    )
    return Joined(sid, rooms, level, warning, existing is not None)


def _decide_autonomy(
    tx: Tx, sid: str, rooms: list[str], stored: str | None, asked: str | None
) -> tuple[str, str | None]:
    cap_row = tx.one(
        "SELECT c.room, c.autonomy FROM room_caps c JOIN memberships m ON m.room = c.room "
        "WHERE m.session_id = ? ORDER BY CASE c.autonomy WHEN 'hold' THEN 0 WHEN 'notify' THEN 1 ELSE 2 END LIMIT 1",
        (sid,),
    )
    cap_room, cap = cap_row if cap_row else (None, "wake")
    warning = None
    if stored is None:  # new session
        level = asked or "notify"
    elif asked is None or LEVEL[asked] == LEVEL[stored]:
        level = stored
    elif LEVEL[asked] > LEVEL[stored]:
        level = asked
    else:
        level = stored
        warning = (
            f"autonomy stays {stored}: a rejoin only raises it; lowering is the operator's, "
            "through room_set_autonomy_cap"
        )
    if LEVEL[level] > LEVEL[cap]:
        warning = f"autonomy {level} clamped to {cap} by the cap of room {cap_room}"
        level = cap
    if stored is not None and level != stored:
        tx.event("autonomy", sid, **{"from": stored, "to": level, "reason": "rejoin"})
    return level, warning


# -- prune (leaving is rooms.leave) -----------------------------------------------------------


def prune_candidates(tx: Tx, quiet_s: float, judge: Judge) -> list[Session]:
    """Live sessions quiet longer than ``quiet_s`` whose agent is proven gone (the judge of
    room_who: unknown is kept, and so is a session of another host its own host has not
    proven gone)."""
    rows = tx.all(
        f"SELECT {COLUMNS} FROM sessions WHERE left_at IS NULL AND last_seen < ? ORDER BY last_seen",
        (tx.now - quiet_s,),
    )
    sessions = [Session.from_row(r) for r in rows]
    return [s for s in sessions if judge(s.id, s.pid, s.harness_key, s.host, s.last_seen, s.gone_at) == "gone"]


def check_quiet(quiet_s: Any) -> float:
    if isinstance(quiet_s, bool) or not isinstance(quiet_s, int | float) or quiet_s < 0:
        raise InvalidArgument("quiet_s", f"must be a number of seconds >= 0, got {quiet_s!r}")
    return float(quiet_s)
