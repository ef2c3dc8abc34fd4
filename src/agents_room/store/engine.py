"""The engine contract: everything the store's rules ask of a database, and nothing more.

The rules modules (sessions, rooms, messages, delivery, news, leases, reads, wake, overview,
copy) and :class:`~agents_room.store.Store` name only :class:`Database` and :class:`Tx`
from here; they import no engine module. An engine is one subpackage beside them
(``store/sqlite/``, ``store/postgres/``) whose ``Database`` and ``Tx`` have this shape,
opened by :func:`agents_room.store.engines.open_database`, the one place that picks an
engine from a location. What a third engine must provide is below, method by method, and in
docs/engines.md with the tests it must pass.

The SQL the rules send is one dialect both engines run: ``?`` placeholders (an engine
rewrites them if its driver wants another style), ``RETURNING``, ``ON CONFLICT``, ``CASE``
instead of a summed boolean, ``CAST(? AS TEXT) IS NULL``, and no engine's own functions.
Where the dialects cannot meet, the rules use a snippet the engine's ``Tx`` carries
(:attr:`Tx.ROOMS_OF_SESSION`, :attr:`Tx.INSERTION_ORDER`, :attr:`Tx.BYTEWISE`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from .clock import Clock
    from .mailwait import MailWaiter
    from .leasecall import LeaseAnswer, LeaseCall

EngineName = Literal["sqlite", "postgresql"]


class Cursor(Protocol):
    """What :meth:`Tx.execute` returns (a DB-API cursor): the rules read ``rowcount`` after a
    DELETE or UPDATE and ``description`` to learn a table's columns."""

    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Tx(Protocol):
    """One open transaction, read or write. Every statement of one operation runs in one
    ``Tx``; the engine commits it as a whole or not at all.

    A write ``Tx`` must be serialised with every other write ``Tx`` of the store, on every
    host: the rules check, then insert (a lease's holder check, a token drawn from
    ``counters``) and rely on no writer committing in between, and the simulator's checker
    replays ``events`` by ``seq`` as the commit order. A read ``Tx`` sees one consistent
    snapshot and must not block writers.
    """

    # SQL text that differs between dialects, spliced into the rules' statements.
    ROOMS_OF_SESSION: ClassVar[str]
    """A scalar subquery over ``memberships`` for the session row ``s``: its rooms sorted by
    byte order, joined by newlines (``''`` or NULL for none)."""
    INSERTION_ORDER: ClassVar[str]
    """An expression over the session row ``s`` that sorts sessions in the order they were
    inserted (ties of ``created_at`` are broken by it, and :mod:`.copy` copies in it)."""
    BYTEWISE: ClassVar[str]
    """A collation clause under which text compares byte by byte (the range of lease paths
    beneath a directory, :func:`.coverage.subtree_range`), and which the leases' path index
    serves."""

    now: float
    """The transaction's time in Unix seconds, read once at its start (after the write lock
    is held, for a write): every timestamp the rules store in this ``Tx`` is this one."""

    def execute(self, sql: str, params: tuple | dict = ()) -> Cursor:
        """Run one statement with ``?`` placeholders. Errors are the driver's; the ``Database``
        maps them onto the store's tree when the transaction ends."""
        ...

    def many(self, sql: str, rows: list[tuple]) -> None:
        """Run one statement once per row (nothing for no rows)."""
        ...

    def one(self, sql: str, params: tuple | dict = ()) -> tuple | None:
        """The first row, or None."""
        ...

    def all(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        """Every row."""
        ...

    def scalar(self, sql: str, params: tuple | dict = ()) -> Any:
        """The first column of the first row, or None when there is no row."""
        ...

    def later(self, sql: str, params: tuple | dict = ()) -> None:
        """Run one statement whose result the rules do not need, at the latest with the
        commit, in order with every other statement of the transaction. An engine that pays a
        round trip per statement may hold it and send it with the next statement that needs
        a result, or with the COMMIT; its errors then surface there (and the transaction
        rolls back as a whole)."""
        ...

    def notify_mail(self, session_ids: list[str]) -> None:
        """Tell the mail waiters of these sessions (:meth:`Database.mail_waiter`) once this
        transaction commits, and never if it rolls back. An engine whose waiters poll does
        nothing here."""
        ...

    def event(self, kind: str, session_id: str | None, path: str | None = None, **payload: Any) -> int:
        """Append one audit row (``at`` = :attr:`now`, ``payload`` as compact JSON) in this
        transaction and return its ``seq``, which must grow in commit order."""
        ...

    def log(self, kind: str, session_id: str | None, path: str | None = None, **payload: Any) -> None:
        """:meth:`event` when its ``seq`` is not needed: sent as :meth:`later` is."""
        ...


class Database(Protocol):
    """One open store: the connection(s) of this process, thread-safe. Opened by the engine's
    own ``open_database`` (through :func:`.engines.open_database`), which creates the schema
    of :data:`.engines.SCHEMA_VERSION` or migrates an older one forward, and refuses, with
    ``StoreError``, anything that is not an agents-room store or is of a newer version."""

    engine: ClassVar[EngineName]
    """The engine's name, as :class:`.location.Location` names it (what a location picks)."""
    clock: Clock
    """The store's clock. With ``clock.fixed`` the engine must use it for :attr:`Tx.now`;
    otherwise it may use its own (PostgreSQL uses the server's, one clock for every host)."""
    busy_timeout_s: float
    """The longest a transaction waits for the write lock before ``StoreBusy``."""
    serves_leases: bool
    """Whether :meth:`serve_lease` may answer. False: it answers None to every call, so the
    store prepares none (a call's path is made canonical with system calls, store/paths.py,
    and the rules would make it again)."""

    def read(self) -> AbstractContextManager[Tx]:
        """A read transaction (a snapshot). Raises ``StoreBusy`` when this process's own turn
        on the connection is not had within the busy timeout, ``StoreError`` for any failure
        of the engine."""
        ...

    def write(self) -> AbstractContextManager[Tx]:
        """A write transaction holding the store's one write lock from its first statement:
        committed when the block ends, rolled back when it raises (the exception goes on,
        an engine error mapped onto the store's tree). ``StoreBusy`` when the lock is not had
        within the busy timeout (definitely nothing changed); ``StoreError`` for any other
        failure (the change may or may not have happened: the connection was lost)."""
        ...

    def close(self) -> None:
        """Close this process's connections. The store stays as it is for the others."""
        ...

    def files(self) -> tuple[str, ...]:
        """The local files that are the store (never read or hashed by ``note_read``); ``()``
        for a server's store."""
        ...

    def after_copy(self, tx: Tx) -> None:
        """Called in :mod:`.copy`'s write transaction after rows were inserted with their own
        ids: make the next message id, seq and token go on after them."""
        ...

    def health(self) -> dict[str, Any]:
        """What ``agents-room doctor`` prints. At least: ``engine``, ``path`` (without a
        password), ``schema_version``, ``quick_check`` (``"ok"`` or what is wrong), ``rows``
        (a count per table), ``shown`` (the ``[name, value]`` pairs doctor prints for this
        engine, in order) and ``healthy`` (the engine's own verdict; doctor exits 1 without it)."""
        ...

    def integrity_check(self) -> str:
        """``"ok"``, or what is wrong with the store's data as the engine can check it."""
        ...

    def serve_lease(self, call: LeaseCall) -> LeaseAnswer | None:
        """Optional: answer a whole lease write itself, or None (then the rules of
        :mod:`.leases` run in a :meth:`write` transaction, as for every other write). An
        engine that pays a round trip per statement may run ``call`` as one server-side
        function taking the write lock, the time and the COMMIT with it, so the lock is held
        for one round trip (PostgreSQL, store/postgres/leasecalls.py); SQLite answers None.

        What it does must be exactly what :func:`.leases.claim`, :func:`.leases.release` or
        :func:`.leases.renew` does in a write transaction (the session's touch, the sweep with its events, the
        holders over and beneath the path, the token, the row, the event, the same payloads),
        checked by running both on the same calls (tests/store/test_pg_lease_functions.py).
        Its answers other than ``granted``, ``denied``, ``released`` and ``renewed`` must have changed
        nothing (:class:`.leasecall.LeaseAnswer`); the rules then run and word the error. Errors:
        ``StoreBusy`` and ``StoreError`` as :meth:`write`'s."""
        ...

    def mail_waiter(self, last_seq: Callable[[], int], poll_s: float) -> MailWaiter:
        """What a wake watcher blocks on between its looks at a session's mail
        (:mod:`.mailwait`): pushed at the sender's commit where the engine can (then
        :meth:`Tx.notify_mail` must notify it), else a :class:`.mailwait.SeqPoller` of
        ``last_seq`` every ``poll_s``."""
        ...
