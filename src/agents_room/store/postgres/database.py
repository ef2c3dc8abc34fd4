"""Everything PostgreSQL-specific: connecting (psycopg 3, the ``postgres`` extra), the one
write lock that gives the audit its order, the server's clock, the bounded lock wait,
migrations and the mapping of PostgreSQL's errors onto the store's error tree.

The rules modules run the same SQL as on SQLite through :class:`Tx`: ``?`` placeholders,
rewritten once per statement text into psycopg's ``%s`` (cached).

Ordering (docs/decisions.md): every write transaction takes one transaction-scoped advisory
lock (``WRITE_LOCK``) as its first statement, so writers commit one at a time, as on SQLite.
Every value drawn inside a write transaction (event ``seq``, fencing token, message id) is
therefore in commit order, which is what the simulator's checker assumes when it replays
``events`` by ``seq``; and a claim's holder check sees every earlier commit (READ COMMITTED
takes a new snapshot per statement, after the lock is held). Reads run concurrently, each in
a REPEATABLE READ snapshot.

Durability (docs/decisions.md, "Commit in the lock, flush outside it"): a write
transaction commits with ``synchronous_commit`` off for itself, so its commit becomes visible
and releases the write lock as soon as the commit record is in the WAL, not after the fsync;
the order of visibility stays the order of ``seq``. Before the store answers, the WAL is made
durable up to a point past everything the caller's transaction saw (:data:`DURABLE`), outside
the lock, where many callers' flushes share one fsync. A server lost before that flush loses
only transactions whose callers got no answer (their call raises ``StoreError``: "may not
have happened"); the WAL is one sequence, so what survives is a prefix of ``seq``.

Lease claims, releases and renewals (docs/decisions.md, "One round trip in the lock"): one
server function each (migrate_4.sql) that takes the same write lock as its first statement,
run with BEGIN, the COMMIT and the flush in one round trip (leasecalls.py,
:meth:`Database.serve_lease`).

Time: with an unfixed :class:`Clock` every transaction's time is the server's
``clock_timestamp()``, read after the write lock is held, so hosts whose clocks disagree
judge every lease by one clock. A fixed clock (tests) is honoured as on SQLite.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any

try:
    import psycopg
except ImportError as exc:  # the optional extra is not installed
    raise ImportError("the PostgreSQL backend needs psycopg 3: pip install 'agents-room[postgres]'") from exc

from ..clock import Clock
from ..engines import POSTGRESQL, SCHEMA_VERSION
from ..errors import NoStore, StoreBusy, StoreError, StoreUnreachable
from ..location import Location
from .connection import connect_options, scrub, translate
from .leasecalls import serve
from .tx import Tx

if TYPE_CHECKING:
    from ..mailwait import MailWaiter
    from ..leasecall import LeaseAnswer, LeaseCall

# Advisory lock keys (one 64-bit space per database): the write lock, and the migration lock.
WRITE_LOCK = 0x6167_726F_6F6D_0001
MIGRATE_LOCK = 0x6167_726F_6F6D_0002
TABLES = ("sessions", "memberships", "messages", "deliveries", "leases", "reads", "events")

NOW = "SELECT extract(epoch FROM clock_timestamp())::float8"
# A write commits without waiting for its WAL flush (this transaction only): the lock is
# released right after the commit record is inserted, not after the fsync (module docstring).
_ASYNC = "set_config('synchronous_commit', 'off', true)"
# The lock first, then the time: the subquery (not flattened: OFFSET 0) runs before the
# outer target list, so the time is read once the lock is held.
LOCK_NOW = (f"SELECT extract(epoch FROM clock_timestamp())::float8 "
            f"FROM (SELECT pg_advisory_xact_lock({WRITE_LOCK}), {_ASYNC} OFFSET 0) l")
_LOCK = f"SELECT pg_advisory_xact_lock({WRITE_LOCK}), {_ASYNC}"
BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
# The read's time and the WAL insert position once its snapshot is taken (the snapshot is
# taken as its first statement starts): every commit it can see ends before that position.
_NOW_AND_WAL = f"SELECT ({NOW[7:]}), pg_current_wal_insert_lsn()::text"


def durable(upto: str = "pg_current_wal_insert_lsn()") -> str:
    """One autocommit statement that returns once the WAL is durable up to ``upto`` (an LSN
    expression): if the flush position is not yet past it, a transaction that writes one
    WAL record (a transactional logical message, which nothing decodes without a logical
    slot asking for it) commits with the session's ``synchronous_commit``, so its commit
    waits for the flush of the WAL up to its own record, past ``upto``. It needs an xid and a
    WAL record of its own: a commit without them (``SELECT pg_current_xact_id()`` alone)
    flushes nothing. Concurrent callers' flushes share one fsync (group commit)."""
    return (f"SELECT CASE WHEN pg_current_wal_flush_lsn() >= {upto} THEN NULL "
            "ELSE pg_logical_emit_message(true, 'agents_room', '') END")


