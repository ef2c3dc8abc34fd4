"""``sim fit`` on the command line: bad input is one line naming what was wrong, exit 2,
nothing written; a PostgreSQL store is fitted like a SQLite file, its reads counted through
the direct driver (the simulator's agents' server) and carried by its writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import main
from sim.run.drivers import DirectDriver
from sim.scenario.scenario import load


def fit_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sim.cli", "fit", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("args", "words"), [
    (["{db}", "--since", "last tuesday", "--out", "{out}"], "sim fit: --since: 'last tuesday' is neither Unix seconds"),
    (["{db}", "--since", "100", "--until", "50", "--out", "{out}"], "sim fit: --until: '50' is not after --since"),
    (["{missing}", "--out", "{out}"], "sim fit: store {missing}: there is no store at"),
    (["{db}", "--out", "{nofolder}"], "sim fit: argument --out: "),
    (["{db}", "--out", "{db}"], "sim fit: argument --out: {db} already exists"),
    (["{db}", "--since", "2001-01-01T00:00:00Z", "--until", "2001-01-02T00:00:00Z", "--out", "{out}"],
     "sim fit: no session was live in that stretch of time"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, repo: Path, args: list[str], words: str) -> None:
    db = tmp_path / "room.db"
    driver = DirectDriver(str(db), str(repo), 2.0)
    driver.call("room_join", {})
    driver.close()
    names = {"db": str(db), "out": str(tmp_path / "ours.toml"), "missing": str(tmp_path / "none.db"),
             "nofolder": str(tmp_path / "no" / "such" / "ours.toml")}
    done = fit_cli(*[a.format(**names) for a in args])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith(words.format(**names)) and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "ours.toml").exists() and not (tmp_path / "none.db").exists()


def test_a_postgresql_store_is_fitted_with_its_counted_reads(pg_url: str, repo: Path, tmp_path: Path) -> None:
    drivers = [DirectDriver(pg_url, str(repo), 2.0) for _ in range(2)]
    ids = [d.call("room_join", {"extra_rooms": ["team"]})["session_id"] for d in drivers]
    for _ in range(5):
        for d, sid in zip(drivers, ids, strict=True):
            d.call("msg_unread", {"session_id": sid})
            d.call("lease_check", {"session_id": sid, "path": "a.py"})
        drivers[0].call("msg_send", {"session_id": ids[0], "to": "*"})
    for d in drivers:
        d.close()  # a clean close writes what the last write did not carry
    out = tmp_path / "ours.toml"
    assert main(["fit", pg_url, "--out", str(out)]) == 0
    fitted = load(out).fitted
    assert fitted is not None
    tools = dict(fitted.tools)
    assert tools["msg_unread"] == tools["lease_check"] == pytest.approx(10 / 27, abs=1e-3)
    assert dict(fitted.fanout) == {"broadcast": 1.0}


@pytest.mark.parametrize(("args", "words"), [
    (["--scale", "0"], "sim run: argument --scale: must be 1..100, got '0'"),
    (["--scale", "2", "--sweep", "agents=2,3"], "sim: --scale applies to single runs, not --sweep"),
])
def test_a_bad_scale_is_one_line_and_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    smoke = Path(__file__).resolve().parents[3] / "scenarios" / "smoke.toml"
    done = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(smoke), "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith(words) and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "out").exists()
