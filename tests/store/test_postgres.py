"""What only the PostgreSQL backend has: one clock (the server's) for agents whose own clocks
disagree, errors that name the host and never the password, the bounded wait for the write
lock, the schema's version and its refusal of a foreign schema."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from agents_room.store import Clock, Store, StoreBusy, StoreError
from agents_room.store.engines import SCHEMA_VERSION
from agents_room.store.postgres.database import WRITE_LOCK

from .conftest import checker_problems

pytestmark = pytest.mark.postgres_only

# One agent in its own process, with its own clock skewed by argv[3] seconds.
_AGENT = r"""
import json, sys
from agents_room.store import Clock, Store
url, cwd, skew, action = sys.argv[1:5]
clock = Clock()
clock.shift(float(skew))
with Store.open(url, clock=clock, busy_timeout_s=3.0) as store:
    sid = store.room_join(cwd=cwd, pid=None, label=f"skew{skew}").session_id
    claim = store.lease_claim(sid, "shared.txt", ttl_s=int(action))
    print(json.dumps({"ok": claim.ok, "holder": claim.holder.session_id if claim.holder else None,
                      "expires_at": claim.holder.expires_at if claim.holder else None, "sid": sid}))
"""


def _agent(url: str, cwd: Path, skew: float, ttl_s: int) -> dict:
    done = subprocess.run([sys.executable, "-c", _AGENT, url, str(cwd), str(skew), str(ttl_s)],
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def test_agents_with_skewed_clocks_share_the_servers_clock(location: str, repo: Path) -> None:
    """An agent an hour ahead would, by its own clock, see a 10-minute lease as long expired
    and sweep it; an agent an hour behind would hold a one-second lease for an hour. On
    PostgreSQL both judge by the server's clock."""
    Store.open(location).close()
    first = _agent(location, repo, 0, 600)
    assert first["ok"]
    ahead = _agent(location, repo, 3600, 600)
    assert not ahead["ok"] and ahead["holder"] == first["sid"]
    with Store.open(location) as store:
        store.lease_release(first["sid"], str(repo / "shared.txt"))
    behind = _agent(location, repo, -3600, 1)
    assert behind["ok"] and abs(behind["expires_at"] - (time.time() + 1)) < 30
    time.sleep(1.2)
    after = _agent(location, repo, 3600, 600)
    assert after["ok"], "the lease of the agent whose clock is behind expired by the server's clock"
    assert after["expires_at"] < time.time() + 600 + 30  # by the server's clock, not the agent's +3600
    with Store.open(location) as store:
        events = store.events()
    assert [e.kind for e in events if e.kind.startswith("lease_")] == [
        "lease_grant", "lease_release", "lease_grant", "lease_expire", "lease_grant"]
    assert checker_problems(events) == []  # the simulator's checker judges exclusion by these times


def test_a_pinned_clock_is_honoured(store: Store, join, clock: Clock) -> None:
    sid = join()
    lease = store.lease_claim(sid, "f.txt", ttl_s=10).lease
    assert lease is not None and lease.acquired_at == clock.now()


def test_a_wait_for_the_write_lock_past_the_bound_is_store_busy(location: str) -> None:
    store = Store.open(location, busy_timeout_s=0.3)
    sid = store.room_join(cwd="/tmp", pid=None).session_id
    holder = psycopg.connect(location, autocommit=True)
    try:
        holder.execute(f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})")
        before = store.last_seq()
        started = time.monotonic()
        with pytest.raises(StoreBusy, match="not had in time"):
            store.lease_claim(sid, "f.txt")
        assert 0.25 < time.monotonic() - started < 2.0
        assert store.last_seq() == before  # reads do not wait for the write lock
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.lease_claim(sid, "f.txt").ok
    store.close()


