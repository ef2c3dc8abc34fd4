"""Opening a SQLite store: creating the file privately, entering WAL (and verifying it took),
the pragmas, the integrity check and the forward-only migrations (schema.sql, migrate_N.sql).
What the connection does once open is in :mod:`.sqlite`."""

from __future__ import annotations

import contextlib
import os
import time

from ..clock import Clock

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the hook's news path imports this module
    from typing import Any
from ..errors import NoStore, StoreError
from ..engines import DEFAULT_BUSY_TIMEOUT_S, SCHEMA_VERSION
from .database import CACHE_KIB, WAL_LIMIT_BYTES, Database, translate
from .database import sqlite3  # the C module, without the package's datetime (see database.py)


def _schema_statements(version: int) -> list[str]:
    """Split a migration script into statements. ``executescript`` would COMMIT first,
    which would run the migration outside our BEGIN IMMEDIATE."""
    from importlib import resources  # only to create or migrate: its import costs the hook ~10 ms

    text = resources.files(__package__).joinpath("schema.sql" if version == 1 else f"migrate_{version}.sql")
    statements, buf = [], ""
    for line in text.read_text().splitlines(keepends=True):
        if line.lstrip().startswith("--") and not buf.strip():
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            statements.append(buf.strip())
            buf = ""
    if buf.strip():
        raise StoreError(f"migration {version}: trailing incomplete statement")
    return statements


def open_location(location: Any, clock: Clock, busy_timeout_s: float, *, verify: bool = True,
                  create: bool = True) -> Database:
    """The engine's opener (store/engines.py): the store file ``location`` (a SQLite
    :class:`~agents_room.store.location.Location`) names, as :func:`open_database` opens it."""
    if not create and not os.path.exists(location.target):
        raise NoStore(f"there is no store at {location} ({location.origin}); nothing was created. A store "
                         "is created when the first agent joins or a person sends (agents-room send): check the "
                         "location if you expected one here")
    return open_database(location.target, clock, busy_timeout_s, verify=verify, create=create)


def open_database(
    path: str | os.PathLike[str], clock: Clock, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, *, verify: bool = True,
    create: bool = True,
) -> Database:
    """Open the store at ``path``, creating it if absent (``create=False``: refuse instead, and
    create nothing, for commands that only look).

    Refuses, with ``StoreError`` naming the file and leaving it untouched: a file that is not
    a SQLite database, one that fails ``quick_check``, one where WAL mode does not take
    (some network filesystems), one from a newer agents-room, a path that cannot hold a
    file. ``verify=False`` skips ``quick_check`` (it reads every page): only for hooks,
    which run on every harness event and must stay fast; the servers that write the store
    keep checking it.
    """
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))  # strings: pathlib costs the hook milliseconds
    if create:
        _create_private(path)
    elif not os.path.isfile(path):
        if not os.path.exists(path):
            raise NoStore(f"there is no store at {path}; nothing was created")
        raise StoreError(f"there is no store at {path} (not a regular file); nothing was created")
    if not os.access(path, os.R_OK | os.W_OK):  # else SQLite says only "unable to open database file"
        lacking = "read" if not os.access(path, os.R_OK) else "written"
        raise StoreError(f"{path} cannot be {lacking} by this user (permission denied): every agent's server reads "
                         "and writes the store; check its owner and mode")
    db = Database(path, clock, busy_timeout_s)
    try:
        _configure(db, verify)
        db.admit_fairly()
        _migrate(db)
    except BaseException:
        db.close()
        raise
    return db


def _create_private(path: str) -> None:
    """Folder 0700, file 0600, created before SQLite touches them (SQLite gives the -wal and
    -shm files the database file's mode). An existing file is left exactly as it is."""
    try:
        folder = os.path.dirname(path)
        if not os.path.exists(folder):
            os.makedirs(folder, mode=0o700, exist_ok=True)
        if not os.path.exists(path):
            with contextlib.suppress(FileExistsError):
                # No connection is open in this process yet, so this descriptor holds no locks.
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError as exc:  # a regular file where a folder should be, /proc, a read-only folder
        raise StoreError(f"cannot create the store at {path}: {exc.strerror or exc}") from exc
    if not os.path.isfile(path):
        raise StoreError(f"{path} is not a regular file; refusing to use it as a store")


def _enter_wal(db: Database) -> str:
    """``PRAGMA journal_mode=WAL``, retried until the busy timeout. Switching a new file to
    WAL needs an exclusive lock that SQLite does not wait for with its busy handler (a
    connection holding a shared lock gets SQLITE_BUSY at once, to avoid deadlock), so
    several processes opening a new store together would otherwise fail at once."""
    deadline = time.monotonic() + db.busy_timeout_s
    pause = 0.001
    while True:
        try:
            return db.conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorname", "").startswith("SQLITE_BUSY")
            if not busy or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def _configure(db: Database, verify: bool = True) -> None:
    conn = db.conn
    try:
        # Reading the header first: a file that is not a database fails here, read-only.
        conn.execute("PRAGMA schema_version").fetchone()
        mode = _enter_wal(db)
        if str(mode).lower() != "wal":
            raise StoreError(
                f"{db.path}: WAL mode did not take (journal_mode is {mode!r}); the store needs "
                "shared memory between processes, which this filesystem does not give"
            )
        # NORMAL in WAL: survives any application crash; a power loss may drop the last
        # commits. FULL would sync every commit at a large cost under many writers.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        conn.execute("PRAGMA foreign_keys=OFF")
        check = conn.execute("PRAGMA quick_check").fetchone()[0] if verify else "ok"
        if check != "ok":
            raise StoreError(f"{db.path} fails quick_check ({check}); refusing to use it")
    except sqlite3.Error as exc:
        raise translate(exc, db.path) from exc


def _migrate(db: Database) -> None:
    """Forward-only migrations, safe when several processes open an old file at once: the
    version is re-read inside BEGIN IMMEDIATE, so exactly one of them applies each step."""
    conn = db.conn
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{db.path} has schema version {current}, newer than this agents-room ({SCHEMA_VERSION}); upgrade it"
        )
    if current == SCHEMA_VERSION:
        return
    with db.write() as tx:
        current = tx.scalar("PRAGMA user_version")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            if version == 1 and tx.scalar("SELECT count(*) FROM sqlite_master"):
                raise StoreError(f"{db.path} holds tables that are not an agents-room store; refusing to touch it")
            for statement in _schema_statements(version):
                tx.execute(statement)
            if version == 2:  # a SQLite file was one machine's: its sessions ran here (migrate_2.sql)
                from ..hosts import host_id

                tx.execute("UPDATE sessions SET host = ? WHERE host IS NULL", (host_id(),))
            tx.execute(f"PRAGMA user_version={version}")