# After a write's COMMIT, in the same round trip, outside the lock: durable up to the WAL's
# insert position, which lies past this commit and every commit it saw.
DURABLE = durable()
_LSN = re.compile(r"[0-9A-F]{1,8}/[0-9A-F]{1,8}")


def _idle_in_write_ms(busy_timeout_s: float) -> int:
    """How long the server lets a session sit idle inside a transaction before it ends it.
    Our transactions send their statements back to back, so a long gap means a client cut
    off or stopped while it may hold the write lock that every host waits on: past the bound
    the server ends that session and the lock goes with it."""
    return int(max(5.0, 2 * busy_timeout_s) * 1000)


class _Write:
    """The context manager of :meth:`Database.write` (a class, as in store/sqlite/database.py)."""

    __slots__ = ("db", "tx")

    def __init__(self, db: Database) -> None:
        self.db = db
        self.tx: Tx | None = None

    def __enter__(self) -> Tx:
        self.tx = self.db._begin(self.db._write_begin)
        return self.tx

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        db = self.db
        calls = db.calls if kind is None and db.calls is not None and db.calls.pending else None
        try:
            if kind is None:
                try:
                    if calls is not None:  # store/callcounts.py: counts ride this write
                        calls.before_commit(self.tx)
                    # The pending statements, the COMMIT, then the flush after the lock
                    # (module docstring): one round trip.
                    db.conn.execute(self.tx.sent_with(f"COMMIT; {DURABLE}"))  # type: ignore[union-attr]
                    if calls is not None:
                        calls.after_commit(True)
                    return
                except BaseException as commit_exc:
                    exc = commit_exc
                    if calls is not None:
                        calls.after_commit(False)
            db._rollback()
            if isinstance(exc, psycopg.Error):
                raise translate(exc, db.location) from exc
            if kind is None:
                raise exc  # type: ignore[misc]
        finally:
            db._lock.release()


