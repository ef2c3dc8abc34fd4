"""``sim run --store postgresql://...``: the smoke scenario on a throwaway PostgreSQL cluster
(tests/pgcluster.py, a fresh schema per test), through both drivers. Every agent process, every
``agents-room serve`` and the checker's reading of the events use the URL: the run's events
are in the schema, and no SQLite file is made under the run's folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agents_room.store import Store
from sim.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_run import SMOKE, check_run, sim_run  # noqa: E402

pytestmark = pytest.mark.postgres_only


def events_in(url: str) -> list:
    with Store.open(url, create=False) as store:
        assert store.db.engine == "postgresql"
        return store.events(0, 1_000_000)


@pytest.mark.slow
@pytest.mark.parametrize("driver", ["direct", "mcp"])
def test_smoke_on_postgresql(driver: str, pg_url: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    plots = driver == "direct"  # one run proves the PostgreSQL plot; drawing is seconds of a run
    result = sim_run(str(SMOKE), "--out", str(out), "--driver", driver, "--store", pg_url,
                     *(() if plots else ("--no-plots",)), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    check_run(out, driver, store=pg_url, plots=plots)  # the events read back from the schema agree with the history
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["engine"] == "postgresql" and report["run"]["store"] == pg_url
    assert report["run"]["events"] == len(events_in(pg_url)) > 100
    assert not [p for p in out.rglob("*") if p.name.startswith("room.db")]  # no SQLite store on the side
    # The database sampled in place of a WAL file: connections, write-lock waiters, WAL, commits.
    pg = report["postgres"]
    assert pg["samples"] >= 3 and pg["max_connections"] >= 3 and pg["max_lock_waits"] >= 0, pg
    assert pg["commits"] >= report["run"]["events"] // 10 and pg["wal_bytes"] > 0 and pg["commits_per_s"] > 0, pg
    words = (out / "report.md").read_text()
    assert "PostgreSQL, sampled" in words and "WAL: largest" not in words
    assert (out / "postgres.png").exists() is plots


@pytest.mark.slow
def test_a_second_run_on_the_same_database_is_checked_on_its_own_events(pg_url: str, tmp_path: Path) -> None:
    for n in (1, 2):
        result = sim_run(str(SMOKE), "--out", str(tmp_path / f"run{n}"), "--duration", "1", "--no-plots",
                         "--store", pg_url, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
    first, second = (json.loads((tmp_path / f"run{n}" / "report.json").read_text()) for n in (1, 2))
    assert first["verdict"] == second["verdict"] == "valid"
    events = events_in(pg_url)
    # Between the two runs' events: only the second run's prune of the first run's sessions.
    between = events[first["run"]["events"]:len(events) - second["run"]["events"]]
    assert between and {e.kind for e in between} <= {"leave", "lease_release", "lease_expire"}, between
    assert all(e.payload.get("reason") == "prune" for e in between if e.kind == "leave")


@pytest.mark.slow
def test_a_sweep_runs_every_point_on_the_store(pg_url: str, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    result = sim_run(str(SMOKE), "--sweep", "agents=1,2", "--duration", "1", "--driver", "direct", "--out", str(out),
                     "--store", pg_url, cwd=tmp_path)  # a child: the runner's pipes are closed with it
    assert result.returncode == 0, result.stdout + result.stderr
    points = [json.loads((out / f"agents-{n}" / "report.json").read_text()) for n in (1, 2)]
    assert [p["run"]["engine"] for p in points] == ["postgresql", "postgresql"]
    assert points[0]["run"]["events"] + points[1]["run"]["events"] <= len(events_in(pg_url))  # + the prune between
    assert points[0]["run"]["events"] > 0 and points[1]["run"]["events"] > 0
    assert not (out / "agents-1" / "store" / "room.db").exists()


@pytest.mark.parametrize(("store", "words"), [
    ("", "--store is empty"),
    ("mysql://u@h/db", "the scheme mysql:// is not supported"),
])
def test_a_bad_store_is_one_line(store: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(SMOKE), "--out", str(tmp_path / "run"), "--store", store]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sim: refusing --store: ") and words in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


def test_a_sqlite_fault_is_refused_on_postgresql(pg_url: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "wal.toml"
    scenario.write_text(SMOKE.read_text().replace("[expect]", "[faults.disk_full]\ncount = 1\n\n[expect]", 1))
    assert main(["run", str(scenario), "--out", str(tmp_path / "run"), "--store", pg_url]) == 2
    err = capsys.readouterr().err
    assert "[faults.disk_full] acts on a SQLite store file" in err and err.count("\n") == 1, err
    assert "password" not in err


def test_a_sqlite_fault_is_refused_on_postgresql_in_a_sweep_too(pg_url: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "wal.toml"
    scenario.write_text(SMOKE.read_text().replace("[expect]", "[faults.disk_full]\ncount = 1\n\n[expect]", 1))
    assert main(["run", str(scenario), "--sweep", "agents=1,2", "--out", str(tmp_path / "s"), "--store", pg_url]) == 2
    assert "[faults.disk_full] acts on a SQLite store file" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
