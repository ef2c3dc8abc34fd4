"""What a run on PostgreSQL samples of its database, in place of the SQLite WAL file's size:
the connections to the store's database, the sessions waiting for the store's write lock (the
advisory lock every write transaction takes first, agents_room/store/postgres.py), the WAL
bytes the server has written, and its committed transactions (both cumulative counters; the
report turns them into what the run wrote and commits per second).

The database may be cut off, killed or paused by the run's own faults, so the queries run in
a thread of their own with short timeouts: the runner's tick (on which the nemesis acts) reads
the latest figures and never waits for the server. A sample the server did not answer is
``None``, and the next one reconnects.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from agents_room.store.postgres.database import WRITE_LOCK

FIELDS = ("pg_connections", "pg_lock_waits", "pg_wal_bytes", "pg_commits")
# An advisory lock on one bigint key shows in pg_locks as classid (high 32 bits), objid (low
# 32 bits) and objsubid 1.
_QUERY = f"""
SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()),
       (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
          AND classid = {WRITE_LOCK >> 32} AND objid = {WRITE_LOCK & 0xFFFF_FFFF}),
       (pg_current_wal_lsn() - '0/0')::bigint,
       (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database())
"""


class PgSampler:
    """Samples the database at ``url`` every ``interval_s`` in a daemon thread; :meth:`latest`
    is the last answer (each field ``None`` before the first, or while the server does not
    answer)."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.url, self.interval_s = url, max(0.05, interval_s)
        self._latest: dict[str, Any] = dict.fromkeys(FIELDS)
        self._stop = threading.Event()
        self._conn: Any = None
        self._lock = threading.Lock()  # one sample at a time: the thread's, or a caller's own
        self._thread = threading.Thread(target=self._run, name="pg-sample", daemon=True)
        self._thread.start()

    def latest(self) -> dict[str, Any]:
        return dict(self._latest)

    def once(self) -> dict[str, Any]:
        """One sample now (``None`` fields when the server does not answer within a second or two)."""
        import psycopg

        with self._lock:
            return self._sample(psycopg)

    def _sample(self, psycopg: Any) -> dict[str, Any]:
        try:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2,
                                             options="-c statement_timeout=1000")
            row = self._conn.execute(_QUERY).fetchone()
        except psycopg.Error:
            with contextlib.suppress(psycopg.Error):
                if self._conn is not None:
                    self._conn.close()
            self._conn = None
            return dict.fromkeys(FIELDS)
        return dict(zip(FIELDS, (int(v) if v is not None else None for v in row)))

    def _run(self) -> None:
        while not self._stop.is_set():
            self._latest = self.once()
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with self._lock, contextlib.suppress(Exception):
            if self._conn is not None:
                self._conn.close()
