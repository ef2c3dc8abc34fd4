"""The engines, and the one place that picks one: which engine a store location names
(:func:`locate`, by :data:`SCHEMES`), and opening that engine's database (:func:`open_database`,
by :data:`OPENERS`). Nothing else in the project tells the engines apart by a location's text
or asks an open store which engine it is; what each engine must provide is :mod:`.engine`
(the contract), and a third engine is one more subpackage and one more entry in each table.

The rule of a location (``AGENTS_ROOM_DB``, ``--db``, or a path given by code), meaning the
same store to every agent that reads the setting:

- nothing (unset or empty): ``~/.agents-room/room.db``, the default SQLite file;
- an absolute path, or one starting with ``~``: a SQLite file;
- ``postgresql://...`` or ``postgres://...``: a PostgreSQL database (the ``postgres`` extra).

Refused, as ``StoreError``: a relative path (every agent's server would resolve it against its
own working directory, splitting the room without a word); a URL of any other scheme.

Stdlib only, and nothing heavier than ``os``: the hook's quiet path resolves its store here
(agents_room/harnesses/hook.py), and the engines are imported only by :func:`open_database`.
"""

from __future__ import annotations

import os

from .errors import StoreError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .clock import Clock
    from .engine import Database

# The version both engines' schemas are at: each engine's schema.sql is version 1, and its
# migrate_N.sql takes a store from N-1 to N (store/sqlite/, store/postgres/).
SCHEMA_VERSION = 6
# How long a transaction waits for the store's write lock by default ($AGENTS_ROOM_BUSY_TIMEOUT_S).
DEFAULT_BUSY_TIMEOUT_S = 5.0

SQLITE = "sqlite"
POSTGRESQL = "postgresql"
# The URL schemes that name an engine; a location without a scheme is a SQLite file.
SCHEMES = {"postgresql": POSTGRESQL, "postgres": POSTGRESQL}
POSTGRES_SCHEMES = tuple(s for s, engine in SCHEMES.items() if engine == POSTGRESQL)
# Each engine's opener: a module of this package with ``open_location(location, clock,
# busy_timeout_s, *, verify, create) -> Database``, imported only when a store of that engine
# is opened (psycopg only for PostgreSQL; the SQLite side file only for SQLite); and what to
# install when the import fails.
OPENERS = {SQLITE: "sqlite.opening", POSTGRESQL: "postgres.database"}
MISSING = {POSTGRESQL: ("PostgreSQL", "pip install 'agents-room[postgres]'")}
ENV = "AGENTS_ROOM_DB"
ACCEPTED = "an absolute path (or ~/...) for a SQLite file, or postgresql://user@host/db"


def busy_timeout_from_env() -> float:
    """``$AGENTS_ROOM_BUSY_TIMEOUT_S``, else the default; a value that is not a number of
    seconds from 0 to 600 is refused in words (an unbounded wait would outlast any harness's
    tool deadline)."""
    text = os.environ.get("AGENTS_ROOM_BUSY_TIMEOUT_S", "")
    if not text.strip():
        return DEFAULT_BUSY_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 600:  # NaN fails too
        raise StoreError(f"AGENTS_ROOM_BUSY_TIMEOUT_S={text[:40]!r} is not a number of seconds from 0 to 600; "
                         f"unset it for the default, {DEFAULT_BUSY_TIMEOUT_S:g}")
    return value


def default_path() -> str:
    """The default store: ``~/.agents-room/room.db`` of the user who runs the agents."""
    return os.path.join(os.path.expanduser("~"), ".agents-room", "room.db")


def scheme(text: str) -> str | None:
    """The scheme of ``scheme://...``, else None. A plain path never has ``://`` after a
    run of scheme characters at its start."""
    head, sep, _ = text.partition("://")
    if not sep or not head or not head[0].isalpha():
        return None
    if all(c.isalnum() or c in "+.-" for c in head):
        return head.lower()
    return None


def redact(url: str) -> str:
    """``postgresql://user:secret@host/db`` -> ``postgresql://user:***@host/db``."""
    head, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, tail = rest.partition("/")
    userinfo, at, hostport = authority.rpartition("@")
    if at and ":" in userinfo:
        authority = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
    # A password may also ride the query string (?password=...).
    if "password=" in tail:
        tail = "&".join(
            "password=***" if part.startswith("password=") else part
            for part in tail.replace("?", "?&", 1).split("&")
        ).replace("?&", "?", 1)
    return f"{head}{sep}{authority}{slash}{tail}"


def locate(value: str | os.PathLike[str] | None = None, source: str | None = None) -> tuple[str, str, str]:
    """``(engine, target, origin)`` of the store ``value`` names (a ``--db`` value, or a path
    given by code); with no value, ``$AGENTS_ROOM_DB``; with neither, the default file. The
    target is what the engine opens: a normalised absolute path, or the URL as given (with
    its password). Raises ``StoreError`` for a setting that could mean different stores to
    different agents."""
    if value is not None and str(value) != "":
        text, origin = os.fspath(value), source or "argument"
    else:
        text, origin = os.environ.get(ENV, ""), ENV
        if not text:
            return SQLITE, default_path(), "default"
    found = scheme(text)
    if found in SCHEMES:
        return SCHEMES[found], text, origin
    setting = f"{origin}={redact(text)}" if origin in (ENV, "--db") else f"the store location {redact(text)!r}"
    if found is not None:
        raise StoreError(f"{setting}: the scheme {found}:// is not supported; write {ACCEPTED}")
    path = os.path.expanduser(text)
    if not os.path.isabs(path):
        raise StoreError(
            f"{setting} is a relative path: every agent's server would resolve it against its own working "
            "directory, so agents in different repositories would use different stores and never see each "
            f"other; write an absolute path, e.g. {os.path.abspath(path)}, or ~/.agents-room/room.db"
        )
    return SQLITE, os.path.normpath(path), origin


def open_database(location: Any, clock: Clock, busy_timeout_s: float, *, verify: bool = True,
                  create: bool = True) -> Database:
    """Open the database of ``location`` (a :class:`.location.Location`) with its engine
    (``create=False``: refuse a store that does not exist yet, and create nothing;
    ``verify=False``: skip an engine's full check on open, for hooks). Raises ``StoreError``,
    naming the location, when the store is refused or its engine is not installed."""
    from importlib import import_module  # not on the hook's paths: they never open a store here

    try:
        opener = import_module(f"{__package__}.{OPENERS[location.engine]}")
    except ImportError:
        label, hint = MISSING.get(location.engine, (location.engine, "reinstall agents-room"))
        raise StoreError(f"{location} is a {label} store, and this installation has no {label} backend; "
                         f"install it with: {hint}") from None
    return opener.open_location(location, clock, busy_timeout_s, verify=verify, create=create)
