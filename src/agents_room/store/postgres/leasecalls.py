"""A lease write (claim, release, renew) as one round trip (the engine contract's ``serve_lease``, store/served.py):
BEGIN, the server function of migrate_4.sql (which takes the write lock and the time, and
runs store/leases.py's rules), this process's call counts, COMMIT (asynchronous: the lock
goes at the commit record), then the flush outside the lock (database.DURABLE), in one
query string. The lock is held for that one round trip only, never while the client runs.

Parameters are bound client side (psycopg's quoting): a query string of several statements
cannot carry server-side parameters."""

from __future__ import annotations

from typing import Any

import psycopg

from ..errors import StoreBusy
from ..leasecall import Lease, LeaseAnswer, LeaseCall
from .connection import translate
from .tx import _bind, _pg

_CLAIM = "SELECT * FROM agents_room_lease_claim(%s, %s, %s, %s::float8, %s, %s::float8, %s, %s::text[])"
_RELEASE = "SELECT * FROM agents_room_lease_release(%s, %s, %s, %s::float8)"
_RENEW = "SELECT * FROM agents_room_lease_renew(%s, %s, %s, %s::float8, %s::float8)"
# The functions' OUT columns in order (migrate_4.sql): read by position, not through the
# cursor's description (whose column objects cost more than the rest of the answer).
_CLAIM_COLUMNS = ("o_outcome", "o_now", "o_cwd", "o_label", "o_h_path", "o_h_session", "o_h_label", "o_h_mode",
                  "o_h_token", "o_h_acquired", "o_h_expires", "o_in_the_way", "o_mine_mode", "o_token",
                  "o_acquired", "o_expires")
_RELEASE_COLUMNS = ("o_outcome", "o_now", "o_cwd", "o_label", "o_mode", "o_token")
_RENEW_COLUMNS = ("o_outcome", "o_now", "o_cwd", "o_label", "o_mode", "o_token", "o_acquired", "o_expires")
_ROWS = psycopg.pq.ExecStatus.TUPLES_OK


class _Held:
    """What :meth:`callcounts.CallCounts.before_commit` adds, bound into statements of the
    same query string instead of being sent."""

    def __init__(self, binder: psycopg.ClientCursor) -> None:
        self.binder, self.statements = binder, []

    def many(self, sql: str, rows: list[tuple]) -> None:
        self.statements += [_bind(self.binder, _pg(sql), row) for row in rows]


def serve(db: Any, call: LeaseCall, begin: str, durable: str) -> LeaseAnswer:
    """Run ``call`` (``begin``: the write transaction's BEGIN; ``durable``: the flush after
    it); ``db`` the :class:`.database.Database`, whose connection and lock this uses.
    Raises ``StoreBusy``/``StoreError`` as :meth:`.database.Database.write` does."""
    if not db._lock.acquire(timeout=db.busy_timeout_s):
        raise StoreBusy(f"{db.location} is busy in this process; nothing was changed, try again")
    calls = db.calls if db.calls is not None and db.calls.pending else None
    try:
        conn = db._connection()
        binder = psycopg.ClientCursor(conn)
        now = None if db.server_time else db.clock.now()
        if call.op == "claim":
            sql = binder.mogrify(_CLAIM, (call.session_id, call.cwd, call.path, call.ttl_s, call.mode, now,
                                          call.idents[0] if call.idents else None, list(call.idents)))
        elif call.op == "renew":
            sql = binder.mogrify(_RENEW, (call.session_id, call.cwd, call.path, call.ttl_s, now))
        else:
            sql = binder.mogrify(_RELEASE, (call.session_id, call.cwd, call.path, now))
        held = _Held(binder)
        if calls is not None:
            calls.before_commit(held)
        try:
            cur = conn.execute("; ".join([begin, sql, *held.statements, "COMMIT", durable]))
            while (cur.pgresult is None or cur.pgresult.status != _ROWS) and cur.nextset():
                pass  # BEGIN's result first; the function's is the first with rows
            row = cur.fetchone()
        except BaseException:
            if calls is not None:
                calls.after_commit(False)
            raise
        if calls is not None:
            calls.after_commit(True)
        columns = {"claim": _CLAIM_COLUMNS, "renew": _RENEW_COLUMNS}.get(call.op, _RELEASE_COLUMNS)
        return _answer(call, row, columns)
    except BaseException as exc:
        db._rollback()
        if isinstance(exc, psycopg.Error):
            raise translate(exc, db.location) from exc
        raise
    finally:
        db._lock.release()


def _answer(call: LeaseCall, row: Any, names: tuple[str, ...]) -> LeaseAnswer:
    got = dict(zip(names, row, strict=True))
    outcome = got["o_outcome"]
    if outcome in ("unknown", "cwd", "not_held", "released", "renamed"):
        return LeaseAnswer(outcome, cwd=got["o_cwd"])
    if outcome == "renewed":
        lease = Lease(call.path, call.session_id, got["o_label"], got["o_mode"], got["o_token"], got["o_acquired"],
                      got["o_expires"])
        return LeaseAnswer("renewed", got["o_cwd"], lease=lease)
    if outcome == "denied":
        holder = Lease(got["o_h_path"], got["o_h_session"], got["o_h_label"], got["o_h_mode"], got["o_h_token"],
                       got["o_h_acquired"], got["o_h_expires"])
        return LeaseAnswer("denied", got["o_cwd"], holder, got["o_in_the_way"], got["o_mine_mode"])
    lease = Lease(call.path, call.session_id, got["o_label"], call.mode, got["o_token"], got["o_acquired"],
                  got["o_expires"])
    return LeaseAnswer("granted", got["o_cwd"], previous_mode=got["o_mine_mode"], lease=lease)
