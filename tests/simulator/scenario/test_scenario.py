"""Scenario files: the shipped ones parse, and every kind of mistake is refused naming the
key and its table."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.cli import main
from sim.scenario.scenario import ScenarioError, load, parse, to_toml

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.toml"))

GOOD = """
name = "tiny"
[run]
duration_s = 2
[[repos]]
name = "alpha"
agents = 3
files = 4
rooms = ["team"]
tags = ["backend"]
[[repos]]
name = "beta"
agents = 1
[workload.mix]
lease_claim = 1
msg_recv = 2
[expect.p99_ms]
all = 100
"""


def refused(text: str) -> str:
    with pytest.raises(ScenarioError) as err:
        parse(text)
    return str(err.value)


def test_every_shipped_scenario_parses_and_round_trips() -> None:
    names = {p.stem for p in SCENARIOS}
    assert {"shared-room", "smoke", "lease-storm", "broadcast", "open-loop"} <= names
    for path in SCENARIOS:
        s = load(path)
        assert s.name == path.stem
        assert parse(to_toml(s), s.name) == s, path.name


def test_a_good_file_gives_defaults_for_what_it_leaves_out() -> None:
    s = parse(GOOD)
    assert s.agents == 4
    assert s.run.duration_s == 2 and s.run.driver == "direct"
    assert s.shared_rooms == ["team"] and s.tags == ["backend"]
    assert s.repos[1].files == 8 and s.repos[1].rooms == ()
    assert s.workload.weights() == {"lease_claim": 1, "msg_recv": 2}
    assert dict(s.expect.p99_ms) == {"all": 100}


@pytest.mark.parametrize(("where", "text", "words"), [
    ("top level", "foo = 1\n" + GOOD, "unknown table or key 'foo'"),
    ("run", GOOD.replace("duration_s = 2", "duration_s = 2\ndurtion_s = 3"), "[run] unknown key 'durtion_s'"),
    ("repos", GOOD.replace('name = "beta"', 'name = "beta"\nagent = 2'), "[repos.1] unknown key 'agent'"),
    ("mix", GOOD.replace("msg_recv = 2", "msg_recv = 2\nlease_clam = 1"), "[workload.mix] unknown key 'lease_clam'"),
    ("think", GOOD + "\n[workload.think]\nmean = 3\n", "[workload.think] unknown key 'mean'"),
    ("expect", GOOD + "\n[expect]\nmin_ops = 3\n", "[expect] unknown key 'min_ops'"),
])
def test_an_unknown_key_is_named_with_its_table(where: str, text: str, words: str) -> None:
    assert words in refused(text), where


@pytest.mark.parametrize(("text", "words"), [
    (GOOD.replace("duration_s = 2", 'duration_s = "ten"'), "[run] duration_s: must be an integer or a number, got string"),
    (GOOD.replace("agents = 3", "agents = true"), "[repos.0] agents: must be an integer, got boolean"),
    (GOOD.replace("agents = 3", "agents = 2.5"), "[repos.0] agents: must be an integer, got number"),
    (GOOD.replace('rooms = ["team"]', 'rooms = "team"'), "[repos.0] rooms: must be a list, got string"),
    (GOOD.replace('rooms = ["team"]', 'rooms = ["Team!"]'), "[repos.0] rooms: 'Team!' is not a valid room name"),
    (GOOD.replace("[run]", "[run]\ndriver = \"http\""), "[run] driver: must be one of direct, mcp, harness, got 'http'"),
    (GOOD + "\n[workload]\nlease_ttl_s = [2, \"x\"]\n", "[workload] lease_ttl_s: must be an integer from 0 to 86400"),
])
def test_a_wrong_type_is_named(text: str, words: str) -> None:
    assert words in refused(text)


@pytest.mark.parametrize(("text", "words"), [
    (GOOD + "\n[workload]\nhot_fraction = 1.5\n", "[workload] hot_fraction: must be from 0 to 1, got 1.5"),
    (GOOD.replace("duration_s = 2", "duration_s = 0"), "[run] duration_s: must be from 0.5 to 86400, got 0"),
    (GOOD.replace("agents = 3", "agents = -1"), "[repos.0] agents: must be an integer from 0 to 512, got -1"),
    (GOOD + "\n[workload]\nlease_ttl_s = 0\n", "[workload] lease_ttl_s: needs at least one TTL above 0"),
    (GOOD + "\n[workload]\nlease_ttl_s = -1\n", "[workload] lease_ttl_s: must be an integer from 0 to 86400, got -1"),
    (GOOD.replace("[run]", "[run]\nbusy_timeout_s = 5\nop_timeout_s = 5"), "[run] op_timeout_s: must exceed busy_timeout_s"),
    (GOOD.replace("msg_recv = 2", "msg_recv = -2"), "[workload.mix] msg_recv: must be from 0 to"),
    (GOOD.replace("lease_claim = 1\nmsg_recv = 2", "lease_claim = 0"), "[workload.mix] needs at least one positive weight"),
    (GOOD.replace("all = 100", "lease_clam = 100"), "[expect.p99_ms] unknown operation 'lease_clam'"),
])
def test_a_value_out_of_range_is_named(text: str, words: str) -> None:
    assert words in refused(text)


def test_structure_mistakes_are_named() -> None:
    assert "[[repos]] name: duplicate repo names" in refused(GOOD.replace('name = "beta"', 'name = "alpha"'))
    assert "repos: required" in refused('name = "x"\n[workload.mix]\nmsg_recv = 1\n')
    assert "not valid TOML" in refused("[run\n")
    assert "agents: the repos have no agents" in refused(GOOD.replace("agents = 3", "agents = 0").replace(
        "agents = 1", "agents = 0"))


def test_wake_levers_are_read_and_refused_off_the_direct_driver() -> None:
    text = GOOD.replace('tags = ["backend"]', 'tags = ["backend"]\nautonomy = "wake"\nwake_lever = true').replace(
        "msg_recv = 2", "msg_recv = 2\nwake_idle = 1") + "\n[workload]\nwake_retry_s = 0.5\n"
    s = parse(text)
    assert (s.repos[0].autonomy, s.repos[0].wake_lever) == ("wake", True)
    assert (s.repos[1].autonomy, s.repos[1].wake_lever) == (None, False)
    assert s.workload.wake_retry_s == 0.5 and parse(to_toml(s), s.name) == s
    assert "[repos.0] autonomy: must be one of hold, notify, wake, got 'asleep'" in refused(
        text.replace('autonomy = "wake"', 'autonomy = "asleep"'))
    assert "[repos.0] wake_lever: must be true or false, got string" in refused(
        text.replace("wake_lever = true", 'wake_lever = "yes"'))
    assert "[workload] wake_retry_s: must be from 0.01" in refused(text.replace("wake_retry_s = 0.5", "wake_retry_s = 0"))
    mcp = text.replace("[run]", '[run]\ndriver = "mcp"')
    assert "[repos] wake_lever: the mcp driver cannot give an agent the simulator's lever" in refused(mcp)
    assert "[workload.mix] wake_idle: wake ops need driver = \"direct\"" in refused(
        mcp.replace("wake_lever = true", "wake_lever = false"))
    with pytest.raises(ScenarioError, match="wake_lever: the mcp driver"):
        s.with_overrides(driver="mcp")


def test_spellings_are_read_bounded_and_kept_by_overrides() -> None:
    text = GOOD.replace('tags = ["backend"]', 'tags = ["backend"]\nspellings = 2')
    s = parse(text)
    assert (s.repos[0].spellings, s.repos[1].spellings) == (2, 1)
    assert parse(to_toml(s), s.name) == s
    assert s.with_overrides(agents=8, driver="mcp").repos[0].spellings == 2
    assert "[repos.0] spellings: must be an integer from 1 to 4, got 0" in refused(text.replace("spellings = 2",
                                                                                              "spellings = 0"))
    assert "[repos.0] spellings: must be an integer from 1 to 4, got 5" in refused(text.replace("spellings = 2",
                                                                                              "spellings = 5"))
    assert "[repos.0] spellings: must be an integer, got string '2'" in refused(text.replace("spellings = 2",
                                                                                           "spellings = '2'"))


def test_overrides_are_checked_and_spread_agents_in_proportion() -> None:
    s = parse(GOOD)
    scaled = s.with_overrides(agents=10, duration_s=7, seed=9, driver="mcp")
    assert [r.agents for r in scaled.repos] == [8, 2]
    assert scaled.agents == 10 and scaled.run.duration_s == 7 and scaled.run.seed == 9 and scaled.run.driver == "mcp"
    assert [r.agents for r in s.with_overrides(agents=1).repos] == [1, 0]
    with pytest.raises(ScenarioError, match="--duration: must be from 0.5"):
        s.with_overrides(duration_s=0)
    with pytest.raises(ScenarioError, match="--agents: must be an integer from 1 to 512"):
        s.with_overrides(agents=0)


def test_sim_run_refuses_a_bad_scenario_with_exit_code_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(GOOD.replace("files = 4", "files = 4\nfilez = 5"))
    assert main(["run", str(bad), "--out", str(tmp_path / "out")]) == 2
    out = capsys.readouterr().err
    assert "invalid scenario" in out and "[repos.0] unknown key 'filez'" in out and str(bad) in out
    assert not (tmp_path / "out").exists()
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_bind_mounts_are_read_bounded_by_the_repo_s_agents_and_refused_with_hosts() -> None:
    text = GOOD.replace('tags = ["backend"]', 'tags = ["backend"]\nbind_mounts = 2')
    s = parse(text)
    assert (s.repos[0].bind_mounts, s.repos[1].bind_mounts) == (2, 0)
    assert parse(to_toml(s), s.name) == s
    assert "[repos.0] bind_mounts: 4 is more than its 3 agents" in refused(text.replace("bind_mounts = 2",
                                                                                      "bind_mounts = 4"))
    assert "[repos.0] bind_mounts: must be an integer from 0 to 512, got -1" in refused(
        text.replace("bind_mounts = 2", "bind_mounts = -1"))
    assert "bind_mounts: not with [hosts]" in refused(text + "[hosts]\ncount = 2\n")
