"""``SIM_STORE_FACTORY``: the seam that lets the direct driver open another store, and the
source mutation the broken stores are built with."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agents_room.store import Store, leases
from sim.run.drivers import STORE_FACTORY_ENV, DirectDriver, open_driver, open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutants.leases import CheckThenAct  # noqa: E402
from mutants.mutation import MutationError, rewrite  # noqa: E402


def test_without_the_variable_the_shipped_store_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORE_FACTORY_ENV, raising=False)
    store = open_store(tmp_path / "room.db", 1.0)
    try:
        assert type(store) is Store and store.db.busy_timeout_s == 1.0
    finally:
        store.close()


def test_the_direct_driver_opens_the_named_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STORE_FACTORY_ENV, "mutants.leases:check_then_act")
    repo = tmp_path / "repo"
    repo.mkdir()
    driver = DirectDriver(tmp_path / "room.db", str(repo), 1.0)
    try:
        assert isinstance(driver.store, CheckThenAct)
        joined = driver.call("room_join", {"label": "a", "harness": "sim"})
        got = driver.call("lease_claim", {"session_id": joined["session_id"], "path": str(repo / "x"), "ttl_s": 5})
        assert got["ok"] is True and got["token"] == 1
    finally:
        driver.close()


@pytest.mark.parametrize(("spec", "says"), [
    ("nope", "expected module:callable"),
    ("mutants.leases:", "expected module:callable"),
    (":check_then_act", "expected module:callable"),
    ("mutants.leases:not a name", "expected module:callable"),
    ("no_such_module_here:open", "No module named 'no_such_module_here'"),
    ("mutants.leases:no_such_factory", "no_such_factory"),
])
def test_a_bad_factory_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str,
                                          says: str) -> None:
    monkeypatch.setenv(STORE_FACTORY_ENV, spec)
    with pytest.raises(ValueError, match=STORE_FACTORY_ENV) as err:
        open_store(tmp_path / "room.db", 1.0)
    assert says in str(err.value)
    assert not (tmp_path / "room.db").exists()


def test_the_mcp_driver_refuses_a_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STORE_FACTORY_ENV, "mutants.leases:check_then_act")
    with pytest.raises(ValueError, match="direct driver only"):
        open_driver("mcp", db=tmp_path / "room.db", cwd=str(tmp_path), env={}, busy_timeout_s=1.0, op_timeout_s=5.0)


def test_a_mutation_whose_snippet_is_not_there_once_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leases, "sweep", leases.sweep)  # restored after the test, whatever happens
    original = leases.sweep
    with pytest.raises(MutationError, match="occurs 0 times"):
        rewrite(leases, "sweep", "WHERE no such text", "x")
    with pytest.raises(MutationError, match=r"occurs ([2-9]|\d{2,}) times, not once"):
        rewrite(leases, "claim", "session.id", "x")
    assert leases.sweep is original


def test_a_mutation_replaces_the_function_in_its_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(leases, "sweep", leases.sweep)
    original = leases.sweep
    rewrite(leases, "sweep", "WHERE expires_at <= ?", "WHERE acquired_at + ttl_s <= ?")
    assert leases.sweep is not original and leases.sweep.__code__.co_filename == "<mutant of agents_room.store.leases.sweep>"
