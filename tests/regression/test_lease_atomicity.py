"""The lease-atomicity regression of every CI run: real agent processes hammer a real store
on a few hot paths (exclusive and shared claims, 1-2 s leases that run out and are granted
again, releases, renewals, broadcasts), once calling the store in-process and once through
``agents-room serve`` over stdio, each on both engines: a SQLite file, and PostgreSQL (the
throwaway cluster of tests/pgcluster.py, a fresh schema, ``sim run --store postgresql://...``).
The verdict must be valid, and the counts must show the work really happened: a regression
that checked nothing would pass too. Some agents reach their repository through a symlink
(``spellings``), so one file is claimed by two paths, and must still have one lease; as root,
regression.toml's last agents work through a bind mount of their repository (``bind_mounts``).

PostgreSQL runs the same two scenarios (8 s and 5 s already: short, and still long enough for
expiry and re-grant with 1-2 s leases). Its agents share the two cores with a server process
each, and every write waits for one advisory lock, so load hurts it more: regression.toml made
1,393 claims at load 7 and 206 at load 14 (SQLite: 4,349 at load 7, 708 at load 40 in a
whole-suite run beside four other helpers). Its floors are a quarter of SQLite's: still far
above what a run that did nothing would show."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutants.matrix import REGRESSION, REGRESSION_MCP, Facts, Run, facts, run_sim  # noqa: E402

LEASE_INVARIANTS = ("lease-exclusive", "lease-token-monotonic", "lease-release-held", "lease-windows")


def assert_valid(run: Run, name: str, driver: str) -> None:
    assert run.exit == 0 and run.verdict == "valid", run.describe()
    assert "verdict: valid" in run.stdout
    report = run.report
    assert report["run"]["driver"] == driver and report["run"]["drained"] is True
    assert (run.out / "report.md").read_text().startswith(f"# {name}: VALID")
    checker = report["invariants"]
    assert checker["violations"] == [] and checker["unknown_because"] == []
    for invariant, result in checker["invariants"].items():
        assert result["status"] == "ok" and result["violations"] == 0, (invariant, result)
    for invariant in (*LEASE_INVARIANTS, "delivery-forward", "delivery-exactly-once", "history-events",
                      # the oracle's groups that every regression run exercises
                      "sessions", "selectors", "expiry", "recv-order", "ack", "lease-ttl", "lease-rules"):
        assert checker["invariants"][invariant]["checked"] > 0, f"{invariant} checked nothing"
    assert report["integrity"] == "ok" and checker["integrity"] == "ok"
    # Every info op settled (none is expected without faults, but any there is must be).
    assert all(c["unsettled"] == 0 for c in checker["info"].values()), checker["info"]
    assert checker["deliveries"]["lost"] == checker["deliveries"]["duplicated"] == 0
    assert checker["deliveries"]["unexpected"] == checker["deliveries"]["undrained"] == 0


def assert_worked(f: Facts, *, claims: int, grants: int, releases: int, renewals: int, expiries: int,
                  windows: int) -> None:
    """Floors well below what a loaded 2-core machine does (see docs/simulator.md), far above
    what a run that quietly did nothing would show."""
    assert f.claims >= claims and f.grants >= grants and f.denials >= f.claims // 10, f
    assert f.grants == f.events["lease_grant"], f  # the history and the store agree
    assert f.exclusive_grants >= grants // 5 and f.shared_grants >= grants // 10, f
    assert f.events.get("lease_release", 0) >= releases and f.events.get("lease_renew", 0) >= renewals, f
    assert f.events.get("lease_expire", 0) >= expiries and f.regrants_after_expiry >= 1, f
    assert f.tokens_increasing, "fencing tokens did not increase in commit order"
    assert f.windows >= windows and f.overlaps == 0, f  # the black box, from the history alone
    assert f.events.get("send", 0) > 0 and f.events.get("delivery", 0) > 0, f
    # Both scenarios give some agents the repository through a symlink ([[repos]] spellings):
    # one file claimed by two spellings, or the run never tested that a file has one lease.
    assert f.files_spelled_twice >= 1, f


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The engine and the run's ``--store``: None (a fresh file under the run) or a fresh schema."""
    return request.param, request.getfixturevalue("pg_url") if request.param == "postgresql" else None


def floors(engine: str, **bounds: int) -> dict[str, int]:
    """SQLite's floors, or a quarter of them on PostgreSQL (see the module docstring); expiries stay."""
    if engine == "sqlite":
        return bounds
    return {k: v if k == "expiries" else max(1, v // 4) for k, v in bounds.items()}


@pytest.mark.slow
def test_direct_agents_never_double_grant(engine: tuple[str, str | None], tmp_path: Path) -> None:
    name, store = engine
    run = run_sim(None, tmp_path / "run", scenario=REGRESSION, store=store)
    assert_valid(run, "regression", "direct")
    assert run.report["run"]["engine"] == name
    f = facts(run.out, store)
    assert_worked(f, **floors(name, claims=500, grants=150, releases=50, renewals=25, expiries=1, windows=100))
    if os.geteuid() == 0:  # CI's root: the bind mounts were made ([[repos]] bind_mounts), and their agents worked
        assert f.mounted_claims >= 1, f


@pytest.mark.slow
def test_mcp_agents_never_double_grant(engine: tuple[str, str | None], tmp_path: Path) -> None:
    name, store = engine
    run = run_sim(None, tmp_path / "run", scenario=REGRESSION_MCP, store=store)
    assert_valid(run, "regression-mcp", "mcp")
    assert run.report["run"]["engine"] == name
    assert_worked(facts(run.out, store), **floors(name, claims=100, grants=30, releases=10, renewals=5,
                                                  expiries=1, windows=20))
