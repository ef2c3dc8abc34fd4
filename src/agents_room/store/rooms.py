"""Rooms: the repo room of a working directory, membership, leaving, who is here, autonomy caps."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from . import bounds
from .errors import InvalidArgument
from .leases import release_all
from .liveness import Judge, Liveness
from .messages import expire_unread_for
from .sessions import COLUMNS, LEVEL, Caller, Session
from .engine import Tx


def git_toplevel(cwd: str) -> str | None:
    """The top of the git work tree holding ``cwd`` (a ``.git`` folder, or the ``.git`` file
    of a worktree or submodule), found by walking up: no subprocess on the join path."""
    here = os.path.abspath(cwd)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def repo_room(cwd: str) -> str:
    """``repo:<name>``, name = basename of the git top-level of cwd (else of cwd), folded
    into the room alphabet."""
    top = git_toplevel(cwd) or os.path.abspath(cwd)
    name = os.path.basename(top.rstrip("/")) or "root"
    name = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "repo"
    return f"repo:{name}"[:64]


def peer_folders(tx: Tx, session_id: str) -> list[str]:
    """The folders (cwd) of the live sessions sharing a room with ``session_id``."""
    return [r[0] for r in tx.all(
        "SELECT DISTINCT s.cwd FROM memberships m1 JOIN memberships m2 ON m2.room = m1.room "
        "JOIN sessions s ON s.id = m2.session_id WHERE m1.session_id = ? AND m2.session_id <> ? "
        "AND s.left_at IS NULL ORDER BY s.cwd",
        (session_id, session_id),
    )]


@dataclass(frozen=True)
class Member:
    session_id: str
    label: str | None
    harness: str
    cwd: str
    pid: int | None
    rooms: list[str]
    tags: list[str]
    autonomy: str
    last_seen: float
    liveness: Liveness
    host: str | None  # the host its server runs on (store/hosts.py); None: not recorded (an old store)
    # how its agent is woken at autonomy `wake` (harnesses/wake.py: claude-channel, stop-hook,
    # command, terminal); None: it has no lever, and mail to it at `wake` is undeliverable
    wake_lever: str | None


def leave(tx: Tx, session: Caller | Session, reason: str = "leave") -> list[str]:
    """Leave every room, release every lease, expire unread deliveries, keep a tombstone."""
    rooms = [r[0] for r in tx.all("SELECT room FROM memberships WHERE session_id = ? ORDER BY room", (session.id,))]
    tx.execute("DELETE FROM memberships WHERE session_id = ?", (session.id,))
    release_all(tx, session.id, reason)
    expire_unread_for(tx, session.id)
    tx.execute("UPDATE sessions SET left_at = ? WHERE id = ?", (tx.now, session.id))
    tx.event("leave", session.id, rooms=rooms, reason=reason)
    return rooms


def leave_room(tx: Tx, session: Caller, room: str) -> None:
    """Leave one room, stay in the rest. Not being in it is ``InvalidArgument``."""
    cur = tx.execute("DELETE FROM memberships WHERE session_id = ? AND room = ?", (session.id, room))
    if cur.rowcount == 0:
        raise InvalidArgument("room", f"session {session.id} is not in room {room}")
    # the rooms that remain: what the checker's oracle compares with its own (rule SR3)
    rest = [r[0] for r in tx.all("SELECT room FROM memberships WHERE session_id = ? ORDER BY room", (session.id,))]
    tx.event("leave_room", session.id, room=room, rooms=rest)


def who(tx: Tx, judge: Judge, room: str | None, session: Caller | None) -> list[Member]:
    """Members of ``room``; else of every room ``session`` is in; else every live session,
    each with its liveness as ``judge`` sees it from this host."""
    if room is not None:
        where, params = "s.id IN (SELECT session_id FROM memberships WHERE room = ?)", (room,)
    elif session is not None:
        where = (
            "s.id IN (SELECT m2.session_id FROM memberships m1 "
            "JOIN memberships m2 ON m2.room = m1.room WHERE m1.session_id = ?)"
        )
        params = (session.id,)
    else:
        where, params = "1 = 1", ()
    rows = tx.all(
        f"SELECT {', '.join('s.' + c.strip() for c in COLUMNS.split(','))}, "
        f"{tx.ROOMS_OF_SESSION} FROM sessions s WHERE s.left_at IS NULL AND {where} "
        f"ORDER BY s.created_at, {tx.INSERTION_ORDER}",
        params,
    )
    members = []
    for row in rows:
        s = Session.from_row(row[:-1])
        members.append(Member(
            s.id, s.label, s.harness, s.cwd, s.pid, (row[-1] or "").split("\n") if row[-1] else [],
            s.tags, s.autonomy, s.last_seen, judge(s.id, s.pid, s.harness_key, s.host, s.last_seen, s.gone_at),
            s.host, s.wake_lever,
        ))
    return members


def home_room(tx: Tx, session: Caller) -> str:
    """The session's repo room, the default room of history and caps."""
    room = tx.scalar(
        "SELECT room FROM memberships WHERE session_id = ? AND room LIKE 'repo:%' ORDER BY joined_at LIMIT 1",
        (session.id,),
    )
    if room is None:
        room = tx.scalar("SELECT room FROM memberships WHERE session_id = ? ORDER BY joined_at LIMIT 1", (session.id,))
    if room is None:
        raise InvalidArgument("room", f"session {session.id} is in no room; name one")
    return room


def set_cap(tx: Tx, room: str, autonomy: str, by: str | None) -> list[str]:
    """Cap ``room`` at ``autonomy`` and lower every member above it. Returns who was lowered."""
    bounds.autonomy(autonomy)
    tx.execute(
        "INSERT INTO room_caps (room, autonomy) VALUES (?, ?) ON CONFLICT (room) DO UPDATE SET autonomy = excluded.autonomy",
        (room, autonomy),
    )
    tx.event("cap", by, room=room, autonomy=autonomy)
    above = [name for name, rank in LEVEL.items() if rank > LEVEL[autonomy]]
    lowered = tx.all(
        f"SELECT id, autonomy FROM sessions WHERE left_at IS NULL AND autonomy IN ({','.join('?' * len(above))}) "
        "AND id IN (SELECT session_id FROM memberships WHERE room = ?)",
        (*above, room),
    ) if above else []
    for sid, old in lowered:
        tx.execute("UPDATE sessions SET autonomy = ? WHERE id = ?", (autonomy, sid))
        tx.event("autonomy", sid, **{"from": old, "to": autonomy, "reason": f"cap:{room}"})
    return [sid for sid, _ in lowered]


def record_gone(tx: Tx, proved: list[tuple[str, float]]) -> None:
    """This host proved these sessions' agents gone (``(id, last_seen)``: a scan begun after
    that call): say so in the store, so other hosts can say gone too. Only if the session made
    no call since (its ``last_seen`` unchanged); a later call wins."""
    tx.many("UPDATE sessions SET gone_at = ? WHERE id = ? AND left_at IS NULL AND last_seen = ? AND last_seen <= ?",
            [(tx.now, sid, seen, tx.now) for sid, seen in proved])
