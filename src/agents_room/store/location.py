"""Where the store is: ``AGENTS_ROOM_DB`` (or ``--db``) resolved to one location that means the
same store to every agent that reads the setting.

Every agent's harness starts its own server in its own repository, so a setting that each
process resolves against its own working directory splits the room without a word: two
repositories, two stores, leases granted on both sides. Such a setting is refused here, with
what to write instead. Accepted:

- nothing (unset or empty): ``~/.agents-room/room.db``, the default;
- an absolute path, or one starting with ``~`` (the home folder of the user who runs the
  agents, the same for each of them): a SQLite file;
- ``postgresql://...`` or ``postgres://...``: a PostgreSQL database (the ``postgres`` extra).

Refused, as ``StoreError``: a relative path; a URL of any other scheme.

Stdlib only, and nothing heavier than ``os``: the hook's news path resolves its store here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import StoreError

ENV = "AGENTS_ROOM_DB"
POSTGRES_SCHEMES = ("postgresql", "postgres")
SQLITE = "sqlite"
POSTGRESQL = "postgresql"
ACCEPTED = "an absolute path (or ~/...) for a SQLite file, or postgresql://user@host/db"


def default_sqlite_path() -> Path:
    return Path.home() / ".agents-room" / "room.db"


@dataclass(frozen=True)
class Location:
    """One store: its engine, the target the engine opens (an absolute path, or the URL with
    its password), and where the setting came from (``--db``, ``AGENTS_ROOM_DB``, ``default``,
    ``argument``)."""

    engine: str
    target: str
    source: str = "argument"

    @property
    def path(self) -> Path:
        """The SQLite file (a SQLite location only)."""
        if self.engine != SQLITE:
            raise ValueError(f"{self} is not a file")
        return Path(self.target)

    def __str__(self) -> str:
        """The location as it may be shown: a URL never with its password."""
        return redact(self.target) if self.engine == POSTGRESQL else self.target

    @property
    def origin(self) -> str:
        """Where the setting came from, in words."""
        return {"default": "the default location", ENV: f"from ${ENV}", "--db": "from --db"}.get(
            self.source, "as given")


def _scheme(text: str) -> str | None:
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
    scheme, sep, rest = url.partition("://")
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
    return f"{scheme}{sep}{authority}{slash}{tail}"


def resolve(value: str | os.PathLike[str] | None = None, *, source: str | None = None) -> Location:
    """The location ``value`` names (a ``--db`` value, or a path given by code); with no
    value, ``$AGENTS_ROOM_DB``; with neither, the default file. Raises ``StoreError`` for a
    setting that could mean different stores to different agents."""
    if value is not None and str(value) != "":
        text, origin = os.fspath(value), source or "argument"
    else:
        text, origin = os.environ.get(ENV, ""), ENV
        if not text:
            return Location(SQLITE, str(default_sqlite_path()), "default")
    scheme = _scheme(text)
    if scheme in POSTGRES_SCHEMES:
        return Location(POSTGRESQL, text, origin)
    setting = f"{origin}={redact(text)}" if origin in (ENV, "--db") else f"the store location {redact(text)!r}"
    if scheme is not None:
        raise StoreError(f"{setting}: the scheme {scheme}:// is not supported; write {ACCEPTED}")
    path = os.path.expanduser(text)
    if not os.path.isabs(path):
        raise StoreError(
            f"{setting} is a relative path: every agent's server would resolve it against its own working "
            "directory, so agents in different repositories would use different stores and never see each "
            f"other; write an absolute path, e.g. {os.path.abspath(path)}, or ~/.agents-room/room.db"
        )
    return Location(SQLITE, os.path.normpath(path), origin)
