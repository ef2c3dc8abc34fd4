"""``[workload.think] kind = "empirical"`` (quantiles_ms), ``[fitted]`` and ``--scale``: read
strictly (a bad value names its table and key), drawn as given, written back equal."""

from __future__ import annotations

import random
import statistics

import pytest

from sim.run.workload import think_time
from sim.scenario.scenario import ScenarioError, parse, to_toml
from sim.scenario.think import Think, draw_ms, empirical_mean

BASE = """
name = "t"
[[repos]]
name = "r"
agents = 2
[workload.mix]
room_who = 1
"""


def with_think(lines: str) -> str:
    return BASE + "[workload.think]\n" + lines + "\n"


def test_an_empirical_think_time_is_drawn_from_its_quantiles() -> None:
    s = parse(with_think('kind = "empirical"\nquantiles_ms = [1, 2, 4, 8, 1000]'))
    think = s.workload.think
    assert think.kind == "empirical" and think.quantiles_ms == (1, 2, 4, 8, 1000)
    rng = random.Random(7)
    draws = [think_time(think, rng) * 1000 for _ in range(20_000)]
    assert min(draws) >= 1 and max(draws) <= 1000
    assert 3.0 <= statistics.median(draws) <= 5.5  # the 50th percentile is 4 ms
    assert sum(d <= 8 for d in draws) / len(draws) == pytest.approx(0.75, abs=0.02)
    assert statistics.fmean(draws) == pytest.approx(think.mean_ms, rel=0.1)
    assert parse(to_toml(s)) == s


@pytest.mark.parametrize(("lines", "words"), [
    ('kind = "empirical"', "[workload.think] quantiles_ms: kind = \"empirical\" needs 2 to 101"),
    ('kind = "empirical"\nquantiles_ms = [5, 1]', "[workload.think] quantiles_ms: must ascend"),
    ('kind = "empirical"\nquantiles_ms = [1, "x"]', "[workload.think] quantiles_ms: 'x' is not a number"),
    ('kind = "empirical"\nquantiles_ms = [1, -2]', "[workload.think] quantiles_ms: must be from 0"),
    ('kind = "exponential"\nquantiles_ms = [1, 2]', "[workload.think] quantiles_ms: only for kind = \"empirical\""),
    ('kind = "lognormal"', "[workload.think] kind"),
])
def test_a_bad_think_table_names_its_key(lines: str, words: str) -> None:
    with pytest.raises(ScenarioError, match=None) as caught:
        parse(with_think(lines))
    assert words in str(caught.value)


def test_draws_interpolate_on_a_log_scale_between_quantiles() -> None:
    assert draw_ms((1.0, 100.0), 0.5) == pytest.approx(10.0)
    assert draw_ms((0.0, 10.0), 0.5) == pytest.approx(5.0)
    assert empirical_mean((5.0, 5.0)) == pytest.approx(5.0)
    assert Think().kind == "exponential"


FITTED = """
[fitted]
window_s = 60
agents = 3.5
sessions = 7
calls_per_agent_s = 0.2
think_mean_ms = 4000
think_cv = 2.5
hold_p50_s = 30
[fitted.tools]
lease_claim = 0.4
msg_unread = 0.6
[fitted.sends]
broadcast = 1.0
[fitted.fanout]
broadcast = 2.5
"""


def test_fitted_figures_are_read_and_written_back() -> None:
    s = parse(BASE + FITTED)
    assert s.fitted is not None and s.fitted.hold_p90_s is None
    assert dict(s.fitted.tools) == {"lease_claim": 0.4, "msg_unread": 0.6}
    assert parse(to_toml(s)) == s


@pytest.mark.parametrize(("change", "words"), [
    (("agents = 3.5", "agents = -1"), "[fitted] agents: must be from 0"),
    (("think_cv = 2.5", "think_cv = 2.5\nbogus = 1"), "[fitted] unknown key 'bogus'"),
    (("broadcast = 1.0", "everyone = 1.0"), "[fitted.sends] unknown key 'everyone'"),
    (("sessions = 7", ""), "[fitted] sessions: required"),
])
def test_a_bad_fitted_table_names_its_key(change: tuple[str, str], words: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse(BASE + FITTED.replace(*change, 1))
    assert words in str(caught.value)


def test_scale_multiplies_every_repo_and_is_bounded() -> None:
    s = parse(BASE.replace("agents = 2", "agents = 2\n[[repos]]\nname = \"q\"\nagents = 3"))
    assert [r.agents for r in s.with_overrides(scale=10).repos] == [20, 30]
    assert [r.agents for r in s.with_overrides(agents=10, scale=2).repos] == [8, 12]
    with pytest.raises(ScenarioError, match="--scale: must be an integer from 1 to 100, got 0"):
        s.with_overrides(scale=0)
    with pytest.raises(ScenarioError, match="--scale: repo q's agents: must be an integer from 0 to 512, got 600"):
        s.with_overrides(agents=10, scale=100)
