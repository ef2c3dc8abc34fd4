"""``sim bench`` and the capacity sweep: a tiny real run of each (real processes, a real store,
real ``agents-room serve`` children), and the arithmetic they report (cells, the knee)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from sim.bench.bench import OPS, STORE_OPS
from sim.bench.cells import cell_of
from sim.bench.report import _round_ratio
from sim.bench.sweep import at_point, knee, parse_sweep
from sim.scenario.scenario import ScenarioError, load

ROOT = Path(__file__).resolve().parents[3]
SMOKE = ROOT / "scenarios" / "smoke.toml"


def sim(*args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], cwd=cwd, text=True, capture_output=True,
                          timeout=timeout)


@pytest.mark.slow
def test_bench_measures_every_cell(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    done = sim("bench", "--out", str(out), "--procs", "2", "--mcp-procs", "1", "--seconds", "0.4",
               "--rounds", "1", "--warmup", "0.1", "--hook-runs", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout[-3000:]
    data = json.loads((out / "bench.json").read_text())

    expected = {("raw", op, 2) for op in ("lease_claim", "msg_send")} | {("store", op, 2) for op in STORE_OPS}
    expected |= {("bare", op, 1) for op in ("lease_claim", "lease_pair")} | {("serve", op, 1) for op in OPS}
    cells = {(c["kind"], c["op"], c["procs"]): c for c in data["cells"]}
    assert set(cells) == expected and len(data["cells"]) == len(expected)
    for key, c in cells.items():
        assert c["count"] > 0 and not c["errors"], (key, c)
        assert c["per_s"] == pytest.approx(c["count"] / c["window_s"]) and c["window_s"] == pytest.approx(0.4)
        assert c["rounds_per_s"] == [pytest.approx(c["per_s"])]
        assert 0 < c["p50_ms"] <= c["p99_ms"] <= c["p999_ms"] <= c["max_ms"] < 10_000, (key, c)
        assert 1 / c["procs"] <= c["jain"] <= 1 + 1e-9
        # A 0.4 s window on a loaded machine may leave one process without a finished op;
        # the per-process counts must still add up.
        assert 0 <= c["fewest"] <= c["most"] and c["fewest"] * c["procs"] <= c["count"] <= c["most"] * c["procs"]
        assert 10 < c["cpu_us_per_op"] < 1_000_000, (key, c)
        servers = c["rss_kib"]
        if c["kind"] in ("serve", "bare"):  # one server per agent: a Python process of tens of MiB
            assert len(servers) == c["procs"] and all(10_000 < r < 1_000_000 for r in servers), servers
            assert 100 < c["server_cpu_us_per_op"] < 1_000_000, (key, c)  # clock ticks: coarse but never 0
        else:
            assert servers == [] and c["server_cpu_us_per_op"] is None

    ratios = {(r["ratio"], r["op"], r["procs"]): r["value"] for r in data["ratios"]}
    for op in ("lease_claim", "msg_send"):
        assert ratios[("store/raw", op, 2)] == pytest.approx(cells[("store", op, 2)]["per_s"] / cells[("raw", op, 2)]["per_s"])
    assert ratios[("serve/bare", "lease_claim", 1)] == pytest.approx(
        cells[("serve", "lease_claim", 1)]["per_s"] / cells[("bare", "lease_claim", 1)]["per_s"])
    assert ratios[("serve/bare RSS", "lease_claim", 1)] > 0 and ratios[("serve/bare server CPU", "lease_claim", 1)] > 0
    assert ratios[("store/raw CPU", "msg_send", 2)] == pytest.approx(
        cells[("store", "msg_send", 2)]["cpu_us_per_op"] / cells[("raw", "msg_send", 2)]["cpu_us_per_op"])
    assert not any(name == "serve/store" for name, _, _ in ratios)  # the store ran at 2 processes, serve at 1

    targets = {t["target"]: t for t in data["targets"]}
    assert targets["serve ÷ bare MCP server, lease_claim, 4 agents"]["met"] is None  # measured at 1 agent only
    assert targets["store lease_claim ÷ raw, 16 processes"]["met"] is None
    assert targets["RSS serve ÷ bare MCP server, 4 agents"]["value"] is None
    hook = data["hook"]
    for path in ("python_c_pass", "quiet", "news"):
        assert hook[path]["runs"] == 3 and 0 < hook[path]["wall_min_ms"] <= hook[path]["wall_median_ms"]
    assert hook["quiet"]["cpu_median_ms"] > 0
    assert targets["the installed hook command, wall from process start (median, quiet)"]["value"] == hook["quiet"]["wall_median_ms"]

    issue19 = data["issue19"]  # the five targets of the second pass, in the issue's order
    assert [t["target"].split(",")[0] for t in issue19] == [
        "serve ÷ bare MCP server", "16 writers", "the hook with news", "room_who p99",
        "an admission side file of another layout: open"]
    assert issue19[0]["met"] is None and issue19[1]["met"] is None  # 1 agent and 2 processes: not the targets' counts
    assert ratios[("serve/bare", "lease_pair", 1)] > 0  # but the pair was measured, both sides
    assert issue19[2]["value"] == hook["news"]["wall_median_ms"] and issue19[2]["met"] == (
        hook["news"]["wall_median_ms"] <= 50 and hook["quiet"]["wall_median_ms"] <= 50)
    who = data["who"]  # the pg-hosts stream's sim.bench.who, 64 sessions of real processes
    assert who["sessions"] == 64 and issue19[3]["value"] == who["p99_ms"] > 0
    assert issue19[3]["met"] == (who["p99_ms"] <= 20)
    assert issue19[4]["met"] is True and data["upgrade"]["met"] is True
    assert "issue 19's targets" in done.stdout and "not measured" in done.stdout

    for kind, op, n in expected:  # the printed table has every cell
        rows = [[x.strip() for x in line.split("│")][1:4] for line in done.stdout.splitlines() if "│" in line]
        assert [kind, op, str(n)] in rows, (kind, op, n)
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_refuses_bad_options(tmp_path: Path) -> None:
    for args, word in ((["--procs", "0,4"], "--procs"), (["--ops", "lease_clam"], "--ops"),
                       (["--seconds", "-1"], "--seconds")):
        done = sim("bench", "--out", str(tmp_path / "x"), *args, cwd=tmp_path, timeout=60)
        assert done.returncode == 2 and word in done.stderr, done.stderr
    assert not (tmp_path / "x").exists()


def test_cell_figures_from_worker_timings() -> None:
    done = [{"lat_us": [1000, 2000, 3000], "errors": {}, "cpu_s": 0.003, "server_cpu_s": 0.0},
            {"lat_us": [4000], "errors": {"store_busy": 2}, "cpu_s": 0.001, "server_cpu_s": 0.0}]
    c = cell_of("store", "lease_claim", 2, 2.0, done, [])
    assert (c.count, c.per_s, c.fewest, c.most) == (4, 2.0, 1, 3)
    assert c.cpu_us_per_op == pytest.approx(1000) and c.server_cpu_us_per_op is None
    assert c.jain == pytest.approx(16 / (2 * 10))  # (3+1)^2 / (2 * (9+1))
    assert c.p50_ms == pytest.approx(2.5) and c.max_ms == 4.0 and c.errors == {"store_busy": 2}
    empty = cell_of("serve", "msg_recv", 1, 1.0, [{"lat_us": [], "errors": {}, "cpu_s": 0.0, "server_cpu_s": 0.0}], [])
    assert empty.count == 0 and math.isnan(empty.p99_ms)


def test_ratio_is_the_median_over_rounds() -> None:
    store = {"per_s": 600.0, "rounds_per_s": [800.0, 200.0, 800.0]}  # a burst of load hit round 2
    raw = {"per_s": 1000.0, "rounds_per_s": [1000.0, 1000.0, 1000.0]}
    assert _round_ratio(store, raw) == pytest.approx(0.8)
    assert _round_ratio({"per_s": 5.0}, {"per_s": 10.0}) == 0.5  # no rounds recorded: the totals


def _points(rows: list[tuple[float, float, float]]) -> list[dict[str, float]]:
    return [{"value": v, "ops_per_s": t, "p99_ms": p} for v, t, p in rows]


def test_knee_is_where_throughput_stops_growing() -> None:
    found = knee(_points([(8, 100, 50), (16, 190, 60), (32, 200, 70), (64, 205, 80)]))
    assert found["at"] == 32 and found["last_good"] == 16 and "throughput" in found["reasons"][0]


def test_knee_is_where_p99_grows_faster_than_the_load() -> None:
    found = knee(_points([(8, 100, 50), (16, 200, 90), (32, 390, 400)]))
    assert found["at"] == 32 and any("p99 90 → 400 ms" in r for r in found["reasons"])


def test_no_knee_while_both_scale() -> None:
    found = knee(_points([(8, 100, 50), (16, 195, 60), (32, 380, 100)]))
    assert found["at"] is None and found["last_good"] == 32 and "no knee up to 32" in found["reasons"][0]


def test_sweep_keys_are_checked_like_the_scenario() -> None:
    assert parse_sweep("agents=8,16,32") == ("agents", [8.0, 16.0, 32.0])
    for bad in ("agents", "agents=8", "agents=16,8", "agents=a,b", "=1,2"):
        with pytest.raises(ScenarioError, match="--sweep"):
            parse_sweep(bad)
    base = load(SMOKE)
    assert at_point(base, "agents", 6).agents == 6
    assert at_point(base, "workload.think.mean_ms", 5).workload.think.mean_ms == 5
    assert at_point(base, "run.busy_timeout_s", 2).run.busy_timeout_s == 2
    with pytest.raises(ScenarioError, match="mean_ms"):
        at_point(base, "workload.think.mean_ms", 10**9)
    with pytest.raises(ScenarioError, match="unknown key"):
        at_point(base, "workload.thinking", 1)
    with pytest.raises(ScenarioError, match="not a whole number"):
        at_point(base, "agents", 2.5)


@pytest.mark.slow
def test_sweep_runs_each_point_and_reports_the_knee(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    done = sim("run", str(SMOKE), "--sweep", "agents=2,3", "--driver", "direct", "--duration", "1", "--out", str(out),
               "--no-live", cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout[-3000:]
    data = json.loads((out / "sweep.json").read_text())
    assert [p["agents"] for p in data["points"]] == [2, 3] and data["driver"] == "direct"
    for p in data["points"]:
        report = json.loads((Path(p["out"]) / "report.json").read_text())
        assert p["verdict"] == report["verdict"] == "valid"
        work = {r["f"]: r for r in report["operations"]}
        assert p["p99_by_op"]["lease_claim"] > 0 and 0 < p["p50_ms"] <= p["p99_ms"]
        for f, p99 in p["p99_by_op"].items():  # the steady work: the start-up joins and first room_who aside
            if f not in ("room_join", "room_who"):
                assert p99 == pytest.approx(work[f]["p99_ms"]) and p["count_by_op"][f] == work[f]["count"], f
        assert p["count_by_op"].get("room_who", 0) == work["room_who"]["count"] - p["agents"]
    assert data["knee"] == knee(data["points"])
    assert (out / "sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "knee" in done.stdout
