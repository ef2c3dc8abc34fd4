"""A folder renamed under live leases, under real agent processes (scenarios/moved.toml, the
shipped store, SQLite): the verdict must be valid, and the store's events must show the move
really met live leases: grants under the new name, and leases still under the old one after it,
the keeper's kept there by renewals (a holder's re-claim by the new name, ``renamed_from``, is
shown by tests/store/test_paths.py). The mutants of the class only it catches
(tests/mutants/spellings.py: renamed-beneath-unseen, file-target-as-stored) are measured on this
scenario by tests/mutants/rates.py; identity-blind, rename-second-row and name-unrecorded on
regression.toml, which moves src/ with edits on."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutants import MOVED  # noqa: E402
from mutants.matrix import run_sim  # noqa: E402

from agents_room.store import Store  # noqa: E402


@pytest.mark.slow
def test_the_moved_scenario_is_valid_for_the_shipped_store(tmp_path: Path) -> None:
    run = run_sim(None, tmp_path / "run", scenario=MOVED)
    assert run.exit == 0 and run.verdict == "valid", run.describe()
    checked = run.report["invariants"]["invariants"]
    for invariant in ("lease-exclusive", "lease-rules", "selectors", "read-answers"):
        assert checked[invariant]["checked"] > 0 and checked[invariant]["violations"] == 0, (invariant, checked)
    with Store.open(run.out / "store" / "room.db") as opened:
        events = opened.events(0, 10_000_000)
    grants = [e for e in events if e.kind == "lease_grant"]
    moved = [e for e in grants if "/src.moved/" in e.path]
    assert moved, "no grant under the new name: the move did not happen during the run"
    after_old = [e for e in events if e.kind.startswith("lease_") and "/src/" in e.path and e.seq > moved[0].seq]
    assert after_old, "no lease under the old name lived past the move"
    # kept's first agent (a13) is a keeper ([[repos]] keepers): its leases are renewed under the
    # old name after the move, never re-keyed by a claim of the new one (sim/run/keeper.py).
    label = {e.session_id: e.payload["label"] for e in events if e.kind == "join"}
    keepers = {sid for sid, name in label.items() if name == "a13"}
    kept = [e for e in after_old if e.kind == "lease_renew" and e.session_id in keepers]
    assert kept, "the keeper renewed nothing by the old name after the move"
    assert not [e for e in grants if e.session_id in keepers and e.payload.get("renamed_from")], "a keeper re-keyed"
