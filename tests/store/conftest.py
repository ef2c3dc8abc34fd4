"""Fixtures shared by the store's tests: joining sessions, the newest event, git repositories."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
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
