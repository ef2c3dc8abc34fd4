"""Liveness across hosts, on both engines: each session records the host of its server
(AGENTS_ROOM_HOST_ID in these tests: real processes, each with its own host id, sharing one
store); a host reads /proc for its own sessions only, judges another host's from the store
(alive after a recent call, gone once its own host proved it, else unknown), and prune removes
only what is proven gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents_room.store import Store, StoreError
from agents_room.store.hosts import ALIVE_WITHIN_S, host_id
from agents_room.store.engines import SCHEMA_VERSION

from .conftest import carrying, rows

# One host's process: argv = url, action, then the action's arguments; prints JSON.
_HOST = r"""
import json, sys
from agents_room.store import Store
url, action, *rest = sys.argv[1:]
with Store.open(url, busy_timeout_s=5.0) as store:
    if action == "join":
        cwd, pid, key = rest
        print(json.dumps(store.room_join(cwd=cwd, pid=int(pid), harness_key=key).session_id))
    elif action == "who":
        print(json.dumps({m.session_id: [m.liveness, m.host] for m in store.room_who()}))
    elif action == "prune":
        print(json.dumps([s.id for s in store.prune(float(rest[0]))]))
"""


def on_host(host: str, location: str, *args: object) -> object:
    """Run one action in a process of its own on host ``host`` (its AGENTS_ROOM_HOST_ID)."""
    done = subprocess.run([sys.executable, "-c", _HOST, location, *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, "AGENTS_ROOM_HOST_ID": host}, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def agent() -> Iterator[tuple[subprocess.Popen, str]]:
    """A real running agent process carrying a harness key in its environment."""
    key = str(uuid.uuid4())
    proc = carrying({**os.environ, "SOME_HARNESS_SESSION": key}, key)
    yield proc, key
    proc.kill()
    proc.wait()


def _quiet(location: str, sid: str, seconds: float) -> None:
    """The session's last call ``seconds`` ago (as if it had been quiet that long)."""
    with Store.open(location) as s, s.db.write() as tx:
        tx.execute("UPDATE sessions SET last_seen = last_seen - ? WHERE id = ?", (seconds, sid))


def test_each_session_records_the_host_its_process_runs_on(location: str, repo: Path, agent) -> None:
    proc, key = agent
    a = on_host("host-a", location, "join", repo, proc.pid, key)
    b = on_host("host-b", location, "join", repo, proc.pid, str(uuid.uuid4()))
    with Store.open(location) as store:
        assert dict(rows(store, "SELECT id, host FROM sessions")) == {a: "host-a", b: "host-b"}
    assert on_host("host-a", location, "who")[b] == ["alive", "host-b"]  # a recent call


def test_another_hosts_session_is_unknown_when_quiet_and_gone_only_once_its_host_proved_it(
    location: str, repo: Path, agent
) -> None:
    proc, key = agent
    sid = on_host("host-b", location, "join", repo, proc.pid, key)
    _quiet(location, sid, ALIVE_WITHIN_S + 60)
    # host-a cannot see host-b's processes: quiet is not gone.
    assert on_host("host-a", location, "who")[sid] == ["unknown", "host-b"]
    assert on_host("host-a", location, "prune", 60) == []
    assert on_host("host-b", location, "who")[sid] == ["alive", "host-b"]  # its own /proc carries the key
    proc.kill()
    proc.wait()
    # The key is in no process of this machine now, yet host-a still does not look at /proc for it.
    assert on_host("host-a", location, "who")[sid] == ["unknown", "host-b"]
    assert on_host("host-a", location, "prune", 60) == []
    assert on_host("host-b", location, "who")[sid] == ["gone", "host-b"]  # proven there, and recorded
    assert on_host("host-a", location, "who")[sid] == ["gone", "host-b"]
    assert on_host("host-a", location, "prune", 60) == [sid]
    with Store.open(location) as store:
        assert rows(store, "SELECT left_at IS NOT NULL FROM sessions WHERE id = ?", (sid,)) == [(True,)]


def test_a_call_after_the_gone_verdict_makes_it_alive_again(location: str, repo: Path, agent) -> None:
    proc, key = agent
    sid = on_host("host-b", location, "join", repo, proc.pid, key)
    proc.kill()
    proc.wait()
    assert on_host("host-b", location, "who")[sid][0] == "gone"
    assert on_host("host-a", location, "who")[sid][0] == "gone"
    with Store.open(location) as store:
        store.msg_unread(sid)  # a read: last_seen is touched only when older than 30 s
        _quiet(location, sid, 31)
        store.msg_unread(sid)
    assert on_host("host-a", location, "who")[sid][0] == "alive"


