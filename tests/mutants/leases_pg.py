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


# -- mutants of the lease functions (store/postgres/migrate_4.sql) ------------------------------


def rewrite_function(store: Any, name: str, *changes: tuple[str, str]) -> None:
    """Replace each ``(old, new)`` snippet (exactly once) in the store's server function
    ``name`` and create it anew in the store's schema, once for every process of a run: under
    the migration lock, a function already rewritten (its first ``new`` in it) is left alone."""
    from .mutation import MutationError

    db = store.db
    with db._lock:
        conn = db._connection()
        conn.execute(f"BEGIN; SELECT pg_advisory_xact_lock({postgres.MIGRATE_LOCK})")
        try:
            source = conn.execute("SELECT pg_get_functiondef(%s::regproc)", (name,)).fetchone()[0]
            if changes[0][1] not in source:
                for old, new in changes:
                    if source.count(old) != 1:
                        raise MutationError(f"{name}: the snippet {old!r} occurs {source.count(old)} times, not once")
                    source = source.replace(old, new)
                conn.execute(source)
            conn.execute("COMMIT")
        finally:
            db._rollback()


def _opened(db: Any, busy_timeout_s: float) -> Any:
    from agents_room.store import Store

    return Store.open(db, busy_timeout_s=busy_timeout_s)


def claim_without_lock(db: Any, busy_timeout_s: float) -> Any:
    """The claim function forgets the write lock: two claims of one free path, each reading
    the holders before the other commits, are both granted (and seq is no longer commit order)."""
    store = _opened(db, busy_timeout_s)
    rewrite_function(store, "agents_room_lease_claim",
                     ("PERFORM pg_advisory_xact_lock(7018704367216558081), set_config",
                      "PERFORM set_config"))
    return store


def claim_ignores_directories(db: Any, busy_timeout_s: float) -> Any:
    """The claim function's holder lookup knows no directories: neither a directory lease
    above the path nor, for a directory, the leases beneath it stand in the way."""
    store = _opened(db, busy_timeout_s)
    rewrite_function(store, "agents_room_lease_claim",
                     ("WHERE substr(p_path, i, 1) = '/') || p_path", "WHERE false) || p_path"),
                     ("IF right(p_path, 1) = '/' THEN", "IF false THEN"))
    return store