def test_writers_wait_for_each_other_and_all_commit(location: str) -> None:
    """Threads of one process and several connections: every write lands, in seq order."""
    stores = [Store.open(location, busy_timeout_s=5.0) for _ in range(4)]
    sids = [s.room_join(cwd="/tmp", pid=None, label=f"t{i}").session_id for i, s in enumerate(stores)]
    errors: list[BaseException] = []

    def work(store: Store, sid: str) -> None:
        try:
            for i in range(20):
                store.lease_claim(sid, f"{sid}-{i}.txt")
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s, sid)) for s, sid in zip(stores, sids, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    grants = [e for e in stores[0].events() if e.kind == "lease_grant"]
    assert len(grants) == 80
    assert [e.payload["token"] for e in grants] == sorted(e.payload["token"] for e in grants)
    for s in stores:
        s.close()


def test_a_refused_login_names_the_host_and_never_the_password(pg_cluster) -> None:
    url = f"postgresql://nobody:sekrit-pw@127.0.0.1:{pg_cluster.port}/nowhere"
    with pytest.raises(StoreError) as caught:
        Store.open(url)
    text = str(caught.value)
    assert "sekrit-pw" not in text and "127.0.0.1" in text
    assert caught.value.code == "store_error"


def test_a_server_that_is_not_there_is_a_store_error_naming_it(pg_cluster) -> None:
    url = "postgresql://agents:pw0rd@127.0.0.1:1/db"
    with pytest.raises(StoreError) as caught:
        Store.open(url, busy_timeout_s=1.0)
    assert "pw0rd" not in str(caught.value) and "127.0.0.1" in str(caught.value)


def test_a_lost_connection_is_a_store_error_then_the_store_reconnects(store: Store, join) -> None:
    sid = join()
    with psycopg.connect(store.location.target, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (store.db.conn.info.backend_pid,))
    with pytest.raises(StoreError) as caught:
        store.lease_claim(sid, "f.txt")
    assert caught.value.code == "store_error"
    assert store.lease_claim(sid, "f.txt").ok


def test_the_schema_is_versioned_and_health_reports_it(store: Store, join) -> None:
    join()
    h = store.health()
    assert h["engine"] == "postgresql" and h["schema_version"] == SCHEMA_VERSION
    assert h["server_version"].split(".")[0].isdigit() and h["rows"]["sessions"] == 1


def test_a_schema_with_foreign_tables_is_refused(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(StoreError, match="not an agents-room store"):
        Store.open(pg_url)


def test_create_false_refuses_an_empty_database(pg_url: str) -> None:
    with pytest.raises(StoreError, match="no agents-room schema"):
        Store.open(pg_url, create=False)


def test_several_processes_opening_a_new_store_at_once_all_succeed(pg_url: str) -> None:
    code = "import sys; from agents_room.store import Store; Store.open(sys.argv[1]).close(); print('ok')"
    procs = [subprocess.Popen([sys.executable, "-c", code, pg_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [o.strip() for o, _ in outs] == ["ok"] * 4, outs
    with Store.open(pg_url) as store:
        assert store.health()["schema_version"] == SCHEMA_VERSION


# -- a host cut off: its connection fails in seconds, and the write lock it held is let go ------------

def test_connections_default_to_keepalives_unless_the_url_sets_them(pg_url: str) -> None:
    with Store.open(pg_url, busy_timeout_s=5.0) as store:
        params = store.db.conn.info.get_parameters()
        assert (params["keepalives"], params["keepalives_idle"], params["tcp_user_timeout"]) == ("1", "5", "10000")
        with store.db.read() as tx:
            assert tx.scalar("SHOW idle_in_transaction_session_timeout") == "10s"
    with Store.open(f"{pg_url}&keepalives_idle=9&tcp_user_timeout=1234", busy_timeout_s=5.0) as store:
        params = store.db.conn.info.get_parameters()
        assert (params["keepalives_idle"], params["tcp_user_timeout"]) == ("9", "1234")


_HOLDER = r"""
import sys, time
from agents_room.store import Store
store = Store.open(sys.argv[1], busy_timeout_s=2.0)
with store.db.write() as tx:
    print("holding", flush=True)
    time.sleep(60)  # a client stopped inside its write transaction, holding the write lock
"""


@pytest.mark.slow
def test_a_client_stopped_inside_a_write_lets_the_lock_go_after_the_idle_bound(pg_url: str, repo: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, pg_url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with Store.open(pg_url, busy_timeout_s=20.0) as store:
            started = time.monotonic()
            sid = store.room_join(cwd=str(repo), pid=None).session_id  # waits for the write lock
            waited = time.monotonic() - started
            assert store.lease_claim(sid, "a.txt").ok
    finally:
        holder.kill()
        holder.communicate()
    # The holder's bound is max(5 s, 2 x its 2 s busy timeout): its session ends, its lock goes.
    assert 3.0 < waited < 15.0, waited
