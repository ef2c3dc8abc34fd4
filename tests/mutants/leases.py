"""Broken lease stores. Each factory is called by the simulator's direct driver in the agent's
own process as ``factory(db, busy_timeout_s=...)`` and returns a ``Store``-like object."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agents_room.store import Store, bounds, leases
from agents_room.store.leases import Claim, Lease
from agents_room.store.sqlite.database import Database, Tx, translate

from .mutation import rewrite

# -- check-then-act -------------------------------------------------------------------------------


def _grant(tx: Tx, me: Any, path: str, ttl: float, mode: str, mine: Lease | None) -> Claim:
    """The act half of a claim: a token, the row (insert or update), the event."""
    token = tx.scalar("UPDATE counters SET value = value + 1 WHERE name = 'lease_token' RETURNING value")
    expires_at = tx.now + ttl
    tx.execute(
        "INSERT INTO leases (path, session_id, mode, token, ttl_s, acquired_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (path, session_id) DO UPDATE SET mode = excluded.mode, token = excluded.token, "
        "ttl_s = excluded.ttl_s, expires_at = excluded.expires_at",
        (path, me.id, mode, token, ttl, tx.now, expires_at),
    )
    tx.event("lease_grant", me.id, path, mode=mode, token=token, expires_at=expires_at,
             previous_mode=mine.mode if mine else None)
    lease = Lease(path, me.id, me.label, mode, token, mine.acquired_at if mine else tx.now, expires_at)
    return Claim(True, lease, "granted", lease)


def _in_the_way(holders: list[Lease], me: str, mode: str, path: str) -> tuple[Lease | None, list[Lease]]:
    # (holders: every lease over or beneath the path; only a lease of the path itself is re-claimed)
    mine = next((h for h in holders if h.session_id == me and h.path == path), None)
    others = [h for h in holders if h.session_id != me]
    return mine, (others if mode == "exclusive" else [h for h in others if h.mode == "exclusive"])


def _deny(path: str, h: Lease) -> Claim:
    return Claim(False, h, f"{path} is held {h.mode} by {h.session_id} until {h.expires_at:.0f}", None)


class CheckThenAct(Store):
    """Looks at the holders with its own ``lease_check`` (one read transaction), then grants
    in a second, write transaction: another claim can be granted between the two."""

    def lease_claim(self, session_id: Any, path: Any, ttl_s: Any = None, mode: Any = None) -> Claim:
        ttl = bounds.lease_ttl(ttl_s)
        mode = "exclusive" if mode is None else bounds.mode(mode)
        with self.db.read() as tx:
            where = bounds.lease_path(path, self._session(tx, session_id, touch=False).cwd)
        state = self.lease_check(session_id, path)
        mine, in_the_way = _in_the_way(state.holders, str(session_id), mode, where)
        if in_the_way:
            return _deny(where, in_the_way[0])
        with self.db.write() as tx:
            me = self._session(tx, session_id, touch=True)
            leases.sweep(tx)
            return _grant(tx, me, where, ttl, mode, mine)


def check_then_act(db: Path, busy_timeout_s: float) -> Store:
    return CheckThenAct.open(db, busy_timeout_s=busy_timeout_s)


# -- deferred BEGIN, busy retried in a new transaction ----------------------------------------------


class _RetryingConnection:
    """The connection as the deferred store's transactions see it: a statement that meets a
    busy lock rolls back, begins anew and runs again: the reads made before it are not
    redone, so what was decided on them now rests on an old snapshot."""

    def __init__(self, conn: sqlite3.Connection, attempts: int = 50) -> None:
        self._conn = conn
        self._attempts = attempts

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def _retry(self, run: Any) -> Any:
        for attempt in range(self._attempts):
            try:
                return run()
            except sqlite3.OperationalError as exc:
                busy = getattr(exc, "sqlite_errorname", "").startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))
                if not busy or attempt == self._attempts - 1:
                    raise
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                self._conn.execute("BEGIN")
                time.sleep(0.001)
        raise AssertionError("unreachable")

    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        return self._retry(lambda: self._conn.execute(sql, params))

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        return self._retry(lambda: self._conn.executemany(sql, rows))


class DeferredDatabase(Database):
    # Tries per statement; 1 is the deferred design done right: a busy upgrade is store_busy.
    attempts = 50

    @contextlib.contextmanager
    def write(self) -> Iterator[Tx]:
        with self._turn():
            try:
                self.conn.execute("BEGIN")  # deferred: no lock until the first write
            except sqlite3.Error as exc:
                raise translate(exc, self.path) from exc
            tx = Tx(_RetryingConnection(self.conn, self.attempts), self.clock.now())  # type: ignore[arg-type]
            try:
                yield tx
                self.conn.execute("COMMIT")
            except BaseException as exc:
                if self.conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self.conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise translate(exc, self.path) from exc
                raise


class DeferredBegin(Store):
    """A claim that reads first (a denial, the common case under contention, then never needs
    the write lock: what deferred transactions are for) inside the retrying deferred BEGIN.
    With a whole-transaction retry this design would be sound; the statement retry is the bug."""

    def lease_claim(self, session_id: Any, path: Any, ttl_s: Any = None, mode: Any = None) -> Claim:
        ttl = bounds.lease_ttl(ttl_s)
        mode = "exclusive" if mode is None else bounds.mode(mode)
        with self.db.write() as tx:
            me = self._session(tx, session_id, touch=False)
            where = bounds.lease_path(path, me.cwd)
            mine, in_the_way = _in_the_way(leases.check(tx, where), me.id, mode, where)
            if in_the_way:
                return _deny(where, in_the_way[0])
            leases.sweep(tx)  # the first write: the upgrade to the write lock happens here
            tx.execute("UPDATE sessions SET last_seen = ? WHERE id = ?", (tx.now, me.id))
            return _grant(tx, me, where, ttl, mode, mine)


def deferred_begin(db: Path | str, busy_timeout_s: float) -> Store:
    store = DeferredBegin.open(db, busy_timeout_s=busy_timeout_s)
    if getattr(store.db, "engine", "sqlite") == "postgresql":  # its twin there: mutants/leases_pg.py
        from .leases_pg import lazy_lock

        lazy_lock(store.db)
        return store
    store.db.__class__ = DeferredDatabase  # the same open connection, the deferred write()
    return store


# -- one-line mutations of the shipped lease rules ----------------------------------------------------


def early_expiry(db: Path, busy_timeout_s: float) -> Store:
    """The sweep's bound forgets renewals and re-claims (which move ``expires_at``, not
    ``acquired_at``): a lease renewed for longer is swept at its first term."""
    rewrite(leases, "sweep", "WHERE expires_at <= ?", "WHERE acquired_at + ttl_s <= ?")
    store = Store.open(db, busy_timeout_s=busy_timeout_s)
    if store.db.engine == "postgresql":  # claims and releases sweep in the server's function there
        from .leases_pg import rewrite_function

        sweep = ("WHERE expires_at <= o_now", "WHERE acquired_at + ttl_s <= o_now")
        rewrite_function(store, "agents_room_lease_claim", sweep)
        # Release and renew look for the caller's live lease before the sweep: by the same rule.
        held = ("AND expires_at > o_now) THEN", "AND acquired_at + ttl_s > o_now) THEN")
        for function in ("agents_room_lease_release", "agents_room_lease_renew"):
            rewrite_function(store, function, sweep, held)
    return store


def shared_ignores_exclusive(db: Path, busy_timeout_s: float) -> Store:
    """A shared claim never looks for an exclusive holder."""
    rewrite(leases, "claim", 'else [h for h in others if h.mode == "exclusive"]', "else []")
    store = Store.open(db, busy_timeout_s=busy_timeout_s)
    if store.db.engine == "postgresql":  # the server's claim function, likewise (covering paths only)
        from .leases_pg import rewrite_function

        rewrite_function(store, "agents_room_lease_claim",
                         ("      AND (p_mode = 'exclusive' OR l.mode = 'exclusive')\n    ORDER BY l.mode",
                          "      AND p_mode = 'exclusive'\n    ORDER BY l.mode"))
    return store
