"""``tests/mutants/rates.py --engine postgresql``: the lease and delivery mutants (regression.toml's)
and the control, each run on a fresh schema of a throwaway PostgreSQL cluster. The choice of
stores is checked alone; one mutant and the control are run for real, on PostgreSQL."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutants import MUTANTS  # noqa: E402
from mutants.matrix import REGRESSION  # noqa: E402
from mutants.rates import main, parser, select  # noqa: E402


def names(argv: list[str]) -> list[str | None]:
    return [m.name if m else None for m in select(parser().parse_args(argv))]


def test_postgresql_takes_the_lease_and_delivery_mutants_and_the_control() -> None:
    lease_and_delivery = [m.name for m in MUTANTS if m.scenario == REGRESSION]
    assert len(lease_and_delivery) >= 8 and "check-then-act" in lease_and_delivery
    assert names(["--engine", "postgresql"]) == [*lease_and_delivery, None]
    # SQLite: every mutant but those of PostgreSQL's lease functions, no control unless asked
    assert names([]) == [m.name for m in MUTANTS if not m.postgres_only]
    assert names(["--family", "lease-delivery", "--control"]) == [m for m in lease_and_delivery
                                                                     if not m.startswith("pg-")] + [None]
    assert names(["--engine", "postgresql", "--mutant", "early-expiry"]) == ["early-expiry"]


@pytest.mark.slow
@pytest.mark.postgres_only
def test_a_mutant_and_the_control_run_on_postgresql(tmp_path: Path) -> None:
    kept = tmp_path / "runs.jsonl"
    code = main(["--engine", "postgresql", "--runs", "1", "--mutant", "shared-beside-exclusive", "--control",
                 "--jsonl", str(kept)])
    runs = {r["mutant"]: r for r in map(json.loads, kept.read_text().splitlines())}
    assert set(runs) == {"shared-beside-exclusive", None}
    assert all(r["engine"] == "postgresql" for r in runs.values()), runs
    assert runs["shared-beside-exclusive"]["ok"] and runs["shared-beside-exclusive"]["verdict"] == "invalid", runs
    assert runs[None]["ok"] and runs[None]["verdict"] == "valid", runs
    assert code == 0
