"""Fixtures shared by the store's tests: joining sessions and reading the audit."""

from __future__ import annotations

from collections.abc import Callable
import subprocess
from pathlib import Path

import pytest

from agents_room.store import Store


@pytest.fixture
def join(store: Store, repo: Path) -> Callable[..., str]:
    """Join a session (default: in ``repo``, no pid) and return its id."""

    def _join(cwd: Path | str | None = None, pid: int | None = None, **kw: object) -> str:
        return store.room_join(cwd=str(cwd or repo), pid=pid, **kw).session_id

    return _join


@pytest.fixture
def kinds(store: Store) -> Callable[[int], list[str]]:
    """The kinds of the events appended after ``seq`` (0: all), in seq order."""

    def _kinds(after: int = 0) -> list[str]:
        return [e.kind for e in store.events(after)]

    return _kinds


@pytest.fixture
def head(store: Store) -> Callable[[], int]:
    """The seq of the newest event (0 when there is none)."""

    def _head() -> int:
        return store.db.conn.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]

    return _head


@pytest.fixture
def make_repo() -> Callable[[Path], Path]:
    """Make a real git repository at a path."""

    def _make(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "-q", str(path)], check=True)
        return path

    return _make
