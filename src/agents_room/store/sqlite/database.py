"""The SQLite engine's connection: its transactions, the WAL's bound, locking and the mapping
of SQLite's errors onto the store's error tree (opening and migrating: :mod:`.opening`).

:class:`Database` and :class:`Tx` have the shape of the engine contract
(:mod:`agents_room.store.engine`), which is all the rules modules know of them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import threading

from .admission import WriteAdmission
from ..clock import Clock
from ..engines import SQLITE
from ..errors import RoomError, StoreBusy, StoreError

try:
    # The module the sqlite3 package wraps, under the package's name: the package adds date
    # adapters, and imports datetime for them (milliseconds of the hook's news path, which
    # opens the store through this module); the store binds only numbers, text and bytes.
    import _sqlite3 as sqlite3
except ImportError:  # an interpreter that keeps it elsewhere: the package, at its cost
    import sqlite3

# Annotations only: the hook's news path opens the database through this module, and
# importing typing (or pathlib) would cost it more than its queries.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import TracebackType
    from typing import Any

    from ..mailwait import MailWaiter
    from ..callcounts import CallCounts
    from ..leasecall import LeaseCall


@functools.cache
def _compact() -> Callable[[Any], str]:
    """One encoder for every event payload (see .jsontext), made at the process's first event:
    json imports re and enum, milliseconds of the hook's news path, which opens the store
    through this module and seldom writes an event."""
    from ..jsontext import compact_json

    return compact_json()


# The pages one transaction may need beyond the cache before SQLite spills; a 4 MiB
# page cache keeps the hot tables of a busy store in memory.
CACHE_KIB = 4096
# The WAL's size past which a writer restarts it (see Database._bound_wal), checked every
# _WAL_CHECK_EVERY commits of a connection (a stat of the -wal file, never an open()).
WAL_LIMIT_BYTES = 64 * 1024 * 1024
_WAL_CHECK_EVERY = 32
_WAL_RESTART_WAIT_MS = 20
# Under fair admission, one writer in this many turns checkpoints the WAL at the end of its
# turn. A write adds 2.5 to 11 pages to the log (a claim of a held path; msg_send; a claim of
# a new path sweeping expired ones), so this is about SQLite's own 1,000-page autocheckpoint.
# Checkpointing a quarter as often gains a one-process claim ~4%, and lets the WAL of
# new-path claims grow past 10 MiB.
_CHECKPOINT_TURNS = 128


class Tx:
    """One open transaction: the connection, the time it runs at, and the audit writer."""

    __slots__ = ("conn", "now", "mailed")

    # Per-engine SQL snippets the rules modules use where the dialects differ.
    ROOMS_OF_SESSION = (
        "(SELECT group_concat(room, char(10)) FROM (SELECT room FROM memberships WHERE session_id = s.id ORDER BY room))"
    )
    INSERTION_ORDER = "s.rowid"
    BYTEWISE = "COLLATE BINARY"  # a range of paths in byte order (store/coverage.py)

    def __init__(self, conn: sqlite3.Connection, now: float) -> None:
        self.conn = conn
        self.now = now
        self.mailed: list[int] | None = None  # harness pids whose quiet markers go at commit

    def execute(self, sql: str, params: tuple | dict = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def many(self, sql: str, rows: list[tuple]) -> None:
        self.conn.executemany(sql, rows)

    def one(self, sql: str, params: tuple | dict = ()) -> tuple | None:
        return self.conn.execute(sql, params).fetchone()

    def all(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        return self.conn.execute(sql, params).fetchall()

    def scalar(self, sql: str, params: tuple | dict = ()) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return None if row is None else row[0]

    def notify_mail(self, session_ids: list[str]) -> None:
        """SQLite's waiters look at the newest event's seq (store/mailwait.py); what is told
        here is the hooks': the quiet markers of these sessions' harness processes are
        removed once this transaction commits (store/quiet.py)."""
        if not session_ids:
            return
        marks = ",".join("?" * len(session_ids))
        pids = [r[0] for r in self.conn.execute(
            f"SELECT DISTINCT pid FROM sessions WHERE id IN ({marks}) AND pid IS NOT NULL", tuple(session_ids))]
        if pids:
            self.mailed = (self.mailed or []) + pids

    def event(self, kind: str, session_id: str | None, path: str | None = None, **payload: Any) -> int:
        """Append an audit row in this transaction; returns its seq."""
        cur = self.conn.execute(
            "INSERT INTO events (at, session_id, kind, path, payload) VALUES (?, ?, ?, ?, ?)",
            (self.now, session_id, kind, path, _compact()(payload)),
        )
        return cur.lastrowid  # type: ignore[return-value]

    def log(self, kind: str, session_id: str | None, path: str | None = None, **payload: Any) -> None:
        """:meth:`event` without its seq (in process: nothing to save by waiting)."""
        self.event(kind, session_id, path, **payload)

    def later(self, sql: str, params: tuple | dict = ()) -> None:
        """Run ``sql`` now (in process: nothing to save by waiting)."""
        self.conn.execute(sql, params)


def translate(exc: sqlite3.Error, path: str) -> RoomError:
    """Map a SQLite error onto the store's tree (definite busy vs. indefinite failure)."""
    name = getattr(exc, "sqlite_errorname", "")
    if name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED") or "locked" in str(exc):
        return StoreBusy(f"the write lock on {path} was not had in time; nothing was changed, try again")
    if name == "SQLITE_FULL" or "full" in str(exc):
        return StoreError(f"disk full writing {path}: {exc}")
    if name.startswith("SQLITE_IOERR"):
        # A write past RLIMIT_FSIZE (EFBIG) or a failing disk: SQLite says only "disk I/O error".
        return StoreError(f"{path}: {exc} ({name}): the disk may be full, failing, or over a file size limit; "
                          "the operation may not have happened")
    if name == "SQLITE_NOTADB" or "not a database" in str(exc):
        return StoreError(f"{path} is not an agents-room store (not a SQLite database); refusing to touch it")
    if name == "SQLITE_CORRUPT" or "malformed" in str(exc):
        return StoreError(f"{path} is corrupt ({exc}); refusing to use it, move it aside to start fresh")
    if "delivery_backward" in str(exc):
        return StoreError(f"refused: {exc}")
    return StoreError(f"{path}: {exc}")


