"""The deferred-begin mutant on PostgreSQL (``mutants.leases:deferred_begin`` opens it when the
store is a postgresql:// URL): the store's one advisory write lock taken lazily, at a write
transaction's first write statement instead of at its start. A claim that reads the holders
first (READ COMMITTED: a snapshot per statement, no lock yet), finds the path free and only
then takes the lock to write, grants on what it read before another claim committed: two
exclusive holders. It is what "lock only when you must write" looks like on this engine, and
the PostgreSQL twin of SQLite's deferred BEGIN."""

from __future__ import annotations

from typing import Any

from agents_room.store.postgres import database as postgres

_WRITES = ("INSERT", "UPDATE", "DELETE")


class _LazyLock:
    """The connection as the transaction sees it: the write lock before the first write."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._locked = False

    def _lock(self, sql: str) -> None:
        if not self._locked and sql.lstrip()[:6].upper() in _WRITES:
            self._conn.execute(postgres._LOCK)
            self._locked = True

    def execute(self, sql: str, params: Any = None) -> Any:
        self._lock(sql)
        return self._conn.execute(sql, params)

    def cursor(self) -> Any:
        self._lock("INSERT")  # executemany: the rules modules use it for inserts only
        return self._conn.cursor()


class LazyLockDatabase(postgres.Database):
    def _begin(self, begin: str, **how: bool) -> postgres.Tx:
        if begin != self._write_begin:
            return super()._begin(begin, **how)
        tx = super()._begin(f"{postgres.BEGIN_WRITE}; {postgres.NOW}")  # no lock: the time only
        tx.conn = _LazyLock(tx.conn)  # type: ignore[assignment]
        return tx


def lazy_lock(db: Any) -> None:
    """Turn an open PostgreSQL store's database into the lazy-lock one (same connection)."""
    db.__class__ = LazyLockDatabase
