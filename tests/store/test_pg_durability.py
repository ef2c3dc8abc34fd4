"""Durable before the answer, on PostgreSQL: a write commits inside the write lock without
waiting for its WAL flush, so the store must make the WAL durable before it answers, for its
own commit and for every other's commit its reads saw (docs/decisions.md).

A real server, crashed for real right after the answer: the WAL writer is stopped
(SIGSTOP: nothing but the store's own flush moves unflushed WAL out of shared memory), a
store in a child process answers, then the WAL writer is killed (SIGKILL), and the
postmaster ends every server process and recovers from the WAL on disk. What the caller was
told must be there after recovery. The answer-before-flush mutant (mutants/durability_pg.py)
run in the child loses it: that is what proves the test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import pgcluster

pytestmark = [pytest.mark.slow, pytest.mark.postgres_only]

TESTS = Path(__file__).resolve().parents[1]
# The child: the store in a process of its own, shipped or mutated; one call, its answer, exit.
CHILD = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
mode, url, mutant = sys.argv[2], sys.argv[3], sys.argv[4] == "mutant"
if mutant:
    from mutants.durability_pg import answer_before_flush
    answer_before_flush()
from agents_room.store import Store
store = Store.open(url)
if mode == "write":
    sid = store.room_join(cwd="/work/repo", pid=os.getpid(), label="w").session_id
    claim = store.lease_claim(sid, "/work/repo/a.py", 600)
    print(json.dumps({"ok": claim.ok, "token": claim.lease.token}))
else:
    print(json.dumps({"labels": sorted(m.label for m in store.room_who(room=sys.argv[5]))}))
store.close()
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[pgcluster.Cluster]:
    """A cluster of this module's own (it is crashed), without autovacuum, whose commits
    would flush the WAL behind the test's back."""
    import psycopg

    started = pgcluster.start_cluster()
    try:
        with psycopg.connect(started.url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET autovacuum = off")
            conn.execute("SELECT pg_reload_conf()")
        yield started
    finally:
        started.stop()


def _walwriter(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'").fetchone()[0]


def _child(mode: str, url: str, mutant: bool, *extra: str) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, str(TESTS), mode, url, "mutant" if mutant else "shipped",
                           *extra], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _children(pid: int) -> set[int]:
    """The processes whose parent is ``pid`` (field 4 of /proc/PID/stat)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _crash(cluster: pgcluster.Cluster, walwriter: int) -> None:
    """Kill the stopped WAL writer: the postmaster ends every server process (their WAL
    buffers in shared memory with them) and recovers from the WAL on disk. A connection made
    before the postmaster has ended them all could reach one of the old processes, so the
    wait is for every one of them to be gone, however long a loaded machine takes."""
    old = _children(int((cluster.data / "postmaster.pid").read_text().split()[0]))
    assert walwriter in old
    os.kill(walwriter, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while any(Path(f"/proc/{pid}").exists() for pid in old):
        assert time.monotonic() < deadline, "the postmaster never ended its old processes"
        time.sleep(0.02)
    pgcluster.wait_ready(cluster.url(), 30.0)


def _store_url(cluster: pgcluster.Cluster) -> str:
    from agents_room.store import Store

    url = pgcluster.new_schema(cluster)
    Store.open(url).close()  # the schema, flushed (a synchronous commit) before the walwriter stops
    return url


def _one(url: str, sql: str, params: tuple = ()) -> object:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute(sql, params).fetchone()
        return None if row is None else row[0]


def _write_survives(cluster: pgcluster.Cluster, mutant: bool) -> bool:
    url = _store_url(cluster)
    pid = _walwriter(cluster.url())
    os.kill(pid, signal.SIGSTOP)
    try:
        answer = _child("write", url, mutant)
        assert answer["ok"] is True
    finally:
        _crash(cluster, pid)
    return _one(url, "SELECT count(*) FROM leases WHERE token = %s", (answer["token"],)) == 1


def _read_survives(cluster: pgcluster.Cluster, mutant: bool) -> bool:
    """Another writer's commit, not yet flushed, seen by a read: the read's answer must not
    outlive what it saw."""
    import psycopg

    from agents_room.store import Store

    url = _store_url(cluster)
    with Store.open(url) as store:  # the session, durable (the shipped store flushes)
        joined = store.room_join(cwd="/work/repo", pid=os.getpid(), label="before")
    pid = _walwriter(cluster.url())
    os.kill(pid, signal.SIGSTOP)
    try:
        with psycopg.connect(url, autocommit=True) as conn:  # a commit that waits for no flush
            conn.execute("SET synchronous_commit = off")
            conn.execute("UPDATE sessions SET label = 'after' WHERE id = %s", (joined.session_id,))
        answer = _child("read", url, mutant, joined.rooms[0])
        assert answer["labels"] == ["after"], answer
    finally:
        _crash(cluster, pid)
    return _one(url, "SELECT label FROM sessions WHERE id = %s", (joined.session_id,)) == "after"


def test_a_granted_claim_survives_a_crash_right_after_its_answer(cluster: pgcluster.Cluster) -> None:
    assert _write_survives(cluster, mutant=False)


def test_what_a_read_answered_survives_a_crash_right_after_it(cluster: pgcluster.Cluster) -> None:
    assert _read_survives(cluster, mutant=False)


def test_the_answer_before_flush_mutant_is_caught(cluster: pgcluster.Cluster) -> None:
    """Without the flush the same claim and the same read are lost in the same crash: what
    the two tests above see survive, survives because of the flush."""
    assert not _write_survives(cluster, mutant=True)
    assert not _read_survives(cluster, mutant=True)
