"""Detection rates: run each mutant's scenario (``Mutant.scenario``: regression.toml for the
lease and delivery mutants, oracle.toml for the oracle's) against it many times and count how
often it is caught (verdict ``invalid``, exit 1, its invariants violated, nothing else).

    .venv/bin/python tests/mutants/rates.py --runs 20 [--jobs 2] [--mutant NAME ...] [--ci] [--control]
        [--engine postgresql] [--family lease-delivery] [--duration S]

Each run is a fresh ``sim run`` with its own seed (``--seed-from`` + run number), so the rates
cover many interleavings, not one, and as long as the default test run's (``matrix.MATRIX_DURATION_S``:
regression.toml's 4 s on SQLite; else the scenario's own) unless ``--duration``. ``--engine postgresql``: every run on a fresh schema of a
throwaway PostgreSQL cluster (tests/pgcluster.py) started for the rates and stopped after;
there, unless ``--mutant`` or ``--family`` say otherwise, the lease and delivery mutants (those
of regression.toml, the scenario the default test run also runs on PostgreSQL) and the control.
``--family lease-delivery`` picks those on either engine.
``--control`` adds as many runs of the shipped store, which must all be ``valid``. Prints one
line per run, then a table; ``--json FILE`` keeps every run. A miss in a run that did too little
work to show anything (``matrix.starved``: valid with fewer than 200 claims) still counts as a
miss here; the line and the table say it starved (the default test run retries such a run once,
twice as long).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mutants import MUTANTS, Mutant  # noqa: E402
from mutants.matrix import REGRESSION, STARVED_CLAIMS, caught, claims, matrix_duration, run_sim, starved  # noqa: E402


def _line(name: str, seed: int, got: dict) -> str:
    what = "caught" if got["ok"] else "MISSED" if got["mutant"] else "FALSE ALARM"
    if not got["ok"] and got["mutant"] and got["starved"]:
        what = "MISSED (starved)"
    return (f"{name:24} seed {seed:5} exit {got['exit']} {got['verdict'] or '-':8} {what} "
            f"{got['violations']} claims {got['claims']} ({got['wall_s']:.0f} s)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--mutant", action="append", help="only this one (repeatable); default: all")
    p.add_argument("--control", action="store_true", help="also run the shipped store, which must be valid")
    p.add_argument("--seed-from", type=int, default=1000)
    p.add_argument("--scenario", type=Path, help="run every store on this scenario (default: each mutant's own; "
                   "the shipped store's control runs take regression.toml unless --control-scenario)")
    p.add_argument("--control-scenario", type=Path, default=REGRESSION)
    p.add_argument("--duration", type=float, help="seconds of each run (default: the matrix's, "
                   "matrix.MATRIX_DURATION_S, else the scenario's own)")
    p.add_argument("--ci", action="store_true", help="only the mutants the default test run checks")
    p.add_argument("--json", type=Path)
    p.add_argument("--engine", choices=("sqlite", "postgresql"), default="sqlite")
    p.add_argument("--family", choices=("all", "lease-delivery"), help="which mutants: all (the default on "
                   "SQLite), or the lease and delivery mutants, regression.toml's (the default on PostgreSQL, "
                   "with --control)")
    p.add_argument("--jsonl", type=Path, help="append each run as one JSON line the moment it ends (a long "
                   "measurement stopped early keeps what it finished)")
    p.add_argument("--table", type=Path, metavar="JSONL", help="run nothing: print the Markdown table of the "
                   "runs a --jsonl file kept (docs/simulator.md's)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.table:
        print(table([json.loads(line) for line in args.table.read_text().splitlines() if line.strip()]))
        return 0
    with contextlib.ExitStack() as stack:
        if args.engine == "postgresql":
            import pgcluster

            cluster = pgcluster.start_cluster()
            stack.callback(cluster.stop)
            args.store = lambda: pgcluster.new_schema(cluster)
        else:
            args.store = lambda: None
        return _rates(args)


def select(args: argparse.Namespace) -> list[Mutant | None]:
    """The stores the rates run: the mutants asked for, then ``None`` (the shipped store, the
    control) when asked for, and always on PostgreSQL unless mutants were named one by one."""
    family = args.family or ("lease-delivery" if args.engine == "postgresql" and not args.mutant else "all")
    chosen: list[Mutant | None] = [m for m in MUTANTS if (not args.mutant or m.name in args.mutant)
                                   and (not args.ci or m.ci)
                                   and (args.engine == "postgresql" or not m.postgres_only)
                                   and (family == "all" or m.scenario.name == REGRESSION.name)]
    if args.control or (args.engine == "postgresql" and not args.mutant):
        chosen.append(None)
    return chosen


def _rates(args: argparse.Namespace) -> int:
    chosen = select(args)
    jobs = [(m, i) for i in range(args.runs) for m in chosen]  # run by run: stopped early, each has as many
    lock = threading.Lock()

    with tempfile.TemporaryDirectory(prefix="mutant-rates-") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        def one(job: tuple[Mutant | None, int]) -> dict:
            m, i = job
            name = m.name if m else "shipped store"
            scenario = args.scenario or (m.scenario if m else args.control_scenario)
            run = run_sim(m, Path(tmp) / f"{name.replace(' ', '-')}-{i}", scenario=scenario.absolute(),
                          seed=args.seed_from + i, store=args.store(),
                          duration_s=args.duration or matrix_duration(scenario, args.engine))
            got = {"mutant": m.name if m else None, "seed": args.seed_from + i, "exit": run.exit,
                   "verdict": run.verdict, "violations": run.violations, "wall_s": run.wall_s,
                   "claims": claims(run), "starved": starved(run), "engine": run.report.get("run", {}).get("engine"),
                   "ok": caught(m, run) if m else (run.verdict == "valid" and run.exit == 0)}
            print(_line(name, got["seed"], got), flush=True)
            if args.jsonl:
                with lock, args.jsonl.open("a") as fh:
                    fh.write(json.dumps(got) + "\n")
            if run.exit not in (0, 1):
                print(run.describe(), flush=True)
            return got

        results = list(pool.map(one, jobs))

    print(f"\n{'store':24} {'as expected':>11} {'rate':>6}  fewest violations of each invariant over the runs")
    for m in chosen:
        name = m.name if m else "shipped store"
        mine = [r for r in results if r["mutant"] == (m.name if m else None)]
        n = sum(r["ok"] for r in mine)
        wanted = (*m.replay, *m.blackbox) if m else ()
        fewest = {k: min(r["violations"].get(k, 0) for r in mine) for k in wanted}
        hungry = sum(r["starved"] and not r["ok"] for r in mine)
        print(f"{name:24} {n:>6}/{len(mine):<4} {n / len(mine):>6.0%}  {fewest or '-'}"
              + (f"  ({hungry} of the misses starved)" if hungry else ""))
    walls = [r["wall_s"] for r in results]
    print(f"\n{len(results)} runs, {args.jobs} at a time: wall per run {min(walls):.0f}..{max(walls):.0f} s, "
          f"mean {sum(walls) / len(walls):.0f} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0 if all(r["ok"] for r in results) else 1


def _starved(r: dict) -> bool:
    """``matrix.starved`` of a kept run (files written before runs kept it: from its fields)."""
    return r.get("starved", r["verdict"] == "valid" and r["exit"] == 0 and r["claims"] < STARVED_CLAIMS)


def table(runs: list[dict]) -> str:
    """Markdown: each store's runs, in MUTANTS order, the shipped store last."""
    def span(xs: list[int]) -> str:
        return f"{min(xs)}..{max(xs)}" if xs else "-"

    rows = ["| store | scenario | must be flagged by | ci | caught | violations of those per run (fewest..most) "
            "| lease claims per run (fewest..most); in each missed run |", "|---|---|---|---|--:|--:|---|"]
    for m in [*MUTANTS, None]:
        mine = [r for r in runs if r["mutant"] == (m.name if m else None)]
        if not mine:
            continue
        made = [r["claims"] for r in mine]
        missed = [r for r in mine if not r["ok"]]
        n = len(mine) - len(missed)
        if m is None:
            rows.append(f"| shipped store | | (valid) | | {n}/{len(mine)} valid | 0 | {span(made)} |")
            continue
        wanted = (*m.replay, *m.blackbox)
        # (none required: invalid within its scope, by any of its invariants; all of them counted)
        shown = [min(r["violations"].get(k, 0) for k in wanted) if wanted else sum(r["violations"].values())
                 for r in mine]
        miss = "; missed: " + ", ".join(str(r["claims"]) + (" (starved)" if _starved(r) else "")
                                         for r in missed) if missed else ""
        must = ", ".join(wanted) or "any in its scope"
        rows.append(f"| `{m.name}` | `{m.scenario.name}` | {must} | {'yes' if m.ci else ''} "
                    f"| {n}/{len(mine)} | {span(shown)} | {span(made)}{miss} |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