class _Write:
    """The context manager of :meth:`Database.write`: a class, not a generator, because it
    wraps every write call (three stacked generator managers measured ~35k instructions a
    write). In order: this process's turn on the connection, the turn in the admission queue,
    BEGIN IMMEDIATE; on the way out COMMIT (or ROLLBACK), the periodic checkpoint (in one
    turn out of ``_CHECKPOINT_TURNS``), then both turns are let go, and only then the WAL's
    bound, outside the turn."""

    __slots__ = ("db", "admitted", "tx")

    def __init__(self, db: Database) -> None:
        self.db = db
        self.admitted = False
        self.tx: Tx | None = None

    def __enter__(self) -> Tx:
        db = self.db
        if not db._lock.acquire(timeout=db.busy_timeout_s):
            raise StoreBusy(f"{db.path} is busy in this process; nothing was changed, try again")
        try:
            if db._admission is not None:
                db._admission.turn().__enter__()
                self.admitted = True
            db.conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._let_go()
            if isinstance(exc, sqlite3.Error):
                raise translate(exc, db.path) from exc
            raise
        self.tx = Tx(db.conn, db.clock.now())
        return self.tx

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        db = self.db
        calls = db.calls if kind is None else None
        try:
            if kind is None:
                try:
                    if calls is not None and calls.pending:  # store/callcounts.py: counts ride this write
                        calls.before_commit(self.tx)
                    else:
                        calls = None
                    db.conn.execute("COMMIT")
                except BaseException as commit_exc:
                    exc = commit_exc
                if calls is not None:
                    calls.after_commit(exc is None)
                if exc is None and self.tx is not None and self.tx.mailed:
                    from ..quiet import unlink

                    unlink(db.path, self.tx.mailed)
            if exc is not None:
                # After FULL, IOERR, BUSY or INTERRUPT SQLite may already have rolled
                # back: only roll back what is still open, never continue it.
                if db.conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise translate(exc, db.path) from exc
                if kind is None:
                    raise exc
                return
            admission = db._admission
            if admission is not None and admission.enabled and admission.ticket % _CHECKPOINT_TURNS == 0:
                db._checkpoint()
            self._let_admission_go()
            db._bound_wal()
        finally:
            self._let_go()

    def _let_admission_go(self) -> None:
        if self.admitted:
            self.admitted = False
            self.db._admission.turn().__exit__(None, None, None)  # type: ignore[union-attr]

    def _let_go(self) -> None:
        self._let_admission_go()
        self.db._lock.release()


