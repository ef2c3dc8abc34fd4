"""The PostgreSQL engine's transaction (:class:`Tx`, the engine contract's
:class:`agents_room.store.engine.Tx`): the rules' ``?`` statements rewritten once per text into
psycopg's ``%s`` (cached), and the statements whose results the rules do not need held and
sent with the next one that needs a result, or with the COMMIT (:mod:`.database`)."""

from __future__ import annotations

from typing import Any

import psycopg

from ..jsontext import compact_json
from .connection import MAIL_CHANNEL

_COMPACT = compact_json()

# ? -> %s once per statement text (a literal % doubled first). The rules modules build a
# bounded set of texts (IN lists of 1..1000 marks at most), so the cache stays small.
_PARAMS: dict[str, str] = {}


def _pg(sql: str) -> str:
    found = _PARAMS.get(sql)
    if found is None:
        found = _PARAMS[sql] = sql.replace("%", "%%").replace("?", "%s")
    return found


class Tx:
    """One open transaction (the engine contract's :class:`agents_room.store.engine.Tx`).

    Statements whose results the rules do not need (:meth:`later`, :meth:`log`) wait in
    ``pending`` and go out with the next statement that needs a result, or with the COMMIT,
    in one round trip (a simple-protocol query string, parameters bound client side): while
    the write lock is held, each round trip is a wait of every other writer."""

    __slots__ = ("conn", "now", "wal", "pending", "_binder")

    # Per-engine SQL snippets the rules modules use where the dialects differ.
    ROOMS_OF_SESSION = "(SELECT string_agg(room, chr(10) ORDER BY room) FROM memberships WHERE session_id = s.id)"
    INSERTION_ORDER = "s.ord"
    # A range of paths in byte order (store/coverage.py), whatever the database's collation;
    # leases.path is COLLATE "C", so its primary key index serves the range.
    BYTEWISE = 'COLLATE "C"'

    def __init__(self, conn: psycopg.Connection, now: float) -> None:
        self.conn = conn
        self.now = now
        self.wal = ""  # a read's WAL insert position at its snapshot (Database.read)
        self.pending: list[str] = []  # statements bound client side, not sent yet (in order)
        self._binder = psycopg.ClientCursor(conn)  # binds parameters client side (psycopg's quoting)

    def _run(self, sql: str, params: tuple | dict | None) -> psycopg.Cursor:
        """``sql`` (psycopg's placeholders), after every pending statement, in one round trip."""
        if not self.pending:
            return self.conn.execute(sql, params)
        cur = self.conn.execute(self.sent_with(_bind(self._binder, sql, params)))
        while cur.nextset():  # the results of the pending statements come first; ours is the last
            pass
        return cur

    def sent_with(self, tail: str) -> str:
        """The pending statements and then ``tail``, as one query string (they count as sent)."""
        text = "; ".join([*self.pending, tail])
        self.pending.clear()
        return text

    def execute(self, sql: str, params: tuple | dict = ()) -> psycopg.Cursor:
        return self._run(_pg(sql), params or None)

    def many(self, sql: str, rows: list[tuple]) -> None:
        if self.pending:
            self.conn.execute(self.sent_with("SELECT 1"))
        if rows:
            self.conn.cursor().executemany(_pg(sql), rows)

    def one(self, sql: str, params: tuple | dict = ()) -> tuple | None:
        return self._run(_pg(sql), params or None).fetchone()

    def all(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        return self._run(_pg(sql), params or None).fetchall()

    def scalar(self, sql: str, params: tuple | dict = ()) -> Any:
        row = self._run(_pg(sql), params or None).fetchone()
        return None if row is None else row[0]

    def later(self, sql: str, params: tuple | dict = ()) -> None:
        """Run ``sql`` with the next statement that needs a result, or with the COMMIT: its
        errors surface there (the transaction then rolls back as a whole)."""
        self.pending.append(_bind(self._binder, _pg(sql), params or None))

    def notify_mail(self, session_ids: list[str]) -> None:
        """Tell each session's waiters (LISTEN on :func:`mail_channel`) at this transaction's
        commit; nothing if it rolls back. One statement for any number of recipients."""
        if session_ids:
            self._run("SELECT pg_notify(%s || r, '') FROM unnest(%s::text[]) r", (MAIL_CHANNEL, session_ids))

    def event(self, kind: str, session_id: str | None, path: str | None = None, **payload: Any) -> int:
        """Append an audit row in this transaction; returns its seq."""
        cur = self._run(_EVENT + " RETURNING seq", (self.now, session_id, kind, path, _COMPACT(payload)))
        return cur.fetchone()[0]  # type: ignore[index]

    def log(self, kind: str, session_id: str | None, path: str | None = None, **payload: Any) -> None:
        """:meth:`event` without its seq: sent with the next statement or the COMMIT, in order."""
        self.pending.append(_bind(self._binder, _EVENT, (self.now, session_id, kind, path, _COMPACT(payload))))


_EVENT = "INSERT INTO events (at, session_id, kind, path, payload) VALUES (%s, %s, %s, %s, %s)"


def _bind(binder: psycopg.ClientCursor, sql: str, params: tuple | dict | None) -> str:
    """``sql`` with its parameters bound client side (psycopg's own quoting, the connection's
    encoding): one statement of a query string sent with others in one round trip."""
    if not params:  # nothing to bind: psycopg leaves the text alone, so undo _pg's %% here
        return sql.replace("%%", "%")
    return binder.mogrify(sql, params)
