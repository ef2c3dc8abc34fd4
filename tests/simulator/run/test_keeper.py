"""A keeper ([[repos]] keepers, sim/run/keeper.py): draws from the mix like any agent, but never
lets a lease go; the runner makes the first agents of a repository its keepers."""

from __future__ import annotations

import random

import pytest

from sim.run import keeper, workload
from sim.run.workload import Files, Held, Known, Op
from sim.scenario.scenario import ScenarioError, Workload, parse

FILES = Files(tuple(f"/r/src/mod_{i:02d}.py" for i in range(4)), hot=2, tags=("core",), rooms=("team",))
# Every entry that would end or re-take a lease, beside ones that do not.
LETTING_GO = dict(lease_claim=4, lease_release=2, refactor=2, mode_change=2, churn=1, stale_session=1,
                  renew_stale=1, release_stale=1, lease_check=1, msg_recv=1)


def test_a_keeper_renews_where_an_agent_would_let_a_lease_go() -> None:
    w = Workload(mix=tuple(LETTING_GO.items()), lease_ttl_s=(1, 2), max_held=8)
    now = 1000.0
    held = {FILES.paths[0]: Held("exclusive", 7, now + 2), FILES.paths[1]: Held("shared", 8, now + 0.5),
            "/r/src/": Held("shared", 9, now + 1)}
    known = Known(held=held, now=now)
    rng, plain = random.Random(5), random.Random(5)
    ops = [keeper.next_op(w, FILES, known, rng) for _ in range(400)]
    drawn = [workload.next_op(w, FILES, known, plain) for _ in range(400)]
    # (the same draws: an ordinary agent lets go in many of them; the keeper in none)
    assert any(op.f in ("lease_release", "churn", "stale_session") for op in drawn)
    assert any(op.f == "lease_claim" and op.args["path"] in held for op in drawn)
    assert not [op for op in ops if op.f in ("lease_release", "churn", "stale_session") or op.kind == "stale"]
    assert not [op for op in ops if op.f == "lease_claim" and op.args["path"] in held]  # a re-claim re-keys
    renewals = [op for op in ops if op.f == "lease_renew"]
    # each of the lease that runs out first
    assert renewals and all(op.kind == "keep" and op.args["path"] == FILES.paths[1] for op in renewals)
    assert {op.args["ttl_s"] for op in renewals} == {1, 2}
    # a claim of what it does not hold stays a claim; the rest of the mix is left alone
    assert {op.args["path"] for op in ops if op.f == "lease_claim"} >= {FILES.paths[2], FILES.paths[3]}
    assert {op.f for op in ops} >= {"lease_check", "msg_recv"}
    # a refactor looks at its folder, never takes it: a keeper holds files only
    assert not [op for op in ops if op.f == "lease_claim" and op.args["path"].endswith("/")]
    assert [op for op in ops if op.f == "lease_check" and op.kind == "directory"]
    assert any(op.f == "lease_claim" and op.kind == "directory" for op in drawn)


def test_a_keeper_holding_nothing_draws_as_any_agent_but_for_folders() -> None:
    w = Workload(mix=tuple(LETTING_GO.items()), lease_ttl_s=(1, 2), max_held=3)
    a, b = random.Random(3), random.Random(3)
    kept = [keeper.next_op(w, FILES, Known(), a) for _ in range(200)]
    drawn = [workload.next_op(w, FILES, Known(), b) for _ in range(200)]
    looked = [Op("lease_check", {"path": op.args["path"]}, "directory") if op.kind == "directory" else op
              for op in drawn]
    assert kept == looked and kept != drawn


SCENARIO = """
[run]
duration_s = 1
[[repos]]
name = "core"
agents = 3
files = 2
keepers = {keepers}
[[repos]]
name = "edge"
agents = 2
[workload.mix]
lease_claim = 1
"""


def test_keepers_are_read_per_repository_and_bounded() -> None:
    """(The runner makes the first ``keepers`` of a repository's agents keepers: a13 of
    moved.toml's kept, whose leases tests/regression/test_moved_run.py sees renewed under the
    old name after the move, never re-keyed.)"""
    assert [r.keepers for r in parse(SCENARIO.format(keepers=2)).repos] == [2, 0]
    with pytest.raises(ScenarioError, match="keepers"):
        parse(SCENARIO.format(keepers=-1))
