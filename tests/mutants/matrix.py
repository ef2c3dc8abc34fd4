"""One ``sim run`` of a scenario against the shipped store or a mutant, and what came of it:
shared by the regression tests and by ``rates.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import Mutant

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent
REGRESSION = ROOT / "scenarios" / "regression.toml"
REGRESSION_MCP = ROOT / "scenarios" / "regression-mcp.toml"
FACTORY_ENV = "SIM_STORE_FACTORY"
# The seconds the mutant matrix (tests/regression/test_mutants.py, and rates.py unless told
# otherwise) runs a scenario for on an engine, where that is shorter than the scenario's own: the
# matrix must show each bug, which regression.toml's agents on SQLite do in 4 s as surely as in
# its 8 (the catch rates at 4 s: docs/simulator.md, "The matrix's length"). On PostgreSQL 4 s left
# early-expiry's black box a single overlap in one run of five, so it keeps the 8; and the
# regression runs of the shipped store (tests/regression/test_lease_atomicity.py) keep the
# scenario's 8 s and their floors on both engines.
MATRIX_DURATION_S = {(REGRESSION.name, "sqlite"): 4.0}


def matrix_duration(scenario: Path, engine: str = "sqlite") -> float | None:
    """``--duration`` of the matrix's runs of ``scenario`` on ``engine`` (None: the scenario's own)."""
    return MATRIX_DURATION_S.get((scenario.name, engine))


@dataclass(frozen=True)
class Run:
    out: Path
    exit: int
    verdict: str | None
    violations: dict[str, int]  # invariant -> violations found (only those violated)
    report: dict[str, Any]
    stdout: str
    stderr: str
    wall_s: float

    def describe(self) -> str:
        """Enough to see why a run went wrong, for an assertion's message."""
        inv = self.report.get("invariants") or {}
        return (f"exit {self.exit}, verdict {self.verdict}, violations {self.violations}, "
                f"counterexample {inv.get('counterexample')!r}, unknown {inv.get('unknown_because')}, "
                f"reason {self.report.get('reason') or (self.report.get('check') or {}).get('reason')}\n"
                f"{self.stdout[-1500:]}\n{self.stderr[-1500:]}")


def sim_env(factory: str | None) -> dict[str, str]:
    """The environment of a ``sim run`` against ``factory`` (None: the shipped store)."""
    env = {k: v for k, v in os.environ.items() if k != FACTORY_ENV}
    if factory:
        env[FACTORY_ENV] = factory
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH", "")) if p)
    return env


def run_sim(mutant: Mutant | None, out: Path, *, scenario: Path = REGRESSION, seed: int | None = None,
            timeout_s: float = 300, store: str | None = None, plots: bool = False,
            duration_s: float | None = None) -> Run:
    """``sim run scenario`` into ``out`` (which must not exist), against ``mutant`` or the shipped store;
    ``store``: ``--store`` (e.g. a postgresql:// URL), else a fresh SQLite file under ``out``; ``plots``:
    draw them (off by default: drawing is seconds of each run's CPU, and only a test of the plots
    reads them); ``duration_s``: ``--duration`` (else the scenario's own)."""
    args = [sys.executable, "-m", "sim.cli", "run", str(scenario), "--out", str(out), "--no-live"]
    if not plots:
        args.append("--no-plots")
    if seed is not None:
        args += ["--seed", str(seed)]
    if duration_s is not None:
        args += ["--duration", f"{duration_s:g}"]
    if store is not None:
        args += ["--store", store]
    started = time.monotonic()
    done = subprocess.run(args, cwd=out.parent, env=sim_env(mutant.factory if mutant else None), text=True,
                          capture_output=True, timeout=timeout_s)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    invariants = (report.get("invariants") or {}).get("invariants") or {}
    return Run(out, done.returncode, report.get("verdict"),
               {k: v["violations"] for k, v in invariants.items() if v["status"] == "violated"},
               report, done.stdout, done.stderr, time.monotonic() - started)


# A run that made fewer lease claims (or wake looks, in the wake scenario) than this did too
# little work to show a bug either way (a starved machine: the scenario's seconds passed with
# the agents mostly waiting for a core).
STARVED_CLAIMS = 200


