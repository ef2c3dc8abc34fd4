"""The fitted scenario's TTL levels are values the agents asked, never made up between two: the
round trip (test_roundtrip.py) failed once on a loaded machine with a level of 3 s fitted from asks
of 2 and 5 s, the quantile interpolated across the boundary of a short run's few samples."""

from __future__ import annotations

from sim.fit.scenario_of import _levels


def test_levels_are_values_of_the_sample_at_every_mix_and_size() -> None:
    for n in (1, 2, 7, 31, 100, 333):
        for twos in range(n + 1):
            levels = _levels([2.0] * twos + [5.0] * (n - twos), 10, 1, 86_400)
            assert len(levels) == 10 and set(levels) <= {2, 5}, (n, twos, levels)
            assert list(levels) == sorted(levels)  # drawn equally often: the sample's order kept


def test_levels_keep_the_sample_s_shares_and_bounds() -> None:
    assert _levels([2.0] * 30 + [5.0] * 70, 10, 1, 86_400) == (2, 2, 2, 5, 5, 5, 5, 5, 5, 5)
    assert _levels([0.2, 0.4], 10, 1, 86_400) == (1,) * 10  # whole, in range
    assert _levels([10 ** 9], 4, 1, 86_400) == (86_400,) * 4
