"""``sim run`` end to end: real agent processes, a real store, both drivers, a valid
verdict, and a report whose figures agree with the history and the events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from agents_room.store import Store
from sim.check.history import pairs, read
from sim.cli import main
from sim.run.drivers import STORE_FACTORY_ENV

ROOT = Path(__file__).resolve().parents[3]
SMOKE = ROOT / "scenarios" / "smoke.toml"
PNGS = ("latency.png", "throughput.png", "percentiles.png", "agents.png", "leases.png", "wal.png")


def sim_run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``sim run`` in a child, with the shipped store unless ``env`` names a factory."""
    child = {k: v for k, v in os.environ.items() if k != STORE_FACTORY_ENV} | (env or {})
    return subprocess.run([sys.executable, "-m", "sim.cli", "run", *args, "--no-live"], cwd=cwd, text=True,
                          capture_output=True, timeout=120, env=child)


def check_run(out: Path, driver: str, store: str | None = None, plots: bool = True) -> None:
    """A valid smoke run whose report agrees with its history and with the events of its
    store (``store``: the --store it ran against; default the fresh file under ``out``);
    ``plots``: the run drew them (the direct smoke run proves the plots; others skip them, as
    drawing is seconds of a run)."""
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "valid", report["violations"] or report["invariants"].get("unknown_because")
    assert report["run"]["driver"] == driver and report["run"]["drained"] is True
    assert report["run"]["store_factory"] == "shipped"
    assert report["integrity"] == "ok" and report["expect_met"] is True
    assert all(r["status"] == "ok" for r in report["invariants"]["invariants"].values())
    assert (out / "report.md").read_text().startswith("# smoke: VALID")
    # On PostgreSQL the database's own figures are drawn in place of the WAL file's size.
    pngs = [n.replace("wal.png", "postgres.png") if store and store.startswith("postgres") else n for n in PNGS]
    for name in pngs if plots else ():
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name
    assert set(report["plots"]) == (set(pngs) if plots else set())
    assert report["plots_skipped"] is not plots

    history = read(out / "history.jsonl.gz")
    assert not (out / "history").exists() and not (out / "history.jsonl").exists()  # one copy, compressed
    done = [(i, d) for i, d in pairs(history)]
    ok = Counter(i["f"] for i, d in done if d["type"] == "ok")
    assert report["all"]["count"] + report["startup"]["count"] + report["run"]["drain_ops"] == len(done)
    assert report["startup"]["count"] >= 3 and report["startup"]["ok"] >= 3  # every agent joined to start
    assert sum(r["count"] for r in report["operations"]) == report["all"]["count"]
    for f in ("lease_claim", "lease_release", "msg_send", "msg_recv", "note_read", "edit", "drift_check", "room_who"):
        assert ok[f] > 0, f"no successful {f} in a smoke run"

    with Store.open(store or out / "store" / "room.db") as opened:
        events = opened.events(0, 1_000_000)
    kinds = Counter(e.kind for e in events)
    assert report["run"]["events"] == len(events)
    grants = [d for i, d in done if i["f"] == "lease_claim" and d["type"] == "ok" and d["value"]["ok"]]
    assert kinds["lease_grant"] == len(grants)
    assert {e.payload["token"] for e in events if e.kind == "lease_grant"} == {d["value"]["token"] for d in grants}
    assert kinds["send"] == ok["msg_send"]
    assert kinds["join"] == ok["room_join"] and kinds["leave"] == ok["room_leave"]
    assert kinds["lease_renew"] == ok["lease_renew"] and kinds["note_read"] == ok["note_read"]
    releases = [e for e in events if e.kind == "lease_release" and e.payload["reason"] == "release"]
    assert len(releases) == ok["lease_release"]

    agents = {r["agent"] for r in history}
    assert len(agents) == report["run"]["agents"] == 3
    assert set(report["fairness"]["ops_per_agent"]) == agents
    for repo in ("alpha", "beta"):
        assert (out / "repos" / repo / ".git").is_dir()
    edited = [d["value"] for i, d in done if i["f"] == "edit" and d["type"] == "ok"]
    last = {}
    for value in edited:
        last[value["path"]] = value["hash"]
    import hashlib
    for path, digest in last.items():  # the files hold the last edit each agent recorded
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest


@pytest.mark.slow
def test_smoke_direct(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = sim_run(str(SMOKE), "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verdict: valid" in result.stdout
    check_run(out, "direct")


@pytest.mark.slow
def test_smoke_mcp(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = sim_run(str(SMOKE), "--out", str(out), "--driver", "mcp", "--no-plots", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    check_run(out, "mcp", plots=False)
    cost = json.loads((out / "report.json").read_text())["cost"]
    assert cost["agents_reporting"] == 3 and cost["store_cpu_s"] > 0  # the serve processes did the store's work


@pytest.mark.slow
def test_no_plots_skips_the_pngs_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = sim_run(str(SMOKE), "--out", str(out), "--duration", "1", "--agents", "2", "--no-plots", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "valid" and report["plots"] == [] and report["plots_skipped"] is True
    assert not list(out.glob("*.png"))
    text = (out / "report.md").read_text()
    assert "Plots skipped (`--no-plots`)" in text and "![" not in text
    assert "| **all** |" in text and "plots: skipped (--no-plots)" in result.stdout


@pytest.mark.slow
def test_the_report_names_the_store_factory(tmp_path: Path) -> None:
    (tmp_path / "relay_store.py").write_text(
        "from agents_room.store import Store\n\n\n"
        "def open_store(db, busy_timeout_s):\n"
        "    return Store.open(db, busy_timeout_s=busy_timeout_s)\n")
    env = {STORE_FACTORY_ENV: "relay_store:open_store",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    out = tmp_path / "run"
    result = sim_run(str(SMOKE), "--out", str(out), "--duration", "1", "--agents", "2", "--no-plots", cwd=tmp_path,
                     env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "valid" and report["run"]["store_factory"] == "relay_store:open_store"
    assert "store `relay_store:open_store`" in (out / "report.md").read_text()


def test_the_store_factory_is_shipped_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    from sim.report.writer import store_factory

    monkeypatch.delenv(STORE_FACTORY_ENV, raising=False)
    assert store_factory() == "shipped"
    monkeypatch.setenv(STORE_FACTORY_ENV, "  ")
    assert store_factory() == "shipped"
    monkeypatch.setenv(STORE_FACTORY_ENV, " mutants.leases:check_then_act ")
    assert store_factory() == "mutants.leases:check_then_act"


def test_no_plots_is_refused_with_a_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(SMOKE), "--sweep", "agents=2,3", "--no-plots", "--out", str(tmp_path / "s")]) == 2
    assert "--no-plots applies to single runs" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_a_missed_bound_exits_1_with_a_valid_verdict(tmp_path: Path) -> None:
    scenario = tmp_path / "greedy.toml"
    scenario.write_text(SMOKE.read_text().replace("min_ops_per_s = 20", "min_ops_per_s = 1e9"))
    out = tmp_path / "run"  # given relative to the working directory: agents still find everything
    result = sim_run(str(scenario), "--out", "run", "--duration", "1", "--agents", "1", "--no-plots", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "valid" and report["expect_met"] is False
    assert [e["name"] for e in report["expect"] if not e["met"]] == ["throughput"]
    assert "expectation missed: throughput" in result.stdout
    assert "**missed**" in (out / "report.md").read_text()
