"""The database figures a run on PostgreSQL samples (sim/run/pgsample.py), read from a real
server: a session waiting for the store's write lock is counted, commits and WAL grow with
writes; and the report's arithmetic over them (sim/report/postgres.py)."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from agents_room.store import Store
from agents_room.store.postgres.database import WRITE_LOCK
from sim.report.postgres import grown, summary
from sim.run.pgsample import FIELDS, PgSampler

pytestmark = pytest.mark.postgres_only


def test_a_waiter_for_the_write_lock_and_the_writes_are_seen(pg_url: str) -> None:
    sampler = PgSampler(pg_url, 60)  # its thread samples once now; the test takes its own
    try:
        before = sampler.once()
        with Store.open(pg_url) as store, psycopg.connect(pg_url, autocommit=True) as holder, \
                psycopg.connect(pg_url, autocommit=True) as waiter:
            for i in range(20):
                store.room_join(cwd="/tmp", pid=None, label=f"s{i}")
            holder.execute("BEGIN")
            holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            waiting = threading.Thread(target=lambda: waiter.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,)))
            waiting.start()
            deadline = time.monotonic() + 30  # until the waiter is seen waiting, however slow the machine
            while not (during := sampler.once())["pg_lock_waits"] and time.monotonic() < deadline:
                time.sleep(0.01)
            holder.execute("COMMIT")
            waiting.join(timeout=10)
        # A backend hands its commit counts to pg_stat_database at most once a second while it
        # runs, and all of them as it exits, which the client's close does not wait for.
        deadline = time.monotonic() + 30
        while (after := sampler.once())["pg_commits"] - before["pg_commits"] < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        sampler.stop()
    assert during["pg_lock_waits"] == 1 and during["pg_connections"] >= 4, during
    assert after["pg_lock_waits"] == 0
    assert after["pg_commits"] - before["pg_commits"] >= 20 and after["pg_wal_bytes"] > before["pg_wal_bytes"]


def test_an_unreachable_server_samples_nothing_and_blocks_nobody() -> None:
    sampler = PgSampler("postgresql://nobody@127.0.0.1:1/none", 60)
    try:
        assert sampler.once() == dict.fromkeys(FIELDS)
    finally:
        sampler.stop()


def test_the_summary_counts_a_crash_reset_as_a_restart_from_zero() -> None:
    assert grown([100, 150, 20, 50]) == 50 + 20 + 30
    rows = [{"kind": "sample", "t": t, "pg_connections": c, "pg_lock_waits": w, "pg_wal_bytes": b, "pg_commits": n}
            for t, c, w, b, n in ((0, 5, 0, 1000, 100), (1, 7, 2, 3000, 150), (2, 6, 1, 5000, 10))]
    rows.insert(2, {"kind": "sample", "t": 1.5, **dict.fromkeys(FIELDS)})  # the server did not answer
    p = summary([*rows, {"kind": "fault", "fault": "pg_kill", "time": 0}])
    assert p is not None and (p["samples"], p["unanswered"], p["max_connections"], p["max_lock_waits"]) == (3, 1, 7, 2)
    assert (p["commits"], p["wal_bytes"], p["commits_per_s"]) == (60, 4000, 30.0)
    assert summary([{"kind": "sample", "t": 0, "wal_bytes": 0}]) is None  # SQLite: no database figures
