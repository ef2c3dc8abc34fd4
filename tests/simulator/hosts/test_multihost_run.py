"""``sim run scenarios/two-hosts.toml`` end to end, on real namespaces and a real PostgreSQL:
two hosts, one partition past every lease's TTL, then one host killed whole; a valid verdict
with the partition's calls settled from the events, the killed sessions pruned, the per-host
report; the same run against a lease mutant exits 1.
Needs root (the refusal without it is tested in test_hosts.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios" / "two-hosts.toml"
sys.path.insert(0, str(ROOT / "tests"))

from mutants import MUTANTS  # noqa: E402
from mutants.matrix import run_sim  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="simulated hosts need root")


def netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_two_hosts_one_partition_is_valid_and_reported_per_host(tmp_path: Path) -> None:
    run = run_sim(None, tmp_path / "run", scenario=SCENARIO, timeout_s=240, plots=True)
    assert run.exit == 0 and run.verdict == "valid", run.describe()
    hosts = run.report["hosts"]
    assert [r["host"] for r in hosts["per_host"]] == ["h0", "h1"]
    assert all(r["agents"] == 3 and r["ops"] > 20 and r["ok"] > 20 for r in hosts["per_host"]), hosts["per_host"]
    # Each agent ran on its host, with that host's id.
    configs = [json.loads(p.read_text()) for p in sorted((run.out / "agents").glob("a*.g0.json"))]
    assert [c["host"] for c in configs] == ["h0", "h1", "h0", "h1", "h0", "h1"]
    assert configs[0]["env"]["AGENTS_ROOM_HOST_ID"] == "h0" and configs[0]["db"].startswith("postgresql://")
    # ... and the store recorded each session on its host (3 on h0; 3 on h1 and the 3 that
    # replaced them), none anywhere else.
    by_host = hosts["sessions_by_host"]
    assert set(by_host) == {"h0", "h1"} and by_host["h0"] >= 3 and by_host["h1"] >= 6, by_host
    # The partition: h0 only, past the connection timeouts, healed, and h0 working again.
    cut, kill = hosts["episodes"]
    assert cut["fault"] == "partition" and cut["hosts"] == ["h0"] and cut["held_s"] >= 5.5, cut
    # kill_host after the heal: h1's three agents replaced, their sessions pruned on h1 itself.
    assert kill["fault"] == "kill_host" and kill["hosts"] == ["h1"] and kill["from_s"] >= cut["to_s"], kill
    assert len(hosts["killed_sessions_pruned"]) == 3 and all(hosts["killed_sessions_pruned"].values())
    assert sorted(p.name for p in (run.out / "agents").glob("a*.g1.json")) == ["a01.g1.json", "a03.g1.json",
                                                                               "a05.g1.json"]
    assert cut["recovery_ms"]["h0"] is not None and cut["recovery_ms"]["h0"] < 5000, cut
    h0, h1 = hosts["per_host"]
    # stale_holder: an h0 agent stopped before its edit, cut off with h0, continued after the
    # heal: its edit with the old token is a stale-holder write after the heal, h0's only. (On
    # a loaded machine no h0 agent may reach an edit under a live lease within the 4 s armed:
    # then the episode says none, and the cut came without one.)
    assert "stale_holder" in cut and cut["stale_holder"] in (None, "a00", "a02", "a04"), cut
    assert h1["stale_writes_after_heal"] == 0, h1
    if cut["stale_holder"]:
        assert h0["stale_writes_after_heal"] >= 1, (cut, h0)
    assert h0["store_error"] >= 1 and h0["info"] >= 1, h0  # calls in flight when cut: outcome unknown
    assert h1["store_error"] == 0, h1  # the other host never lost the database
    # Every info settled from the store's events (none left unknown).
    info = run.report["invariants"]["info"]
    assert info and all(c["unsettled"] == 0 for c in info.values()), info
    assert sum(c["found"] + c["not_found"] for c in info.values()) >= 1  # (an info read needs no settling)
    assert (run.out / "hosts.png").exists() and "## Hosts" in (run.out / "report.md").read_text()
    assert run.report["run"]["drivers"] == {"h0": "direct", "h1": "direct"}  # named on the report's first line
    assert "6 agents on 2 hosts in 1 repo and 1 shared room, drivers h0=direct h1=direct," in (run.out / "report.md").read_text()
    # Nothing of the run's network is left.
    assert not set(hosts["network"]["netns"]) & netns_names()


def test_a_lease_mutant_on_postgresql_across_hosts_exits_1(tmp_path: Path) -> None:
    # The hosts, their agents and workload, without the faults: what must show here is the
    # mutant caught across hosts, which needs neither the partition nor the kill, nor their 14 s.
    text = SCENARIO.read_text()
    faultless = tmp_path / "two-hosts-faultless.toml"
    faultless.write_text(text[:text.index("[faults.")])
    mutant = next(m for m in MUTANTS if m.name == "shared-beside-exclusive")
    run = run_sim(mutant, tmp_path / "run", scenario=faultless, timeout_s=240, duration_s=5)
    assert run.exit == 1 and run.verdict == "invalid", run.describe()
    assert run.violations.get("lease-exclusive", 0) > 0, run.violations
    assert run.report["run"]["store_factory"] == mutant.factory
    assert not set(run.report["hosts"]["network"]["netns"]) & netns_names()
