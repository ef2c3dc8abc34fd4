"""Fixtures shared by the store's tests: the store on each engine, joining sessions, the newest
event, git repositories.

Every test that uses ``store`` (or ``location``) runs once per engine: SQLite, and PostgreSQL
on a throwaway cluster (tests/pgcluster.py; a fresh schema per test). ``sqlite_only`` and
``postgres_only`` tests run on their engine only."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agents_room.store import Clock, Store

ENGINES = ("sqlite", "postgresql")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine" in metafunc.fixturenames:
        engines = list(ENGINES)
        if metafunc.definition.get_closest_marker("sqlite_only"):
            engines = ["sqlite"]
        elif metafunc.definition.get_closest_marker("postgres_only"):
            engines = ["postgresql"]
        metafunc.parametrize("engine", engines)


@pytest.fixture
def location(engine: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where this test's store is: a file under the test's folder, or a fresh schema."""
    if engine == "postgresql":
        return request.getfixturevalue("pg_url")
    return str(tmp_path / "store" / "room.db")


@pytest.fixture
def store(location: str, clock: Clock):
    s = Store.open(location, clock=clock, busy_timeout_s=2.0)
    yield s
    s.close()


@pytest.fixture
def join(store: Store, repo: Path) -> Callable[..., str]:
    """Join a session (default: in ``repo``, no pid) and return its id."""

    def _join(cwd: Path | str | None = None, pid: int | None = None, **kw: object) -> str:
        return store.room_join(cwd=str(cwd or repo), pid=pid, **kw).session_id

    return _join


@pytest.fixture
def head(store: Store) -> Callable[[], int]:
    """The seq of the newest event (0 when there is none)."""

    def _head() -> int:
        return store.last_seq()

    return _head


@pytest.fixture
def make_repo() -> Callable[[Path], Path]:
    """Make a real git repository at a path."""

    def _make(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(path)], check=True)
        return path

    return _make


def rows(store: Store, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of a query in a read transaction of the store, on either engine."""
    with store.db.read() as tx:
        return tx.all(sql, params)


def checker_problems(events: list) -> list:
    """What the simulator's own checker (its replay of events in seq order through its model:
    exclusion by time, tokens, releases, deliveries) finds wrong in a store's events."""
    from sim.check.replay import replay

    return replay(events).problems


def carrying(env: dict[str, str], key: str) -> subprocess.Popen:
    """``sleep 120`` with ``env``, once its environment shows ``key``: Popen returns when the
    exec has begun, and for a moment after (four times in ten, measured) the new process's
    ``/proc/<pid>/environ`` still reads empty, so a judge looking then finds no key."""
    proc = subprocess.Popen(["sleep", "120"], env=env)
    deadline = time.monotonic() + 10
    while key.lower().encode() not in Path(f"/proc/{proc.pid}/environ").read_bytes().lower():
        assert time.monotonic() < deadline, "the child never showed its environment"
        time.sleep(0.005)
    return proc