class Database:
    """One connection to the PostgreSQL store. Thread-safe: one lock serialises this
    process's use of the connection."""

    engine = POSTGRESQL
    calls: Any = None  # this process's call counts (store/callcounts.py), added before each COMMIT
    # Lease claims, releases and renewals by migrate_4.sql's functions, in one round trip
    # (leasecalls.py); False runs store/leases.py's rules instead (tests compare the two;
    # mutants of those rules).
    serves_leases = True

    def __init__(self, location: Location, clock: Clock, busy_timeout_s: float) -> None:
        self.location = location
        self.clock = clock
        self.busy_timeout_s = busy_timeout_s
        # An unfixed clock means the server's: one clock for every host (docs/decisions.md).
        self.server_time = not getattr(clock, "fixed", False)
        self._write_begin = f"{BEGIN_WRITE}; {LOCK_NOW if self.server_time else _LOCK}"
        self._lock = threading.RLock()
        self.conn: psycopg.Connection = None  # type: ignore[assignment]
        self._connection()

    @property
    def host(self) -> str:
        return str(self.location)

    def _connection(self) -> psycopg.Connection:
        """The open connection; a lost one is replaced (its transaction is gone anyway)."""
        if self.conn is not None and not self.conn.closed and not self.conn.broken:
            return self.conn
        try:
            conn = psycopg.connect(self.location.target, autocommit=True,
                                   **connect_options(self.location, self.busy_timeout_s))
            wait_ms = int(self.busy_timeout_s * 1000)
            # Past the bound a lock wait fails with 55P03 (StoreBusy); a statement that runs
            # far longer than any of ours is cancelled (57014, StoreBusy) and rolled back.
            # Durability is the server's (synchronous_commit as its DBA set it; docs/decisions.md):
            # a commit the store reports survives what the server promises it survives.
            conn.execute(f"SET lock_timeout = {wait_ms}; SET statement_timeout = {wait_ms * 4}; "
                         f"SET idle_in_transaction_session_timeout = {_idle_in_write_ms(self.busy_timeout_s)}")
        except psycopg.Error as exc:
            words = scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, self.location)
            raise StoreUnreachable(f"the store is unreachable: cannot connect to PostgreSQL at {self.location}: "
                                   f"{words}; nothing was done, and the next call tries to connect again") from exc
        self.conn = conn
        return conn

    def serve_lease(self, call: LeaseCall) -> LeaseAnswer | None:
        """A lease claim, release or renewal in one round trip (leasecalls.py); None when
        :attr:`serves_leases` is off."""
        if not self.serves_leases:
            return None
        return serve(self, call, BEGIN_WRITE, DURABLE)

    def _rollback(self) -> None:
        conn = self.conn
        if conn is not None and not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")

    def _begin(self, begin: str, *, wal: bool = False) -> Tx:
        """This process's turn on the connection, then ``begin`` in one round trip (BEGIN, and a
        statement whose one value is the server's time, read after any lock it takes)."""
        if not self._lock.acquire(timeout=self.busy_timeout_s):
            raise StoreBusy(f"{self.location} is busy in this process; nothing was changed, try again")
        try:
            conn = self._connection()
            cur = conn.execute(begin)
            cur.nextset()
            row = cur.fetchone()
            tx = Tx(conn, row[0] if self.server_time else self.clock.now())  # type: ignore[index]
            if wal:
                tx.wal = row[1]  # type: ignore[index]
            return tx
        except BaseException as exc:
            self._rollback()
            self._lock.release()
            if isinstance(exc, psycopg.Error):
                raise translate(exc, self.location) from exc
            raise

    def write(self) -> _Write:
        """One write transaction, holding the store's write lock (see the module docstring).
        Waiting for it is bounded by ``lock_timeout``; past it, ``StoreBusy``."""
        return _Write(self)

    @contextlib.contextmanager
    def read(self) -> Iterator[Tx]:
        """One read transaction: one snapshot, never blocks writers, never waits for the write
        lock; before it ends, the WAL is durable past every commit it could see (:meth:`_end_read`)."""
        tx, seen = self._begin(f"{_BEGIN_READ}; {_NOW_AND_WAL}", wal=True), ""
        try:
            seen = tx.wal
            yield tx
        except psycopg.Error as exc:
            raise translate(exc, self.location) from exc
        finally:
            try:
                self._end_read(seen)
            finally:
                self._lock.release()

    def _end_read(self, seen: str) -> None:
        """Nothing to commit: a read. But it may have seen others' commits whose WAL is not
        flushed yet: durable up to its snapshot's WAL position before its answer goes out,
        in the ROLLBACK's round trip (a server position, checked before it is spliced in)."""
        conn = self.conn
        if conn is None or conn.closed or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            return
        if not _LSN.fullmatch(seen):
            self._rollback()
            return
        try:
            conn.execute(f"ROLLBACK; {durable(repr(seen) + '::pg_lsn')}")
        except psycopg.Error as exc:
            self._rollback()
            raise translate(exc, self.location) from exc

    def close(self) -> None:
        with self._lock:
            if self.conn is not None:
                self.conn.close()

    def after_copy(self, tx: Tx) -> None:
        """Rows copied with their ids (store/copy.py): the identities go on after them."""
        for table, column in (("messages", "id"), ("events", "seq")):
            tx.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "  # noqa: S608 (fixed names)
                       f"coalesce(max({column}), 0) + 1, false) FROM {table}")

    def files(self) -> tuple:
        """No local files: the store is the server's."""
        return ()

    def mail_waiter(self, last_seq: Callable[[], int], poll_s: float) -> MailWaiter:
        """Pushed: LISTEN on a connection of its own, told at the sender's commit on any host
        (:meth:`Tx.notify_mail`); ``last_seq`` and ``poll_s`` are not needed."""
        from .listen import Listener

        return Listener(self.location, self.busy_timeout_s)

    def health(self) -> dict[str, Any]:
        """What ``agents-room doctor`` prints: engine, server, schema version, counts."""
        with self.read() as tx:
            found = {
                "engine": self.engine,
                "path": str(self.location),
                "server_version": tx.scalar("SHOW server_version"),
                "schema_version": int(tx.scalar("SELECT value FROM agents_room_meta WHERE key = 'schema_version'")),
                "quick_check": "ok",
                "rows": {t: tx.scalar(f"SELECT count(*) FROM {t}") for t in TABLES},  # noqa: S608 (fixed names)
            }
        shown = [[key, found[key]] for key in ("engine", "server_version", "schema_version")]
        return {**found, "shown": shown, "healthy": found["quick_check"] == "ok"}

    def integrity_check(self) -> str:
        """The server keeps its own pages; what can be checked here is that every event is
        in the table the checker replays, without gaps from a rolled-back writer mid-run."""
        with self.read() as tx:
            return "ok" if tx.scalar("SELECT count(*) FROM agents_room_meta") else "no schema"


