"""Directory leases under real agent processes (scenarios/refactor.toml, the shipped store,
on both engines): the verdict must be valid, with the checker's own coverage rule in play,
and the store's events must show the directory work really happened: directory grants,
denials, expiries, and edits made under a directory lease. The mutants of directory leases
(tests/mutants/) are caught on this run and on oracle.toml (tests/regression/test_mutants.py)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutants import REFACTOR  # noqa: E402
from mutants.matrix import run_sim  # noqa: E402

from agents_room.store import Store  # noqa: E402
from sim.check.history import pairs, read  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_the_refactor_scenario_is_valid_for_the_shipped_store(engine: str, tmp_path: Path,
                                                              request: pytest.FixtureRequest) -> None:
    store = request.getfixturevalue("pg_url") if engine == "postgresql" else None
    run = run_sim(None, tmp_path / "run", scenario=REFACTOR, store=store)
    assert run.exit == 0 and run.verdict == "valid", run.describe()
    checked = run.report["invariants"]["invariants"]
    for invariant in ("lease-exclusive", "lease-rules", "drift-truth", "selectors", "read-answers"):
        assert checked[invariant]["checked"] > 0 and checked[invariant]["violations"] == 0, (invariant, checked)
    with Store.open(store or run.out / "store" / "room.db") as opened:
        events = opened.events(0, 10_000_000)
    directory = Counter(e.kind for e in events if e.path and e.path.endswith("/"))
    assert directory["lease_grant"] >= 3 and directory["lease_release"] + directory["lease_expire"] >= 1, directory
    ops = list(pairs(read(run.out / "history.jsonl.gz")))
    denied = [i for i, d in ops if i["f"] == "lease_claim" and i["value"]["path"].endswith("/")
              and d["type"] == "ok" and d["value"]["ok"] is False]
    assert len(denied) >= 1, len(denied)
    # edits under a directory lease: an edit whose token is a directory grant's
    dir_tokens = {e.payload["token"] for e in events if e.kind in ("lease_grant", "lease_renew") and e.path.endswith("/")}
    edits = [d for i, d in ops if i["f"] == "edit" and d["type"] == "ok"]
    assert sum(1 for d in edits if d["value"].get("token") in dir_tokens) >= 1, len(edits)
