"""``tests/mutants/rates.py --table``: the Markdown table docs/simulator.md cites, from kept runs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutants.rates import table  # noqa: E402


def run(mutant: str | None, violations: dict[str, int], claims: int, ok: bool = True) -> dict:
    return {"mutant": mutant, "seed": 1, "exit": 1 if violations else 0, "violations": violations,
            "verdict": "invalid" if violations else "valid", "claims": claims, "starved": False, "ok": ok}


def test_a_mutant_with_no_required_invariant_counts_all_of_its_violations() -> None:
    """renamed-beneath-unseen must be invalid within its scope, by any invariant: its row counts
    every violation of a run (the table raised on its empty list of required ones)."""
    rows = table([run("renamed-beneath-unseen", {"read-answers": 3, "lease-exclusive": 2}, 400),
                  run("renamed-beneath-unseen", {"read-answers": 14}, 900),
                  run("identity-blind", {"lease-exclusive": 5, "selectors": 9}, 600),
                  run(None, {}, 700)]).splitlines()
    assert "| `renamed-beneath-unseen` | `moved.toml` | any in its scope |  | 2/2 | 5..14 | 400..900 |" in rows
    assert "| `identity-blind` | `regression.toml` | lease-exclusive |  | 1/1 | 5..5 | 600..600 |" in rows
    assert rows[-1] == "| shipped store | | (valid) | | 1/1 valid | 0 | 700..700 |"