def open_location(location: Location, clock: Clock, busy_timeout_s: float, *, verify: bool = True,
                  create: bool = True) -> Database:
    """The engine's opener (store/engines.py): :func:`open_database`. ``verify`` asks for
    nothing more here: the server checks its own pages."""
    return open_database(location, clock, busy_timeout_s, create=create)


def open_database(location: Location, clock: Clock, busy_timeout_s: float, *, create: bool = True) -> Database:
    """Connect to the store ``location`` names, creating the schema when the database (its
    current schema) is empty; ``create=False`` refuses one without a schema instead.
    Refuses a schema holding tables that are not an agents-room store, or a newer version."""
    db = Database(location, clock, busy_timeout_s)
    try:
        _migrate(db, create)
    except BaseException:
        db.close()
        raise
    return db


_TABLES_HERE = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"


def _version(db: Database) -> int | None:
    with db.read() as tx:
        if "agents_room_meta" not in {r[0] for r in tx.all(_TABLES_HERE)}:
            return None
        return int(tx.scalar("SELECT value FROM agents_room_meta WHERE key = 'schema_version'"))


def _migrate(db: Database, create: bool) -> None:
    """Forward-only, safe when several processes open a new store at once: the version is
    read again under an advisory lock, so exactly one of them applies each step (DDL is
    transactional in PostgreSQL: a failed step leaves nothing behind)."""
    current = _version(db)
    if current == SCHEMA_VERSION:
        return
    if current is not None and current > SCHEMA_VERSION:
        raise StoreError(f"{db.location} has schema version {current}, newer than this agents-room "
                         f"({SCHEMA_VERSION}); upgrade it")
    if current is None and not create:
        raise NoStore(f"there is no store at {db.location} (no agents-room schema); nothing was created")
    from importlib import resources

    with db._lock:
        conn = db._connection()
        try:
            conn.execute(f"BEGIN; SELECT pg_advisory_xact_lock({MIGRATE_LOCK})")
            # pg_tables, not to_regclass: the name cache of this backend may still say "absent"
            # (an advisory lock, unlike a table lock, reads no cache invalidations), while a
            # catalog query sees what the process that held the lock before us committed.
            tables = {r[0] for r in conn.execute(_TABLES_HERE).fetchall()}
            if "agents_room_meta" not in tables:
                if tables:
                    raise StoreError(f"{db.location} holds tables that are not an agents-room store; refusing to "
                                     "touch it (point AGENTS_ROOM_DB at an empty database or schema)")
                conn.execute(resources.files(__package__).joinpath("schema.sql").read_text())
            # Read again under the lock: another process may have migrated meanwhile.
            current = int(conn.execute("SELECT value FROM agents_room_meta WHERE key = 'schema_version'")
                          .fetchone()[0])  # type: ignore[index]
            for version in range(current + 1, SCHEMA_VERSION + 1):
                conn.execute(resources.files(__package__).joinpath(f"migrate_{version}.sql").read_text())
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            db._rollback()
            raise translate(exc, db.location) from exc
        except BaseException:
            db._rollback()
            raise
