"""LISTEN on PostgreSQL: a session's waiter is told of its mail at the sender's commit
(store/mailwait.py). One connection of its own (the store's connection serves transactions
under a lock; a LISTEN connection sits idle between notifications), in autocommit: a LISTEN
takes effect at once, so mail committed after it is always notified, and mail committed
before it is found by the caller's first look."""

from __future__ import annotations

import contextlib

import psycopg

from ..errors import StoreError
from ..location import Location
from .connection import MAIL_CHANNEL, connect_options, scrub


class Listener:
    pushed = True

    def __init__(self, location: Location, connect_timeout_s: float) -> None:
        self.location = location
        self.connect_timeout_s = connect_timeout_s
        self.conn: psycopg.Connection | None = None
        self.channel: str | None = None
        self.fresh = True  # the next wait returns at once: the caller looks first

    def _connect(self) -> psycopg.Connection:
        if self.conn is None or self.conn.closed or self.conn.broken:
            try:
                self.conn = psycopg.connect(self.location.target, autocommit=True,
                                            **connect_options(self.location, self.connect_timeout_s))
            except psycopg.Error as exc:
                raise StoreError(f"cannot connect to PostgreSQL at {self.location} to wait for mail: "
                                 f"{scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else '?', self.location)}"
                                 ) from exc
            if self.channel:
                self.conn.execute(f'LISTEN "{self.channel}"')
            self.fresh = True  # notifications sent while there was no connection are lost: look
        return self.conn

    def watch(self, session_id: str | None) -> None:
        channel = None if session_id is None else f"{MAIL_CHANNEL}{session_id}"
        if channel == self.channel:
            return
        conn = self._connect()
        if self.channel:
            conn.execute(f'UNLISTEN "{self.channel}"')
        if channel:
            if not channel.replace("_", "").isalnum():
                raise ValueError(f"session_id: {session_id!r} is not a session id")
            conn.execute(f'LISTEN "{channel}"')
        self.channel = channel
        self.fresh = True

    def wait(self, timeout: float) -> bool:
        """True at a notification for the watched session (or after a reconnect, or the first
        time after ``watch``); False after ``timeout`` seconds without one."""
        try:
            conn = self._connect()
            if self.fresh:
                self.fresh = False
                return True
            if self.channel is None:
                # Nothing to listen for yet: wait out the time on the socket all the same.
                for _ in conn.notifies(timeout=timeout, stop_after=1):
                    pass
                return False
            got = False
            for _ in conn.notifies(timeout=timeout, stop_after=1):
                got = True
            if got:  # take every other notification already queued: one look serves them all
                for _ in conn.notifies(timeout=0):
                    pass
            return got
        except psycopg.OperationalError as exc:
            with contextlib.suppress(psycopg.Error):
                if self.conn is not None:
                    self.conn.close()
            raise StoreError(f"PostgreSQL at {self.location}: lost the connection waiting for mail: "
                             f"{scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else '?', self.location)}"
                             ) from exc

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(psycopg.Error):
                self.conn.close()
