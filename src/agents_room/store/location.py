"""Where the store is: ``AGENTS_ROOM_DB`` (or ``--db``) resolved to one :class:`Location` that
means the same store to every agent that reads the setting. The rule itself, and which engine
a location names, is :mod:`.engines` (the one place that picks an engine); this module makes
the record of it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .engines import ACCEPTED, ENV, POSTGRES_SCHEMES, POSTGRESQL, SQLITE, default_path, locate, redact, scheme

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ACCEPTED", "ENV", "POSTGRES_SCHEMES", "POSTGRESQL", "SQLITE", "Location", "default_sqlite_path",
           "redact", "resolve", "scheme", "unusable"]


def default_sqlite_path() -> Path:
    from pathlib import Path  # here: pathlib (with urllib.parse) costs the edit guard more than its query

    return Path(default_path())


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
        from pathlib import Path

        return Path(self.target)

    def __str__(self) -> str:
        """The location as it may be shown: a URL never with its password."""
        return redact(self.target) if self.engine == POSTGRESQL else self.target

    @property
    def origin(self) -> str:
        """Where the setting came from, in words."""
        return {"default": "the default location", ENV: f"from ${ENV}", "--db": "from --db"}.get(
            self.source, "as given")


def resolve(value: str | os.PathLike[str] | None = None, *, source: str | None = None) -> Location:
    """The location ``value`` names (see :func:`.engines.locate`). Raises ``StoreError`` for a
    setting that could mean different stores to different agents."""
    return Location(*locate(value, source))


def unusable(location: Location) -> str | None:
    """Why a store can never be made (or opened) at ``location``, in one clause naming the
    path; None when it exists or can be made: the nearest existing folder on the way is a
    folder this user may make things in. Creates nothing that stays: ``install`` and ``doctor``
    ask it before an agent's server would fail to start there. A PostgreSQL location is
    judged by connecting, not here (None)."""
    if location.engine != SQLITE:
        return None
    path = location.path
    if path.exists():
        if not path.is_file():
            return f"{path} is not a regular file"
        if not os.access(path, os.R_OK | os.W_OK):
            return f"{path} cannot be read and written by this user"
        return None
    below = path.parent
    while not below.exists():
        if below.is_symlink():  # a dangling link: makedirs would fail on it
            return f"{below} is a link to nothing"
        below = below.parent
    if not below.is_dir():
        return f"{below} is a file, not a folder, so {path} cannot be made under it"
    # Tried, not inferred from the mode: root passes every access() test, yet cannot make a
    # folder in /proc or on a read-only mount. The probe folder is removed at once.
    import tempfile

    try:
        os.rmdir(tempfile.mkdtemp(prefix=".agents-room-probe-", dir=below))
    except OSError as exc:
        return f"nothing can be made in the folder {below} ({exc.strerror or exc}), so {path} cannot be made"
    return None
