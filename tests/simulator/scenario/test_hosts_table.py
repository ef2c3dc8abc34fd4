"""The ``[hosts]`` table and the host faults of ``[faults]``: read strictly, each mistake refused
naming its table and key, written back by ``to_toml`` to an equal scenario, and the sweep's
``hosts`` key scaling the agents with the hosts."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.bench.sweep import at_point
from sim.scenario.scenario import ScenarioError, load, parse, to_toml

ROOT = Path(__file__).resolve().parents[3]

BASE = """
name = "h"
[run]
duration_s = 10
[[repos]]
name = "alpha"
agents = 5
[workload]
lease_ttl_s = [1, 3]
[workload.mix]
lease_claim = 1
"""


def refused(text: str) -> str:
    with pytest.raises(ScenarioError) as err:
        parse(text)
    return str(err.value)


def test_hosts_read_and_written_back() -> None:
    s = parse(BASE + """
[hosts]
count = 3
agents_per_host = 2
drivers = ["direct", "mcp"]
clock_skew_s = [0, -2.5]
[faults.partition]
count = 2
hold_s = 5
host = 1
window_s = [2, 4]
stale_holder = true
[faults.pg_kill]
count = 1
[faults.pg_pause]
count = 1
""")
    assert s.hosts is not None and s.hosts.count == 3 and s.agents == 6  # 3 hosts of 2, not the repos' 5
    assert [s.hosts.driver(i, "direct") for i in range(3)] == ["direct", "mcp", "direct"]
    assert [s.hosts.skew(i) for i in range(3)] == [0, -2.5, 0]
    kinds = dict(s.faults.hosts)
    assert kinds["partition"].hold_s == 5 and kinds["partition"].host == 1 and kinds["partition"].count == 2
    assert kinds["partition"].stale_holder and not kinds["pg_kill"].stale_holder
    assert kinds["pg_pause"].hold_s == 2.0  # the default
    assert s.faults and s.faults.kinds() == ["partition", "pg_kill", "pg_pause"] and not s.faults.agent_kinds()
    assert parse(to_toml(s)) == s


def test_without_hosts_nothing_changes() -> None:
    s = parse(BASE)
    assert s.hosts is None and s.agents == 5 and not s.faults


@pytest.mark.parametrize(("extra", "words"), [
    ("[hosts]\ncount = 0\n", "[hosts] count: must be an integer from 1 to 64, got 0"),
    ("[hosts]\ncount = 2\ndrivers = [\"http2\"]\n", "[hosts] drivers: each must be one of direct, mcp, http, got 'http2'"),
    ("[hosts]\ncount = 2\nagents = 4\n", "[hosts] unknown key 'agents'"),
    ("[hosts]\nclock_skew_s = [\"x\"]\n", "[hosts] clock_skew_s: must hold numbers of seconds, got 'x'"),
    ("[faults.partition]\ncount = 1\n", "[faults.partition] needs a [hosts] table"),
    ("[hosts]\ncount = 2\n[faults.partition]\nhost = 2\n", "[faults.partition] host: 2 is not one of the 2 hosts"),
    ("[hosts]\ncount = 2\n[faults.partition]\nwindow_s = [1, 11]\n", "[faults.partition] window_s: ends at 11 s"),
    ("[hosts]\ncount = 2\n[faults.pg_kill]\nhold_s = 1\n", "[faults.pg_kill] unknown key 'hold_s'"),
    ("[hosts]\ncount = 2\n[faults.partition]\nstale_holder = 1\n",
     "[faults.partition] stale_holder: must be true or false, got integer 1"),
    ("[hosts]\ncount = 2\n[faults.kill_host]\nstale_holder = true\n", "[faults.kill_host] unknown key 'stale_holder'"),
    ("[hosts]\ncount = 2\n[faults.kill_host]\ncount = 0\n", "[faults.kill_host] count: must be an integer from 1"),
    ("[hosts]\ncount = 2\n[faults.garbage_store]\n", "[faults.garbage_store] acts on a SQLite store file"),
])
def test_mistakes_are_refused_by_name(extra: str, words: str) -> None:
    assert words in refused(BASE + extra)


def test_the_sweep_key_hosts_brings_agents_with_each_host() -> None:
    base = load(ROOT / "scenarios" / "hosts-capacity.toml")
    points = [at_point(base, "hosts", n) for n in (1, 2, 4, 8)]
    assert [(p.hosts.count, p.agents) for p in points] == [(1, 4), (2, 8), (4, 16), (8, 32)]
    with pytest.raises(ScenarioError, match="no \\[hosts\\] table"):
        at_point(parse(BASE), "hosts", 2)


def test_shipped_multi_host_scenarios_parse() -> None:
    for name, hosts, agents in (("multi-host", 3, 9), ("two-hosts", 2, 6)):
        s = load(ROOT / "scenarios" / f"{name}.toml")
        assert s.hosts is not None and (s.hosts.count, s.agents) == (hosts, agents)
        assert dict(s.faults.hosts)["partition"].host == 0
