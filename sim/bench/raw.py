"""The raw ceiling: bare ``sqlite3`` doing the same transactions as the store's
``lease_claim`` (a fresh grant), ``lease_release`` and ``msg_send`` (to one session), statement for statement,
on the same schema and with the same pragmas, but none of the store's Python around them.
``sim bench`` divides the store's throughput by this one's.

Also the work of the bare MCP server (``sim.bench.bare``): one such claim or release per tool call.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import time

# The store's own settings, so the ratio measures code, not configuration. (Only constants
# come from the store; the connection and every statement here are bare sqlite3.)
from agents_room.store.engines import DEFAULT_BUSY_TIMEOUT_S
from agents_room.store.sqlite.database import CACHE_KIB, WAL_LIMIT_BYTES

# One encoder for every event payload: json.dumps with options builds a new one per call.
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode


def connect(db: str) -> sqlite3.Connection:
    conn = sqlite3.connect(db, timeout=DEFAULT_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
    conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
    return conn


def _touch_and_sweep(conn: sqlite3.Connection, now: float, sid: str) -> None:
    """What every store write begins with: touch the caller's session, sweep expired leases
    (an event each)."""
    conn.execute("UPDATE sessions SET last_seen = ? WHERE id = ? AND left_at IS NULL "
                 "RETURNING id, cwd, label, last_seen", (now, sid)).fetchone()
    for p, holder, m, token, expires_at in conn.execute(
        "DELETE FROM leases WHERE expires_at <= ? RETURNING path, session_id, mode, token, expires_at", (now,)
    ).fetchall():
        _event(conn, now, holder, "lease_expire", p, mode=m, token=token, expires_at=expires_at)


def _event(conn: sqlite3.Connection, now: float, sid: str | None, kind: str, path: str | None, **payload: object) -> int:
    cur = conn.execute(
        "INSERT INTO events (at, session_id, kind, path, payload) VALUES (?, ?, ?, ?, ?)",
        (now, sid, kind, path, _COMPACT(payload)),
    )
    return cur.lastrowid  # type: ignore[return-value]


class RawRoom:
    """One process's bare connection to a store file (its schema made by the store)."""

    def __init__(self, db: str) -> None:
        self.conn = connect(db)

    def join(self, cwd: str, room: str, label: str) -> str:
        """A session row and its room membership, as a join leaves them."""
        sid = secrets.token_hex(8)
        now = time.time()
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO sessions (id, harness, cwd, pid, label, autonomy, created_at, last_seen) "
            "VALUES (?, 'bench', ?, ?, ?, 'notify', ?, ?)",
            (sid, cwd, os.getpid(), label, now, now),
        )
        conn.execute("INSERT INTO memberships (session_id, room, joined_at) VALUES (?, ?, ?)", (sid, room, now))
        _event(conn, now, sid, "join", None, rooms=[room])
        conn.execute("COMMIT")
        return sid

    def claim(self, sid: str, path: str, ttl_s: float, mode: str = "exclusive") -> dict[str, object]:
        """Touch the session, sweep expired leases (an event each), look up the holders,
        take a token, insert the lease and its event: what the store's claim does."""
        conn = self.conn
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        try:
            _touch_and_sweep(conn, now, sid)
            holders = conn.execute(
                "SELECT l.session_id, l.mode, l.expires_at FROM leases l JOIN sessions s ON s.id = l.session_id "
                "WHERE l.path = ? AND l.expires_at > ? ORDER BY l.mode, l.token", (path, now),
            ).fetchall()
            others = [h for h in holders if h[0] != sid and (mode == "exclusive" or h[1] == "exclusive")]
            if others:
                conn.execute("COMMIT")
                return {"ok": False, "holder": others[0][0]}
            token = conn.execute(
                "UPDATE counters SET value = value + 1 WHERE name = 'lease_token' RETURNING value").fetchone()[0]
            expires = now + ttl_s
            conn.execute(
                "INSERT INTO leases (path, session_id, mode, token, ttl_s, acquired_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (path, session_id) DO UPDATE SET mode = excluded.mode, "
                "token = excluded.token, ttl_s = excluded.ttl_s, expires_at = excluded.expires_at",
                (path, sid, mode, token, ttl_s, now, expires),
            )
            _event(conn, now, sid, "lease_grant", path, mode=mode, token=token, expires_at=expires, previous_mode=None)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return {"ok": True, "token": token, "expires_at": expires}

    def release(self, sid: str, path: str) -> None:
        """Touch the session, sweep expired leases (an event each), delete the lease and
        write its event: what the store's release does."""
        conn = self.conn
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        try:
            _touch_and_sweep(conn, now, sid)
            row = conn.execute("DELETE FROM leases WHERE path = ? AND session_id = ? RETURNING mode, token",
                               (path, sid)).fetchone()
            if row is None:
                raise LookupError(f"{path} is not held by {sid}")
            _event(conn, now, sid, "lease_release", path, mode=row[0], token=row[1], reason="release")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def send(self, sid: str, to: str, subject: str, body: str) -> int:
        """Touch the sender, resolve the recipient, insert the message, its room rows and
        the delivery, and the send event: what the store's send to one session does."""
        conn = self.conn
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("UPDATE sessions SET last_seen = ? WHERE id = ? AND left_at IS NULL "
                         "RETURNING id, cwd, label, last_seen", (now, sid)).fetchone()
            found = conn.execute("SELECT id, cwd, label, last_seen FROM sessions WHERE id = ? AND left_at IS NULL",
                                 (to,)).fetchone()
            if found is None:
                raise LookupError(f"no session {to}")
            mid = conn.execute(
                "INSERT INTO messages (sender, selector, subject, body, reply_to, created_at, expires_at) "
                "VALUES (?, ?, ?, ?, NULL, ?, NULL)", (sid, to, subject, body, now),
            ).lastrowid
            rooms = [r[0] for r in conn.execute("SELECT room FROM memberships WHERE session_id = ? ORDER BY room",
                                                (sid,))]
            conn.executemany("INSERT INTO message_rooms (room, message_id) VALUES (?, ?)", [(r, mid) for r in rooms])
            autonomy, lever = conn.execute("SELECT autonomy, wake_lever FROM sessions WHERE id = ?", (to,)).fetchone()
            state = "undeliverable" if autonomy == "wake" and not lever else "stored"
            conn.execute(
                "INSERT INTO deliveries (recipient, message_id, state, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (to, mid, state, now, now),
            )
            _event(conn, now, sid, "send", None, message_id=mid, selector=to, subject=subject, rooms=rooms,
                   recipients={to: state})
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return mid  # type: ignore[return-value]

    def close(self) -> None:
        self.conn.close()
