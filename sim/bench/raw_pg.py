"""The raw ceiling on PostgreSQL: bare ``psycopg`` doing what the PostgreSQL store's
``lease_claim`` does (a fresh grant), statement for statement, on the same schema, with the
same lock scheme (READ COMMITTED, the store's one transaction-scoped advisory write lock taken
with the server's time in the same round trip, ``BEGIN`` sent with it; the commit without
waiting for its flush, then the flush after the lock, in the COMMIT's round trip), but none
of the store's Python around them. ``sim bench --store postgresql://...`` divides the store's
throughput on PostgreSQL by this one's.

And the true baseline (:class:`PlainPgRoom`): one ``INSERT`` and its ``COMMIT`` per call, in
autocommit, with the server's ``synchronous_commit`` (on), no lock: what the server does for
writers that need no order at all. The store's throughput over this one is what the issue's
targets are stated in (docs/scale.md).
"""

from __future__ import annotations

import json
import os
import secrets
from typing import Any

import psycopg

# Only constants come from the store: the lock key and the statements that take it, so the
# ratio measures the store's code, not a different locking scheme. The connection and every
# statement here are bare psycopg.
from agents_room.store.postgres.database import BEGIN_WRITE, DURABLE, LOCK_NOW

_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_EVENT = "INSERT INTO events (at, session_id, kind, path, payload) VALUES (%s, %s, %s, %s, %s) RETURNING seq"


def connect(url: str, busy_timeout_s: float = 5.0) -> psycopg.Connection:
    conn = psycopg.connect(url, autocommit=True, connect_timeout=max(2, int(busy_timeout_s)))
    wait_ms = int(busy_timeout_s * 1000)  # the store's session settings
    conn.execute(f"SET lock_timeout = {wait_ms}; SET statement_timeout = {wait_ms * 4}; "
                 "SET idle_in_transaction_session_timeout = 60000")
    return conn


class RawPgRoom:
    """One process's bare connection to a store's schema (made by the store)."""

    def __init__(self, url: str) -> None:
        self.conn = connect(url)

    def _begin(self) -> float:
        """BEGIN and the write lock, one round trip; a lock wait past lock_timeout rolls back
        (as the store's does), so the connection is ready for the next try."""
        try:
            cur = self.conn.execute(f"{BEGIN_WRITE}; {LOCK_NOW}")
            cur.nextset()
            return cur.fetchone()[0]  # type: ignore[index]
        except psycopg.Error:
            self._rollback()
            raise

    def _rollback(self) -> None:
        if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            self.conn.execute("ROLLBACK")

    def _event(self, now: float, sid: str | None, kind: str, path: str | None, **payload: Any) -> int:
        return self.conn.execute(_EVENT, (now, sid, kind, path, _COMPACT(payload))).fetchone()[0]  # type: ignore[index]

    def join(self, cwd: str, room: str, label: str) -> str:
        """A session row and its room membership, as a join leaves them."""
        sid = secrets.token_hex(8)
        now = self._begin()
        try:
            self.conn.execute(
                "INSERT INTO sessions (id, harness, cwd, pid, label, autonomy, created_at, last_seen) "
                "VALUES (%s, 'bench', %s, %s, %s, 'notify', %s, %s)", (sid, cwd, os.getpid(), label, now, now))
            self.conn.execute("INSERT INTO memberships (session_id, room, joined_at) VALUES (%s, %s, %s)",
                              (sid, room, now))
            self._event(now, sid, "join", None, rooms=[room])
            self.conn.execute(f"COMMIT; {DURABLE}")
        except BaseException:
            self._rollback()
            raise
        return sid

    def claim(self, sid: str, path: str, ttl_s: float, mode: str = "exclusive") -> dict[str, object]:
        """Touch the session, sweep expired leases (an event each), look up the holders,
        take a token, insert the lease and its event: what the store's claim does."""
        conn = self.conn
        now = self._begin()
        try:
            conn.execute("UPDATE sessions SET last_seen = %s WHERE id = %s AND left_at IS NULL "
                         "RETURNING id, cwd, label, last_seen", (now, sid)).fetchone()
            for p, holder, m, token, expires_at in conn.execute(
                "DELETE FROM leases WHERE expires_at <= %s RETURNING path, session_id, mode, token, expires_at", (now,)
            ).fetchall():
                self._event(now, holder, "lease_expire", p, mode=m, token=token, expires_at=expires_at)
            holders = conn.execute(
                "SELECT l.session_id, l.mode, l.expires_at FROM leases l JOIN sessions s ON s.id = l.session_id "
                "WHERE l.path = %s AND l.expires_at > %s ORDER BY l.mode, l.token", (path, now),
            ).fetchall()
            others = [h for h in holders if h[0] != sid and (mode == "exclusive" or h[1] == "exclusive")]
            if others:
                conn.execute(f"COMMIT; {DURABLE}")
                return {"ok": False, "holder": others[0][0]}
            token = conn.execute(
                "UPDATE counters SET value = value + 1 WHERE name = 'lease_token' RETURNING value").fetchone()[0]  # type: ignore[index]
            expires = now + ttl_s
            conn.execute(
                "INSERT INTO leases (path, session_id, mode, token, ttl_s, acquired_at, expires_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (path, session_id) DO UPDATE SET mode = excluded.mode, "
                "token = excluded.token, ttl_s = excluded.ttl_s, expires_at = excluded.expires_at",
                (path, sid, mode, token, ttl_s, now, expires),
            )
            self._event(now, sid, "lease_grant", path, mode=mode, token=token, expires_at=expires, previous_mode=None)
            conn.execute(f"COMMIT; {DURABLE}")
        except BaseException:
            self._rollback()
            raise
        return {"ok": True, "token": token, "expires_at": expires}

    def close(self) -> None:
        self.conn.close()


class PlainPgRoom:
    """One process's plain writes: each call one row into ``events`` (the store's append-only
    table, its identity and index) and its commit, autocommit, nothing else."""

    def __init__(self, url: str) -> None:
        self.conn = connect(url)
        self.conn.execute("SET synchronous_commit = on")  # whatever the server's default: a durable commit

    def join(self, cwd: str, room: str, label: str) -> str:
        return secrets.token_hex(8)  # no session row: the baseline writes one row per call

    def claim(self, sid: str, path: str, ttl_s: float, mode: str = "exclusive") -> dict[str, object]:
        seq = self.conn.execute(_EVENT, (0.0, sid, "plain", path, "{}")).fetchone()[0]  # type: ignore[index]
        return {"ok": True, "seq": seq}

    def close(self) -> None:
        self.conn.close()