def count(run: Run, f: str) -> int:
    """The operations of ``f`` the run's report counted."""
    return next((o["count"] for o in run.report.get("operations", []) if o["f"] == f), 0)


def claims(run: Run) -> int:
    """The lease_claim operations the run's report counted."""
    return count(run, "lease_claim")


def starved(run: Run) -> bool:
    """Ended valid with too little work to have shown anything (see STARVED_CLAIMS)."""
    return run.verdict == "valid" and run.exit == 0 and claims(run) + count(run, "wake") < STARVED_CLAIMS


def caught(mutant: Mutant, run: Run) -> bool:
    """Invalid, exit 1, every invariant the mutant must break violated, and none outside its
    scope (the checker blames what broke, not something else)."""
    return (run.verdict == "invalid" and run.exit == 1
            and all(run.violations.get(name, 0) > 0 for name in (*mutant.replay, *mutant.blackbox))
            and set(run.violations) <= set(mutant.scope))


@dataclass(frozen=True)
class Facts:
    """What a run did, counted from its own files: the clients' history and the store's events
    (read afresh, not from the report), and the black box recomputed from the history alone."""

    claims: int  # lease_claim ops invoked
    grants: int  # claims answered ok=true
    denials: int  # claims answered ok=false
    events: dict[str, int]  # event kind -> count
    shared_grants: int
    exclusive_grants: int
    regrants_after_expiry: int  # grants of a path after one of its leases expired
    tokens_increasing: bool  # every grant and renewal's token above all earlier ones, store-wide
    windows: int  # the black box's holding windows
    overlaps: int  # the black box's overlapping windows (violations)
    # files claimed through two spellings of their path or more (a repository's ``spellings``),
    # from the paths the agents sent: 0 means the run never exercised one file, two paths
    files_spelled_twice: int = 0
    # claims through a bind mount of the repository ([[repos]] bind_mounts: bound/<name>, made as root)
    mounted_claims: int = 0


def facts(out: Path, store: str | None = None) -> Facts:
    """``store``: the run's ``--store`` (its events read from there), else its own SQLite file."""
    from collections import Counter

    from agents_room.store import Store
    from sim.check import blackbox
    from sim.check.history import pairs, read
    from sim.check.identity import Spellings
    from sim.run.layout import Layout, read_spellings

    history = read(out / "history.jsonl.gz")
    spellings = read_spellings(Layout(out))
    claims = [(i, d) for i, d in pairs(history) if i["f"] == "lease_claim"]
    respell = Spellings(spellings).path
    ways: dict[str, set[str]] = {}
    for i, _ in claims:
        ways.setdefault(respell(i["value"]["path"]), set()).add(i["value"]["path"])
    answered = [d["value"] for _, d in claims if d["type"] == "ok"]
    with Store.open(store or out / "store" / "room.db") as opened:
        events = opened.events(0, 10_000_000)
    kinds = Counter(e.kind for e in events)
    grants = [e for e in events if e.kind == "lease_grant"]
    tokens = [e.payload["token"] for e in events if e.kind in ("lease_grant", "lease_renew")]
    expired: set[str] = set()
    regrants = 0
    for e in events:
        if e.kind == "lease_expire":
            expired.add(e.path)  # type: ignore[arg-type]
        elif e.kind == "lease_grant" and e.path in expired:
            regrants += 1
            expired.discard(e.path)  # type: ignore[arg-type]
    box = blackbox.check(history, spellings)  # windows per file, whichever spelling named it
    return Facts(
        claims=len(claims), grants=sum(1 for v in answered if v["ok"]), denials=sum(1 for v in answered if not v["ok"]),
        events=dict(kinds), shared_grants=sum(1 for e in grants if e.payload["mode"] == "shared"),
        exclusive_grants=sum(1 for e in grants if e.payload["mode"] == "exclusive"), regrants_after_expiry=regrants,
        tokens_increasing=all(a < b for a, b in zip(tokens, tokens[1:])), windows=box.windows,
        overlaps=len(box.overlaps), files_spelled_twice=sum(1 for spelled in ways.values() if len(spelled) > 1),
        mounted_claims=sum(1 for i, _ in claims if str(i["value"]["path"]).startswith(f"{out.absolute()}/bound/")),
    )
