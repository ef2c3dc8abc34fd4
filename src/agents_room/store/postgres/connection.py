"""Reaching the PostgreSQL server: the libpq options of every connection of the store (its
transactions, :mod:`.database`; its mail waiters, :mod:`.listen`), the mail channel's name,
and the password kept out of every message, and PostgreSQL's errors mapped onto the store's
(:func:`translate`)."""

from __future__ import annotations

import contextlib
from typing import Any

import psycopg

from ..errors import RoomError, StoreBusy, StoreError
from ..location import Location

# NOTIFY channel of a session's mail: this prefix and its id (16 hex: a valid identifier).
MAIL_CHANNEL = "agents_room_mail_"


def scrub(text: str, location: Location) -> str:
    """Never show the password, even where a driver message would repeat the URL."""
    from urllib.parse import unquote, urlsplit

    with contextlib.suppress(ValueError):
        secret = urlsplit(location.target).password
        if secret:
            text = text.replace(secret, "***").replace(unquote(secret), "***")
    return text


def connect_options(location: Location, busy_timeout_s: float) -> dict[str, Any]:
    """libpq options for a store connection, those the URL does not set itself: a connect
    bound, and TCP keepalives with a user timeout, so a host cut off from the server mid-call
    fails in seconds (``store_error``, then reconnects) instead of TCP's ~15 minutes of
    retransmission. Ignored on a Unix socket."""
    from psycopg.conninfo import conninfo_to_dict

    given = conninfo_to_dict(location.target)
    wanted = {"connect_timeout": max(2, int(busy_timeout_s)), "keepalives": 1, "keepalives_idle": 5,
              "keepalives_interval": 2, "keepalives_count": 3,
              "tcp_user_timeout": int(max(4.0, 2 * busy_timeout_s) * 1000)}
    return {k: v for k, v in wanted.items() if k not in given}


def translate(exc: BaseException, location: Location) -> RoomError:
    """Map a psycopg error onto the store's tree (definite busy vs. indefinite failure)."""
    state = getattr(exc, "sqlstate", None) or ""
    words = scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__, location)
    if state in ("55P03", "57014", "40001", "40P01"):  # lock_not_available, query_canceled, serialization, deadlock
        return StoreBusy(f"the write lock on {location} was not had in time; nothing was changed, try again")
    if "delivery_backward" in words or "events_append_only" in words:
        return StoreError(f"refused: {words}")
    if isinstance(exc, psycopg.OperationalError) and (not state or state.startswith(("08", "57P", "28"))):
        return StoreError(f"PostgreSQL at {location}: {words}; the operation may not have happened")
    return StoreError(f"{location}: {words}")
