"""An agent whose driver cannot start (its store unreachable, as while the nemesis has the
database down) starts it again until the store is back, within a bound; past it, the store's
own error ends the agent. Real stores: a SQLite path blocked by a file, then freed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from agents_room.store import StoreError
from sim.run.agent import start_driver
from sim.run.drivers import open_driver


def opener(db: Path):
    return lambda: open_driver("direct", db=str(db), cwd=str(db.parent), env={}, busy_timeout_s=2.0,
                               op_timeout_s=5.0)


def test_a_driver_that_cannot_start_is_started_again_once_the_store_is_back(tmp_path: Path) -> None:
    blocker = tmp_path / "store"
    blocker.write_text("a file where the store's folder goes")
    threading.Timer(1.2, blocker.unlink).start()
    started = time.monotonic()
    driver = start_driver(opener(blocker / "room.db"), retry_s=20)
    try:
        assert time.monotonic() - started >= 1.0  # it waited for the store, never opened a wrong one
        assert driver.call("room_join", {"label": "a"})["session_id"]
    finally:
        driver.close()


def test_a_store_still_down_past_the_bound_ends_the_agent_with_its_error(tmp_path: Path) -> None:
    blocker = tmp_path / "store"
    blocker.write_text("never freed")
    started = time.monotonic()
    with pytest.raises(StoreError):
        start_driver(opener(blocker / "room.db"), retry_s=1.0)
    assert 1.0 <= time.monotonic() - started < 10


def test_a_driver_the_run_cannot_have_is_not_retried() -> None:
    started = time.monotonic()
    with pytest.raises(ValueError, match="unknown driver"):
        start_driver(lambda: open_driver("carrier-pigeon", db="/x", cwd="/", env={}, busy_timeout_s=1,
                                         op_timeout_s=1), retry_s=20)
    assert time.monotonic() - started < 1
