"""A store opened at its first use, for servers that must outlive their database.

A harness spawns ``agents-room serve`` once per agent and does not restart one that died at
start: a server that exits because PostgreSQL was down leaves its agent without tools for
the whole session. So a server whose database cannot be reached starts anyway, with a
:class:`LateStore` in place of the :class:`~agents_room.store.Store`: every call tries to
open the store; until that works, every call fails with ``StoreUnreachable``
(``store_error: ... unreachable ...; ... tries again ...``), and the first call after the
database is back is served, without a restart.

Only an unreachable database is waited for: a location that could mean different stores to
different agents (``resolve``), a file that is not a store, a newer schema are still
refused at start by whoever opens the store (the CLI), as before.
"""

from __future__ import annotations

import threading
from typing import Any

from . import Store
from .clock import Clock
from .errors import StoreUnreachable
from .location import Location


class LateStore:
    """Stands in for a :class:`Store` until one could be opened, then forwards every
    attribute to it. Thread-safe: one opening at a time, and callers that waited on a
    failing attempt share its error instead of trying again in a queue (over HTTP, many
    agents call at once; each attempt may wait for libpq's connect timeout).

    Raises ``StoreUnreachable`` (a ``StoreError``) from any store method while the database
    cannot be reached; whatever else ``Store.open`` raises (``StoreError``) passes through."""

    def __init__(self, location: Location, *, clock: Clock | None = None, busy_timeout_s: float | None = None,
                 create: bool = True) -> None:
        self.location = location
        self._options: dict[str, Any] = {"clock": clock, "busy_timeout_s": busy_timeout_s, "create": create}
        self._store: Store | None = None
        self._lock = threading.Lock()
        self._attempts = 0
        self._last_failure: StoreUnreachable | None = None

    @property
    def path(self) -> str:
        """The store as shown, known without opening it."""
        return str(self.location)

    @property
    def opened(self) -> bool:
        return self._store is not None

    def store(self) -> Store:
        """The open store, opened now if it was not yet. Raises ``StoreUnreachable``."""
        found = self._store
        if found is not None:
            return found
        seen = self._attempts
        with self._lock:
            if self._store is not None:
                return self._store
            if self._attempts != seen and self._last_failure is not None:
                # An attempt failed while we waited: its answer is ours (a new exception: one
                # object raised in several threads would share a traceback).
                raise StoreUnreachable(self._last_failure.text)
            self._attempts += 1
            try:
                self._store = Store.open(self.location, **self._options)
            except StoreUnreachable as exc:
                self._last_failure = exc
                raise
            self._last_failure = None
            return self._store

    def __getattr__(self, name: str) -> Any:
        # Only names this class lacks get here: the Store's methods and attributes.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.store(), name)

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()

    def __enter__(self) -> LateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
