"""The mutant matrix: a scenario run against deliberately broken stores
(``tests/mutants/``, swapped in through ``SIM_STORE_FACTORY``). Each must end ``invalid``
with exit code 1, naming the invariant its bug breaks and nothing outside the bug's scope;
lease bugs must be caught twice, by the replay of the store's events and by the black box
that sees only the clients' history. A green regression proves something only because of
this file."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pgcluster  # noqa: E402
from mutants import MUTANTS, Mutant  # noqa: E402
from mutants.matrix import STARVED_CLAIMS, Run, caught, claims, facts, matrix_duration, run_sim, starved  # noqa: E402


# The lease mutants of mutants/leases.py run on PostgreSQL too (a fresh schema of the test
# cluster; deferred-begin is its PostgreSQL twin there, mutants/leases_pg.py). The oracle's
# lease mutants and the delivery ones: rates.py --engine postgresql.
PG_LEASE = [m for m in MUTANTS if m.ci and m.factory.startswith(("mutants.leases:", "mutants.leases_pg:"))]


@pytest.mark.slow
@pytest.mark.parametrize("mutant", [m for m in MUTANTS if m.ci and not m.postgres_only], ids=lambda m: m.name)
def test_mutant_is_caught(mutant: Mutant, tmp_path: Path) -> None:
    seconds = matrix_duration(mutant.scenario) or tomllib.loads(mutant.scenario.read_text())["run"]["duration_s"]
    run = run_sim(mutant, tmp_path / "run", scenario=mutant.scenario, duration_s=seconds)
    if starved(run):  # too little work to prove anything either way: once more, twice as long
        run = run_sim(mutant, tmp_path / "again", scenario=mutant.scenario, duration_s=2 * seconds)
        assert not starved(run), f"starved twice ({claims(run)} claims): {run.describe()}"
    run = second_seed_if_missed(mutant, run, tmp_path, duration_s=seconds)
    assert_caught(mutant, run)


SECOND_SEED = 8191  # any seed but a scenario's own


def second_seed_if_missed(mutant: Mutant, run: Run, tmp_path: Path, **how: object) -> Run:
    """A race is caught by chance: the measured rates of the default run's mutants are 19/20 to
    20/20 a run (docs/simulator.md), by the replay and by the black box each (the black box needs
    two clients' claims inside the broken window, which a short run on a loaded machine may not
    make). A miss gets one more seed, so a mutant caught 19 runs in 20 fails here once in 400;
    two misses are a checker that lost it."""
    if not missed(mutant, run):
        return run
    again = run_sim(mutant, tmp_path / "second-seed", scenario=mutant.scenario, seed=SECOND_SEED, **how)  # type: ignore[arg-type]
    assert not missed(mutant, again), f"missed on two seeds:\n{run.describe()}\n{again.describe()}"
    return again


def missed(mutant: Mutant, run: Run) -> bool:
    """The bug went unseen, wholly (the run ended valid) or in part (invalid, blamed within the
    bug's scope, but an invariant that must catch it saw nothing). An error, an unknown verdict
    or blame outside the bug is no miss: :func:`assert_caught` fails it at once."""
    if run.exit == 0 and run.verdict == "valid":
        return True
    if run.exit != 1 or run.verdict != "invalid" or not set(run.violations) <= set(mutant.scope):
        return False
    return any(run.violations.get(invariant, 0) == 0 for invariant in (*mutant.replay, *mutant.blackbox))


@pytest.mark.slow
@pytest.mark.postgres_only
@pytest.mark.parametrize("mutant", PG_LEASE, ids=lambda m: m.name)
def test_lease_mutant_is_caught_on_postgresql(mutant: Mutant, pg_cluster, tmp_path: Path) -> None:
    seconds = matrix_duration(mutant.scenario, "postgresql")
    store = pgcluster.new_schema(pg_cluster)
    run = run_sim(mutant, tmp_path / "run", scenario=mutant.scenario, store=store, duration_s=seconds)
    assert run.report.get("run", {}).get("engine") == "postgresql", run.describe()
    if missed(mutant, run):  # once more, in a schema of its own (a run reads every event of its store)
        store = pgcluster.new_schema(pg_cluster)
        run = second_seed_if_missed(mutant, run, tmp_path, store=store, duration_s=seconds)
    assert_caught(mutant, run, store)


def test_every_lease_mutant_runs_on_postgresql() -> None:
    assert {m.name for m in PG_LEASE} == {"check-then-act", "deferred-begin", "early-expiry", "shared-beside-exclusive",
                                          "pg-claim-ignores-directories"}


def assert_caught(mutant: Mutant, run: Run, store: str | None = None) -> None:
    assert run.exit == 1 and run.verdict == "invalid", run.describe()
    assert "verdict: invalid" in run.stdout
    for invariant in (*mutant.replay, *mutant.blackbox):
        assert run.violations.get(invariant, 0) > 0, f"{invariant} missed {mutant.name}: {run.describe()}"
    assert set(run.violations) <= set(mutant.scope), f"blamed outside the bug: {run.violations}"
    assert caught(mutant, run)
    report = (run.out / "report.md").read_text()
    assert report.startswith(f"# {mutant.scenario.stem}: INVALID")
    head = report[:4000]
    assert any(invariant in head for invariant in mutant.replay), head
    f = facts(run.out, store)
    if mutant.blackbox:  # the black box recomputed here, from history.jsonl alone
        assert f.overlaps > 0, f
    elif "lease-windows" not in mutant.scope:
        assert f.overlaps == 0, f


def test_only_a_valid_run_with_too_little_work_counts_as_starved(tmp_path: Path) -> None:
    def run(verdict: str, exit: int, n: int) -> Run:
        report = {"operations": [{"f": "msg_recv", "count": 999}, {"f": "lease_claim", "count": n}]}
        return Run(tmp_path, exit, verdict, {}, report, "", "", 1.0)

    assert starved(run("valid", 0, STARVED_CLAIMS - 1)) and claims(run("valid", 0, 7)) == 7
    assert not starved(run("valid", 0, STARVED_CLAIMS))  # enough work: a miss is a miss
    assert not starved(run("invalid", 1, 3))  # caught, however little it did
    assert not starved(run("unknown", 2, 3))  # an aborted run is a failure, never retried


def test_a_miss_is_a_bug_unseen_in_scope_and_nothing_else(tmp_path: Path) -> None:
    """What earns a second seed: a valid run, or an invalid one that one invariant of the bug
    never saw; never an error, an unknown verdict, or blame outside the bug's scope."""
    mutant = next(m for m in MUTANTS if m.name == "early-expiry")

    def run(verdict: str, exit: int, **violations: int) -> Run:
        return Run(tmp_path, exit, verdict, {k.replace("_", "-"): v for k, v in violations.items()}, {}, "", "", 1.0)

    assert missed(mutant, run("valid", 0))
    assert missed(mutant, run("invalid", 1, lease_release_held=2, lease_exclusive=1))  # the black box saw nothing
    assert missed(mutant, run("invalid", 1, lease_windows=3))  # the replay saw nothing
    assert not missed(mutant, run("invalid", 1, lease_release_held=2, lease_exclusive=1, lease_windows=1))
    assert not missed(mutant, run("invalid", 1, lease_exclusive=1, lease_windows=1, delivery_forward=1))  # outside
    assert not missed(mutant, run("unknown", 2))