class Database:
    """A connection to the store file. Thread-safe: one lock serialises this process's use
    of the connection (SQLite admits one writer at a time anyway)."""

    engine = SQLITE
    calls: CallCounts | None = None  # this process's call counts, added before each COMMIT
    serves_leases = False  # in-process, a statement costs no round trip (serve_lease)

    def __init__(self, path: str, clock: Clock, busy_timeout_s: float) -> None:
        self.path = path
        self.clock = clock
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._commits = 0
        try:
            # isolation_level=None: we issue BEGIN IMMEDIATE ourselves. Python 3.11's
            # "IMMEDIATE" only begins before the first write statement, which would run a
            # lease's holder check outside the transaction.
            self.conn = sqlite3.connect(
                path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise translate(exc, path) from exc
        self._admission: WriteAdmission | None = None  # see admit_fairly

    # -- transactions -------------------------------------------------------------------

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        """This process's turn on the connection, waited for no longer than SQLite's own busy
        wait. Unbounded, the n-th of n threads queued behind a writer that waits out the busy
        timeout would wait n times as long (a shared HTTP server runs many such threads)."""
        if not self._lock.acquire(timeout=self.busy_timeout_s):
            raise StoreBusy(f"{self.path} is busy in this process; nothing was changed, try again")
        try:
            yield
        finally:
            self._lock.release()

    def write(self) -> _Write:
        """One write transaction: BEGIN IMMEDIATE (the write lock is taken before any read,
        so a check-then-insert cannot interleave with another writer), COMMIT on success,
        ROLLBACK on any error. Waiting for the lock is bounded; past it, ``StoreBusy``."""
        return _Write(self)

    def _checkpoint(self) -> None:
        """Copy the WAL into the database (PASSIVE). Under fair admission SQLite's own
        autocheckpoint is off (it would run in every COMMIT past 1,000 pages) and this runs
        at the end of one turn in ``_CHECKPOINT_TURNS``, still inside it: no other writer
        appends to the log meanwhile, so the copy catches up with all of it and the next
        writer starts the log over. Run after the turn, it raced the next writers' frames,
        seldom caught up, and the WAL of four busy writers grew to its 64 MiB bound, where
        every 32nd commit tries a RESTART; claim+release pairs of 4 writers then cost
        ~10% more CPU (160-167 µs against 144-149, WAL 64 MiB against 4 MiB)."""
        with contextlib.suppress(sqlite3.Error):
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()

    def admit_fairly(self) -> None:
        """Queue this connection's writers for the write lock (a FIFO queue of slices in the
        side file ``<db>-admission``): SQLite's own busy handler keeps no queue and starves
        writers under many processes (docs/performance.md). Called once the file is known
        to be a store, so a refused file never gets a side file next to it.
        ``AGENTS_ROOM_FAIR_ADMISSION=0`` leaves the order of writers to SQLite."""
        if os.environ.get("AGENTS_ROOM_FAIR_ADMISSION") == "0":
            return
        self._admission = WriteAdmission(self.path, self.busy_timeout_s)
        if self._admission.enabled:
            # write() checkpoints once every _CHECKPOINT_TURNS turns instead (_checkpoint).
            self.conn.execute("PRAGMA wal_autocheckpoint=0")

    def _bound_wal(self) -> None:
        """Keep the WAL from growing without end. SQLite's automatic checkpoint is passive:
        with many processes there is nearly always a reader on the log, so it copies pages
        but never gets to restart the log, and the file grows (hundreds of MiB a minute under
        load). Every few commits, if the WAL is past its limit, this process waits (bounded
        by the busy timeout) for the readers to move off it and restarts it; SQLite then
        truncates the file to ``journal_size_limit``."""
        self._commits += 1
        if self._commits % _WAL_CHECK_EVERY or self.wal_bytes() < WAL_LIMIT_BYTES:
            return
        # Copy the log into the database first without blocking writers (PASSIVE); the
        # restart then holds the write lock only for the few frames left and a short wait
        # for readers, and gives up (until a later commit) rather than stall every writer.
        self.conn.execute(f"PRAGMA busy_timeout={_WAL_RESTART_WAIT_MS}")
        try:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                self.conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        finally:
            self.conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_s * 1000)}")

    @contextlib.contextmanager
    def read(self) -> Iterator[Tx]:
        """One read transaction: a consistent snapshot, never blocks writers (WAL). Kept
        short, so checkpoints can reset the WAL."""
        with self._turn():
            try:
                self.conn.execute("BEGIN")
                tx = Tx(self.conn, self.clock.now())
                yield tx
            except sqlite3.Error as exc:
                raise translate(exc, self.path) from exc
            finally:
                if self.conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self.conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self.conn.close()
            if self._admission:
                self._admission.close()

    # -- files and health -----------------------------------------------------------------

    def after_copy(self, tx: Tx) -> None:
        """Rows copied with their ids (store/copy.py): AUTOINCREMENT already goes on after them."""

    def files(self) -> tuple[str, str, str]:
        """The database, its WAL and its shared-memory file. Never open() these: closing any
        descriptor of them drops this process's POSIX locks (a known corruption path)."""
        return self.path, f"{self.path}-wal", f"{self.path}-shm"

    def wal_bytes(self) -> int:
        try:
            return os.stat(f"{self.path}-wal").st_size
        except FileNotFoundError:
            return 0

    def serve_lease(self, call: LeaseCall) -> None:
        """Never: in-process, a statement costs no round trip; the rules of store/leases.py run."""
        return None

    def mail_waiter(self, last_seq: Callable[[], int], poll_s: float) -> MailWaiter:
        """Polled: SQLite cannot tell another process of a commit; every change writes an
        event, so the newest seq moving is the sign to look (store/mailwait.py)."""
        from ..mailwait import SeqPoller

        return SeqPoller(last_seq, poll_s)

    def health(self) -> dict[str, Any]:
        """What ``agents-room doctor`` prints: mode, version, integrity, counts, WAL size."""
        with self._lock:
            conn = self.conn
            counts = {
                table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608 (fixed names)
                for table in ("sessions", "memberships", "messages", "deliveries", "leases", "reads", "events")
            }
            found = {
                "engine": self.engine,
                "path": str(self.path),
                "journal_mode": conn.execute("PRAGMA journal_mode").fetchone()[0],
                "synchronous": {0: "off", 1: "normal", 2: "full", 3: "extra"}[
                    conn.execute("PRAGMA synchronous").fetchone()[0]
                ],
                "schema_version": conn.execute("PRAGMA user_version").fetchone()[0],
                "quick_check": conn.execute("PRAGMA quick_check").fetchone()[0],
                "rows": counts,
                "db_bytes": os.stat(self.path).st_size,
                "wal_bytes": self.wal_bytes(),
                "mode": oct(stat.S_IMODE(os.stat(self.path).st_mode)),
            }
        shown = [[key, found[key]] for key in ("journal_mode", "synchronous", "schema_version", "quick_check", "mode")]
        shown.append(["size", f"{found['db_bytes']} bytes, WAL {found['wal_bytes']} bytes"])
        # Not WAL: another process switched the file out of it, and readers would block writers.
        healthy = found["quick_check"] == "ok" and str(found["journal_mode"]).lower() == "wal"
        return {**found, "shown": shown, "healthy": healthy}

    def integrity_check(self) -> str:
        with self._lock:
            return "; ".join(r[0] for r in self.conn.execute("PRAGMA integrity_check").fetchall())
