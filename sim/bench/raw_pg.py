"""PostgreSQL's ceilings and its baseline, bare ``psycopg``, none of the store's Python:

- :class:`RawPgRoom` (``raw-pg``): what the PostgreSQL store's ``lease_claim`` sends, the
  server's claim function (store/postgres/migrate_4.sql) with BEGIN, the COMMIT and the flush
  in one round trip, on the same schema. The store over this one is the cost of the store's
  Python around the same server work.
- :class:`LockedPgRoom` (``locked-pg``): one ``INSERT`` under the store's one write lock,
  committed as the store commits (asynchronously in the lock, then the flush after it, one
  round trip). Nothing a write does under that lock is cheaper: this over the plain baseline
  is the ceiling of every design that keeps one lock for the order of ``seq``
  (docs/decisions.md, "What one lock costs").
- :class:`PlainPgRoom` (``plain-pg``), the true baseline: one ``INSERT`` and its ``COMMIT`` per
  call, in autocommit, with ``synchronous_commit`` on, no lock: what the server does for
  writers that need no order at all. The store's throughput over this one is what the
  issue's targets are stated in (docs/scale.md).
"""

from __future__ import annotations

import json
import os
import secrets
from typing import Any

import psycopg

# Only constants come from the store: the lock key, the statements that take it and the flush,
# so the ratios measure the store's code, not a different locking scheme. The connection and
# every statement here are bare psycopg.
from agents_room.store.postgres.database import BEGIN_WRITE, DURABLE, LOCK_NOW

_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_CLAIM = ("SELECT o_outcome, o_token, o_expires FROM agents_room_lease_claim(%s, NULL, %s, %s::float8, %s, NULL)")
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
        self._binder = psycopg.ClientCursor(self.conn)  # a query string of several statements binds client side

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
        _rollback(self.conn)

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
        """The server's claim function (which takes the write lock, touches, sweeps, looks up
        the holders, draws the token, writes the lease and its event), in the store's one round trip."""
        try:
            cur = self.conn.execute(f"{BEGIN_WRITE}; {self._binder.mogrify(_CLAIM, (sid, path, ttl_s, mode))}; "
                                    f"COMMIT; {DURABLE}")
            outcome, token, expires = _nth_rows(cur, 1)
        except BaseException:
            self._rollback()
            raise
        return {"ok": outcome == "granted", "token": token, "expires_at": expires}

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


class LockedPgRoom(PlainPgRoom):
    """One process's writes of the one-lock design at their cheapest: each call one row into
    ``events`` under the store's write lock, committed as the store commits (the lock and
    asynchronous commit first, the COMMIT, then the flush after the lock), in one round trip."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._binder = psycopg.ClientCursor(self.conn)

    def claim(self, sid: str, path: str, ttl_s: float, mode: str = "exclusive") -> dict[str, object]:
        row = self._binder.mogrify(_EVENT, (0.0, sid, "locked", path, "{}"))
        try:
            cur = self.conn.execute(f"{BEGIN_WRITE}; {LOCK_NOW}; {row}; COMMIT; {DURABLE}")
            [seq] = _nth_rows(cur, 2)  # the lock's row (the time), then the insert's
        except BaseException:
            _rollback(self.conn)
            raise
        return {"ok": True, "seq": seq}


def _nth_rows(cur: psycopg.Cursor, n: int) -> tuple:
    """The row of the ``n``-th statement with rows in the query string ``cur`` ran."""
    while True:
        if cur.pgresult is not None and cur.pgresult.status == psycopg.pq.ExecStatus.TUPLES_OK:
            n -= 1
            if n == 0:
                return cur.fetchone()  # type: ignore[return-value]
        if not cur.nextset():
            raise psycopg.ProgrammingError("fewer statements with rows than expected")


def _rollback(conn: psycopg.Connection) -> None:
    """A failed query string may leave its transaction open (aborted): end it, so the
    connection is ready for the next call."""
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        conn.execute("ROLLBACK")