def test_this_hosts_prune_removes_its_own_gone_session_and_keeps_the_others(
    location: str, repo: Path, agent
) -> None:
    proc, key = agent
    mine = on_host("host-a", location, "join", repo, proc.pid, key)
    theirs = on_host("host-b", location, "join", repo, proc.pid, str(uuid.uuid4()))
    for sid in (mine, theirs):
        _quiet(location, sid, 3600)
    proc.kill()
    proc.wait()
    # host-b's session carries a key no process has, but host-a cannot know that: kept.
    assert on_host("host-a", location, "prune", 60) == [mine]
    assert on_host("host-b", location, "prune", 60) == [theirs]


def test_host_id_comes_from_the_environment_else_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTS_ROOM_HOST_ID", "ci-runner-7")
    assert host_id() == "ci-runner-7"
    monkeypatch.delenv("AGENTS_ROOM_HOST_ID")
    machine = Path("/etc/machine-id").read_text().strip() if Path("/etc/machine-id").exists() else None
    assert host_id() == (machine or os.uname().nodename)
    assert host_id() == host_id()  # stable


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "-leading", "a/b"])
def test_a_malformed_host_id_is_one_line_naming_the_variable(
    location: str, monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv("AGENTS_ROOM_HOST_ID", bad)
    with pytest.raises(StoreError) as err:
        Store.open(location)
    assert str(err.value).startswith("store_error: AGENTS_ROOM_HOST_ID=") and "\n" not in str(err.value)


# -- a store made by the previous schema (version 1) opens and upgrades ------------------------------

_V1_SESSION = ("INSERT INTO sessions (id, harness, harness_key, cwd, pid, label, tags, autonomy, created_at, last_seen) "
               "VALUES ('00000000000000aa', 'unknown', NULL, '/tmp', {pid}, 'old', '[]', 'notify', 1, {seen})")


@pytest.mark.sqlite_only
def test_a_version_1_sqlite_store_upgrades_and_its_sessions_are_this_machines(
    location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3
    from importlib import resources

    Path(location).parent.mkdir(parents=True)
    conn = sqlite3.connect(location)
    conn.executescript(resources.files("agents_room.store.sqlite").joinpath("schema.sql").read_text())
    conn.execute("PRAGMA user_version=1")
    conn.execute(_V1_SESSION.format(pid=os.getpid(), seen=1))
    conn.commit()
    conn.close()
    monkeypatch.setenv("AGENTS_ROOM_HOST_ID", "the-machine")
    with Store.open(location) as store:
        assert store.health()["schema_version"] == SCHEMA_VERSION  # on to the newest
        assert rows(store, "SELECT id, host, gone_at FROM sessions") == [("00000000000000aa", "the-machine", None)]
        # Judged by this machine's /proc: its pid (this test) runs.
        assert [(m.liveness, m.host) for m in store.room_who()] == [("alive", "the-machine")]


@pytest.mark.postgres_only
def test_a_version_1_postgres_store_upgrades_and_its_sessions_host_stays_unknown(
    location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from importlib import resources

    import psycopg

    with psycopg.connect(location, autocommit=True) as conn:
        conn.execute(resources.files("agents_room.store.postgres").joinpath("schema.sql").read_text())
        conn.execute(_V1_SESSION.format(pid=os.getpid(), seen="extract(epoch FROM now()) - 3600"))
    monkeypatch.setenv("AGENTS_ROOM_HOST_ID", "the-machine")
    with Store.open(location) as store:
        assert store.health()["schema_version"] == SCHEMA_VERSION  # on to the newest
        assert rows(store, "SELECT id, host, gone_at FROM sessions") == [("00000000000000aa", None, None)]
        # Nobody recorded its host: this machine's /proc is no evidence (its pid runs here, by chance).
        assert [(m.liveness, m.host) for m in store.room_who()] == [("unknown", None)]
        assert store.prune(60) == []


def test_several_processes_opening_an_old_store_at_once_migrate_it_once(location: str, engine: str) -> None:
    """Every opener of a version 1 store races to migrate it; each must find the newest version."""
    from importlib import resources

    if engine == "sqlite":
        import sqlite3

        Path(location).parent.mkdir(parents=True)
        conn = sqlite3.connect(location)
        conn.executescript(resources.files("agents_room.store.sqlite").joinpath("schema.sql").read_text())
        conn.execute("PRAGMA user_version=1")
        conn.commit()
        conn.close()
    else:
        import psycopg

        with psycopg.connect(location, autocommit=True) as conn:
            conn.execute(resources.files("agents_room.store.postgres").joinpath("schema.sql").read_text())
    code = ("import sys; from agents_room.store import Store\n"
            "with Store.open(sys.argv[1], busy_timeout_s=10) as s: print(s.health()['schema_version'])")
    procs = [subprocess.Popen([sys.executable, "-c", code, location], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [(p.returncode, out.strip()) for p, (out, _) in zip(procs, outs, strict=True)] == [(0, str(SCHEMA_VERSION))] * 4, outs
